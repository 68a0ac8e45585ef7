//! Who a saga and an approval belong to, across real `capsaga serve` hosts
//! on one PostgreSQL (issue 45 items 1 and 2):
//!
//! - an operator's approval of one principal's call, once the saga that
//!   asked has ended, is claimed by that principal's identical call on any
//!   host and by no other principal's (another client token, an operator
//!   token, the command line on the same database), also when two of them
//!   race from two hosts;
//! - a session's saga is never continued through a saga handle by another
//!   host, neither while the session's host lives nor once it died with the
//!   saga parked for an approval (then recovery rolls it back: nothing but
//!   the session could continue it).

use super::rig::{LEASE_MS, Rig, eventually, runtime};
use super::wire::{call, meta};
use capsaga_core::approval::ApprovalStatus;
use capsaga_core::fsm::State;
use capsaga_core::principal::Role;
use capsaga_server::auth::digest;
use capsaga_tests::mcp_rig::{call as session_call, connect, http};
use rmcp::model::ClientConfig;
use serde_json::{Value, json};
use std::time::Duration;

fn secret(name: &str) -> String {
    format!("{name}-multi-host-secret-0123456789")
}

/// A stateless `tools/call` of `name` by `who` at MCP endpoint `url`, with
/// `extra` in `_meta` (a saga handle).
async fn call_as(url: &str, who: &str, name: &str, args: &Value, extra: Value) -> Value {
    let r = http()
        .post(url)
        .header("Accept", "application/json, text/event-stream")
        .header("MCP-Protocol-Version", super::wire::REV)
        .header("Mcp-Method", "tools/call")
        .header("Mcp-Name", name)
        .bearer_auth(secret(who))
        .json(&json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
            "params": {"name": name, "arguments": args, "_meta": meta(extra)}}))
        .send()
        .await
        .unwrap();
    let text = r.text().await.unwrap();
    serde_json::from_str(&text)
        .ok()
        .or_else(|| {
            text.lines()
                .filter_map(|l| l.strip_prefix("data:"))
                .filter_map(|d| serde_json::from_str::<Value>(d.trim()).ok())
                .rfind(|v| v.get("id").is_some())
        })
        .unwrap_or_else(|| panic!("no answer in {text}"))
}

fn saga_in(v: &Value) -> String {
    let s = &v["result"]["structuredContent"];
    s["saga_id"]
        .as_str()
        .or_else(|| s["error"]["saga_id"].as_str())
        .unwrap_or_else(|| panic!("no saga in {v}"))
        .to_string()
}

fn executes(journal: &std::path::Path) -> usize {
    super::rig::lines(journal)
        .iter()
        .filter(|l| l.starts_with("execute "))
        .count()
}

#[test]
fn an_approval_is_claimed_on_any_host_by_the_principal_that_asked_and_no_other() {
    let policy = format!(
        "store_lease_ms = {LEASE_MS}\n[tools.ledger]\ngrants = [\"fs:write:~/ws/**\"]\napproval = \"always\"\nhost_rollback = false\n"
    );
    let Some(rig) = Rig::with_policy("multi_host::owners::approvals", 3, &policy) else {
        return;
    };
    let (path, journal) = rig.ledger("ledger.txt");
    runtime().block_on(async {
        let store = rig.store().await;
        for (name, role) in [
            ("bob", Role::Client),
            ("mallory", Role::Client),
            ("alice", Role::Operator),
        ] {
            store
                .create_token(name, role, &digest(secret(name).as_bytes()), "test")
                .await
                .unwrap();
        }
        let args = json!({"path": path, "entry": "pay 10"});
        // bob's call parks on host 0; bob rolls its saga back on host 1.
        let first = call_as(&rig.mcp(0), "bob", "ledger", &args, json!({})).await;
        assert_eq!(first["result"]["isError"], true, "{first}");
        let asked = saga_in(&first);
        let id = first["result"]["structuredContent"]["error"]["approval_id"]
            .as_str()
            .unwrap()
            .to_string();
        let rb = call_as(
            &rig.mcp(1),
            "bob",
            "capsaga_rollback",
            &json!({}),
            json!({"dev.capsaga/saga": asked}),
        )
        .await;
        assert_eq!(rb["result"]["isError"], false, "{rb}");
        // alice approves on host 2.
        let r = http()
            .post(format!("{}/v1/approvals/{id}/approve", rig.base(2)))
            .bearer_auth(secret("alice"))
            .json(&json!({}))
            .send()
            .await
            .unwrap();
        assert_eq!(r.status().as_u16(), 200, "{}", r.text().await.unwrap());
        // Another client, an operator token, on every host: each parks on
        // an approval of its own; nothing runs.
        for (who, host) in [("mallory", 0), ("mallory", 1), ("alice", 2), ("alice", 0)] {
            let v = call_as(&rig.mcp(host), who, "ledger", &args, json!({})).await;
            assert_eq!(v["result"]["isError"], true, "{who}@{host}: {v}");
            let err = &v["result"]["structuredContent"]["error"];
            assert_eq!(err["approval_status"], "pending", "{who}@{host}: {v}");
            assert_ne!(err["approval_id"], id.as_str(), "{who}@{host}");
        }
        // The command line on the same database (`cli:<user>`).
        let o = rig
            .ws
            .capsaga(&["--json", "call", "ledger", &args.to_string()])
            .env("CAPSAGA_STORE", &rig.url)
            .output()
            .unwrap();
        assert_eq!(o.status.code(), Some(10), "{o:?}");
        assert_eq!(executes(&journal), 0, "no other principal claimed it");
        assert_eq!(
            store.approval(&id).await.unwrap().status,
            ApprovalStatus::Approved
        );
        // mallory and bob at once, on two hosts: bob's call runs, once.
        let (one, two) = (rig.mcp(1), rig.mcp(2));
        let (m, b) = tokio::join!(
            call_as(&one, "mallory", "ledger", &args, json!({})),
            call_as(&two, "bob", "ledger", &args, json!({})),
        );
        assert_eq!(m["result"]["isError"], true, "{m}");
        assert_eq!(b["result"]["isError"], false, "{b}");
        assert_eq!(executes(&journal), 1);
        let row = store.approval(&id).await.unwrap();
        assert_eq!(row.status, ApprovalStatus::Claimed);
        assert_eq!(row.claimed_saga.as_deref(), Some(saga_in(&b).as_str()));
        let claimant = store.saga(&saga_in(&b)).await.unwrap().unwrap();
        assert_eq!(claimant.principal.as_deref(), Some("token:bob"));
        let report = capsaga_store::audit::verify(&*store, None).await.unwrap();
        assert!(report.ok(), "{report:?}");
    });
}

