//! A differential oracle for the net guard, written independently of it:
//! the `url` crate for parsing (the parser the guard is specified to use),
//! `std::net` for address classification plus the special-purpose blocks
//! std does not name, and its own grant matching. It answers the question
//! the guard answers for a GET request without headers: may this URL be
//! fetched under these grants when its name resolves to these addresses,
//! and if so, to which host and port?
//!
//! It shares no code with `capsaga_net_guard` (only the capability
//! types, which are the input), so a fuzzer comparing the two finds a bug in
//! either. Used by the hostile-corpus test and, through `#[path]`, by the
//! `net_guard` fuzz target.

use capsaga_core::capability::{Capability, HostPattern, Place, Scheme};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// Most addresses connected to for one name (the rest of the answer is
/// vetted, not used).
pub const MAX_ADDRESSES: usize = 16;

/// The oracle's answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Answer {
    /// Fetch `host:port`, connecting to these addresses (deduplicated, in
    /// the resolver's order).
    Allow {
        /// Host as normalised by the URL parser (IPv6 in brackets).
        host: String,
        /// Port.
        port: u16,
        /// Addresses connected to.
        addresses: Vec<IpAddr>,
    },
    /// Refused, with a short reason.
    Deny(&'static str),
}

fn in_v4(ip: Ipv4Addr, net: [u8; 4], len: u32) -> bool {
    let mask = if len == 0 { 0 } else { u32::MAX << (32 - len) };
    u32::from(ip) & mask == u32::from(Ipv4Addr::from(net)) & mask
}

fn in_v6(ip: Ipv6Addr, net: [u16; 8], len: u32) -> bool {
    let mask = if len == 0 {
        0
    } else {
        u128::MAX << (128 - len)
    };
    u128::from(ip) & mask == u128::from(Ipv6Addr::from(net)) & mask
}

/// Whether a name may lead to this IPv4 address: globally reachable unicast,
/// not a cloud metadata endpoint.
pub fn public_v4(ip: Ipv4Addr) -> bool {
    !(ip.is_unspecified()
        || ip.octets()[0] == 0
        || ip.is_loopback()
        || ip.is_private()
        || ip.is_link_local()
        || ip.is_broadcast()
        || ip.is_documentation()
        || ip.is_multicast()
        || in_v4(ip, [100, 64, 0, 0], 10)
        || in_v4(ip, [192, 0, 0, 0], 24)
        || in_v4(ip, [192, 88, 99, 0], 24)
        || in_v4(ip, [198, 18, 0, 0], 15)
        || in_v4(ip, [240, 0, 0, 0], 4)
        || ip == Ipv4Addr::new(168, 63, 129, 16))
}

/// The IPv4 address an IPv6 address stands for, in the forms that embed
/// one: mapped, SIIT-translated, compatible, NAT64 (well-known and
/// local-use /96 layout), 6to4, Teredo (the client, inverted).
pub fn embedded_v4(ip: Ipv6Addr) -> Option<Ipv4Addr> {
    if let Some(v4) = ip.to_ipv4_mapped() {
        return Some(v4);
    }
    let n = u128::from(ip);
    let low = Ipv4Addr::from((n & 0xffff_ffff) as u32);
    if in_v6(ip, [0, 0, 0, 0, 0xffff, 0, 0, 0], 96) {
        return Some(low);
    }
    if in_v6(ip, [0; 8], 96) && u32::from(low) > 1 {
        return Some(low);
    }
    if in_v6(ip, [0x64, 0xff9b, 0, 0, 0, 0, 0, 0], 96) {
        return Some(low);
    }
    if in_v6(ip, [0x64, 0xff9b, 1, 0, 0, 0, 0, 0], 48) {
        return Some(low);
    }
    if in_v6(ip, [0x2002, 0, 0, 0, 0, 0, 0, 0], 16) {
        return Some(Ipv4Addr::from(((n >> 80) & 0xffff_ffff) as u32));
    }
    if in_v6(ip, [0x2001, 0, 0, 0, 0, 0, 0, 0], 32) {
        return Some(Ipv4Addr::from(!u32::from(low)));
    }
    None
}

