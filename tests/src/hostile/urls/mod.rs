//! URL families: outgoing requests a tool may try (SSRF), against the net
//! guard with fixed DNS answers. Every case without method or header tricks
//! is also decided by the independent oracle of [`super::net_oracle`], and
//! the test checks that both agree.

use super::Family;
use super::capabilities::{ADDRESSES, ipv4_spellings};
use capsaga_check::corpus::Case;
use capsaga_check::{Decision, Guard};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

mod parser_confusion;
use parser_confusion::parser_confusion;

/// Grants most URL cases run under.
pub const GRANTS: [&str; 2] = ["net:http:*.example.com", "net:https:*.example.com"];

/// A public address the fixed DNS answers use.
pub const PUBLIC_V4: &str = "93.184.215.14";
/// A public IPv6 address the fixed DNS answers use.
pub const PUBLIC_V6: &str = "2606:4700:4700::1111";

fn url(input: impl Into<String>, expect: Decision, kind: &str) -> Case {
    Case::new(Guard::Url, input, expect)
        .grants(&GRANTS)
        .kind(kind)
}

fn with_dns(mut c: Case, name: &str, ips: &[IpAddr]) -> Case {
    c.resolve.insert(name.to_string(), ips.to_vec());
    c
}

/// The usual DNS answers: `x.example.com` is public, `evil.com` too.
fn usual_dns(c: Case) -> Case {
    let c = with_dns(c, "x.example.com", &[ip(PUBLIC_V4)]);
    with_dns(c, "evil.com", &[ip("6.6.6.6")])
}

fn ip(s: &str) -> IpAddr {
    s.parse().unwrap_or(IpAddr::V4(Ipv4Addr::UNSPECIFIED))
}

fn is_public_v4(o: [u8; 4]) -> bool {
    matches!(o, [8, 8, 8, 8] | [1, 2, 3, 4])
}

/// Every URL family.
pub fn families() -> Vec<Family> {
    vec![
        ip_spellings_in_urls(),
        ipv6_carrying_ipv4_in_urls(),
        resolved_addresses(),
        parser_confusion(),
        schemes(),
        literal_grants(),
        methods_and_headers(),
    ]
}

fn ip_spellings_in_urls() -> Family {
    let mut cases = Vec::new();
    for o in ADDRESSES {
        let canonical = Ipv4Addr::from(*o);
        let never = o[0] == 0 || *o == [255, 255, 255, 255];
        for (what, s) in ipv4_spellings(*o) {
            // Spellings a WHATWG parser does not read as this address.
            if matches!(what, "leading zeros" | "unbracketed IPv4-mapped IPv6") {
                continue;
            }
            let u = format!("http://{s}/latest/meta-data/");
            // Spellings the parser folds (issue 24 item 8a): refused as
            // written, even when a grant names the address.
            if matches!(what, "percent-encoded" | "fullwidth digits") {
                cases.push(url(u.clone(), Decision::Deny, "host_spelling").note(what));
                let c = Case::new(Guard::Url, u, Decision::Deny)
                    .grants(&[format!("net:http:{canonical}")])
                    .kind("host_spelling")
                    .note(format!(
                        "{what}: refused although the operator named the address"
                    ));
                cases.push(c);
                continue;
            }
            cases.push(url(u.clone(), Decision::Deny, "not_granted").note(what));
            let mut c = Case::new(Guard::Url, u, Decision::Allow)
                .grants(&[format!("net:http:{canonical}")])
                .note(format!("{what}: the same address the operator named"));
            c = if never {
                c.kind("not_unicast")
            } else {
                c.kind("allowed")
            };
            if never {
                c.expect = Decision::Deny;
            }
            cases.push(c);
        }
    }
    Family {
        name: "url_ip_spellings",
        doc: "every IPv4 address of the capability families in each spelling the WHATWG URL parser reads as it (decimal, hex and octal integers, dotted octal and hex, two and three parts, mixed, percent-encoded, fullwidth digits, trailing dot): refused when no grant names the address, allowed only as the very address the operator named (never the unspecified or broadcast address); percent-encoded and fullwidth spellings are refused whatever the grants (issue 24 item 8a)",
        cases,
    }
}

