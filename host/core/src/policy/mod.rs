//! The operator's policy, `capsaga.toml`: what each tool is granted, where the
//! tools and the state live, and the limits of each call.
//!
//! ```toml
//! home = "."                        # what `~` means in grants (relative to this file)
//! tools_dir = "../target/tools"     # the components (scripts/build-components writes them there)
//! state_dir = ".capsaga"            # holds state.db
//! # compiled_cache = "/var/cache/capsaga"  # default: <state_dir>/compiled
//! # meta_compiler = "cranelift"     # default "winch": see MetaCompiler
//!
//! [limits]                          # defaults for every call
//! deadline_ms = 5000
//! memory_bytes = 67108864
//!
//! [tools.fs_write]
//! grants = ["fs:write:~/workspace/**"]
//! limits = { deadline_ms = 2000 }
//! approval = "always"               # a human approves every call with side effects
//! irreversible = true               # cannot be undone: always a human
//!
//! [agent]                           # the agent loop (see `providers`)
//! autonomy = "autonomous"           # read_only | supervised | autonomous
//!
//! [env]                             # values of `env:<NAME>` grants
//! LANG = "C.UTF-8"
//!
//! [secrets.github]                  # `secret:github@api.github.com`
//! env = "GITHUB_TOKEN"              # or `value = "..."`; never from the guest
//! header = "authorization"          # default
//! prefix = "Bearer "
//!
//! [flow]                            # information flow (see `sink`)
//! strict = false
//!
//! [net]                             # outgoing HTTP of all tools
//! max_response_bytes = 4194304
//! request_timeout_ms = 30000
//! hosts = { "api.internal.test" = ["203.0.113.7"] }   # static resolver entries
//! ```
//!
//! The `[agent]`, `[providers.*]` and `[budget]` sections are described in
//! [`providers`] and [`crate::budget`].
//!
//! Unknown keys are refused (a typo must not silently widen or drop a rule).
//! Paths are resolved by the host relative to the file; this module only
//! parses and checks. An empty `[tools]` table denies every capability.

use crate::capability::{Capability, CapabilityError, FsDir, Place};
use serde::Deserialize;
use std::collections::BTreeMap;

/// What compiles a component to read its meta (`meta_compiler` in
/// `capsaga.toml`) when the compiled cache holds none for its bytes. Calls
/// are always compiled by Cranelift, at the first call of each tool.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum MetaCompiler {
    /// Wasmtime's baseline compiler (Winch): about five times faster to
    /// compile; the code is thrown away once the meta is read (default;
    /// Cranelift where Winch cannot compile a component).
    #[default]
    Winch,
    /// Cranelift, whose code is kept for the tool's calls: every component
    /// of the tools directory is compiled at the first start.
    Cranelift,
}

/// Limits of one call as written in `capsaga.toml` (`[limits]` for the
/// defaults, `[tools.<name>] limits = {...}` per tool). Every field is
/// optional; the host fills the defaults of [`Limits::DEFAULT`]. Units as in
/// [`Limits`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LimitsConfig {
    /// Wall-clock deadline of a call, milliseconds.
    pub deadline_ms: Option<u64>,
    /// Cap on the sum of all linear memories of the instance, bytes.
    pub memory_bytes: Option<u64>,
    /// Wasm fuel per call, units (about one per wasm instruction).
    pub fuel: Option<u64>,
    /// Cap on the output's `data` plus effects, next hint and summary, bytes.
    pub output_bytes: Option<u64>,
    /// Cap on log messages per call, bytes.
    pub log_bytes: Option<u64>,
}

/// Effective limits of one call (one fresh instance running one export).
/// The sandbox enforces each one and reports a hit as a typed tool error:
/// `timeout` for the deadline, `quota-exceeded` for the others.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Wall-clock deadline, milliseconds, from the start of the call
    /// (instantiation included). Checked at every epoch tick (5 ms) while
    /// the guest runs, and by a host timeout 250 ms later for time spent
    /// blocked in host calls.
    pub deadline_ms: u64,
    /// Cap on the sum of all linear memories of the instance, bytes (a
    /// component holds several core instances, each may have memories).
    /// Also bounds what the host copies out of guest memory.
    pub memory_bytes: u64,
    /// Wasm fuel, units: about one per wasm instruction executed, plus one
    /// per byte of strings and lists copied between host and guest.
    pub fuel: u64,
    /// Cap on the output (`data` JSON text plus effects, next hint and
    /// summary), bytes, measured in guest memory before anything is copied.
    pub output_bytes: u64,
    /// Cap on the guest's log messages per call, bytes; each record also
    /// counts 32 bytes, so a flood of empty messages is capped too.
    /// Messages past the cap are clipped or dropped, not an error.
    pub log_bytes: u64,
}

