//! Model provider configuration and the provider attempt order (seed 003,
//! "Proveedores de modelo", "Orden de proveedores y respaldo", "Política de
//! datos: ALLOWED_PROVIDERS"). Pure: the host reads the environment and
//! passes what it found.
//!
//! ```toml
//! [agent]
//! autonomy = "autonomous"                 # read_only | supervised | autonomous
//! script = "script.json"                  # the scripted provider's default script
//! provider_order = ["anthropic", "local"] # global order (then the others by name)
//! allowed_providers = ["anthropic", "local"]  # operator ceiling (default: every provider)
//! max_tokens = 4096                       # output tokens per model call
//! retries = 2                             # retries of one provider on 429/5xx/timeouts
//! backoff_ms = 500                        # first backoff, doubled each retry
//! max_backoff_ms = 8000                   # longest wait, Retry-After included
//! timeout_ms = 120000                     # one HTTP request
//! tool_choice = "auto"                    # auto | required | none | tool:NAME (super::tool_choice)
//! max_tool_calls = 1                      # then the model is asked for its answer (default: no limit)
//! max_result_bytes = 2048                 # of one tool result shown to the model (default 2048, at most 1 MiB)
//!
//! [agent.provider_order_by_role]          # per role or call kind, tried first
//! plan = ["anthropic"]
//!
//! [providers.anthropic]
//! kind = "anthropic"                      # anthropic | openai | scripted
//! model = "claude-sonnet-4-5"
//! cheap_model = "claude-haiku-4-5"        # the cheaper tier (soft budget cap)
//! api_key_env = "ANTHROPIC_API_KEY"       # default for kind anthropic
//!
//! [providers.local]
//! kind = "openai"                         # any OpenAI-compatible chat completions API
//! base_url = "http://127.0.0.1:8080/v1"   # llama.cpp, vLLM, Ollama, DeepSeek, Kimi...
//! model = "qwen2.5-7b-instruct"
//! keyless = true                          # sends no Authorization header
//! forced_call = "json_schema"             # a forced tool call as a JSON Schema answer (llama.cpp);
//!                                          # "json_schema_always": every answer (a call or a bounded final answer)
//! temperature = 0.7                       # sampling temperature, 0 to 2 (default: the server's)
//! ```
//!
//! API keys are never written in the file: `api_key_env` names the
//! environment variable holding one, or `api_key_sealed` names a key an
//! organisation brought, sealed in the state store under `CAPSAGA_KEK`
//! (`capsaga keys add NAME`; `capsaga_secrets::sealed`). A provider whose key is not
//! available is *declared* but not *configured*, and is skipped.
//!
//! The attempt order of one call ([`attempt_order`]): each source adds only
//! providers not already listed, so every configured and allowed provider
//! ends up as a fallback: the order for the call's role (environment
//! `CAPSAGA_PROVIDER_ORDER_<ROLE>`, else `provider_order_by_role`), the
//! request's preferred providers, the global order (environment
//! `CAPSAGA_PROVIDER_ORDER`, else `provider_order`), then every other
//! configured provider in name order. Then the allowlist is applied:
//! the operator's (`allowed_providers`, narrowed again by the environment's
//! `CAPSAGA_ALLOWED_PROVIDERS`) intersected with the request's. A request can
//! narrow the set, never widen it; `none` is the empty list. Nothing allowed
//! is an explicit [`NoAllowedProvider`] error, and nothing is sent.

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// The `[agent]` section.
#[derive(Debug, Clone, PartialEq, Default, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct AgentSection {
    /// Autonomy level.
    #[serde(default)]
    pub autonomy: super::decide::Autonomy,
    /// Default script of the scripted provider (relative to the file).
    pub script: Option<String>,
    /// Global provider order.
    #[serde(default)]
    pub provider_order: Vec<String>,
    /// Provider order per role or call kind (keys lower case).
    #[serde(default)]
    pub provider_order_by_role: BTreeMap<String, Vec<String>>,
    /// The operator's ceiling of providers (absent: every provider).
    pub allowed_providers: Option<Vec<String>>,
    /// Output tokens per model call (default [`DEFAULT_MAX_TOKENS`]).
    pub max_tokens: Option<u32>,
    /// Retries of one provider on a retriable failure (default 2).
    pub retries: Option<u32>,
    /// First backoff, milliseconds (default 500), doubled each retry.
    pub backoff_ms: Option<u64>,
    /// Longest wait before a retry, milliseconds (default 8000); a
    /// `Retry-After` longer than this moves on to the next provider.
    pub max_backoff_ms: Option<u64>,
    /// Timeout of one HTTP request, milliseconds (default 120000).
    pub timeout_ms: Option<u64>,
    /// Whether the first model call of a turn must call a tool (default
    /// `auto`; see [`super::tool_choice`]).
    pub tool_choice: Option<super::tool_choice::ToolChoice>,
    /// Most tool calls one turn makes, an invalid call (refused by the
    /// door before it runs) not counted (default: no limit but the turn's
    /// model calls). Once reached, the model is asked for its answer
    /// (`tool_choice` `none`) and a further call is refused unrun.
    pub max_tool_calls: Option<u32>,
    /// Most bytes of one tool result shown to the model (default 2048; at
    /// most 1 MiB): a longer result is cut with a note giving its size.
    pub max_result_bytes: Option<u32>,
}

