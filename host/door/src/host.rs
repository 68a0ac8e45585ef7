//! [`Host`]: everything a command needs, wired once: the configuration, the
//! sandbox with its capability factors, the tool registry, the state store,
//! the guardrail and this process's owner lock. Shared by `Arc` between
//! every saga and every task of the process; calls go through the dispatch
//! door (`crate::dispatch::Dispatcher`).

use crate::config::{Config, ConfigError};
use crate::ownership::OwnerLease;
use crate::registry::{LoadError, Registry};
use crate::saga::InDoubt;
use crate::sandbox::factors::{FactorError, Factors};
use crate::sandbox::{Sandbox, SandboxConfig, SandboxError};
use crate::store::postgres::{PgOptions, PgStore};
use crate::store::sqlite::{GroupCommit, SqliteStore};
use crate::store::{Store, StoreError};
use crate::store_choice::StoreChoice;
use crate::switch::KillSwitch;
use capsaga_core::fsm::Guardrail;
use capsaga_core::retry::RetryPolicy;
use std::path::Path;
use std::sync::Arc;

/// Why the host could not start.
#[derive(Debug, thiserror::Error)]
pub enum HostError {
    /// Bad or missing `capsaga.toml`.
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// The state store is unusable.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// The engine could not start.
    #[error(transparent)]
    Sandbox(#[from] SandboxError),
    /// The tools directory could not be read.
    #[error(transparent)]
    Load(#[from] LoadError),
    /// A capability factor could not load its state from the policy
    /// (secrets, root certificates).
    #[error("{0}")]
    Factor(#[from] FactorError),
    /// The policy grants a tool capabilities it does not declare (the
    /// operator must see least privilege): refused at load, naming what the
    /// tool declares and a grant to write.
    #[error("{0}")]
    Grants(String),
    /// A reload ([`Host::reload`]) would move the state (`state_dir`, the
    /// database), which a running host cannot do: restart instead.
    #[error(
        "{path}: {what} changed from {old} to {new}; a running host keeps its state, restart it to move the state"
    )]
    StateMoved {
        /// The policy file.
        path: std::path::PathBuf,
        /// `state_dir` or the database file.
        what: &'static str,
        /// What the running host uses.
        old: String,
        /// What the new policy says.
        new: String,
    },
    /// `[memory] enabled` and the memory could not open: the embedding
    /// model is missing or damaged, or the memory database is foreign,
    /// damaged, newer, or holds another model's vectors.
    #[error("memory: {0}")]
    Memory(#[from] capsaga_memory::MemoryError),
}

/// The wired host.
pub struct Host {
    /// The configuration.
    pub config: Config,
    /// The shared engine, with the capability factors.
    pub sandbox: Arc<Sandbox>,
    /// Loaded tools.
    pub registry: Arc<Registry>,
    /// The neuron runner and settings, when `[neurons] enabled` and the
    /// runner loaded.
    pub neurons: Option<Arc<crate::neurons::Neurons>>,
    /// The state store (SQLite by default).
    pub store: Arc<dyn Store>,
    /// The agent's memory, when `[memory] enabled` (shared by the
    /// generations of a reloaded host, like the store).
    pub memory: Option<Arc<crate::memory::HostMemory>>,
    /// The guardrail (the normative table plus `fsm.toml`'s rows).
    pub guardrail: Guardrail,
    /// How failed steps are retried (retriable errors only).
    pub retry: RetryPolicy,
    /// This process's owner lock: the sagas it drives are known to be alive
    /// while it is held (see [`crate::ownership`]). Shared by the
    /// generations of a reloaded host ([`Host::reload`]), so the sagas a
    /// server drives keep one owner across a reload.
    pub owner: Arc<dyn OwnerLease>,
    /// The operator's kill switch (stored in the state store; shared by
    /// the generations of a reloaded host).
    pub switch: Arc<KillSwitch>,
    /// The sagas a live scope of this process holds now (an MCP session's,
    /// a request's, a task's, a turn's, a plan's): the door's
    /// `dispatch::scope` refuses another scope of the process while one
    /// holds a saga. Shared by the generations of a reloaded host.
    pub holds: Arc<crate::saga::Holds>,
    /// The sagas this process let go of in doubt (the store failed while a
    /// step's outcome was written), rolled back once the store answers
    /// (shared by the generations of a reloaded host).
    pub in_doubt: Arc<InDoubt>,
}

impl std::fmt::Debug for Host {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Host")
            .field("config", &self.config.path)
            .field("store", &self.store)
            .field("owner", &self.owner.id())
            .finish()
    }
}

/// Open the state store `config` names ([`Config::store`]): SQLite at
/// [`Config::db_path`] (writers waiting their turn up to `busy_timeout_ms`,
/// with `group_commit`), or the shared PostgreSQL database (batching writer
/// on unless `group_commit` is off, the configured lease).
///
/// # Errors
/// [`HostError::Store`].
pub async fn open_store(
    config: &Config,
    group_commit: GroupCommit,
) -> Result<Arc<dyn Store>, HostError> {
    Ok(match &config.store {
        StoreChoice::Sqlite(path) => Arc::new(SqliteStore::open_with(
            path,
            std::time::Duration::from_millis(config.busy_timeout_ms),
            group_commit,
        )?),
        StoreChoice::Postgres { url, lease_ms } => {
            let options = PgOptions {
                lease: std::time::Duration::from_millis(*lease_ms),
                max_batch: match group_commit {
                    GroupCommit::On => crate::store::postgres::writer::MAX_BATCH,
                    GroupCommit::Off => 1,
                },
                ..PgOptions::default()
            };
            Arc::new(PgStore::open(url, &options).await?)
        }
    })
}

/// A policy section granting a tool what it does not declare (another kind,
/// or a place outside its declared one) is a configuration error.
fn refuse_undeclared(config: &Config, registry: &Registry) -> Result<(), HostError> {
    let refused: Vec<String> = registry
        .tools()
        .iter()
        .filter_map(|t| match &t.grants {
            Err(e @ capsaga_core::grant::GrantError::Undeclared { .. }) => {
                Some(e.for_operator(&t.meta.capabilities))
            }
            _ => None,
        })
        .collect();
    if refused.is_empty() {
        Ok(())
    } else {
        Err(HostError::Grants(format!(
            "{}: {}",
            config.path.display(),
            refused.join("\n")
        )))
    }
}

/// `[approvals] client_confirm` naming a tool whose meta says high risk is
/// a configuration error (the list itself is checked at policy load:
/// `capsaga_core::confirm`).
fn refuse_client_confirm_for_high_risk(
    config: &Config,
    registry: &Registry,
) -> Result<(), HostError> {
    let listed = &config.policy.client_confirm;
    let refused: Vec<String> = registry
        .tools()
        .iter()
        .filter_map(|t| capsaga_core::confirm::refused_for_risk(listed, &t.meta.name, t.meta.risk))
        .collect();
    if refused.is_empty() {
        Ok(())
    } else {
        Err(HostError::Grants(format!(
            "{}: {}",
            config.path.display(),
            refused.join("\n")
        )))
    }
}

impl Host {
    /// Load `capsaga.toml` at `config_path`, open the state store, load the
    /// capability factors, start the engine (pooling allocator sized for the
    /// largest memory cap of the policy, compiled cache in
    /// `compiled_cache`, default `<state_dir>/compiled/`) and load the tools.
    ///
    /// # Errors
    /// [`HostError`].
    pub async fn open(config_path: &Path) -> Result<Arc<Host>, HostError> {
        let config = Config::load(config_path)?;
        Host::with_config(config).await
    }

