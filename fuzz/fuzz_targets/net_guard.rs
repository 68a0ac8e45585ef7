//! The net guard against a differential oracle.
//!
//! Each input builds a GET request URL (from pieces that make parsers
//! disagree: schemes, userinfo, IPv4 spellings, IPv6 embeddings, IDNA and
//! percent-encoded hosts, hosts written with characters the parser folds
//! (fullwidth, ideographic full stops, soft hyphens), ports, separators, or
//! raw text), a set of `net:`
//! grants, and the DNS answer for the URL's name (addresses biased towards
//! the special-purpose blocks). `capsaga_net_guard::evaluate` decides,
//! and so does the oracle of `tests/src/hostile/net_oracle.rs`, written
//! independently on the `url` crate and `std::net`.
//!
//! Properties:
//! 1. Both allow or both refuse.
//! 2. When both allow: the same host, the same port, the same addresses,
//!    each address public unless the URL names a granted literal, and the
//!    destination matches a grant.
//! 3. No panic, for any URL text.
#![no_main]

#[path = "../../tests/src/hostile/net_oracle.rs"]
mod net_oracle;

use capsaga_core::capability::Capability;
use capsaga_net_guard::{DestHost, NetRequest, evaluate};
use libfuzzer_sys::arbitrary::{self, Arbitrary, Unstructured};
use libfuzzer_sys::fuzz_target;
use net_oracle::Answer;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

const SCHEMES: &[&str] = &[
    "http://",
    "https://",
    "HTTP://",
    "http:",
    "http:/",
    "http:\\\\",
    "ftp://",
    "file://",
    "//",
    "",
];
const USERINFO: &[&str] = &[
    "",
    "",
    "",
    "u@",
    "u:p@",
    "@",
    "x.example.com@",
    "a%40b@",
    ":@",
];
const NAMES: &[&str] = &[
    "x.example.com",
    "X.Example.COM",
    "x.example.com.",
    "example.com",
    "a.b.example.com",
    "x.example.com.evil.com",
    "evil.com",
    "localhost",
    "\u{24E7}.example.com",
    "\u{FF58}.example.com",
    "x.example.com\u{3002}",
    "x%2eexample.com",
    "%78.example.com",
    "x..example.com",
    "xn--80ak6aa92e.example.com",
    "x.ex\u{0430}mple.com",
    "",
    "0",
    "127.1",
    "2130706433",
    "0x7f000001",
    "0177.0.0.1",
    "0x7f.1",
    "[::1]",
    "[::ffff:127.0.0.1]",
    "[::ffff:7f00:1]",
    "[64:ff9b::7f00:1]",
    "[2002:7f00:1::]",
    "[fe80::1%25eth0]",
    "[::]",
    "169.254.169.254",
    "10.0.0.1",
    "8.8.8.8",
    "[2606:4700:4700::1111]",
    "255.255.255.255",
    // Spellings the parser folds (issue 24 item 8a): refused as written.
    "x.example\u{FF0E}com",
    "x.example\u{FF61}com",
    "x.exam\u{AD}ple.com",
    "x.exam\u{FE00}ple.com",
    "\u{1D431}.example.com",
    "\u{FF11}\u{FF12}\u{FF17}.0.0.1",
    "127\u{3002}0.0.1",
    "%31%32%37.0.0.1",
    "x.exa\tmple.com",
    "b\u{FC}cher.example.com",
    "xn--bcher-kva.example.com",
    "bu\u{308}cher.example.com",
];
const PORTS: &[&str] = &[
    "", ":80", ":443", ":8080", ":0080", ":", ":65536", ":-1", ":8o",
];
const TAILS: &[&str] = &[
    "/",
    "",
    "/a?b#c",
    "\\@evil.com/",
    "#@evil.com",
    "?@evil.com",
    "/../x",
    "%00",
    " ",
    "\t",
];
const GRANTS: &[&str] = &[
    "net:http:*.example.com",
    "net:https:*.example.com",
    "net:http:x.example.com",
    "net:https:x.example.com:8080",
    "net:http:127.0.0.1",
    "net:http:[::1]",
    "net:http:localhost",
    "net:http:169.254.169.254",
    "net:http:0.0.0.0",
    "net:https:example.com",
    "net:http:8.8.8.8",
    "net:http:[::ffff:127.0.0.1]",
    "fs:read:/**",
];

#[derive(Debug, Arbitrary)]
enum UrlSpec {
    Pieces(u8, u8, u8, u8, u8),
    Raw(String),
}

#[derive(Debug, Arbitrary)]
enum Addr {
    V4(u32),
    V6(u128),
    Special(u8, u16),
}