/// Most bytes of one tool result the operator may show the model
/// (`[agent] max_result_bytes`).
pub const MAX_RESULT_BYTES_CEILING: u32 = 1024 * 1024;

/// Default output tokens per model call.
pub const DEFAULT_MAX_TOKENS: u32 = 4096;

/// Retry settings, defaults filled.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RetrySettings {
    /// Retries per provider.
    pub retries: u32,
    /// First backoff, ms.
    pub backoff_ms: u64,
    /// Longest backoff, ms.
    pub max_backoff_ms: u64,
    /// HTTP timeout, ms.
    pub timeout_ms: u64,
}

impl AgentSection {
    /// Retry settings with defaults.
    pub fn retry_settings(&self) -> RetrySettings {
        RetrySettings {
            retries: self.retries.unwrap_or(2),
            backoff_ms: self.backoff_ms.unwrap_or(500),
            max_backoff_ms: self.max_backoff_ms.unwrap_or(8000),
            timeout_ms: self.timeout_ms.unwrap_or(120_000),
        }
    }

    /// Check the section against the declared providers.
    ///
    /// # Errors
    /// [`ProviderConfigError`] for the first problem.
    pub fn check(
        &self,
        providers: &BTreeMap<String, ProviderSection>,
    ) -> Result<(), ProviderConfigError> {
        for (name, p) in providers {
            p.check(name)?;
        }
        let known = |list: &[String], what: &str| -> Result<(), ProviderConfigError> {
            for n in list {
                if n != "none" && !providers.contains_key(n) {
                    return Err(ProviderConfigError::UnknownProvider {
                        name: clip(n),
                        what: what.to_string(),
                    });
                }
            }
            Ok(())
        };
        known(&self.provider_order, "provider_order")?;
        if let Some(a) = &self.allowed_providers {
            known(a, "allowed_providers")?;
        }
        for (role, list) in &self.provider_order_by_role {
            if !is_role_name(role) {
                return Err(ProviderConfigError::BadRole(clip(role)));
            }
            known(list, &format!("provider_order_by_role.{role}"))?;
        }
        if self.max_tokens == Some(0) {
            return Err(ProviderConfigError::Zero("max_tokens"));
        }
        if self.timeout_ms == Some(0) {
            return Err(ProviderConfigError::Zero("timeout_ms"));
        }
        Ok(())
    }
}

/// A role or call-kind name: lower-case ASCII letters, digits and `_`.
pub fn is_role_name(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 64
        && s.bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_')
}

/// Which wire format a provider speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ProviderKind {
    /// OpenAI-compatible chat completions (`POST {base_url}/chat/completions`).
    Openai,
    /// Anthropic Messages (`POST {base_url}/v1/messages`).
    Anthropic,
    /// The scripted provider (no network).
    Scripted,
}

