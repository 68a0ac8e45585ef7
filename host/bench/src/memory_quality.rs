//! `capsaga-bench --memory`, quality and import (issue 49): each shipped
//! retrieval set ([`SETS`]: `tuned`, the one the ranking's weights were
//! chosen on, `holdout`, never tuned on, and `validation`, on which changes
//! to the ranking are checked before the hold-out is run) imported into a fresh memory with the
//! real import (the time is the import's throughput on real texts), then
//! recall@5 of the evidence sessions per kind of question, the memory's
//! ranking beside BM25 over whole sessions in the same run, and the mean
//! number of distinct sessions in the top five. Optionally an import of
//! `N` generated exchanges, timed.

use capsaga_memory::eval::{Evaluation, KINDS, RetrievalSet};
use capsaga_memory::{Memory, MemoryConfig, MiniLm};
use serde_json::{Value, json};
use std::io::Write;
use std::path::Path;
use std::sync::Arc;
use std::time::Instant;

/// The shipped retrieval sets, in the order they are reported.
pub(super) const SETS: [&str; 3] = ["tuned", "holdout", "validation"];

fn fresh(model: &Arc<MiniLm>) -> Result<(tempfile::TempDir, Memory), String> {
    let dir = tempfile::tempdir().map_err(|e| e.to_string())?;
    let ws = dir.path().join("ws");
    std::fs::create_dir_all(&ws).map_err(|e| e.to_string())?;
    let m = Memory::open(
        MemoryConfig::new(dir.path().join("episodes.db"), ws),
        model.clone(),
    )
    .map_err(|e| e.to_string())?;
    Ok((dir, m))
}

fn evaluation(e: &Evaluation) -> Value {
    json!({
        "overall": e.overall.recall,
        "questions": e.overall.questions,
        "kinds": e.kinds.iter().map(|(k, r)| (k.clone(), json!(r.recall))).collect::<serde_json::Map<_, _>>(),
        "distinct_sessions_in_top5": e.distinct_sessions,
        "missed": e.missed.iter().map(|m| m.0.clone()).collect::<Vec<_>>(),
    })
}

/// One set: imported (timed), then the memory's recall@5 and BM25's.
pub(super) fn set(model: &Arc<MiniLm>, dir: &Path, name: &str) -> Result<Value, String> {
    let set = RetrievalSet::load(dir, name).map_err(|e| e.to_string())?;
    let (_d, m) = fresh(model)?;
    let (t, cpu) = (Instant::now(), super::cpu_s());
    let report = set.index(&m, "default").map_err(|e| e.to_string())?;
    let import_s = t.elapsed().as_secs_f64();
    let cpu_ms = cpu_ms_each(cpu, report.exchanges);
    let t = Instant::now();
    let ours = set.recall_at(&m, "default", 5).map_err(|e| e.to_string())?;
    let search_ms = t.elapsed().as_secs_f64() * 1000.0 / set.questions.len().max(1) as f64;
    let bm25 = set.bm25_sessions(5).map_err(|e| e.to_string())?;
    Ok(json!({
        "exchanges": report.exchanges,
        "import_s": import_s,
        "import_per_s": report.exchanges as f64 / import_s.max(1e-9),
        "import_cpu_ms_per_exchange": cpu_ms,
        "search_with_embedding_ms_mean": search_ms,
        "memory": evaluation(&ours),
        "bm25_sessions": evaluation(&bm25),
    }))
}

