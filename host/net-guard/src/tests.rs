//! Net guard tests, written from the attacker's side.

use super::*;
use std::net::{Ipv4Addr, Ipv6Addr};

fn caps(v: &[&str]) -> Vec<Capability> {
    v.iter().map(|s| Capability::parse(s).unwrap()).collect()
}

fn get(url: &str) -> NetRequest<'_> {
    NetRequest {
        method: "GET",
        url,
        headers: &[],
        dry_run: false,
    }
}

fn ip(s: &str) -> IpAddr {
    s.parse().unwrap()
}

#[test]
fn no_net_grant_denies_everything() {
    for grants in [
        vec![],
        caps(&["fs:read:/a/**", "env:X", "secret:k@api.example.com"]),
    ] {
        assert_eq!(
            check_request(&get("https://api.example.com/"), &grants),
            Err(NetDenied::NoGrant)
        );
    }
}

#[test]
fn allowed_path_gives_normalised_destination() {
    let g = caps(&["net:https:api.example.com"]);
    let d = check_request(&get("https://API.Example.com./v1/x/../items?q=1#frag"), &g).unwrap();
    assert_eq!(d.host, DestHost::Domain("api.example.com".into()));
    assert_eq!(d.port, 443);
    assert_eq!(d.path_and_query, "/v1/items?q=1");
    assert_eq!(d.host_header, "api.example.com");
    assert!(!d.url.contains("frag"));
    let addrs = vet_addresses(&d, &[ip("93.184.216.34"), ip("93.184.216.34")]).unwrap();
    assert_eq!(addrs, vec!["93.184.216.34:443".parse().unwrap()]);
}

#[test]
fn scheme_host_and_port_must_match_a_grant() {
    let g = caps(&[
        "net:https:api.example.com",
        "net:http:*.svc.example.com:8080",
    ]);
    for url in [
        "http://api.example.com/",
        "https://api.example.com:8443/",
        "https://example.com/",
        "https://api.example.com.evil.net/",
        "https://evilapi.example.com/",
        "http://svc.example.com:8080/",
        "http://a.b.svc.example.com:8080/",
        "http://a.svc.example.com/",
        "ftp://api.example.com/",
        "file:///etc/passwd",
        "gopher://api.example.com/",
        "ws://api.example.com/",
        "data:text/plain,hi",
        "javascript:alert(1)",
    ] {
        assert!(check_request(&get(url), &g).is_err(), "{url} passed");
    }
    assert!(check_request(&get("http://x.svc.example.com:8080/"), &g).is_ok());
    assert!(check_request(&get("https://api.example.com:443/"), &g).is_ok());
    assert!(matches!(
        check_request(&get("ftp://api.example.com/"), &g),
        Err(NetDenied::Scheme { .. })
    ));
}

#[test]
fn userinfo_refused_without_echoing_it() {
    let g = caps(&["net:https:api.example.com"]);
    for url in [
        "https://user:hunter2@api.example.com/",
        "https://user@api.example.com/",
        "https://:hunter2@api.example.com/",
        "https://api.example.com@evil.net/",
    ] {
        let e = check_request(&get(url), &g).unwrap_err();
        assert!(matches!(e, NetDenied::Userinfo { .. }), "{url}: {e}");
        assert!(!e.to_string().contains("hunter2"), "{e}");
    }
}

#[test]
fn routing_and_hop_headers_refused() {
    let g = caps(&["net:https:api.example.com"]);
    for h in [
        "Host",
        "host",
        "X-Forwarded-For",
        "x-forwarded-host",
        "Forwarded",
        "X-Real-IP",
        "Connection",
        "Transfer-Encoding",
        "Upgrade",
        "Proxy-Authorization",
        "TE",
        "x-original-url",
    ] {
        let headers = [h];
        let req = NetRequest {
            headers: &headers,
            ..get("https://api.example.com/")
        };
        assert!(
            matches!(check_request(&req, &g), Err(NetDenied::Header { .. })),
            "{h}"
        );
    }
    let headers = [
        "content-type",
        "authorization",
        "accept",
        "x-http-method-override",
    ];
    let req = NetRequest {
        headers: &headers,
        ..get("https://api.example.com/")
    };
    assert!(check_request(&req, &g).is_ok());
    let req = NetRequest {
        dry_run: true,
        ..req
    };
    assert!(matches!(
        check_request(&req, &g),
        Err(NetDenied::Header { .. })
    ));
}