impl ProviderKind {
    /// The default base URL.
    pub fn default_base_url(self) -> Option<&'static str> {
        match self {
            ProviderKind::Openai => Some("https://api.openai.com/v1"),
            ProviderKind::Anthropic => Some("https://api.anthropic.com"),
            ProviderKind::Scripted => None,
        }
    }

    /// The default environment variable of the API key.
    pub fn default_key_env(self) -> Option<&'static str> {
        match self {
            ProviderKind::Openai => Some("OPENAI_API_KEY"),
            ProviderKind::Anthropic => Some("ANTHROPIC_API_KEY"),
            ProviderKind::Scripted => None,
        }
    }
}

/// Which field carries the output-token limit in an OpenAI-compatible
/// request: `max_tokens` (DeepSeek, vLLM, llama.cpp, Ollama, older OpenAI
/// models) or `max_completion_tokens` (current OpenAI models).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum MaxTokensField {
    /// `max_tokens`.
    #[default]
    MaxTokens,
    /// `max_completion_tokens`.
    MaxCompletionTokens,
}

/// How an OpenAI-compatible provider is sent a forced tool call
/// (`tool_choice` `required` or `tool:NAME`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ForcedCall {
    /// The API's own `tool_choice` (OpenAI and most servers).
    #[default]
    Native,
    /// No tools in that request; a `response_format` JSON Schema of the
    /// call (`{"name": <one of the tools>, "arguments": <its schema>}`)
    /// instead, read back as the tool call. For servers that constrain a
    /// JSON Schema from the first token but let free text precede a
    /// forced call, or ignore a named one (llama.cpp's `llama-server`).
    JsonSchema,
    /// As [`ForcedCall::JsonSchema`], and every other request of the turn
    /// too: its answer must be a call of an offered tool (none under
    /// `tool_choice = none`) or a final answer `{"answer": "..."}` whose
    /// length the schema bounds to fit the request's `max_tokens`
    /// (`max_tokens / 3` characters, less the JSON around it). For small
    /// local models that do not stop by themselves: their answer cannot run
    /// into the token limit, which would end the turn `truncated` and roll
    /// its saga back. Once the model repeats a call it made before (same
    /// tool, same arguments), the next request offers only the final answer
    /// (a small model held to JSON tends to call again until the step limit
    /// rolls the turn back).
    JsonSchemaAlways,
}

/// One `[providers.<name>]` section.
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct ProviderSection {
    /// Wire format.
    pub kind: ProviderKind,
    /// Base URL (default per kind).
    pub base_url: Option<String>,
    /// Model of the normal tier (required except for scripted).
    pub model: Option<String>,
    /// Model of the cheaper tier, used past a soft budget cap.
    pub cheap_model: Option<String>,
    /// Environment variable holding the API key (default per kind).
    pub api_key_env: Option<String>,
    /// The name of a provider key sealed in the state store (`capsaga keys
    /// add NAME`), opened with `CAPSAGA_KEK` for each turn; excludes
    /// `api_key_env` and `keyless`.
    pub api_key_sealed: Option<String>,
    /// The endpoint needs no key (local servers); no auth header is sent.
    #[serde(default)]
    pub keyless: bool,
    /// OpenAI-compatible only: the output-token field.
    #[serde(default)]
    pub max_tokens_field: MaxTokensField,
    /// OpenAI-compatible only: how a forced tool call is sent (default
    /// `native`; `json_schema` or `json_schema_always` for llama-server).
    #[serde(default)]
    pub forced_call: ForcedCall,
    /// OpenAI-compatible only: the sampling `temperature` sent with every
    /// request, 0 to 2 (default: none sent, the server's own). A small
    /// local model decoding greedily (0) can loop inside an open JSON
    /// object until its token limit; a little randomness breaks the loop.
    pub temperature: Option<f64>,
    /// Anthropic only: the `anthropic-version` header (default `2023-06-01`).
    pub anthropic_version: Option<String>,
    /// Scripted only: the script file (relative to the policy file).
    pub script: Option<String>,
}

/// The default `anthropic-version` header.
pub const ANTHROPIC_VERSION: &str = "2023-06-01";

