//! MCP server spans (issue 30 part 1) from the real `capsaga mcp` over
//! stdio, exported to the real OTLP receiver: one server span per request
//! the handler answers, named `{mcp.method.name} {target}` with the MCP
//! semantic conventions' attributes; a request carrying a W3C
//! `traceparent` in `params._meta` is a child of the client's span, in the
//! client's trace; a malformed one is ignored (a new trace, the request
//! answered as usual). Over Streamable HTTP (`capsaga serve`), the spans
//! carry the session's id and the `tcp` transport, and the HTTP
//! `traceparent` header stands in for a `_meta` without one.

use super::{exporting, named};
use capsaga_tests::mcp_rig::{YesMan, call_ok, connect_as};
use capsaga_tests::otlp_receiver::{OtlpReceiver, attr};
use capsaga_tests::{TestWorkspace, wait_until};
use opentelemetry_proto::tonic::trace::v1::Span;
use serde_json::{Value, json};
use std::io::{BufRead, BufReader, Lines, Write};
use std::process::{Child, ChildStdin, ChildStdout, Stdio};

const POLICY: &str = "[tools.time_now]\n";
const REV: &str = "2026-07-28";

/// The client's trace, span and `traceparent` of the session's requests.
const TRACE_A: &str = "4bf92f3577b34da6a3ce929d0e0e4736";
const SPAN_A: &str = "00f067aa0ba902b7";
const TRACE_B: &str = "0af7651916cd43dd8448eb211c80319c";
const SPAN_B: &str = "b7ad6b7169203331";

fn traceparent(trace: &str, span: &str) -> String {
    format!("00-{trace}-{span}-01")
}

/// A `capsaga mcp` child exporting to the receiver, spoken to line by line.
struct Session {
    child: Child,
    stdin: Option<ChildStdin>,
    lines: Lines<BufReader<ChildStdout>>,
}

impl Session {
    fn start(ws: &TestWorkspace, endpoint: &str) -> Session {
        let mut cmd = ws.capsaga(&["mcp", "--no-elicitation", "--catalog-poll-ms", "0"]);
        exporting(&mut cmd, endpoint);
        let mut child = cmd
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("spawn capsaga mcp");
        let stdin = child.stdin.take();
        let lines = BufReader::new(child.stdout.take().expect("stdout")).lines();
        Session {
            child,
            stdin,
            lines,
        }
    }

    fn send(&mut self, v: &Value) {
        let stdin = self.stdin.as_mut().expect("open stdin");
        writeln!(stdin, "{v}").unwrap();
        stdin.flush().unwrap();
    }

    /// Send request `id` and read until its answer.
    fn request(&mut self, id: u64, method: &str, params: Value) -> Value {
        self.send(&json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}));
        loop {
            let l = self.lines.next().expect("an answer").unwrap();
            let v: Value = serde_json::from_str(&l).unwrap();
            if v["id"] == id {
                return v;
            }
        }
    }

    /// End of input: the session ends, the process pushes its last spans
    /// and exits.
    fn end(mut self) {
        drop(self.stdin.take());
        assert!(self.child.wait().unwrap().success());
    }
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// The one span named `name`.
fn one<'a>(spans: &'a [Span], name: &str) -> &'a Span {
    let found: Vec<&Span> = spans.iter().filter(|s| s.name == name).collect();
    let names: Vec<&str> = spans.iter().map(|s| s.name.as_str()).collect();
    assert_eq!(found.len(), 1, "`{name}` in {names:?}");
    found[0]
}

