//! The net guard (DESIGN §3): whether an outgoing HTTP request of a guest may
//! leave the host, and to which socket addresses.
//!
//! It is a pure function of (request, effective grants, resolved addresses),
//! in two steps around the host's own DNS resolution:
//!
//! 1. [`check_request`]: parse the URL with the `url` crate (the WHATWG URL
//!    parser, so `http://2130706433/`, `http://0177.0.0.1/`, `http://0x7f.1/`,
//!    `http://%31%32%37.0.0.1/` normalise to the address they mean), refuse
//!    a host written in a form the parser folds onto another spelling
//!    (fullwidth or compatibility characters, ideographic full stops,
//!    characters IDNA drops, percent-encoding, tabs and line breaks:
//!    `spelling`; a real IDN written as its U-labels or A-labels passes),
//!    refuse schemes other than http/https,
//!    userinfo, IPv6 zone ids (the parser refuses them), methods outside
//!    GET/HEAD/POST/PUT/PATCH/DELETE/OPTIONS (GET/HEAD only in a dry run),
//!    caller-set routing and hop-by-hop headers ([`capsaga_core::policy::forbidden_header`]), and
//!    match scheme, host and port against the call's `net:` grants. An IPv6
//!    literal that carries an IPv4 address (mapped, compatible, SIIT, NAT64,
//!    6to4, Teredo: [`address::embedded_ipv4`]) is read as that IPv4
//!    address, as grants are (the capability grammar refuses such a literal
//!    in a grant and names the IPv4 spelling to write). The
//!    result, a [`Destination`], is what the host connects to and what it
//!    writes in the request line and `Host` header: there is no second
//!    parser between the check and the use.
//! 2. [`vet_addresses`]: every address the name resolved to must be
//!    [`AddressClass::Public`] ([`address::classify`]), or the whole request
//!    is refused (a name answering with one private address among public
//!    ones is a rebinding attempt). An IP literal in the URL is allowed
//!    whatever its class only when a grant names exactly that literal
//!    (matching a grant already implies it), and never when it is
//!    unspecified, multicast or broadcast. The host then connects only to
//!    the returned socket addresses.
//!
//! [`evaluate`] runs both for a fixed resolver answer, for fuzzing and
//! differential tests.

pub mod address;
mod spelling;

pub use address::{
    AddressClass, Embedding, as_ipv4_if_embedded, classify, describe, embedded_ipv4,
};
use capsaga_core::capability::{Capability, HostPattern, NetTarget, Place, Scheme};
use capsaga_core::policy::forbidden_header;
use std::net::{IpAddr, SocketAddr};

/// Longest URL accepted, bytes.
pub const MAX_URL_LEN: usize = 8 * 1024;
/// Most addresses kept from one resolution.
pub const MAX_ADDRESSES: usize = 16;

/// The request as the guest made it.
#[derive(Debug, Clone, Copy)]
pub struct NetRequest<'a> {
    /// The method, as sent (`GET`, `POST`, ...).
    pub method: &'a str,
    /// The absolute URL: `scheme://authority/path?query`.
    pub url: &'a str,
    /// Names of the headers the guest set.
    pub headers: &'a [&'a str],
    /// A dry-run call: only GET and HEAD.
    pub dry_run: bool,
}

/// The host of a [`Destination`], normalised by the URL parser.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum DestHost {
    /// A DNS name: lowercase ASCII (IDNA applied), no trailing dot.
    Domain(String),
    /// An IP literal.
    Ip(IpAddr),
}

impl std::fmt::Display for DestHost {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            DestHost::Domain(d) => f.write_str(d),
            DestHost::Ip(IpAddr::V4(ip)) => write!(f, "{ip}"),
            DestHost::Ip(IpAddr::V6(ip)) => write!(f, "[{ip}]"),
        }
    }
}