impl Limits {
    /// Defaults: 10 s, 256 MiB, 20 billion fuel, 4 MiB output, 64 KiB logs.
    pub const DEFAULT: Limits = Limits {
        deadline_ms: 10_000,
        memory_bytes: 256 * 1024 * 1024,
        fuel: 20_000_000_000,
        output_bytes: 4 * 1024 * 1024,
        log_bytes: 64 * 1024,
    };

    /// `self` with the fields set in `c` replaced.
    pub fn overlay(self, c: &LimitsConfig) -> Limits {
        Limits {
            deadline_ms: c.deadline_ms.unwrap_or(self.deadline_ms),
            memory_bytes: c.memory_bytes.unwrap_or(self.memory_bytes),
            fuel: c.fuel.unwrap_or(self.fuel),
            output_bytes: c.output_bytes.unwrap_or(self.output_bytes),
            log_bytes: c.log_bytes.unwrap_or(self.log_bytes),
        }
    }
}

impl Default for Limits {
    fn default() -> Self {
        Limits::DEFAULT
    }
}

/// One tool's section.
#[derive(Debug, Clone, PartialEq, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ToolPolicyFile {
    /// Capability strings granted to the tool.
    #[serde(default)]
    pub grants: Vec<String>,
    /// Limits overriding the defaults for this tool.
    #[serde(default)]
    pub limits: LimitsConfig,
    /// When a human must approve a call (default `auto`).
    #[serde(default)]
    pub approval: ApprovalRule,
    /// Refuse every call of this tool (it stays loaded and listed).
    #[serde(default)]
    pub deny: bool,
    /// The tool's effects cannot be undone (seed 003: irreversible
    /// capabilities always need a human, whatever the autonomy level).
    #[serde(default)]
    pub irreversible: bool,
    /// Whether the host journals and restores this tool's files (default:
    /// `[fs] host_rollback`); off for a tool that manages huge files.
    #[serde(default)]
    pub host_rollback: Option<bool>,
    /// What may flow into each argument ([`sink`]); absent: the
    /// defaults.
    #[serde(default)]
    pub sinks: Option<BTreeMap<String, sink::SinkLevel>>,
    /// What a call whose argument fails its sink gets (default `approve`).
    #[serde(default)]
    pub on_untrusted: Option<sink::OnUntrusted>,
    /// Output fields the tool labels trusted that the operator confirms
    /// (`capsaga-flow`'s `label`).
    #[serde(default)]
    pub trusted_fields: Vec<String>,
    /// Whether every call is judged once untrusted data was read, whatever
    /// its arguments (`crate::flow::sink`; absent: only calls carrying no
    /// value to trace).
    #[serde(default)]
    pub strict: Option<bool>,
}

mod decide;
pub mod fs;
mod outbound;
pub mod providers;
pub mod sink;
#[cfg(test)]
mod test_rules;
#[cfg(test)]
mod tests;
pub mod tool_choice;

pub use decide::{ApprovalRule, Autonomy, Decision, decide, decide_at, offered};
pub use outbound::{
    NetFile, NetSettings, SecretFile, SecretSource, SecretSpec, SecretString, forbidden_header,
    is_header_name, is_header_value,
};
use outbound::{check_env, check_net, check_secrets};