/// IPv6 spellings that carry an IPv4 address: mapped, compatible (not for
/// 0.0.0.0 and 0.0.0.1, which are `::` and `::1`), SIIT, NAT64 (well-known
/// and local-use prefixes), 6to4, Teredo (client address inverted).
pub fn v6_embeddings(o: [u8; 4]) -> Vec<(&'static str, Ipv6Addr)> {
    let v4 = Ipv4Addr::from(o);
    let n = u32::from(v4);
    let hi = (n >> 16) as u16;
    let lo = (n & 0xffff) as u16;
    let mut out = vec![
        ("IPv4-mapped", v4.to_ipv6_mapped()),
        ("SIIT", Ipv6Addr::new(0, 0, 0, 0, 0xffff, 0, hi, lo)),
        ("NAT64", Ipv6Addr::new(0x64, 0xff9b, 0, 0, 0, 0, hi, lo)),
        (
            "local-use NAT64",
            Ipv6Addr::new(0x64, 0xff9b, 1, 0, 0, 0, hi, lo),
        ),
        ("6to4", Ipv6Addr::new(0x2002, hi, lo, 0, 0, 0, 0, 1)),
        (
            "Teredo",
            Ipv6Addr::new(0x2001, 0, 0x4136, 0xe378, 0x8000, 0x63bf, !hi, !lo),
        ),
    ];
    if n > 1 {
        out.push(("IPv4-compatible", v4.to_ipv6_compatible()));
    }
    out
}

fn ipv6_carrying_ipv4_in_urls() -> Family {
    let mut cases = Vec::new();
    for o in ADDRESSES {
        let v4 = Ipv4Addr::from(*o);
        let never = o[0] == 0 || *o == [255, 255, 255, 255];
        let neighbour = Ipv4Addr::from(u32::from(v4) ^ 1);
        for (what, v6) in v6_embeddings(*o) {
            let u = format!("http://[{v6}]/latest/meta-data/");
            cases.push(url(u.clone(), Decision::Deny, "not_granted").note(what));
            cases.push(
                Case::new(Guard::Url, u.clone(), Decision::Deny)
                    .grants(&[format!("net:http:{neighbour}"), "net:http:[::1]".into()])
                    .kind("not_granted")
                    .note(format!("{what}: a neighbour's grant")),
            );
            let named = Case::new(Guard::Url, u, Decision::Allow)
                .grants(&[format!("net:http:{v4}")])
                .note(format!("{what}: the IPv4 address the operator named"));
            cases.push(if never {
                let mut c = named.kind("not_unicast");
                c.expect = Decision::Deny;
                c
            } else {
                named.kind("allowed")
            });
        }
    }
    Family {
        name: "url_ipv6_carrying_ipv4",
        doc: "every IPv4 address of the capability families dressed as an IPv6 literal in the URL (IPv4-mapped, IPv4-compatible, SIIT, NAT64 and local-use NAT64, 6to4, Teredo): read as that IPv4 address (issue 13 item 7), so refused under name grants and a neighbour's grant, allowed and connected to as the IPv4 address only under a grant naming it, never for the unspecified or broadcast address",
        cases,
    }
}

fn resolved_addresses() -> Family {
    let mut cases = Vec::new();
    let name = "r.example.com";
    for o in ADDRESSES {
        let v4 = IpAddr::V4(Ipv4Addr::from(*o));
        let mut answers: Vec<(String, IpAddr)> = vec![("IPv4".into(), v4)];
        for (what, v6) in v6_embeddings(*o) {
            answers.push((what.into(), IpAddr::V6(v6)));
        }
        for (what, a) in answers {
            // A local translator or a Teredo relay stands between: never public.
            let via = matches!(what.as_str(), "local-use NAT64" | "Teredo");
            let (expect, kind) = if is_public_v4(*o) && !via {
                (Decision::Allow, "allowed")
            } else {
                (Decision::Deny, "address")
            };
            cases.push(
                with_dns(url(format!("http://{name}/"), expect, kind), name, &[a])
                    .note(format!("{name} answers {a} ({what})")),
            );
        }
    }
    let v6_table: &[(&str, bool)] = &[
        ("::1", false),
        ("::", false),
        ("fe80::1", false),
        ("fc00::1", false),
        ("fd00:ec2::254", false),
        ("ff02::1", false),
        ("2001:db8::1", false),
        ("2001::1", false),
        ("2001:2::1", false),
        ("3fff::1", false),
        ("100::1", false),
        ("5f00::1", false),
        ("fec0::1", false),
        ("64:ff9b:1::1", false),
        ("4000::1", false),
        (PUBLIC_V6, true),
        ("2a00:1450:4001:800::200e", true),
    ];
    for (a, public) in v6_table {
        let (expect, kind) = if *public {
            (Decision::Allow, "allowed")
        } else {
            (Decision::Deny, "address")
        };
        cases.push(with_dns(
            url(format!("https://{name}/"), expect, kind),
            name,
            &[ip(a)],
        ));
    }
    // Rebinding: one bad answer among good ones refuses the whole request.
    for bad in [
        "127.0.0.1",
        "169.254.169.254",
        "10.1.2.3",
        "::1",
        "::ffff:192.168.0.1",
    ] {
        for order in [0, 1] {
            let ips = if order == 0 {
                vec![ip(PUBLIC_V4), ip(bad)]
            } else {
                vec![ip(bad), ip(PUBLIC_V4), ip(PUBLIC_V6)]
            };
            cases.push(
                with_dns(
                    url(format!("http://{name}/"), Decision::Deny, "address"),
                    name,
                    &ips,
                )
                .note("DNS rebinding: one non-public answer"),
            );
        }
    }
    let many: Vec<IpAddr> = (1..=20u8)
        .map(|i| IpAddr::V4(Ipv4Addr::new(93, 184, 215, i)))
        .collect();
    cases.push(with_dns(
        url(format!("http://{name}/"), Decision::Allow, "allowed"),
        name,
        &many,
    ));
    cases.push(url(format!("http://{name}/"), Decision::Deny, "no_address").note("NXDOMAIN"));
    Family {
        name: "url_resolved_addresses",
        doc: "a granted name answering each IPv4 address of the capability families, directly and embedded in IPv6 (mapped, compatible, SIIT, NAT64, 6to4, and local-use NAT64 and Teredo, which stay non-public whatever they carry), and each special IPv6 block (loopback, unspecified, link-local, ULA, AWS IMDS, multicast, documentation, Teredo, benchmarking, discard, SRv6, site-local, local NAT64, outside 2000::/3): only public answers pass; one bad answer among good ones refuses the request (DNS rebinding); no answer refuses it",
        cases,
    }
}