/// Where a checked request goes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Destination {
    /// `http` or `https`.
    pub scheme: Scheme,
    /// The host, normalised.
    pub host: DestHost,
    /// The port (the scheme's default when the URL has none).
    pub port: u16,
    /// Origin-form request target: the normalised path and query.
    pub path_and_query: String,
    /// The value of the `Host` header the host sends.
    pub host_header: String,
    /// The normalised URL without fragment (for logs and messages).
    pub url: String,
}

/// Why the net guard refused a request. Messages name the URL or host the
/// guest gave (never a header value, so never a secret).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum NetDenied {
    /// The call has no `net:` grant at all (default deny).
    #[error("this tool has no net grant: outgoing HTTP is denied")]
    NoGrant,
    /// The URL does not parse, or is too long.
    #[error("invalid URL `{url}`: {reason}")]
    BadUrl {
        /// The URL as given (clipped).
        url: String,
        /// What is wrong.
        reason: String,
    },
    /// The host is written in a form the URL parser folds onto another
    /// spelling (fullwidth or compatibility characters, ideographic full
    /// stops, characters IDNA drops, percent-encoding, a tab or line break):
    /// refused, not folded (see `spelling`).
    #[error("URL `{url}` is refused: {reason}")]
    HostSpelling {
        /// The URL as given (clipped).
        url: String,
        /// What is wrong.
        reason: &'static str,
    },
    /// Not http or https.
    #[error("scheme `{scheme}` is refused: only http and https")]
    Scheme {
        /// The scheme.
        scheme: String,
    },
    /// `user:password@` in the URL.
    #[error("URL `{url}` carries userinfo (`user:password@`); credentials in URLs are refused")]
    Userinfo {
        /// The URL (clipped; the userinfo is not repeated).
        url: String,
    },
    /// A header the guest may not set.
    #[error("header `{name}` may not be set by a tool: {why}")]
    Header {
        /// The header name, lowercase.
        name: String,
        /// Why.
        why: &'static str,
    },
    /// A method outside the allowed set, or not GET/HEAD in a dry run.
    #[error("method `{method}` is refused{}", if *.dry_run { " in a dry run (only GET and HEAD)" } else { " (allowed: GET, HEAD, POST, PUT, PATCH, DELETE, OPTIONS)" })]
    Method {
        /// The method.
        method: String,
        /// Whether the call is a dry run.
        dry_run: bool,
    },
    /// No `net:` grant matches scheme, host and port.
    #[error("{scheme}://{host}:{port} is not granted to this tool (its net grants: {})", if granted.is_empty() { "none".to_string() } else { granted.join(", ") })]
    NotGranted {
        /// `http` or `https`.
        scheme: &'static str,
        /// The normalised host.
        host: String,
        /// The port.
        port: u16,
        /// The call's net grants.
        granted: Vec<String>,
    },
    /// An address the destination resolved to (or the literal) is in a
    /// refused class.
    #[error(
        "{host} resolves to {address}: refused (only public addresses are reachable through a name; a grant must name a non-public address literally)"
    )]
    Address {
        /// The normalised host.
        host: String,
        /// The address with its class, e.g. `127.0.0.1 (loopback)`.
        address: String,
        /// The class.
        class: AddressClass,
    },
    /// The literal is never a unicast destination.
    #[error("{address} is not a unicast destination: refused even when granted")]
    NotUnicast {
        /// The address with its class.
        address: String,
        /// The class.
        class: AddressClass,
    },
    /// The name resolved to nothing.
    #[error("{host} did not resolve to any address")]
    NoAddress {
        /// The normalised host.
        host: String,
    },
}

fn clip(s: &str) -> String {
    let mut out: String = s.chars().take(200).collect();
    if out.len() < s.len() {
        out.push_str("...");
    }
    out
}

/// The concrete `net:` grants among `grants`.
pub fn net_grants(grants: &[Capability]) -> impl Iterator<Item = (Scheme, &NetTarget)> {
    grants.iter().filter_map(|g| match g {
        Capability::Net {
            scheme,
            target: Place::Concrete(t),
        } => Some((*scheme, t)),
        _ => None,
    })
}

