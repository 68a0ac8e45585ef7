//! The operator's policy, `capsaga.toml`: what each tool is granted, where the
//! tools and the state live, and the limits of each call.
//!
//! ```toml
//! home = "."                        # what `~` means in grants (relative to this file)
//! tools_dir = "../target/tools"     # the components (scripts/build-components writes them there)
//! state_dir = ".capsaga"            # holds state.db
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
//! [agent]                           # the agent loop (see `crate::providers`)
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
//! [net]                             # outgoing HTTP of all tools
//! max_response_bytes = 4194304
//! request_timeout_ms = 30000
//! hosts = { "api.internal.test" = ["203.0.113.7"] }   # static resolver entries
//! ```
//!
//! The `[agent]`, `[providers.*]` and `[budget]` sections are described in
//! [`crate::providers`] and [`crate::budget`].
//!
//! Unknown keys are refused (a typo must not silently widen or drop a rule).
//! Paths are resolved by the host relative to the file; this module only
//! parses and checks. An empty `[tools]` table denies every capability.

use crate::capability::{Capability, CapabilityError, FsDir, Place};
use serde::Deserialize;
use std::collections::BTreeMap;

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
}

/// How much the agent may do without a human (seed 003, "nivel de
/// autonomía"). Ordered from least to most autonomous; a request can lower
/// the operator's level, never raise it ([`Autonomy::narrow`]).
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Default, Deserialize, serde::Serialize,
)]
#[serde(rename_all = "snake_case")]
pub enum Autonomy {
    /// Only tools without side effects are offered and run.
    ReadOnly,
    /// Every call with side effects needs a human.
    Supervised,
    /// Calls run under the per-tool rules; high-risk and irreversible calls
    /// still need a human (the default: the operator's `[tools.*]` sections
    /// are the allowlist).
    #[default]
    Autonomous,
}

impl Autonomy {
    /// The lower of two levels: what a request asking for `requested` gets
    /// under the operator's `self`.
    pub fn narrow(self, requested: Autonomy) -> Autonomy {
        self.min(requested)
    }

    /// The configuration name (`read_only`, `supervised`, `autonomous`).
    pub fn as_str(self) -> &'static str {
        match self {
            Autonomy::ReadOnly => "read_only",
            Autonomy::Supervised => "supervised",
            Autonomy::Autonomous => "autonomous",
        }
    }
}

impl std::str::FromStr for Autonomy {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "read_only" | "read-only" => Ok(Autonomy::ReadOnly),
            "supervised" => Ok(Autonomy::Supervised),
            "autonomous" => Ok(Autonomy::Autonomous),
            other => Err(format!(
                "unknown autonomy level `{}` (read_only, supervised, autonomous)",
                other.chars().take(40).collect::<String>()
            )),
        }
    }
}

/// When a human must approve a call of a tool.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ApprovalRule {
    /// Only when [`decide`]'s built-in rules say so (high risk).
    #[default]
    Auto,
    /// Every call with side effects.
    Always,
}

/// The policy's decision for one call (seed 000 §7, `Policy.evaluate`).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
#[serde(tag = "decision", rename_all = "snake_case")]
pub enum Decision {
    /// Run it.
    Allow,
    /// Refuse it.
    Deny {
        /// Why, for the model and the operator.
        reason: String,
    },
    /// A human must approve it first.
    ApproveRequired {
        /// Why.
        reason: String,
    },
}

/// Decide a call of a tool with `risk` and `has_side_effects` under its
/// policy section (`None`: the tool is not in the operator's allowlist), at
/// the operator's autonomy level (held in the section). Same as
/// [`decide_at`] with [`Autonomy::Autonomous`] requested.
pub fn decide(
    risk: crate::meta::Risk,
    has_side_effects: bool,
    tool: Option<&ToolPolicy>,
) -> Decision {
    decide_at(risk, has_side_effects, tool, Autonomy::Autonomous)
}

