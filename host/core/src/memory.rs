//! The operator's `[memory]` policy section (seed 004; DESIGN §8e): whether
//! the agent has memory, where it lives, and the retrieval settings. Pure:
//! parsed and checked here, its paths resolved by the runtime's config.
//!
//! ```toml
//! [memory]
//! enabled = true
//! # model_dir = "target/models/all-MiniLM-L6-v2"  # relative to the policy file
//! # embedding_weights = "auto" # or "q8", "f32": the model's dense layers
//! # workspace = "."            # the core files (SOUL.md, ..., MEMORY.md)
//! # db = "<state_dir>/memory/episodes.db"
//! namespace = "default"        # where the agent's own turns are written
//! core_files = ["SOUL.md", "IDENTITY.md", "USER.md", "AGENTS.md", "MEMORY.md"]
//! core_required = ["SOUL.md"]
//! index_outcomes = ["all"]     # or e.g. ["success", "user_aborted"]
//! ```

use serde::Deserialize;

/// The section as written.
#[derive(Debug, Clone, PartialEq, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MemorySection {
    /// Memory on (default off: no sessions kept, no episodes, no memory
    /// tools).
    #[serde(default)]
    pub enabled: bool,
    /// The embedding model's directory, relative to the policy file
    /// (default: `models/all-MiniLM-L6-v2` beside the directory of the
    /// `capsaga` binary, i.e. `target/models/...` where `scripts/setup`
    /// puts it; `CAPSAGA_MODEL_DIR` overrides).
    pub model_dir: Option<String>,
    /// How the model's dense layers are held: `auto` (default: `q8` where
    /// the CPU has the fast 8-bit kernels, AVX-512 VNNI or AVX-VNNI, else
    /// `f32`), `q8` (quantised to 8 bits at load; about 2.5x faster per
    /// query with those kernels, slower without) or `f32` (as stored).
    pub embedding_weights: Option<EmbeddingWeights>,
    /// The core files' directory, relative to the policy file (default: the
    /// policy file's directory).
    pub workspace: Option<String>,
    /// The memory database, relative to the policy file (default
    /// `<state_dir>/memory/episodes.db`).
    pub db: Option<String>,
    /// The namespace of the agent's own turns and facts (default
    /// `default`).
    pub namespace: Option<String>,
    /// Core files in prompt order (default SOUL, IDENTITY, USER, AGENTS,
    /// MEMORY).
    pub core_files: Option<Vec<String>>,
    /// Core files that must exist (default `["SOUL.md"]`).
    pub core_required: Option<Vec<String>>,
    /// Trace outcomes indexed as episodes (default `["all"]`).
    pub index_outcomes: Option<Vec<String>>,
    /// Latest episodes of the sender in the prompt (default 5).
    pub recent: Option<usize>,
    /// Best matching episodes in the prompt (default 3).
    pub relevant: Option<usize>,
    /// Most facts in the prompt (default 5).
    pub facts: Option<usize>,
    /// Least fact score for the prompt (default 0.7).
    pub fact_threshold: Option<f32>,
    /// `capsaga serve` runs reflection this often, seconds (default: never).
    pub reflect_every_s: Option<u64>,
}

/// How the embedding model's dense layers are held in memory (`[memory]
/// embedding_weights`). Both give the same model's vectors: 8-bit ones
/// agree with f32 ones to a cosine of at least 0.995 on the shipped test
/// sentences, and score the same recall on the shipped retrieval set
/// (README "Performance").
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum EmbeddingWeights {
    /// `q8` where the CPU runs it fast, else `f32`.
    #[default]
    Auto,
    /// Quantised to 8 bits per weight at load (ggml's `Q8_0`).
    Q8,
    /// The stored 32-bit floats.
    F32,
}

/// The trace outcomes (seed 000 §5).
pub const OUTCOMES: [&str; 6] = [
    "success",
    "tool_hallucination",
    "policy_denied",
    "user_aborted",
    "budget_hit",
    "timeout_steps",
];

/// The checked section.
#[derive(Debug, Clone, PartialEq)]
pub struct MemoryPolicy {
    /// Memory on.
    pub enabled: bool,
    /// As written (resolved by the runtime).
    pub model_dir: Option<String>,
    /// The dense layers' weights.
    pub embedding_weights: EmbeddingWeights,
    /// As written.
    pub workspace: Option<String>,
    /// As written.
    pub db: Option<String>,
    /// The namespace.
    pub namespace: String,
    /// Core files.
    pub core_files: Vec<String>,
    /// Required core files.
    pub core_required: Vec<String>,
    /// Outcomes indexed (`None`: all).
    pub index_outcomes: Option<Vec<String>>,
    /// N.
    pub recent: usize,
    /// K.
    pub relevant: usize,
    /// M.
    pub facts: usize,
    /// Fact threshold.
    pub fact_threshold: f32,
    /// Reflection period, seconds.
    pub reflect_every_s: Option<u64>,
}

