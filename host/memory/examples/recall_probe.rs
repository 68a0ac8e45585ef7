//! Dev probe: recall@5 of one retrieval set against a persistent memory
//! (imported once; a rerun of the import adds nothing), with each missed
//! question explained: its top five and the sender's statements near the
//! evidence.
//!
//! usage: recall_probe MODEL_DIR SETS_DIR SET DB [KIND]

use capsaga_memory::eval::RetrievalSet;
use capsaga_memory::{Embedder, Memory, MemoryConfig, MiniLm, embed, score};
use std::path::PathBuf;
use std::sync::Arc;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let a: Vec<String> = std::env::args().collect();
    let model = Arc::new(MiniLm::load(&PathBuf::from(&a[1]))?);
    if a[2] == "search" {
        return search(model, &PathBuf::from(&a[3]));
    }
    if a[2] == "big" {
        return big(model, a[3].parse()?, &PathBuf::from(&a[4]));
    }
    let set = RetrievalSet::load(&PathBuf::from(&a[2]), &a[3])?;
    let db = PathBuf::from(&a[4]);
    let kind = a.get(5).cloned();
    let ws = db.with_extension("ws");
    std::fs::create_dir_all(&ws)?;
    let mut cfg = MemoryConfig::new(db, ws);
    let env = |k: &str| std::env::var(k).ok().and_then(|v| v.parse::<f64>().ok());
    if let Some(v) = env("SAME") {
        cfg.rank.same_subject = v as f32;
    }
    if let Some(v) = env("CHANGE") {
        cfg.rank.change_subject = v as f32;
    }
    if let Some(v) = env("POOL") {
        cfg.rank.later_pool = v as usize;
    }
    if let Some(v) = env("LAMBDA") {
        cfg.rank.mmr_lambda = v;
    }
    if let Some(v) = env("BM25") {
        cfg.rank.w_bm25 = v;
    }
    eprintln!("{:?}", cfg.rank);
    let m = Memory::open(cfg, model.clone())?;
    let t = std::time::Instant::now();
    let r = set.index(&m, "default")?;
    eprintln!(
        "import: {} added in {:.1}s",
        r.added,
        t.elapsed().as_secs_f64()
    );
    let ev = set.recall_at(&m, "default", 5)?;
    println!("overall {:.3}", ev.overall.recall);
    for (k, r) in &ev.kinds {
        println!("  {k:<14} {:.3} ({}/{})", r.recall, r.hits, r.questions);
    }
    let b = set.bm25_sessions(5)?;
    println!("BM25 overall {:.3}", b.overall.recall);
    for (k, r) in &b.kinds {
        println!(
            "  BM25 {k:<14} {:.3} ({}/{})",
            r.recall, r.hits, r.questions
        );
    }
    if std::env::var("QUIET").is_ok() {
        return Ok(());
    }
    for (id, k, _) in &ev.missed {
        if kind.as_ref().is_some_and(|x| x != k) {
            continue;
        }
        let q = set.questions.iter().find(|q| &q.id == id).ok_or("q")?;
        let now: jiff::Timestamp = q.asked_at.parse()?;
        let qv = model.embed_one(&q.question)?;
        println!(
            "\n== {id} {k}: {} -> {} {:?}",
            q.question, q.answer, q.evidence
        );
        let mut all = Vec::new();
        m.store().each_episode("default", Some(&q.sender), |e| {
            all.push(e);
            Ok(())
        })?;
        let ids: Vec<&str> = all.iter().map(|e| e.episode_id.as_str()).collect();
        let vecs: std::collections::HashMap<String, Vec<f32>> = m
            .store()
            .vectors_by_id(&ids)?
            .into_iter()
            .map(|(i, b)| (i.clone(), embed::from_blob(&i, &b, 384).unwrap()))
            .collect();
        let ev_ep = all
            .iter()
            .find(|e| {
                q.evidence.contains(&e.session_id)
                    && (e.user_message.contains(&q.answer)
                        || q.answer.split("; ").any(|p| e.user_message.contains(p)))
            })
            .or_else(|| all.iter().find(|e| q.evidence.contains(&e.session_id)));
        let got = m.search_episodes("default", Some(&q.sender), &q.question, 0, 5, now)?;
        for e in &got {
            let c = score::dot(&qv, &vecs[&e.episode_id]);
            let ce = ev_ep.map_or(0.0, |x| {
                score::dot(&vecs[&x.episode_id], &vecs[&e.episode_id])
            });
            println!(
                "  top {} {} q{c:.3} ev{ce:.3} {}",
                e.session_id,
                &e.started_at[..10],
                e.user_message
            );
        }
        if let Some(x) = ev_ep {
            let xv = &vecs[&x.episode_id];
            let mut near: Vec<_> = all
                .iter()
                .map(|e| (score::dot(xv, &vecs[&e.episode_id]), e))
                .filter(|(c, _)| *c > 0.3)
                .collect();
            near.sort_by(|a, b| b.0.total_cmp(&a.0));
            for (c, e) in near.iter().take(6) {
                let cq = score::dot(&qv, &vecs[&e.episode_id]);
                println!(
                    "  near{} {} {} ev{c:.3} q{cq:.3} {}",
                    if q.evidence.contains(&e.session_id) {
                        "*"
                    } else {
                        " "
                    },
                    e.session_id,
                    &e.started_at[..10],
                    e.user_message
                );
            }
        }
    }
    Ok(())
}