/// Decide a call at the autonomy level `requested`, narrowed by the
/// operator's (seed 000 §7 `Policy.evaluate`, seed 003 approvals).
///
/// Rules, in order:
/// 1. a tool the operator did not list, or listed with `deny = true`, is
///    denied (default deny);
/// 2. at `read_only`, a call with side effects is denied;
/// 3. a high-risk tool, or one the operator marked `irreversible`, always
///    needs a human, whatever the autonomy level or the tool's rule;
/// 4. `approval = "always"` asks a human for every call with side effects;
/// 5. at `supervised`, every call with side effects needs a human;
/// 6. everything else is allowed.
pub fn decide_at(
    risk: crate::meta::Risk,
    has_side_effects: bool,
    tool: Option<&ToolPolicy>,
    requested: Autonomy,
) -> Decision {
    let Some(tool) = tool else {
        return Decision::Deny {
            reason: "the tool is not in the operator's policy".into(),
        };
    };
    if tool.deny {
        return Decision::Deny {
            reason: "the operator's policy denies this tool".into(),
        };
    }
    let autonomy = tool.autonomy.narrow(requested);
    if autonomy == Autonomy::ReadOnly && has_side_effects {
        return Decision::Deny {
            reason: "the autonomy level is read_only: calls with side effects are not allowed"
                .into(),
        };
    }
    if risk == crate::meta::Risk::High {
        return Decision::ApproveRequired {
            reason: "high-risk calls always need a human".into(),
        };
    }
    if tool.irreversible {
        return Decision::ApproveRequired {
            reason: "the operator marked this tool irreversible: every call needs a human".into(),
        };
    }
    if tool.approval == ApprovalRule::Always && has_side_effects {
        return Decision::ApproveRequired {
            reason: "the operator's policy asks a human for every call of this tool".into(),
        };
    }
    if autonomy == Autonomy::Supervised && has_side_effects {
        return Decision::ApproveRequired {
            reason: "the autonomy level is supervised: calls with side effects need a human".into(),
        };
    }
    Decision::Allow
}

/// Whether a tool belongs in the catalog the model sees at autonomy
/// `requested`: every tool whose calls are not always denied (a call that
/// needs a human is offered; the human decides).
pub fn offered(
    risk: crate::meta::Risk,
    has_side_effects: bool,
    tool: Option<&ToolPolicy>,
    requested: Autonomy,
) -> bool {
    !matches!(
        decide_at(risk, has_side_effects, tool, requested),
        Decision::Deny { .. }
    )
}

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
    pub agent: crate::providers::AgentSection,
    /// Model providers by name.
    #[serde(default)]
    pub providers: BTreeMap<String, crate::providers::ProviderSection>,
    /// Price table and budget caps.
    #[serde(default)]
    pub budget: crate::budget::BudgetSection,
}

/// A text that must never be printed: `Debug` shows `<redacted>`, and there
/// is no `Display` or `Serialize`. Read it with [`SecretString::expose`].
#[derive(Clone, PartialEq, Eq, Default, Deserialize)]
#[serde(transparent)]
pub struct SecretString(String);

impl SecretString {
    /// Wrap a value.
    pub fn new(value: impl Into<String>) -> Self {
        SecretString(value.into())
    }
    /// The value, for the one place that sends it.
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl std::fmt::Debug for SecretString {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("<redacted>")
    }
}

/// One `[secrets.<name>]` section as written.
#[derive(Debug, Clone, PartialEq, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SecretFile {
    /// The value, written in the file.
    pub value: Option<SecretString>,
    /// Or the name of an environment variable of the host process holding it
    /// (read once, when the host loads the policy).
    pub env: Option<String>,
    /// The header that carries it (default `authorization`).
    pub header: Option<String>,
    /// Text sent before the value, e.g. `Bearer `.
    #[serde(default)]
    pub prefix: String,
}

/// Where a secret's value comes from.
#[derive(Debug, Clone, PartialEq)]
pub enum SecretSource {
    /// Written in the policy file.
    Value(SecretString),
    /// An environment variable of the host process, by name.
    Env(String),
}

/// A checked `[secrets.<name>]` section.
#[derive(Debug, Clone, PartialEq)]
pub struct SecretSpec {
    /// Header name, lowercase.
    pub header: String,
    /// Text before the value.
    pub prefix: String,
    /// The value or where to read it.
    pub source: SecretSource,
}

