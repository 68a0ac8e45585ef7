//! Dev probe: the time of one episode search over a persistent memory of
//! 100k synthetic episodes (100 senders, vectors random, texts from a Zipf
//! vocabulary: the shape of `capsaga-bench --memory`'s), filled once, for
//! `perf record`. No model: the query vectors are random.
//!
//! usage: search_probe DB [QUERIES]
//! Build it in release
//! (`cargo build --release -p capsaga-memory --example search_probe`).

use capsaga_memory::{Embedder, Episode, Memory, MemoryConfig, embed};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Instant;

struct Fake;
impl Embedder for Fake {
    fn model_id(&self) -> &str {
        "all-MiniLM-L6-v2"
    }
    fn dim(&self) -> usize {
        384
    }
    fn embed(&self, texts: &[&str]) -> capsaga_memory::Result<Vec<Vec<f32>>> {
        Ok(texts
            .iter()
            .map(|t| {
                let mut r = Rng(t.len() as u64 * 7919 + 1);
                embed::normalise((0..384).map(|_| r.unit()).collect())
            })
            .collect())
    }
}

struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
    fn unit(&mut self) -> f32 {
        (self.next() >> 40) as f32 / (1u64 << 24) as f32 - 0.5
    }
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let a: Vec<String> = std::env::args().collect();
    let db = PathBuf::from(&a[1]);
    let queries: usize = a.get(2).and_then(|s| s.parse().ok()).unwrap_or(300);
    let fresh = !db.exists();
    let ws = db.with_extension("ws");
    std::fs::create_dir_all(&ws)?;
    let m = Memory::open(MemoryConfig::new(db, ws), Arc::new(Fake))?;
    let vocab: Vec<String> = (0..20_000usize)
        .map(|mut i| {
            let mut w = String::new();
            loop {
                w.push((b'a' + (i % 26) as u8) as char);
                i /= 26;
                if i == 0 {
                    break;
                }
            }
            format!("{w}x")
        })
        .collect();
    let mut acc = 0.0;
    let cum: Vec<f64> = (1..=20_000)
        .map(|r| {
            acc += 1.0 / (r as f64).powf(1.1);
            acc
        })
        .collect();
    let sentence = |r: &mut Rng, n: usize| {
        (0..n)
            .map(|_| {
                let x = (r.next() >> 11) as f64 / (1u64 << 53) as f64 * acc;
                vocab[cum.partition_point(|&c| c < x).min(19_999)].as_str()
            })
            .collect::<Vec<_>>()
            .join(" ")
    };
    let mut r = Rng(0x9E37_79B9_7F4A_7C15);
    if fresh {
        let mut batch = Vec::new();
        for i in 0..100_000usize {
            let n = 6 + r.below(20);
            let v = embed::normalise((0..384).map(|_| r.unit()).collect());
            batch.push((
                Episode {
                    episode_id: format!("e-bench-{i}"),
                    trace_id: format!("t-bench-{i}"),
                    session_id: format!("s-{}-{}", i % 100, i / 100 / 8),
                    sender: format!("user-{}", i % 100),
                    namespace: "default".into(),
                    started_at: format!(
                        "2025-{:02}-{:02}T{:02}:{:02}:00Z",
                        1 + (i / 10_000) % 12,
                        1 + (i / 400) % 28,
                        (i / 60) % 24,
                        i % 60
                    ),
                    seq: (1 + (i / 100) % 8) as u64,
                    user_message: sentence(&mut r, n),
                    final_response: Some(sentence(&mut r, 8)),
                    outcome: "success".into(),
                    summary: None,
                    importance: r.below(100) as f64 / 100.0,
                    reflected: false,
                    archived: false,
                },
                Some(embed::to_blob(&v)),
            ));
            if batch.len() == 10_000 {
                m.store().insert_episodes(&batch, "2026-01-01T00:00:00Z")?;
                batch.clear();
            }
        }
    }
    let base = [
        "what is the codename of my project?",
        "when is my dentist appointment",
        "which city did my sister move to",
    ];
    let now = jiff::Timestamp::now();
    let mut times = Vec::new();
    for i in 0..queries {
        let q = format!("{} {}", base[i % 3], sentence(&mut r, 2));
        let qv = embed::normalise((0..384).map(|_| r.unit()).collect());
        let t = Instant::now();
        m.search_episodes_vec(
            "default",
            Some(&format!("user-{}", i % 100)),
            &q,
            Some(&qv),
            5,
            3,
            now,
        )?;
        times.push(t.elapsed().as_secs_f64() * 1000.0);
    }
    times.sort_by(f64::total_cmp);
    let p = |x: f64| times[((times.len() - 1) as f64 * x).round() as usize];
    println!("search p50 {:.2} ms p95 {:.2} ms", p(0.5), p(0.95));
    Ok(())
}
