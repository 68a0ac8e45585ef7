//! Server trust (issue 24 items 1-2), from the attacker's side, against a
//! real `capsaga serve` on 127.0.0.1: an MCP client answering "accept" to
//! anything cannot approve its own calls; only an operator token decides,
//! and the decision is recorded under that token; a tool the policy opts
//! into client confirmation is confirmed by elicitation; a client token
//! gets 403 on the operator's routes and sees only its own sagas and
//! traces; a revoked token is 401 from the next request on; the state
//! never holds a token in clear.

use super::{http, start};
use capsaga_core::principal::Role;
use capsaga_server::HttpOptions;
use capsaga_server::auth::digest;
use capsaga_tests::TestWorkspace;
use capsaga_tests::mcp_rig::{YesMan, call, connect_as};
use serde_json::{Value, json};
use std::sync::atomic::Ordering;

const ALICE: &str = "alice-operator-secret-0123456789";
const BOB: &str = "bob-client-secret-0123456789abcd";
const EVE: &str = "eve-client-secret-0123456789abcd";

const POLICY: &str = r#"
[tools.fs_edit]
grants = ["fs:write:~/ws/**"]
approval = "always"
[tools.fs_write]
grants = ["fs:write:~/ws/**"]
approval = "always"
[tools.time_now]
"#;

fn ws(extra: &str) -> TestWorkspace {
    TestWorkspace::new(
        &["fs_edit", "fs_write", "time_now"],
        &format!("{POLICY}\n{extra}"),
    )
}

/// Named tokens created in the workspace's store: alice (operator), bob
/// and eve (clients).
async fn tokens(host: &capsaga_door::host::Host) {
    for (name, role, secret) in [
        ("alice", Role::Operator, ALICE),
        ("bob", Role::Client, BOB),
        ("eve", Role::Client, EVE),
    ] {
        host.store
            .create_token(name, role, &digest(secret.as_bytes()), "test")
            .await
            .unwrap();
    }
}

async fn json_of(r: reqwest::Response) -> (u16, Value) {
    let status = r.status().as_u16();
    let text = r.text().await.unwrap();
    (
        status,
        serde_json::from_str(&text).unwrap_or(Value::String(text)),
    )
}

