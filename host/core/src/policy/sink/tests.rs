use super::super::test_rules::{RulesError, rules};
use super::*;
use proptest::prelude::*;

fn level(t: &ToolSinks, path: &str) -> SinkLevel {
    let at: Vec<String> = path.split('/').skip(1).map(str::to_string).collect();
    t.level_at(&at)
}

#[test]
fn parsed_from_the_policy() {
    let r = rules(
        r#"
        [flow]
        strict = true
        scope = "required"
        default_sink = "trusted"
        neurons = { sinks = { "/dest" = "trusted" }, on_untrusted = "deny" }
        [tools.http_request]
        sinks = { url = "trusted", "/json/*/iban" = "trusted" }
        on_untrusted = "deny"
        [tools.calendar]
        trusted_fields = ["/events/*/id"]
        [tools.fs_read]
        "#,
    )
    .unwrap();
    assert!(r.strict && r.scope_required);
    assert_eq!(r.default_sink, SinkLevel::Trusted);
    let h = r.for_tool("http_request", false, true);
    assert_eq!(h.on_untrusted, OnUntrusted::Deny);
    assert_eq!(level(&h, "/url"), SinkLevel::Trusted);
    assert_eq!(level(&h, "/json/0/iban"), SinkLevel::Trusted);
    // The operator's sinks replace the defaults whole.
    assert_eq!(level(&h, "/json/0/note"), SinkLevel::Any);
    assert_eq!(
        r.for_tool("calendar", false, true).trusted_fields[0].to_string(),
        "/events/*/id"
    );
    // A calendar tool with side effects and no sinks: default_sink on all.
    assert_eq!(
        level(&r.for_tool("calendar", false, true), "/title"),
        SinkLevel::Trusted
    );
    assert_eq!(
        level(&r.for_tool("calendar", false, false), "/title"),
        SinkLevel::Any
    );
    let n = r.for_tool("anything", true, true);
    assert_eq!(
        (level(&n, "/dest"), level(&n, "/other")),
        (SinkLevel::Trusted, SinkLevel::Any)
    );
    assert_eq!(n.on_untrusted, OnUntrusted::Deny);
}

#[test]
fn defaults_without_a_flow_section() {
    let r = rules("[tools.fs_write]\non_untrusted = \"deny\"\n").unwrap();
    assert!(!r.strict && !r.scope_required);
    assert_eq!(r.default_sink, SinkLevel::Identifiers);
    // on_untrusted alone keeps the first-party sinks.
    let w = r.for_tool("fs_write", false, true);
    assert_eq!(
        (level(&w, "/path"), w.on_untrusted),
        (SinkLevel::Trusted, OnUntrusted::Deny)
    );
    assert_eq!(
        level(&r.for_tool("web_fetch", false, false), "/url"),
        SinkLevel::Verbatim
    );
    assert_eq!(
        level(&r.for_tool("fs_read", false, false), "/path"),
        SinkLevel::Any
    );
    assert_eq!(
        level(&r.for_tool("x", true, true), "/a/b"),
        SinkLevel::Trusted
    );
    for t in FIRST_PARTY {
        assert!(first_party(t).is_some(), "{t}");
    }
}

#[test]
fn bad_sections_are_refused_with_typed_errors() {
    for (text, want) in [
        (
            "[tools.a]\nsinks = { \"/x//y\" = \"trusted\" }\n",
            "empty segment",
        ),
        (
            "[tools.a]\nsinks = { url = \"trusted\", \"/url\" = \"any\" }\n",
            "twice",
        ),
        ("[tools.a]\nsinks = { \"/a~2\" = \"trusted\" }\n", "~"),
        ("[tools.a]\ntrusted_fields = [\"\"]\n", "empty field path"),
        (
            "[flow]\nneurons = { sinks = { \"bad name\" = \"trusted\" } }\n",
            "neither",
        ),
    ] {
        let e = rules(text).unwrap_err();
        assert!(matches!(e, RulesError::Flow(_)), "{text}: {e:?}");
        assert!(e.to_string().contains(want), "{text}: {e}");
    }
    for text in [
        "[flow]\nstrictt = true\n",
        "[flow]\nscope = \"sometimes\"\n",
        "[tools.a]\nsinks = { url = \"very\" }\n",
        "[tools.a]\non_untrusted = \"ignore\"\n",
        "[flow]\nneurons = { sink = {} }\n",
    ] {
        assert!(matches!(rules(text), Err(RulesError::Toml(_))), "{text}");
    }
}