/// Import `n` generated exchanges (as `capsaga-bench --import-exchanges`),
/// printing the rate of each tenth.
fn big(
    model: Arc<MiniLm>,
    n: usize,
    dir: &std::path::Path,
) -> Result<(), Box<dyn std::error::Error>> {
    use serde_json::json;
    use std::io::Write;
    std::fs::create_dir_all(dir)?;
    let path = dir.join("big.jsonl");
    let mut w = std::io::BufWriter::new(std::fs::File::create(&path)?);
    let (mut i, mut s) = (0, 0);
    while i < n {
        let turns: Vec<serde_json::Value> = (0..6.min(n - i))
            .flat_map(|k| {
                let x = i + k;
                [
                    json!({"role": "user", "content": format!("Question {x}: how do I plan meal {} for day {} with {} friends?", x % 97, x % 31, x % 7)}),
                    json!({"role": "assistant", "content": format!("For meal {} keep it simple: one main dish, a side and fruit; shop on day {}.", x % 97, x % 29)}),
                ]
            })
            .collect();
        i += turns.len() / 2;
        let line = json!({
            "sender": format!("user-{}", s % 50),
            "session_id": format!("big-{s}"),
            "started_at": format!("2025-{:02}-{:02}T10:00:00Z", 1 + (s / 28) % 12, 1 + s % 28),
            "turns": turns,
        });
        writeln!(w, "{line}")?;
        s += 1;
    }
    w.flush()?;
    drop(w);
    let ws = dir.join("ws");
    std::fs::create_dir_all(&ws)?;
    let m = Memory::open(MemoryConfig::new(dir.join("episodes.db"), ws), model)?;
    let f = std::fs::File::open(&path)?;
    let t = std::time::Instant::now();
    let mut last = (0u64, 0.0f64);
    let r = m.import(&mut std::io::BufReader::new(f), "default", &mut |p| {
        let el = t.elapsed().as_secs_f64();
        if p.exchanges >= last.0 + (n as u64 / 20).max(1) {
            eprintln!(
                "{} exchanges, {:.0}/s over the last {}",
                p.exchanges,
                (p.exchanges - last.0) as f64 / (el - last.1),
                p.exchanges - last.0
            );
            last = (p.exchanges, el);
        }
    })?;
    let secs = t.elapsed().as_secs_f64();
    println!(
        "{} exchanges in {secs:.1} s = {:.1}/s",
        r.exchanges,
        r.exchanges as f64 / secs
    );
    Ok(())
}