#[test]
fn methods_and_dry_run() {
    let g = caps(&["net:https:api.example.com"]);
    let m = |method, dry_run| NetRequest {
        method,
        dry_run,
        ..get("https://api.example.com/")
    };
    for ok in ["GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"] {
        assert!(check_request(&m(ok, false), &g).is_ok(), "{ok}");
    }
    for bad in ["CONNECT", "TRACE", "get", "PROPFIND", ""] {
        assert!(check_request(&m(bad, false), &g).is_err(), "{bad}");
    }
    assert!(check_request(&m("GET", true), &g).is_ok());
    assert!(check_request(&m("HEAD", true), &g).is_ok());
    for bad in ["POST", "PUT", "PATCH", "DELETE", "OPTIONS"] {
        assert!(
            matches!(
                check_request(&m(bad, true), &g),
                Err(NetDenied::Method { dry_run: true, .. })
            ),
            "{bad}"
        );
    }
}

/// Every spelling of 127.0.0.1 the WHATWG parser accepts is the same
/// literal: refused without a grant naming 127.0.0.1, and refused through a
/// name.
#[test]
fn ipv4_spellings_normalise_to_the_literal() {
    let g = caps(&["net:http:api.example.com"]);
    let spellings = [
        "127.0.0.1",
        "2130706433",
        "0177.0.0.1",
        "0x7f.0.0.1",
        "0x7f000001",
        "0x7f.1",
        "127.1",
        "127.0.1",
        "017700000001",
        "127.0.0.1.",
        "0000000177.0.0.1",
    ];
    for s in spellings {
        let url = format!("http://{s}/");
        match check_request(&get(&url), &g) {
            Err(NetDenied::NotGranted { host, .. }) => assert_eq!(host, "127.0.0.1", "{s}"),
            other => panic!("{s}: {other:?}"),
        }
    }
    // Granted literally, each spelling reaches exactly 127.0.0.1.
    let g = caps(&["net:http:127.0.0.1"]);
    for s in spellings {
        let url = format!("http://{s}/");
        let (d, addrs) = evaluate(&get(&url), &g, &[]).unwrap();
        assert_eq!(d.host, DestHost::Ip(ip("127.0.0.1")), "{s}");
        assert_eq!(addrs, vec!["127.0.0.1:80".parse().unwrap()]);
    }
}

#[test]
fn ipv6_literals_and_zone_ids() {
    let g = caps(&["net:http:api.example.com"]);
    for url in [
        "http://[::1]/",
        "http://[::ffff:127.0.0.1]/",
        "http://[::ffff:7f00:1]/",
        "http://[::127.0.0.1]/",
        "http://[64:ff9b::7f00:1]/",
        "http://[fe80::1]/",
        "http://[fd00:ec2::254]/",
    ] {
        assert!(
            matches!(
                check_request(&get(url), &g),
                Err(NetDenied::NotGranted { .. })
            ),
            "{url}"
        );
    }
    for url in [
        "http://[fe80::1%25eth0]/",
        "http://[fe80::1%eth0]/",
        "http://[::1/",
    ] {
        assert!(
            matches!(check_request(&get(url), &g), Err(NetDenied::BadUrl { .. })),
            "{url}"
        );
    }
}