#[test]
fn a_sessions_saga_is_never_continued_by_a_handle_on_another_host_alive_or_dead() {
    let policy = format!(
        "store_lease_ms = {LEASE_MS}\n[tools.ledger]\ngrants = [\"fs:write:~/ws/**\"]\nhost_rollback = false\n[tools.fs_write]\ngrants = [\"fs:write:~/ws/**\"]\napproval = \"always\"\n"
    );
    let Some(mut rig) = Rig::with_tools(
        "multi_host::owners::session",
        2,
        &["ledger", "fs_write"],
        &policy,
        &[],
    ) else {
        return;
    };
    let (path, journal) = rig.ledger("ledger.txt");
    runtime().block_on(async {
        let store = rig.store().await;
        // A session on host 0 (no token: every caller is `loopback`, one
        // principal): a committed step, then a call parked for an approval.
        let s = connect(rig.mcp(0), ClientConfig::default()).await;
        let one = session_call(&s, "ledger", &json!({"path": path, "entry": "one"})).await;
        assert_ne!(one.is_error, Some(true), "{one:?}");
        let one = serde_json::to_value(&one).unwrap();
        let saga = one["structuredContent"]["saga_id"]
            .as_str()
            .unwrap()
            .to_string();
        let parked = session_call(
            &s,
            "fs_write",
            &json!({"path": rig.ws.ws_path("w.txt"), "content": "w"}),
        )
        .await;
        assert_eq!(parked.is_error, Some(true), "{parked:?}");
        let two = json!({"path": path, "entry": "two"});
        // Host 1, host 0 alive: refused, naming the scope.
        let v = call(&rig.mcp(1), "ledger", two.clone(), Some(&saga)).await;
        assert_eq!(v["error"]["code"], -32602, "{v}");
        assert!(
            v["error"]["message"]
                .as_str()
                .unwrap()
                .contains("MCP session"),
            "{v}"
        );
        // Host 0 dies with the saga parked; once its lease is over, host 1
        // still refuses the handle, and recovery rolls the saga back.
        let owner = store.saga(&saga).await.unwrap().unwrap().owner.unwrap();
        rig.kill(0);
        eventually(
            Duration::from_secs(60),
            "host 0's lease expires",
            || async { !store.owner_alive(&owner).await.unwrap() },
        )
        .await;
        for name in ["ledger", "capsaga_commit", "capsaga_rollback"] {
            let args = if name == "ledger" {
                two.clone()
            } else {
                json!({})
            };
            let v = call(&rig.mcp(1), name, args, Some(&saga)).await;
            assert_eq!(v["error"]["code"], -32602, "{name}: {v}");
        }
        eventually(
            Duration::from_secs(60),
            "recovery rolls the saga back",
            || async { store.saga(&saga).await.unwrap().unwrap().state == State::FailedRolledBack },
        )
        .await;
        let text = std::fs::read_to_string(&path).unwrap_or_default();
        assert!(!text.contains("one") && !text.contains("two"), "{text:?}");
        assert_eq!(executes(&journal), 1, "only the session's own step ran");
    });
}