/// The file as parsed.
#[derive(Debug, Clone, PartialEq, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PolicyFile {
    /// What `~` means in grants: a directory, relative to the file or absolute.
    pub home: Option<String>,
    /// Directory of tool components (`*.wasm`), relative to the file or absolute.
    pub tools_dir: Option<String>,
    /// Directory of the state database, relative to the file or absolute.
    pub state_dir: Option<String>,
    /// Directory of the compiled-component cache, relative to the file or
    /// absolute (default `<state_dir>/compiled`). Several state directories
    /// of one user may share one: entries are keyed by component hash and
    /// engine, and the directory must be the user's own, mode 0700.
    pub compiled_cache: Option<String>,
    /// What reads the meta of a component the compiled cache has no meta
    /// for ([`MetaCompiler`]; default `winch`).
    pub meta_compiler: Option<MetaCompiler>,
    /// How long a write to the state database waits its turn while other
    /// processes write, milliseconds (default 60 000; 1 to 3 600 000).
    pub busy_timeout_ms: Option<u64>,
    /// The state store: `sqlite` (the default: `<state_dir>/state.db`) or a
    /// PostgreSQL connection string (`postgres://USER@HOST:PORT/DB`) shared
    /// by several hosts. The environment's `CAPSAGA_STORE` wins over it. A
    /// password is refused here (it comes from `PGPASSWORD` or
    /// `CAPSAGA_STORE`).
    pub store: Option<String>,
    /// How long a host's lease on its sagas lasts in a shared store,
    /// milliseconds (default 10 000; 500 to 600 000): another host recovers
    /// the sagas of a host that has not renewed it for this long.
    pub store_lease_ms: Option<u64>,
    /// Default limits.
    #[serde(default)]
    pub limits: LimitsConfig,
    /// Per-tool sections, keyed by tool name.
    #[serde(default)]
    pub tools: BTreeMap<String, ToolPolicyFile>,
    /// Values of `env:<NAME>` grants, by name. Nothing is inherited from the
    /// host process's environment.
    #[serde(default)]
    pub env: BTreeMap<String, String>,
    /// Credentials for `secret:<name>@<host>` grants, by name.
    #[serde(default)]
    pub secrets: BTreeMap<String, SecretFile>,
    /// Outgoing HTTP settings.
    #[serde(default)]
    pub net: NetFile,
    /// The agent loop: autonomy, provider order and allowlist, retries.
    #[serde(default)]
    pub agent: providers::AgentSection,
    /// Model providers by name.
    #[serde(default)]
    pub providers: BTreeMap<String, providers::ProviderSection>,
    /// Price table and budget caps.
    #[serde(default)]
    pub budget: crate::budget::BudgetSection,
    /// Human approvals: their time to live.
    #[serde(default)]
    pub approvals: crate::approval::ApprovalsSection,
    /// Agent-written tools (see `crate::neuron`).
    #[serde(default)]
    pub neurons: crate::neuron::NeuronsFile,
    /// The agent's memory (see `crate::memory`).
    #[serde(default)]
    pub memory: crate::memory::MemorySection,
    /// The host's file journal (issue 28).
    #[serde(default)]
    pub fs: fs::FsFile,
    /// Information flow (issue 47): strict mode, the plan's scope, default
    /// sinks.
    #[serde(default)]
    pub flow: sink::FlowFile,
}