/// Whether a grant's host pattern matches a destination host. DNS patterns
/// match names only; IP patterns match the same literal only.
pub fn host_matches(pattern: &HostPattern, host: &DestHost) -> bool {
    match (pattern, host) {
        (HostPattern::Dns(_) | HostPattern::Wildcard(_), DestHost::Domain(d)) => {
            pattern.matches_host(d)
        }
        (HostPattern::Ipv4(p), DestHost::Ip(IpAddr::V4(ip))) => p == ip,
        (HostPattern::Ipv6(p), DestHost::Ip(IpAddr::V6(ip))) => p == ip,
        _ => false,
    }
}

const METHODS: [&str; 7] = ["GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"];

/// Step 1's first part: the method (GET or HEAD in a dry run) and the
/// headers the guest may set.
fn check_method_and_headers(req: &NetRequest<'_>) -> Result<(), NetDenied> {
    if !METHODS.contains(&req.method) {
        return Err(NetDenied::Method {
            method: clip(req.method),
            dry_run: req.dry_run,
        });
    }
    if req.dry_run && !matches!(req.method, "GET" | "HEAD") {
        return Err(NetDenied::Method {
            method: clip(req.method),
            dry_run: true,
        });
    }
    for name in req.headers {
        if let Some(why) = forbidden_header(name, req.dry_run) {
            return Err(NetDenied::Header {
                name: clip(&name.to_ascii_lowercase()),
                why,
            });
        }
    }
    Ok(())
}

/// Step 1: check the request against the call's grants.
///
/// # Errors
/// [`NetDenied`]: no net grant, bad URL, scheme, userinfo, method, header,
/// or no grant matching scheme, host and port.
pub fn check_request(
    req: &NetRequest<'_>,
    grants: &[Capability],
) -> Result<Destination, NetDenied> {
    if net_grants(grants).next().is_none() {
        return Err(NetDenied::NoGrant);
    }
    check_method_and_headers(req)?;
    let bad = |reason: &str| NetDenied::BadUrl {
        url: clip(req.url),
        reason: reason.to_string(),
    };
    if req.url.len() > MAX_URL_LEN {
        return Err(bad("longer than 8192 bytes"));
    }
    let url = url::Url::parse(req.url).map_err(|e| bad(&e.to_string()))?;
    let scheme = match url.scheme() {
        "http" => Scheme::Http,
        "https" => Scheme::Https,
        other => {
            return Err(NetDenied::Scheme {
                scheme: clip(other),
            });
        }
    };
    if !url.username().is_empty() || url.password().is_some() {
        let mut shown = url.clone();
        let _ = shown.set_username("");
        let _ = shown.set_password(None);
        return Err(NetDenied::Userinfo {
            url: clip(shown.as_str()),
        });
    }
    spelling::check(req.url, &url).map_err(|reason| NetDenied::HostSpelling {
        url: clip(req.url),
        reason,
    })?;
    let host = match url.host() {
        Some(url::Host::Domain(d)) => {
            let d = d.strip_suffix('.').unwrap_or(d);
            if d.is_empty() || d.split('.').any(str::is_empty) {
                return Err(bad("empty label in host name"));
            }
            DestHost::Domain(d.to_ascii_lowercase())
        }
        Some(url::Host::Ipv4(ip)) => DestHost::Ip(IpAddr::V4(ip)),
        // `[::ffff:10.0.0.5]`, `[64:ff9b::a00:5]`, ... are 10.0.0.5: matched,
        // classified and connected to as that IPv4 address.
        Some(url::Host::Ipv6(ip)) => DestHost::Ip(as_ipv4_if_embedded(IpAddr::V6(ip))),
        None => return Err(bad("no host")),
    };
    let port = url.port_or_known_default().unwrap_or(scheme.default_port());
    let granted = net_grants(grants)
        .any(|(s, t)| s == scheme && t.effective_port(s) == port && host_matches(&t.host, &host));
    if !granted {
        return Err(NetDenied::NotGranted {
            scheme: scheme.as_str(),
            host: host.to_string(),
            port,
            granted: grants
                .iter()
                .filter(|g| matches!(g, Capability::Net { .. }))
                .map(ToString::to_string)
                .collect(),
        });
    }
    let mut path_and_query = url.path().to_string();
    if let Some(q) = url.query() {
        path_and_query.push('?');
        path_and_query.push_str(q);
    }
    let host_header = if port == scheme.default_port() {
        host.to_string()
    } else {
        format!("{host}:{port}")
    };
    let mut shown = url.clone();
    shown.set_fragment(None);
    Ok(Destination {
        scheme,
        host,
        port,
        path_and_query,
        host_header,
        url: shown.into(),
    })
}

