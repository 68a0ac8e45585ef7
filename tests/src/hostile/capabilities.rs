//! Capability families: the grammar of `capsaga_core::capability` from the
//! attacker's side (what a tool declares, what an operator may mistype), IP
//! encodings in `net:` hosts, ports, wildcards, directory globs, and grant
//! coverage.

use super::Family;
use super::urls::v6_embeddings;
use capsaga_check::corpus::Case;
use capsaga_check::{Decision, Guard};
use std::net::Ipv4Addr;

fn valid(input: impl Into<String>) -> Case {
    Case::new(Guard::Capability, input, Decision::Allow).kind("valid")
}

fn invalid(input: impl Into<String>) -> Case {
    Case::new(Guard::Capability, input, Decision::Deny).kind("invalid_capability")
}

/// Every capability family.
pub fn families() -> Vec<Family> {
    vec![
        valid_forms(),
        mutations(),
        ip_encodings(),
        ipv6_carrying_ipv4_in_grants(),
        ports(),
        wildcards(),
        wildcard_public_suffixes(),
        fs_directories(),
        grant_coverage(),
    ]
}

/// Valid capability strings of every kind (also the bases of [`mutations`]).
pub fn valid_strings() -> Vec<String> {
    let mut out = Vec::new();
    for access in ["read", "write"] {
        for dir in [
            "/",
            "/data",
            "/a/b-c_d.e",
            "/srv/agent/ws",
            "/my docs",
            "/données",
            "/data/...",
            "~",
            "~/x",
        ] {
            let dir = if dir == "/" { "" } else { dir };
            out.push(format!("fs:{access}:{dir}/**"));
        }
        out.push(format!("fs:{access}:*"));
    }
    for scheme in ["http", "https"] {
        for host in [
            "example.com",
            "api.example.com",
            "EXAMPLE.com",
            "example.com.",
            "*.example.com",
            "10.0.0.1",
            "127.0.0.1",
            "[::1]",
            "[2001:db8::1]",
            "[2606:4700:4700::1111]",
            "xn--bcher-kva.example",
            "a-b.c-d.example",
        ] {
            for port in ["", ":1", ":8080", ":65535"] {
                out.push(format!("net:{scheme}:{host}{port}"));
            }
        }
        out.push(format!("net:{scheme}:*"));
    }
    for name in ["HOME", "API_TOKEN", "_x", "a1"] {
        out.push(format!("env:{name}"));
    }
    out.push(format!("env:{}", "A".repeat(128)));
    for s in ["gh@api.github.com", "a-b_c@*.example.com", "x@10.0.0.1"] {
        out.push(format!("secret:{s}"));
    }
    for kind in ["kv", "llm"] {
        for id in ["notes", "a-b_c", "0"] {
            out.push(format!("{kind}:{id}"));
        }
    }
    for m in [
        "mem:notes",
        "mem:a-b_c:read",
        "mem:0:write",
        "mem:*:read",
        "mem:*",
    ] {
        out.push(m.to_string());
    }
    out
}

fn valid_forms() -> Family {
    Family {
        name: "capability_valid_forms",
        doc: "valid strings of every kind: fs read/write over plain, Unicode and `~` directories and `*`; net http/https over DNS names (mixed case, trailing dot), wildcards, IPv4 and bracketed IPv6 literals with and without ports; env, secret, kv, llm, mem (with and without `:read`/`:write`). Each parses, and its normalised form parses back to the same value",
        cases: valid_strings().into_iter().map(valid).collect(),
    }
}