#[test]
fn widening_is_named_and_narrowing_is_not() {
    let base = rules("[tools.http_request]\nsinks = { url = \"trusted\", body = \"identifiers\" }\non_untrusted = \"deny\"\n").unwrap();
    let narrower = rules(
        "[flow]\nstrict = true\n[tools.http_request]\nsinks = { \"*\" = \"trusted\" }\non_untrusted = \"deny\"\n",
    )
    .unwrap();
    assert!(
        widenings(&base, &narrower).is_empty(),
        "{:?}",
        widenings(&base, &narrower)
    );
    let w = widenings(&narrower, &base);
    assert!(
        w.iter().any(|w| w.what == "strict mode turned off"),
        "{w:?}"
    );
    for (text, what) in [
        (
            "[tools.http_request]\nsinks = { url = \"verbatim\", body = \"identifiers\" }\non_untrusted = \"deny\"\n",
            "sink `/url` lowered from trusted to verbatim",
        ),
        (
            "[tools.http_request]\nsinks = { url = \"trusted\" }\non_untrusted = \"deny\"\n",
            "sink `/body` lowered from identifiers to any",
        ),
        (
            "[tools.http_request]\nsinks = { url = \"trusted\", body = \"identifiers\" }\n",
            "on_untrusted changed from deny to approve",
        ),
        (
            "[tools.http_request]\nsinks = { url = \"trusted\", body = \"identifiers\" }\non_untrusted = \"deny\"\ntrusted_fields = [\"/id\"]\n",
            "output field `/id` confirmed trusted",
        ),
    ] {
        let w = widenings(&base, &rules(text).unwrap());
        assert!(
            w.iter()
                .any(|w| w.section == "tools.http_request" && w.what == what),
            "{text}: {w:?}"
        );
    }
    // Turning a first-party default off, or lowering the default sink.
    let off = rules("[tools.fs_write]\nsinks = {}\n[flow]\ndefault_sink = \"any\"\n").unwrap();
    let w = widenings(&FlowRules::default(), &off);
    assert!(w.iter().any(|w| w.section == "tools.fs_write"), "{w:?}");
    assert!(
        w.iter()
            .any(|w| w.what == "default_sink lowered from identifiers to any"),
        "{w:?}"
    );
    // Paths are shown as written.
    let a = rules("[tools.t]\nsinks = { IBAN = \"trusted\" }\n").unwrap();
    let b = rules("[tools.t]\nsinks = { IBAN = \"verbatim\" }\n").unwrap();
    assert_eq!(
        widenings(&a, &b)[0].what,
        "sink `/IBAN` lowered from trusted to verbatim"
    );
    let req = rules("[flow]\nscope = \"required\"\n").unwrap();
    assert!(
        widenings(&req, &FlowRules::default())
            .iter()
            .any(|w| w.what.contains("scope"))
    );
}

#[test]
fn endorsed_is_the_strictest_level_and_lowering_it_widens() {
    let r = rules(
        "[tools.delete_file]\nsinks = { file_id = \"endorsed\", \"/note\" = \"identifiers\" }\n",
    )
    .unwrap();
    let d = r.for_tool("delete_file", false, true);
    assert_eq!(level(&d, "/file_id"), SinkLevel::Endorsed);
    // The strictest sink over a path wins.
    let both = rules("[tools.t]\nsinks = { \"*\" = \"trusted\", id = \"endorsed\" }\n").unwrap();
    assert_eq!(
        level(&both.for_tool("t", false, true), "/id"),
        SinkLevel::Endorsed
    );
    let lowered = rules(
        "[tools.delete_file]\nsinks = { file_id = \"trusted\", \"/note\" = \"identifiers\" }\n",
    )
    .unwrap();
    assert_eq!(
        widenings(&r, &lowered)
            .iter()
            .map(|w| w.what.as_str())
            .collect::<Vec<_>>(),
        ["sink `/file_id` lowered from endorsed to trusted"]
    );
    assert!(widenings(&lowered, &r).is_empty());
    // The first-party default for a request's destination.
    assert_eq!(
        level(
            &FlowRules::default().for_tool("http_request", false, true),
            "/url"
        ),
        SinkLevel::Endorsed
    );
}

