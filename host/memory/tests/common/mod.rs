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

/// all-MiniLM-L6-v2 from `target/models/` (scripts/setup installs it;
/// `CAPSAGA_MODEL_DIR` overrides).
pub fn model() -> Arc<dyn Embedder> {
    static M: OnceLock<Arc<MiniLm>> = OnceLock::new();
    M.get_or_init(|| {
        let dir = std::env::var_os("CAPSAGA_MODEL_DIR")
            .map(PathBuf::from)
            .unwrap_or_else(|| MiniLm::default_dir(&root()));
        Arc::new(MiniLm::load(&dir).unwrap_or_else(|e| panic!("{e}")))
    })
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