impl ProviderSection {
    /// The base URL, without a trailing `/`.
    pub fn base_url(&self) -> Option<String> {
        self.base_url
            .as_deref()
            .or(self.kind.default_base_url())
            .map(|u| u.trim_end_matches('/').to_string())
    }

    /// Whether the provider is a local one: `keyless` (a server on this
    /// machine or network, such as llama.cpp's or Ollama) or scripted. Its
    /// model costs nothing unless the policy's own price table names it (see
    /// [`crate::budget`]); a keyless proxy to a paid API belongs in that
    /// table.
    pub fn is_local(&self) -> bool {
        self.kind == ProviderKind::Scripted || self.keyless
    }

    /// The environment variable of the key, unless keyless or scripted.
    pub fn key_env(&self) -> Option<String> {
        if self.keyless || self.api_key_sealed.is_some() {
            return None;
        }
        self.api_key_env
            .clone()
            .or_else(|| self.kind.default_key_env().map(str::to_string))
    }

    fn check(&self, name: &str) -> Result<(), ProviderConfigError> {
        if !is_role_name(name) || name == "none" {
            return Err(ProviderConfigError::BadName(clip(name)));
        }
        let bad = |why: &str| ProviderConfigError::Section {
            name: name.to_string(),
            why: why.to_string(),
        };
        match self.kind {
            ProviderKind::Scripted => {
                if self.model.is_some()
                    || self.base_url.is_some()
                    || self.api_key_env.is_some()
                    || self.api_key_sealed.is_some()
                    || self.cheap_model.is_some()
                {
                    return Err(bad(
                        "a scripted provider takes only `script` (the model name is in the script)",
                    ));
                }
            }
            ProviderKind::Openai | ProviderKind::Anthropic => {
                if self.model.as_deref().is_none_or(str::is_empty) {
                    return Err(bad("`model` is required"));
                }
                if self.script.is_some() {
                    return Err(bad("`script` is only for kind = \"scripted\""));
                }
                let url = self.base_url().unwrap_or_default();
                if !(url.starts_with("https://") || url.starts_with("http://")) {
                    return Err(bad("`base_url` must be an http:// or https:// URL"));
                }
                if let Some(env) = &self.api_key_env
                    && (env.is_empty()
                        || !env.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_'))
                {
                    return Err(bad("`api_key_env` must name an environment variable"));
                }
                if self.keyless && self.api_key_env.is_some() {
                    return Err(bad("`keyless` and `api_key_env` exclude each other"));
                }
                if let Some(k) = &self.api_key_sealed {
                    if self.keyless || self.api_key_env.is_some() {
                        return Err(bad(
                            "`api_key_sealed` excludes `api_key_env` and `keyless` (one source of key)",
                        ));
                    }
                    if !capsaga_secrets::sealed::valid_key_name(k) {
                        return Err(bad(
                            "`api_key_sealed` must name a sealed key (lower-case letters, digits, `_`, `-`)",
                        ));
                    }
                }
            }
        }
        if let Some(t) = self.temperature {
            if self.kind != ProviderKind::Openai {
                return Err(bad("`temperature` is only for kind = \"openai\""));
            }
            if !(0.0..=2.0).contains(&t) {
                return Err(bad("`temperature` must be from 0 to 2"));
            }
        }
        if self.kind != ProviderKind::Anthropic && self.anthropic_version.is_some() {
            return Err(bad("`anthropic_version` is only for kind = \"anthropic\""));
        }
        Ok(())
    }
}

/// Why the provider configuration was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ProviderConfigError {
    /// A provider name that is not lower-case `[a-z0-9_]`.
    #[error("`{0}` is not a valid provider name (lower-case letters, digits, `_`; not `none`)")]
    BadName(String),
    /// A role name that is not lower-case `[a-z0-9_]`.
    #[error("`{0}` is not a valid role name (lower-case letters, digits, `_`)")]
    BadRole(String),
    /// A list names a provider with no section.
    #[error("{what} names `{name}`, which has no [providers.{name}] section")]
    UnknownProvider {
        /// The name.
        name: String,
        /// Which list.
        what: String,
    },
    /// A section is inconsistent.
    #[error("[providers.{name}]: {why}")]
    Section {
        /// The provider.
        name: String,
        /// What is wrong.
        why: String,
    },
    /// A setting of zero.
    #[error("[agent] {0} must be greater than zero")]
    Zero(&'static str),
}

fn clip(s: &str) -> String {
    s.chars().take(60).collect()
}

/// Parse a comma-separated provider list (`a, b`), `none` meaning the empty
/// list.
pub fn parse_list(s: &str) -> Vec<String> {
    let v: Vec<String> = s
        .split(',')
        .map(|p| p.trim().to_ascii_lowercase())
        .filter(|p| !p.is_empty())
        .collect();
    if v.iter().any(|p| p == "none") {
        Vec::new()
    } else {
        v
    }
}

/// Everything [`attempt_order`] needs for one call.
#[derive(Debug, Clone, Default)]
pub struct RouteInput<'a> {
    /// Configured providers (key present), in name order.
    pub configured: &'a [String],
    /// Order for the call's role, if any.
    pub role_order: Option<&'a [String]>,
    /// The request's preferred providers.
    pub preferred: &'a [String],
    /// The global order.
    pub global_order: &'a [String],
    /// Allowlists to intersect (operator's, environment's, request's); `None`
    /// entries do not restrict.
    pub allowlists: Vec<Option<&'a [String]>>,
}