/// One named edit of a capability string.
type Mutation = (&'static str, fn(&str) -> String);

/// Edits that make any capability string invalid.
const MUTATIONS: &[Mutation] = &[
    ("leading space", |s| format!(" {s}")),
    ("trailing space", |s| format!("{s} ")),
    ("NUL inside", |s| {
        let i = s.len() / 2;
        let i = (0..=i).rev().find(|i| s.is_char_boundary(*i)).unwrap_or(0);
        format!("{}\0{}", &s[..i], &s[i..])
    }),
    ("trailing newline", |s| format!("{s}\n")),
    ("upper-case kind", |s| {
        let (k, r) = s.split_once(':').unwrap_or((s, ""));
        format!("{}:{r}", k.to_uppercase())
    }),
    ("fullwidth colon", |s| s.replacen(':', "\u{FF1A}", 1)),
    ("zero-width prefix", |s| format!("\u{200B}{s}")),
    ("BOM prefix", |s| format!("\u{FEFF}{s}")),
    ("escape sequence", |s| format!("{s}\u{1b}[2J")),
];

fn mutations() -> Family {
    let mut cases = Vec::new();
    for (i, base) in valid_strings().iter().enumerate() {
        for k in 0..3 {
            let (what, f) = MUTATIONS[(i * 3 + k) % MUTATIONS.len()];
            cases.push(invalid(f(base)).note(what));
        }
    }
    Family {
        name: "capability_mutations",
        doc: "each valid string with three of: leading or trailing whitespace, a NUL inside, a trailing newline, an upper-case kind, a fullwidth colon, a zero-width or BOM prefix, an ANSI escape sequence: every one refused (a grant is compared as written, so lookalikes must not parse)",
        cases,
    }
}

/// Addresses whose encodings are tried: loopback, metadata, private ranges,
/// CGNAT, unspecified, broadcast, public.
pub const ADDRESSES: &[[u8; 4]] = &[
    [127, 0, 0, 1],
    [169, 254, 169, 254],
    [10, 0, 0, 1],
    [192, 168, 1, 1],
    [172, 16, 0, 1],
    [100, 64, 0, 1],
    [0, 0, 0, 0],
    [255, 255, 255, 255],
    [8, 8, 8, 8],
    [1, 2, 3, 4],
];

/// Non-canonical spellings of an IPv4 address that WHATWG URL parsers, libc's
/// `inet_aton` or both read as that address.
pub fn ipv4_spellings(o: [u8; 4]) -> Vec<(&'static str, String)> {
    let n = u32::from(Ipv4Addr::from(o));
    vec![
        ("decimal integer", n.to_string()),
        ("hex integer", format!("0x{n:x}")),
        ("upper hex integer", format!("0X{n:X}")),
        ("octal integer", format!("0{n:o}")),
        (
            "dotted octal",
            o.iter()
                .map(|b| format!("0{b:o}"))
                .collect::<Vec<_>>()
                .join("."),
        ),
        (
            "dotted hex",
            o.iter()
                .map(|b| format!("0x{b:x}"))
                .collect::<Vec<_>>()
                .join("."),
        ),
        (
            "three parts",
            format!(
                "{}.{}.{}",
                o[0],
                o[1],
                u16::from(o[2]) << 8 | u16::from(o[3])
            ),
        ),
        ("two parts", format!("{}.{}", o[0], n & 0x00ff_ffff)),
        (
            "leading zeros",
            o.iter()
                .map(|b| format!("0{b}"))
                .collect::<Vec<_>>()
                .join("."),
        ),
        (
            "mixed hex and decimal",
            format!("0x{:x}.{}", o[0], n & 0x00ff_ffff),
        ),
        (
            "percent-encoded",
            Ipv4Addr::from(o)
                .to_string()
                .bytes()
                .map(|b| {
                    if b == b'.' {
                        ".".to_string()
                    } else {
                        format!("%{b:02x}")
                    }
                })
                .collect(),
        ),
        (
            "fullwidth digits",
            Ipv4Addr::from(o)
                .to_string()
                .chars()
                .map(|c| {
                    c.to_digit(10)
                        .and_then(|d| char::from_u32(0xFF10 + d))
                        .unwrap_or(c)
                })
                .collect(),
        ),
        ("decimal integer, trailing dot", format!("{n}.")),
        (
            "unbracketed IPv4-mapped IPv6",
            format!("::ffff:{}", Ipv4Addr::from(o)),
        ),
    ]
}

fn ip_encodings() -> Family {
    let mut cases = Vec::new();
    for o in ADDRESSES {
        let ip = Ipv4Addr::from(*o);
        for scheme in ["http", "https"] {
            cases.push(valid(format!("net:{scheme}:{ip}")));
        }
        cases.push(valid(format!("net:http:{ip}.")).note("trailing dot, normalised away"));
        cases.push(valid(format!("net:http:{ip}:8080")));
        for (what, s) in ipv4_spellings(*o) {
            cases.push(invalid(format!("net:http:{s}")).note(what));
            cases.push(invalid(format!("secret:tok@{s}")).note(what));
        }
    }
    Family {
        name: "ip_encodings_in_grants",
        doc: "loopback, metadata (169.254.169.254), private, CGNAT, unspecified, broadcast and public IPv4 addresses in every spelling a URL parser or inet_aton accepts (decimal, hex and octal integers, dotted octal and hex, two and three parts, leading zeros, mixed, percent-encoded, fullwidth digits, unbracketed IPv4-mapped): only the canonical dotted quad parses, so a grant means one address",
        cases,
    }
}

fn ipv6_carrying_ipv4_in_grants() -> Family {
    let mut cases = Vec::new();
    for o in ADDRESSES {
        for (what, v6) in v6_embeddings(*o) {
            for form in [
                format!("net:http:[{v6}]"),
                format!("net:https:[{v6}]:8443"),
                format!("secret:tok@[{v6}]"),
            ] {
                cases.push(invalid(form).note(what));
            }
        }
    }
    for v6 in [
        "::1",
        "::",
        "2001:db8::1",
        "fd00:ec2::254",
        "2606:4700:4700::1111",
        "fe80::1",
    ] {
        cases.push(valid(format!("net:http:[{v6}]")).note("carries no IPv4 address"));
    }
    Family {
        name: "ipv6_carrying_ipv4_in_grants",
        doc: "every IPv4 address of these families dressed as IPv6 (IPv4-mapped, IPv4-compatible, SIIT, NAT64 64:ff9b::/96 and local-use 64:ff9b:1::/48, 6to4 2002::/16, Teredo 2001::/32 with the client inverted) in net and secret grants: refused with the IPv4 spelling to write, since the net guard reads such a literal as its IPv4 address (issue 13 item 7); IPv6 literals that carry no IPv4 address stay valid",
        cases,
    }
}

fn ports() -> Family {
    let mut cases = Vec::new();
    for host in ["example.com", "[::1]", "10.0.0.1"] {
        for p in ["1", "80", "443", "65535"] {
            cases.push(valid(format!("net:https:{host}:{p}")));
        }
        for p in [
            "0",
            "65536",
            "99999",
            "100000",
            "00080",
            "080",
            "-1",
            "+80",
            "80a",
            " 80",
            "",
            "1e3",
            "0x50",
            "\u{FF18}\u{FF10}",
            "4294967377",
            "80:80",
        ] {
            cases.push(invalid(format!("net:https:{host}:{p}")));
        }
    }
    Family {
        name: "ports",
        doc: "ports at the bounds (1, 65535) and beyond (0, 65536, 2^32+81 wrapping to 81), with leading zeros or signs, hex, exponent, fullwidth digits, a space, empty, twice",
        cases,
    }
}

fn wildcards() -> Family {
    let mut cases: Vec<Case> = [
        "*.example.com",
        "*.a.example.com",
        "*.EXAMPLE.com",
        "*.example.com:8443",
        "*.example.com.",
    ]
    .into_iter()
    .map(|h| valid(format!("net:https:{h}")))
    .collect();
    for h in [
        "*:*",
        "*:443",
        "*.com",
        "*.",
        "a.*.com",
        "**.example.com",
        "*example.com",
        "*.*.example.com",
        "*.example.*",
        "example.*",
        ".example.com",
        "*..example.com",
        "*.-example.com",
        "*.exa_mple.com",
        "%2a.example.com",
        "\u{FF0A}.example.com",
        "*.example.com*",
        "exаmple.com",
        "еxample.com",
        "example.com\u{200B}",
        "xn--80ak6aa92e.com\u{0301}",
        "a..b",
        "-a.example.com",
        "a-.example.com",
        "user@example.com",
        "user:pass@example.com",
        "example.com/path",
        "example.com?x",
        "example.com#x",
    ] {
        cases.push(invalid(format!("net:https:{h}")));
    }
    cases.push(valid("secret:gh@*.github.com"));
    cases.push(invalid("secret:gh@*.com"));
    cases.push(invalid("secret:gh@*"));
    Family {
        name: "wildcards_and_host_names",
        doc: "wildcards only as the whole leading label under a registrable domain; `*` alone, in the middle, doubled, fullwidth, percent-encoded, or under a TLD refused; host names with Cyrillic homoglyphs (must be punycode), invisible characters, empty labels, edge hyphens, underscores, userinfo, paths, queries and fragments refused",
        cases,
    }
}

/// Public suffixes of the Public Suffix List's ICANN and private sections
/// (wildcard rules included), and names the list does not know at the top.
const PUBLIC_SUFFIXES: &[&str] = &[
    "com",
    "net",
    "org",
    "io",
    "co.uk",
    "org.uk",
    "gov.uk",
    "ltd.uk",
    "com.au",
    "net.au",
    "co.nz",
    "co.jp",
    "ac.jp",
    "com.br",
    "com.cn",
    "co.za",
    "com.mx",
    "co.in",
    "pvt.k12.ma.us",
    "xn--p1ai",
    "xn--55qx5d.cn",
    "github.io",
    "gitlab.io",
    "blogspot.com",
    "herokuapp.com",
    "appspot.com",
    "netlify.app",
    "vercel.app",
    "pages.dev",
    "workers.dev",
    "azurewebsites.net",
    "cloudfront.net",
    "s3.amazonaws.com",
    "firebaseapp.com",
    "ck",
    "anything.ck",
    "x.kawasaki.jp",
    "internal",
    "localhost",
    "corp",
];

fn wildcard_public_suffixes() -> Family {
    let mut cases = Vec::new();
    for suffix in PUBLIC_SUFFIXES {
        for form in [
            format!("net:https:*.{suffix}"),
            format!("net:http:*.{suffix}:8080"),
            format!("net:https:*.{}.", suffix.to_uppercase()),
            format!("secret:tok@*.{suffix}"),
        ] {
            cases.push(invalid(form).note("a wildcard directly under a public suffix"));
        }
        // One label deeper is a registrable domain (except under a
        // wildcard rule, where that label is a suffix too).
        if *suffix != "ck" {
            cases.push(valid(format!("net:https:*.example.{suffix}")));
        }
        cases.push(valid(format!("net:https:{suffix}")).note("a single name, not a wildcard"));
    }
    // Exception rules: `!www.ck` and `!city.kawasaki.jp` are registrable.
    for fine in [
        "*.www.ck",
        "*.city.kawasaki.jp",
        "*.me.github.io",
        "*.bbc.co.uk",
    ] {
        cases.push(valid(format!("net:https:{fine}")));
    }
    Family {
        name: "wildcard_public_suffixes",
        doc: "a wildcard directly under a public suffix of Mozilla's Public Suffix List (ICANN: com, co.uk, com.au, gov.uk, pvt.k12.ma.us, IDN TLDs in punycode; private: github.io, blogspot.com, herokuapp.com, s3.amazonaws.com, ...; wildcard rules `*.ck`, `*.kawasaki.jp`; TLDs the list does not know) in net and secret grants, any case, with port or trailing dot: refused as too broad (issue 13 item 6); one label deeper, exception rules (`!www.ck`) and single names are accepted",
        cases,
    }
}

fn fs_directories() -> Family {
    let mut cases: Vec<Case> = [
        "fs:read:/data/*.md",
        "fs:read:/data/*/**",
        "fs:read:data/**",
        "fs:read:/data/../etc/**",
        "fs:read:/data/./x/**",
        "fs:read://data/**",
        "fs:read:/data//**",
        "fs:read:~user/**",
        "fs:read:~/../**",
        "fs:read:/data/**/**",
        "fs:read:/da\\ta/**",
        "fs:read:/data/[ab]/**",
        "fs:read:/data/{a,b}/**",
        "fs:read:/data/?/**",
        "fs:read:/data",
        "fs:read:/data/",
        "fs:read:/data/*",
        "fs:read:**",
        "fs:read:/**/..",
        "fs:exec:/data/**",
        "fs:read:",
        "fs:",
        "fs",
        "fs:READ:/data/**",
        "fs:read:C:\\data/**",
        "fs:read:~/**/x",
        "fs:read:/data/**\u{0}",
        "fs:write:/..\u{0}/**",
        "fs:read:/data/..",
        "fs:read:/data/../**",
        "fs:read:/data/%2e%2e/**/..",
    ]
    .into_iter()
    .map(invalid)
    .collect();
    cases.push(valid("fs:read:/data/%2e%2e/**").note("a literal name, not decoded"));
    cases
        .push(valid("fs:read:/data\u{202E}/**").note(
            "a bidi override is not a control character: the directory is that literal name",
        ));
    Family {
        name: "fs_directories",
        doc: "directory grants: finer globs (`*.md`, `*`, `?`, `[ab]`, `{a,b}`, `**` twice), relative or `~user` directories, `.`/`..`/empty segments, backslashes and drive letters, a missing `/**`, unknown access, control characters: refused with the reason (a preopen is a directory)",
        cases,
    }
}

fn grant_coverage() -> Family {
    let rows: &[(&str, &[&str], bool)] = &[
        ("fs:write:*", &["fs:write:/ws/**"], true),
        ("fs:write:*", &["fs:read:/ws/**"], false),
        ("fs:read:*", &["fs:write:/ws/**"], true),
        ("fs:read:/ws/sub/**", &["fs:read:/ws/**"], true),
        ("fs:read:/wsx/**", &["fs:read:/ws/**"], false),
        ("fs:read:/ws/**", &["fs:read:/ws/sub/**"], false),
        ("fs:read:/etc/**", &["fs:read:/**"], true),
        ("fs:write:/ws/**", &["fs:read:/ws/**"], false),
        (
            "net:https:api.example.com",
            &["net:https:*.example.com"],
            true,
        ),
        ("net:https:example.com", &["net:https:*.example.com"], false),
        (
            "net:https:a.b.example.com",
            &["net:https:*.example.com"],
            false,
        ),
        (
            "net:https:api.example.com.evil.net",
            &["net:https:*.example.com"],
            false,
        ),
        (
            "net:http:api.example.com",
            &["net:https:api.example.com"],
            false,
        ),
        (
            "net:https:api.example.com:8443",
            &["net:https:api.example.com"],
            false,
        ),
        (
            "net:https:api.example.com:443",
            &["net:https:api.example.com"],
            true,
        ),
        ("net:https:*", &["net:https:api.example.com"], true),
        ("net:https:*", &["net:http:api.example.com"], false),
        (
            "net:https:*.example.com",
            &["net:https:api.example.com"],
            false,
        ),
        ("net:http:127.0.0.1", &["net:http:localhost"], false),
        ("net:http:[::1]", &["net:http:127.0.0.1"], false),
        (
            "secret:gh@api.github.com",
            &["secret:gh@*.github.com"],
            true,
        ),
        (
            "secret:gh@api.github.com",
            &["secret:other@api.github.com"],
            false,
        ),
        ("secret:gh@github.com", &["secret:gh@*.github.com"], false),
        ("env:HOME", &["env:HOME"], true),
        ("env:HOME", &["env:home"], false),
        ("env:HOME", &["fs:read:/**"], false),
        ("kv:notes", &["kv:notes"], true),
        ("llm:frontier", &["llm:cheap"], false),
    ];
    let cases = rows
        .iter()
        .map(|(req, grants, covered)| {
            let (expect, kind) = if *covered {
                (Decision::Allow, "covered")
            } else {
                (Decision::Deny, "not_granted")
            };
            Case::new(Guard::Capability, *req, expect)
                .grants(grants)
                .kind(kind)
        })
        .collect();
    Family {
        name: "grant_coverage",
        doc: "a tool's requirement against operator grants: read served by write but not the reverse, subdirectories only downwards, one-label wildcards (not the apex, not two labels, not a suffix trick), scheme and port exact, a name never covering an address, an IPv4 address never covering an IPv6 one, secrets by name and host",
        cases,
    }
}
