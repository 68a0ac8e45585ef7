//! The memory over a real SQLite file and the real model: episodes,
//! retrieval, facts, proposals, forget, retention, reflection's grouping,
//! core files; and bad input from the attacker's side (hostile FTS syntax,
//! corrupt or foreign databases, another model's vectors, injections in
//! proposals and memory files).

#[path = "../common/mod.rs"]
mod common;

mod episodes;
mod facts;
mod recall;
mod refused;

use capsaga_memory::{Embedder, Memory, MemoryConfig, MemoryError, NewEpisode, Result, memory_md};
use jiff::Timestamp;
use std::sync::Arc;

fn ep(trace: &str, session: &str, sender: &str, msg: &str, answer: &str, at: &str) -> NewEpisode {
    NewEpisode {
        trace_id: trace.into(),
        session_id: session.into(),
        sender: sender.into(),
        namespace: "default".into(),
        started_at: at.into(),
        user_message: msg.into(),
        final_response: Some(answer.into()),
        outcome: "success".into(),
        summary: None,
        steps: 3,
        turn_in_session: 1,
    }
}

/// A temporary directory holding `workspace/` with SOUL.md and a MEMORY.md
/// of one bullet (the operator's time zone).
fn workspace_with_one_memory_md_fact() -> (tempfile::TempDir, std::path::PathBuf) {
    let d = tempfile::tempdir().unwrap();
    let ws = d.path().join("workspace");
    std::fs::create_dir_all(&ws).unwrap();
    std::fs::write(ws.join("SOUL.md"), "x").unwrap();
    std::fs::write(
        ws.join("MEMORY.md"),
        "core\n## Preferences\n- The operator's timezone is Europe/Rome.\n",
    )
    .unwrap();
    (d, ws)
}

/// The model, counting the texts it is asked to embed.
struct Counting(Arc<dyn Embedder>, std::sync::atomic::AtomicUsize);

impl Embedder for Counting {
    fn model_id(&self) -> &str {
        self.0.model_id()
    }
    fn dim(&self) -> usize {
        self.0.dim()
    }
    fn embed(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>> {
        self.1
            .fetch_add(texts.len(), std::sync::atomic::Ordering::SeqCst);
        self.0.embed(texts)
    }
}
