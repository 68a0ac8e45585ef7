//! [`Host`]: everything a command needs, wired once: the configuration, the
//! sandbox, the tool registry, the state database and the guardrail.

use crate::config::{Config, ConfigError};
use crate::db::{Db, DbError};
use crate::registry::{LoadError, Registry};
use crate::saga::owner::OwnerLock;
use crate::sandbox::net::{Outbound, OutboundError};
use crate::sandbox::{Sandbox, SandboxConfig, SandboxError};
use capsaga_core::fsm::Guardrail;
use capsaga_core::retry::RetryPolicy;
use std::path::Path;

/// Why the host could not start.
#[derive(Debug, thiserror::Error)]
pub enum HostError {
    /// Bad or missing `capsaga.toml`.
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// The state database is unusable.
    #[error(transparent)]
    Db(#[from] DbError),
    /// The engine could not start.
    #[error(transparent)]
    Sandbox(#[from] SandboxError),
    /// The tools directory could not be read.
    #[error(transparent)]
    Load(#[from] LoadError),
    /// The outgoing-HTTP settings (secrets, root certificates) could not be
    /// loaded.
    #[error("{0}")]
    Outbound(#[from] OutboundError),
    /// The owner lock under the state directory could not be taken.
    #[error("cannot take the owner lock in {dir}: {error}")]
    Owner {
        /// The directory.
        dir: std::path::PathBuf,
        /// The OS error.
        error: String,
    },
}

/// The wired host.
pub struct Host {
    /// The configuration.
    pub config: Config,
    /// The shared engine.
    pub sandbox: Sandbox,
    /// Loaded tools.
    pub registry: Registry,
    /// The state database.
    pub db: Db,
    /// The guardrail (the normative table plus `fsm.toml`'s rows).
    pub guardrail: Guardrail,
    /// How failed steps are retried (retriable errors only).
    pub retry: RetryPolicy,
    /// This process's owner lock: the sagas it drives are known to be alive
    /// while it is held (see [`crate::saga::owner`]).
    pub owner: OwnerLock,
}

impl Host {
    /// Load `capsaga.toml` at `config_path`, open the state database, start the
    /// engine (pooling allocator sized for the largest memory cap of the
    /// policy, compiled cache in `<state_dir>/compiled/`) and load the tools.
    ///
    /// # Errors
    /// [`HostError`].
    pub async fn open(config_path: &Path) -> Result<Host, HostError> {
        let config = Config::load(config_path)?;
        Host::with_config(config).await
    }

    /// Same as [`Host::open`] with an already loaded configuration.
    ///
    /// # Errors
    /// [`HostError`].
    pub async fn with_config(config: Config) -> Result<Host, HostError> {
        let db = Db::open(&config.db_path())?;
        let owner = OwnerLock::acquire(&config.state_dir).map_err(|e| HostError::Owner {
            dir: config.state_dir.clone(),
            error: e.to_string(),
        })?;
        let mut sandbox = Sandbox::with_config(&SandboxConfig {
            max_memory_bytes: config.policy.max_memory_bytes(),
            compiled_cache: Some(config.state_dir.join("compiled")),
            ..SandboxConfig::default()
        })?;
        let base = config
            .path
            .parent()
            .filter(|p| !p.as_os_str().is_empty())
            .unwrap_or(Path::new("."));
        sandbox.set_outbound(std::sync::Arc::new(Outbound::from_policy(
            &config.policy,
            base,
        )?));
        let registry = Registry::load(
            &sandbox,
            &config.tools_dir,
            &config.state_dir.join("components"),
            &config.policy,
        )
        .await?;
        for issue in &registry.issues {
            if issue.unlisted {
                tracing::info!("{}: {}", issue.source, issue.error);
            } else {
                tracing::warn!("{}: {}", issue.source, issue.error);
            }
        }
        let guardrail = config.guardrail.clone();
        Ok(Host {
            config,
            sandbox,
            registry,
            db,
            guardrail,
            retry: RetryPolicy::DEFAULT,
            owner,
        })
    }
}