fn schemes() -> Family {
    let cases = [
        "file:///etc/passwd",
        "file://x.example.com/etc/passwd",
        "gopher://x.example.com:70/_GET%20/",
        "dict://x.example.com:11211/stat",
        "ftp://x.example.com/",
        "ldap://x.example.com/",
        "jar:http://x.example.com!/",
        "data:text/plain,hello",
        "javascript:alert(1)",
        "ws://x.example.com/",
        "wss://x.example.com/",
        "netdoc:///etc/passwd",
        "tftp://x.example.com/x",
        "sftp://x.example.com/",
        "httpx://x.example.com/",
    ]
    .into_iter()
    .map(|u| usual_dns(url(u, Decision::Deny, "scheme")))
    .chain(
        [
            "http//x.example.com/",
            "//x.example.com/",
            "x.example.com",
            "",
            "http://",
            "https:///",
        ]
        .into_iter()
        .map(|u| usual_dns(url(u, Decision::Deny, "bad_url"))),
    )
    .collect();
    Family {
        name: "url_schemes",
        doc: "schemes SSRF payloads use to reach other protocols (file, gopher, dict, ftp, ldap, jar, data, javascript, websocket, netdoc, tftp, sftp) and relative or hostless URLs: only absolute http and https URLs pass",
        cases,
    }
}

