//! `capsaga-bench --memory`: the memory's figures in one run (issue 27).
//!
//! - embedding one query (p50, p95) next to the model's raw forward pass
//!   measured in the same run (the ratio is the tokenizer, pooling and
//!   normalisation overhead); goal ≤ 10 ms p50 on 2 cores;
//! - retrieval over 100k episodes and 10k facts: the turn's whole bundle
//!   (query embedding, the sender's latest episodes, FTS5 matches, fact
//!   scores) and the same without the embedding; goal p95 ≤ 20 ms; and
//!   the same searches with the sender's vectors read from SQLite each
//!   time (the cache dropped before each: the baseline of the same run);
//! - indexing a trace as an episode (importance, FTS5 entry); goal ≤ 5 ms;
//!   and with its vector (embedded after the index, off the 5 ms);
//! - resident memory after loading the model and after the 100k index;
//! - recall@5 of the evidence sessions per kind of question on the shipped
//!   retrieval sets (`scripts/memory-retrieval-set.py`: `tuned`, the
//!   `holdout` never tuned on and the `validation` set changes are checked
//!   on) next to BM25 over whole sessions, and the
//!   import's throughput ([`super::memory_quality`]); goals ≥ 0.95 overall
//!   and on updated answers, 100k exchanges imported in ≤ 10 min;
//! - the model as loaded by default (`Precision::auto`: 8-bit dense layers
//!   where the CPU has candle's fast kernels for them, else f32) against
//!   the same model with its stored f32 weights, in the same run: embedding
//!   time and the least cosine between the two vectors of a query.
//!
//! Fact and episode vectors of the 100k/10k set are random unit vectors
//! (retrieval time does not depend on what they mean); episode texts are drawn from a vocabulary
//! so that FTS5's posting lists have realistic lengths.

use super::memory_quality;
use capsaga::exit;
use capsaga::render::Out;
use capsaga_memory::embed::Precision;
use capsaga_memory::{Embedder, Episode, Fact, Memory, MemoryConfig, MiniLm, embed, fact_id};
use serde_json::json;
use std::path::Path;
use std::sync::Arc;
use std::time::Instant;

/// Episodes and facts of the retrieval benchmark.
const EPISODES: usize = 100_000;
const FACTS: usize = 10_000;
const SENDERS: usize = 100;

fn pct(v: &mut [f64], p: f64) -> f64 {
    v.sort_by(f64::total_cmp);
    if v.is_empty() {
        return 0.0;
    }
    v[((v.len() - 1) as f64 * p).round() as usize]
}

fn ms(t: Instant) -> f64 {
    t.elapsed().as_secs_f64() * 1000.0
}

fn mb(b: u64) -> f64 {
    b as f64 / (1024.0 * 1024.0)
}

/// A small deterministic generator (xorshift64*).
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

/// Size of the synthetic vocabulary; words are drawn by a Zipf law
/// (exponent 1.1), as words of real text are, so that FTS5's posting lists
/// have realistic lengths (a few very common words, a long tail).
const VOCABULARY: usize = 20_000;

/// The synthetic vocabulary and its cumulative Zipf weights.
struct Words {
    words: Vec<String>,
    cumulative: Vec<f64>,
}

impl Words {
    fn new() -> Words {
        let words = (0..VOCABULARY)
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
        let cumulative = (1..=VOCABULARY)
            .map(|r| {
                acc += 1.0 / (r as f64).powf(1.1);
                acc
            })
            .collect();
        Words { words, cumulative }
    }

    fn sentence(&self, r: &mut Rng, n: usize) -> String {
        let total = self.cumulative[VOCABULARY - 1];
        (0..n)
            .map(|_| {
                let x = (r.next() >> 11) as f64 / (1u64 << 53) as f64 * total;
                let i = self
                    .cumulative
                    .partition_point(|&c| c < x)
                    .min(VOCABULARY - 1);
                self.words[i].as_str()
            })
            .collect::<Vec<_>>()
            .join(" ")
    }
}

