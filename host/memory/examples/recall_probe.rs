//! Dev probe: recall@5 of one retrieval set against a persistent memory
//! (imported once; a rerun of the import adds nothing), with each missed
//! question explained: its top five and the sender's statements near the
//! evidence.
//!
//! usage: recall_probe MODEL_DIR SETS_DIR SET DB [KIND]
//!
//! The ranking's parameters may be overridden for a trial: `SAME`,
//! `CHANGE`, `SHARED`, `POOL`, `LAMBDA`, `BM25` ([`capsaga_memory::rank::Params`]);
//! `QUIET` prints the recall and BM25's only. Build it in release
//! (`cargo build --release -p capsaga-memory --example recall_probe`).

use capsaga_memory::eval::RetrievalSet;
use capsaga_memory::{Embedder, Memory, MemoryConfig, MiniLm, embed, score};
use std::path::PathBuf;
use std::sync::Arc;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let a: Vec<String> = std::env::args().collect();
    let model = Arc::new(MiniLm::load(&PathBuf::from(&a[1]))?);
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
    if let Some(v) = env("SHARED") {
        cfg.rank.change_shared_word = v as f32;
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
