//! The capability-string grammar (DESIGN §3), parsed into typed values.
//!
//! ```text
//! capability := fs | net | env | secret | kv | llm | mem
//! fs         := "fs:" ("read" | "write") ":" ( "*" | dir "/**" )
//! dir        := "/" | "/" segment ("/" segment)* | "~" ("/" segment)*
//! net        := "net:" ("http" | "https") ":" ( "*" | host [":" port] )
//! host       := dns-name | "*." dns-name | ipv4 | "[" ipv6 "]"
//! env        := "env:" NAME                  NAME  := [A-Za-z_][A-Za-z0-9_]{0,127}
//! secret     := "secret:" ident "@" host     ident := [a-z0-9][a-z0-9_-]{0,63}
//! kv         := "kv:" ident
//! llm        := "llm:" ( "*" | tier [ ":" max-tokens ] )
//! tier       := ident                        max-tokens := [1-9][0-9]{0,6} (at most 1000000)
//! mem        := "mem:" ( "*" | ident ) [ ":" ( "read" | "write" ) ]   (no suffix: read and write)
//! ```
//!
//! `*` in place of the place (`fs:write:*`, `net:https:*`) is only meaningful in
//! what a *tool* requires: "any place of this kind the operator grants". The
//! operator's grants are always concrete ([`Capability::is_concrete`]).
//!
//! Anything else is refused with a [`CapabilityError`] saying why: finer globs
//! (`/data/*.md`, a preopen is a directory), relative paths, `.`/`..` or empty
//! segments, NUL and control bytes, empty hosts, `*` alone as a host, a
//! wildcard not in the leading label, non-canonical IPv4 forms (`0x7f.1`,
//! `2130706433`, `0177.0.0.1`), ports outside 1..=65535.
//!
//! Parsing normalises DNS names to lowercase without a trailing dot, so that
//! `Display` followed by `parse` gives back an equal value.

use std::fmt;
use std::net::{Ipv4Addr, Ipv6Addr};
use std::str::FromStr;

/// Largest per-call output-token cap an `llm:<tier>:<max-tokens>` grant may
/// name.
pub const MAX_LLM_TOKENS: u32 = 1_000_000;

/// Maximum length of a capability string, in bytes.
pub const MAX_CAPABILITY_LEN: usize = 4096;

/// Why a capability string was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid capability `{input}`: {reason}")]
pub struct CapabilityError {
    /// The string as given (truncated to 200 characters).
    pub input: String,
    /// What is wrong with it.
    pub reason: String,
}

impl CapabilityError {
    fn new(input: &str, reason: impl Into<String>) -> Self {
        let input: String = input.chars().take(200).collect();
        CapabilityError {
            input,
            reason: reason.into(),
        }
    }
}

/// Read-only or read-write access to a directory subtree.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum FsAccess {
    /// `fs:read`: files and directories can be read and listed.
    Read,
    /// `fs:write`: read, create, modify, rename and delete.
    Write,
}

impl FsAccess {
    fn as_str(self) -> &'static str {
        match self {
            FsAccess::Read => "read",
            FsAccess::Write => "write",
        }
    }
}

/// The directory of an `fs:*` capability.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum FsDir {
    /// An absolute, normalised path: `/` or `/a/b` (no trailing slash).
    Absolute(String),
    /// A path under the operator's configured home: `~` (empty string) or
    /// `~/a/b` (stored as `a/b`). Expanded by [`FsDir::expand`] at policy load,
    /// never by the guest.
    Home(String),
}

impl FsDir {
    /// Replace `~` by `home` (an absolute, normalised directory such as
    /// `/srv/agent`). Returns the absolute path.
    ///
    /// # Errors
    /// [`CapabilityError`] when `home` is not absolute and normalised.
    pub fn expand(&self, home: &str) -> Result<String, CapabilityError> {
        match self {
            FsDir::Absolute(p) => Ok(p.clone()),
            FsDir::Home(rel) => {
                parse_abs_dir(home, home)?;
                if rel.is_empty() {
                    Ok(home.to_string())
                } else if home == "/" {
                    Ok(format!("/{rel}"))
                } else {
                    Ok(format!("{home}/{rel}"))
                }
            }
        }
    }

    /// The absolute path, if this directory does not depend on the home.
    pub fn as_absolute(&self) -> Option<&str> {
        match self {
            FsDir::Absolute(p) => Some(p),
            FsDir::Home(_) => None,
        }
    }
}

impl fmt::Display for FsDir {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            FsDir::Absolute(p) => f.write_str(p),
            FsDir::Home(rel) if rel.is_empty() => f.write_str("~"),
            FsDir::Home(rel) => write!(f, "~/{rel}"),
        }
    }
}

