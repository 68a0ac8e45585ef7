//! Unit tests of the wire-format quirk families (`super`).

use super::*;

fn raw(s: &str) -> Box<RawValue> {
    RawValue::from_string(s.to_string()).unwrap()
}

fn args(s: Option<&str>, shape: ArgsShape) -> (String, bool) {
    let r = s.map(raw);
    let (t, note) = arguments_text(r.as_deref(), shape);
    (t, note.is_some())
}

#[test]
fn argument_families() {
    use ArgsShape::*;
    // As documented: kept byte for byte, no note.
    assert_eq!(
        args(Some(r#""{\"a\":1,\"a\":2}""#), String),
        (r#"{"a":1,"a":2}"#.into(), false)
    );
    assert_eq!(
        args(Some(r#"{"a":1,"a":2}"#), Object),
        (r#"{"a":1,"a":2}"#.into(), false)
    );
    // "No arguments" in its many spellings.
    for s in [r#""""#, r#""   ""#, r#"" \n\t ""#, "null", r#""null""#] {
        assert_eq!(args(Some(s), String), ("{}".into(), true), "{s}");
        assert_eq!(args(Some(s), Object), ("{}".into(), true), "{s}");
    }
    assert_eq!(args(None, String), ("{}".into(), true));
    assert_eq!(args(None, Object), ("{}".into(), true));
    // An object where a string is due, and the reverse.
    assert_eq!(
        args(Some(r#"{"p":"/a"}"#), String),
        (r#"{"p":"/a"}"#.into(), true)
    );
    assert_eq!(
        args(Some(r#""{\"p\":1}""#), Object),
        (r#"{"p":1}"#.into(), true)
    );
    // Encoded twice, three times.
    let twice = serde_json::to_string(&serde_json::to_string(r#"{"p":"/a"}"#).unwrap()).unwrap();
    assert_eq!(args(Some(&twice), String), (r#"{"p":"/a"}"#.into(), true));
    let thrice = serde_json::to_string(&twice).unwrap();
    assert_eq!(args(Some(&thrice), String), (r#"{"p":"/a"}"#.into(), true));
    // Not JSON at all: left for validation to refuse, as written.
    assert_eq!(
        args(Some(r#""{path: /a""#), String),
        ("{path: /a".into(), false)
    );
    assert_eq!(args(Some("[1,2]"), String), ("[1,2]".into(), false));
    assert_eq!(args(Some("42"), Object), ("42".into(), false));
}

#[test]
fn errors_in_bodies() {
    let e = error_in_body(&serde_json::json!({"error": {"message": "Rate limit", "code": 429}}))
        .unwrap();
    assert!(e.retriable);
    assert!(e.message.contains("Rate limit"), "{e:?}");
    let e = error_in_body(&serde_json::json!({"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}})).unwrap();
    assert_eq!(e.message, "overloaded_error: Overloaded");
    assert!(e.retriable);
    let e = error_in_body(&serde_json::json!({"error": {"message": "bad key", "type": "invalid_request_error", "code": "invalid_api_key"}})).unwrap();
    assert!(!e.retriable);
    let e = error_in_body(&serde_json::json!({"error": "upstream failed", "status": 502})).unwrap();
    assert!(e.retriable && e.message.contains("upstream failed"));
    assert!(error_in_body(&serde_json::json!({"error": null, "choices": []})).is_none());
    assert!(error_in_body(&serde_json::json!({"choices": []})).is_none());
}

#[test]
fn preflight_families() {
    let kind = |b: &str| preflight("p", b).map(|_| ()).unwrap_err();
    for b in ["", "  \n", "\u{feff}"] {
        assert!(matches!(
            kind(b),
            ProviderError::Failed {
                kind: FailureKind::Malformed,
                retriable: true,
                ..
            }
        ));
    }
    assert!(kind("data: {\"a\":1}\n\n").to_string().contains("stream"));
    assert!(kind("<html>502</html>").to_string().contains("not JSON"));
    match kind(
        r#"{"error":{"message":"slow down","code":429},"usage":{"prompt_tokens":7,"completion_tokens":2}}"#,
    ) {
        ProviderError::Failed {
            kind,
            retriable,
            usage,
            message,
            ..
        } => {
            assert_eq!(kind, FailureKind::ErrorInBody);
            assert!(retriable);
            assert_eq!((usage.input_tokens, usage.output_tokens), (7, 2));
            assert!(message.contains("slow down"));
        }
        other => panic!("{other:?}"),
    }
    assert!(preflight("p", "\u{feff}{\"choices\":[]}").is_ok());
}

#[test]
fn usage_spellings() {
    let u = |v: Value| {
        let u = usage_of(&v);
        (u.input_tokens, u.output_tokens)
    };
    assert_eq!(
        u(serde_json::json!({"usage": {"prompt_tokens": 5, "completion_tokens": 3}})),
        (5, 3)
    );
    assert_eq!(
        u(
            serde_json::json!({"usage": {"input_tokens": 5, "output_tokens": 3, "cache_read_input_tokens": 10}})
        ),
        (15, 3)
    );
    assert_eq!(
        u(serde_json::json!({"usage": {"prompt_tokens": 5.0, "completion_tokens": -1}})),
        (5, 0)
    );
    assert_eq!(u(serde_json::json!({"usage": null})), (0, 0));
}

#[test]
fn content_families() {
    let c = |v: Value| content_text(Some(&v)).unwrap();
    assert_eq!(c(serde_json::json!("hi")).text, "hi");
    assert_eq!(content_text(None).unwrap(), Content::default());
    let parts = c(serde_json::json!([
        {"type": "thinking", "thinking": "hmm"},
        {"type": "text", "text": "a"},
        "b",
        {"type": "refusal", "refusal": "no"},
    ]));
    assert_eq!(parts.text, "ab");
    assert_eq!(parts.refusal.as_deref(), Some("no"));
    assert_eq!(parts.skipped, ["thinking"]);
    assert_eq!(
        c(serde_json::json!({"type": "text", "text": "one"})).text,
        "one"
    );
    assert!(content_text(Some(&serde_json::json!(5))).is_err());
}

fn call(id: &str) -> ToolCall {
    ToolCall {
        id: id.into(),
        name: "t".into(),
        arguments: "{}".into(),
    }
}

#[test]
fn ids_unique_in_the_conversation() {
    let history = vec![
        Message::user("x"),
        Message::assistant("", vec![call("call_1")]),
        Message::tool("call_1", "ok", false),
    ];
    let mut calls = vec![
        call("call_1"),
        call(""),
        call("a"),
        call("a"),
        call("bad id"),
    ];
    let mut notes = Vec::new();
    settle_ids(&mut calls, &history, IdRule::OpenAi, &mut notes);
    let ids: Vec<&str> = calls.iter().map(|c| c.id.as_str()).collect();
    let unique: BTreeSet<&str> = ids.iter().copied().collect();
    assert_eq!(unique.len(), 5, "{ids:?}");
    assert!(!ids.contains(&"call_1"));
    assert_eq!(ids[2], "a");
    assert_eq!(notes.len(), 4, "{notes:?}");
    // Anthropic's alphabet is narrower.
    let mut calls = vec![call("functions.fs_read:0")];
    settle_ids(&mut calls, &[], IdRule::Anthropic, &mut notes);
    assert!(IdRule::Anthropic.valid(&calls[0].id));
    assert!(IdRule::OpenAi.valid("functions.fs_read:0"));
}

#[test]
fn history_ids_rewritten_per_format() {
    let msgs = vec![
        Message::user("x"),
        Message::assistant("", vec![call("dup"), call("dup"), call("functions.t:0")]),
        Message::tool("dup", "first", false),
        Message::tool("dup", "second", false),
        Message::tool("functions.t:0", "third", false),
    ];
    let ids = wire_ids(&msgs, IdRule::Anthropic);
    assert_eq!(ids[0], Vec::<String>::new());
    assert_eq!(ids[1].len(), 3);
    assert_eq!(ids[1][0], "dup");
    assert_ne!(ids[1][1], "dup");
    assert_eq!(ids[2], [ids[1][0].clone()]);
    assert_eq!(ids[3], [ids[1][1].clone()]);
    assert_eq!(ids[4], [ids[1][2].clone()]);
    assert!(ids.iter().flatten().all(|i| IdRule::Anthropic.valid(i)));
    let ids = wire_ids(&msgs, IdRule::OpenAi);
    assert_eq!(ids[1][2], "functions.t:0");
}

#[test]
fn replayed_history_is_well_formed() {
    assert_eq!(replay_arguments(r#"{"a":1}"#), r#"{"a":1}"#);
    for bad in ["", "{", "[1]", r#"{"a":1,"a":2}"#, "\"x\"", "null"] {
        assert_eq!(replay_arguments(bad), "{}", "{bad}");
        assert_eq!(replay_input(bad), serde_json::json!({}), "{bad}");
    }
    assert_eq!(replay_name("fs_read"), "fs_read");
    for bad in ["", "fs.read", "a b", "x\"y", &"n".repeat(65)] {
        assert_eq!(replay_name(bad), INVALID_NAME);
    }
}
