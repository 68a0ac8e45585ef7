//! Tasks of the MCP tasks extension (issue 48) across three `capsaga
//! serve` hosts on one PostgreSQL database: a task started on one host is
//! read (status and result) on every host; a cancel asked on another host
//! than the one running it stops the call there, compensates its write
//! and ends the task `cancelled` once; a task whose host is killed is
//! ended by the others once its saga was recovered, never left `working`;
//! another principal reaches none of them from any host, and its
//! guesses are answered like an unknown id.

use super::rig::{Rig, eventually, lines, runtime};
use capsaga_core::principal::Role;
use capsaga_server::auth::digest;
use serde_json::{Value, json};
use std::time::Duration;

const POLICY: &str = r#"store_lease_ms = 1500
[tools.ledger]
grants = ["fs:write:~/ws/**"]
limits = { deadline_ms = 120000, fuel = 10000000000000 }
host_rollback = false
[tools.fs_write]
grants = ["fs:write:~/ws/**"]
limits = { deadline_ms = 120000 }
approval = "always"
[approvals]
client_confirm = ["fs_write"]
"#;

fn secret(who: &str) -> String {
    format!("{who}-secret-0123456789abcdef")
}

/// A 2026-07-28 request's `_meta`, the tasks extension and elicitation
/// declared.
fn meta() -> Value {
    json!({
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {
            "extensions": {"io.modelcontextprotocol/tasks": {}},
            "elicitation": {"form": {}},
        },
    })
}

/// One JSON-RPC request of `who` to `url`; its answer.
async fn post(url: &str, who: &str, method: &str, mut params: Value) -> Value {
    params["_meta"] = meta();
    let name = params
        .get("name")
        .or_else(|| params.get("taskId"))
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_string();
    let r = capsaga_tests::mcp_rig::http()
        .post(url)
        .header("Mcp-Name", name)
        .header("Accept", "application/json, text/event-stream")
        .header("MCP-Protocol-Version", "2026-07-28")
        .header("Mcp-Method", method)
        .bearer_auth(secret(who))
        .json(&json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params}))
        .send()
        .await
        .unwrap();
    let body = r.text().await.unwrap();
    serde_json::from_str(&body).unwrap_or_else(|_| {
        body.lines()
            .filter_map(|l| l.strip_prefix("data:"))
            .filter_map(|d| serde_json::from_str::<Value>(d.trim()).ok())
            .rfind(|v| v.get("id").is_some())
            .unwrap_or_else(|| panic!("no JSON-RPC answer in {body}"))
    })
}

async fn get(url: &str, who: &str, id: &str) -> Value {
    post(url, who, "tasks/get", json!({"taskId": id})).await
}

