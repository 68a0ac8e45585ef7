use super::*;
use serde_json::json;

fn check(pairs: &[(&str, &str)]) -> Result<(), HeaderRefusal> {
    single(pairs.iter().map(|(k, v)| (*k, v.as_bytes())))
}

#[test]
fn routing_and_auth_headers_are_single() {
    for name in [
        "host",
        "origin",
        "authorization",
        "content-type",
        "mcp-session-id",
        "mcp-protocol-version",
        "mcp-method",
        "mcp-name",
        "mcp-param-region",
        "last-event-id",
        "traceparent",
        "sec-fetch-site",
    ] {
        assert_eq!(
            check(&[(name, "a"), ("x", "y"), (name, "a")]),
            Err(HeaderRefusal::Repeated(name.into())),
            "{name}"
        );
        assert_eq!(check(&[(name, "")]), Err(HeaderRefusal::Empty(name.into())));
        assert_eq!(
            check(&[(name, " \t")]),
            Err(HeaderRefusal::Empty(name.into()))
        );
        assert_eq!(
            single([(name, b"caf\xc3\xa9".as_slice())]),
            Err(HeaderRefusal::NotText(name.into()))
        );
        assert_eq!(check(&[(name, "one")]), Ok(()));
    }
}

#[test]
fn token_headers_refuse_a_folded_list_and_text_headers_compare_whole() {
    for name in [
        "host",
        "authorization",
        "mcp-method",
        "mcp-protocol-version",
        "mcp-session-id",
        "origin",
        "content-type",
    ] {
        assert_eq!(
            check(&[(name, "a, b")]),
            Err(HeaderRefusal::Folded(name.into())),
            "{name}"
        );
    }
    assert_eq!(check(&[("mcp-name", "file:///a,b")]), Ok(()));
    assert_eq!(check(&[("mcp-param-q", "x,y")]), Ok(()));
}

#[test]
fn a_routing_headers_name_spelled_with_underscores_is_refused() {
    for name in [
        "mcp_method",
        "mcp_name",
        "mcp_protocol_version",
        "mcp_session_id",
        "mcp_param_region",
        "last_event_id",
        "sec_fetch_site",
        "content_type",
    ] {
        // Alone (a CGI-style gateway reads it as the real one) or beside it.
        assert_eq!(
            check(&[(name, "tools/call")]),
            Err(HeaderRefusal::Lookalike(name.into())),
            "{name}"
        );
        let real = name.replace('_', "-");
        assert_eq!(
            check(&[(real.as_str(), "tools/call"), (name, "tools/list")]),
            Err(HeaderRefusal::Lookalike(name.into())),
            "{name}"
        );
    }
    // Other names with underscores are not the server's business.
    assert_eq!(check(&[("x_custom", "1"), ("user_agent_x", "2")]), Ok(()));
}

#[test]
fn lists_may_repeat_but_not_the_consoles_cookie() {
    assert_eq!(
        check(&[
            ("accept", "application/json"),
            ("accept", "text/event-stream"),
            ("tracestate", "a=1"),
            ("tracestate", "b=2"),
            ("cookie", "a=1"),
            ("cookie", "capsaga_console=00"),
        ]),
        Ok(())
    );
    for cookies in [
        vec!["capsaga_console=00; capsaga_console=11"],
        vec!["capsaga_console=00", "x=1; capsaga_console=11"],
        vec![" capsaga_console =00;capsaga_console=00"],
        vec!["capsaga_console=00", "CAPSAGA_CONSOLE=11"],
        vec!["Capsaga_Console=11;capsaga_console=00"],
    ] {
        let pairs: Vec<(&str, &str)> = cookies.iter().map(|c| ("cookie", *c)).collect();
        assert!(
            matches!(check(&pairs), Err(HeaderRefusal::Repeated(_))),
            "{cookies:?}"
        );
    }
}

#[test]
fn the_target_names_the_host() {
    assert_eq!(target_agrees(None, Some(b"a")), Ok(()));
    assert_eq!(
        target_agrees(Some("127.0.0.1:80"), Some(b"127.0.0.1:80")),
        Ok(())
    );
    assert_eq!(
        target_agrees(Some("LOCALHOST:1"), Some(b"localhost:1")),
        Ok(())
    );
    assert_eq!(
        target_agrees(Some("evil.example"), Some(b"127.0.0.1")),
        Err(HeaderRefusal::TargetHost)
    );
    assert_eq!(
        target_agrees(Some("evil.example"), None),
        Err(HeaderRefusal::TargetHost)
    );
}

fn agrees(h: &[(&str, &str)], m: &serde_json::Value) -> Result<(), HeaderRefusal> {
    agree(|n| h.iter().find(|(k, _)| *k == n).map(|(_, v)| *v), m)
}

#[test]
fn headers_say_what_the_body_says_whatever_the_revision() {
    let call = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
        "params": {"name": "fs_write", "arguments": {}}});
    let v26 = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
        "params": {"name": "fs_write", "arguments": {},
            "_meta": {"io.modelcontextprotocol/protocolVersion": "2026-07-28"}}});
    let init = json!({"jsonrpc": "2.0", "id": 0, "method": "initialize",
        "params": {"protocolVersion": "2025-11-25"}});
    let read = json!({"jsonrpc": "2.0", "id": 2, "method": "resources/read",
        "params": {"uri": "capsaga://sagas/x,y"}});
    let response = json!({"jsonrpc": "2.0", "id": 5, "result": {}});
    let ok: &[(&[(&str, &str)], &serde_json::Value)] = &[
        (&[], &call),
        (
            &[("mcp-method", "tools/call"), ("mcp-name", "fs_write")],
            &call,
        ),
        (&[("mcp-name", "=?base64?ZnNfd3JpdGU=?=")], &call),
        (&[("mcp-protocol-version", "2025-11-25")], &call),
        (&[("mcp-protocol-version", "2026-07-28")], &v26),
        (&[("mcp-protocol-version", "2025-11-25")], &init),
        (&[("mcp-name", "capsaga://sagas/x,y")], &read),
        (&[], &response),
    ];
    for (h, m) in ok {
        assert_eq!(agrees(h, m), Ok(()), "{h:?} {m}");
    }
    let refused: &[(&[(&str, &str)], &serde_json::Value)] = &[
        (&[("mcp-method", "tools/list")], &call),
        (&[("mcp-method", "Tools/Call")], &call),
        (&[("mcp-method", "tools/call")], &response),
        (&[("mcp-name", "time_now")], &call),
        (&[("mcp-name", "FS_WRITE")], &call),
        (&[("mcp-name", "=?base64?dGltZV9ub3c=?=")], &call),
        (&[("mcp-name", "=?base64?!!?=")], &call),
        // Two names folded by a proxy, or padded inside.
        (&[("mcp-name", "fs_write, time_now")], &call),
        (&[("mcp-name", "time_now,fs_write")], &call),
        (&[("mcp-name", "fs_ write")], &call),
        (&[("mcp-method", "tools/ call")], &call),
        (&[("mcp-protocol-version", "2026-07-28 ")], &init),
        (&[("mcp-name", "fs_write")], &init),
        (&[("mcp-protocol-version", "2025-11-25")], &v26),
        (&[("mcp-protocol-version", "2026-07-28")], &init),
    ];
    for (h, m) in refused {
        assert!(
            matches!(agrees(h, m), Err(HeaderRefusal::Disagrees { .. })),
            "{h:?} {m}"
        );
    }
}