/// Step 2: the socket addresses the host may connect to, given what the
/// destination's name resolved to (ignored for an IP literal, which is its
/// own address). Duplicates are removed and at most [`MAX_ADDRESSES`] kept.
///
/// # Errors
/// [`NetDenied::Address`] when any address is not public (for a name) or
/// [`NetDenied::NotUnicast`] for an unspecified, multicast or broadcast
/// literal; [`NetDenied::NoAddress`] when a name resolved to nothing.
pub fn vet_addresses(
    dest: &Destination,
    resolved: &[IpAddr],
) -> Result<Vec<SocketAddr>, NetDenied> {
    match &dest.host {
        DestHost::Ip(ip) => {
            // check_request only returns a Destination whose literal a
            // grant names, which is what allows a non-public literal.
            let class = classify(*ip);
            if class.never_unicast() {
                return Err(NetDenied::NotUnicast {
                    address: describe(*ip),
                    class,
                });
            }
            Ok(vec![SocketAddr::new(*ip, dest.port)])
        }
        DestHost::Domain(name) => {
            if resolved.is_empty() {
                return Err(NetDenied::NoAddress { host: name.clone() });
            }
            let mut out: Vec<SocketAddr> = Vec::new();
            for ip in resolved {
                let class = classify(*ip);
                if class != AddressClass::Public {
                    return Err(NetDenied::Address {
                        host: name.clone(),
                        address: describe(*ip),
                        class,
                    });
                }
                let sa = SocketAddr::new(*ip, dest.port);
                if !out.contains(&sa) && out.len() < MAX_ADDRESSES {
                    out.push(sa);
                }
            }
            Ok(out)
        }
    }
}

/// Both steps for a fixed resolver answer: what the host would connect to.
///
/// # Errors
/// As [`check_request`] and [`vet_addresses`].
pub fn evaluate(
    req: &NetRequest<'_>,
    grants: &[Capability],
    resolved: &[IpAddr],
) -> Result<(Destination, Vec<SocketAddr>), NetDenied> {
    let dest = check_request(req, grants)?;
    let addrs = vet_addresses(&dest, resolved)?;
    Ok((dest, addrs))
}

/// Names of the secrets to inject into a request to `dest`: the call's
/// `secret:<name>@<host>` grants whose host matches. Secrets travel only
/// over HTTPS: for an `http` destination the list is empty.
pub fn secrets_for<'g>(dest: &Destination, grants: &'g [Capability]) -> Vec<&'g str> {
    if dest.scheme != Scheme::Https {
        return Vec::new();
    }
    let mut names: Vec<&str> = grants
        .iter()
        .filter_map(|g| match g {
            Capability::Secret { name, host } if host_matches(host, &dest.host) => {
                Some(name.as_str())
            }
            _ => None,
        })
        .collect();
    names.sort_unstable();
    names.dedup();
    names
}

#[cfg(test)]
mod tests;
