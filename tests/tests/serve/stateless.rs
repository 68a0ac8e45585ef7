//! MCP 2026-07-28 without a session (issue 26), over raw HTTP against a
//! real `capsaga serve`: a request carrying its revision in `_meta` is
//! served with no `initialize` and no `Mcp-Session-Id`; without a saga
//! handle its call is a saga of its own, ended when it returns; with one
//! (`_meta["dev.capsaga/saga"]`) calls continue one saga that
//! `capsaga_rollback` undoes. From the attacker's side: a forged handle,
//! another principal's handle, a malformed one and a finished saga's are
//! refused, and the refused principal's saga is left as it was; headers
//! that contradict the body are refused with 400.

use super::wire2026::{answer, secret, serve_clients, serve_with_tokens};
use capsaga_core::fsm::State;
use capsaga_core::principal::Role;
use capsaga_tests::TestWorkspace;
use serde_json::{Value, json};

const POLICY: &str = "[tools.time_now]\n[tools.fs_write]\ngrants = [\"fs:write:~/ws/**\"]\n";
const REV: &str = "2026-07-28";

/// The request `_meta` the revision requires, plus `extra`.
fn meta(extra: Value) -> Value {
    let mut m = json!({
        "io.modelcontextprotocol/protocolVersion": REV,
        "io.modelcontextprotocol/clientInfo": {"name": "stateless-test", "version": "1"},
        "io.modelcontextprotocol/clientCapabilities": {},
    });
    if let (Some(m), Value::Object(e)) = (m.as_object_mut(), extra) {
        m.extend(e);
    }
    m
}

struct Client {
    http: reqwest::Client,
    url: String,
    who: String,
}

impl Client {
    /// POST one request; `header_rev` is the `MCP-Protocol-Version`
    /// header. Returns the HTTP status, whether a session id came back,
    /// and the JSON-RPC answer.
    async fn post_with(&self, header_rev: &str, method: &str, params: Value) -> (u16, bool, Value) {
        let mut req = self
            .http
            .post(&self.url)
            .header("Accept", "application/json, text/event-stream")
            .header("MCP-Protocol-Version", header_rev)
            .header("Mcp-Method", method)
            .bearer_auth(secret(&self.who));
        if let Some(n) = params.get("name").and_then(Value::as_str) {
            req = req.header("Mcp-Name", n);
        } else if let Some(u) = params.get("uri").and_then(Value::as_str) {
            req = req.header("Mcp-Name", u);
        }
        let r = req
            .json(&json!({"jsonrpc": "2.0", "id": 7, "method": method, "params": params}))
            .send()
            .await
            .unwrap();
        let status = r.status().as_u16();
        let session = r.headers().contains_key("mcp-session-id");
        (status, session, answer(&r.text().await.unwrap()))
    }

    async fn post(&self, method: &str, params: Value) -> (u16, bool, Value) {
        self.post_with(REV, method, params).await
    }

    /// `tools/call` of `name` with `args` and the saga handle `handle`.
    async fn call(&self, name: &str, args: Value, handle: Option<&str>) -> Value {
        let extra = handle.map_or(json!({}), |h| json!({"dev.capsaga/saga": h}));
        let (status, session, v) = self
            .post(
                "tools/call",
                json!({"name": name, "arguments": args, "_meta": meta(extra)}),
            )
            .await;
        assert!(!session, "a stateless request gets no session: {v}");
        assert!(status == 200 || status == 400, "{status}: {v}");
        v
    }
}

fn saga_of(v: &Value) -> String {
    v["result"]["structuredContent"]["saga_id"]
        .as_str()
        .unwrap_or_else(|| panic!("no saga id in {v}"))
        .to_string()
}

fn handle_of(v: &Value) -> Option<String> {
    v["result"]["_meta"]["dev.capsaga/saga"]
        .as_str()
        .map(str::to_owned)
}

