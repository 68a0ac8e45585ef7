//! The capability-string grammar (DESIGN §3), parsed into typed values.
//!
//! ```text
//! capability := fs | net | env | secret | kv | llm
//! fs         := "fs:" ("read" | "write") ":" ( "*" | dir "/**" )
//! dir        := "/" | "/" segment ("/" segment)* | "~" ("/" segment)*
//! net        := "net:" ("http" | "https") ":" ( "*" | host [":" port] )
//! host       := dns-name | "*." dns-name | ipv4 | "[" ipv6 "]"
//! env        := "env:" NAME                  NAME  := [A-Za-z_][A-Za-z0-9_]{0,127}
//! secret     := "secret:" ident "@" host     ident := [a-z0-9][a-z0-9_-]{0,63}
//! kv         := "kv:" ident
//! llm        := "llm:" ident
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
    /// `llm:<tier>`: calls to the host's model provider at a tier.
    Llm {
        /// The tier name.
        tier: String,
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
            "llm" => {
                if !is_ident(rest) {
                    return Err(CapabilityError::new(
                        input,
                        "llm tiers are [a-z0-9][a-z0-9_-]*, at most 64 characters",
                    ));
                }
                Ok(Capability::Llm {
                    tier: rest.to_string(),
                })
            }
            other => Err(CapabilityError::new(
                input,
                format!(
                    "unknown kind `{}` (expected fs, net, env, secret, kv or llm)",
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
            }
        )
    }

    /// The kind prefix: `fs`, `net`, `env`, `secret`, `kv` or `llm`.
    pub fn kind(&self) -> &'static str {
        match self {
            Capability::Fs { .. } => "fs",
            Capability::Net { .. } => "net",
            Capability::Env { .. } => "env",
            Capability::Secret { .. } => "secret",
            Capability::Kv { .. } => "kv",
            Capability::Llm { .. } => "llm",
        }
    }
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
            Capability::Llm { tier } => write!(f, "llm:{tier}"),
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

fn parse_fs(input: &str, rest: &str) -> Result<Capability, CapabilityError> {
    let (access, place) = rest.split_once(':').ok_or_else(|| {
        CapabilityError::new(input, "expected `fs:read:<dir>/**` or `fs:write:<dir>/**`")
    })?;
    let access = match access {
        "read" => FsAccess::Read,
        "write" => FsAccess::Write,
        other => {
            return Err(CapabilityError::new(
                input,
                format!(
                    "fs access must be `read` or `write`, not `{}`",
                    other.chars().take(40).collect::<String>()
                ),
            ));
        }
    };
    if place == "*" {
        return Ok(Capability::Fs {
            access,
            dir: Place::Any,
        });
    }
    let dir = place.strip_suffix("/**").ok_or_else(|| {
        CapabilityError::new(
            input,
            "an fs grant names a whole directory subtree and must end in `/**` (finer globs such as `*.md` are refused: a preopen is a directory)",
        )
    })?;
    let dir = if dir.is_empty() {
        FsDir::Absolute("/".to_string())
    } else if dir == "~" {
        FsDir::Home(String::new())
    } else if let Some(rel) = dir.strip_prefix("~/") {
        check_segments(input, rel)?;
        FsDir::Home(rel.to_string())
    } else if dir.starts_with('/') {
        parse_abs_dir(input, dir)?;
        FsDir::Absolute(dir.to_string())
    } else {
        return Err(CapabilityError::new(
            input,
            "the directory must be absolute (`/...`) or start with `~` (the operator's home)",
        ));
    };
    Ok(Capability::Fs {
        access,
        dir: Place::Concrete(dir),
    })
}

/// Check that `dir` is `/` or `/seg(/seg)*` with clean segments.
fn parse_abs_dir(input: &str, dir: &str) -> Result<(), CapabilityError> {
    if dir == "/" {
        return Ok(());
    }
    let rel = dir
        .strip_prefix('/')
        .ok_or_else(|| CapabilityError::new(input, "the directory must be absolute"))?;
    check_segments(input, rel)
}

fn check_segments(input: &str, rel: &str) -> Result<(), CapabilityError> {
    for seg in rel.split('/') {
        if seg.is_empty() {
            return Err(CapabilityError::new(
                input,
                "empty path segment (`//` or a trailing `/`)",
            ));
        }
        if seg == "." || seg == ".." {
            return Err(CapabilityError::new(
                input,
                "`.` and `..` segments are refused: write the normalised directory",
            ));
        }
        if let Some(c) = seg
            .chars()
            .find(|c| matches!(c, '*' | '?' | '[' | ']' | '{' | '}' | '\\'))
        {
            return Err(CapabilityError::new(
                input,
                format!(
                    "`{c}` in a directory: globs other than the final `/**` are refused (a preopen is a directory)"
                ),
            ));
        }
    }
    Ok(())
}

