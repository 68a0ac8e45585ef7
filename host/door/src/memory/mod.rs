//! The agent's memory in the runtime (seed 004; DESIGN §8e): the
//! `capsaga-memory` crate (episodes, facts, core files, the embedder)
//! opened from the policy's `[memory]` section, and what the runtime adds:
//!
//! - [`tools`]: the built-ins `memory_fetch` and `memory_propose`, behind
//!   `mem:<namespace>[:read|:write]` grants (the `mem` factor), called
//!   through the dispatch door like any tool; a proposal is a saga step
//!   whose compensation withdraws it;
//! - working memory across the turns of a session (seed 000 §3) is the
//!   agent loop's (`capsaga_agent::remember`);
//!
//! Reflection (each cluster of episodes distilled by the model into a
//! proposal for the operator) is `capsaga_agent::reflect`: it needs a model
//! provider, and this module depends on nothing of the agent.
//!
//! Memory is the host's: the agent reads it through `memory_fetch` and
//! writes only proposals, which enter semantic memory when the operator
//! approves them (`capsaga memory approve`, `POST /v1/memory/approve`).

pub mod tools;

use crate::config::Config;
use capsaga_core::memory::EmbeddingWeights;
use capsaga_memory::core_files::CoreFiles;
use capsaga_memory::embed::Precision;
use capsaga_memory::{Memory, MemoryConfig, MemoryError, MiniLm};
use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

pub use capsaga_memory;

/// The memory of a host, with the senders of the sagas running now (so a
/// memory tool called in an agent turn sees that sender's episodes only).
pub struct HostMemory {
    /// The memory.
    pub memory: Memory,
    senders: Mutex<HashMap<String, String>>,
}

impl std::fmt::Debug for HostMemory {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.memory.fmt(f)
    }
}

impl HostMemory {
    /// The sender a running saga acts for, if an agent turn registered it.
    pub fn sender_of(&self, saga_id: &str) -> Option<String> {
        self.senders.lock().ok()?.get(saga_id).cloned()
    }

    /// Record that `saga_id` acts for `sender` until [`HostMemory::end_saga`].
    pub fn begin_saga(&self, saga_id: &str, sender: &str) {
        if let Ok(mut m) = self.senders.lock() {
            m.insert(saga_id.to_string(), sender.to_string());
        }
    }

    /// Forget the saga's sender.
    pub fn end_saga(&self, saga_id: &str) {
        if let Ok(mut m) = self.senders.lock() {
            m.remove(saga_id);
        }
    }
}

/// The model directory: `CAPSAGA_MODEL_DIR`, else `[memory] model_dir`
/// (relative to the policy file), else `models/all-MiniLM-L6-v2` beside the
/// directory of the running binary (`target/debug/capsaga` →
/// `target/models/...`, where `scripts/setup` puts it).
pub fn model_dir(config: &Config) -> PathBuf {
    if let Some(d) = std::env::var_os("CAPSAGA_MODEL_DIR") {
        return PathBuf::from(d);
    }
    if let Some(d) = &config.policy.memory.model_dir {
        return config.resolve(d);
    }
    let exe = std::env::current_exe().unwrap_or_default();
    // target/debug/capsaga, or target/debug/deps/<test> for test binaries.
    exe.ancestors()
        .skip(1)
        .take(3)
        .map(|d| d.join("models/all-MiniLM-L6-v2"))
        .find(|d| d.join("model.safetensors").exists())
        .unwrap_or_else(|| {
            exe.parent()
                .and_then(|p| p.parent())
                .unwrap_or(std::path::Path::new("."))
                .join("models/all-MiniLM-L6-v2")
        })
}

/// The memory's settings from the policy.
pub fn memory_config(config: &Config) -> MemoryConfig {
    let m = &config.policy.memory;
    let db =
        m.db.as_deref()
            .map(|d| config.resolve(d))
            .unwrap_or_else(|| config.state_dir.join("memory/episodes.db"));
    let workspace = m
        .workspace
        .as_deref()
        .map(|d| config.resolve(d))
        .unwrap_or_else(|| config.base.clone());
    let mut c = MemoryConfig::new(db, workspace.clone());
    c.core = CoreFiles {
        dir: workspace,
        files: m.core_files.clone(),
        required: m.core_required.clone(),
    };
    c.namespace = m.namespace.clone();
    c.recent_n = m.recent;
    c.relevant_k = m.relevant;
    c.fact_top_m = m.facts;
    c.fact_threshold = m.fact_threshold;
    c
}

/// Open the memory when `[memory] enabled`: load the model (blocking, about
/// a second) and open the database. `Ok(None)` when memory is off.
///
/// # Errors
/// [`MemoryError`]: a missing or damaged model, a foreign, damaged or newer
/// database, another model's vectors.
pub fn open(config: &Config) -> Result<Option<Arc<HostMemory>>, MemoryError> {
    if !config.policy.memory.enabled {
        return Ok(None);
    }
    let precision = match config.policy.memory.embedding_weights {
        EmbeddingWeights::Auto => Precision::auto(),
        EmbeddingWeights::Q8 => Precision::Q8,
        EmbeddingWeights::F32 => Precision::F32,
    };
    let dir = model_dir(config);
    let embedder = Arc::new(MiniLm::load_with(&dir, precision)?);
    tracing::info!(
        "memory: embedding model {} loaded, {} dense weights ([memory] embedding_weights = {})",
        dir.display(),
        match embedder.precision() {
            Precision::Q8 => "8-bit",
            Precision::F32 => "f32",
        },
        format!("{:?}", config.policy.memory.embedding_weights).to_lowercase()
    );
    let memory = Memory::open(memory_config(config), embedder)?;
    Ok(Some(Arc::new(HostMemory {
        memory,
        senders: Mutex::new(HashMap::new()),
    })))
}