/// The `[net]` section as written.
#[derive(Debug, Clone, PartialEq, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NetFile {
    /// Cap on one response body, bytes.
    pub max_response_bytes: Option<u64>,
    /// Timeout of one request (connect to end of body), milliseconds; the
    /// call's deadline always applies too.
    pub request_timeout_ms: Option<u64>,
    /// Most requests one call may make.
    pub max_requests: Option<u32>,
    /// Static resolver entries: DNS name → addresses. A name listed here is
    /// never looked up in DNS. Its addresses are still vetted.
    #[serde(default)]
    pub hosts: BTreeMap<String, Vec<String>>,
    /// PEM files of extra trusted root certificates (relative to the policy
    /// file), added to the built-in web PKI roots.
    #[serde(default)]
    pub ca_files: Vec<String>,
}

/// Checked outgoing-HTTP settings.
#[derive(Debug, Clone, PartialEq)]
pub struct NetSettings {
    /// Cap on one response body, bytes.
    pub max_response_bytes: u64,
    /// Timeout of one request, milliseconds.
    pub request_timeout_ms: u64,
    /// Most requests per call.
    pub max_requests: u32,
    /// Static resolver entries, names lowercase without trailing dot.
    pub hosts: BTreeMap<String, Vec<std::net::IpAddr>>,
    /// Extra root certificate files, as written (the host resolves them).
    pub ca_files: Vec<String>,
}

impl Default for NetSettings {
    /// 4 MiB per response, 30 s per request, 64 requests per call, no static
    /// hosts, no extra roots.
    fn default() -> Self {
        NetSettings {
            max_response_bytes: 4 * 1024 * 1024,
            request_timeout_ms: 30_000,
            max_requests: 64,
            hosts: BTreeMap::new(),
            ca_files: Vec::new(),
        }
    }
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
    Providers(#[from] crate::providers::ProviderConfigError),
    /// A bad `[budget]` section.
    #[error("policy: {0}")]
    Budget(#[from] crate::budget::BudgetError),
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
    pub agent: crate::providers::AgentSection,
    /// Provider sections, checked.
    pub providers: BTreeMap<String, crate::providers::ProviderSection>,
    /// Budget section, checked.
    pub budget: crate::budget::BudgetSection,
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

fn check_env(env: &BTreeMap<String, String>) -> Result<BTreeMap<String, String>, PolicyError> {
    for (k, v) in env {
        if !crate::capability::is_env_name(k) {
            return Err(PolicyError::Env(format!(
                "[env] `{}` is not a variable name ([A-Za-z_][A-Za-z0-9_]*)",
                k.chars().take(80).collect::<String>()
            )));
        }
        if v.contains('\0') {
            return Err(PolicyError::Env(format!("[env] `{k}` contains a NUL byte")));
        }
    }
    Ok(env.clone())
}

/// Whether `name` is an HTTP field name (RFC 9110 §5.1 token).
pub fn is_header_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 128
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b))
}

/// Whether `value` may be sent as an HTTP field value: visible ASCII, spaces
/// and tabs inside, at most 8 KiB. (Checked without echoing the value.)
pub fn is_header_value(value: &str) -> bool {
    value.len() <= 8192
        && value
            .bytes()
            .all(|b| b == b' ' || b == b'\t' || (0x21..=0x7e).contains(&b))
        && !value.starts_with([' ', '\t'])
        && !value.ends_with([' ', '\t'])
}