/// Run it and print the report.
pub(crate) async fn run(
    out: &Out,
    model_dir: &Path,
    sets: &Path,
    names: &[String],
    import_n: usize,
) -> u8 {
    match tokio::task::spawn_blocking({
        let (d, s, n) = (model_dir.to_path_buf(), sets.to_path_buf(), names.to_vec());
        move || measure(&d, &s, &n, import_n)
    })
    .await
    {
        Ok(Ok(report)) => {
            if out.json {
                out.json(&report);
            } else {
                print(&report);
            }
            exit::OK
        }
        Ok(Err(e)) => {
            errln!("capsaga-bench --memory: {e}");
            exit::CONFIG
        }
        Err(e) => {
            errln!("capsaga-bench --memory: {e}");
            exit::INTERNAL
        }
    }
}

/// Embedding each query, beside the raw forward pass (after a warm-up):
/// 200 times each, milliseconds.
fn embed_and_forward(model: &MiniLm, queries: &[&str]) -> Result<(Vec<f64>, Vec<f64>), String> {
    for q in queries {
        model.embed_one(q).map_err(|e| e.to_string())?;
    }
    let (mut emb, mut fwd) = (Vec::new(), Vec::new());
    for i in 0..200 {
        let q = queries[i % queries.len()];
        let t = Instant::now();
        model.forward(&[q]).map_err(|e| e.to_string())?;
        fwd.push(ms(t));
        let t = Instant::now();
        model.embed_one(q).map_err(|e| e.to_string())?;
        emb.push(ms(t));
    }
    Ok((emb, fwd))
}

/// Fill `m` with the bench's episodes and facts (random vectors): the
/// seconds each took.
fn fill(m: &Memory, model: &MiniLm, r: &mut Rng, words: &Words) -> Result<(f64, f64), String> {
    let t = Instant::now();
    let mut batch = Vec::with_capacity(10_000);
    for i in 0..EPISODES {
        let n = 6 + r.below(20);
        let v: Vec<f32> = embed::normalise((0..model.dim()).map(|_| r.unit()).collect());
        batch.push((
            Episode {
                episode_id: format!("e-bench-{i}"),
                trace_id: format!("t-bench-{i}"),
                // Eight consecutive exchanges of a sender per session.
                session_id: format!("s-{}-{}", i % SENDERS, i / SENDERS / 8),
                sender: format!("user-{}", i % SENDERS),
                namespace: "default".into(),
                started_at: format!(
                    "2025-{:02}-{:02}T{:02}:{:02}:00Z",
                    1 + (i / 10_000) % 12,
                    1 + (i / 400) % 28,
                    (i / 60) % 24,
                    i % 60
                ),
                seq: (1 + (i / SENDERS) % 8) as u64,
                user_message: words.sentence(r, n),
                final_response: Some(words.sentence(r, 8)),
                outcome: "success".into(),
                summary: None,
                importance: r.below(100) as f64 / 100.0,
                reflected: false,
                archived: false,
            },
            Some(embed::to_blob(&v)),
        ));
        if batch.len() == 10_000 {
            m.store()
                .insert_episodes(&batch, "2026-01-01T00:00:00Z")
                .map_err(|e| e.to_string())?;
            batch.clear();
        }
    }
    let episodes_s = t.elapsed().as_secs_f64();
    let t = Instant::now();
    for i in 0..FACTS {
        let v: Vec<f32> = embed::normalise((0..model.dim()).map(|_| r.unit()).collect());
        let text = format!("bench fact {i}: {}", words.sentence(r, 8));
        let f = Fact {
            fact_id: fact_id("default", &text),
            namespace: "default".into(),
            text,
            source: "manual".into(),
            created_at: "2025-06-01T00:00:00Z".into(),
            valid_at: "2025-06-01T00:00:00.000Z".into(),
            superseded_by: None,
            importance: 0.5,
            access_count: 0,
            last_access: None,
            score: None,
        };
        m.store()
            .insert_fact(&f, &embed::to_blob(&v))
            .map_err(|e| e.to_string())?;
    }
    let facts_s = t.elapsed().as_secs_f64();
    Ok((episodes_s, facts_s))
}