/// Every IPv6 form that carries an IPv4 address, for `v4`.
fn embeddings_of(v4: Ipv4Addr) -> Vec<(Embedding, Ipv6Addr)> {
    let n = u32::from(v4);
    let (hi, lo) = ((n >> 16) as u16, n as u16);
    let o = v4.octets();
    let six_to_four = Ipv6Addr::new(
        0x2002,
        u16::from_be_bytes([o[0], o[1]]),
        u16::from_be_bytes([o[2], o[3]]),
        7,
        0,
        0,
        0,
        1,
    );
    let teredo_client = !n;
    let mut out = vec![
        (Embedding::Ipv4Mapped, v4.to_ipv6_mapped()),
        (
            Embedding::Ipv4Translated,
            Ipv6Addr::new(0, 0, 0, 0, 0xffff, 0, hi, lo),
        ),
        (
            Embedding::Nat64,
            Ipv6Addr::new(0x64, 0xff9b, 0, 0, 0, 0, hi, lo),
        ),
        (
            Embedding::Nat64Local,
            Ipv6Addr::new(0x64, 0xff9b, 1, 0, 0, 0, hi, lo),
        ),
        (Embedding::SixToFour, six_to_four),
        (
            Embedding::Teredo,
            Ipv6Addr::new(
                0x2001,
                0,
                0x4136,
                0xe378,
                0x8000,
                0x63bf,
                (teredo_client >> 16) as u16,
                teredo_client as u16,
            ),
        ),
    ];
    if n > 1 {
        out.push((Embedding::Ipv4Compatible, v4.to_ipv6_compatible()));
    }
    out
}

/// Issue 13 item 7: an IPv6 literal carrying an IPv4 address is that IPv4
/// address, in grants (refused, the IPv4 spelling named) and in URLs
/// (matched, classified and connected to as the IPv4 address).
#[test]
fn ipv6_literals_carrying_ipv4_are_read_as_that_ipv4() {
    for v4 in [
        "10.0.0.5",
        "127.0.0.1",
        "169.254.169.254",
        "93.184.215.14",
        "0.0.0.0",
    ] {
        let v4: Ipv4Addr = v4.parse().unwrap();
        for (how, v6) in embeddings_of(v4) {
            assert_eq!(embedded_ipv4(v6), Some((how, v4)), "{v6}");
            // In a grant: refused, naming the IPv4 spelling to write.
            for grant in [format!("net:http:[{v6}]"), format!("secret:k@[{v6}]")] {
                let e = Capability::parse(&grant).expect_err(&grant);
                assert!(e.reason.contains(&format!("write `{v4}`")), "{grant}: {e}");
            }
            // In a URL: the IPv4 address, so only a grant naming it opens it.
            let url = format!("http://[{v6}]/");
            let none = caps(&["net:http:[2001:db8::1]", "net:http:*.example.com"]);
            assert!(
                matches!(
                    check_request(&get(&url), &none),
                    Err(NetDenied::NotGranted { .. })
                ),
                "{url}"
            );
            let named = caps(&[&format!("net:http:{v4}")]);
            let r = evaluate(&get(&url), &named, &[]);
            if v4.is_unspecified() {
                assert!(
                    matches!(r, Err(NetDenied::NotUnicast { .. })),
                    "{url}: {r:?}"
                );
                continue;
            }
            let (d, addrs) = r.unwrap_or_else(|e| panic!("{url}: {e}"));
            assert_eq!(d.host, DestHost::Ip(IpAddr::V4(v4)), "{url}");
            assert_eq!(d.host_header, v4.to_string());
            assert_eq!(addrs, vec![std::net::SocketAddr::new(IpAddr::V4(v4), 80)]);
            // A neighbour's grant does not open it.
            let other = Ipv4Addr::from(u32::from(v4) ^ 1);
            let g = caps(&[&format!("net:http:{other}")]);
            assert!(check_request(&get(&url), &g).is_err(), "{url}");
            // Through a DNS name it is refused unless the IPv4 is public
            // (local-use NAT64 and Teredo: never).
            let via_dns = evaluate(
                &get("http://a.example.com/"),
                &caps(&["net:http:*.example.com"]),
                &[IpAddr::V6(v6)],
            );
            let public = classify(IpAddr::V4(v4)) == AddressClass::Public
                && !matches!(how, Embedding::Nat64Local | Embedding::Teredo);
            assert_eq!(via_dns.is_ok(), public, "{v6}: {via_dns:?}");
        }
    }
    // Addresses that carry nothing stay IPv6 literals, and stay grantable.
    for v6 in [
        "::1",
        "::",
        "2001:db8::1",
        "fd00:ec2::254",
        "2606:4700::1111",
    ] {
        let v6: Ipv6Addr = v6.parse().unwrap();
        assert_eq!(embedded_ipv4(v6), None, "{v6}");
        assert_eq!(as_ipv4_if_embedded(IpAddr::V6(v6)), IpAddr::V6(v6));
    }
    assert!(Capability::parse("net:http:[::1]").is_ok());
    assert!(Capability::parse("net:http:[2001:db8::1]").is_ok());
}