fn special(kind: u8, low: u16) -> IpAddr {
    let l = u32::from(low);
    match kind % 16 {
        0 => IpAddr::V4(Ipv4Addr::from(0x7f00_0000 | l)),
        1 => IpAddr::V4(Ipv4Addr::from(0x0a00_0000 | l)),
        2 => IpAddr::V4(Ipv4Addr::from(0xa9fe_0000 | l)),
        3 => IpAddr::V4(Ipv4Addr::from(0x6440_0000 | l)),
        4 => IpAddr::V4(Ipv4Addr::from(0xc0a8_0000 | l)),
        5 => IpAddr::V4(Ipv4Addr::from(0xac10_0000 | l)),
        6 => IpAddr::V4(Ipv4Addr::new(168, 63, 129, 16)),
        7 => IpAddr::V6(Ipv4Addr::from(0x7f00_0001 | l << 8).to_ipv6_mapped()),
        8 => IpAddr::V6(Ipv6Addr::new(0x64, 0xff9b, 0, 0, 0, 0, 0x0a00, low)),
        9 => IpAddr::V6(Ipv6Addr::new(0x2002, 0x0a00, low, 0, 0, 0, 0, 1)),
        10 => IpAddr::V6(Ipv6Addr::new(0xfe80, 0, 0, 0, 0, 0, 0, low)),
        11 => IpAddr::V6(Ipv6Addr::new(0xfd00, 0xec2, 0, 0, 0, 0, 0, low)),
        12 => IpAddr::V6(Ipv6Addr::new(0x2001, 0xdb8, 0, 0, 0, 0, 0, low)),
        13 => IpAddr::V6(Ipv6Addr::new(0x2001, low, 0, 0, 0, 0, 0, 1)),
        14 => IpAddr::V6(Ipv6Addr::new(0x2606, 0x4700, 0, 0, 0, 0, 0, low)),
        _ => IpAddr::V4(Ipv4Addr::new(93, 184, (low >> 8) as u8, low as u8)),
    }
}

#[derive(Debug, Arbitrary)]
struct Input {
    url: UrlSpec,
    grants: Vec<u8>,
    answer: Vec<Addr>,
}

fuzz_target!(|data: &[u8]| {
    let mut u = Unstructured::new(data);
    let Ok(input) = Input::arbitrary(&mut u) else {
        return;
    };
    let url = match &input.url {
        UrlSpec::Pieces(s, i, h, p, t) => format!(
            "{}{}{}{}{}",
            SCHEMES[*s as usize % SCHEMES.len()],
            USERINFO[*i as usize % USERINFO.len()],
            NAMES[*h as usize % NAMES.len()],
            PORTS[*p as usize % PORTS.len()],
            TAILS[*t as usize % TAILS.len()],
        ),
        UrlSpec::Raw(s) => s.chars().take(400).collect(),
    };
    let grants: Vec<Capability> = input
        .grants
        .iter()
        .take(4)
        .filter_map(|g| Capability::parse(GRANTS[*g as usize % GRANTS.len()]).ok())
        .collect();
    let resolved: Vec<IpAddr> = input
        .answer
        .iter()
        .take(24)
        .map(|a| match a {
            Addr::V4(n) => IpAddr::V4(Ipv4Addr::from(*n)),
            Addr::V6(n) => IpAddr::V6(Ipv6Addr::from(*n)),
            Addr::Special(k, l) => special(*k, *l),
        })
        .collect();
    let req = NetRequest {
        method: "GET",
        url: &url,
        headers: &[],
        dry_run: false,
    };
    let guard = evaluate(&req, &grants, &resolved);
    let oracle = net_oracle::decide(&url, &grants, &resolved);
    match (&guard, &oracle) {
        (
            Ok((dest, addrs)),
            Answer::Allow {
                host,
                port,
                addresses,
            },
        ) => {
            assert_eq!(&dest.host.to_string(), host, "{url:?}: host differs");
            assert_eq!(dest.port, *port, "{url:?}: port differs");
            let got: Vec<IpAddr> = addrs.iter().map(|a| a.ip()).collect();
            assert_eq!(&got, addresses, "{url:?}: addresses differ");
            assert!(addrs.iter().all(|a| a.port() == dest.port));
            if let DestHost::Domain(_) = dest.host {
                assert!(
                    got.iter().all(|ip| net_oracle::public(*ip)),
                    "{url:?}: non-public address {got:?}"
                );
            }
        }
        (Err(_), Answer::Deny(_)) => {}
        (g, o) => panic!(
            "{url:?} under {:?} resolving to {resolved:?}: the guard says {g:?}, the oracle {o:?}",
            grants.iter().map(ToString::to_string).collect::<Vec<_>>()
        ),
    }
});