/// `tasks/get` at `url` until its status is not `working` (a minute at
/// most).
async fn ended(url: &str, id: &str) -> Value {
    let t0 = std::time::Instant::now();
    loop {
        let got = get(url, "bob", id).await;
        if got["result"]["status"] != "working" {
            return got;
        }
        assert!(t0.elapsed() < Duration::from_secs(60), "never ended: {got}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[test]
fn tasks_are_served_cancelled_and_ended_by_any_host_for_their_principal_only() {
    let Some(mut rig) =
        Rig::with_tools("multi_host::tasks", 3, &["ledger", "fs_write"], POLICY, &[])
    else {
        return;
    };
    let rt = runtime();
    rt.block_on(async {
        let store = rig.store().await;
        for who in ["bob", "eve"] {
            store
                .create_token(who, Role::Client, &digest(secret(who).as_bytes()), "test")
                .await
                .unwrap();
        }
        let urls: Vec<String> = (0..3).map(|i| rig.mcp(i)).collect();
        let call = |file: &str, entry: &str, spin: bool| {
            let mut args = json!({"path": rig.ws.ws_path(file), "entry": entry});
            if spin {
                args["after"] = json!("spin");
            }
            json!({"name": "ledger", "arguments": args})
        };

        // Started on host 0, read on every host: one status, one result.
        let created = post(&urls[0], "bob", "tools/call", call("a.txt", "paid", false)).await;
        assert_eq!(created["result"]["resultType"], "task", "{created}");
        let done = created["result"]["taskId"].as_str().unwrap().to_string();
        let first = ended(&urls[1], &done).await;
        assert_eq!(first["result"]["status"], "completed", "{first}");
        for url in &urls {
            let got = get(url, "bob", &done).await;
            assert_eq!(got["result"], first["result"], "{url}");
        }

        // Eve, on every host: bob's task is not found, exactly as an id
        // nobody has; neither her cancel nor her answers touch it.
        let guessed = "0d5e8f1a-2b3c-4d5e-8f90-a1b2c3d4e5f6";
        let unknown = get(&urls[2], "eve", guessed).await;
        assert_eq!(unknown["error"]["code"], -32602, "{unknown}");
        for url in &urls {
            for (m, extra) in [
                ("tasks/get", json!({})),
                ("tasks/cancel", json!({})),
                (
                    "tasks/update",
                    json!({"inputResponses": {"x": {"action": "accept"}}}),
                ),
            ] {
                let mut params = extra;
                params["taskId"] = json!(done);
                let e = post(url, "eve", m, params).await;
                assert_eq!(e["error"], unknown["error"], "{m} on {url}: {e}");
            }
        }

        // Cancel on host 1 a task running on host 0: host 0 stops the call,
        // its write is compensated, the task ends cancelled.
        let (b_path, b_journal) = rig.ledger("b.txt");
        let created = post(&urls[0], "bob", "tools/call", call("b.txt", "spun", true)).await;
        let running = created["result"]["taskId"].as_str().unwrap().to_string();
        eventually(Duration::from_secs(60), "the task wrote", || {
            let p = b_path.clone();
            async move {
                lines(std::path::Path::new(&p))
                    .iter()
                    .any(|l| l.starts_with("spun"))
            }
        })
        .await;
        let c = post(&urls[1], "bob", "tasks/cancel", json!({"taskId": running})).await;
        assert!(c.get("error").is_none(), "{c}");
        let out = ended(&urls[2], &running).await;
        assert_eq!(out["result"]["status"], "cancelled", "{out}");
        let c = post(&urls[2], "bob", "tasks/cancel", json!({"taskId": running})).await;
        assert!(c.get("error").is_none(), "{c}");
        eventually(Duration::from_secs(30), "the write compensated", || {
            let p = b_path.clone();
            async move {
                !lines(std::path::Path::new(&p))
                    .iter()
                    .any(|l| l.starts_with("spun"))
            }
        })
        .await;
        let journal = lines(&b_journal);
        let count = |w: &str| journal.iter().filter(|l| l.starts_with(w)).count();
        assert_eq!(
            (count("execute"), count("compensate")),
            (1, 1),
            "{journal:?}"
        );
        for url in &urls {
            let got = get(url, "bob", &running).await;
            assert_eq!(got["result"]["status"], "cancelled", "{url}: {got}");
        }
        let saga = saga_of_task(&store, &running).await;
        let row = store.saga(&saga).await.unwrap().unwrap();
        assert!(
            row.state.is_terminal() && row.state.as_str() != "Done",
            "{}",
            row.state
        );

        // A task started on host 2 asks its client to confirm; the question
        // is read on host 0, answered on host 1, and the call runs on host 2.
        let target = rig.ws.ws().join("confirmed.txt");
        let created = post(
            &urls[2],
            "bob",
            "tools/call",
            json!({"name": "fs_write", "arguments": {"path": rig.ws.ws_path("confirmed.txt"), "content": "yes\n"}}),
        )
        .await;
        let asking = created["result"]["taskId"].as_str().unwrap().to_string();
        let waiting = ended(&urls[0], &asking).await;
        assert_eq!(waiting["result"]["status"], "input_required", "{waiting}");
        assert!(!target.exists());
        let yes = json!({"capsaga_approval": {"action": "accept", "content": {"approve": true}}});
        let ack = post(&urls[1], "bob", "tasks/update", json!({"taskId": asking, "inputResponses": yes})).await;
        assert!(ack.get("error").is_none(), "{ack}");
        let mut out = get(&urls[0], "bob", &asking).await;
        while out["result"]["status"] != "completed" {
            assert!(!out["result"]["status"].as_str().is_some_and(|s| s == "failed" || s == "cancelled"), "{out}");
            tokio::time::sleep(Duration::from_millis(50)).await;
            out = get(&urls[0], "bob", &asking).await;
        }
        assert_eq!(out["result"]["result"]["isError"], false, "{out}");
        assert_eq!(std::fs::read_to_string(&target).unwrap(), "yes\n");

        // Host 0 dies while a task runs: host 2 ends it once its saga was
        // recovered (rolled back, the write compensated).
        let (c_path, _) = rig.ledger("c.txt");
        let created = post(&urls[0], "bob", "tools/call", call("c.txt", "lost", true)).await;
        let orphan = created["result"]["taskId"].as_str().unwrap().to_string();
        eventually(Duration::from_secs(60), "the task wrote", || {
            let p = c_path.clone();
            async move {
                lines(std::path::Path::new(&p))
                    .iter()
                    .any(|l| l.starts_with("lost"))
            }
        })
        .await;
        rig.kill(0);
        let out = ended(&urls[2], &orphan).await;
        assert_eq!(out["result"]["status"], "failed", "{out}");
        assert!(
            !lines(std::path::Path::new(&c_path))
                .iter()
                .any(|l| l.starts_with("lost")),
            "compensated"
        );
        let got = get(&urls[1], "bob", &done).await;
        assert_eq!(
            got["result"], first["result"],
            "the ended task outlives its host"
        );
        let report = capsaga_store::audit::verify(&*store, None).await.unwrap();
        assert!(report.ok(), "{report:?}");
    });
}

/// The saga of task `id` (its row, read past the protocol).
async fn saga_of_task(store: &std::sync::Arc<dyn capsaga_store::Store>, id: &str) -> String {
    store
        .task(id)
        .await
        .unwrap()
        .and_then(|t| t.saga_id)
        .expect("the task's saga")
}