fn check_secrets(
    secrets: &BTreeMap<String, SecretFile>,
) -> Result<BTreeMap<String, SecretSpec>, PolicyError> {
    let mut out = BTreeMap::new();
    for (name, s) in secrets {
        let bad = |why: String| PolicyError::Secret(format!("[secrets.{name}]: {why}"));
        if !crate::capability::is_ident(name) {
            return Err(PolicyError::Secret(format!(
                "[secrets.{}]: secret names are [a-z0-9][a-z0-9_-]*",
                name.chars().take(80).collect::<String>()
            )));
        }
        let header = s
            .header
            .as_deref()
            .unwrap_or("authorization")
            .to_ascii_lowercase();
        if !is_header_name(&header) {
            return Err(bad(format!("`{header}` is not a header name")));
        }
        if let Some(why) = crate::net_guard::forbidden_header(&header, false) {
            return Err(bad(format!(
                "header `{header}` cannot carry a secret: {why}"
            )));
        }
        if !s.prefix.is_empty() && !is_header_value(s.prefix.trim_end()) {
            return Err(bad("the prefix is not a valid header value".into()));
        }
        let source = match (&s.value, &s.env) {
            (Some(v), None) => {
                if v.expose().is_empty() || !is_header_value(v.expose()) {
                    return Err(bad(
                        "the value is empty or not a valid header value (visible ASCII only; the value is not shown)".into(),
                    ));
                }
                SecretSource::Value(v.clone())
            }
            (None, Some(var)) => {
                if !crate::capability::is_env_name(var) {
                    return Err(bad(format!("`{var}` is not an environment variable name")));
                }
                SecretSource::Env(var.clone())
            }
            _ => return Err(bad("give exactly one of `value` and `env`".into())),
        };
        out.insert(
            name.clone(),
            SecretSpec {
                header,
                prefix: s.prefix.clone(),
                source,
            },
        );
    }
    Ok(out)
}

