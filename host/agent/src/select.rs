//! Choosing the model provider of a turn from the operator's configuration,
//! the environment and the request (seed 003, "Simulación y modo real").
//!
//! - `--script FILE` (or `CAPSAGA_SIMULATION=true` with a script configured)
//!   selects the scripted provider: no network, no key, no cost.
//! - Otherwise every `[providers.*]` section whose key is present in the
//!   environment (or that is `keyless`, or scripted) is *configured*, and a
//!   [`Router`] fails over between them in the attempt order.
//! - When no provider is configured, the scripted provider is the embedded
//!   default, with `[agent] script`; without a script that is an error that
//!   says what is missing.
//!
//! The choice is reported ([`Selected::mode`]) in the trace and on the CLI.
//! Environment: `CAPSAGA_SIMULATION`, `CAPSAGA_PROVIDER_ORDER`,
//! `CAPSAGA_PROVIDER_ORDER_<ROLE>`, `CAPSAGA_ALLOWED_PROVIDERS` (narrows the
//! file's allowlist), and the `api_key_env` variable of each provider.

use super::anthropic::AnthropicProvider;
use super::http::{self, ApiKey};
use super::openai::OpenAiProvider;
use super::provider::Provider;
use super::router::{RequestRoute, Router};
use super::scripted::{ScriptError, ScriptedProvider};
use capsaga_core::providers::{ANTHROPIC_VERSION, ProviderKind, parse_list};
use capsaga_door::config::Config;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// The environment as the selection sees it (a snapshot, so tests can pass
/// their own).
pub type Env = BTreeMap<String, String>;

/// The process environment.
pub fn process_env() -> Env {
    std::env::vars().collect()
}

/// What the request asks for.
#[derive(Debug, Clone, Default)]
pub struct Selection {
    /// A script file: the scripted provider, whatever is configured.
    pub script: Option<PathBuf>,
    /// The request's routing wishes.
    pub route: RequestRoute,
    /// The sealed keys of the providers naming `api_key_sealed`, opened,
    /// or why not (filled by `super::keys::with_sealed`; a provider
    /// missing here is not configured).
    pub sealed: BTreeMap<String, Result<ApiKey, String>>,
}

/// Why no provider could be selected.
#[derive(Debug, thiserror::Error)]
pub enum SelectError {
    /// The script does not load.
    #[error(transparent)]
    Script(#[from] ScriptError),
    /// Nothing configured and no script.
    #[error(
        "no model provider is configured{detail} and no script is given: pass --script FILE, set [agent] script, or configure a [providers.*] section with its API key in the environment"
    )]
    Nothing {
        /// Which declared providers lack what.
        detail: String,
    },
    /// Simulation asked for, but no script configured.
    #[error(
        "CAPSAGA_SIMULATION is set but no script is configured: pass --script FILE or set [agent] script (simulation never calls a provider)"
    )]
    SimulationWithoutScript,
    /// The HTTP client could not start.
    #[error("cannot start the HTTP client: {0}")]
    Client(String),
    /// The request names a provider that is not declared.
    #[error("the request names provider `{0}`, which is not declared in [providers.*]")]
    UnknownProvider(String),
}

/// The selected provider and how it was chosen.
pub struct Selected {
    /// The provider (a [`Router`] in live mode).
    pub provider: Box<dyn Provider>,
    /// `scripted (...)` or `live (...)`, with the reason, for the trace.
    pub mode: String,
    /// True for the scripted provider.
    pub scripted: bool,
    /// The router behind `provider` in live mode: its configured providers
    /// and attempt orders can be asked before the turn (an HTTP caller
    /// gets `no_allowed_provider` before anything runs).
    pub router: Option<Arc<Router>>,
}

/// A shared router as the turn's provider.
struct SharedRouter(Arc<Router>);

#[async_trait::async_trait]
impl Provider for SharedRouter {
    fn name(&self) -> &str {
        self.0.name()
    }

