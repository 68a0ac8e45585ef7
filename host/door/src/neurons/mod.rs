//! Neurons in the host (DESIGN §8): the runner loaded once, the built-in
//! `neuron_create`, the stored active versions put in the catalog at start,
//! the operator's decisions ([`operator`]) and fitness ([`fitness`]); and
//! `code_run` ([`code_run`]), the one-shot form on the same runner.
//!
//! A neuron is *source + meta* run by the one runner component
//! (`sandbox::neuron`); it reaches the model only as a tool of the
//! registry, called through the dispatch door like every tool. The agent
//! can submit (`neuron_create`); only the operator grants and activates
//! (`capsaga neurons approve`), except pure neurons when
//! `[neurons] auto_activate_pure = true`.

pub mod catalog;
pub mod code_run;
mod create;
pub mod fitness;
pub mod operator;
pub mod scratch;
mod trial;

pub use create::{AUTO_ACTIVATE, NeuronCreate};
pub use trial::ExampleResult;

use crate::config::Config;
use crate::registry::{LoadedTool, Registry};
use crate::sandbox::neuron::Runner;
use crate::sandbox::{CacheOutcome, Sandbox};
use crate::store::Store;
use capsaga_core::neuron::Status;
use capsaga_core::policy::{ApprovalRule, Autonomy, Limits, Policy, ToolPolicy};
use std::path::PathBuf;
use std::sync::Arc;

/// Largest runner component read, bytes.
const MAX_RUNNER_BYTES: u64 = 256 * 1024 * 1024;

/// What the process knows about neurons once the runner is loaded.
#[derive(Debug)]
pub struct Neurons {
    /// The compiled runner.
    pub runner: Runner,
    /// Where it was read from.
    pub runner_path: PathBuf,
    /// Time to compile or load it, milliseconds.
    pub load_ms: u64,
    /// Limits of one example run (the policy's defaults, deadline at most
    /// 5 s).
    pub example_limits: Limits,
    /// Where examples get their scratch directories.
    pub scratch_root: PathBuf,
    /// The host's state directory (`code_run`'s journal lives there).
    pub state_dir: PathBuf,
}

/// Why neurons could not be set up (the host still starts, without them).
#[derive(Debug, thiserror::Error)]
pub enum NeuronsError {
    /// The runner file could not be read.
    #[error(
        "cannot read the neuron runner {path}: {error} (build it with scripts/build-components)"
    )]
    Read {
        /// The file.
        path: PathBuf,
        /// Why.
        error: String,
    },
    /// The runner did not compile or link.
    #[error("the neuron runner {path} does not load: {error}")]
    Load {
        /// The file.
        path: PathBuf,
        /// Why.
        error: String,
    },
}

/// The runner's path under `config`: `[neurons] runner`, else
/// `<tools_dir>/../neurons/neuron_runner.wasm` (where
/// `scripts/build-components` writes it).
pub fn runner_path(config: &Config) -> PathBuf {
    match &config.policy.neurons.runner {
        Some(p) => config.resolve(p),
        None => config
            .tools_dir
            .parent()
            .unwrap_or(&config.tools_dir)
            .join("neurons")
            .join("neuron_runner.wasm"),
    }
}

/// Load the runner (through the compiled cache: `[neurons] runner_cache`,
/// else the sandbox's).
///
/// # Errors
/// [`NeuronsError`].
pub fn load_runner(config: &Config, sandbox: &Sandbox) -> Result<Neurons, NeuronsError> {
    let path = runner_path(config);
    let read_err = |error: String| NeuronsError::Read {
        path: path.clone(),
        error,
    };
    let len = std::fs::metadata(&path)
        .map_err(|e| read_err(e.to_string()))?
        .len();
    if len > MAX_RUNNER_BYTES {
        return Err(read_err(format!("{len} bytes, over {MAX_RUNNER_BYTES}")));
    }
    let bytes = std::fs::read(&path).map_err(|e| read_err(e.to_string()))?;
    let cache = config
        .policy
        .neurons
        .runner_cache
        .as_deref()
        .map(|p| config.resolve(p));
    let started = std::time::Instant::now();
    let runner = sandbox
        .prepare_runner(&bytes, cache.as_deref())
        .map_err(|e| NeuronsError::Load {
            path: path.clone(),
            error: e.to_string(),
        })?;
    let load_ms = started.elapsed().as_millis() as u64;
    if matches!(runner.loaded, CacheOutcome::Miss | CacheOutcome::Disabled) {
        tracing::info!("neuron runner compiled in {load_ms} ms");
    }
    let mut example_limits = config.policy.limits;
    example_limits.deadline_ms = example_limits.deadline_ms.min(5_000);
    Ok(Neurons {
        runner,
        runner_path: path,
        load_ms,
        example_limits,
        scratch_root: config.state_dir.join("neuron-scratch"),
        state_dir: config.state_dir.clone(),
    })
}

/// The policy section of `neuron_create`: allowed like any tool at the
/// operator's autonomy (denied at `read_only`: it has side effects), with a
/// deadline covering every example.
fn create_section(policy: &Policy, neurons: &Neurons) -> ToolPolicy {
    let mut limits = policy.limits;
    let per = neurons.example_limits.deadline_ms;
    limits.deadline_ms = per
        .saturating_mul(policy.neurons.max_examples as u64)
        .saturating_add(5_000);
    ToolPolicy {
        grants: Vec::new(),
        limits,
        approval: ApprovalRule::Auto,
        deny: false,
        irreversible: false,
        autonomy: policy.autonomy,
    }
}