/// `http` or `https`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Scheme {
    /// Plain HTTP, default port 80.
    Http,
    /// HTTP over TLS, default port 443.
    Https,
}

impl Scheme {
    /// The URL scheme name.
    pub fn as_str(self) -> &'static str {
        match self {
            Scheme::Http => "http",
            Scheme::Https => "https",
        }
    }

    /// The default port: 80 or 443.
    pub fn default_port(self) -> u16 {
        match self {
            Scheme::Http => 80,
            Scheme::Https => 443,
        }
    }
}

/// A host in a `net:` or `secret:` capability.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum HostPattern {
    /// A DNS name, lowercase, without trailing dot: `api.example.com`.
    Dns(String),
    /// `*.example.com`, stored as `example.com`: matches names with exactly one
    /// more label (`a.example.com`, not `example.com`, not `a.b.example.com`),
    /// like a TLS wildcard certificate (RFC 6125 §6.4.3).
    Wildcard(String),
    /// An IPv4 literal in dotted-quad form.
    Ipv4(Ipv4Addr),
    /// An IPv6 literal, written in brackets.
    Ipv6(Ipv6Addr),
}

impl HostPattern {
    /// Whether a concrete host name or IP literal (as it appears in a URL,
    /// lowercase, IPv6 without brackets) is matched by this pattern.
    pub fn matches_host(&self, host: &str) -> bool {
        let host = host.strip_suffix('.').unwrap_or(host);
        match self {
            HostPattern::Dns(d) => d.eq_ignore_ascii_case(host),
            HostPattern::Wildcard(suffix) => {
                let host = host.to_ascii_lowercase();
                match host.split_once('.') {
                    Some((label, rest)) => {
                        !label.is_empty() && rest == suffix && is_dns_label(label)
                    }
                    None => false,
                }
            }
            HostPattern::Ipv4(ip) => host.parse::<Ipv4Addr>().ok() == Some(*ip),
            HostPattern::Ipv6(ip) => {
                let h = host.trim_start_matches('[').trim_end_matches(']');
                h.parse::<Ipv6Addr>().ok() == Some(*ip)
            }
        }
    }

    /// Whether every host matched by `other` is matched by `self`.
    pub fn covers(&self, other: &HostPattern) -> bool {
        match (self, other) {
            (a, b) if a == b => true,
            (HostPattern::Wildcard(_), HostPattern::Dns(d)) => self.matches_host(d),
            _ => false,
        }
    }

    /// True for IP literals (which the net guard lets through its
    /// private-address filter, because the operator named them).
    pub fn is_ip_literal(&self) -> bool {
        matches!(self, HostPattern::Ipv4(_) | HostPattern::Ipv6(_))
    }
}

impl fmt::Display for HostPattern {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            HostPattern::Dns(d) => f.write_str(d),
            HostPattern::Wildcard(s) => write!(f, "*.{s}"),
            HostPattern::Ipv4(ip) => write!(f, "{ip}"),
            HostPattern::Ipv6(ip) => write!(f, "[{ip}]"),
        }
    }
}

/// Host and optional port of a `net:` capability.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct NetTarget {
    /// The host or host pattern.
    pub host: HostPattern,
    /// The port; `None` means the scheme's default port.
    pub port: Option<u16>,
}

impl NetTarget {
    /// The port this target allows for `scheme`.
    pub fn effective_port(&self, scheme: Scheme) -> u16 {
        self.port.unwrap_or(scheme.default_port())
    }
}

/// "Any place of this kind" (`*`, only in what a tool requires) or a concrete
/// place.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Place<T> {
    /// `*`: whatever concrete place of this kind the operator grants.
    Any,
    /// A concrete place.
    Concrete(T),
}

/// One parsed capability.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Capability {
    /// `fs:read:<dir>/**` or `fs:write:<dir>/**`: one WASI preopen.
    Fs {
        /// Read-only or read-write.
        access: FsAccess,
        /// The directory subtree.
        dir: Place<FsDir>,
    },
    /// `net:http:<host>[:<port>]` or `net:https:...`: outgoing HTTP(S).
    Net {
        /// `http` or `https`.
        scheme: Scheme,
        /// Host pattern and port.
        target: Place<NetTarget>,
    },
    /// `env:<NAME>`: one environment variable, value from the operator's config.
    Env {
        /// The variable's name.
        name: String,
    },
    /// `secret:<name>@<host>`: a credential injected by the host as a header
    /// on requests to `host`; the guest never sees it.
    Secret {
        /// The secret's name in the operator's config.
        name: String,
        /// Requests to this host get the secret.
        host: HostPattern,
    },
    /// `kv:<namespace>`: a host key-value namespace.
    Kv {
        /// The namespace.
        namespace: String,
    },
    /// `mem:<namespace>[:read|:write]`: the host's memory (episodes and
    /// facts) of one namespace (`mem:*` in what a tool requires: any
    /// namespace the operator grants); no suffix is read and write.
    Mem {
        /// The namespace, or `*`.
        namespace: Place<String>,
        /// What the grant allows.
        access: MemAccess,
    },
    /// `llm:<tier>[:<max-tokens>]`: sub-questions to the host's model
    /// provider at a tier (`llm:*` in what a tool requires: any tier the
    /// operator grants), each answer capped at `max_tokens` output tokens.
    Llm {
        /// The tier name, or `*`.
        tier: Place<String>,
        /// Most output tokens per call (`None`: the host's default).
        max_tokens: Option<u32>,
    },
}

