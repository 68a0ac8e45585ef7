use super::*;

#[test]
fn parses_and_expands() {
    let f = PolicyFile::parse(
        r#"
        home = "."
        [limits]
        deadline_ms = 3000
        [tools.fs_write]
        grants = ["fs:write:~/ws/**"]
        limits = { memory_bytes = 1048576 }
        "#,
    )
    .unwrap();
    let p = f.check("/srv/agent").unwrap();
    let t = p.tool("fs_write");
    assert_eq!(t.grants[0].to_string(), "fs:write:/srv/agent/ws/**");
    assert_eq!(t.limits.deadline_ms, 3000);
    assert_eq!(t.limits.memory_bytes, 1048576);
    assert!(p.tool("other").grants.is_empty());
}

#[test]
fn decisions() {
    use crate::meta::Risk;
    let f =
        PolicyFile::parse("[tools.a]\n[tools.b]\ndeny = true\n[tools.c]\napproval = \"always\"\n")
            .unwrap();
    let p = f.check("/h").unwrap();
    assert_eq!(decide(Risk::Low, false, p.section("a")), Decision::Allow);
    assert_eq!(decide(Risk::Medium, true, p.section("a")), Decision::Allow);
    assert!(matches!(
        decide(Risk::High, true, p.section("a")),
        Decision::ApproveRequired { .. }
    ));
    assert!(matches!(
        decide(Risk::Low, false, p.section("b")),
        Decision::Deny { .. }
    ));
    assert!(matches!(
        decide(Risk::Low, false, p.section("zzz")),
        Decision::Deny { .. }
    ));
    assert!(matches!(
        decide(Risk::Medium, true, p.section("c")),
        Decision::ApproveRequired { .. }
    ));
    assert_eq!(decide(Risk::Low, false, p.section("c")), Decision::Allow);
    assert!(PolicyFile::parse("[tools.a]\napproval = \"never\"\n").is_err());
}

fn approve(d: Decision) -> bool {
    matches!(d, Decision::ApproveRequired { .. })
}
fn deny(d: Decision) -> bool {
    matches!(d, Decision::Deny { .. })
}

#[test]
fn autonomy_levels_and_irreversible() {
    use crate::meta::Risk;
    use Autonomy::*;
    let p = PolicyFile::parse(
        "[agent]\nautonomy = \"supervised\"\n[tools.r]\n[tools.w]\n[tools.x]\nirreversible = true\n",
    )
    .unwrap()
    .check("/h")
    .unwrap();
    assert_eq!(p.autonomy, Supervised);
    // Supervised: reads run, every side effect needs a human.
    assert_eq!(decide(Risk::Low, false, p.section("r")), Decision::Allow);
    assert!(approve(decide(Risk::Low, true, p.section("w"))));
    // A request cannot raise the level...
    assert!(approve(decide_at(
        Risk::Low,
        true,
        p.section("w"),
        Autonomous
    )));
    // ...but can lower it: read_only denies side effects and hides them.
    assert!(deny(decide_at(Risk::Low, true, p.section("w"), ReadOnly)));
    assert!(!offered(Risk::Low, true, p.section("w"), ReadOnly));
    assert!(offered(Risk::Low, false, p.section("r"), ReadOnly));
    assert!(offered(Risk::Low, true, p.section("w"), Supervised));
    // Irreversible: a human even for a low-risk call at full autonomy,
    // and even for a call the tool reports without side effects.
    let p = PolicyFile::parse("[tools.x]\nirreversible = true\n[tools.h]\n")
        .unwrap()
        .check("/h")
        .unwrap();
    assert_eq!(p.autonomy, Autonomous);
    assert!(approve(decide(Risk::Low, true, p.section("x"))));
    assert!(approve(decide(Risk::Low, false, p.section("x"))));
    // High risk: a human at every level where it is offered at all.
    for a in [Supervised, Autonomous] {
        assert!(approve(decide_at(Risk::High, true, p.section("h"), a)));
        assert!(approve(decide_at(Risk::High, false, p.section("h"), a)));
    }
    assert!(deny(decide_at(Risk::High, true, p.section("h"), ReadOnly)));
    // Not listed: denied at every level, never offered.
    for a in [ReadOnly, Supervised, Autonomous] {
        assert!(deny(decide_at(Risk::Low, false, p.section("zz"), a)));
        assert!(!offered(Risk::Low, false, p.section("zz"), a));
    }
    assert!(PolicyFile::parse("[agent]\nautonomy = \"yolo\"\n").is_err());
    assert_eq!("read_only".parse::<Autonomy>(), Ok(ReadOnly));
    assert!("full".parse::<Autonomy>().is_err());
}

