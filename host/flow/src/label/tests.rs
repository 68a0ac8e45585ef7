use super::*;

fn at(p: &str) -> Vec<String> {
    p.split('/').skip(1).map(str::to_string).collect()
}

#[test]
fn field_paths_parse_as_json_pointers_with_wildcards() {
    let p = FieldPath::parse("/events/*/id").unwrap();
    assert!(p.matches(&at("/events/3/id")));
    assert!(!p.matches(&at("/events/3/id/x")));
    assert!(p.is_prefix_of(&at("/events/3/id/x")));
    assert!(!p.matches(&at("/events/3")));
    assert_eq!(
        FieldPath::parse("id").unwrap(),
        FieldPath::parse("/id").unwrap()
    );
    assert_eq!(
        FieldPath::parse("/a~1b/c~0d").unwrap().to_string(),
        "/a~1b/c~0d"
    );
    assert!(
        FieldPath::parse("/a~1b")
            .unwrap()
            .matches(&["a/b".to_string()])
    );
    assert_eq!(FieldPath::parse("*").unwrap(), FieldPath::everything());
    for (bad, want) in [
        ("", FieldPathError::Empty),
        ("/a//b", FieldPathError::BadSegment("/a//b".into())),
        ("/a/", FieldPathError::BadSegment("/a/".into())),
        ("/a~2", FieldPathError::BadEscape("/a~2".into())),
        ("/a~", FieldPathError::BadEscape("/a~".into())),
        ("a.b", FieldPathError::NotAPath("a.b".into())),
        ("/a\nb", FieldPathError::BadSegment("/a\nb".into())),
    ] {
        assert_eq!(FieldPath::parse(bad), Err(want), "{bad:?}");
    }
    assert!(matches!(
        FieldPath::parse(&"/a".repeat(17)),
        Err(FieldPathError::TooLong(_))
    ));
    assert!(matches!(
        FieldPath::parse(&format!("/{}", "x".repeat(300))),
        Err(FieldPathError::TooLong(_))
    ));
    let many: Vec<String> = (0..65).map(|i| format!("/f{i}")).collect();
    assert_eq!(
        FieldLabels::parse(many.iter().map(|p| (p.as_str(), Integrity::Trusted))),
        Err(FieldPathError::TooMany)
    );
    assert_eq!(
        FieldLabels::parse([("id", Integrity::Trusted), ("/id", Integrity::Untrusted)]),
        Err(FieldPathError::Duplicate("/id".into()))
    );
}

#[test]
fn a_tool_cannot_vouch_for_what_it_fetched_without_the_operator() {
    let declared = FieldLabels::parse([
        ("/events/*/id", Integrity::Trusted),
        ("/events/*/description", Integrity::Untrusted),
        ("/owner", Integrity::Trusted),
    ])
    .unwrap();
    // The host says untrusted; the operator confirmed nothing.
    let l = OutputLabels::combine(true, &declared, &[]);
    assert_eq!(l.at(&at("/events/0/id"), true), Integrity::Untrusted);
    // The operator confirms the ids.
    let ids = FieldPath::parse("/events/*/id").unwrap();
    let owner_typo = FieldPath::parse("/owners").unwrap();
    let l = OutputLabels::combine(true, &declared, &[ids.clone(), owner_typo]);
    assert_eq!(l.at(&at("/events/0/id"), true), Integrity::Trusted);
    // Only a scalar, only at exactly that path.
    assert_eq!(l.at(&at("/events/0/id"), false), Integrity::Untrusted);
    assert_eq!(l.at(&at("/events/0/id/x"), true), Integrity::Untrusted);
    assert_eq!(
        l.at(&at("/owner"), true),
        Integrity::Untrusted,
        "declared, not confirmed"
    );
    // A confirmed path the tool never declared counts for nothing.
    let l2 = OutputLabels::combine(true, &FieldLabels::default(), &[ids]);
    assert_eq!(l2.at(&at("/events/0/id"), true), Integrity::Untrusted);
    // A trusted output: declared untrusted fields narrow it, with their subtree.
    let l = OutputLabels::combine(false, &declared, &[]);
    assert_eq!(l.at(&at("/events/0/title"), true), Integrity::Trusted);
    assert_eq!(
        l.at(&at("/events/0/description"), true),
        Integrity::Untrusted
    );
    assert_eq!(
        l.at(&at("/events/0/description/0"), true),
        Integrity::Untrusted
    );
    // Untrusted wins over a confirmed trusted field under it.
    let d =
        FieldLabels::parse([("/e", Integrity::Untrusted), ("/e/id", Integrity::Trusted)]).unwrap();
    let l = OutputLabels::combine(true, &d, &[FieldPath::parse("/e/id").unwrap()]);
    assert_eq!(l.at(&at("/e/id"), true), Integrity::Untrusted);
}

#[test]
fn labels_serialise_for_the_log() {
    let l = Label::untrusted(Source::Tool {
        tool: "web_fetch".into(),
        component: "ab12".into(),
        saga: "s-1".into(),
        step: 3,
    });
    let j = serde_json::to_string(&l).unwrap();
    assert_eq!(
        j,
        r#"{"source":{"kind":"tool","tool":"web_fetch","component":"ab12","saga":"s-1","step":3},"integrity":"untrusted"}"#
    );
    assert_eq!(serde_json::from_str::<Label>(&j).unwrap(), l);
    assert!(
        serde_json::from_str::<Label>(
            r#"{"source":{"kind":"user","principal":"a","x":1},"integrity":"trusted"}"#
        )
        .is_err()
    );
    assert_eq!(l.source.to_string(), "web_fetch (step 3)");
}

#[test]
fn an_output_label_names_its_field_labels_and_a_stored_label_without_them_reads() {
    let declared = FieldLabels::parse([
        ("/events/*/id", Integrity::Trusted),
        ("/events/*/title", Integrity::Untrusted),
    ])
    .unwrap();
    let confirmed = vec![FieldPath::parse("/events/*/id").unwrap()];
    let labels = OutputLabels::combine(true, &declared, &confirmed);
    let label = Label {
        source: Source::Operator { file: "x".into() },
        integrity: labels.whole,
        fields: labels.fields(),
    };
    let v = serde_json::to_value(&label).unwrap();
    assert_eq!(v["fields"]["trusted"], serde_json::json!(["/events/*/id"]));
    assert_eq!(
        v["fields"]["untrusted"],
        serde_json::json!(["/events/*/title"])
    );
    assert_eq!(serde_json::from_value::<Label>(v).unwrap(), label);
    // Unconfirmed: no trusted field to name.
    let none = OutputLabels::combine(true, &declared, &[]).fields();
    assert!(none.trusted.is_empty() && none.untrusted.len() == 1);
    // A label stored before field labels existed.
    let old =
        serde_json::json!({"source": {"kind": "operator", "file": "x"}, "integrity": "untrusted"});
    let l: Label = serde_json::from_value(old.clone()).unwrap();
    assert!(l.fields.is_empty());
    assert_eq!(serde_json::to_value(&l).unwrap(), old);
}