impl Default for MemoryPolicy {
    fn default() -> Self {
        MemorySection::default()
            .check()
            .unwrap_or_else(|_| unreachable!("the default section is valid"))
    }
}

/// A core file name: a plain file name (no directory, no `..`), ending in `.md`.
fn is_core_name(n: &str) -> bool {
    !n.is_empty()
        && n.len() <= 64
        && n.ends_with(".md")
        && n.chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.'))
        && !n.starts_with('.')
}

impl MemorySection {
    /// Check the section.
    ///
    /// # Errors
    /// A message naming the bad setting.
    pub fn check(&self) -> Result<MemoryPolicy, String> {
        let namespace = self.namespace.clone().unwrap_or_else(|| "default".into());
        if !crate::capability::is_ident(&namespace) {
            return Err(format!(
                "namespace `{namespace}`: [a-z0-9][a-z0-9_-]*, at most 64 characters"
            ));
        }
        let core_files = self.core_files.clone().unwrap_or_else(|| {
            [
                "SOUL.md",
                "IDENTITY.md",
                "USER.md",
                "AGENTS.md",
                "MEMORY.md",
            ]
            .map(String::from)
            .to_vec()
        });
        let core_required = self
            .core_required
            .clone()
            .unwrap_or_else(|| vec!["SOUL.md".into()]);
        for n in core_files.iter().chain(&core_required) {
            if !is_core_name(n) {
                return Err(format!(
                    "core file `{n}`: a plain `.md` file name in the workspace"
                ));
            }
        }
        if let Some(r) = core_required.iter().find(|r| !core_files.contains(r)) {
            return Err(format!(
                "core_required names `{r}`, which core_files does not list"
            ));
        }
        let index_outcomes = match &self.index_outcomes {
            None => None,
            Some(v) if v.iter().any(|o| o == "all") => None,
            Some(v) => {
                if let Some(bad) = v.iter().find(|o| !OUTCOMES.contains(&o.as_str())) {
                    return Err(format!(
                        "index_outcomes: `{bad}` is not an outcome (expected all or one of {})",
                        OUTCOMES.join(", ")
                    ));
                }
                Some(v.clone())
            }
        };
        let fact_threshold = self.fact_threshold.unwrap_or(0.7);
        if !(0.0..=1.0).contains(&fact_threshold) {
            return Err("fact_threshold must be between 0 and 1".into());
        }
        if self.reflect_every_s == Some(0) {
            return Err("reflect_every_s must be greater than zero".into());
        }
        Ok(MemoryPolicy {
            enabled: self.enabled,
            model_dir: self.model_dir.clone(),
            embedding_weights: self.embedding_weights.unwrap_or_default(),
            workspace: self.workspace.clone(),
            db: self.db.clone(),
            namespace,
            core_files,
            core_required,
            index_outcomes,
            recent: self.recent.unwrap_or(5).min(50),
            relevant: self.relevant.unwrap_or(3).min(50),
            facts: self.facts.unwrap_or(5).min(50),
            fact_threshold,
            reflect_every_s: self.reflect_every_s,
        })
    }
}

impl MemoryPolicy {
    /// Whether a trace with `outcome` is indexed as an episode.
    pub fn indexes(&self, outcome: &str) -> bool {
        self.index_outcomes
            .as_ref()
            .is_none_or(|v| v.iter().any(|o| o == outcome))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sec(t: &str) -> Result<MemoryPolicy, String> {
        toml::from_str::<MemorySection>(t)
            .map_err(|e| e.to_string())?
            .check()
    }

    #[test]
    fn defaults_and_refusals() {
        let d = sec("").unwrap();
        assert!(!d.enabled);
        assert_eq!(d.namespace, "default");
        assert!(d.indexes("policy_denied"));
        let s = sec("enabled = true\nindex_outcomes = [\"success\"]").unwrap();
        assert!(s.indexes("success") && !s.indexes("budget_hit"));
        assert_eq!(d.embedding_weights, EmbeddingWeights::Auto);
        assert_eq!(
            sec("embedding_weights = \"f32\"")
                .unwrap()
                .embedding_weights,
            EmbeddingWeights::F32
        );
        for bad in [
            "embedding_weights = \"int4\"",
            "embedding_weights = \"F32\"",
            "namespace = \"A B\"",
            "core_files = [\"../etc/passwd\"]",
            "core_files = [\"SOUL.md\"]\ncore_required = [\"USER.md\"]",
            "core_files = [\"x/y.md\"]",
            "index_outcomes = [\"sucess\"]",
            "fact_threshold = 1.5",
            "reflect_every_s = 0",
            "unknown = 1",
        ] {
            assert!(sec(bad).is_err(), "{bad}");
        }
    }
}