fn parse_net(input: &str, rest: &str) -> Result<Capability, CapabilityError> {
    let (scheme, place) = rest.split_once(':').ok_or_else(|| {
        CapabilityError::new(
            input,
            "expected `net:http:<host>[:<port>]` or `net:https:...`",
        )
    })?;
    let scheme = match scheme {
        "http" => Scheme::Http,
        "https" => Scheme::Https,
        other => {
            return Err(CapabilityError::new(
                input,
                format!(
                    "net scheme must be `http` or `https`, not `{}`",
                    other.chars().take(40).collect::<String>()
                ),
            ));
        }
    };
    if place == "*" {
        return Ok(Capability::Net {
            scheme,
            target: Place::Any,
        });
    }
    let (host, port) = split_host_port(input, place)?;
    let host = parse_host(input, host)?;
    Ok(Capability::Net {
        scheme,
        target: Place::Concrete(NetTarget { host, port }),
    })
}

fn split_host_port<'a>(
    input: &str,
    place: &'a str,
) -> Result<(&'a str, Option<u16>), CapabilityError> {
    let (host, port) = if let Some(after) = place.strip_prefix('[') {
        let close = after
            .find(']')
            .ok_or_else(|| CapabilityError::new(input, "unclosed `[` in IPv6 literal"))?;
        let host = &place[..close + 2];
        let tail = &after[close + 1..];
        if tail.is_empty() {
            (host, None)
        } else if let Some(p) = tail.strip_prefix(':') {
            (host, Some(p))
        } else {
            return Err(CapabilityError::new(input, "unexpected text after `]`"));
        }
    } else {
        match place.rsplit_once(':') {
            Some((h, p)) => (h, Some(p)),
            None => (place, None),
        }
    };
    let port = match port {
        None => None,
        Some(p) => {
            if p.is_empty() || p.len() > 5 || !p.bytes().all(|b| b.is_ascii_digit()) {
                return Err(CapabilityError::new(
                    input,
                    "the port must be a number 1..=65535",
                ));
            }
            let n: u32 = p
                .parse()
                .map_err(|_| CapabilityError::new(input, "the port must be a number 1..=65535"))?;
            if n == 0 || n > 65535 || p.starts_with('0') {
                return Err(CapabilityError::new(
                    input,
                    "the port must be a number 1..=65535 without leading zeros",
                ));
            }
            Some(n as u16)
        }
    };
    Ok((host, port))
}

/// Parse a host: DNS name, one-label wildcard, dotted-quad IPv4, bracketed IPv6.
fn parse_host(input: &str, host: &str) -> Result<HostPattern, CapabilityError> {
    if host.is_empty() {
        return Err(CapabilityError::new(input, "empty host"));
    }
    if host == "*" {
        return Err(CapabilityError::new(
            input,
            "`*` alone is not a host; a tool declares `net:https:*`, an operator names hosts",
        ));
    }
    if let Some(inner) = host.strip_prefix('[') {
        let inner = inner
            .strip_suffix(']')
            .ok_or_else(|| CapabilityError::new(input, "unclosed `[` in IPv6 literal"))?;
        if inner.contains('%') {
            return Err(CapabilityError::new(
                input,
                "IPv6 zone identifiers are refused",
            ));
        }
        let ip: Ipv6Addr = inner
            .parse()
            .map_err(|_| CapabilityError::new(input, "invalid IPv6 literal"))?;
        return Ok(HostPattern::Ipv6(ip));
    }
    if host.contains(':') {
        return Err(CapabilityError::new(
            input,
            "IPv6 literals must be written in brackets, e.g. `[2001:db8::1]`",
        ));
    }
    let host = host.strip_suffix('.').unwrap_or(host);
    if let Some(suffix) = host.strip_prefix("*.") {
        let suffix = suffix.to_ascii_lowercase();
        check_dns_name(input, &suffix)?;
        if !suffix.contains('.') {
            return Err(CapabilityError::new(
                input,
                "a wildcard must sit under a registrable domain (`*.example.com`, not `*.com`)",
            ));
        }
        return Ok(HostPattern::Wildcard(suffix));
    }
    if host.contains('*') {
        return Err(CapabilityError::new(
            input,
            "`*` is only allowed as the whole leading label (`*.example.com`)",
        ));
    }
    if host.bytes().all(|b| b.is_ascii_digit() || b == b'.') || looks_numeric_ipv4(host) {
        // Only the canonical dotted quad is accepted; `2130706433`, `0x7f.1`
        // and `0177.0.0.1` are the same address as 127.0.0.1 to many parsers.
        return parse_dotted_quad(host)
            .map(HostPattern::Ipv4)
            .ok_or_else(|| {
                CapabilityError::new(
                    input,
                    "IPv4 literals must be four decimal octets without leading zeros (`10.0.0.1`); decimal, octal and hex forms are refused",
                )
            });
    }
    let lower = host.to_ascii_lowercase();
    check_dns_name(input, &lower)?;
    Ok(HostPattern::Dns(lower))
}