fn level_strategy() -> impl Strategy<Value = SinkLevel> {
    prop::sample::select(vec![
        SinkLevel::Any,
        SinkLevel::Verbatim,
        SinkLevel::Identifiers,
        SinkLevel::Trusted,
        SinkLevel::Endorsed,
    ])
}

proptest! {
    /// Raising every level of a rule set is never a widening; lowering one
    /// always is.
    #[test]
    fn raising_never_widens_lowering_always_does(
        levels in prop::collection::vec((prop::sample::select(vec!["a", "b", "/c/*", "*"]), level_strategy()), 1..4),
        bump in any::<bool>(),
    ) {
        let mut seen = std::collections::BTreeSet::new();
        let levels: Vec<_> = levels.into_iter().filter(|(p, _)| seen.insert(*p)).collect();
        let text = |ls: &[(&str, SinkLevel)]| {
            let body: Vec<String> = ls.iter().map(|(p, l)| format!("\"{p}\" = \"{}\"", l.as_str())).collect();
            format!("[tools.t]\nsinks = {{ {} }}\n", body.join(", "))
        };
        let old = rules(&text(&levels)).unwrap();
        let raised: Vec<_> = levels.iter().map(|(p, l)| (*p, if bump { SinkLevel::Endorsed } else { *l })).collect();
        prop_assert!(widenings(&old, &rules(&text(&raised)).unwrap()).is_empty());
        if let Some(i) = levels.iter().position(|(_, l)| *l > SinkLevel::Any) {
            let mut lowered = levels.clone();
            lowered[i].1 = SinkLevel::Any;
            // Unless another rule still covers that path as strictly.
            let covered = levels.iter().enumerate().any(|(j, (p, l))| j != i && (*p == "*" || *p == levels[i].0) && *l >= levels[i].1);
            if !covered {
                prop_assert!(!widenings(&old, &rules(&text(&lowered)).unwrap()).is_empty(), "{:?}", lowered);
            }
        }
    }
}

#[test]
fn a_tools_strict_key_is_parsed_and_turning_it_down_widens() {
    let on = rules("[tools.get_unread_emails]\nstrict = true\n").unwrap();
    assert_eq!(
        on.for_tool("get_unread_emails", false, true).strict,
        Some(true)
    );
    // Kept beside the operator's own sinks, and for a neuron.
    let with_sinks = rules("[tools.t]\nsinks = {}\nstrict = true\n").unwrap();
    assert_eq!(with_sinks.for_tool("t", false, true).strict, Some(true));
    assert_eq!(with_sinks.for_tool("t", true, true).strict, Some(true));
    let default = FlowRules::default();
    let off = rules("[tools.get_unread_emails]\nstrict = false\n").unwrap();
    assert_eq!(
        default.for_tool("get_unread_emails", false, true).strict,
        None
    );
    for (old, new, what) in [
        (
            &on,
            &default,
            "strict changed from true to the default (calls with nothing to trace)",
        ),
        (
            &default,
            &off,
            "strict changed from the default (calls with nothing to trace) to false",
        ),
        (&on, &off, "strict changed from true to false"),
    ] {
        let w = widenings(old, new);
        assert!(
            w.iter()
                .any(|w| w.section == "tools.get_unread_emails" && w.what == what),
            "{what}: {w:?}"
        );
    }
    // Raising it is a narrowing.
    assert!(widenings(&off, &default).is_empty());
    assert!(widenings(&default, &on).is_empty());
}