/// Index 500 traces (the FTS5 entry, then with its vector): milliseconds
/// of each.
fn index_traces(m: &Memory, r: &mut Rng, words: &Words) -> Result<(Vec<f64>, Vec<f64>), String> {
    let mut idx = Vec::new();
    let mut idx_embed = Vec::new();
    for i in 0..500 {
        let n = capsaga_memory::NewEpisode {
            trace_id: format!("t-new-{i}"),
            session_id: "s-new".into(),
            sender: format!("user-{}", i % SENDERS),
            namespace: "default".into(),
            started_at: "2026-01-01T00:00:00Z".into(),
            user_message: words.sentence(r, 12),
            final_response: Some(words.sentence(r, 10)),
            outcome: "success".into(),
            summary: None,
            steps: 4,
            turn_in_session: 1 + i % 7,
        };
        let t = Instant::now();
        m.index_episode(&n).map_err(|e| e.to_string())?;
        idx.push(ms(t));
        m.embed_pending(1).map_err(|e| e.to_string())?;
        idx_embed.push(ms(t));
    }
    Ok((idx, idx_embed))
}

/// Three series of milliseconds.
type Timings = (Vec<f64>, Vec<f64>, Vec<f64>);

/// 300 retrievals: the turn's bundle (embedding its query), then the same
/// searches with the query's vector given, then those again with the
/// vectors held in memory dropped first (each search reads its sender's
/// vectors from SQLite, as before issue 49's cache: the baseline of the
/// same run): milliseconds of each.
fn retrieve(
    m: &Memory,
    model: &MiniLm,
    queries: &[&str],
    r: &mut Rng,
    words: &Words,
) -> Result<Timings, String> {
    let now = jiff::Timestamp::now();
    let (mut bundle, mut no_embed, mut cold) = (Vec::new(), Vec::new(), Vec::new());
    let qv: Vec<Vec<f32>> = queries
        .iter()
        .map(|q| model.embed_one(q))
        .collect::<Result<_, _>>()
        .map_err(|e| e.to_string())?;
    for i in 0..300 {
        let sender = format!("user-{}", i % SENDERS);
        let q = format!("{} {}", queries[i % queries.len()], words.sentence(r, 2));
        let t = Instant::now();
        m.bundle_for_turn(&sender, &q).map_err(|e| e.to_string())?;
        bundle.push(ms(t));
        // The turn's searches with the query's vector given: milliseconds.
        let searches = || -> Result<f64, String> {
            let v = &qv[i % qv.len()];
            let t = Instant::now();
            m.search_episodes_vec("default", Some(&sender), &q, Some(v), 5, 3, now)
                .map_err(|e| e.to_string())?;
            m.search_facts_vec(&["default"], v, 5, 0.7, now)
                .map_err(|e| e.to_string())?;
            Ok(ms(t))
        };
        no_embed.push(searches()?);
        m.store().drop_vector_cache().map_err(|e| e.to_string())?;
        cold.push(searches()?);
    }
    Ok((bundle, no_embed, cold))
}

