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
    assert_eq!(ok("llm:cheap:4000").to_string(), "llm:cheap:4000");
    assert_eq!(ok("llm:*").to_string(), "llm:*");
    assert!(!ok("llm:*").is_concrete());
    assert!(ok("llm:normal").is_concrete());
    for hostile in [
        "llm:",
        "llm:*:10",
        "llm:Cheap",
        "llm:cheap:",
        "llm:cheap:0",
        "llm:cheap:-1",
        "llm:cheap:+5",
        "llm:cheap:010",
        "llm:cheap:1e3",
        "llm:cheap:1000001",
        "llm:cheap:99999999999999999999",
        "llm:cheap:10:20",
        "llm:../x",
        "llm:a b",
        "llm:cheap:\u{0}",
        "llm:cheap:１２",
    ] {
        bad(hostile);
    }
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

/// Issue 13 item 6: a wildcard directly under a public suffix (Public Suffix
/// List: ICANN and private sections, wildcard and exception rules) is too
/// broad; one label deeper is a registrable domain and fine.
#[test]
fn wildcards_under_public_suffixes_are_too_broad() {
    for suffix in [
        "com",
        "co.uk",
        "com.au",
        "gov.uk",
        "ac.jp",
        "com.br",
        "github.io",
        "blogspot.com",
        "herokuapp.com",
        "appspot.com",
        "s3.amazonaws.com",
        "xn--p1ai",
        "ck",
        "anything.ck",
        "pvt.k12.ma.us",
        "internal",
        "localhost",
    ] {
        assert!(is_public_suffix(suffix), "{suffix}");
        for cap in [
            format!("net:https:*.{suffix}"),
            format!("secret:k@*.{suffix}"),
        ] {
            assert!(bad(&cap).contains("public suffix"), "{cap}");
        }
        let deeper = format!("net:https:*.example.{suffix}");
        if suffix != "ck" {
            assert!(Capability::parse(&deeper).is_ok(), "{deeper}");
        }
    }
    // An exception rule (`!www.ck`) makes `www.ck` registrable.
    assert!(!is_public_suffix("www.ck"));
    assert!(Capability::parse("net:https:*.www.ck").is_ok());
    for registrable in ["example.com", "example.co.uk", "me.github.io", "bbc.co.uk"] {
        assert!(!is_public_suffix(registrable), "{registrable}");
        assert!(Capability::parse(&format!("net:https:*.{registrable}")).is_ok());
    }
}

#[test]
fn mem_forms_round_trip_and_refusals() {
    for s in [
        "mem:default",
        "mem:default:read",
        "mem:team-a:write",
        "mem:*:read",
        "mem:*",
    ] {
        assert_eq!(ok(s).to_string(), s);
    }
    assert_eq!(
        ok("mem:notes:read"),
        Capability::Mem {
            namespace: Place::Concrete("notes".into()),
            access: MemAccess::Read
        }
    );
    assert!(!ok("mem:*:read").is_concrete());
    assert!(ok("mem:x").is_concrete());
    for s in [
        "mem:",
        "mem:Default",
        "mem:a:readwrite",
        "mem:a:read:x",
        "mem:../x",
        "mem:a b",
        "mem::read",
        "mem:*x",
        "mem:a:",
        "mem:a:READ",
    ] {
        let r = bad(s);
        assert!(r.contains("mem"), "{s}: {r}");
    }
}