async fn server() -> (
    TestWorkspace,
    std::sync::Arc<capsaga_door::host::Host>,
    super::Running,
) {
    let ws = TestWorkspace::new(&["time_now", "fs_write"], POLICY);
    let (host, srv) = serve_clients(&ws, &["bob", "mallory"]).await;
    (ws, host, srv)
}

fn client(srv: &super::Running, who: &str) -> Client {
    Client {
        http: super::http(),
        url: srv.url("/mcp"),
        who: who.into(),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_without_a_session_is_a_saga_of_its_own() {
    let (_ws, host, srv) = server().await;
    let bob = client(&srv, "bob");
    // Discovery instead of a handshake: both revisions are offered.
    let (status, session, d) = bob
        .post("server/discover", json!({"_meta": meta(json!({}))}))
        .await;
    assert_eq!(status, 200, "{d}");
    assert!(!session);
    let versions = d["result"]["supportedVersions"].to_string();
    assert!(
        versions.contains(REV) && versions.contains("2025-11-25"),
        "{d}"
    );

    let v = bob.call("time_now", json!({}), None).await;
    assert_eq!(v["result"]["resultType"], "complete", "{v}");
    assert_eq!(v["result"]["isError"], false, "{v}");
    assert!(handle_of(&v).is_none(), "no handle without asking: {v}");
    let id = saga_of(&v);
    let row = host.store.saga(&id).await.unwrap().unwrap();
    assert_eq!(row.state, State::Done, "ended when the request returned");
    assert_eq!(row.principal.as_deref(), Some("token:bob"));

    // Lists carry the revision's caching hints.
    let (_, _, l) = bob
        .post("tools/list", json!({"_meta": meta(json!({}))}))
        .await;
    assert!(l["result"]["ttlMs"].is_number(), "{l}");
    assert!(l["result"]["cacheScope"].is_string(), "{l}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_handle_continues_one_saga_and_rollback_with_it_undoes_every_step() {
    let (ws, host, srv) = server().await;
    let bob = client(&srv, "bob");
    let a = bob
        .call(
            "fs_write",
            json!({"path": ws.ws_path("a.txt"), "content": "a\n"}),
            Some("new"),
        )
        .await;
    let h = handle_of(&a).unwrap_or_else(|| panic!("a new saga returns its handle: {a}"));
    assert_eq!(h, saga_of(&a));
    let b = bob
        .call(
            "fs_write",
            json!({"path": ws.ws_path("b.txt"), "content": "b\n"}),
            Some(&h),
        )
        .await;
    assert_eq!(saga_of(&b), h, "the same saga: {b}");
    assert!(ws.ws().join("a.txt").exists() && ws.ws().join("b.txt").exists());
    let open = host.store.saga(&h).await.unwrap().unwrap();
    assert!(!open.state.is_terminal(), "still open: {}", open.state);

    let r = bob.call("capsaga_rollback", json!({"saga": h}), None).await;
    assert_eq!(r["result"]["isError"], false, "{r}");
    assert!(!ws.ws().join("a.txt").exists(), "both steps compensated");
    assert!(!ws.ws().join("b.txt").exists(), "both steps compensated");

    // A finished saga's handle is refused.
    let again = bob.call("time_now", json!({}), Some(&h)).await;
    assert_eq!(again["error"]["code"], -32602, "{again}");
    assert!(
        again["error"]["message"]
            .as_str()
            .unwrap()
            .contains("ended"),
        "{again}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn forged_foreign_and_malformed_handles_are_refused_alike() {
    let (ws, host, srv) = server().await;
    let bob = client(&srv, "bob");
    let mallory = client(&srv, "mallory");
    let a = bob
        .call(
            "fs_write",
            json!({"path": ws.ws_path("a.txt"), "content": "a\n"}),
            Some("new"),
        )
        .await;
    let h = handle_of(&a).unwrap();

    let forged = "0b0e6c36-6f2c-4c55-9a65-3f1d2a8e9b10".to_string();
    let long = "f".repeat(10_000);
    let mut refusals = Vec::new();
    for (who, handle) in [
        (&mallory, json!(h)),
        (&bob, json!(forged)),
        (&bob, json!("../../../etc/passwd")),
        (&bob, json!(long)),
        (&bob, json!(42)),
        (&bob, json!({"saga_id": h})),
        (&mallory, json!(h.to_uppercase())),
    ] {
        let extra = json!({"dev.capsaga/saga": handle});
        let (status, _, v) = who
            .post(
                "tools/call",
                json!({"name": "fs_write", "arguments": {"path": ws.ws_path("evil.txt"), "content": "x"},
                    "_meta": meta(extra)}),
            )
            .await;
        assert_eq!(v["error"]["code"], -32602, "{handle}: {status} {v}");
        refusals.push(v["error"]["message"].as_str().unwrap().to_string());
    }
    assert!(
        refusals.windows(2).all(|w| w[0] == w[1]),
        "nothing tells a foreign handle from a forged one: {refusals:?}"
    );
    // Mallory cannot end bob's saga through the argument either.
    let r = mallory
        .call("capsaga_rollback", json!({"saga": h}), None)
        .await;
    assert_eq!(r["error"]["code"], -32602, "{r}");
    let r = mallory
        .call("capsaga_commit", json!({"saga": h}), None)
        .await;
    assert_eq!(r["error"]["code"], -32602, "{r}");
    assert!(!ws.ws().join("evil.txt").exists(), "no refused call ran");
    assert!(ws.ws().join("a.txt").exists(), "bob's step stands");
    let row = host.store.saga(&h).await.unwrap().unwrap();
    assert!(
        !row.state.is_terminal(),
        "bob's saga is untouched: {}",
        row.state
    );
    // Bob still commits it.
    let c = bob.call("capsaga_commit", json!({}), Some(&h)).await;
    assert_eq!(c["result"]["isError"], false, "{c}");
    let row = host.store.saga(&h).await.unwrap().unwrap();
    assert_eq!(row.state, State::Done);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn headers_that_contradict_the_body_get_400() {
    let (_ws, _host, srv) = server().await;
    let bob = client(&srv, "bob");
    // The header names another revision than the body's `_meta`.
    let (status, _, v) = bob
        .post_with(
            "2025-11-25",
            "tools/call",
            json!({"name": "time_now", "arguments": {}, "_meta": meta(json!({}))}),
        )
        .await;
    assert_eq!(status, 400, "{v}");
    assert_eq!(v["error"]["code"], -32020, "{v}");
    // `_meta` without the required client capabilities.
    let (status, _, v) = bob
        .post(
            "tools/call",
            json!({"name": "time_now", "arguments": {},
                "_meta": {"io.modelcontextprotocol/protocolVersion": REV}}),
        )
        .await;
    assert_eq!(status, 400, "{v}");
    assert_eq!(v["error"]["code"], -32602, "{v}");
    // An `Mcp-Name` header naming another tool than the body.
    let r = bob
        .http
        .post(&bob.url)
        .header("Accept", "application/json, text/event-stream")
        .header("MCP-Protocol-Version", REV)
        .header("Mcp-Method", "tools/call")
        .header("Mcp-Name", "fs_write")
        .bearer_auth(secret("bob"))
        .json(&json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
            "params": {"name": "time_now", "arguments": {}, "_meta": meta(json!({}))}}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 400);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_call_that_needs_an_approval_is_pending_and_continues_with_its_handle() {
    let policy = "[tools.time_now]\n[tools.fs_write]\ngrants = [\"fs:write:~/ws/**\"]\napproval = \"always\"\n";
    let ws = TestWorkspace::new(&["time_now", "fs_write"], policy);
    let (bob_s, alice_s) = (secret("bob"), secret("alice"));
    let (host, srv) = serve_with_tokens(
        &ws,
        &[
            ("bob", Role::Client, &bob_s),
            ("alice", Role::Operator, &alice_s),
        ],
    )
    .await;
    let bob = client(&srv, "bob");
    let args = json!({"path": ws.ws_path("p.txt"), "content": "p\n"});
    // A client declaring elicitation is still only told: the tool is not
    // one the policy lets a client confirm.
    let extra =
        json!({"io.modelcontextprotocol/clientCapabilities": {"elicitation": {"form": {}}}});
    let (_, _, first) = bob
        .post(
            "tools/call",
            json!({"name": "fs_write", "arguments": args, "_meta": meta(extra)}),
        )
        .await;
    assert_eq!(first["result"]["isError"], true, "{first}");
    let err = &first["result"]["structuredContent"]["error"];
    assert_eq!(err["approval_status"], "pending", "{first}");
    let id = err["approval_id"].as_str().unwrap().to_string();
    let h =
        handle_of(&first).unwrap_or_else(|| panic!("a parked saga returns its handle: {first}"));
    assert!(!ws.ws().join("p.txt").exists(), "nothing ran");
    assert_eq!(
        host.store.saga(&h).await.unwrap().unwrap().state,
        State::AwaitingApproval
    );
    // Calling again before an operator decided changes nothing.
    let again = bob.call("fs_write", args.clone(), Some(&h)).await;
    assert_eq!(again["result"]["isError"], true, "{again}");
    assert!(!ws.ws().join("p.txt").exists());
    // The operator approves; the client's next request with the handle runs
    // the call in the same saga.
    let r = super::http()
        .post(srv.url(&format!("/v1/approvals/{id}/approve")))
        .bearer_auth(secret("alice"))
        .json(&json!({}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 200, "{}", r.text().await.unwrap());
    let ran = bob.call("fs_write", args, Some(&h)).await;
    assert_eq!(ran["result"]["isError"], false, "{ran}");
    assert_eq!(saga_of(&ran), h);
    assert!(ws.ws().join("p.txt").exists());
    let c = bob.call("capsaga_commit", json!({"saga": h}), None).await;
    assert_eq!(c["result"]["isError"], false, "{c}");
    assert_eq!(
        host.store.saga(&h).await.unwrap().unwrap().state,
        State::Done
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_confirms_an_opted_in_tool_through_an_input_required_result() {
    let policy = "[tools.time_now]\n[tools.fs_write]\ngrants = [\"fs:write:~/ws/**\"]\napproval = \"always\"\n[approvals]\nclient_confirm = [\"fs_write\"]\n";
    let ws = TestWorkspace::new(&["time_now", "fs_write"], policy);
    let (host, srv) = serve_clients(&ws, &["bob", "eve"]).await;
    let (bob, eve) = (client(&srv, "bob"), client(&srv, "eve"));
    let caps = json!({"io.modelcontextprotocol/clientCapabilities": {"elicitation": {"form": {}}}});
    let ask = |c: &'static str| json!({"path": ws.ws_path(c), "content": "c\n"});
    let params = |args: &Value, extra: Value| {
        let mut p = json!({"name": "fs_write", "arguments": args, "_meta": meta(caps.clone())});
        if let (Some(p), Value::Object(e)) = (p.as_object_mut(), extra) {
            p.extend(e);
        }
        p
    };
    let yes = json!({"capsaga_approval": {"action": "accept", "content": {"approve": true}}});

    // Round 1: the client is asked, nothing runs.
    let args = ask("c.txt");
    let (_, _, r1) = bob.post("tools/call", params(&args, json!({}))).await;
    assert_eq!(r1["result"]["resultType"], "input_required", "{r1}");
    let q = &r1["result"]["inputRequests"]["capsaga_approval"];
    assert_eq!(q["method"], "elicitation/create", "{r1}");
    let state = r1["result"]["requestState"].as_str().unwrap().to_string();
    let h = handle_of(&r1).unwrap();
    assert!(!ws.ws().join("c.txt").exists());

    // Another principal replaying bob's state, or a tampered state: refused.
    let (_, _, e) = eve
        .post(
            "tools/call",
            params(&args, json!({"inputResponses": yes, "requestState": state})),
        )
        .await;
    assert_eq!(e["error"]["code"], -32602, "{e}");
    let mut tampered = state.clone();
    tampered.replace_range(10..11, if &state[10..11] == "A" { "B" } else { "A" });
    let (_, _, t) = bob
        .post(
            "tools/call",
            params(
                &args,
                json!({"inputResponses": yes, "requestState": tampered}),
            ),
        )
        .await;
    assert_eq!(t["error"]["code"], -32602, "{t}");
    assert!(!ws.ws().join("c.txt").exists(), "no refused retry ran");

    // Round 2: bob accepts; the call runs in the same saga, his decision
    // recorded under his token, as a client.
    let (_, _, r2) = bob
        .post(
            "tools/call",
            params(&args, json!({"inputResponses": yes, "requestState": state})),
        )
        .await;
    assert_eq!(r2["result"]["isError"], false, "{r2}");
    assert_eq!(saga_of(&r2), h);
    assert!(ws.ws().join("c.txt").exists());
    let approvals = host.store.approvals(true).await.unwrap();
    let mine = approvals.iter().find(|a| a.saga_id == h).unwrap();
    assert_eq!(mine.decided_by.as_deref(), Some("token:bob (client)"));
    // The same state again: the approval was claimed, nothing runs twice.
    let (_, _, again) = bob
        .post(
            "tools/call",
            params(&args, json!({"inputResponses": yes, "requestState": state})),
        )
        .await;
    assert!(
        again.get("error").is_some() || again["result"]["isError"] == true,
        "{again}"
    );

    // Declining rolls the saga back.
    let args = ask("d.txt");
    let (_, _, d1) = bob.post("tools/call", params(&args, json!({}))).await;
    let state = d1["result"]["requestState"].as_str().unwrap().to_string();
    let dh = handle_of(&d1).unwrap();
    let no = json!({"capsaga_approval": {"action": "decline"}});
    let (_, _, d2) = bob
        .post(
            "tools/call",
            params(&args, json!({"inputResponses": no, "requestState": state})),
        )
        .await;
    assert_eq!(d2["result"]["isError"], true, "{d2}");
    assert!(!ws.ws().join("d.txt").exists());
    let row = host.store.saga(&dh).await.unwrap().unwrap();
    assert!(row.state.is_terminal(), "{}", row.state);
}

#[test]
fn stdio_serves_the_stateless_revision_too() {
    use std::io::{BufRead, Write};
    let ws = TestWorkspace::new(&["time_now", "fs_write"], POLICY);
    let mut child = ws
        .capsaga(&["mcp"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let mut lines = std::io::BufReader::new(child.stdout.take().unwrap()).lines();
    let m = meta(json!({}));
    for (id, method, params) in [
        (1, "server/discover", json!({"_meta": m})),
        (
            2,
            "tools/call",
            json!({"name": "time_now", "arguments": {}, "_meta": m}),
        ),
        (
            3,
            "tools/call",
            json!({"name": "time_now", "arguments": {},
            "_meta": meta(json!({"dev.capsaga/saga": "0b0e6c36-6f2c-4c55-9a65-3f1d2a8e9b10"}))}),
        ),
    ] {
        let line = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
        writeln!(stdin, "{line}").unwrap();
        stdin.flush().unwrap();
        let v: Value = loop {
            let l = lines.next().expect("an answer").unwrap();
            let v: Value = serde_json::from_str(&l).unwrap();
            if v["id"] == id {
                break v;
            }
        };
        match id {
            1 => assert!(
                v["result"]["supportedVersions"].to_string().contains(REV),
                "{v}"
            ),
            2 => {
                assert_eq!(v["result"]["resultType"], "complete", "{v}");
                assert_eq!(v["result"]["isError"], false, "{v}");
            }
            _ => assert_eq!(
                v["error"]["code"], -32602,
                "a forged handle over stdio too: {v}"
            ),
        }
    }
    drop(stdin);
    assert!(child.wait().unwrap().success());
}
