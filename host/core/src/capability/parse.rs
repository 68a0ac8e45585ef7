//! The parsers behind [`Capability::parse`](super::Capability::parse): one
//! canonical spelling per place (DESIGN §3), every refusal with its reason.

use super::*;

pub(super) fn parse_fs(input: &str, rest: &str) -> Result<Capability, CapabilityError> {
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
pub(super) fn parse_abs_dir(input: &str, dir: &str) -> Result<(), CapabilityError> {
    if dir == "/" {
        return Ok(());
    }
    let rel = dir
        .strip_prefix('/')
        .ok_or_else(|| CapabilityError::new(input, "the directory must be absolute"))?;
    check_segments(input, rel)
}

pub(super) fn check_segments(input: &str, rel: &str) -> Result<(), CapabilityError> {
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

pub(super) fn parse_net(input: &str, rest: &str) -> Result<Capability, CapabilityError> {
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

pub(super) fn split_host_port<'a>(
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
pub(super) fn parse_host(input: &str, host: &str) -> Result<HostPattern, CapabilityError> {
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
        // An IPv6 literal that carries an IPv4 address is that address (the
        // net guard reads URLs so): it gets the IPv4 rule of one spelling.
        if let Some((how, v4)) = crate::ip_embedding::embedded_ipv4(ip) {
            return Err(CapabilityError::new(
                input,
                format!(
                    "`[{ip}]` is the IPv4 address {v4} in {} IPv6 form; an IPv4 address has one spelling in a grant: write `{v4}`",
                    how.as_str()
                ),
            ));
        }
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
        if is_public_suffix(&suffix) {
            return Err(CapabilityError::new(
                input,
                format!(
                    "`*.{suffix}` is too broad: `{suffix}` is a public suffix (Public Suffix List), under which anyone can register names; a wildcard must sit under a registrable domain (`*.example.{suffix}`, not `*.{suffix}`)"
                ),
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

/// True when `name` (lowercase ASCII, punycode for IDNs, no trailing dot) is
/// itself a public suffix: a rule of Mozilla's Public Suffix List
/// (<https://publicsuffix.org/>, ICANN and private sections, wildcard and
/// exception rules applied; the list is compiled into the `psl` crate, so no
/// network is needed), or a top-level label the list does not know (its
/// implicit `*` rule). Anyone can register names directly under a public
/// suffix (`co.uk`, `com.au`, `github.io`), so a wildcard there is too broad.
pub fn is_public_suffix(name: &str) -> bool {
    psl::suffix(name.as_bytes()).is_some_and(|s| s.as_bytes() == name.as_bytes())
}

/// True when the last label is all digits or a hex number: such a name is an
/// IPv4 address to WHATWG URL parsers, never a DNS name.
pub(super) fn looks_numeric_ipv4(host: &str) -> bool {
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

pub(super) fn check_dns_name(input: &str, name: &str) -> Result<(), CapabilityError> {
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

pub(super) fn is_dns_label(label: &str) -> bool {
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