fn method_attrs(s: &Span, method: &str, id: u64, version: &str) {
    assert_eq!(s.kind, 2, "{}: kind server", s.name);
    assert_eq!(
        attr(s, "mcp.method.name").as_deref(),
        Some(method),
        "{}",
        s.name
    );
    assert_eq!(
        attr(s, "jsonrpc.request.id").as_deref(),
        Some(id.to_string().as_str()),
        "{}",
        s.name
    );
    assert_eq!(attr(s, "network.transport").as_deref(), Some("pipe"));
    assert_eq!(
        attr(s, "mcp.protocol.version").as_deref(),
        Some(version),
        "{}",
        s.name
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn every_request_of_a_session_is_a_server_span_joining_the_clients_trace() {
    let rx = OtlpReceiver::start().await;
    let ws = TestWorkspace::new(&["time_now"], POLICY);
    let endpoint = rx.endpoint();
    let saga_uri = tokio::task::spawn_blocking(move || {
        let mut s = Session::start(&ws, &endpoint);
        let init = s.request(
            1,
            "initialize",
            json!({"protocolVersion": "2025-11-25", "capabilities": {},
                "clientInfo": {"name": "otel-test", "version": "1"},
                "_meta": {"traceparent": traceparent(TRACE_A, SPAN_A), "tracestate": "t=1"}}),
        );
        assert!(init["result"].is_object(), "{init}");
        s.send(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
        assert!(s.request(2, "ping", json!({}))["result"].is_object());
        assert!(s.request(3, "tools/list", json!({}))["result"]["tools"].is_array());
        assert!(s.request(4, "resources/list", json!({}))["result"].is_object());
        let t = s.request(5, "resources/templates/list", json!({}));
        assert!(t["result"]["resourceTemplates"].is_array(), "{t}");
        let c = s.request(
            6,
            "completion/complete",
            json!({"ref": {"type": "ref/resource", "uri": "capsaga://sagas/{id}"},
                "argument": {"name": "id", "value": ""}}),
        );
        assert!(c["result"]["completion"].is_object(), "{c}");
        // No prompts without the conformance fixtures: an error, in a span.
        let p = s.request(7, "prompts/list", json!({}));
        assert_eq!(p["error"]["code"], -32601, "{p}");
        let call = s.request(
            8,
            "tools/call",
            json!({"name": "time_now", "arguments": {},
                "_meta": {"traceparent": traceparent(TRACE_B, SPAN_B)}}),
        );
        assert_eq!(call["result"]["isError"], false, "{call}");
        let saga = call["result"]["structuredContent"]["saga_id"]
            .as_str()
            .expect("the call's saga")
            .to_string();
        // A malformed traceparent is ignored: the call is answered as usual.
        let call = s.request(
            9,
            "tools/call",
            json!({"name": "time_now", "arguments": {},
                "_meta": {"traceparent": "00-not-a-trace-context-zz"}}),
        );
        assert_eq!(call["result"]["isError"], false, "{call}");
        let uri = format!("capsaga://sagas/{saga}");
        let r = s.request(10, "resources/read", json!({"uri": uri}));
        assert!(r["result"]["contents"].is_array(), "{r}");
        let r = s.request(11, "resources/subscribe", json!({"uri": uri}));
        assert!(r["result"].is_object(), "{r}");
        let r = s.request(12, "resources/unsubscribe", json!({"uri": uri}));
        assert!(r["result"].is_object(), "{r}");
        let r = s.request(13, "logging/setLevel", json!({"level": "info"}));
        assert!(r["result"].is_object(), "{r}");
        s.end();
        uri
    })
    .await
    .unwrap();

    wait_until("the session's spans", || {
        rx.spans()
            .iter()
            .filter(|s| s.name == "tools/call time_now")
            .count()
            == 2
            && rx.spans().iter().any(|s| s.name == "logging/setLevel")
    });
    let spans = rx.spans();
    let v = "2025-11-25";
    for (id, method) in [
        (1, "initialize"),
        (2, "ping"),
        (3, "tools/list"),
        (4, "resources/list"),
        (5, "resources/templates/list"),
        (6, "completion/complete"),
        (7, "prompts/list"),
        (10, "resources/read"),
        (11, "resources/subscribe"),
        (12, "resources/unsubscribe"),
        (13, "logging/setLevel"),
    ] {
        method_attrs(one(&spans, method), method, id, v);
    }

    // The initialize request's client span is its parent.
    let init = one(&spans, "initialize");
    assert_eq!(hex(&init.trace_id), TRACE_A);
    assert_eq!(hex(&init.parent_span_id), SPAN_A);
    // A request without trace context starts a trace of its own.
    let ping = one(&spans, "ping");
    assert!(ping.parent_span_id.is_empty());
    assert_ne!(hex(&ping.trace_id), TRACE_A);

    // An error answer: status ERROR, its code as error.type.
    let prompts = one(&spans, "prompts/list");
    assert_eq!(prompts.status.as_ref().map(|s| s.code), Some(2));
    assert_eq!(attr(prompts, "error.type").as_deref(), Some("-32601"));
    assert_eq!(
        attr(prompts, "rpc.response.status_code").as_deref(),
        Some("-32601")
    );

    // The resource served is named; the URI is never in a span name.
    let read = one(&spans, "resources/read");
    assert_eq!(
        attr(read, "mcp.resource.uri").as_deref(),
        Some(saga_uri.as_str())
    );

    // The calls: the one with the client's context is in the client's
    // trace, under its span, and so is the door's execute_tool span under
    // it; the malformed one is a new trace.
    let mut calls: Vec<&Span> = named(&spans, "tools/call");
    calls.sort_by_key(|s| s.start_time_unix_nano);
    assert_eq!(calls.len(), 2);
    for (c, id) in calls.iter().zip([8, 9]) {
        method_attrs(c, "tools/call", id, v);
        assert_eq!(attr(c, "gen_ai.tool.name").as_deref(), Some("time_now"));
        assert_eq!(
            attr(c, "gen_ai.operation.name").as_deref(),
            Some("execute_tool")
        );
    }
    assert_eq!(hex(&calls[0].trace_id), TRACE_B);
    assert_eq!(hex(&calls[0].parent_span_id), SPAN_B);
    let tool = spans
        .iter()
        .find(|s| s.name == "execute_tool time_now" && s.parent_span_id == calls[0].span_id)
        .expect("the call's execute_tool span under its MCP span");
    assert_eq!(hex(&tool.trace_id), TRACE_B);
    assert!(calls[1].parent_span_id.is_empty());
    assert_ne!(hex(&calls[1].trace_id), TRACE_B);
    assert_ne!(hex(&calls[1].trace_id), TRACE_A);
}

/// The request `_meta` of the stateless revision, plus `extra`.
fn stateless_meta(extra: Value) -> Value {
    let mut m = json!({
        "io.modelcontextprotocol/protocolVersion": REV,
        "io.modelcontextprotocol/clientInfo": {"name": "otel-test", "version": "1"},
        "io.modelcontextprotocol/clientCapabilities":
            {"extensions": {"io.modelcontextprotocol/tasks": {}}},
    });
    if let (Some(m), Value::Object(e)) = (m.as_object_mut(), extra) {
        m.extend(e);
    }
    m
}

#[tokio::test(flavor = "multi_thread")]
async fn stateless_requests_are_server_spans_too() {
    let rx = OtlpReceiver::start().await;
    let ws = TestWorkspace::new(&["time_now"], POLICY);
    let endpoint = rx.endpoint();
    tokio::task::spawn_blocking(move || {
        let mut s = Session::start(&ws, &endpoint);
        let d = s.request(
            1,
            "server/discover",
            json!({"_meta": stateless_meta(json!({"traceparent": "garbage"}))}),
        );
        assert!(d["result"]["supportedVersions"].is_array(), "{d}");
        let c = s.request(
            2,
            "tools/call",
            json!({"name": "time_now", "arguments": {},
                "_meta": stateless_meta(json!({"traceparent": traceparent(TRACE_B, SPAN_B)}))}),
        );
        assert_eq!(c["result"]["isError"], false, "{c}");
        let t = s.request(
            3,
            "tasks/get",
            json!({"taskId": "no-such-task", "_meta": stateless_meta(json!({}))}),
        );
        assert!(t["error"].is_object(), "{t}");
        s.end();
    })
    .await
    .unwrap();
    wait_until("the stateless spans", || {
        let spans = rx.spans();
        ["server/discover", "tools/call time_now", "tasks/get"]
            .iter()
            .all(|n| spans.iter().any(|s| s.name == *n))
    });
    let spans = rx.spans();
    method_attrs(one(&spans, "server/discover"), "server/discover", 1, REV);
    method_attrs(one(&spans, "tools/call time_now"), "tools/call", 2, REV);
    method_attrs(one(&spans, "tasks/get"), "tasks/get", 3, REV);
    let discover = one(&spans, "server/discover");
    assert!(discover.parent_span_id.is_empty(), "garbage is ignored");
    let call = one(&spans, "tools/call time_now");
    assert_eq!(hex(&call.trace_id), TRACE_B);
    assert_eq!(hex(&call.parent_span_id), SPAN_B);
    let task = one(&spans, "tasks/get");
    assert_eq!(task.status.as_ref().map(|s| s.code), Some(2));
}

#[tokio::test(flavor = "multi_thread")]
async fn over_stdio_requests_refused_before_the_handler_have_a_failed_span_too() {
    let rx = OtlpReceiver::start().await;
    let ws = TestWorkspace::new(&["time_now"], POLICY);
    let endpoint = rx.endpoint();
    tokio::task::spawn_blocking(move || {
        let mut s = Session::start(&ws, &endpoint);
        let parent = traceparent(TRACE_A, SPAN_A);
        // rmcp refuses a revision it does not know ...
        let mut old = stateless_meta(json!({"traceparent": parent}));
        old["io.modelcontextprotocol/protocolVersion"] = json!("2099-01-01");
        let r = s.request(21, "tools/list", json!({"_meta": old}));
        assert!(r["error"]["code"].is_i64(), "{r}");
        // ... and a stateless request without its client capabilities.
        let mut bare = stateless_meta(json!({}));
        bare.as_object_mut()
            .unwrap()
            .remove("io.modelcontextprotocol/clientCapabilities");
        let r = s.request(
            22,
            "tools/call",
            json!({"name": "time_now", "arguments": {}, "_meta": bare}),
        );
        assert!(r["error"]["code"].is_i64(), "{r}");
        // The transport refuses a line with a duplicate key (rmcp never
        // sees it) and a method no revision has.
        let stdin = s.stdin.as_mut().unwrap();
        writeln!(
            stdin,
            r#"{{"jsonrpc":"2.0","id":23,"id":24,"method":"tools/list"}}"#
        )
        .unwrap();
        stdin.flush().unwrap();
        let r = s.request(
            25,
            "tools/call\u{1}evil",
            json!({"_meta": stateless_meta(json!({}))}),
        );
        assert!(r["error"]["code"].is_i64(), "{r}");
        // Served: a call, and a handler's own error (no second span).
        let c = s.request(
            26,
            "tools/call",
            json!({"name": "time_now", "arguments": {}, "_meta": stateless_meta(json!({}))}),
        );
        assert_eq!(c["result"]["isError"], false, "{c}");
        let t = s.request(
            27,
            "tasks/get",
            json!({"taskId": "no-such-task", "_meta": stateless_meta(json!({}))}),
        );
        assert!(t["error"].is_object(), "{t}");
        s.end();
    })
    .await
    .unwrap();
    wait_until("the refusals' spans", || {
        let s = rx.spans();
        !named(&s, "tools/list").is_empty()
            && named(&s, "tools/call").len() >= 2
            && named(&s, "_OTHER").len() >= 2
            && !named(&s, "tasks/get").is_empty()
    });
    let spans = rx.spans();
    let failed = |s: &Span| attr(s, "error.type").is_some();
    let list = one(&spans, "tools/list");
    method_attrs(list, "tools/list", 21, "2099-01-01");
    assert!(failed(list), "{list:?}");
    assert!(attr(list, "rpc.response.status_code").is_some(), "{list:?}");
    assert_eq!(
        (hex(&list.trace_id), hex(&list.parent_span_id)),
        (TRACE_A.to_string(), SPAN_A.to_string())
    );
    let refused_call = one(&spans, "tools/call");
    method_attrs(refused_call, "tools/call", 22, REV);
    assert!(failed(refused_call), "{refused_call:?}");
    let other = named(&spans, "_OTHER");
    assert_eq!(
        other.len(),
        2,
        "the duplicate key and the unknown method: {other:?}"
    );
    assert!(other.iter().all(|s| failed(s)), "{other:?}");
    assert!(
        !spans.iter().any(|s| s.name.contains("evil")),
        "no span named by a hostile line"
    );
    let served = one(&spans, "tools/call time_now");
    assert!(!failed(served), "{served:?}");
    // The handler's error has its handler's span only.
    let task = one(&spans, "tasks/get");
    method_attrs(task, "tasks/get", 27, REV);
}

/// `capsaga serve` as a child process on 127.0.0.1 (a free port),
/// exporting to `endpoint`, and its MCP URL.
fn serve(ws: &TestWorkspace, endpoint: &str) -> (Child, String) {
    let mut cmd = ws.capsaga(&["--json", "serve", "--listen", "127.0.0.1:0"]);
    exporting(&mut cmd, endpoint);
    let mut child = cmd
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("capsaga serve starts");
    let mut line = String::new();
    BufReader::new(child.stdout.take().expect("stdout"))
        .read_line(&mut line)
        .expect("the listening line");
    let v: Value = serde_json::from_str(&line).unwrap_or_else(|e| panic!("{e}: {line}"));
    let url = format!("http://{}/mcp", v["listening"].as_str().expect("listening"));
    (child, url)
}

#[tokio::test(flavor = "multi_thread")]
async fn streamable_http_requests_carry_their_session_and_transport() {
    let rx = OtlpReceiver::start().await;
    let ws = TestWorkspace::new(&["time_now"], POLICY);
    let endpoint = rx.endpoint();
    let (mut child, url) = serve(&ws, &endpoint);
    let client = connect_as(url, Some(super::TOKEN), YesMan::default())
        .await
        .expect("the client connects");
    client.list_all_tools().await.expect("tools/list");
    call_ok(&client, "time_now", &json!({})).await;
    // The server sends its spans every 500 ms while it runs.
    wait_until("the HTTP session's spans", || {
        let spans = rx.spans();
        ["initialize", "tools/list", "tools/call time_now"]
            .iter()
            .all(|n| spans.iter().any(|s| s.name == *n))
    });
    drop(client);
    let _ = child.kill();
    let _ = child.wait();
    let spans = rx.spans();
    let init = one(&spans, "initialize");
    assert_eq!(attr(init, "network.transport").as_deref(), Some("tcp"));
    let list = one(&spans, "tools/list");
    let call = one(&spans, "tools/call time_now");
    let session = attr(list, "mcp.session.id").expect("the session's id");
    assert!(!session.is_empty());
    for s in [list, call] {
        assert_eq!(s.kind, 2, "{}: kind server", s.name);
        assert_eq!(attr(s, "network.transport").as_deref(), Some("tcp"));
        assert_eq!(attr(s, "mcp.session.id").as_deref(), Some(session.as_str()));
        assert_eq!(
            attr(s, "mcp.protocol.version").as_deref(),
            Some("2025-11-25"),
            "{}",
            s.name
        );
    }
}

/// One stateless `tools/call time_now` over Streamable HTTP with the HTTP
/// headers `headers` and the request `_meta` extras `meta`.
async fn post_call(url: &str, id: u32, headers: &[(&str, String)], meta: Value) {
    let mut r = capsaga_tests::mcp_rig::http()
        .post(url)
        .bearer_auth(super::TOKEN)
        .header("Accept", "application/json, text/event-stream")
        .header("MCP-Protocol-Version", REV)
        .header("Mcp-Method", "tools/call")
        .header("Mcp-Name", "time_now");
    for (k, v) in headers {
        r = r.header(*k, v);
    }
    let r = r
        .json(&json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
            "params": {"name": "time_now", "arguments": {}, "_meta": stateless_meta(meta)}}))
        .send()
        .await
        .unwrap_or_else(|e| panic!("{url}: {e}"));
    let status = r.status();
    let body = r.text().await.unwrap_or_default();
    assert!(status.is_success(), "{status}: {body}");
    assert!(body.contains("\"isError\":false"), "{body}");
}

#[tokio::test(flavor = "multi_thread")]
async fn the_http_traceparent_header_joins_the_clients_trace_unless_meta_has_one() {
    let rx = OtlpReceiver::start().await;
    let ws = TestWorkspace::new(&["time_now"], POLICY);
    let (mut child, url) = serve(&ws, &rx.endpoint());
    // The header alone: the span is a child of the client's span.
    let header = vec![
        ("traceparent", traceparent(TRACE_A, SPAN_A)),
        ("tracestate", "t=1".to_string()),
    ];
    post_call(&url, 1, &header, json!({})).await;
    // Both: the request's own `_meta` context wins.
    post_call(
        &url,
        2,
        &header,
        json!({"traceparent": traceparent(TRACE_B, SPAN_B)}),
    )
    .await;
    // A malformed header is ignored: a trace of its own.
    post_call(
        &url,
        3,
        &[("traceparent", "00-zz-not-a-context".to_string())],
        json!({}),
    )
    .await;
    wait_until("the three calls' spans", || {
        named(&rx.spans(), "tools/call").len() == 3
    });
    let _ = child.kill();
    let _ = child.wait();
    let spans = rx.spans();
    let mut calls: Vec<&Span> = named(&spans, "tools/call");
    calls.sort_by_key(|s| s.start_time_unix_nano);
    assert_eq!(
        (hex(&calls[0].trace_id), hex(&calls[0].parent_span_id)),
        (TRACE_A.to_string(), SPAN_A.to_string())
    );
    assert_eq!(
        (hex(&calls[1].trace_id), hex(&calls[1].parent_span_id)),
        (TRACE_B.to_string(), SPAN_B.to_string())
    );
    assert!(calls[2].parent_span_id.is_empty());
    assert!(![TRACE_A, TRACE_B].contains(&hex(&calls[2].trace_id).as_str()));
}

/// POST `body` as it comes, with `Mcp-Method: method_header`; the HTTP
/// status.
async fn post_raw(url: &str, method_header: &str, body: String) -> u16 {
    capsaga_tests::mcp_rig::http()
        .post(url)
        .bearer_auth(super::TOKEN)
        .header("Accept", "application/json, text/event-stream")
        .header("Content-Type", "application/json")
        .header("MCP-Protocol-Version", REV)
        .header("Mcp-Method", method_header)
        .header("Mcp-Name", "time_now")
        .header("traceparent", traceparent(TRACE_A, SPAN_A))
        .body(body)
        .send()
        .await
        .unwrap_or_else(|e| panic!("{url}: {e}"))
        .status()
        .as_u16()
}

#[tokio::test(flavor = "multi_thread")]
async fn requests_refused_before_the_handler_have_a_failed_span_too() {
    let rx = OtlpReceiver::start().await;
    let ws = TestWorkspace::new(&["time_now"], POLICY);
    let (mut child, url) = serve(&ws, &rx.endpoint());
    let call = |id: u32, method: &str| {
        json!({"jsonrpc": "2.0", "id": id, "method": method,
            "params": {"name": "time_now", "arguments": {}, "_meta": stateless_meta(json!({}))}})
        .to_string()
    };
    // rmcp refuses a header that contradicts the body: 400.
    assert_eq!(
        post_raw(&url, "tools/list", call(11, "tools/call")).await,
        400
    );
    // A method no revision has: its span cannot take the body's name.
    let hostile = call(12, "tools/call\u{1}evil");
    let _ = post_raw(&url, "tools/call", hostile).await;
    // The door refuses a body with a duplicate key (rmcp never sees it).
    let dup = r#"{"jsonrpc":"2.0","id":13,"id":14,"method":"tools/call","params":{}}"#;
    assert_eq!(post_raw(&url, "tools/call", dup.to_string()).await, 400);
    // A served call: one span, its handler's.
    post_call(&url, 15, &[], json!({})).await;
    wait_until("the refusals' spans", || {
        let s = rx.spans();
        named(&s, "tools/call").len() >= 2 && named(&s, "_OTHER").len() >= 2
    });
    let _ = child.kill();
    let _ = child.wait();
    let spans = rx.spans();
    let calls = named(&spans, "tools/call");
    assert_eq!(calls.len(), 2, "one refused, one served: {calls:?}");
    let refused = calls
        .iter()
        .find(|s| attr(s, "jsonrpc.request.id").as_deref() == Some("11"))
        .expect("the refused call's span");
    assert!(attr(refused, "error.type").is_some(), "{refused:?}");
    assert_eq!(attr(refused, "mcp.protocol.version").as_deref(), Some(REV));
    assert_eq!(
        (hex(&refused.trace_id), hex(&refused.parent_span_id)),
        (TRACE_A.to_string(), SPAN_A.to_string())
    );
    let served = calls
        .iter()
        .find(|s| attr(s, "jsonrpc.request.id").as_deref() == Some("15"))
        .expect("the served call's span");
    assert!(attr(served, "error.type").is_none(), "{served:?}");
    let other = named(&spans, "_OTHER");
    assert!(
        other
            .iter()
            .any(|s| attr(s, "error.type").as_deref() == Some("400")),
        "the door's refusal: {other:?}"
    );
    assert!(
        !spans.iter().any(|s| s.name.contains("evil")),
        "no span named by a hostile body"
    );
}
