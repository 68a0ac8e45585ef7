//! The operator's kill switch (issue 24 item 9b) against a real `capsaga
//! serve`: `POST /v1/pause` (an operator token; a client gets 403) stops a
//! side-effecting call while it runs (the `ledger` component spinning
//! after it wrote) and its saga is rolled back, its write compensated;
//! then every call is refused with a typed error the agent understands,
//! turns get 503; read-only mode lets calls without side effects through;
//! `capsaga pause` / `capsaga unpause` from another process act on the same
//! state.

use super::wire2026::serve_with_tokens;
use super::{http, start};
use capsaga_core::fsm::State;
use capsaga_core::principal::Role;
use capsaga_server::HttpOptions;
use capsaga_tests::TestWorkspace;
use capsaga_tests::mcp_rig::{YesMan, call, connect_as};
use serde_json::{Value, json};
use std::time::{Duration, Instant};

const ALICE: &str = "alice-operator-secret-0123456789";
const BOB: &str = "bob-client-secret-0123456789abcd";

const POLICY: &str = r#"
[tools.ledger]
grants = ["fs:write:~/ws/**"]
limits = { deadline_ms = 120000, fuel = 10000000000000 }
[tools.time_now]
"#;

fn structured(r: &rmcp::model::CallToolResult) -> Value {
    serde_json::to_value(r).unwrap()["structuredContent"].clone()
}