#[test]
fn idna_names_normalise_and_folded_spellings_are_refused() {
    let g = caps(&["net:https:example.com", "net:https:xn--bcher-kva.example"]);
    assert!(check_request(&get("https://EXAMPLE.COM/"), &g).is_ok());
    assert!(check_request(&get("https://bücher.example/"), &g).is_ok());
    assert!(check_request(&get("https://xn--bcher-kva.example/"), &g).is_ok());
    // Issue 24 item 8a: a spelling the parser folds onto a granted name is
    // refused, not folded (granted or not, name or address).
    let g = caps(&[
        "net:https:example.com",
        "net:http:127.0.0.1",
        "net:https:xn--bcher-kva.example",
    ]);
    for bad in [
        "https://ⓔxample.com/",
        "https://%65xample.com/",
        "https://\u{FF45}\u{FF58}ample.com/",
        "https://EXAMPLE\u{FF0E}COM/",
        "https://example\u{3002}com/",
        "https://example\u{FF61}com/",
        "https://exam\u{AD}ple.com/",
        "https://exam\u{200B}ple.com/",
        "https://exam\u{200C}ple.com/",
        "https://exam\u{2060}ple.com/",
        "https://exampl\u{0065}\u{0301}.com/",
        "https://\u{1D41E}xample.com/",
        "https://exa\tmple.com/",
        "https://example.com\n/",
        "http://\u{FF11}\u{FF12}\u{FF17}.0.0.1/",
        "http://127\u{FF0E}0\u{FF0E}0\u{FF0E}1/",
        "http://127\u{3002}0.0.1/",
        "http://%31%32%37.0.0.1/",
        "https://BU\u{308}CHER.example/",
        "https://bu\u{308}cher.example/",
        "https://B\u{DC}CHER.example/",
    ] {
        match check_request(&get(bad), &g) {
            Err(NetDenied::HostSpelling { .. } | NetDenied::BadUrl { .. }) => {}
            other => panic!("{bad:?}: {other:?}"),
        }
    }
    assert!(check_request(&get("https://example.com../"), &g).is_err());
    assert!(check_request(&get("https://exa mple.com/"), &g).is_err());
    assert!(check_request(&get("https://exam\u{0}ple.com/"), &g).is_err());
}