/// Set neurons up at host start when `[neurons] enabled`: load the runner,
/// retire unfit active versions, put the active ones in the catalog, make
/// every other version known by identity (compensation), and offer
/// `neuron_create` unless the autonomy is `read_only`. `code_run` is
/// registered (under the operator's `[tools.code_run]` section) when the
/// policy has that section, neurons enabled or not. Problems are logged;
/// the host starts without neurons rather than not at all. `None` when
/// neurons are not enabled.
pub async fn start(
    config: &Config,
    sandbox: &Arc<Sandbox>,
    registry: &Arc<Registry>,
    store: &Arc<dyn Store>,
) -> Option<Arc<Neurons>> {
    let policy = &config.policy;
    let code_run = policy.section("code_run");
    if !policy.neurons.enabled && code_run.is_none() {
        return None;
    }
    let neurons = match load_runner(config, sandbox) {
        Ok(n) => Arc::new(n),
        Err(e) => {
            tracing::warn!("neurons and code_run disabled: {e}");
            return None;
        }
    };
    if let Some(section) = code_run {
        let tool = code_run::CodeRun {
            sandbox: sandbox.clone(),
            neurons: neurons.clone(),
            extensions: policy.neurons.code_run_extensions.clone(),
            limits: section.limits,
        };
        if let Err(e) = registry.register_builtin(sandbox, policy, Arc::new(tool)) {
            tracing::warn!("code_run not offered: {e}");
        }
    }
    if !policy.neurons.enabled {
        return None;
    }
    if let Err(e) = fitness::retire_unfit(store.as_ref(), policy).await {
        tracing::warn!("neuron fitness check failed: {e}");
    }
    match store.neurons(None).await {
        Ok(rows) => {
            for row in rows {
                if row.status == Status::Active {
                    if let Err(e) = registry.register_neuron(sandbox, policy, &neurons.runner, &row)
                    {
                        tracing::warn!("neuron `{}` not loaded: {e}", row.name);
                    }
                } else if row.runner_hash == neurons.runner.hash {
                    registry.neuron_source(&neurons.runner, &row, policy);
                }
            }
        }
        Err(e) => tracing::warn!("stored neurons not loaded: {e}"),
    }
    if policy.autonomy != Autonomy::ReadOnly {
        let tool = NeuronCreate {
            sandbox: sandbox.clone(),
            store: store.clone(),
            registry: Arc::downgrade(registry),
            neurons: neurons.clone(),
            policy: Arc::new(policy.clone()),
        };
        let section = create_section(policy, &neurons);
        if let Err(e) = registry.register_host_tool(sandbox, Arc::new(tool), section) {
            tracing::warn!("neuron_create not offered: {e}");
        }
    }
    Some(neurons)
}

/// Log `message` once per neuron version per process: a version the
/// catalog refuses (a reserved or look-alike name) is tried again at every
/// sync, and says why only the first time.
fn warn_once(identity: &str, message: &str) {
    static SEEN: std::sync::OnceLock<std::sync::Mutex<std::collections::BTreeSet<String>>> =
        std::sync::OnceLock::new();
    let seen = SEEN.get_or_init(Default::default);
    if let Ok(mut s) = seen.lock()
        && s.insert(identity.to_string())
    {
        tracing::warn!("{message}");
    }
}

/// Whether `tool` is an agent-written neuron.
pub fn is_neuron(tool: &LoadedTool) -> bool {
    matches!(tool.source, crate::registry::ToolSource::Neuron(_))
}

/// Bring the catalog in line with the stored active versions, for a
/// long-running host (`capsaga serve`, `capsaga mcp`) whose operator
/// approves or retires neurons from another process: an active version not
/// in the catalog (or a newer one of the same name) is registered, a
/// neuron no longer active is taken out. Versions of another runner (a
/// rebuilt runner) are left alone, as at start. Returns how many names
/// changed.
///
/// # Errors
/// The store's, when the neurons cannot be read (the catalog is left as
/// it was).
pub async fn sync_active(
    policy: &Policy,
    sandbox: &Sandbox,
    registry: &Registry,
    store: &dyn Store,
    neurons: &Neurons,
) -> Result<usize, crate::store::StoreError> {
    let rows = store.neurons(None).await?;
    let active: std::collections::BTreeMap<&str, &crate::store::NeuronRow> = rows
        .iter()
        .filter(|r| r.status == Status::Active)
        .map(|r| (r.name.as_str(), r))
        .collect();
    let mut changed = 0;
    for (name, row) in &active {
        // Already in the catalog at this version, or the name is another
        // tool's (refused at start, with a warning, as here once).
        if registry
            .get(name)
            .is_some_and(|t| t.hash == row.identity || !is_neuron(&t))
        {
            continue;
        }
        match registry.register_neuron(sandbox, policy, &neurons.runner, row) {
            Ok(_) => changed += 1,
            Err(e) => warn_once(&row.identity, &format!("neuron `{name}` not loaded: {e}")),
        }
    }
    for tool in registry.tools() {
        if is_neuron(&tool) && !active.contains_key(tool.meta.name.as_str()) {
            registry.deregister_neuron(&tool.meta.name);
            changed += 1;
        }
    }
    Ok(changed)
}