#[test]
fn refusals() {
    assert!(matches!(
        PolicyFile::parse("tols = 1"),
        Err(PolicyError::Toml(_))
    ));
    assert!(matches!(
        PolicyFile::parse("[tools.a]\ngrant = []"),
        Err(PolicyError::Toml(_))
    ));
    let f = PolicyFile::parse("[tools.a]\ngrants = [\"fs:read:*\"]").unwrap();
    assert!(matches!(
        f.check("/h"),
        Err(PolicyError::NotConcrete { .. })
    ));
    let f = PolicyFile::parse("[tools.a]\ngrants = [\"fs:read:/x/*.md\"]").unwrap();
    assert!(matches!(f.check("/h"), Err(PolicyError::Capability { .. })));
    let f = PolicyFile::parse("[tools.A]\ngrants = []").unwrap();
    assert!(matches!(f.check("/h"), Err(PolicyError::BadToolName(_))));
    let f = PolicyFile::parse("[limits]\nfuel = 0").unwrap();
    assert!(matches!(f.check("/h"), Err(PolicyError::ZeroLimit("fuel"))));
    let f = PolicyFile::parse("[tools.a]\ngrants = [\"fs:read:~/x/**\"]").unwrap();
    assert!(f.check("relative").is_err());
}

#[test]
fn env_secrets_and_net() {
    let f = PolicyFile::parse(
        r#"
        [tools.a]
        grants = ["env:LANG", "secret:gh@api.github.com", "net:https:api.github.com"]
        [env]
        LANG = "C.UTF-8"
        [secrets.gh]
        value = "ghp_SUPERSECRET"
        prefix = "Bearer "
        [net]
        max_response_bytes = 1000
        hosts = { "Api.Test." = ["127.0.0.1", "::1"] }
        "#,
    )
    .unwrap();
    let p = f.check("/h").unwrap();
    assert_eq!(p.env["LANG"], "C.UTF-8");
    let s = &p.secrets["gh"];
    assert_eq!(s.header, "authorization");
    assert_eq!(s.prefix, "Bearer ");
    assert!(matches!(&s.source, SecretSource::Value(v) if v.expose() == "ghp_SUPERSECRET"));
    assert_eq!(p.net.max_response_bytes, 1000);
    assert_eq!(p.net.hosts["api.test"].len(), 2);
    // The secret never shows in Debug output of the file or the policy.
    assert!(!format!("{f:?}{p:?}").contains("SUPERSECRET"));
}

#[test]
fn env_secrets_and_net_refusals() {
    let check = |t: &str| PolicyFile::parse(t).and_then(|f| f.check("/h"));
    // Grants without values.
    assert!(matches!(
        check("[tools.a]\ngrants = [\"env:HOME\"]"),
        Err(PolicyError::Env(_))
    ));
    assert!(matches!(
        check("[tools.a]\ngrants = [\"secret:k@x.com\"]"),
        Err(PolicyError::Secret(_))
    ));
    // Bad sections.
    assert!(check("[env]\n\"1X\" = \"v\"").is_err());
    assert!(check("[secrets.k]\nvalue = \"a\"\nenv = \"B\"").is_err());
    assert!(check("[secrets.k]\n").is_err());
    assert!(check("[secrets.k]\nvalue = \"\"").is_err());
    let e = check("[secrets.k]\nvalue = \"line\\nbreak-SUPERSECRET\"").unwrap_err();
    assert!(!e.to_string().contains("SUPERSECRET"), "{e}");
    assert!(check("[secrets.k]\nvalue = \"v\"\nheader = \"host\"").is_err());
    assert!(check("[secrets.k]\nvalue = \"v\"\nheader = \"bad header\"").is_err());
    assert!(check("[secrets.k]\nvalue = \"v\"\nheadr = \"x\"").is_err());
    assert!(check("[net]\nmax_response_bytes = 0").is_err());
    assert!(check("[net]\nhosts = { \"a.test\" = [\"2130706433\"] }").is_err());
    assert!(check("[net]\nhosts = { \"*.test\" = [\"127.0.0.1\"] }").is_err());
    assert!(check("[net]\nhosts = { \"127.0.0.1\" = [\"127.0.0.1\"] }").is_err());
    assert!(check("[net]\nhosts = { \"a.test\" = [] }").is_err());
    assert!(check("[net]\nproxy = \"x\"").is_err());
}