/// Import `n` generated exchanges (sessions of six exchanges, 50 senders,
/// a year of dates) from a JSON Lines file, timed.
pub(super) fn big_import(model: &Arc<MiniLm>, n: usize) -> Result<Value, String> {
    let (d, m) = fresh(model)?;
    let path = d.path().join("big.jsonl");
    {
        let mut w =
            std::io::BufWriter::new(std::fs::File::create(&path).map_err(|e| e.to_string())?);
        let mut i = 0;
        let mut s = 0;
        while i < n {
            let turns: Vec<Value> = (0..6.min(n - i))
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
            writeln!(w, "{line}").map_err(|e| e.to_string())?;
            s += 1;
        }
        w.flush().map_err(|e| e.to_string())?;
    }
    let f = std::fs::File::open(&path).map_err(|e| e.to_string())?;
    let (t, cpu, load) = (Instant::now(), super::cpu_s(), super::load_average());
    let r = m
        .import(&mut std::io::BufReader::new(f), "default", &mut |_| {})
        .map_err(|e| e.to_string())?;
    let secs = t.elapsed().as_secs_f64();
    let cpu_ms = cpu_ms_each(cpu, r.exchanges);
    Ok(json!({
        "exchanges": r.exchanges,
        "added": r.added,
        "seconds": secs,
        "per_s": r.exchanges as f64 / secs.max(1e-9),
        "cpu_ms_per_exchange": cpu_ms,
        "workers": m.config().import_workers,
        "load_average_1m": {"before": load, "after": super::load_average()},
        "goal_100k_s": 600.0,
    }))
}

/// CPU milliseconds per exchange since `before` (`None` where CPU time is
/// not read).
fn cpu_ms_each(before: Option<f64>, exchanges: u64) -> Option<f64> {
    Some((super::cpu_s()? - before?) * 1000.0 / exchanges.max(1) as f64)
}

/// The quality lines of the report.
pub(super) fn print(r: &Value) {
    let f = |v: Option<&Value>| v.and_then(Value::as_f64).unwrap_or(f64::NAN);
    outln!(
        "  recall@5 (evidence sessions)  {:>9} {:>9} {:>9} {:>9} {:>9} {:>9} {:>8} {:>9}",
        "single",
        "paraphr.",
        "distract.",
        "updated",
        "temporal",
        "multi",
        "overall",
        "distinct"
    );
    for name in SETS {
        if r.pointer(&format!("/retrieval_sets/{name}")).is_none() {
            continue;
        }
        for (who, key) in [("memory", "memory"), ("BM25 ", "bm25_sessions")] {
            let e = r.pointer(&format!("/retrieval_sets/{name}/{key}"));
            let kinds: Vec<String> = KINDS
                .iter()
                .map(|k| {
                    format!(
                        "{:>9.3}",
                        f(e.and_then(|e| e.pointer(&format!("/kinds/{k}"))))
                    )
                })
                .collect();
            outln!(
                "    {:<8} {:<6}             {} {:>8.3} {:>9.2}",
                name,
                who,
                kinds.join(" "),
                f(e.and_then(|e| e.get("overall"))),
                f(e.and_then(|e| e.get("distinct_sessions_in_top5")))
            );
        }
        let s = r.pointer(&format!("/retrieval_sets/{name}"));
        outln!(
            "    {:<8} import {:.0} exchanges in {:.1} s = {:.0}/s, {:.1} ms of CPU each (100k at this rate: {:.1} min, goal <= 10); search with embedding {:.1} ms mean",
            name,
            f(s.and_then(|s| s.get("exchanges"))),
            f(s.and_then(|s| s.get("import_s"))),
            f(s.and_then(|s| s.get("import_per_s"))),
            f(s.and_then(|s| s.get("import_cpu_ms_per_exchange"))),
            100_000.0 / f(s.and_then(|s| s.get("import_per_s"))) / 60.0,
            f(s.and_then(|s| s.get("search_with_embedding_ms_mean")))
        );
    }
    if let Some(b) = r.get("big_import").filter(|b| !b.is_null()) {
        outln!(
            "  import of {:.0} generated exchanges   {:.1} s = {:.0}/s, {:.1} ms of CPU each on {:.0} threads (load average {:.1} -> {:.1})   (goal: 100k <= 600 s)",
            f(b.get("exchanges")),
            f(b.get("seconds")),
            f(b.get("per_s")),
            f(b.get("cpu_ms_per_exchange")),
            f(b.get("workers")),
            f(b.pointer("/load_average_1m/before")),
            f(b.pointer("/load_average_1m/after"))
        );
    }
}
