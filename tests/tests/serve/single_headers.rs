//! Issue 45 item 3, from the attacker's side, over raw HTTP/1.1 to a real
//! `capsaga serve` on 127.0.0.1 (a client library would merge or refuse
//! what is sent here): every header the server routes or authenticates on
//! is refused when sent twice (the same or another spelling of its name,
//! the same or another value, the copy that agrees with the body first or
//! last), folded into a comma list, empty or not ASCII, and, on `/mcp`,
//! when it says something else than the body, whatever the revision (a
//! 2025-11-25 session's request included). A proxy keeping another copy
//! than capsaga's libraries can then never see another request than the
//! one that runs. Each refused request is checked to have run nothing (the
//! file the call would write is not there); the same request with single,
//! agreeing headers (whitespace around a value included) runs.

use super::wire2026::{secret, serve_with_tokens};
use capsaga_core::principal::Role;
use capsaga_tests::TestWorkspace;
use capsaga_tests::raw_http::{Answer, request, send, send_head};
use serde_json::{Value, json};
use std::net::SocketAddr;

const POLICY: &str = "[tools.time_now]\n[tools.fs_write]\ngrants = [\"fs:write:~/ws/**\"]\n";
const REV: &str = "2026-07-28";
const OLD: &str = "2025-11-25";