/// Retrieval over 100k episodes of 100 senders (random unit vectors, texts
/// from a small vocabulary), as `capsaga-bench --memory`: p50 / p95 of
/// `search_episodes_vec` (k = 3, n = 5), with the ranking as configured and
/// with the later-value rule and its extra candidates off, interleaved.
fn search(model: Arc<MiniLm>, dir: &std::path::Path) -> Result<(), Box<dyn std::error::Error>> {
    let mut seed = 0x9E37_79B9_7F4A_7C15_u64;
    let mut next = move || {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed
    };
    let vocab: Vec<String> = (0..3000).map(|i| format!("w{}x{}", i % 97, i)).collect();
    std::fs::create_dir_all(dir)?;
    let ws = dir.join("ws");
    std::fs::create_dir_all(&ws)?;
    let cfg = MemoryConfig::new(dir.join("episodes.db"), ws);
    let m = Memory::open(cfg.clone(), model.clone())?;
    let (n_ep, senders) = (100_000usize, 100usize);
    let (count, _, _, _) = m.store().counts()?;
    if count < n_ep as u64 {
        let mut batch = Vec::new();
        for i in 0..n_ep {
            let v: Vec<f32> = embed::normalise(
                (0..384)
                    .map(|_| (next() % 2001) as f32 / 1000.0 - 1.0)
                    .collect(),
            );
            let words = |k: usize, next: &mut dyn FnMut() -> u64| {
                (0..k)
                    .map(|_| vocab[(next() % 3000) as usize].as_str())
                    .collect::<Vec<_>>()
                    .join(" ")
            };
            let um = words(6 + (next() % 20) as usize, &mut next);
            let fr = words(8, &mut next);
            batch.push((
                capsaga_memory::Episode {
                    episode_id: format!("e-bench-{i}"),
                    trace_id: format!("t-bench-{i}"),
                    session_id: format!("s-{}-{}", i % senders, i / senders / 8),
                    sender: format!("user-{}", i % senders),
                    namespace: "default".into(),
                    started_at: format!(
                        "2025-{:02}-{:02}T{:02}:{:02}:00Z",
                        1 + (i / 10_000) % 12,
                        1 + (i / 400) % 28,
                        (i / 60) % 24,
                        i % 60
                    ),
                    seq: (1 + (i / senders) % 8) as u64,
                    user_message: um,
                    final_response: Some(fr),
                    outcome: "success".into(),
                    summary: None,
                    importance: 0.5,
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
    drop(m);
    let mut off = cfg.clone();
    off.rank.same_subject = 2.0;
    off.rank.change_subject = 2.0;
    let on = Memory::open(cfg, model.clone())?;
    let off = Memory::open(off, model.clone())?;
    let now = jiff::Timestamp::now();
    let qv = model.embed_one("when is my dentist appointment")?;
    let (mut a, mut b) = (Vec::new(), Vec::new());
    for i in 0..300 {
        let sender = format!("user-{}", i % senders);
        let q = format!(
            "when is my dentist appointment {}",
            vocab[(next() % 3000) as usize]
        );
        for (mm, out) in [(&on, &mut a), (&off, &mut b)] {
            let t = std::time::Instant::now();
            mm.search_episodes_vec("default", Some(&sender), &q, Some(&qv), 5, 3, now)?;
            out.push(t.elapsed().as_secs_f64() * 1000.0);
        }
    }
    let pct = |v: &mut Vec<f64>, p: f64| {
        v.sort_by(f64::total_cmp);
        v[((v.len() as f64 - 1.0) * p).round() as usize]
    };
    println!(
        "ranking as configured p50 {:.2} ms p95 {:.2} ms; later-value rule off p50 {:.2} ms p95 {:.2} ms",
        pct(&mut a, 0.5),
        pct(&mut a, 0.95),
        pct(&mut b, 0.5),
        pct(&mut b, 0.95)
    );
    Ok(())
}