#[test]
fn names_resolving_to_non_public_addresses_are_refused() {
    let g = caps(&["net:https:*.example.com"]);
    let d = check_request(&get("https://rebind.example.com/"), &g).unwrap();
    for bad in [
        "127.0.0.1",
        "127.255.255.254",
        "0.0.0.0",
        "0.1.2.3",
        "10.0.0.5",
        "172.16.0.1",
        "172.31.255.255",
        "192.168.1.1",
        "100.64.0.1",
        "100.127.255.255",
        "169.254.169.254",
        "169.254.0.1",
        "168.63.129.16",
        "100.100.100.200",
        "192.0.0.192",
        "192.0.0.8",
        "192.0.2.1",
        "198.51.100.7",
        "203.0.113.9",
        "198.18.0.1",
        "198.19.255.255",
        "224.0.0.1",
        "239.255.255.250",
        "240.0.0.1",
        "255.255.255.255",
        "192.88.99.1",
        "::",
        "::1",
        "::ffff:127.0.0.1",
        "::ffff:169.254.169.254",
        "::ffff:10.0.0.1",
        "::ffff:0:a00:1",
        "::127.0.0.1",
        "::10.0.0.1",
        "64:ff9b::7f00:1",
        "64:ff9b::a9fe:a9fe",
        "64:ff9b:1::1",
        "2002:7f00:1::1",
        "2002:a9fe:a9fe::",
        "2001::1",
        "2001:0:4136:e378:8000:63bf:3fff:fdd2",
        "2001:db8::1",
        "3fff::1",
        "2001:2::1",
        "2001:10::1",
        "100::1",
        "5f00::1",
        "fc00::1",
        "fd12:3456::1",
        "fd00:ec2::254",
        "fe80::1",
        "febf::1",
        "fec0::1",
        "ff02::1",
        "ff05::1:3",
        "4000::1",
        "::2:3:4:5",
    ] {
        let e = vet_addresses(&d, &[ip("93.184.216.34"), ip(bad)]).unwrap_err();
        assert!(matches!(e, NetDenied::Address { .. }), "{bad}: {e}");
        assert!(vet_addresses(&d, &[ip(bad)]).is_err(), "{bad}");
    }
    assert!(matches!(
        vet_addresses(&d, &[]),
        Err(NetDenied::NoAddress { .. })
    ));
    for good in [
        "93.184.216.34",
        "8.8.8.8",
        "1.1.1.1",
        "100.63.255.255",
        "100.128.0.0",
        "172.15.255.255",
        "172.32.0.0",
        "169.253.255.255",
        "192.31.196.1",
        "2606:4700:4700::1111",
        "2a00:1450:4001:80b::200e",
        "2002:5db8:d822::1",
        "64:ff9b::5db8:d822",
        "::ffff:93.184.216.34",
    ] {
        assert!(vet_addresses(&d, &[ip(good)]).is_ok(), "{good}");
    }
}

#[test]
fn granted_literals_pass_except_non_unicast() {
    for (grant, url) in [
        ("net:http:127.0.0.1:8080", "http://127.0.0.1:8080/"),
        ("net:http:169.254.169.254", "http://169.254.169.254/latest"),
        ("net:http:10.1.2.3", "http://10.1.2.3/"),
        ("net:http:[::1]:9000", "http://[::1]:9000/"),
    ] {
        assert!(evaluate(&get(url), &caps(&[grant]), &[]).is_ok(), "{url}");
    }
    for (grant, url) in [
        ("net:http:0.0.0.0", "http://0.0.0.0/"),
        ("net:http:255.255.255.255", "http://255.255.255.255/"),
        ("net:http:224.0.0.1", "http://224.0.0.1/"),
        ("net:http:[::]", "http://[::]/"),
        ("net:http:[ff02::1]", "http://[ff02::1]/"),
    ] {
        assert!(
            matches!(
                evaluate(&get(url), &caps(&[grant]), &[]),
                Err(NetDenied::NotUnicast { .. })
            ),
            "{url}"
        );
    }
    // A literal grant does not open a name that resolves to that literal.
    let g = caps(&["net:http:127.0.0.1", "net:http:local.example.com"]);
    assert!(matches!(
        evaluate(&get("http://local.example.com/"), &g, &[ip("127.0.0.1")]),
        Err(NetDenied::Address { .. })
    ));
    // `localhost` is a name like any other.
    let g = caps(&["net:http:localhost"]);
    assert!(evaluate(&get("http://localhost/"), &g, &[ip("127.0.0.1"), ip("::1")]).is_err());
}

#[test]
fn secrets_only_for_matching_https_hosts() {
    let g = caps(&[
        "net:https:api.example.com",
        "net:http:api.example.com",
        "net:https:other.example.com",
        "secret:token@api.example.com",
        "secret:wild@*.example.com",
    ]);
    let d = check_request(&get("https://api.example.com/"), &g).unwrap();
    assert_eq!(secrets_for(&d, &g), ["token", "wild"]);
    let d = check_request(&get("https://other.example.com/"), &g).unwrap();
    assert_eq!(secrets_for(&d, &g), ["wild"]);
    let d = check_request(&get("http://api.example.com/"), &g).unwrap();
    assert!(secrets_for(&d, &g).is_empty());
}

