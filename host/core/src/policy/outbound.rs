//! The outgoing side of the policy: `[env]` values, `[secrets.*]` and the
//! `[net]` settings of the host's HTTP client, checked at load.

use super::PolicyError;
use crate::capability::{Capability, Place};
use serde::Deserialize;
use std::collections::BTreeMap;

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

pub(super) fn check_env(
    env: &BTreeMap<String, String>,
) -> Result<BTreeMap<String, String>, PolicyError> {
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

pub(super) fn check_secrets(
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
        if let Some(why) = forbidden_header(&header, false) {
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

pub(super) fn check_net(n: &NetFile) -> Result<NetSettings, PolicyError> {
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

/// Why a header name may not be set by a guest, or `None` when it may.
/// `name` is compared case-insensitively.
///
/// Refused: `Host` (the host writes it from the checked URL), routing and
/// client-identity headers a proxy or back end may trust (`Forwarded`,
/// `X-Forwarded-*`, `X-Real-IP`, `X-Original-URL`, `X-Rewrite-URL`,
/// `X-Host`), hop-by-hop and framing headers (RFC 9110 §7.6.1:
/// `Connection`, `Keep-Alive`, `Proxy-Connection`, `Proxy-Authorization`,
/// `Proxy-Authenticate`, `TE`, `Trailer`, `Transfer-Encoding`, `Upgrade`,
/// `HTTP2-Settings`), and in a dry run the method-override headers that
/// would turn a GET into a write on servers that honour them.
pub fn forbidden_header(name: &str, dry_run: bool) -> Option<&'static str> {
    let n = name.to_ascii_lowercase();
    match n.as_str() {
        "host" => Some("the host sets Host from the checked URL"),
        "forwarded" | "x-real-ip" | "x-host" | "x-original-url" | "x-rewrite-url"
        | "x-forwarded-server" => Some("a routing or client-identity header"),
        _ if n.starts_with("x-forwarded-") => Some("a routing or client-identity header"),
        "connection"
        | "keep-alive"
        | "proxy-connection"
        | "proxy-authorization"
        | "proxy-authenticate"
        | "te"
        | "trailer"
        | "transfer-encoding"
        | "upgrade"
        | "http2-settings" => Some("a hop-by-hop or framing header"),
        "x-http-method-override" | "x-http-method" | "x-method-override" if dry_run => {
            Some("a method override, refused in a dry run")
        }
        _ => None,
    }
}
