//! A running `capsaga serve` learns of neurons the operator activates or
//! retires from another process (the same state database): its MCP
//! sessions get `notifications/tools/list_changed`, `tools/list` shows the
//! new tool, and a call of it runs through the door; once retired it is
//! gone again. Real server on 127.0.0.1, rmcp's client, the real runner.

use super::*;
use capsaga_core::neuron::Status;
use capsaga_door::neurons::operator;
use capsaga_server::HttpOptions;
use capsaga_store::NeuronStore;
use capsaga_store::sqlite::SqliteStore;
use capsaga_tests::mcp_rig::{ListChanged, call_ok, connect, start, stat_after};
use rmcp::RoleClient;
use rmcp::model::CallToolRequestParams;
use rmcp::service::RunningService;
use std::time::Duration;

type Counter = ListChanged;

async fn names(client: &RunningService<RoleClient, Counter>) -> Vec<String> {
    client
        .list_all_tools()
        .await
        .unwrap()
        .into_iter()
        .map(|t| t.name.to_string())
        .collect()
}

async fn wait_for(what: &str, ok: impl Fn() -> bool) {
    capsaga_tests::wait_until_async(what, || std::future::ready(ok())).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_operator_decision_elsewhere_changes_the_served_tool_list() {
    let Some(ws) = workspace(&[], "", "max_grants = [\"fs:read:~/ws/**\"]") else {
        return;
    };
    let (host, door) = door(&ws).await;
    let caps = json!([format!("fs:read:{}/**", ws.ws().display())]);
    let out = call_one(&door, "neuron_create", &csv_stats(csv_examples(), caps)).await;
    assert_eq!(data(&out)["status"], "awaiting_operator");
    drop(door);

    let mut o = HttpOptions::new("127.0.0.1:0".parse().unwrap());
    o.mcp.catalog_poll = Some(Duration::from_millis(100));
    let srv = start(host.clone(), o).await;
    let counter = Counter::default();
    let client = connect(srv.url("/mcp"), counter.clone()).await;
    assert!(
        client
            .peer_info()
            .and_then(|i| i.capabilities.tools.clone())
            .and_then(|t| t.list_changed)
            == Some(true),
        "listChanged is announced"
    );
    assert!(!names(&client).await.contains(&"csv_stats".to_string()));
    // Nothing changed: two more rounds of the watcher, and no notification.
    let checks = stat_after(&srv.url(""), "checks", 0).await;
    stat_after(&srv.url(""), "checks", checks + 1).await;
    assert_eq!(counter.count(), 0);

    // The operator approves from another process: its own store handle on
    // the same database file, as `capsaga neurons approve` would.
    let other = SqliteStore::open(&host.config.db_path()).unwrap();
    let row = other.neuron("csv_stats", None).await.unwrap().unwrap();
    assert_eq!(row.status, Status::AwaitingOperator);
    let home = host.config.home.to_string_lossy().into_owned();
    let wider = [format!("fs:read:{}/**", ws.ws().display())];
    let active = operator::approve(&other, &home, &row, &wider, All, "cli:test", None)
        .await
        .unwrap();
    wait_for("tools/list_changed after the approval", || {
        counter.count() >= 1
    })
    .await;
    assert!(names(&client).await.contains(&"csv_stats".to_string()));
    std::fs::write(ws.ws().join("sales.csv"), "amount\n10\n20\n60\n").unwrap();
    let args = json!({"path": ws.ws_path("sales.csv"), "column": "amount"});
    let r = call_ok(&client, "csv_stats", &args).await;
    let text = format!("{:?}", r.content);
    assert!(text.contains("30"), "the mean: {text}");

    // Retired from the other process: gone from the list, told again.
    let seen = counter.count();
    operator::decide(&other, &active, Status::Retired, "cli:test", None)
        .await
        .unwrap();
    wait_for("tools/list_changed after the retirement", || {
        counter.count() > seen
    })
    .await;
    assert!(!names(&client).await.contains(&"csv_stats".to_string()));
    let r = client
        .call_tool(
            CallToolRequestParams::new("csv_stats")
                .with_arguments(args.as_object().cloned().unwrap()),
        )
        .await;
    let refused = match r {
        Ok(r) => r.is_error == Some(true),
        Err(_) => true,
    };
    assert!(refused, "a retired neuron cannot be called");
    let _ = client.cancel().await;
    drop(srv);
}