/// Header lines as written.
type Lines = Vec<(&'static str, Vec<u8>)>;

fn line(k: &'static str, v: &str) -> (&'static str, Vec<u8>) {
    (k, v.as_bytes().to_vec())
}

/// A 2026-07-28 `tools/call` of `fs_write` writing `file` (its JSON text).
fn call_2026(ws: &TestWorkspace, file: &str) -> String {
    json!({"jsonrpc": "2.0", "id": 9, "method": "tools/call",
    "params": {"name": "fs_write",
        "arguments": {"path": ws.ws_path(file), "content": "ran\n"},
        "_meta": {
            "io.modelcontextprotocol/protocolVersion": REV,
            "io.modelcontextprotocol/clientInfo": {"name": "single-headers", "version": "1"},
            "io.modelcontextprotocol/clientCapabilities": {},
        }}})
    .to_string()
}

/// The headers a well-behaved 2026 client sends, with `replace` lines
/// instead of those of the same name (any spelling) and `add` lines after.
fn headers(addr: SocketAddr, who: &str, replace: &[(&'static str, Vec<u8>)]) -> Lines {
    let host = addr.to_string();
    let mut base: Lines = vec![
        line("Host", &host),
        line("Accept", "application/json, text/event-stream"),
        line("Content-Type", "application/json"),
        line("MCP-Protocol-Version", REV),
        line("Mcp-Method", "tools/call"),
        line("Mcp-Name", "fs_write"),
        line("Authorization", &format!("Bearer {}", secret(who))),
    ];
    let replaced: Vec<String> = replace
        .iter()
        .map(|(k, _)| k.to_ascii_lowercase())
        .collect();
    base.retain(|(k, _)| !replaced.contains(&k.to_ascii_lowercase()));
    base.extend(replace.iter().cloned());
    base
}

async fn post(addr: SocketAddr, start: &str, lines: &Lines, body: &str) -> Answer {
    let refs: Vec<(&str, &[u8])> = lines.iter().map(|(k, v)| (*k, v.as_slice())).collect();
    send(addr, &request(start, &refs, body.as_bytes())).await
}

fn refused(a: &Answer, what: &str) {
    assert_eq!(a.status, 400, "{what}: {} {}", a.status, a.text());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stateless_routing_headers_are_single_and_say_what_the_body_says() {
    let ws = TestWorkspace::new(&["time_now", "fs_write"], POLICY);
    let (_host, srv) = serve_clients2(&ws).await;
    let addr = srv.addr;
    let evil = "http://evil.example";

    // Each case: what it shows, the header lines (over the defaults).
    let cases: Vec<(&str, Lines)> = vec![
        (
            "MCP-Protocol-Version twice, the agreeing copy first",
            vec![
                line("MCP-Protocol-Version", REV),
                line("MCP-Protocol-Version", OLD),
            ],
        ),
        (
            "MCP-Protocol-Version twice, the agreeing copy last",
            vec![
                line("MCP-Protocol-Version", OLD),
                line("mcp-protocol-version", REV),
            ],
        ),
        (
            "MCP-Protocol-Version twice, the same value, two spellings",
            vec![
                line("mcp-protocol-version", REV),
                line("MCP-PROTOCOL-VERSION", REV),
            ],
        ),
        (
            "MCP-Protocol-Version folded",
            vec![line("MCP-Protocol-Version", &format!("{REV}, {OLD}"))],
        ),
        (
            "Mcp-Method twice, one agreeing",
            vec![
                line("Mcp-Method", "tools/call"),
                line("mcp-method", "tools/list"),
            ],
        ),
        (
            "Mcp-Method twice, the same value",
            vec![
                line("mcp-method", "tools/call"),
                line("MCP-METHOD", "tools/call"),
            ],
        ),
        ("Mcp-Method empty", vec![line("Mcp-Method", "")]),
        (
            "Mcp-Method naming another method",
            vec![line("Mcp-Method", "tools/list")],
        ),
        (
            "Mcp-Method outside ASCII",
            vec![("Mcp-Method", b"tools/call\xc2\xa0".to_vec())],
        ),
        (
            "Mcp-Name twice, one agreeing",
            vec![line("Mcp-Name", "fs_write"), line("mcp-name", "time_now")],
        ),
        (
            "Mcp-Name naming another tool",
            vec![line("Mcp-Name", "time_now")],
        ),
        (
            "Mcp-Name naming another tool in Base64",
            vec![line("Mcp-Name", "=?base64?dGltZV9ub3c=?=")],
        ),
        (
            "Mcp-Param header twice",
            vec![
                line("Mcp-Param-Region", "eu"),
                line("Mcp-Param-Region", "us"),
            ],
        ),
        (
            "Authorization twice: the caller's and another principal's",
            vec![
                line("Authorization", &format!("Bearer {}", secret("bob"))),
                line("authorization", &format!("Bearer {}", secret("alice"))),
            ],
        ),
        (
            "Authorization folded",
            vec![line(
                "Authorization",
                &format!("Bearer {}, Bearer {}", secret("bob"), secret("alice")),
            )],
        ),
        ("Authorization empty", vec![line("Authorization", "")]),
        (
            "Host twice, the allowed one first",
            vec![
                line("Host", &addr.to_string()),
                line("host", "evil.example"),
            ],
        ),
        (
            "Origin twice, the allowed one first",
            vec![line("Origin", "http://127.0.0.1:1"), line("Origin", evil)],
        ),
        (
            "Content-Type twice",
            vec![
                line("Content-Type", "application/json"),
                line("Content-Type", "text/plain"),
            ],
        ),
        (
            "traceparent twice",
            vec![
                line(
                    "traceparent",
                    "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01",
                ),
                line(
                    "traceparent",
                    "00-11111111111111111111111111111111-2222222222222222-01",
                ),
            ],
        ),
        // A gateway mapping headers to CGI-style variables reads `Mcp_Method`
        // as `Mcp-Method`: alone, or beside the real one.
        (
            "Mcp_Method alone, naming another method",
            vec![line("Mcp_Method", "tools/list")],
        ),
        (
            "Mcp_Name beside Mcp-Name, naming another tool",
            vec![line("Mcp-Name", "fs_write"), line("Mcp_Name", "time_now")],
        ),
        (
            "MCP_PROTOCOL_VERSION beside MCP-Protocol-Version",
            vec![line("MCP_PROTOCOL_VERSION", OLD)],
        ),
        (
            "Mcp-Name folded: two tools",
            vec![line("Mcp-Name", "fs_write, time_now")],
        ),
        (
            "Authorization folded: the caller's and another principal's",
            vec![line(
                "Authorization",
                &format!("Bearer {}, Bearer {}", secret("bob"), secret("alice")),
            )],
        ),
    ];
    for (i, (what, lines)) in cases.into_iter().enumerate() {
        let file = format!("refused-{i}.txt");
        let a = post(
            addr,
            "POST /mcp",
            &headers(addr, "bob", &lines),
            &call_2026(&ws, &file),
        )
        .await;
        refused(&a, what);
        assert_eq!(a.json()["error"]["code"], -32020, "{what}: {}", a.text());
        assert!(!ws.ws().join(&file).exists(), "{what}: the call ran");
    }

    // A request-target in absolute form naming another host than `Host`.
    let a = post(
        addr,
        "POST http://evil.example/mcp",
        &headers(addr, "bob", &[]),
        &call_2026(&ws, "absolute.txt"),
    )
    .await;
    refused(&a, "absolute-form target naming another host");
    assert!(!ws.ws().join("absolute.txt").exists());

    // Single, agreeing headers run, whitespace around a value included, and
    // the list headers keep HTTP's folding.
    let ok = vec![
        line("Mcp-Method", "  tools/call\t"),
        line("Accept", "application/json"),
        line("accept", "text/event-stream"),
        line("tracestate", "a=1"),
        line("tracestate", "b=2"),
    ];
    let a = post(
        addr,
        "POST /mcp",
        &headers(addr, "bob", &ok),
        &call_2026(&ws, "ran.txt"),
    )
    .await;
    assert_eq!(a.status, 200, "{}", a.text());
    assert_eq!(a.json()["result"]["isError"], false, "{}", a.text());
    assert_eq!(
        std::fs::read_to_string(ws.ws().join("ran.txt")).unwrap(),
        "ran\n"
    );
}

/// A server with the client tokens `bob` and `alice`, and `carol` an
/// operator.
async fn serve_clients2(
    ws: &TestWorkspace,
) -> (
    std::sync::Arc<capsaga_door::host::Host>,
    capsaga_tests::mcp_rig::Running,
) {
    let (b, a, c) = (secret("bob"), secret("alice"), secret("carol"));
    serve_with_tokens(
        ws,
        &[
            ("bob", Role::Client, &b),
            ("alice", Role::Client, &a),
            ("carol", Role::Operator, &c),
        ],
    )
    .await
}

/// Open a 2025-11-25 session as `who`; its id.
async fn session(addr: SocketAddr, who: &str) -> String {
    let auth = format!("Bearer {}", secret(who));
    let init = json!({"jsonrpc": "2.0", "id": 0, "method": "initialize",
        "params": {"protocolVersion": OLD, "capabilities": {},
            "clientInfo": {"name": "single-headers", "version": "1"}}})
    .to_string();
    let lines = vec![
        line("Host", &addr.to_string()),
        line("Accept", "application/json, text/event-stream"),
        line("Content-Type", "application/json"),
        line("Authorization", &auth),
    ];
    let a = post(addr, "POST /mcp", &lines, &init).await;
    assert_eq!(a.status, 200, "{}", a.text());
    let id = a
        .header("mcp-session-id")
        .expect("a session id")
        .to_string();
    let mut lines = lines;
    lines.push(line("Mcp-Session-Id", &id));
    lines.push(line("MCP-Protocol-Version", OLD));
    let note = json!({"jsonrpc": "2.0", "method": "notifications/initialized"}).to_string();
    let a = post(addr, "POST /mcp", &lines, &note).await;
    assert_eq!(a.status, 202, "{}", a.text());
    id
}

/// A 2025-11-25 session's `tools/call` of `fs_write` writing `file`.
fn call_2025(ws: &TestWorkspace, id: u64, file: &str) -> String {
    json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
        "params": {"name": "fs_write",
            "arguments": {"path": ws.ws_path(file), "content": "ran\n"}}})
    .to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sessions_routing_headers_say_what_its_body_says() {
    let ws = TestWorkspace::new(&["time_now", "fs_write"], POLICY);
    let (_host, srv) = serve_clients2(&ws).await;
    let addr = srv.addr;
    let bobs = session(addr, "bob").await;
    let alices = session(addr, "alice").await;
    let base = |extra: Lines| {
        let mut l = vec![
            line("Host", &addr.to_string()),
            line("Accept", "application/json, text/event-stream"),
            line("Content-Type", "application/json"),
            line("Authorization", &format!("Bearer {}", secret("bob"))),
            line("MCP-Protocol-Version", OLD),
        ];
        if !extra
            .iter()
            .any(|(k, _)| k.eq_ignore_ascii_case("mcp-session-id"))
        {
            l.push(line("Mcp-Session-Id", &bobs));
        }
        l.extend(extra);
        l
    };
    let cases: Vec<(&str, Lines)> = vec![
        // rmcp reads these only from 2026-07-28 on; a proxy routing on
        // them sees another call than the one the session runs.
        (
            "Mcp-Method naming another method",
            vec![line("Mcp-Method", "tools/list")],
        ),
        (
            "Mcp-Name naming another tool",
            vec![line("Mcp-Name", "time_now")],
        ),
        (
            "Mcp-Method agreeing, twice",
            vec![
                line("Mcp-Method", "tools/call"),
                line("mcp-method", "tools/call"),
            ],
        ),
        (
            "Mcp-Name folded: the body's tool and another",
            vec![line("Mcp-Name", "fs_write,time_now")],
        ),
        (
            "Mcp-Method folded: the body's method and another",
            vec![line("Mcp-Method", "tools/call, tools/list")],
        ),
        (
            "Mcp_Method naming another method (an underscore for a dash)",
            vec![
                line("Mcp-Method", "tools/call"),
                line("Mcp_Method", "tools/list"),
            ],
        ),
        (
            "Mcp_Session_Id naming another principal's session",
            vec![line("Mcp_Session_Id", &alices)],
        ),
        (
            "MCP-Protocol-Version twice",
            vec![line("mcp-protocol-version", OLD)],
        ),
        (
            "Mcp-Session-Id twice: the caller's and another principal's",
            vec![
                line("Mcp-Session-Id", &bobs),
                line("mcp-session-id", &alices),
            ],
        ),
        (
            "Mcp-Session-Id folded",
            vec![line("Mcp-Session-Id", &format!("{bobs}, {alices}"))],
        ),
    ];
    for (i, (what, lines)) in cases.into_iter().enumerate() {
        let file = format!("session-refused-{i}.txt");
        let a = post(
            addr,
            "POST /mcp",
            &base(lines),
            &call_2025(&ws, 10 + i as u64, &file),
        )
        .await;
        refused(&a, what);
        assert_eq!(a.json()["error"]["code"], -32020, "{what}: {}", a.text());
        assert!(!ws.ws().join(&file).exists(), "{what}: the call ran");
    }
    // A JSON-RPC response (a client's answer to the server) routed as a
    // method call.
    let answer = json!({"jsonrpc": "2.0", "id": 77, "result": {}}).to_string();
    let a = post(
        addr,
        "POST /mcp",
        &base(vec![line("Mcp-Method", "tools/call")]),
        &answer,
    )
    .await;
    refused(&a, "Mcp-Method on a response");

    // Two `Last-Event-ID` on the session's event stream.
    let mut lines = base(vec![line("Last-Event-ID", "0"), line("last-event-id", "1")]);
    lines.retain(|(k, _)| !k.eq_ignore_ascii_case("content-type"));
    let refs: Vec<(&str, &[u8])> = lines.iter().map(|(k, v)| (*k, v.as_slice())).collect();
    let a = send_head(addr, &request("GET /mcp", &refs, b"")).await;
    assert_eq!(a.status, 400, "Last-Event-ID twice");

    // The same call with its headers single and agreeing runs.
    let a = post(
        addr,
        "POST /mcp",
        &base(vec![
            line("Mcp-Method", "tools/call"),
            line("Mcp-Name", "fs_write"),
        ]),
        &call_2025(&ws, 99, "session-ran.txt"),
    )
    .await;
    assert_eq!(a.status, 200, "{}", a.text());
    let v: Value = a.json();
    assert_eq!(v["result"]["isError"], false, "{v}");
    assert!(ws.ws().join("session-ran.txt").exists());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn authentication_and_origin_headers_are_single_on_every_route() {
    let ws = TestWorkspace::new(&["time_now", "fs_write"], POLICY);
    let (_host, srv) = serve_clients2(&ws).await;
    let addr = srv.addr;
    let host = addr.to_string();
    let carol = format!("Bearer {}", secret("carol"));
    let bob = format!("Bearer {}", secret("bob"));
    let get = |lines: Lines, path: &'static str| async move {
        post(addr, &format!("GET {path}"), &lines, "").await
    };
    // The REST API: an operator route reached with an operator's token in
    // the first copy and a client's in the second, or the reverse.
    for (what, lines) in [
        (
            "Authorization twice, operator first",
            vec![
                line("Host", &host),
                line("Authorization", &carol),
                line("authorization", &bob),
            ],
        ),
        (
            "Authorization twice, operator last",
            vec![
                line("Host", &host),
                line("Authorization", &bob),
                line("AUTHORIZATION", &carol),
            ],
        ),
        (
            "Host twice",
            vec![
                line("Host", &host),
                line("Host", "evil.example"),
                line("Authorization", &carol),
            ],
        ),
        (
            "Origin twice",
            vec![
                line("Host", &host),
                line("Origin", "http://localhost:9"),
                line("origin", "http://evil.example"),
                line("Authorization", &carol),
            ],
        ),
        (
            "Host empty",
            vec![line("Host", ""), line("Authorization", &carol)],
        ),
    ] {
        let a = get(lines, "/v1/approvals").await;
        refused(&a, what);
        assert_eq!(
            a.json()["detail"]["code"],
            "bad_header",
            "{what}: {}",
            a.text()
        );
    }
    // Even the one route without a token.
    let a = get(
        vec![line("Host", &host), line("host", "evil.example")],
        "/healthz",
    )
    .await;
    refused(&a, "Host twice on /healthz");
    let a = post(
        addr,
        "GET http://evil.example/healthz",
        &vec![line("Host", &host)],
        "",
    )
    .await;
    refused(&a, "absolute-form target naming another host on /healthz");

    // The console: an operator's session cookie, and a second one.
    let form = format!("token={}", secret("carol"));
    let a = post(
        addr,
        "POST /console/login",
        &vec![
            line("Host", &host),
            line("Content-Type", "application/x-www-form-urlencoded"),
            line("Origin", &format!("http://{host}")),
        ],
        &form,
    )
    .await;
    assert_eq!(a.status, 303, "{}", a.text());
    let cookie = a
        .header("set-cookie")
        .and_then(|c| c.split(';').next())
        .expect("a session cookie")
        .to_string();
    let other = format!("capsaga_console={}", "0".repeat(64));
    let a = get(
        vec![line("Host", &host), line("Cookie", &cookie)],
        "/console/approvals",
    )
    .await;
    assert_eq!(a.status, 200, "the operator's own session: {}", a.text());
    for (what, lines) in [
        (
            "the session cookie twice in one header",
            vec![
                line("Host", &host),
                line("Cookie", &format!("{cookie}; {other}")),
            ],
        ),
        (
            "the session cookie in two headers",
            vec![
                line("Host", &host),
                line("Cookie", &other),
                line("cookie", &cookie),
            ],
        ),
        (
            "the session cookie twice, its name in another case",
            vec![
                line("Host", &host),
                line(
                    "Cookie",
                    &format!("{cookie}; CAPSAGA_CONSOLE={}", "1".repeat(64)),
                ),
            ],
        ),
        (
            "Sec_Fetch_Site saying cross-site",
            vec![
                line("Host", &host),
                line("Cookie", &cookie),
                line("Sec_Fetch_Site", "cross-site"),
            ],
        ),
        (
            "Sec-Fetch-Site twice",
            vec![
                line("Host", &host),
                line("Cookie", &cookie),
                line("Sec-Fetch-Site", "same-origin"),
                line("sec-fetch-site", "cross-site"),
            ],
        ),
    ] {
        let a = get(lines, "/console/approvals").await;
        refused(&a, what);
    }
}