fn check_net(n: &NetFile) -> Result<NetSettings, PolicyError> {
    let d = NetSettings::default();
    for (k, v) in [
        ("max_response_bytes", n.max_response_bytes),
        ("request_timeout_ms", n.request_timeout_ms),
        ("max_requests", n.max_requests.map(u64::from)),
    ] {
        if v == Some(0) {
            return Err(PolicyError::ZeroLimit(k));
        }
    }
    let mut hosts = BTreeMap::new();
    for (name, addrs) in &n.hosts {
        let key = name.strip_suffix('.').unwrap_or(name).to_ascii_lowercase();
        let cap = format!("net:http:{key}");
        match Capability::parse(&cap) {
            Ok(Capability::Net {
                target:
                    Place::Concrete(crate::capability::NetTarget {
                        host: crate::capability::HostPattern::Dns(_),
                        port: None,
                    }),
                ..
            }) => {}
            _ => {
                return Err(PolicyError::Net(format!(
                    "hosts: `{}` is not a DNS name",
                    name.chars().take(80).collect::<String>()
                )));
            }
        }
        if addrs.is_empty() {
            return Err(PolicyError::Net(format!("hosts: `{key}` has no addresses")));
        }
        let mut ips = Vec::new();
        for a in addrs {
            let ip: std::net::IpAddr = a.parse().map_err(|_| {
                PolicyError::Net(format!(
                    "hosts: `{}` is not an IP address (write 10.0.0.1 or 2001:db8::1)",
                    a.chars().take(80).collect::<String>()
                ))
            })?;
            ips.push(ip);
        }
        hosts.insert(key, ips);
    }
    Ok(NetSettings {
        max_response_bytes: n.max_response_bytes.unwrap_or(d.max_response_bytes),
        request_timeout_ms: n.request_timeout_ms.unwrap_or(d.request_timeout_ms),
        max_requests: n.max_requests.unwrap_or(d.max_requests),
        hosts,
        ca_files: n.ca_files.clone(),
    })
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_and_expands() {
        let f = PolicyFile::parse(
            r#"
            home = "."
            [limits]
            deadline_ms = 3000
            [tools.fs_write]
            grants = ["fs:write:~/ws/**"]
            limits = { memory_bytes = 1048576 }
            "#,
        )
        .unwrap();
        let p = f.check("/srv/agent").unwrap();
        let t = p.tool("fs_write");
        assert_eq!(t.grants[0].to_string(), "fs:write:/srv/agent/ws/**");
        assert_eq!(t.limits.deadline_ms, 3000);
        assert_eq!(t.limits.memory_bytes, 1048576);
        assert!(p.tool("other").grants.is_empty());
    }

    #[test]
    fn decisions() {
        use crate::meta::Risk;
        let f = PolicyFile::parse(
            "[tools.a]\n[tools.b]\ndeny = true\n[tools.c]\napproval = \"always\"\n",
        )
        .unwrap();
        let p = f.check("/h").unwrap();
        assert_eq!(decide(Risk::Low, false, p.section("a")), Decision::Allow);
        assert_eq!(decide(Risk::Medium, true, p.section("a")), Decision::Allow);
        assert!(matches!(
            decide(Risk::High, true, p.section("a")),
            Decision::ApproveRequired { .. }
        ));
        assert!(matches!(
            decide(Risk::Low, false, p.section("b")),
            Decision::Deny { .. }
        ));
        assert!(matches!(
            decide(Risk::Low, false, p.section("zzz")),
            Decision::Deny { .. }
        ));
        assert!(matches!(
            decide(Risk::Medium, true, p.section("c")),
            Decision::ApproveRequired { .. }
        ));
        assert_eq!(decide(Risk::Low, false, p.section("c")), Decision::Allow);
        assert!(PolicyFile::parse("[tools.a]\napproval = \"never\"\n").is_err());
    }

    fn approve(d: Decision) -> bool {
        matches!(d, Decision::ApproveRequired { .. })
    }
    fn deny(d: Decision) -> bool {
        matches!(d, Decision::Deny { .. })
    }

    #[test]
    fn autonomy_levels_and_irreversible() {
        use crate::meta::Risk;
        use Autonomy::*;
        let p = PolicyFile::parse(
            "[agent]\nautonomy = \"supervised\"\n[tools.r]\n[tools.w]\n[tools.x]\nirreversible = true\n",
        )
        .unwrap()
        .check("/h")
        .unwrap();
        assert_eq!(p.autonomy, Supervised);
        // Supervised: reads run, every side effect needs a human.
        assert_eq!(decide(Risk::Low, false, p.section("r")), Decision::Allow);
        assert!(approve(decide(Risk::Low, true, p.section("w"))));
        // A request cannot raise the level...
        assert!(approve(decide_at(
            Risk::Low,
            true,
            p.section("w"),
            Autonomous
        )));
        // ...but can lower it: read_only denies side effects and hides them.
        assert!(deny(decide_at(Risk::Low, true, p.section("w"), ReadOnly)));
        assert!(!offered(Risk::Low, true, p.section("w"), ReadOnly));
        assert!(offered(Risk::Low, false, p.section("r"), ReadOnly));
        assert!(offered(Risk::Low, true, p.section("w"), Supervised));
        // Irreversible: a human even for a low-risk call at full autonomy,
        // and even for a call the tool reports without side effects.
        let p = PolicyFile::parse("[tools.x]\nirreversible = true\n[tools.h]\n")
            .unwrap()
            .check("/h")
            .unwrap();
        assert_eq!(p.autonomy, Autonomous);
        assert!(approve(decide(Risk::Low, true, p.section("x"))));
        assert!(approve(decide(Risk::Low, false, p.section("x"))));
        // High risk: a human at every level where it is offered at all.
        for a in [Supervised, Autonomous] {
            assert!(approve(decide_at(Risk::High, true, p.section("h"), a)));
            assert!(approve(decide_at(Risk::High, false, p.section("h"), a)));
        }
        assert!(deny(decide_at(Risk::High, true, p.section("h"), ReadOnly)));
        // Not listed: denied at every level, never offered.
        for a in [ReadOnly, Supervised, Autonomous] {
            assert!(deny(decide_at(Risk::Low, false, p.section("zz"), a)));
            assert!(!offered(Risk::Low, false, p.section("zz"), a));
        }
        assert!(PolicyFile::parse("[agent]\nautonomy = \"yolo\"\n").is_err());
        assert_eq!("read_only".parse::<Autonomy>(), Ok(ReadOnly));
        assert!("full".parse::<Autonomy>().is_err());
    }

    #[test]
    fn refusals() {
        assert!(matches!(
            PolicyFile::parse("tols = 1"),
            Err(PolicyError::Toml(_))
        ));
        assert!(matches!(
            PolicyFile::parse("[tools.a]\ngrant = []"),
            Err(PolicyError::Toml(_))
        ));
        let f = PolicyFile::parse("[tools.a]\ngrants = [\"fs:read:*\"]").unwrap();
        assert!(matches!(
            f.check("/h"),
            Err(PolicyError::NotConcrete { .. })
        ));
        let f = PolicyFile::parse("[tools.a]\ngrants = [\"fs:read:/x/*.md\"]").unwrap();
        assert!(matches!(f.check("/h"), Err(PolicyError::Capability { .. })));
        let f = PolicyFile::parse("[tools.A]\ngrants = []").unwrap();
        assert!(matches!(f.check("/h"), Err(PolicyError::BadToolName(_))));
        let f = PolicyFile::parse("[limits]\nfuel = 0").unwrap();
        assert!(matches!(f.check("/h"), Err(PolicyError::ZeroLimit("fuel"))));
        let f = PolicyFile::parse("[tools.a]\ngrants = [\"fs:read:~/x/**\"]").unwrap();
        assert!(f.check("relative").is_err());
    }

    #[test]
    fn env_secrets_and_net() {
        let f = PolicyFile::parse(
            r#"
            [tools.a]
            grants = ["env:LANG", "secret:gh@api.github.com", "net:https:api.github.com"]
            [env]
            LANG = "C.UTF-8"
            [secrets.gh]
            value = "ghp_SUPERSECRET"
            prefix = "Bearer "
            [net]
            max_response_bytes = 1000
            hosts = { "Api.Test." = ["127.0.0.1", "::1"] }
            "#,
        )
        .unwrap();
        let p = f.check("/h").unwrap();
        assert_eq!(p.env["LANG"], "C.UTF-8");
        let s = &p.secrets["gh"];
        assert_eq!(s.header, "authorization");
        assert_eq!(s.prefix, "Bearer ");
        assert!(matches!(&s.source, SecretSource::Value(v) if v.expose() == "ghp_SUPERSECRET"));
        assert_eq!(p.net.max_response_bytes, 1000);
        assert_eq!(p.net.hosts["api.test"].len(), 2);
        // The secret never shows in Debug output of the file or the policy.
        assert!(!format!("{f:?}{p:?}").contains("SUPERSECRET"));
    }

    #[test]
    fn env_secrets_and_net_refusals() {
        let check = |t: &str| PolicyFile::parse(t).and_then(|f| f.check("/h"));
        // Grants without values.
        assert!(matches!(
            check("[tools.a]\ngrants = [\"env:HOME\"]"),
            Err(PolicyError::Env(_))
        ));
        assert!(matches!(
            check("[tools.a]\ngrants = [\"secret:k@x.com\"]"),
            Err(PolicyError::Secret(_))
        ));
        // Bad sections.
        assert!(check("[env]\n\"1X\" = \"v\"").is_err());
        assert!(check("[secrets.k]\nvalue = \"a\"\nenv = \"B\"").is_err());
        assert!(check("[secrets.k]\n").is_err());
        assert!(check("[secrets.k]\nvalue = \"\"").is_err());
        let e = check("[secrets.k]\nvalue = \"line\\nbreak-SUPERSECRET\"").unwrap_err();
        assert!(!e.to_string().contains("SUPERSECRET"), "{e}");
        assert!(check("[secrets.k]\nvalue = \"v\"\nheader = \"host\"").is_err());
        assert!(check("[secrets.k]\nvalue = \"v\"\nheader = \"bad header\"").is_err());
        assert!(check("[secrets.k]\nvalue = \"v\"\nheadr = \"x\"").is_err());
        assert!(check("[net]\nmax_response_bytes = 0").is_err());
        assert!(check("[net]\nhosts = { \"a.test\" = [\"2130706433\"] }").is_err());
        assert!(check("[net]\nhosts = { \"*.test\" = [\"127.0.0.1\"] }").is_err());
        assert!(check("[net]\nhosts = { \"127.0.0.1\" = [\"127.0.0.1\"] }").is_err());
        assert!(check("[net]\nhosts = { \"a.test\" = [] }").is_err());
        assert!(check("[net]\nproxy = \"x\"").is_err());
    }
}