fn literal_grants() -> Family {
    use Decision::{Allow, Deny};
    let rows: &[(&str, &str, Decision, &str)] = &[
        (
            "http://169.254.169.254/latest/meta-data/",
            "net:http:169.254.169.254",
            Allow,
            "allowed",
        ),
        (
            "http://[fd00:ec2::254]/latest/meta-data/",
            "net:http:[fd00:ec2::254]",
            Allow,
            "allowed",
        ),
        (
            "http://127.0.0.1:8080/",
            "net:http:127.0.0.1:8080",
            Allow,
            "allowed",
        ),
        (
            "http://127.0.0.1/",
            "net:http:127.0.0.1:8080",
            Deny,
            "not_granted",
        ),
        (
            "http://127.0.0.2/",
            "net:http:127.0.0.1",
            Deny,
            "not_granted",
        ),
        ("http://[::1]/", "net:http:127.0.0.1", Deny, "not_granted"),
        (
            "http://[::ffff:127.0.0.1]/",
            "net:http:127.0.0.1",
            Allow,
            "allowed",
        ),
        (
            "http://[::ffff:127.0.0.1]/",
            "net:http:[::1]",
            Deny,
            "not_granted",
        ),
        (
            "http://localhost/",
            "net:http:127.0.0.1",
            Deny,
            "not_granted",
        ),
        ("http://0.0.0.0/", "net:http:0.0.0.0", Deny, "not_unicast"),
        ("http://[::]/", "net:http:[::]", Deny, "not_unicast"),
        (
            "http://[ff02::1]/",
            "net:http:[ff02::1]",
            Deny,
            "not_unicast",
        ),
        (
            "http://255.255.255.255/",
            "net:http:255.255.255.255",
            Deny,
            "not_unicast",
        ),
        (
            "http://224.0.0.1/",
            "net:http:224.0.0.1",
            Deny,
            "not_unicast",
        ),
        (
            "http://[::ffff:0.0.0.0]/",
            "net:http:0.0.0.0",
            Deny,
            "not_unicast",
        ),
        (
            "http://10.0.0.1/",
            "net:https:10.0.0.1",
            Deny,
            "not_granted",
        ),
        ("https://10.0.0.1/", "net:https:10.0.0.1", Allow, "allowed"),
    ];
    let mut cases: Vec<Case> = rows
        .iter()
        .map(|(u, g, e, k)| Case::new(Guard::Url, *u, *e).grants(&[*g]).kind(k))
        .collect();
    for (u, g, ips, e, k) in [
        (
            "http://localhost/",
            "net:http:localhost",
            vec![ip("127.0.0.1"), ip("::1")],
            Deny,
            "address",
        ),
        (
            "http://metadata.google.internal/computeMetadata/v1/",
            "net:http:metadata.google.internal",
            vec![ip("169.254.169.254")],
            Deny,
            "address",
        ),
        (
            "http://127.0.0.1.nip.io/",
            "net:http:127.0.0.1.nip.io",
            vec![ip("127.0.0.1")],
            Deny,
            "address",
        ),
        (
            "http://wireserver.example.com/",
            "net:http:wireserver.example.com",
            vec![ip("168.63.129.16")],
            Deny,
            "address",
        ),
        (
            "http://alibaba.example.com/",
            "net:http:alibaba.example.com",
            vec![ip("100.100.100.200")],
            Deny,
            "address",
        ),
    ] {
        let name = u
            .trim_start_matches("http://")
            .split('/')
            .next()
            .unwrap_or("");
        cases.push(with_dns(
            Case::new(Guard::Url, u, e).grants(&[g]).kind(k),
            name,
            &ips,
        ));
    }
    cases.push(Case::new(Guard::Url, "http://x.example.com/", Deny).kind("no_grant"));
    cases.push(
        Case::new(Guard::Url, "http://x.example.com/", Deny)
            .grants(&["fs:read:/**"])
            .kind("no_grant"),
    );
    Family {
        name: "url_literal_grants",
        doc: "a grant naming an address literally opens that address only (cloud metadata and loopback included: the operator's choice), in any spelling the URL parser or the IPv6 embeddings read as it, not another family, port or neighbour, and never the unspecified, multicast or broadcast address; a grant naming a host that resolves to loopback or metadata is still refused at resolution; no net grant refuses everything",
        cases,
    }
}

fn methods_and_headers() -> Family {
    use Decision::{Allow, Deny};
    let mut cases = Vec::new();
    let base = || usual_dns(url("https://x.example.com/api", Allow, "allowed"));
    for m in ["GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"] {
        let mut c = base();
        c.method = Some(m.into());
        cases.push(c);
    }
    for m in [
        "get", "CONNECT", "TRACE", "PROPFIND", "", "GET ", "G\u{0}ET", "MOVE",
    ] {
        let mut c = base().kind("method");
        c.expect = Deny;
        c.method = Some(m.into());
        cases.push(c);
    }
    for m in ["POST", "PUT", "PATCH", "DELETE", "OPTIONS"] {
        let mut c = base().kind("method");
        c.expect = Deny;
        c.method = Some(m.into());
        c.dry_run = true;
        cases.push(c);
    }
    for (h, dry) in [
        ("Host", false),
        ("host", false),
        ("HOST", false),
        ("X-Forwarded-For", false),
        ("x-forwarded-host", false),
        ("Forwarded", false),
        ("X-Real-IP", false),
        ("X-Original-URL", false),
        ("Transfer-Encoding", false),
        ("Connection", false),
        ("Upgrade", false),
        ("Proxy-Authorization", false),
        ("TE", false),
        ("X-HTTP-Method-Override", true),
    ] {
        let mut c = base().kind("header");
        c.expect = Deny;
        c.headers = vec![h.into()];
        c.dry_run = dry;
        cases.push(c);
    }
    for h in [
        "Authorization",
        "Content-Type",
        "Accept",
        "User-Agent",
        "X-HTTP-Method-Override",
    ] {
        let mut c = base();
        c.headers = vec![h.into()];
        cases.push(c);
    }
    Family {
        name: "url_methods_and_headers",
        doc: "methods outside GET/HEAD/POST/PUT/PATCH/DELETE/OPTIONS (case, padding, NUL, WebDAV, CONNECT, TRACE) and writes in a dry run refused; headers that change routing or framing (Host, X-Forwarded-*, Forwarded, X-Real-IP, X-Original-URL, Transfer-Encoding, Connection, Upgrade, TE, Proxy-Authorization; method overrides in a dry run) refused, ordinary headers allowed",
        cases,
    }
}