/// No provider may answer this call.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, thiserror::Error)]
#[error(
    "no_allowed_provider: no allowed model provider is configured for this request; nothing was sent (allowed: [{}], configured: [{}])",
    allowed.join(", "),
    configured.join(", ")
)]
pub struct NoAllowedProvider {
    /// Always `no_allowed_provider`.
    pub code: &'static str,
    /// The effective allowlist (`None`: unrestricted).
    pub allowed: Vec<String>,
    /// The configured providers.
    pub configured: Vec<String>,
    /// Providers tried: always empty.
    pub providers_tried: Vec<String>,
}

/// The providers to try for one call, in order.
///
/// # Errors
/// [`NoAllowedProvider`] when the intersection of the allowlists and the
/// configured providers is empty.
pub fn attempt_order(input: &RouteInput<'_>) -> Result<Vec<String>, NoAllowedProvider> {
    let mut order: Vec<String> = Vec::new();
    let sources: [&[String]; 4] = [
        input.role_order.unwrap_or(&[]),
        input.preferred,
        input.global_order,
        input.configured,
    ];
    for src in sources {
        for p in src {
            if input.configured.contains(p) && !order.contains(p) {
                order.push(p.clone());
            }
        }
    }
    let mut allowed: Option<Vec<String>> = None;
    for list in input.allowlists.iter().flatten() {
        allowed = Some(match allowed {
            None => list.to_vec(),
            Some(prev) => prev.into_iter().filter(|p| list.contains(p)).collect(),
        });
    }
    if let Some(a) = &allowed {
        order.retain(|p| a.contains(p));
    }
    if order.is_empty() {
        return Err(NoAllowedProvider {
            code: "no_allowed_provider",
            allowed: allowed.unwrap_or_else(|| vec!["*".into()]),
            configured: input.configured.to_vec(),
            providers_tried: Vec::new(),
        });
    }
    Ok(order)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(v: &[&str]) -> Vec<String> {
        v.iter().map(|x| x.to_string()).collect()
    }

    #[test]
    fn order_sources_then_every_configured_fallback() {
        let configured = s(&["deepseek", "anthropic", "local"]);
        let role = s(&["local"]);
        let pref = s(&["anthropic", "unknown"]);
        let global = s(&["deepseek"]);
        let input = RouteInput {
            configured: &configured,
            role_order: Some(&role),
            preferred: &pref,
            global_order: &global,
            allowlists: vec![],
        };
        assert_eq!(
            attempt_order(&input).unwrap(),
            s(&["local", "anthropic", "deepseek"])
        );
    }

    #[test]
    fn allowlists_narrow_never_widen() {
        let configured = s(&["a", "b", "c"]);
        let operator = s(&["a", "b"]);
        let request = s(&["b", "c"]);
        let input = RouteInput {
            configured: &configured,
            allowlists: vec![Some(&operator), None, Some(&request)],
            ..Default::default()
        };
        // c is asked for by the request but not allowed by the operator.
        assert_eq!(attempt_order(&input).unwrap(), s(&["b"]));
        let none = parse_list("none");
        let input = RouteInput {
            configured: &configured,
            allowlists: vec![Some(&operator), Some(&none)],
            ..Default::default()
        };
        let e = attempt_order(&input).unwrap_err();
        assert_eq!(e.code, "no_allowed_provider");
        assert!(e.allowed.is_empty());
        assert!(e.to_string().contains("nothing was sent"), "{e}");
        // Allowed but not configured (no key): still nothing.
        let only_d = s(&["d"]);
        let input = RouteInput {
            configured: &configured,
            allowlists: vec![Some(&only_d)],
            ..Default::default()
        };
        assert!(attempt_order(&input).is_err());
        let empty: Vec<String> = vec![];
        let input = RouteInput {
            configured: &empty,
            ..Default::default()
        };
        assert!(attempt_order(&input).is_err());
    }

    #[test]
    fn local_providers() {
        let section = |extra: &str| -> ProviderSection {
            toml::from_str(&format!("kind = \"openai\"\nmodel = \"m\"\n{extra}")).unwrap()
        };
        assert!(section("keyless = true").is_local());
        assert!(!section("").is_local());
        // A loopback address is no proof of a free model (a proxy to a paid
        // API often listens there): only `keyless` says so.
        assert!(!section("base_url = \"http://127.0.0.1:4000/v1\"").is_local());
        let scripted: ProviderSection = toml::from_str("kind = \"scripted\"").unwrap();
        assert!(scripted.is_local());
    }

    #[test]
    fn lists_parse() {
        assert_eq!(parse_list(" A, b ,,"), s(&["a", "b"]));
        assert!(parse_list("a,none").is_empty());
    }

    #[test]
    fn sections_checked() {
        let parse = |t: &str| -> Result<(), String> {
            let f = crate::policy::PolicyFile::parse(t).map_err(|e| e.to_string())?;
            f.check("/h").map(|_| ()).map_err(|e| e.to_string())
        };
        assert!(parse("[providers.a]\nkind = \"openai\"\nmodel = \"m\"\n").is_ok());
        assert!(parse("[providers.a]\nkind = \"openai\"\n").is_err());
        let t = |v: &str, kind: &str| {
            parse(&format!(
                "[providers.a]\nkind = \"{kind}\"\nmodel = \"m\"\ntemperature = {v}\n"
            ))
        };
        assert!(t("0.0", "openai").is_ok());
        assert!(t("2.0", "openai").is_ok());
        for bad in ["-0.1", "2.5", "nan", "inf"] {
            assert!(t(bad, "openai").is_err(), "temperature {bad}");
        }
        assert!(t("0.7", "anthropic").is_err());
        assert!(
            parse("[providers.a]\nkind = \"openai\"\nmodel = \"m\"\napi_key = \"sk\"\n").is_err()
        );
        assert!(parse("[providers.a]\nkind = \"grok\"\nmodel = \"m\"\n").is_err());
        assert!(
            parse("[providers.a]\nkind = \"openai\"\nmodel = \"m\"\nbase_url = \"ftp://x\"\n")
                .is_err()
        );
        assert!(parse("[providers.A]\nkind = \"scripted\"\n").is_err());
        assert!(parse("[providers.s]\nkind = \"scripted\"\nmodel = \"m\"\n").is_err());
        assert!(parse("[agent]\nprovider_order = [\"x\"]\n").is_err());
        assert!(parse("[agent]\nallowed_providers = [\"none\"]\n").is_ok());
        assert!(parse("[agent]\nmax_tokens = 0\n").is_err());
        assert!(parse("[agent]\nretry = 1\n").is_err());
        assert!(
            parse("[providers.a]\nkind = \"anthropic\"\nmodel = \"m\"\n[agent.provider_order_by_role]\nPLAN = [\"a\"]\n")
                .is_err()
        );
    }
}