#[test]
fn messages_name_the_class_and_embedding() {
    assert_eq!(
        describe(ip("::ffff:127.0.0.1")),
        "::ffff:127.0.0.1 (IPv4-mapped 127.0.0.1, loopback)"
    );
    assert_eq!(
        describe(ip("169.254.169.254")),
        "169.254.169.254 (cloud metadata)"
    );
    assert_eq!(
        embedded_ipv4("2002:c0a8:101::1".parse().unwrap()),
        Some((Embedding::SixToFour, Ipv4Addr::new(192, 168, 1, 1)))
    );
    assert_eq!(embedded_ipv4(Ipv6Addr::LOCALHOST), None);
}

proptest::proptest! {
    /// Whatever the URL, an accepted request goes to a granted host and port,
    /// and only to public addresses unless the URL is a granted literal.
    #[test]
    fn accepted_requests_stay_inside_grants(
        host in "[a-z0-9.%\\[\\]:x]{1,24}",
        port in proptest::option::of(0u32..70000),
        path in "[a-z/.%?#@]{0,12}",
        resolved in proptest::collection::vec(proptest::prelude::any::<u32>(), 0..3),
    ) {
        let url = match port {
            Some(p) => format!("http://{host}:{p}/{path}"),
            None => format!("http://{host}/{path}"),
        };
        let g = caps(&["net:http:127.0.0.1:8080", "net:http:*.example.com", "net:http:1.2.3.4"]);
        let resolved: Vec<IpAddr> = resolved.into_iter().map(|n| IpAddr::V4(Ipv4Addr::from(n))).collect();
        if let Ok((d, addrs)) = evaluate(&get(&url), &g, &resolved) {
            proptest::prop_assert!(net_grants(&g).any(|(_, t)| host_matches(&t.host, &d.host) && t.effective_port(Scheme::Http) == d.port));
            for a in addrs {
                proptest::prop_assert_eq!(a.port(), d.port);
                match &d.host {
                    DestHost::Ip(lit) => proptest::prop_assert_eq!(a.ip(), *lit),
                    DestHost::Domain(_) => proptest::prop_assert_eq!(classify(a.ip()), AddressClass::Public),
                }
            }
        }
    }

    /// Differential check against the standard library's stable predicates:
    /// whatever std calls private, loopback, link-local, broadcast,
    /// documentation, unspecified or multicast is never public here, and an
    /// IPv4-mapped IPv6 address has the class of its IPv4 address.
    #[test]
    fn ipv4_classes_agree_with_std(n in proptest::prelude::any::<u32>()) {
        let v4 = Ipv4Addr::from(n);
        let std_special = v4.is_private() || v4.is_loopback() || v4.is_link_local()
            || v4.is_broadcast() || v4.is_documentation() || v4.is_unspecified() || v4.is_multicast();
        if std_special {
            proptest::prop_assert_ne!(classify(IpAddr::V4(v4)), AddressClass::Public);
        }
        proptest::prop_assert_eq!(classify(IpAddr::V6(v4.to_ipv6_mapped())), classify(IpAddr::V4(v4)));
        if n > 1 {
            proptest::prop_assert_eq!(classify(IpAddr::V6(v4.to_ipv6_compatible())), classify(IpAddr::V4(v4)));
        }
    }

    #[test]
    fn ipv6_classes_agree_with_std(n in proptest::prelude::any::<u128>()) {
        let v6 = Ipv6Addr::from(n);
        if v6.is_loopback() || v6.is_unspecified() || v6.is_multicast()
            || v6.is_unicast_link_local() || v6.is_unique_local()
        {
            proptest::prop_assert_ne!(classify(IpAddr::V6(v6)), AddressClass::Public);
        }
        if classify(IpAddr::V6(v6)) == AddressClass::Public && embedded_ipv4(v6).is_none() {
            proptest::prop_assert_eq!(v6.segments()[0] & 0xe000, 0x2000);
        }
    }
}