fn structured(r: &rmcp::model::CallToolResult) -> Value {
    serde_json::to_value(r).unwrap()["structuredContent"].clone()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_accepting_every_elicitation_cannot_approve_its_own_call() {
    let ws = ws("");
    std::fs::write(ws.ws().join("e.txt"), "hello world").unwrap();
    let host = ws.host().await;
    tokens(&host).await;
    let srv = start(
        host.clone(),
        HttpOptions::new("127.0.0.1:0".parse().unwrap()),
    )
    .await;
    let yes = YesMan::default();
    let bob = connect_as(srv.url("/mcp"), Some(BOB), yes.clone())
        .await
        .unwrap();
    let args = json!({"path": ws.ws_path("e.txt"), "old_string": "world", "new_string": "there"});
    let first = call(&bob, "fs_edit", &args).await;
    assert_eq!(first.is_error, Some(true), "{first:?}");
    let err = &structured(&first)["error"];
    assert_eq!(err["approval_status"], "pending", "{err}");
    let id = err["approval_id"].as_str().unwrap().to_string();
    assert_eq!(yes.asked.load(Ordering::SeqCst), 0, "never asked to decide");
    assert_eq!(
        std::fs::read_to_string(ws.ws().join("e.txt")).unwrap(),
        "hello world",
        "nothing ran"
    );
    // The client was told, not asked (the log message is handled by the
    // client's own task: it may land after the call's answer).
    capsaga_tests::wait_until_async("a log message naming the pending approval", || {
        let told = yes
            .told
            .lock()
            .unwrap()
            .iter()
            .any(|t| t["approval_id"] == id.as_str());
        async move { told }
    })
    .await;
    // Bob's token cannot decide it over REST either, nor reach any other
    // operator route.
    let c = http();
    for (method, path) in [
        ("GET", "/v1/approvals".to_string()),
        ("POST", format!("/v1/approvals/{id}/approve")),
        ("POST", format!("/v1/approvals/{id}/deny")),
        ("GET", "/v1/pause".to_string()),
        ("POST", "/v1/pause".to_string()),
        ("POST", "/v1/resume".to_string()),
        ("GET", "/v1/keys".to_string()),
        ("PUT", "/v1/keys/org".to_string()),
        ("DELETE", "/v1/keys/org".to_string()),
    ] {
        let m: reqwest::Method = method.parse().unwrap();
        let (status, body) = json_of(
            c.request(m, srv.url(&path))
                .bearer_auth(BOB)
                .json(&json!({"key": "sk-0123456789abcdef"}))
                .send()
                .await
                .unwrap(),
        )
        .await;
        assert_eq!(status, 403, "{method} {path}: {body}");
        assert_eq!(body["detail"]["code"], "forbidden", "{body}");
    }
    let still = host.store.approval(&id).await.unwrap();
    assert_eq!(still.status.as_str(), "pending");
    // Calling again (as a client would after "accepting") changes nothing.
    let again = call(&bob, "fs_edit", &args).await;
    assert_eq!(again.is_error, Some(true));
    // The operator approves over REST: recorded under alice's token.
    let (status, decided) = json_of(
        c.post(srv.url(&format!("/v1/approvals/{id}/approve")))
            .bearer_auth(ALICE)
            .json(&json!({"by": "bob", "note": "checked"}))
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(status, 200, "{decided}");
    assert_eq!(
        decided["approval"]["decided_by"], "token:alice (operator)",
        "the authenticated principal, not the body's `by`: {decided}"
    );
    let ran = call(&bob, "fs_edit", &args).await;
    assert_ne!(ran.is_error, Some(true), "{ran:?}");
    assert_eq!(
        std::fs::read_to_string(ws.ws().join("e.txt")).unwrap(),
        "hello there"
    );
    assert_eq!(yes.asked.load(Ordering::SeqCst), 0);
    bob.cancel().await.ok();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tool_opted_into_client_confirmation_is_confirmed_by_elicitation() {
    let ws = ws("[approvals]\nclient_confirm = [\"fs_write\"]\n");
    let host = ws.host().await;
    tokens(&host).await;
    let srv = start(
        host.clone(),
        HttpOptions::new("127.0.0.1:0".parse().unwrap()),
    )
    .await;
    let yes = YesMan::default();
    let bob = connect_as(srv.url("/mcp"), Some(BOB), yes.clone())
        .await
        .unwrap();
    let r = call(
        &bob,
        "fs_write",
        &json!({"path": ws.ws_path("c.txt"), "content": "ok"}),
    )
    .await;
    assert_ne!(r.is_error, Some(true), "{r:?}");
    assert_eq!(yes.asked.load(Ordering::SeqCst), 1);
    assert_eq!(
        std::fs::read_to_string(ws.ws().join("c.txt")).unwrap(),
        "ok"
    );
    let all = host.store.approvals(true).await.unwrap();
    assert_eq!(all.len(), 1);
    assert_eq!(
        all[0].decided_by.as_deref(),
        Some("token:bob (client)"),
        "the session's principal as a client, not the client's self-chosen name"
    );
    // fs_edit is not listed: still the operator's.
    std::fs::write(ws.ws().join("e.txt"), "a").unwrap();
    let e = call(
        &bob,
        "fs_edit",
        &json!({"path": ws.ws_path("e.txt"), "old_string": "a", "new_string": "b"}),
    )
    .await;
    assert_eq!(e.is_error, Some(true));
    assert_eq!(yes.asked.load(Ordering::SeqCst), 1, "not asked for fs_edit");
    bob.cancel().await.ok();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn client_confirmation_of_code_run_irreversible_or_high_risk_tools_is_refused_at_load() {
    for (extra, why) in [
        (
            "[tools.code_run]\n[approvals]\nclient_confirm = [\"code_run\"]\n",
            "never be confirmed",
        ),
        (
            "[tools.http_request]\ngrants = [\"net:https:example.com\"]\nirreversible = true\n[approvals]\nclient_confirm = [\"http_request\"]\n",
            "irreversible",
        ),
        (
            "[approvals]\nclient_confirm = [\"nope\"]\n",
            "no [tools.nope]",
        ),
    ] {
        let ws = ws(extra);
        let e = capsaga_door::host::Host::open(&ws.config())
            .await
            .err()
            .unwrap_or_else(|| panic!("{extra} loaded"));
        assert!(e.to_string().contains(why), "{e}");
    }
    // High risk is known from the tool's meta (http_request says so), at
    // load.
    let ws = TestWorkspace::new(
        &["http_request"],
        "[tools.http_request]\ngrants = [\"net:https:example.com\"]\n[approvals]\nclient_confirm = [\"http_request\"]\n",
    );
    let e = capsaga_door::host::Host::open(&ws.config())
        .await
        .expect_err("a high-risk tool listed for client confirmation is refused");
    assert!(e.to_string().contains("high risk"), "{e}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_sees_only_its_own_sagas_and_traces() {
    let ws = ws("");
    let script = ws.root.join("s.json");
    std::fs::write(
        &script,
        r#"{"model":"scripted","turns":[{"text":"Time.","tool_calls":[{"name":"time_now","arguments":{}}]},{"text":"Done."}]}"#,
    )
    .unwrap();
    let host = ws.host().await;
    tokens(&host).await;
    let mut o = HttpOptions::new("127.0.0.1:0".parse().unwrap());
    o.script = Some(script);
    let srv = start(host.clone(), o).await;
    let c = http();
    let turn = |token: &'static str| {
        let c = c.clone();
        let url = srv.url("/v1/turns");
        async move {
            json_of(
                c.post(url)
                    .bearer_auth(token)
                    .json(&json!({"task": "what time is it"}))
                    .send()
                    .await
                    .unwrap(),
            )
            .await
        }
    };
    let (s, bobs) = turn(BOB).await;
    assert_eq!(s, 200, "{bobs}");
    let (s, eves) = turn(EVE).await;
    assert_eq!(s, 200, "{eves}");
    let bob_saga = bobs["saga_id"].as_str().unwrap().to_string();
    let bob_trace = bobs["trace_id"].as_str().unwrap().to_string();
    // An MCP session of Eve's too.
    let eve_mcp = connect_as(srv.url("/mcp"), Some(EVE), YesMan::default())
        .await
        .unwrap();
    call(&eve_mcp, "time_now", &json!({})).await;
    let get = |token: &'static str, path: String| {
        let c = c.clone();
        let url = srv.url(&path);
        async move { json_of(c.get(url).bearer_auth(token).send().await.unwrap()).await }
    };
    // Listing: Eve sees her two sagas, never Bob's; the operator sees all.
    let (_, list) = get(EVE, "/v1/sagas".into()).await;
    let ids: Vec<&str> = list["sagas"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["saga_id"].as_str().unwrap())
        .collect();
    assert_eq!(ids.len(), 2, "{list}");
    assert!(!ids.contains(&bob_saga.as_str()));
    assert!(
        list["sagas"]
            .as_array()
            .unwrap()
            .iter()
            .all(|s| s["principal"] == "token:eve")
    );
    let (_, all) = get(ALICE, "/v1/sagas".into()).await;
    assert_eq!(all["sagas"].as_array().unwrap().len(), 3, "{all}");
    // Bob's saga and trace are not found for Eve (not 403: no oracle).
    for path in [
        format!("/v1/sagas/{bob_saga}"),
        format!("/v1/traces/{bob_trace}"),
    ] {
        let (s, body) = get(EVE, path.clone()).await;
        assert_eq!(s, 404, "{path}: {body}");
        let (s, _) = get(BOB, path.clone()).await;
        assert_eq!(s, 200, "{path}");
        let (s, _) = get(ALICE, path.clone()).await;
        assert_eq!(s, 200, "{path}");
    }
    // MCP resources: the same rule.
    let listed = eve_mcp.list_resources(None).await.unwrap();
    let uris: Vec<String> = listed.resources.iter().map(|r| r.uri.to_string()).collect();
    assert!(!uris.iter().any(|u| u.contains(&bob_saga)), "{uris:?}");
    assert_eq!(uris.len(), 2, "{uris:?}");
    let read = eve_mcp
        .read_resource(rmcp::model::ReadResourceRequestParams::new(format!(
            "capsaga://sagas/{bob_saga}"
        )))
        .await;
    assert!(read.is_err(), "Eve reads Bob's saga: {read:?}");
    let read = eve_mcp
        .read_resource(rmcp::model::ReadResourceRequestParams::new(format!(
            "capsaga://traces/{bob_trace}"
        )))
        .await;
    assert!(read.is_err(), "Eve reads Bob's trace: {read:?}");
    eve_mcp.cancel().await.ok();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_is_bound_to_its_principal_and_a_revoked_token_is_refused() {
    let ws = ws("");
    let host = ws.host().await;
    tokens(&host).await;
    let srv = start(
        host.clone(),
        HttpOptions::new("127.0.0.1:0".parse().unwrap()),
    )
    .await;
    let c = http();
    let post = |token: &str, sid: Option<&str>, body: Value| {
        let mut r = c
            .post(srv.url("/mcp"))
            .header("Accept", "application/json, text/event-stream")
            .bearer_auth(token)
            .json(&body);
        if let Some(s) = sid {
            r = r.header("Mcp-Session-Id", s);
        }
        r.send()
    };
    let init = json!({"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}});
    let list = json!({"jsonrpc":"2.0","id":2,"method":"tools/list"});
    let opened = post(BOB, None, init.clone()).await.unwrap();
    assert_eq!(opened.status().as_u16(), 200);
    let sid = opened.headers()["mcp-session-id"]
        .to_str()
        .unwrap()
        .to_string();
    // Eve's valid token on Bob's session: no such session.
    let r = post(EVE, Some(&sid), list.clone()).await.unwrap();
    assert_eq!(r.status().as_u16(), 404);
    // No token at all now that tokens exist: 401 everywhere.
    let r = c.get(srv.url("/v1/sagas")).send().await.unwrap();
    assert_eq!(r.status().as_u16(), 401);
    // Revoked with the real CLI, in another process, on the same state.
    let out = ws.capsaga(&["tokens", "revoke", "bob"]).output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let r = post(BOB, Some(&sid), list.clone()).await.unwrap();
    assert_eq!(
        r.status().as_u16(),
        401,
        "revoked: refused at the next request"
    );
    let r = c
        .get(srv.url("/v1/sagas"))
        .bearer_auth(BOB)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 401);
    // Eve is unaffected.
    let r = post(EVE, None, init).await.unwrap();
    assert_eq!(r.status().as_u16(), 200);
}

#[test]
fn tokens_from_the_cli_are_printed_once_and_stored_hashed() {
    let ws = ws("");
    let out = ws
        .capsaga(&["--json", "tokens", "create", "ci-bot", "--role", "client"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    let secret = v["secret"].as_str().unwrap().to_string();
    assert!(secret.starts_with("csg_") && secret.len() >= 40, "{secret}");
    assert_eq!(v["token"]["role"], "client");
    // Listing never shows it; creating the name again is refused.
    let list = ws.capsaga(&["--json", "tokens", "list"]).output().unwrap();
    let text = String::from_utf8_lossy(&list.stdout);
    assert!(text.contains("ci-bot") && !text.contains(&secret), "{text}");
    let again = ws
        .capsaga(&["tokens", "create", "ci-bot", "--role", "operator"])
        .output()
        .unwrap();
    assert!(!again.status.success());
    for bad in [
        &["tokens", "create", "a b", "--role", "client"][..],
        &["tokens", "create", "x", "--role", "admin"][..],
    ] {
        let o = ws.capsaga(bad).output().unwrap();
        assert_eq!(o.status.code(), Some(2), "{bad:?}");
    }
    // The state holds the SHA-256 of the secret, never the secret.
    let mut db = Vec::new();
    for f in ["state.db", "state.db-wal"] {
        if let Ok(b) = std::fs::read(ws.root.join(".capsaga").join(f)) {
            db.extend(b);
        }
    }
    assert!(!db.windows(secret.len()).any(|w| w == secret.as_bytes()));
    let hex = hex::encode(digest(secret.as_bytes()));
    assert!(db.windows(hex.len()).any(|w| w == hex.as_bytes()));
    // Created and revoked tokens are in the hash-chained log, which still
    // verifies.
    let out = ws
        .capsaga(&["tokens", "revoke", "ci-bot"])
        .output()
        .unwrap();
    assert!(out.status.success());
    let audit = ws.capsaga(&["audit", "verify"]).output().unwrap();
    assert!(
        audit.status.success(),
        "{}",
        String::from_utf8_lossy(&audit.stdout)
    );
}