/// Whether a name may lead to this IPv6 address: global unicast `2000::/3`
/// outside its special blocks, or an embedding of a public IPv4 address.
pub fn public_v6(ip: Ipv6Addr) -> bool {
    // Behind a local-use NAT64 translator or a Teredo relay: never public.
    if in_v6(ip, [0x64, 0xff9b, 1, 0, 0, 0, 0, 0], 48)
        || in_v6(ip, [0x2001, 0, 0, 0, 0, 0, 0, 0], 32)
    {
        return false;
    }
    if let Some(v4) = embedded_v4(ip) {
        return public_v4(v4);
    }
    if ip.is_loopback()
        || ip.is_unspecified()
        || ip.is_multicast()
        || ip.is_unique_local()
        || ip.is_unicast_link_local()
    {
        return false;
    }
    in_v6(ip, [0x2000, 0, 0, 0, 0, 0, 0, 0], 3)
        && !in_v6(ip, [0x2001, 0, 0, 0, 0, 0, 0, 0], 23)
        && !in_v6(ip, [0x2001, 0xdb8, 0, 0, 0, 0, 0, 0], 32)
        && !in_v6(ip, [0x3fff, 0, 0, 0, 0, 0, 0, 0], 20)
}

/// Whether a name may lead to `ip`.
pub fn public(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(v) => public_v4(v),
        IpAddr::V6(v) => public_v6(v),
    }
}

/// Addresses that are never a unicast destination, even named literally:
/// unspecified (`0/8`, `::`), multicast, broadcast (also when embedded).
pub fn never_unicast(ip: IpAddr) -> bool {
    let v4 = |v: Ipv4Addr| v.octets()[0] == 0 || v.is_multicast() || v.is_broadcast();
    match ip {
        IpAddr::V4(v) => v4(v),
        IpAddr::V6(v) => match embedded_v4(v) {
            Some(e) => v4(e),
            None => v.is_unspecified() || v.is_multicast(),
        },
    }
}

fn grant_matches(pattern: &HostPattern, host: &url::Host<&str>) -> bool {
    match (pattern, host) {
        (HostPattern::Dns(d), url::Host::Domain(h)) => {
            d.eq_ignore_ascii_case(h.strip_suffix('.').unwrap_or(h))
        }
        (HostPattern::Wildcard(suffix), url::Host::Domain(h)) => {
            let h = h.strip_suffix('.').unwrap_or(h).to_ascii_lowercase();
            match h.split_once('.') {
                Some((label, rest)) => {
                    rest == suffix.as_str()
                        && !label.is_empty()
                        && label.len() <= 63
                        && !label.starts_with('-')
                        && !label.ends_with('-')
                        && label
                            .bytes()
                            .all(|b| b.is_ascii_alphanumeric() || b == b'-')
                }
                None => false,
            }
        }
        (HostPattern::Ipv4(p), url::Host::Ipv4(ip)) => p == ip,
        (HostPattern::Ipv4(p), url::Host::Ipv6(ip)) => embedded_v4(*ip) == Some(*p),
        (HostPattern::Ipv6(p), url::Host::Ipv6(ip)) => p == ip && embedded_v4(*ip).is_none(),
        _ => false,
    }
}

/// The host of an http(s) URL as written, read character by character
/// with the WHATWG parser's states (special scheme: `/` and `\` after the
/// scheme skipped, the authority ends at `/`, `\`, `?` or `#`, the host
/// starts after the last `@` and ends at a `:` outside brackets).
fn host_as_written(raw: &str) -> Option<String> {
    let s = raw.trim_matches(|c: char| c.is_ascii_control() || c == ' ');
    let mut chars = s.chars().peekable();
    // Scheme.
    loop {
        match chars.next()? {
            ':' => break,
            c if c.is_ascii_alphanumeric() || "+-.".contains(c) => {}
            _ => return None,
        }
    }
    while matches!(chars.peek(), Some('/' | '\\')) {
        chars.next();
    }
    let mut authority = String::new();
    for c in chars {
        if matches!(c, '/' | '\\' | '?' | '#') {
            break;
        }
        if c == '@' {
            authority.clear();
        } else {
            authority.push(c);
        }
    }
    let mut host = String::new();
    let mut bracket = false;
    for c in authority.chars() {
        match c {
            '[' => bracket = true,
            ']' => bracket = false,
            ':' if !bracket => break,
            _ => {}
        }
        host.push(c);
    }
    Some(host)
}

