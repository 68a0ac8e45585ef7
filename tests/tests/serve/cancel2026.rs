//! A stateless (MCP 2026-07-28) request whose client goes away while its
//! tool runs (issue 26), against a real `capsaga serve` over raw HTTP: the
//! call is stopped where it stands and its saga settled from its log at
//! once, not left owned by the host with a step in doubt. The `ledger`
//! test component appends its entry, then spins (the policy's deadline is
//! ten minutes: only the cancellation can stop it within the test).
//! Also [`Dispatcher::settle_interrupted`] alone: a request that logged
//! nothing leaves its handle's saga as it was, released.

use super::tasks::post;
use super::wire2026::serve_clients;
use capsaga_core::fsm::State;
use capsaga_door::dispatch::{Args, Call, Dispatcher, Settled};
use capsaga_door::host::Host;
use capsaga_store::{Scope, StepStatus};
use capsaga_tests::TestWorkspace;
use serde_json::{Value, json};
use std::sync::Arc;
use std::time::{Duration, Instant};

const POLICY: &str = r#"
[tools.ledger]
grants = ["fs:write:~/ws/**"]
limits = { deadline_ms = 600000, fuel = 100000000000000 }
"#;

fn meta(handle: Option<&str>) -> Value {
    let mut m = json!({
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {},
    });
    if let Some(h) = handle {
        m["dev.capsaga/saga"] = json!(h);
    }
    m
}

fn call(args: Value, handle: Option<&str>) -> Value {
    json!({"name": "ledger", "arguments": args, "_meta": meta(handle)})
}

/// Wait (at most a minute) until the ledger file holds `entry`.
async fn until_written(ledger: &std::path::Path, entry: &str) {
    let t = Instant::now();
    while !std::fs::read_to_string(ledger).is_ok_and(|s| s.contains(entry)) {
        assert!(t.elapsed() < Duration::from_secs(60), "never wrote {entry}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Wait (at most a minute: the tool would spin for ten) until saga `id`
/// has ended; its final state.
async fn until_ended(host: &Arc<Host>, id: &str) -> State {
    let t = Instant::now();
    loop {
        let row = host.store.saga(id).await.unwrap().unwrap();
        if row.state.is_terminal() {
            return row.state;
        }
        assert!(
            t.elapsed() < Duration::from_secs(60),
            "saga {id} still {} a minute after its client went away",
            row.state
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

async fn no_step_committed(host: &Arc<Host>, id: &str) {
    let steps = host.store.steps(id).await.unwrap();
    assert!(!steps.is_empty());
    assert!(
        steps.iter().all(|s| s.status == StepStatus::Compensated),
        "every step compensated: {steps:?}"
    );
}

/// A server for the client `bob` over a workspace with the ledger: the
/// workspace, the host, the server (kept running while held), its `/mcp`
/// URL and the ledger file.
async fn server() -> (
    TestWorkspace,
    Arc<Host>,
    super::Running,
    String,
    std::path::PathBuf,
) {
    let ws = TestWorkspace::new(&["ledger"], POLICY);
    let (host, srv) = serve_clients(&ws, &["bob"]).await;
    let url = srv.url("/mcp");
    let ledger = ws.ws().join("ledger.txt");
    (ws, host, srv, url, ledger)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_dropped_mid_call_rolls_back_its_own_saga() {
    let (ws, host, _srv, url, ledger) = server().await;
    let args = json!({"path": ws.ws_path("ledger.txt"), "entry": "paid", "after": "spin"});
    let request =
        tokio::spawn(async move { post(&url, "bob", "tools/call", call(args, None)).await });
    until_written(&ledger, "paid").await;
    let open = host.store.unfinished_sagas().await.unwrap();
    assert_eq!(open.len(), 1, "{open:?}");
    let id = open[0].saga_id.clone();

    // The client goes away (its connection closes).
    request.abort();
    assert_eq!(until_ended(&host, &id).await, State::FailedRolledBack);
    let text = std::fs::read_to_string(&ledger).unwrap_or_default();
    assert!(!text.contains("paid"), "compensated: {text:?}");
    no_step_committed(&host, &id).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_handle_request_dropped_mid_call_rolls_back_the_saga_it_continued() {
    let (ws, host, _srv, url, ledger) = server().await;
    let path = ws.ws_path("ledger.txt");
    let first = post(
        &url,
        "bob",
        "tools/call",
        call(json!({"path": path, "entry": "one"}), Some("new")),
    )
    .await;
    let handle = first["result"]["_meta"]["dev.capsaga/saga"]
        .as_str()
        .unwrap_or_else(|| panic!("a handle: {first}"))
        .to_string();

    let (u, h) = (url.clone(), handle.clone());
    let args = json!({"path": path, "entry": "two", "after": "spin"});
    let request =
        tokio::spawn(async move { post(&u, "bob", "tools/call", call(args, Some(&h))).await });
    until_written(&ledger, "two").await;
    request.abort();
    // The call was aborted: by the rule of a failed step, the saga rolls
    // back, the step committed by the earlier request with it.
    assert_eq!(until_ended(&host, &handle).await, State::FailedRolledBack);
    let text = std::fs::read_to_string(&ledger).unwrap_or_default();
    assert!(!text.contains("one") && !text.contains("two"), "{text:?}");
    no_step_committed(&host, &handle).await;
    let again = post(
        &url,
        "bob",
        "tools/call",
        call(json!({"path": path, "entry": "three"}), Some(&handle)),
    )
    .await;
    let msg = again["error"]["message"].as_str().unwrap_or_default();
    assert!(msg.contains("has ended"), "{again}");
}

#[tokio::test(flavor = "multi_thread")]
async fn settling_decides_by_what_the_interrupted_request_logged() {
    let ws = TestWorkspace::new(&["ledger"], POLICY);
    let host = ws.host().await;
    let door = Dispatcher::new(host.clone());
    let ledger = ws.ws().join("ledger.txt");
    let path = ws.ws_path("ledger.txt");
    let mut ids = Vec::new();
    for entry in ["kept", "undone"] {
        let mut saga = door.start(Scope::Handle, "settle", None).await.unwrap();
        let args = json!({"path": path, "entry": entry});
        door.submit(&mut saga, Call::new("ledger", Args::Value(&args)))
            .await
            .unwrap();
        ids.push(saga.id().to_string());
        // The request's future is gone: the saga stays this host's.
        drop(saga);
    }
    // A request that began after step 0 and logged nothing: the handle's
    // saga is released as it was.
    let kept = door.settle_interrupted(&ids[0], 1, true).await.unwrap();
    assert_eq!(kept, Settled::Released);
    let row = host.store.saga(&ids[0]).await.unwrap().unwrap();
    assert_eq!(row.state, State::Acting);
    assert!(row.owner.is_none() && row.released_at.is_some(), "{row:?}");
    let steps = host.store.steps(&ids[0]).await.unwrap();
    assert_eq!(steps[0].status, StepStatus::Commit);
    // Released: not this host's to settle again.
    let again = door.settle_interrupted(&ids[0], 1, true).await.unwrap();
    assert_eq!(again, Settled::LeftAlone);

    // A request that logged step 0: its call was aborted, the saga rolls
    // back.
    let undone = door.settle_interrupted(&ids[1], 0, true).await.unwrap();
    assert_eq!(undone, Settled::RolledBack(State::FailedRolledBack));
    let text = std::fs::read_to_string(&ledger).unwrap_or_default();
    assert!(
        text.contains("kept") && !text.contains("undone"),
        "{text:?}"
    );
}