/// Why a policy was refused.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum PolicyError {
    /// Not TOML or unknown keys.
    #[error("policy file: {0}")]
    Toml(String),
    /// A grant did not parse.
    #[error("policy for tool `{tool}`: {error}")]
    Capability {
        /// The tool.
        tool: String,
        /// The parse error.
        error: CapabilityError,
    },
    /// A `*` grant.
    #[error(
        "policy for tool `{tool}`: `{grant}` is not concrete; grants name a directory or a host"
    )]
    NotConcrete {
        /// The tool.
        tool: String,
        /// The grant.
        grant: String,
    },
    /// A section for a name that cannot be a tool.
    #[error("policy: `{0}` is not a valid tool name")]
    BadToolName(String),
    /// A limit of zero.
    #[error("policy: limit `{0}` must be greater than zero")]
    ZeroLimit(&'static str),
    /// A bad `[env]` entry, or an `env:` grant without a value.
    #[error("policy: {0}")]
    Env(String),
    /// A bad `[secrets.*]` section, or a `secret:` grant naming none.
    #[error("policy: {0}")]
    Secret(String),
    /// A bad `[net]` setting.
    #[error("policy [net]: {0}")]
    Net(String),
    /// A bad `[agent]` or `[providers.*]` section.
    #[error("policy: {0}")]
    Providers(#[from] providers::ProviderConfigError),
    /// A bad `[budget]` section.
    #[error("policy: {0}")]
    Budget(#[from] crate::budget::BudgetError),
    /// A bad `[approvals]` section.
    #[error("policy: {0}")]
    Approvals(String),
    /// A bad `[neurons]` section.
    #[error("policy [neurons]: {0}")]
    Neurons(String),
    /// A bad `[memory]` section.
    #[error("policy [memory]: {0}")]
    Memory(String),
    /// A bad `[fs]` section.
    #[error("policy [fs]: {0}")]
    Fs(String),
    /// A bad `[flow]` section or flow key of a tool.
    #[error("policy {0}")]
    Flow(#[from] sink::FlowError),
}

/// The checked policy: grants parsed with `~` expanded.
#[derive(Debug, Clone, PartialEq)]
pub struct Policy {
    /// Default limits.
    pub limits: Limits,
    /// Grants and limits by tool name.
    pub tools: BTreeMap<String, ToolPolicy>,
    /// Values of `env:` grants.
    pub env: BTreeMap<String, String>,
    /// Secrets by name.
    pub secrets: BTreeMap<String, SecretSpec>,
    /// Outgoing HTTP settings.
    pub net: NetSettings,
    /// The operator's autonomy level.
    pub autonomy: Autonomy,
    /// The agent section, checked.
    pub agent: providers::AgentSection,
    /// Provider sections, checked.
    pub providers: BTreeMap<String, providers::ProviderSection>,
    /// Budget section, checked.
    pub budget: crate::budget::BudgetSection,
    /// How long an approval may wait to be claimed, seconds (`[approvals] ttl`).
    pub approval_ttl_s: u64,
    /// Tools whose approvals an MCP client may confirm itself
    /// (`[approvals] client_confirm`, checked by [`crate::confirm`]).
    pub client_confirm: std::collections::BTreeSet<String>,
    /// The `[neurons]` section, checked.
    pub neurons: crate::neuron::NeuronsPolicy,
    /// The `[memory]` section, checked.
    pub memory: crate::memory::MemoryPolicy,
    /// The `[fs]` section, checked (the host's file journal).
    pub fs: fs::FsPolicy,
    /// The `[flow]` section and the tools' flow keys, checked.
    pub flow: sink::FlowRules,
}

/// One tool's checked grants and limits.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolPolicy {
    /// Concrete capabilities, `~` expanded.
    pub grants: Vec<Capability>,
    /// Effective limits.
    pub limits: Limits,
    /// When a human must approve.
    pub approval: ApprovalRule,
    /// Every call refused.
    pub deny: bool,
    /// Every call needs a human.
    pub irreversible: bool,
    /// The operator's autonomy level (from `[agent]`).
    pub autonomy: Autonomy,
}

impl PolicyFile {
    /// Parse the TOML text.
    ///
    /// # Errors
    /// [`PolicyError::Toml`] with the line of the problem.
    pub fn parse(text: &str) -> Result<PolicyFile, PolicyError> {
        toml::from_str(text).map_err(|e| PolicyError::Toml(e.to_string()))
    }

    /// Check grants and limits, expanding `~` to `home` (absolute, normalised).
    ///
    /// # Errors
    /// [`PolicyError`] for the first problem found.
    pub fn check(&self, home: &str) -> Result<Policy, PolicyError> {
        check_limits(&self.limits)?;
        let defaults = Limits::DEFAULT.overlay(&self.limits);
        let mut tools = BTreeMap::new();
        for (name, t) in &self.tools {
            if !crate::meta::is_valid_tool_name(name) {
                return Err(PolicyError::BadToolName(name.chars().take(80).collect()));
            }
            check_limits(&t.limits)?;
            let mut grants = Vec::new();
            for g in &t.grants {
                let cap = Capability::parse(g).map_err(|error| PolicyError::Capability {
                    tool: name.clone(),
                    error,
                })?;
                if !cap.is_concrete() {
                    return Err(PolicyError::NotConcrete {
                        tool: name.clone(),
                        grant: g.clone(),
                    });
                }
                grants.push(
                    expand_home(cap, home).map_err(|error| PolicyError::Capability {
                        tool: name.clone(),
                        error,
                    })?,
                );
            }
            grants.sort();
            grants.dedup();
            check_grant_values(name, &grants, &self.env, &self.secrets)?;
            tools.insert(
                name.clone(),
                ToolPolicy {
                    grants,
                    limits: defaults.overlay(&t.limits),
                    approval: t.approval,
                    deny: t.deny,
                    irreversible: t.irreversible,
                    autonomy: self.agent.autonomy,
                },
            );
        }
        self.agent.check(&self.providers)?;
        self.budget.check()?;
        Ok(Policy {
            limits: defaults,
            tools,
            env: check_env(&self.env)?,
            secrets: check_secrets(&self.secrets)?,
            net: check_net(&self.net)?,
            autonomy: self.agent.autonomy,
            agent: self.agent.clone(),
            providers: self.providers.clone(),
            budget: self.budget.clone(),
            approval_ttl_s: self.approvals.ttl_s().map_err(PolicyError::Approvals)?,
            client_confirm: crate::confirm::check_list(&self.approvals.client_confirm, |n| {
                self.tools.get(n).map(|t| t.irreversible)
            })
            .map_err(PolicyError::Approvals)?,
            neurons: self.neurons.check(home).map_err(PolicyError::Neurons)?,
            memory: self.memory.check().map_err(PolicyError::Memory)?,
            fs: self
                .fs
                .check(self.tools.iter().map(|(n, t)| (n, t.host_rollback)))
                .map_err(PolicyError::Fs)?,
            flow: self.flow.check(self.tools.iter().map(|(n, t)| {
                (
                    n,
                    sink::ToolFlowKeys {
                        sinks: t.sinks.as_ref(),
                        on_untrusted: t.on_untrusted,
                        trusted_fields: &t.trusted_fields,
                        strict: t.strict,
                    },
                )
            }))?,
        })
    }
}

/// Every `env:` grant needs a value in `[env]`, every `secret:` grant a
/// `[secrets.<name>]` section.
fn check_grant_values(
    tool: &str,
    grants: &[Capability],
    env: &BTreeMap<String, String>,
    secrets: &BTreeMap<String, SecretFile>,
) -> Result<(), PolicyError> {
    for g in grants {
        match g {
            Capability::Env { name } if !env.contains_key(name) => {
                return Err(PolicyError::Env(format!(
                    "tool `{tool}` is granted `{g}` but [env] has no `{name}` (values come from this file, never from the host's environment)"
                )));
            }
            Capability::Secret { name, .. } if !secrets.contains_key(name) => {
                return Err(PolicyError::Secret(format!(
                    "tool `{tool}` is granted `{g}` but there is no [secrets.{name}] section"
                )));
            }
            _ => {}
        }
    }
    Ok(())
}

fn check_limits(l: &LimitsConfig) -> Result<(), PolicyError> {
    for (name, v) in [
        ("deadline_ms", l.deadline_ms),
        ("memory_bytes", l.memory_bytes),
        ("fuel", l.fuel),
        ("output_bytes", l.output_bytes),
        ("log_bytes", l.log_bytes),
    ] {
        if v == Some(0) {
            return Err(PolicyError::ZeroLimit(name));
        }
    }
    Ok(())
}

/// Replace `~` in an fs capability by `home`.
///
/// # Errors
/// [`CapabilityError`] when `home` is not absolute and normalised.
pub fn expand_home(cap: Capability, home: &str) -> Result<Capability, CapabilityError> {
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

impl Policy {
    /// The section of `tool`, if the operator listed it.
    pub fn section(&self, tool: &str) -> Option<&ToolPolicy> {
        self.tools.get(tool)
    }

    /// The largest memory cap of any call under this policy (defaults and
    /// every tool's own), bytes: what the sandbox's memory slots must hold.
    pub fn max_memory_bytes(&self) -> u64 {
        self.tools
            .values()
            .map(|t| t.limits.memory_bytes)
            .fold(self.limits.memory_bytes, u64::max)
    }

    /// The grants and limits of `tool`; a tool without a section gets no
    /// grants and the default limits (and is not callable: see
    /// [`Policy::section`] and [`decide`]).
    pub fn tool(&self, tool: &str) -> ToolPolicy {
        self.tools.get(tool).cloned().unwrap_or(ToolPolicy {
            grants: Vec::new(),
            limits: self.limits,
            approval: ApprovalRule::Auto,
            deny: false,
            irreversible: false,
            autonomy: self.autonomy,
        })
    }
}