    /// Same as [`Host::open`] with an already loaded configuration.
    ///
    /// # Errors
    /// [`HostError`].
    pub async fn with_config(config: Config) -> Result<Arc<Host>, HostError> {
        Host::with_group_commit(config, GroupCommit::On).await
    }

    /// [`Host::with_config`] with the store's group commit on or off (off:
    /// one sync per write, the baseline of `capsaga-bench --group-commit`).
    ///
    /// # Errors
    /// [`HostError`].
    pub async fn with_group_commit(
        config: Config,
        group_commit: GroupCommit,
    ) -> Result<Arc<Host>, HostError> {
        let store = open_store(&config, group_commit).await?;
        Host::with_store(config, store).await
    }

    /// [`Host::with_config`] on a store already open (`capsaga-bench --pg`
    /// opens its hosts' stores with options of its own).
    ///
    /// # Errors
    /// [`HostError`].
    pub async fn with_store(config: Config, store: Arc<dyn Store>) -> Result<Arc<Host>, HostError> {
        let owner = store.register_owner().await?;
        owner.set_policy_hash(&config.policy_sha256);
        let memory = {
            let c = config.clone();
            tokio::task::spawn_blocking(move || crate::memory::open(&c))
                .await
                .map_err(|e| capsaga_memory::MemoryError::Embed(e.to_string()))??
        };
        let switch = KillSwitch::new(store.clone());
        let shared = Shared {
            owner,
            memory,
            switch,
            holds: Arc::default(),
            in_doubt: Arc::new(InDoubt::default()),
        };
        Host::assemble(config, store, shared).await
    }