impl Capability {
    /// Parse one capability string. See the module documentation for the
    /// grammar.
    ///
    /// # Errors
    /// [`CapabilityError`] naming what is wrong.
    pub fn parse(input: &str) -> Result<Capability, CapabilityError> {
        if input.len() > MAX_CAPABILITY_LEN {
            return Err(CapabilityError::new(input, "longer than 4096 bytes"));
        }
        if let Some(c) = input.chars().find(|c| c.is_control()) {
            return Err(CapabilityError::new(
                input,
                format!("contains the control character {c:?}"),
            ));
        }
        if input.trim() != input {
            return Err(CapabilityError::new(
                input,
                "leading or trailing whitespace",
            ));
        }
        let (kind, rest) = input
            .split_once(':')
            .ok_or_else(|| CapabilityError::new(input, "expected `<kind>:...`"))?;
        match kind {
            "fs" => parse_fs(input, rest),
            "net" => parse_net(input, rest),
            "env" => {
                if !is_env_name(rest) {
                    return Err(CapabilityError::new(
                        input,
                        "environment variable names are [A-Za-z_][A-Za-z0-9_]*, at most 128 characters",
                    ));
                }
                Ok(Capability::Env {
                    name: rest.to_string(),
                })
            }
            "secret" => {
                let (name, host) = rest.split_once('@').ok_or_else(|| {
                    CapabilityError::new(input, "expected `secret:<name>@<host>`")
                })?;
                if !is_ident(name) {
                    return Err(CapabilityError::new(
                        input,
                        "secret names are [a-z0-9][a-z0-9_-]*, at most 64 characters",
                    ));
                }
                let host = parse_host(input, host)?;
                Ok(Capability::Secret {
                    name: name.to_string(),
                    host,
                })
            }
            "kv" => {
                if !is_ident(rest) {
                    return Err(CapabilityError::new(
                        input,
                        "kv namespaces are [a-z0-9][a-z0-9_-]*, at most 64 characters",
                    ));
                }
                Ok(Capability::Kv {
                    namespace: rest.to_string(),
                })
            }
            "llm" => parse_llm(input, rest),
            "mem" => parse_mem(input, rest),
            other => Err(CapabilityError::new(
                input,
                format!(
                    "unknown kind `{}` (expected fs, net, env, secret, kv, llm or mem)",
                    other.chars().take(40).collect::<String>()
                ),
            )),
        }
    }

    /// True unless the place is `*` (a tool's "any place of this kind").
    pub fn is_concrete(&self) -> bool {
        !matches!(
            self,
            Capability::Fs {
                dir: Place::Any,
                ..
            } | Capability::Net {
                target: Place::Any,
                ..
            } | Capability::Llm {
                tier: Place::Any,
                ..
            } | Capability::Mem {
                namespace: Place::Any,
                ..
            }
        )
    }

    /// The kind prefix: `fs`, `net`, `env`, `secret`, `kv`, `llm` or `mem`.
    pub fn kind(&self) -> &'static str {
        match self {
            Capability::Fs { .. } => "fs",
            Capability::Net { .. } => "net",
            Capability::Env { .. } => "env",
            Capability::Secret { .. } => "secret",
            Capability::Kv { .. } => "kv",
            Capability::Llm { .. } => "llm",
            Capability::Mem { .. } => "mem",
        }
    }
}

/// What a `mem:` capability allows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum MemAccess {
    /// `:read`: search episodes and facts.
    Read,
    /// `:write`: propose facts (the operator approves them).
    Write,
    /// No suffix: both.
    ReadWrite,
}

impl MemAccess {
    /// Whether this access includes everything `other` does.
    pub fn covers(self, other: MemAccess) -> bool {
        self == MemAccess::ReadWrite || self == other
    }

    /// Whether it allows reading.
    pub fn reads(self) -> bool {
        matches!(self, MemAccess::Read | MemAccess::ReadWrite)
    }

    /// Whether it allows writing.
    pub fn writes(self) -> bool {
        matches!(self, MemAccess::Write | MemAccess::ReadWrite)
    }
}