fn measure(
    model_dir: &Path,
    sets: &Path,
    names: &[String],
    import_n: usize,
) -> Result<serde_json::Value, String> {
    let rss0 = super::rss().map(|r| r.0).unwrap_or(0);
    let t = Instant::now();
    let model = Arc::new(MiniLm::load(model_dir).map_err(|e| e.to_string())?);
    let load_ms = ms(t);
    let rss_model = super::rss().map(|r| r.0).unwrap_or(0);

    // Embedding one query, beside the raw forward pass.
    let queries = [
        "what is the codename of my project?",
        "when is my dentist appointment",
        "which city did my sister move to",
        "remind me of the quarterly report deadline",
        "what did I name the puppy",
    ];
    let (mut emb, mut fwd) = embed_and_forward(&model, &queries)?;
    let (emb50, emb95, fwd50) = (pct(&mut emb, 0.5), pct(&mut emb, 0.95), pct(&mut fwd, 0.5));

    // The 100k / 10k memory.
    let dir = tempfile::tempdir().map_err(|e| e.to_string())?;
    let ws = dir.path().join("ws");
    std::fs::create_dir_all(&ws).map_err(|e| e.to_string())?;
    let cfg = MemoryConfig::new(dir.path().join("episodes.db"), ws);
    let m = Memory::open(cfg.clone(), model.clone()).map_err(|e| e.to_string())?;
    let mut r = Rng(0x9E37_79B9_7F4A_7C15);
    let words = Words::new();
    let (episodes_s, facts_s) = fill(&m, &model, &mut r, &words)?;
    drop(m);
    // Reopened: the fact vectors are loaded into the index.
    let t = Instant::now();
    let m = Memory::open(cfg, model.clone()).map_err(|e| e.to_string())?;
    let reopen_ms = ms(t);
    let rss_index = super::rss().map(|r| r.0).unwrap_or(0);

    let load_before = super::load_average();
    let (mut bundle, mut no_embed, mut cold) = retrieve(&m, &model, &queries, &mut r, &words)?;
    let (b50, b95) = (pct(&mut bundle, 0.5), pct(&mut bundle, 0.95));
    let (n50, n95) = (pct(&mut no_embed, 0.5), pct(&mut no_embed, 0.95));
    let (c50, c95) = (pct(&mut cold, 0.5), pct(&mut cold, 0.95));
    let load_after = super::load_average();

    // Indexing a trace (FTS5 entry), then its vector.
    let (mut idx, mut idx_embed) = index_traces(&m, &mut r, &words)?;
    let (i50, i95) = (pct(&mut idx, 0.5), pct(&mut idx, 0.95));
    let ie50 = pct(&mut idx_embed, 0.5);
    drop(m);

    // Quality and import, then the f32 reference.
    let mut quality = serde_json::Map::new();
    for name in names {
        if !memory_quality::SETS.contains(&name.as_str()) {
            return Err(format!(
                "--memory-sets: no set `{name}` (the sets: {})",
                memory_quality::SETS.join(", ")
            ));
        }
        quality.insert(name.clone(), memory_quality::set(&model, sets, name)?);
    }
    quality.insert("goal".into(), json!(0.95));
    let big = if import_n > 0 {
        memory_quality::big_import(&model, import_n)?
    } else {
        serde_json::Value::Null
    };
    let reference = against_f32(model_dir, &model, &queries)?;

    Ok(json!({
        "model_load_ms": load_ms,
        "embed_query_ms": {"p50": emb50, "p95": emb95, "goal_p50": 10.0},
        "forward_pass_ms": {"p50": fwd50},
        "embed_over_forward": emb50 / fwd50.max(1e-9),
        "fill": {"episodes": EPISODES, "facts": FACTS, "episodes_s": episodes_s, "facts_s": facts_s, "reopen_ms": reopen_ms},
        "bundle_ms": {"p50": b50, "p95": b95},
        "retrieval_without_embedding_ms": {"p50": n50, "p95": n95, "goal_p95": 20.0},
        "retrieval_vectors_from_sqlite_ms": {"p50": c50, "p95": c95},
        "retrieval_held_over_sqlite": {"p50": n50 / c50.max(1e-9), "p95": n95 / c95.max(1e-9)},
        "load_average_1m": {"before_retrieval": load_before, "after_retrieval": load_after},
        "bundle_over_retrieval": b50 / n50.max(1e-9),
        "index_trace_ms": {"p50": i50, "p95": i95, "goal": 5.0, "with_vector_p50": ie50},
        "rss_mb": {"start": mb(rss0), "model": mb(rss_model), "with_index": mb(rss_index)},
        "retrieval_sets": quality,
        "big_import": big,
        "precision": format!("{:?}", model.precision()).to_lowercase(),
        "f32_reference": reference,
    }))
}