    /// A new generation of this host from its policy file as it is now
    /// (`capsaga serve` and `capsaga mcp` on SIGHUP, or when the policy, its
    /// `fsm.toml` or the tools directory changed): the policy, guardrail,
    /// capability factors (secrets, certificates), engine, tools and
    /// neurons are loaded again; the state store and the owner lock are this
    /// host's, so every saga keeps its log and its owner. Built-in tools an
    /// embedder registered on this host ([`Registry::register_builtin`]) are
    /// registered on the new one too, under the new policy; the host's own
    /// (`code_run`, `neuron_create`) follow the new policy.
    ///
    /// Calls already running finish on this generation (they hold it); the
    /// caller decides when later calls use the new one. No recovery runs
    /// (this process still owns its sagas); the store is written only by
    /// the neuron fitness check, as at start (`[neurons] retire_below`). On
    /// any error this host is untouched and keeps serving.
    ///
    /// # Errors
    /// [`HostError`]; [`HostError::StateMoved`] when the new policy names
    /// another `state_dir` or database.
    pub async fn reload(&self) -> Result<Arc<Host>, HostError> {
        let config = Config::load(&self.config.path)?;
        for (what, old, new) in [
            (
                "state_dir",
                self.config.state_dir.display().to_string(),
                config.state_dir.display().to_string(),
            ),
            (
                "the state store",
                self.config.store.shown(),
                config.store.shown(),
            ),
        ] {
            if old != new || (what == "the state store" && self.config.store != config.store) {
                return Err(HostError::StateMoved {
                    path: config.path.clone(),
                    what,
                    old,
                    new,
                });
            }
        }
        // The memory (its model and database) is kept, like the store; a
        // changed `[memory]` section takes effect at the next start.
        let shared = Shared {
            owner: self.owner.clone(),
            memory: self.memory.clone(),
            switch: self.switch.clone(),
            holds: self.holds.clone(),
            in_doubt: self.in_doubt.clone(),
        };
        let next = Host::assemble(config, self.store.clone(), shared).await?;
        self.owner.set_policy_hash(&next.config.policy_sha256);
        for t in self.registry.tools() {
            if let crate::registry::ToolSource::Builtin(b) = &t.source
                && t.own_policy.is_none()
                && t.meta.name != crate::neurons::code_run::NAME
                && t.meta.name != crate::memory::tools::FETCH
                && t.meta.name != crate::memory::tools::PROPOSE
                && next.registry.get(&t.meta.name).is_none()
                && let Err(e) =
                    next.registry
                        .register_builtin(&next.sandbox, &next.config.policy, b.clone())
            {
                tracing::warn!(
                    "reload: built-in `{}` not registered again: {e}",
                    t.meta.name
                );
            }
        }
        Ok(next)
    }

    /// Everything but the store and what the generations share
    /// ([`Shared`]), from `config`.
    async fn assemble(
        config: Config,
        store: Arc<dyn Store>,
        shared: Shared,
    ) -> Result<Arc<Host>, HostError> {
        let Shared {
            owner,
            memory,
            switch,
            holds,
            in_doubt,
        } = shared;
        let mut sandbox = Sandbox::with_config(&SandboxConfig {
            max_memory_bytes: config.policy.max_memory_bytes(),
            compiled_cache: Some(config.compiled_cache.clone()),
            meta_compiler: config.meta_compiler,
            ..SandboxConfig::default()
        })?;
        let base = config
            .path
            .parent()
            .filter(|p| !p.as_os_str().is_empty())
            .unwrap_or(Path::new("."));
        sandbox.set_factors(Arc::new(Factors::load(&config.policy, base)?));
        let registry = Registry::load(
            &sandbox,
            &config.tools_dir,
            &config.state_dir.join("components"),
            &config.policy,
        )
        .await?;
        refuse_undeclared(&config, &registry)?;
        refuse_client_confirm_for_high_risk(&config, &registry)?;
        let guardrail = config.guardrail.clone();
        let sandbox = Arc::new(sandbox);
        let registry = Arc::new(registry);
        let neurons = crate::neurons::start(&config, &sandbox, &registry, &store).await;
        if let Some(m) = &memory {
            crate::memory::tools::register(m, &store, &registry, &sandbox, &config.policy);
        }
        // After the built-ins: a policy section for one of them is not an
        // issue.
        for issue in registry.open_issues() {
            if issue.unlisted {
                tracing::info!("{}: {}", issue.source, issue.error);
            } else {
                tracing::warn!("{}: {}", issue.source, issue.error);
            }
        }
        Ok(Arc::new(Host {
            config,
            sandbox,
            registry,
            neurons,
            store,
            memory,
            guardrail,
            retry: RetryPolicy::DEFAULT,
            owner,
            switch,
            holds,
            in_doubt,
        }))
    }
}

/// What the generations of a reloaded host share besides the store: the
/// owner lock, the memory, the kill switch, the sagas held, the sagas left
/// in doubt.
struct Shared {
    owner: Arc<dyn OwnerLease>,
    memory: Option<Arc<crate::memory::HostMemory>>,
    switch: Arc<KillSwitch>,
    holds: Arc<crate::saga::Holds>,
    in_doubt: Arc<InDoubt>,
}
