//! The capability grammar and grant intersection.
//!
//! Properties:
//! 1. Parsing arbitrary text never panics; an accepted string holds no
//!    control character and no surrounding whitespace.
//! 2. Parse → print → parse gives the same value, and printing is a fixed
//!    point (`print(parse(print(c))) == print(c)`).
//! 3. Print → parse: every value built from the grammar's own alphabets
//!    (any kind, any place, IPv4 and IPv6 literals, ports, wildcards, `~`
//!    directories) prints to a string that parses back to that value. (The
//!    grammar has no wildcard directly under a public suffix and no IPv6
//!    literal carrying an IPv4 address, nor `llm:*:<n>`: the builder makes
//!    none of them.)
//! 5. A wildcard directly under a public suffix, and an IPv6 literal that
//!    carries an IPv4 address, never parse.
//! 4. Intersection: when a requirement and a concrete grant intersect, the
//!    effective capability is concrete, of the requirement's kind, and is
//!    itself covered by the grant (`intersect(e, g) == Some(e)`); a read
//!    requirement never becomes a write grant.
#![no_main]

use capsaga_core::capability::{
    Capability, FsAccess, FsDir, HostPattern, MemAccess, NetTarget, Place, Scheme, is_public_suffix,
};
use capsaga_core::ip_embedding::embedded_ipv4;
use capsaga_core::grant::intersect;
use libfuzzer_sys::arbitrary::{self, Arbitrary, Unstructured};
use libfuzzer_sys::fuzz_target;
use std::net::{Ipv4Addr, Ipv6Addr};

#[derive(Debug, Arbitrary)]
enum Input {
    Text(String),
    Built(Vec<u8>),
    Pair(String, String),
}

const LABEL: &[u8] = b"abcdefghijklmnopqrstuvwxyz0123456789-";
const IDENT: &[u8] = b"abcdefghijklmnopqrstuvwxyz0123456789_-";
const SEGMENT: &[&str] = &[
    "a", "data", "my docs", "données", "...", "x-y_z.e", "~x", "a b",
];

fn label(u: &mut Unstructured<'_>) -> arbitrary::Result<String> {
    let len = u.int_in_range(1..=12)?;
    let mut s = String::new();
    for i in 0..len {
        let mut c = LABEL[u.choose_index(LABEL.len())?] as char;
        if (i == 0 || i == len - 1) && c == '-' {
            c = 'a';
        }
        s.push(c);
    }
    Ok(s)
}

fn dns(u: &mut Unstructured<'_>) -> arbitrary::Result<String> {
    let n = u.int_in_range(2..=4)?;
    let mut labels = Vec::new();
    for _ in 0..n {
        labels.push(label(u)?);
    }
    // A last label that is all digits or hex would be an IPv4 address.
    let last = labels.last_mut().expect("n >= 2");
    if last.bytes().all(|b| b.is_ascii_digit()) || last.starts_with("0x") {
        last.insert(0, 'z');
    }
    Ok(labels.join("."))
}

fn host(u: &mut Unstructured<'_>) -> arbitrary::Result<HostPattern> {
    Ok(match u.int_in_range(0..=3)? {
        0 => HostPattern::Dns(dns(u)?),
        1 => {
            // A wildcard directly under a public suffix is too broad: the
            // grammar cannot express it, one label deeper it can.
            let mut d = dns(u)?;
            while is_public_suffix(&d) {
                d.insert_str(0, "x.");
            }
            HostPattern::Wildcard(d)
        }
        2 => HostPattern::Ipv4(Ipv4Addr::from(u32::arbitrary(u)?)),
        _ => {
            // An IPv6 literal carrying an IPv4 address is that address.
            let ip = Ipv6Addr::from(u128::arbitrary(u)?);
            match embedded_ipv4(ip) {
                Some((_, v4)) => HostPattern::Ipv4(v4),
                None => HostPattern::Ipv6(ip),
            }
        }
    })
}

fn ident(u: &mut Unstructured<'_>) -> arbitrary::Result<String> {
    let len = u.int_in_range(1..=20)?;
    let mut s = String::new();
    for i in 0..len {
        let mut c = IDENT[u.choose_index(IDENT.len())?] as char;
        if i == 0 && (c == '_' || c == '-') {
            c = '0';
        }
        s.push(c);
    }
    Ok(s)
}

fn dir(u: &mut Unstructured<'_>) -> arbitrary::Result<FsDir> {
    let n = u.int_in_range(0..=4)?;
    let mut segs = Vec::new();
    for _ in 0..n {
        segs.push(SEGMENT[u.choose_index(SEGMENT.len())?]);
    }
    Ok(if bool::arbitrary(u)? {
        FsDir::Home(segs.join("/"))
    } else if segs.is_empty() {
        FsDir::Absolute("/".into())
    } else {
        FsDir::Absolute(format!("/{}", segs.join("/")))
    })
}