/// True when the last label is all digits or a hex number: such a name is an
/// IPv4 address to WHATWG URL parsers, never a DNS name.
fn looks_numeric_ipv4(host: &str) -> bool {
    let last = host.rsplit('.').next().unwrap_or(host);
    let last = if last.is_empty() {
        host.rsplit('.').nth(1).unwrap_or("")
    } else {
        last
    };
    !last.is_empty()
        && (last.bytes().all(|b| b.is_ascii_digit())
            || ((last.starts_with("0x") || last.starts_with("0X"))
                && last[2..].bytes().all(|b| b.is_ascii_hexdigit())))
}

/// Parse strictly `a.b.c.d` with decimal octets 0..=255 and no leading zeros.
pub fn parse_dotted_quad(s: &str) -> Option<Ipv4Addr> {
    let parts: Vec<&str> = s.split('.').collect();
    if parts.len() != 4 {
        return None;
    }
    let mut octets = [0u8; 4];
    for (i, p) in parts.iter().enumerate() {
        if p.is_empty() || p.len() > 3 || !p.bytes().all(|b| b.is_ascii_digit()) {
            return None;
        }
        if p.len() > 1 && p.starts_with('0') {
            return None;
        }
        octets[i] = p.parse().ok()?;
    }
    Some(Ipv4Addr::from(octets))
}

fn check_dns_name(input: &str, name: &str) -> Result<(), CapabilityError> {
    if name.is_empty() || name.len() > 253 {
        return Err(CapabilityError::new(
            input,
            "a DNS name has 1 to 253 characters",
        ));
    }
    for label in name.split('.') {
        if !is_dns_label(label) {
            return Err(CapabilityError::new(
                input,
                format!(
                    "`{}` is not a DNS label (letters, digits and inner hyphens, 1 to 63 characters; use punycode for IDNs)",
                    label.chars().take(63).collect::<String>()
                ),
            ));
        }
    }
    Ok(())
}

fn is_dns_label(label: &str) -> bool {
    !label.is_empty()
        && label.len() <= 63
        && label
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-')
        && !label.starts_with('-')
        && !label.ends_with('-')
}

pub(crate) fn is_env_name(s: &str) -> bool {
    let mut b = s.bytes();
    matches!(b.next(), Some(c) if c.is_ascii_alphabetic() || c == b'_')
        && s.len() <= 128
        && b.all(|c| c.is_ascii_alphanumeric() || c == b'_')
}