    fn model_for(&self, tier: super::provider::Tier) -> String {
        self.0.model_for(tier)
    }

    async fn complete(
        &self,
        request: &super::provider::ChatRequest,
    ) -> Result<super::provider::ChatResponse, super::provider::ProviderError> {
        self.0.complete(request).await
    }

    async fn complete_metered(
        &self,
        request: &super::provider::ChatRequest,
        meter: &super::meter::Meter<'_>,
    ) -> Result<super::provider::ChatResponse, super::provider::ProviderError> {
        self.0.complete_metered(request, meter).await
    }
}

impl std::fmt::Debug for Selected {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Selected")
            .field("mode", &self.mode)
            .finish()
    }
}

fn truthy(v: Option<&String>) -> bool {
    v.is_some_and(|v| matches!(v.trim().to_ascii_lowercase().as_str(), "1" | "true" | "yes"))
}

fn scripted(path: &Path, home: &Path, why: &str) -> Result<Selected, SelectError> {
    let p = ScriptedProvider::from_file(path, home)?;
    Ok(Selected {
        provider: Box::new(p),
        mode: format!("scripted ({why}; script {})", path.display()),
        scripted: true,
        router: None,
    })
}

/// Choose the provider of a turn.
///
/// # Errors
/// [`SelectError`].
pub fn select(config: &Config, env: &Env, sel: &Selection) -> Result<Selected, SelectError> {
    if let Some(script) = &sel.script {
        return scripted(script, &config.home, "--script");
    }
    let policy = &config.policy;
    let default_script = policy.agent.script.as_deref().map(|s| config.resolve(s));
    if truthy(env.get("CAPSAGA_SIMULATION")) {
        return simulation(config, default_script);
    }
    for p in sel
        .route
        .preferred
        .iter()
        .chain(sel.route.allowed.iter().flatten())
    {
        if !policy.providers.contains_key(p) {
            return Err(SelectError::UnknownProvider(p.chars().take(60).collect()));
        }
    }
    let (configured, missing) = configured_providers(config, env, sel)?;
    if configured.is_empty() {
        let detail = if missing.is_empty() {
            String::new()
        } else {
            format!(" ({})", missing.join(", "))
        };
        return match &default_script {
            Some(s) => scripted(
                s,
                &config.home,
                &format!("no provider is configured{detail}"),
            ),
            None => Err(SelectError::Nothing { detail }),
        };
    }
    Ok(live(config, env, sel, configured, &missing))
}

/// Simulation never reaches the network: the script, or an error.
fn simulation(config: &Config, default_script: Option<PathBuf>) -> Result<Selected, SelectError> {
    let script = default_script.or_else(|| {
        config
            .policy
            .providers
            .values()
            .filter(|p| p.kind == ProviderKind::Scripted)
            .find_map(|p| p.script.as_deref().map(|s| config.resolve(s)))
    });
    match script {
        Some(s) => scripted(&s, &config.home, "CAPSAGA_SIMULATION is set"),
        None => Err(SelectError::SimulationWithoutScript),
    }
}

/// Providers configured for `Router`.
type Configured = Vec<(String, Arc<dyn Provider>)>;