/// The same model with its stored f32 weights, against `model` (loaded as
/// configured by default): embedding times interleaved and the least cosine
/// between the two vectors of each query.
fn against_f32(
    model_dir: &Path,
    model: &Arc<MiniLm>,
    queries: &[&str],
) -> Result<serde_json::Value, String> {
    let exact = Arc::new(MiniLm::load_with(model_dir, Precision::F32).map_err(|e| e.to_string())?);
    let mut least = 1.0f32;
    for q in queries.iter().copied() {
        let a = model.embed_one(q).map_err(|e| e.to_string())?;
        let b = exact.embed_one(q).map_err(|e| e.to_string())?;
        least = least.min(capsaga_memory::score::cosine(&a, &b));
    }
    let (mut ours, mut theirs) = (Vec::new(), Vec::new());
    for i in 0..200 {
        let q = queries[i % queries.len()];
        let t = Instant::now();
        exact.embed_one(q).map_err(|e| e.to_string())?;
        theirs.push(ms(t));
        let t = Instant::now();
        model.embed_one(q).map_err(|e| e.to_string())?;
        ours.push(ms(t));
    }
    let (o50, e50) = (pct(&mut ours, 0.5), pct(&mut theirs, 0.5));
    Ok(json!({
        "embed_query_ms_p50": e50,
        "default_embed_query_ms_p50": o50,
        "default_over_f32": o50 / e50.max(1e-9),
        "least_cosine": least,
    }))
}

fn print(r: &serde_json::Value) {
    let f = |p: &str| r.pointer(p).and_then(|v| v.as_f64()).unwrap_or(f64::NAN);
    outln!(
        "memory benchmark (all-MiniLM-L6-v2 on the CPU, {} dense weights; SQLite FTS5)",
        r.pointer("/precision")
            .and_then(|v| v.as_str())
            .unwrap_or("?")
    );
    outln!(
        "  model load                     {:>8.1} ms",
        f("/model_load_ms")
    );
    outln!(
        "  embed one query                p50 {:.2} ms  p95 {:.2} ms   (goal p50 <= 10 ms)",
        f("/embed_query_ms/p50"),
        f("/embed_query_ms/p95")
    );
    outln!(
        "  raw forward pass               p50 {:.2} ms   embed / forward = {:.2}x",
        f("/forward_pass_ms/p50"),
        f("/embed_over_forward")
    );
    outln!(
        "  fill: {} episodes in {:.1} s, {} facts in {:.1} s, reopen {:.0} ms",
        EPISODES,
        f("/fill/episodes_s"),
        FACTS,
        f("/fill/facts_s"),
        f("/fill/reopen_ms")
    );
    outln!(
        "  retrieval, no embedding        p50 {:.2} ms  p95 {:.2} ms   (goal p95 <= 20 ms)",
        f("/retrieval_without_embedding_ms/p50"),
        f("/retrieval_without_embedding_ms/p95")
    );
    outln!(
        "  the same, vectors from SQLite  p50 {:.2} ms  p95 {:.2} ms   held / from SQLite = {:.2}x p50, {:.2}x p95 (load average {:.1} -> {:.1})",
        f("/retrieval_vectors_from_sqlite_ms/p50"),
        f("/retrieval_vectors_from_sqlite_ms/p95"),
        f("/retrieval_held_over_sqlite/p50"),
        f("/retrieval_held_over_sqlite/p95"),
        f("/load_average_1m/before_retrieval"),
        f("/load_average_1m/after_retrieval")
    );
    outln!(
        "  turn bundle (with embedding)   p50 {:.2} ms  p95 {:.2} ms   bundle / retrieval = {:.2}x",
        f("/bundle_ms/p50"),
        f("/bundle_ms/p95"),
        f("/bundle_over_retrieval")
    );
    outln!(
        "  index a trace                  p50 {:.2} ms  p95 {:.2} ms   (goal <= 5 ms); with its vector p50 {:.2} ms",
        f("/index_trace_ms/p50"),
        f("/index_trace_ms/p95"),
        f("/index_trace_ms/with_vector_p50")
    );
    outln!(
        "  RSS                            start {:.0} MB, model loaded {:.0} MB, 100k/10k memory open {:.0} MB",
        f("/rss_mb/start"),
        f("/rss_mb/model"),
        f("/rss_mb/with_index")
    );
    memory_quality::print(r);
    outln!(
        "  f32 weights, same run          embed p50 {:.2} ms; default / f32 = {:.2}x; least cosine {:.4}",
        f("/f32_reference/embed_query_ms_p50"),
        f("/f32_reference/default_over_f32"),
        f("/f32_reference/least_cosine")
    );
}