/// `mem:` after the kind: `*` or a namespace, then `:read`, `:write` or
/// nothing.
fn parse_mem(input: &str, rest: &str) -> Result<Capability, CapabilityError> {
    let (ns, access) = match rest.split_once(':') {
        Some((n, "read")) => (n, MemAccess::Read),
        Some((n, "write")) => (n, MemAccess::Write),
        Some(_) => {
            return Err(CapabilityError::new(
                input,
                "expected `mem:<namespace>`, `mem:<namespace>:read` or `mem:<namespace>:write`",
            ));
        }
        None => (rest, MemAccess::ReadWrite),
    };
    let namespace = if ns == "*" {
        Place::Any
    } else if is_ident(ns) {
        Place::Concrete(ns.to_string())
    } else {
        return Err(CapabilityError::new(
            input,
            "memory namespaces are [a-z0-9][a-z0-9_-]*, at most 64 characters (or `*` in a tool's requirement)",
        ));
    };
    Ok(Capability::Mem { namespace, access })
}

/// `llm:` after the kind: `*`, or a tier with an optional `:<max-tokens>`
/// (decimal, no sign, no leading zero, 1 to [`MAX_LLM_TOKENS`]).
fn parse_llm(input: &str, rest: &str) -> Result<Capability, CapabilityError> {
    if rest == "*" {
        return Ok(Capability::Llm {
            tier: Place::Any,
            max_tokens: None,
        });
    }
    let (tier, cap) = match rest.split_once(':') {
        Some((t, c)) => (t, Some(c)),
        None => (rest, None),
    };
    if !is_ident(tier) {
        return Err(CapabilityError::new(
            input,
            "llm tiers are [a-z0-9][a-z0-9_-]*, at most 64 characters (or `*` in a tool's requirement)",
        ));
    }
    let max_tokens = match cap {
        None => None,
        Some(c) => {
            let n = (!c.is_empty()
                && c.len() <= 7
                && !c.starts_with('0')
                && c.bytes().all(|b| b.is_ascii_digit()))
            .then(|| c.parse::<u32>().ok())
            .flatten()
            .filter(|n| (1..=MAX_LLM_TOKENS).contains(n))
            .ok_or_else(|| {
                CapabilityError::new(
                    input,
                    format!(
                        "the token cap after `llm:<tier>:` is a decimal number from 1 to {MAX_LLM_TOKENS}, without sign or leading zero"
                    ),
                )
            })?;
            Some(n)
        }
    };
    Ok(Capability::Llm {
        tier: Place::Concrete(tier.to_string()),
        max_tokens,
    })
}

impl FromStr for Capability {
    type Err = CapabilityError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Capability::parse(s)
    }
}

impl fmt::Display for Capability {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Capability::Fs { access, dir } => match dir {
                Place::Any => write!(f, "fs:{}:*", access.as_str()),
                Place::Concrete(FsDir::Absolute(p)) if p == "/" => {
                    write!(f, "fs:{}:/**", access.as_str())
                }
                Place::Concrete(d) => write!(f, "fs:{}:{d}/**", access.as_str()),
            },
            Capability::Net { scheme, target } => match target {
                Place::Any => write!(f, "net:{}:*", scheme.as_str()),
                Place::Concrete(NetTarget { host, port: None }) => {
                    write!(f, "net:{}:{host}", scheme.as_str())
                }
                Place::Concrete(NetTarget {
                    host,
                    port: Some(p),
                }) => write!(f, "net:{}:{host}:{p}", scheme.as_str()),
            },
            Capability::Env { name } => write!(f, "env:{name}"),
            Capability::Secret { name, host } => write!(f, "secret:{name}@{host}"),
            Capability::Kv { namespace } => write!(f, "kv:{namespace}"),
            Capability::Mem { namespace, access } => {
                match namespace {
                    Place::Any => f.write_str("mem:*")?,
                    Place::Concrete(n) => write!(f, "mem:{n}")?,
                }
                match access {
                    MemAccess::Read => f.write_str(":read"),
                    MemAccess::Write => f.write_str(":write"),
                    MemAccess::ReadWrite => Ok(()),
                }
            }
            Capability::Llm { tier, max_tokens } => {
                match tier {
                    Place::Any => f.write_str("llm:*")?,
                    Place::Concrete(t) => write!(f, "llm:{t}")?,
                }
                match max_tokens {
                    Some(n) => write!(f, ":{n}"),
                    None => Ok(()),
                }
            }
        }
    }
}

impl serde::Serialize for Capability {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> serde::Deserialize<'de> for Capability {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        Capability::parse(&s).map_err(serde::de::Error::custom)
    }
}

mod parse;
#[cfg(test)]
mod tests;

use parse::*;
pub(crate) use parse::{is_env_name, is_ident};
pub use parse::{is_public_suffix, parse_dotted_quad};