/// A value the grammar can express.
fn built(u: &mut Unstructured<'_>) -> arbitrary::Result<Capability> {
    Ok(match u.int_in_range(0..=6)? {
        0 => Capability::Fs {
            access: if bool::arbitrary(u)? {
                FsAccess::Read
            } else {
                FsAccess::Write
            },
            dir: if u.ratio(1, 5)? {
                Place::Any
            } else {
                Place::Concrete(dir(u)?)
            },
        },
        1 => Capability::Net {
            scheme: if bool::arbitrary(u)? {
                Scheme::Http
            } else {
                Scheme::Https
            },
            target: if u.ratio(1, 5)? {
                Place::Any
            } else {
                Place::Concrete(NetTarget {
                    host: host(u)?,
                    port: if bool::arbitrary(u)? {
                        Some(u.int_in_range(1..=65535)?)
                    } else {
                        None
                    },
                })
            },
        },
        2 => {
            let mut name = ident(u)?.to_uppercase().replace('-', "_");
            if name.starts_with(|c: char| c.is_ascii_digit()) {
                name.insert(0, '_');
            }
            Capability::Env { name }
        }
        3 => Capability::Secret {
            name: ident(u)?,
            host: host(u)?,
        },
        4 => Capability::Kv {
            namespace: ident(u)?,
        },
        5 => Capability::Mem {
            namespace: if u.ratio(1, 5)? {
                Place::Any
            } else {
                Place::Concrete(ident(u)?)
            },
            access: match u.int_in_range(0..=2)? {
                0 => MemAccess::Read,
                1 => MemAccess::Write,
                _ => MemAccess::ReadWrite,
            },
        },
        // The grammar has `llm:*` (any tier, no cap) and `llm:<tier>[:<n>]`;
        // `llm:*:<n>` is not in it, so the builder never makes it.
        _ if u.arbitrary()? => Capability::Llm {
            tier: Place::Any,
            max_tokens: None,
        },
        _ => Capability::Llm {
            tier: Place::Concrete(ident(u)?),
            max_tokens: if u.arbitrary()? {
                None
            } else {
                Some(u.int_in_range(1..=capsaga_core::capability::MAX_LLM_TOKENS)?)
            },
        },
    })
}

fn round_trip(cap: &Capability, from: &str) {
    let printed = cap.to_string();
    let again = Capability::parse(&printed).unwrap_or_else(|e| {
        panic!("{from:?} -> {cap:?} printed as {printed:?}, which does not parse: {e}")
    });
    assert_eq!(*cap, again, "round trip of {from:?} changed the value");
    assert_eq!(again.to_string(), printed, "printing is not a fixed point");
}

fn check_intersection(req: &Capability, grant: &Capability) {
    if !grant.is_concrete() {
        return;
    }
    if let Some(e) = intersect(req, grant) {
        assert!(e.is_concrete(), "{req} ∩ {grant} = {e} is not concrete");
        assert_eq!(e.kind(), req.kind());
        assert_eq!(
            intersect(&e, grant).as_ref(),
            Some(&e),
            "{req} ∩ {grant} = {e}, which {grant} does not cover"
        );
        if let (
            Capability::Fs {
                access: FsAccess::Read,
                ..
            },
            Capability::Fs { access, .. },
        ) = (req, &e)
        {
            assert_eq!(*access, FsAccess::Read, "{req} ∩ {grant} widened to write");
        }
    }
}

/// Property 5 on an accepted capability.
fn assert_grammar_limits(cap: &Capability, text: &str) {
    let host = match cap {
        Capability::Net {
            target: Place::Concrete(t),
            ..
        } => &t.host,
        Capability::Secret { host, .. } => host,
        _ => return,
    };
    match host {
        HostPattern::Wildcard(s) => {
            assert!(!is_public_suffix(s), "{text:?}: a wildcard under a public suffix")
        }
        HostPattern::Ipv6(ip) => assert!(
            embedded_ipv4(*ip).is_none(),
            "{text:?}: an IPv6 literal carrying an IPv4 address"
        ),
        _ => {}
    }
}

fuzz_target!(|data: &[u8]| {
    let mut u = Unstructured::new(data);
    let Ok(input) = Input::arbitrary(&mut u) else {
        return;
    };
    match input {
        Input::Text(text) => {
            if let Ok(cap) = Capability::parse(&text) {
                assert!(
                    !text.chars().any(char::is_control),
                    "{text:?} accepted with a control character"
                );
                assert_eq!(
                    text.trim(),
                    text,
                    "{text:?} accepted with surrounding whitespace"
                );
                round_trip(&cap, &text);
                assert_grammar_limits(&cap, &text);
            }
        }
        Input::Built(bytes) => {
            let mut u = Unstructured::new(&bytes);
            let Ok(cap) = built(&mut u) else { return };
            round_trip(&cap, "built");
            if let Ok(grant) = built(&mut u) {
                check_intersection(&cap, &grant);
            }
        }
        Input::Pair(a, b) => {
            if let (Ok(req), Ok(grant)) = (Capability::parse(&a), Capability::parse(&b)) {
                check_intersection(&req, &grant);
            }
        }
    }
});