/// Every declared provider whose key is in `env` (or that needs none), and
/// what the others lack (`<name> needs <VAR>`).
fn configured_providers(
    config: &Config,
    env: &Env,
    sel: &Selection,
) -> Result<(Configured, Vec<String>), SelectError> {
    let policy = &config.policy;
    let retry = policy.agent.retry_settings();
    let client = http::client(retry.timeout_ms).map_err(SelectError::Client)?;
    let mut configured: Configured = Vec::new();
    let mut missing: Vec<String> = Vec::new();
    for (name, section) in &policy.providers {
        if let Some(sealed) = &section.api_key_sealed {
            match sel.sealed.get(name) {
                Some(Ok(_)) => {}
                Some(Err(why)) => {
                    missing.push(format!("{name} needs sealed key `{sealed}`: {why}"));
                    continue;
                }
                None => {
                    missing.push(format!("{name} needs sealed key `{sealed}`"));
                    continue;
                }
            }
        }
        let key = match section.key_env() {
            None => sel.sealed.get(name).and_then(|k| k.as_ref().ok()).cloned(),
            Some(var) => match env.get(&var).filter(|v| !v.trim().is_empty()) {
                Some(v) => Some(ApiKey::new(v.trim().to_string())),
                None => {
                    missing.push(format!("{name} needs {var}"));
                    continue;
                }
            },
        };
        let base = section.base_url().unwrap_or_default();
        let model = section.model.clone().unwrap_or_default();
        let p: Arc<dyn Provider> = match section.kind {
            ProviderKind::Openai => Arc::new(
                OpenAiProvider::new(
                    name,
                    &base,
                    &model,
                    section.cheap_model.as_deref(),
                    key,
                    section.max_tokens_field,
                    client.clone(),
                )
                .with_forced_call(section.forced_call)
                .with_temperature(section.temperature),
            ),
            ProviderKind::Anthropic => Arc::new(AnthropicProvider::new(
                name,
                &base,
                &model,
                section.cheap_model.as_deref(),
                key,
                section
                    .anthropic_version
                    .as_deref()
                    .unwrap_or(ANTHROPIC_VERSION),
                client.clone(),
            )),
            ProviderKind::Scripted => {
                let Some(script) = section.script.as_deref().or(policy.agent.script.as_deref())
                else {
                    missing.push(format!("{name} needs a script"));
                    continue;
                };
                Arc::new(ScriptedProvider::from_file(
                    &config.resolve(script),
                    &config.home,
                )?)
            }
        };
        configured.push((name.clone(), p));
    }
    Ok((configured, missing))
}

/// The router over the configured providers, with the operator's and the
/// environment's orders and allowlists, and how it was chosen.
fn live(
    config: &Config,
    env: &Env,
    sel: &Selection,
    configured: Configured,
    missing: &[String],
) -> Selected {
    let policy = &config.policy;
    // Declaration order is the file's order of sections; BTreeMap sorts by
    // name, which is what the fallback uses (stable and documented).
    let mut role_orders: BTreeMap<String, Vec<String>> =
        policy.agent.provider_order_by_role.clone();
    for (k, v) in env {
        if let Some(role) = k.strip_prefix("CAPSAGA_PROVIDER_ORDER_") {
            role_orders.insert(role.to_ascii_lowercase(), parse_list(v));
        }
    }
    let global_order = env
        .get("CAPSAGA_PROVIDER_ORDER")
        .map(|v| parse_list(v))
        .unwrap_or_else(|| policy.agent.provider_order.clone());
    let operator_allowlists = vec![
        policy.agent.allowed_providers.clone(),
        env.get("CAPSAGA_ALLOWED_PROVIDERS").map(|v| parse_list(v)),
    ];
    let names: Vec<String> = configured.iter().map(|(n, _)| n.clone()).collect();
    let router = Arc::new(Router::new(
        configured,
        role_orders,
        global_order,
        operator_allowlists,
        sel.route.clone(),
        policy.agent.retry_settings(),
    ));
    let all_scripted = names.iter().all(|n| {
        policy
            .providers
            .get(n)
            .is_some_and(|s| s.kind == ProviderKind::Scripted)
    });
    let mut mode = format!("live (configured: {}", names.join(", "));
    if !missing.is_empty() {
        mode.push_str(&format!("; not configured: {}", missing.join(", ")));
    }
    mode.push(')');
    if all_scripted {
        mode = format!("scripted (configured as [providers.{}])", names.join(", "));
    }
    Selected {
        provider: Box::new(SharedRouter(router.clone())),
        mode,
        scripted: all_scripted,
        router: Some(router),
    }
}
