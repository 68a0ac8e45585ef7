//! The tasks extension of MCP 2026-07-28 (issue 26) against a real
//! `capsaga serve`, over raw HTTP: a long call of a client that declared
//! the extension becomes a task; the call runs on after its request
//! returned; `tasks/cancel` aborts it, the step fails and its write is
//! compensated; another principal cannot read or cancel the task, and a
//! client that did not declare the extension cannot use the methods.

use super::wire2026::{answer, secret, serve_clients};
use capsaga_tests::TestWorkspace;
use serde_json::{Value, json};
use std::time::{Duration, Instant};

const POLICY: &str = r#"
[tools.ledger]
grants = ["fs:write:~/ws/**"]
limits = { deadline_ms = 120000, fuel = 10000000000000 }
[tools.time_now]
"#;

pub(super) fn meta(tasks: bool) -> Value {
    let caps = if tasks {
        json!({"extensions": {"io.modelcontextprotocol/tasks": {}}})
    } else {
        json!({})
    };
    json!({
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": caps,
    })
}

pub(super) async fn post(url: &str, who: &str, method: &str, params: Value) -> Value {
    let name = params
        .get("name")
        .or_else(|| params.get("taskId"))
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_string();
    let r = super::http()
        .post(url)
        .header("Mcp-Name", name)
        .header("Accept", "application/json, text/event-stream")
        .header("MCP-Protocol-Version", "2026-07-28")
        .header("Mcp-Method", method)
        .bearer_auth(secret(who))
        .json(&json!({"jsonrpc": "2.0", "id": 3, "method": method, "params": params}))
        .send()
        .await
        .unwrap();
    answer(&r.text().await.unwrap())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cancelled_task_fails_its_step_and_compensates_its_write() {
    let ws = TestWorkspace::new(&["ledger", "time_now"], POLICY);
    let (host, srv) = serve_clients(&ws, &["bob", "eve"]).await;
    let url = srv.url("/mcp");
    let ledger = ws.ws().join("ledger.txt");
    let args = json!({"path": ws.ws_path("ledger.txt"), "entry": "paid", "after": "spin"});

    // The call answers at once with a task; the write happens after the
    // request returned (the task is not the request).
    let created = post(
        &url,
        "bob",
        "tools/call",
        json!({"name": "ledger", "arguments": args, "_meta": meta(true)}),
    )
    .await;
    assert_eq!(created["result"]["resultType"], "task", "{created}");
    let id = created["result"]["taskId"].as_str().unwrap().to_string();
    let t = Instant::now();
    while !std::fs::read_to_string(&ledger).is_ok_and(|s| s.contains("paid")) {
        assert!(
            t.elapsed() < Duration::from_secs(120),
            "the task never wrote"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let got = post(
        &url,
        "bob",
        "tasks/get",
        json!({"taskId": id, "_meta": meta(true)}),
    )
    .await;
    assert_eq!(got["result"]["status"], "working", "{got}");
    let saga = got["result"]["statusMessage"]
        .as_str()
        .unwrap()
        .trim_start_matches("saga ")
        .to_string();

    // Another principal: as if the task did not exist.
    for m in ["tasks/get", "tasks/cancel"] {
        let e = post(&url, "eve", m, json!({"taskId": id, "_meta": meta(true)})).await;
        assert_eq!(e["error"]["code"], -32602, "{m}: {e}");
    }
    // A client that did not declare the extension cannot use the methods.
    let e = post(
        &url,
        "bob",
        "tasks/get",
        json!({"taskId": id, "_meta": meta(false)}),
    )
    .await;
    assert_eq!(e["error"]["code"], -32021, "{e}");

    // Cancel: acknowledged; the step fails and the write is compensated.
    let c = post(
        &url,
        "bob",
        "tasks/cancel",
        json!({"taskId": id, "_meta": meta(true)}),
    )
    .await;
    assert!(c.get("error").is_none(), "{c}");
    let got = post(
        &url,
        "bob",
        "tasks/get",
        json!({"taskId": id, "_meta": meta(true)}),
    )
    .await;
    assert_eq!(got["result"]["status"], "cancelled", "{got}");
    let text = std::fs::read_to_string(&ledger).unwrap_or_default();
    assert!(!text.contains("paid"), "compensated: {text:?}");
    let row = host.store.saga(&saga).await.unwrap().unwrap();
    assert!(row.state.is_terminal(), "{}", row.state);
    let steps = host.store.steps(&saga).await.unwrap();
    assert!(
        steps.iter().all(|s| s.status.as_str() != "commit"),
        "no step left committed: {steps:?}"
    );
    // Cancelling again is acknowledged and changes nothing.
    let c = post(
        &url,
        "bob",
        "tasks/cancel",
        json!({"taskId": id, "_meta": meta(true)}),
    )
    .await;
    assert!(c.get("error").is_none(), "{c}");

    // A short call stays synchronous even for a client of the extension.
    let r = post(
        &url,
        "bob",
        "tools/call",
        json!({"name": "time_now", "arguments": {}, "_meta": meta(true)}),
    )
    .await;
    assert_eq!(r["result"]["resultType"], "complete", "{r}");
}

/// A client that declared the tasks extension and elicitation.
fn meta_eliciting() -> Value {
    json!({
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {
            "extensions": {"io.modelcontextprotocol/tasks": {}},
            "elicitation": {"form": {}},
        },
    })
}

/// `tasks/get` of `id` for `who` at `url`, with `meta`, until `done` holds
/// of the whole answer (two minutes at most); the answer.
pub(super) async fn poll_task(
    url: &str,
    who: &str,
    id: &str,
    meta: Value,
    done: impl Fn(&Value) -> bool,
) -> Value {
    let t = Instant::now();
    loop {
        let got = post(
            url,
            who,
            "tasks/get",
            json!({"taskId": id, "_meta": meta.clone()}),
        )
        .await;
        if done(&got) {
            return got;
        }
        assert!(t.elapsed() < Duration::from_secs(120), "{got}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// `tasks/get` of `id` for `who` until `done` holds of its result; the
/// result.
async fn poll(url: &str, who: &str, id: &str, done: impl Fn(&Value) -> bool) -> Value {
    poll_task(url, who, id, meta_eliciting(), |g| done(&g["result"])).await["result"].clone()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_task_waits_for_the_clients_confirmation_and_tasks_update_resumes_it() {
    let policy = r#"
[tools.ledger]
grants = ["fs:write:~/ws/**"]
limits = { deadline_ms = 120000 }
approval = "always"
[approvals]
client_confirm = ["ledger"]
"#;
    let ws = TestWorkspace::new(&["ledger"], policy);
    let (host, srv) = serve_clients(&ws, &["bob", "eve"]).await;
    let url = srv.url("/mcp");
    let ledger = ws.ws().join("ledger.txt");
    let call = |entry: &str| {
        json!({"name": "ledger", "_meta": meta_eliciting(),
            "arguments": {"path": ws.ws_path("ledger.txt"), "entry": entry}})
    };
    let update = |id: &str, responses: Value| json!({"taskId": id, "inputResponses": responses, "_meta": meta_eliciting()});
    let yes = json!({"capsaga_approval": {"action": "accept", "content": {"approve": true}}});

    // The task parks on the question; nothing is written.
    let created = post(&url, "bob", "tools/call", call("paid")).await;
    assert_eq!(created["result"]["resultType"], "task", "{created}");
    let id = created["result"]["taskId"].as_str().unwrap().to_string();
    let waiting = poll(&url, "bob", &id, |r| r["status"] == "input_required").await;
    let q = &waiting["inputRequests"]["capsaga_approval"];
    assert_eq!(q["method"], "elicitation/create", "{waiting}");
    assert!(!ledger.exists());

    // Another principal's answer, an answer that is not an object, an
    // answer to another key: none resumes the task.
    let e = post(&url, "eve", "tasks/update", update(&id, yes.clone())).await;
    assert_eq!(e["error"]["code"], -32602, "{e}");
    let e = post(
        &url,
        "bob",
        "tasks/update",
        update(&id, json!({"capsaga_approval": 7})),
    )
    .await;
    assert_eq!(e["error"]["code"], -32602, "{e}");
    let other = post(
        &url,
        "bob",
        "tasks/update",
        update(&id, json!({"something_else": {"action": "accept"}})),
    )
    .await;
    assert!(other.get("error").is_none(), "{other}");
    let still = poll(&url, "bob", &id, |_| true).await;
    assert_eq!(still["status"], "input_required", "{still}");
    assert!(!ledger.exists());

    // Bob accepts: acknowledged, the call runs in the task's saga, his
    // decision recorded under his token, as a client.
    let ack = post(&url, "bob", "tasks/update", update(&id, yes.clone())).await;
    assert!(ack.get("error").is_none(), "{ack}");
    assert!(ack["result"].get("taskId").is_none(), "an empty ack: {ack}");
    let done = poll(&url, "bob", &id, |r| r["status"] == "completed").await;
    assert_eq!(done["result"]["isError"], false, "{done}");
    assert!(std::fs::read_to_string(&ledger).unwrap().contains("paid"));
    let saga = done["result"]["structuredContent"]["saga_id"]
        .as_str()
        .unwrap()
        .to_string();
    let approvals = host.store.approvals(true).await.unwrap();
    let mine = approvals.iter().find(|a| a.saga_id == saga).unwrap();
    assert_eq!(mine.decided_by.as_deref(), Some("token:bob (client)"));
    // An ended task takes no more answers.
    let e = post(&url, "bob", "tasks/update", update(&id, yes.clone())).await;
    assert_eq!(e["error"]["code"], -32602, "{e}");

    // Declined: the task completes as a tool error, the saga rolled back,
    // nothing more written.
    let created = post(&url, "bob", "tools/call", call("refunded")).await;
    let id = created["result"]["taskId"].as_str().unwrap().to_string();
    poll(&url, "bob", &id, |r| r["status"] == "input_required").await;
    let no = json!({"capsaga_approval": {"action": "decline"}});
    let ack = post(&url, "bob", "tasks/update", update(&id, no)).await;
    assert!(ack.get("error").is_none(), "{ack}");
    let done = poll(&url, "bob", &id, |r| r["status"] == "completed").await;
    assert_eq!(done["result"]["isError"], true, "{done}");
    assert!(
        !std::fs::read_to_string(&ledger)
            .unwrap()
            .contains("refunded")
    );
    let saga = done["result"]["structuredContent"]["saga_id"]
        .as_str()
        .unwrap()
        .to_string();
    let row = host.store.saga(&saga).await.unwrap().unwrap();
    assert!(row.state.is_terminal(), "{}", row.state);
}
