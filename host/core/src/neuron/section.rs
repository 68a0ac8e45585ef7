//! The `[neurons]` section of `capsaga.toml`.
//!
//! ```toml
//! [neurons]
//! enabled = true                     # offer `neuron_create` (not at read_only)
//! max_grants = ["fs:read:~/data/**"] # the most any neuron may request
//! auto_activate_pure = false         # activate, without a human, neurons
//!                                    # requesting nothing whose examples pass
//! runner = "../target/neurons/neuron_runner.wasm"
//! runner_cache = "../target/neuron-runner-cache"   # compiled runner (default: the state dir's)
//! retire_below = { success_rate = 0.5, min_calls = 20 }
//! max_source_bytes = 65536
//! max_examples = 16
//! catalog_tokens = 4000              # the neurons' share of the model's catalog
//! code_run_extensions = ["csv", "json"]  # output files `code_run` may keep
//! ```

use crate::capability::{Capability, CapabilityError, FsDir, Place};
use serde::Deserialize;

/// `cap` with a `~` directory replaced by `home` (as the policy does for
/// every grant).
fn expand(cap: Capability, home: &str) -> Result<Capability, CapabilityError> {
    match cap {
        Capability::Fs {
            access,
            dir: Place::Concrete(d @ FsDir::Home(_)),
        } => Ok(Capability::Fs {
            access,
            dir: Place::Concrete(FsDir::Absolute(d.expand(home)?)),
        }),
        other => Ok(other),
    }
}

/// `retire_below`: an active neuron with at least `min_calls` logged calls
/// and a success rate (0.0-1.0) below `success_rate` is retired.
#[derive(Debug, Clone, Copy, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RetireBelow {
    /// Fraction of calls that succeeded, 0.0 to 1.0.
    pub success_rate: f64,
    /// Calls needed before the rate is judged.
    pub min_calls: u64,
}

/// The section as written.
#[derive(Debug, Clone, PartialEq, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NeuronsFile {
    /// Offer `neuron_create` and load active neurons (default false).
    #[serde(default)]
    pub enabled: bool,
    /// Capability strings: the ceiling of what a neuron may request
    /// (empty: only pure neurons).
    #[serde(default)]
    pub max_grants: Vec<String>,
    /// Activate pure neurons whose examples pass without a human.
    #[serde(default)]
    pub auto_activate_pure: bool,
    /// The runner component, relative to the policy file (default
    /// `<tools_dir>/../neurons/neuron_runner.wasm`).
    pub runner: Option<String>,
    /// Directory of the runner's compiled code, relative to the policy file
    /// (default: the sandbox's compiled cache under the state directory).
    pub runner_cache: Option<String>,
    /// Automatic retirement threshold.
    pub retire_below: Option<RetireBelow>,
    /// Largest source accepted, bytes (default 64 KiB).
    pub max_source_bytes: Option<usize>,
    /// Most examples per submission (default 16).
    pub max_examples: Option<usize>,
    /// Budget of the neurons' part of the model's catalog, estimated tokens
    /// (default 4000).
    pub catalog_tokens: Option<usize>,
    /// Extensions (no dot) of the output files `code_run` copies out of its
    /// scratch directory (default
    /// [`crate::neuron::code_run::DEFAULT_EXTENSIONS`]).
    pub code_run_extensions: Option<Vec<String>>,
}

/// The checked section.
#[derive(Debug, Clone, PartialEq)]
pub struct NeuronsPolicy {
    /// See [`NeuronsFile::enabled`].
    pub enabled: bool,
    /// Parsed, `~` expanded, sorted.
    pub max_grants: Vec<Capability>,
    /// See [`NeuronsFile::auto_activate_pure`].
    pub auto_activate_pure: bool,
    /// As written (resolved by the host).
    pub runner: Option<String>,
    /// As written (resolved by the host).
    pub runner_cache: Option<String>,
    /// See [`RetireBelow`].
    pub retire_below: Option<RetireBelow>,
    /// Bytes.
    pub max_source_bytes: usize,
    /// Count.
    pub max_examples: usize,
    /// Estimated tokens.
    pub catalog_tokens: usize,
    /// Lowercase, no dot, sorted.
    pub code_run_extensions: Vec<String>,
}

/// Default of [`NeuronsPolicy::max_source_bytes`].
pub const DEFAULT_MAX_SOURCE_BYTES: usize = 64 * 1024;
/// Default of [`NeuronsPolicy::max_examples`].
pub const DEFAULT_MAX_EXAMPLES: usize = 16;
/// Default of [`NeuronsPolicy::catalog_tokens`].
pub const DEFAULT_CATALOG_TOKENS: usize = 4_000;

impl NeuronsFile {
    /// Check the section, expanding `~` in `max_grants` to `home`.
    ///
    /// # Errors
    /// A message naming the problem: a ceiling that does not parse, a bad
    /// threshold or size.
    pub fn check(&self, home: &str) -> Result<NeuronsPolicy, String> {
        let mut max_grants = Vec::new();
        for g in &self.max_grants {
            let cap = Capability::parse(g)
                .and_then(|c| expand(c, home))
                .map_err(|e| format!("max_grants: {e}"))?;
            max_grants.push(cap);
        }
        max_grants.sort();
        max_grants.dedup();
        if let Some(r) = &self.retire_below
            && !(0.0..=1.0).contains(&r.success_rate)
        {
            return Err("retire_below.success_rate must be between 0 and 1".into());
        }
        let max_source_bytes = self.max_source_bytes.unwrap_or(DEFAULT_MAX_SOURCE_BYTES);
        let max_examples = self.max_examples.unwrap_or(DEFAULT_MAX_EXAMPLES);
        if max_source_bytes == 0 || max_examples == 0 {
            return Err("max_source_bytes and max_examples must be greater than zero".into());
        }
        let mut code_run_extensions: Vec<String> = match &self.code_run_extensions {
            Some(list) => list
                .iter()
                .map(|e| e.trim_start_matches('.').to_ascii_lowercase())
                .collect(),
            None => super::code_run::DEFAULT_EXTENSIONS
                .iter()
                .map(|e| e.to_string())
                .collect(),
        };
        if let Some(bad) = code_run_extensions
            .iter()
            .find(|e| e.is_empty() || e.len() > 16 || !e.bytes().all(|b| b.is_ascii_alphanumeric()))
        {
            return Err(format!(
                "code_run_extensions: {bad:?} is not a file extension (letters and digits)"
            ));
        }
        code_run_extensions.sort();
        code_run_extensions.dedup();
        Ok(NeuronsPolicy {
            enabled: self.enabled,
            max_grants,
            auto_activate_pure: self.auto_activate_pure,
            runner: self.runner.clone(),
            runner_cache: self.runner_cache.clone(),
            retire_below: self.retire_below,
            max_source_bytes,
            max_examples,
            catalog_tokens: self.catalog_tokens.unwrap_or(DEFAULT_CATALOG_TOKENS),
            code_run_extensions,
        })
    }
}