async fn until(what: &str, mut f: impl FnMut() -> bool) {
    let t = Instant::now();
    while !f() {
        assert!(t.elapsed() < Duration::from_secs(120), "never: {what}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pause_stops_a_running_call_rolls_it_back_and_refuses_new_work() {
    let ws = TestWorkspace::new(&["ledger", "time_now"], POLICY);
    let (host, srv) = serve_with_tokens(
        &ws,
        &[("alice", Role::Operator, ALICE), ("bob", Role::Client, BOB)],
    )
    .await;
    let bob = std::sync::Arc::new(
        connect_as(srv.url("/mcp"), Some(BOB), YesMan::default())
            .await
            .unwrap(),
    );
    let ledger = ws.ws().join("ledger.txt");
    let args = json!({"path": ws.ws_path("ledger.txt"), "entry": "paid", "after": "spin"});
    let b = bob.clone();
    let a = args.clone();
    let running = tokio::spawn(async move { call(&b, "ledger", &a).await });
    // The call wrote its entry and now spins.
    until("the ledger entry is written", || {
        std::fs::read_to_string(&ledger).is_ok_and(|t| t.contains("paid"))
    })
    .await;
    let c = http();
    let r = c
        .post(srv.url("/v1/pause"))
        .bearer_auth(BOB)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 403, "a client cannot pause");
    let t = Instant::now();
    let r = c
        .post(srv.url("/v1/pause"))
        .bearer_auth(ALICE)
        .json(&json!({"note": "incident 42"}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 200);
    let sw: Value = r.json().await.unwrap();
    assert_eq!(sw["mode"], "paused");
    assert_eq!(sw["by"], "token:alice (operator)");
    let stopped = tokio::time::timeout(Duration::from_secs(60), running)
        .await
        .expect("the running call is stopped")
        .unwrap();
    eprintln!(
        "pause: running call stopped {} ms after POST /v1/pause",
        t.elapsed().as_millis()
    );
    assert_eq!(stopped.is_error, Some(true), "{stopped:?}");
    let s = structured(&stopped);
    assert!(
        s["error"]["message"].as_str().unwrap().contains("paused"),
        "{s}"
    );
    // Rolled back: the entry it wrote is compensated, the saga ended so.
    let text = std::fs::read_to_string(&ledger).unwrap_or_default();
    assert!(!text.contains("paid"), "compensated: {text:?}");
    assert_eq!(s["error"]["saga_state"], "FailedRolledBack", "{s}");
    let saga_id = s["error"]["saga_id"].as_str().unwrap().to_string();
    let row = host.store.saga(&saga_id).await.unwrap().unwrap();
    assert_eq!(row.state, State::FailedRolledBack);
    // Every new call is refused with a typed error, even a read-only one.
    let r = call(&bob, "time_now", &json!({})).await;
    assert_eq!(r.is_error, Some(true));
    let e = &structured(&r)["error"];
    assert_eq!(e["kind"], "permission-denied", "{e}");
    assert!(
        e["message"].as_str().unwrap().contains("incident 42"),
        "{e}"
    );
    assert!(
        e["llm_hint"].as_str().unwrap().contains("Do not retry"),
        "{e}"
    );
    // No turn starts.
    let r = c
        .post(srv.url("/v1/turns"))
        .bearer_auth(BOB)
        .json(&json!({"task": "anything"}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 503);
    let body: Value = r.json().await.unwrap();
    assert_eq!(body["detail"]["code"], "paused", "{body}");
    let h: Value = c
        .get(srv.url("/healthz"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(h["switch"], "paused", "{h}");
    // Read-only: reads run, writes are refused.
    let r = c
        .post(srv.url("/v1/pause"))
        .bearer_auth(ALICE)
        .json(&json!({"mode": "read_only"}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 200);
    let r = call(&bob, "time_now", &json!({})).await;
    assert_ne!(r.is_error, Some(true), "{r:?}");
    let w = call(
        &bob,
        "ledger",
        &json!({"path": ws.ws_path("ledger.txt"), "entry": "more"}),
    )
    .await;
    assert_eq!(w.is_error, Some(true));
    let e = &structured(&w)["error"];
    assert!(e["message"].as_str().unwrap().contains("read-only"), "{e}");
    // Resumed: writes run again.
    let r = c
        .post(srv.url("/v1/resume"))
        .bearer_auth(ALICE)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 200);
    let w = call(
        &bob,
        "ledger",
        &json!({"path": ws.ws_path("ledger.txt"), "entry": "more"}),
    )
    .await;
    assert_ne!(w.is_error, Some(true), "{w:?}");
    // The switch from another process (the real CLI) on the same state.
    let out = ws
        .capsaga(&["pause", "--note", "from the shell"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let r = call(&bob, "time_now", &json!({})).await;
    assert_eq!(r.is_error, Some(true), "paused from another process");
    let out = ws
        .capsaga(&["--json", "pause", "--status"])
        .output()
        .unwrap();
    let st: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(st["mode"], "paused");
    assert!(st["by"].as_str().unwrap().starts_with("cli:"), "{st}");
    let out = ws.capsaga(&["unpause"]).output().unwrap();
    assert!(out.status.success());
    let r = call(&bob, "time_now", &json!({})).await;
    assert_ne!(r.is_error, Some(true), "{r:?}");
    // Every change of the switch is in the hash-chained log.
    let log = host.store.log(Some("host:switch")).await.unwrap();
    assert_eq!(log.len(), 5, "{log:?}");
    let audit = ws.capsaga(&["audit", "verify"]).output().unwrap();
    assert!(
        audit.status.success(),
        "{}",
        String::from_utf8_lossy(&audit.stdout)
    );
    drop(srv);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pause_stops_a_turn_waiting_for_its_model() {
    use capsaga_tests::llm_server::{LlmServer, Reply};
    // The model takes its time (two minutes); the operator pauses meanwhile.
    let llm = LlmServer::start(vec![
        Reply::ok(json!({"choices": [{"index": 0, "message": {"role": "assistant", "content": "late"}, "finish_reason": "stop"}]}))
            .delayed(120_000),
    ])
    .await;
    let ws = TestWorkspace::new(
        &["time_now"],
        &format!(
            "[tools.time_now]\n[providers.local]\nkind = \"openai\"\nbase_url = \"{}\"\nmodel = \"m\"\nkeyless = true\n",
            llm.url("/v1")
        ),
    );
    let host = ws.host().await;
    let srv = start(
        host.clone(),
        HttpOptions::new("127.0.0.1:0".parse().unwrap()),
    )
    .await;
    let c = http();
    let url = srv.url("/v1/turns");
    let c2 = c.clone();
    let turn = tokio::spawn(async move {
        let r = c2
            .post(url)
            .json(&json!({"task": "what time is it"}))
            .send()
            .await
            .unwrap();
        (r.status().as_u16(), r.json::<Value>().await.unwrap())
    });
    until("the model was asked", || !llm.requests().is_empty()).await;
    let r = c
        .post(srv.url("/v1/pause"))
        .json(&json!({"note": "stop the turn"}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 200, "the loopback operator may pause");
    let (status, body) = tokio::time::timeout(Duration::from_secs(60), turn)
        .await
        .expect("the turn ends without its model's answer")
        .unwrap();
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["outcome"], "user_aborted", "{body}");
    assert!(
        body["final_response"].as_str().unwrap().contains("paused"),
        "{body}"
    );
    assert_eq!(body["saga_state"], "FailedRolledBack", "{body}");
}