/// Whether the host of `raw` is written as the parser's own spelling of
/// `host` (issue 24 item 8a): no tab or line break in the URL, no
/// percent-encoding, an IP literal in ASCII, a name as its ASCII or its
/// Unicode (IDNA `to_unicode`) form.
fn own_spelling(raw: &str, host: &url::Host<&str>) -> bool {
    if raw.chars().any(|c| matches!(c, '\t' | '\n' | '\r')) {
        return false;
    }
    let Some(written) = host_as_written(raw) else {
        return false;
    };
    if written.contains('%') {
        return false;
    }
    match host {
        url::Host::Ipv4(_) | url::Host::Ipv6(_) => written.is_ascii(),
        url::Host::Domain(d) => {
            let lower: String = written.chars().map(|c| c.to_ascii_lowercase()).collect();
            let (unicode, errors) = idna::domain_to_unicode(d);
            lower == *d || (errors.is_ok() && lower == unicode)
        }
    }
}

/// The oracle's decision for `GET url` (no headers, not a dry run) under
/// `grants`, with `resolved` the DNS answer for a name.
pub fn decide(url: &str, grants: &[Capability], resolved: &[IpAddr]) -> Answer {
    let nets: Vec<(Scheme, &HostPattern, u16)> = grants
        .iter()
        .filter_map(|g| match g {
            Capability::Net {
                scheme,
                target: Place::Concrete(t),
            } => Some((*scheme, &t.host, t.port.unwrap_or(scheme.default_port()))),
            _ => None,
        })
        .collect();
    if nets.is_empty() {
        return Answer::Deny("no net grant");
    }
    if url.len() > 8192 {
        return Answer::Deny("URL too long");
    }
    let Ok(u) = url::Url::parse(url) else {
        return Answer::Deny("URL does not parse");
    };
    let scheme = match u.scheme() {
        "http" => Scheme::Http,
        "https" => Scheme::Https,
        _ => return Answer::Deny("scheme"),
    };
    if !u.username().is_empty() || u.password().is_some() {
        return Answer::Deny("userinfo");
    }
    let Some(host) = u.host() else {
        return Answer::Deny("no host");
    };
    if !own_spelling(url, &host) {
        return Answer::Deny("host not written as itself");
    }
    if let url::Host::Domain(d) = host {
        let d = d.strip_suffix('.').unwrap_or(d);
        if d.is_empty() || d.split('.').any(str::is_empty) {
            return Answer::Deny("empty label");
        }
    }
    let port = u.port().unwrap_or(scheme.default_port());
    if !nets
        .iter()
        .any(|(s, h, p)| *s == scheme && *p == port && grant_matches(h, &host))
    {
        return Answer::Deny("not granted");
    }
    let (shown, addresses) = match host {
        url::Host::Ipv4(ip) => (ip.to_string(), vec![IpAddr::V4(ip)]),
        // An IPv6 literal carrying an IPv4 address is that IPv4 address.
        url::Host::Ipv6(ip) => match embedded_v4(ip) {
            Some(v4) => (v4.to_string(), vec![IpAddr::V4(v4)]),
            None => (format!("[{ip}]"), vec![IpAddr::V6(ip)]),
        },
        url::Host::Domain(d) => {
            let d = d.strip_suffix('.').unwrap_or(d).to_ascii_lowercase();
            if resolved.is_empty() {
                return Answer::Deny("no address");
            }
            if !resolved.iter().all(|ip| public(*ip)) {
                return Answer::Deny("non-public address");
            }
            let mut seen: Vec<IpAddr> = Vec::new();
            for ip in resolved {
                if !seen.contains(ip) && seen.len() < MAX_ADDRESSES {
                    seen.push(*ip);
                }
            }
            (d, seen)
        }
    };
    if matches!(host, url::Host::Ipv4(_) | url::Host::Ipv6(_)) && never_unicast(addresses[0]) {
        return Answer::Deny("not unicast");
    }
    Answer::Allow {
        host: shown,
        port,
        addresses,
    }
}