pub(crate) fn is_ident(s: &str) -> bool {
    let mut b = s.bytes();
    matches!(b.next(), Some(c) if c.is_ascii_lowercase() || c.is_ascii_digit())
        && s.len() <= 64
        && b.all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == b'_' || c == b'-')
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ok(s: &str) -> Capability {
        Capability::parse(s).unwrap_or_else(|e| panic!("{s}: {e}"))
    }
    fn bad(s: &str) -> String {
        match Capability::parse(s) {
            Ok(c) => panic!("{s:?} parsed as {c:?}"),
            Err(e) => e.reason,
        }
    }

    #[test]
    fn fs_forms() {
        assert_eq!(
            ok("fs:read:/data/**"),
            Capability::Fs {
                access: FsAccess::Read,
                dir: Place::Concrete(FsDir::Absolute("/data".into()))
            }
        );
        assert_eq!(
            ok("fs:write:~/work/**"),
            Capability::Fs {
                access: FsAccess::Write,
                dir: Place::Concrete(FsDir::Home("work".into()))
            }
        );
        assert_eq!(ok("fs:write:~/**").to_string(), "fs:write:~/**");
        assert_eq!(ok("fs:read:/**").to_string(), "fs:read:/**");
        assert!(!ok("fs:write:*").is_concrete());
    }

    #[test]
    fn fs_refusals() {
        assert!(bad("fs:read:/data/*.md").contains("/**"));
        assert!(bad("fs:read:/data/*/**").contains("glob"));
        assert!(bad("fs:read:data/**").contains("absolute"));
        assert!(bad("fs:read:/data/../etc/**").contains(".."));
        assert!(bad("fs:read:/data//x/**").contains("empty"));
        assert!(bad("fs:read:/data\0/**").contains("control"));
        assert!(bad("fs:exec:/data/**").contains("read"));
        assert!(bad("fs:read:/data").contains("/**"));
        bad("fs:read:~user/**");
    }

    #[test]
    fn net_forms() {
        assert_eq!(
            ok("net:https:API.Example.com.").to_string(),
            "net:https:api.example.com"
        );
        assert_eq!(
            ok("net:http:127.0.0.1:8080").to_string(),
            "net:http:127.0.0.1:8080"
        );
        assert_eq!(
            ok("net:https:[::1]:8443").to_string(),
            "net:https:[::1]:8443"
        );
        assert_eq!(
            ok("net:https:*.example.com").to_string(),
            "net:https:*.example.com"
        );
        assert!(!ok("net:https:*").is_concrete());
    }

    #[test]
    fn net_refusals() {
        bad("net:https:");
        assert!(bad("net:https:*:443").contains("alone"));
        assert!(bad("net:https:a.*.com").contains("leading"));
        assert!(bad("net:https:*.com").contains("registrable"));
        bad("net:https:example.com:0");
        bad("net:https:example.com:65536");
        bad("net:https:example.com:08");
        bad("net:https:example.com:");
        assert!(bad("net:http:2130706433").contains("decimal"));
        assert!(bad("net:http:0177.0.0.1").contains("octal"));
        assert!(bad("net:http:0x7f.0.0.1").contains("hex"));
        assert!(bad("net:http:127.1").contains("four"));
        assert!(bad("net:http:::1").contains("brackets"));
        bad("net:http:[fe80::1%eth0]");
        bad("net:ftp:example.com");
        bad("net:https:exa mple.com");
        bad("net:https:user@example.com");
    }

    #[test]
    fn other_kinds() {
        assert_eq!(ok("env:API_TOKEN").to_string(), "env:API_TOKEN");
        assert_eq!(
            ok("secret:github@api.github.com").to_string(),
            "secret:github@api.github.com"
        );
        assert_eq!(ok("kv:notes").kind(), "kv");
        assert_eq!(ok("llm:frontier").kind(), "llm");
        bad("env:1ABC");
        bad("env:");
        bad("secret:github");
        bad("secret:Git@x.com");
        bad("kv:");
        bad("disk:/x");
        bad(" fs:read:/x/**");
    }

    #[test]
    fn wildcard_matching_is_one_label() {
        let w = HostPattern::Wildcard("example.com".into());
        assert!(w.matches_host("a.example.com"));
        assert!(w.matches_host("A.Example.COM."));
        assert!(!w.matches_host("example.com"));
        assert!(!w.matches_host("a.b.example.com"));
        assert!(!w.matches_host("aexample.com"));
        assert!(!w.matches_host("a.example.com.evil.net"));
        assert!(w.covers(&HostPattern::Dns("api.example.com".into())));
        assert!(!w.covers(&HostPattern::Dns("example.com".into())));
    }

    #[test]
    fn home_expansion() {
        let d = FsDir::Home("ws".into());
        assert_eq!(d.expand("/srv/agent").unwrap(), "/srv/agent/ws");
        assert_eq!(FsDir::Home(String::new()).expand("/srv").unwrap(), "/srv");
        assert_eq!(d.expand("/").unwrap(), "/ws");
        assert!(d.expand("relative").is_err());
    }

    proptest::proptest! {
        #[test]
        fn display_then_parse_round_trips(s in "(fs|net|env|secret|kv|llm):[a-z0-9~/*:.@\\[\\]_-]{0,40}") {
            if let Ok(c) = Capability::parse(&s) {
                let printed = c.to_string();
                let again = Capability::parse(&printed).unwrap();
                proptest::prop_assert_eq!(c, again);
            }
        }
    }
}
