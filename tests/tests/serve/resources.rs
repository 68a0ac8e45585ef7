//! MCP resources over Streamable HTTP with rmcp's client: after a real
//! `fs_write` call, the session's saga is listed, readable (its steps and
//! write-ahead log records), its id completes, and a subscription to it
//! brings `notifications/resources/updated` after the next call. Hostile
//! URIs and unknown ids get an error, never another file or row.

use super::start;
use capsaga_server::HttpOptions;
use capsaga_tests::TestWorkspace;
use capsaga_tests::mcp_rig::{call_ok, connect};
use rmcp::model::{
    ReadResourceRequestParams, ResourceContents, ResourceUpdatedNotificationParam,
    SubscribeRequestParams,
};
use rmcp::service::NotificationContext;
use rmcp::{ClientHandler, RoleClient};
use serde_json::{Value, json};
use std::sync::{Arc, Mutex};

/// A client that records the URIs of `notifications/resources/updated`.
#[derive(Clone, Default)]
struct Watcher {
    updated: Arc<Mutex<Vec<String>>>,
}

impl ClientHandler for Watcher {
    async fn on_resource_updated(
        &self,
        params: ResourceUpdatedNotificationParam,
        _context: NotificationContext<RoleClient>,
    ) {
        if let Ok(mut u) = self.updated.lock() {
            u.push(params.uri);
        }
    }
}

fn text_of(c: &ResourceContents) -> &str {
    match c {
        ResourceContents::TextResourceContents { text, .. } => text,
        other => panic!("not text: {other:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_reads_completes_and_watches_its_saga() {
    let ws = TestWorkspace::new(
        &["fs_write"],
        "[tools.fs_write]\ngrants = [\"fs:write:~/ws/**\"]\n",
    );
    let host = ws.host().await;
    let srv = start(host, HttpOptions::new("127.0.0.1:0".parse().unwrap())).await;
    let watcher = Watcher::default();
    let client = connect(srv.url("/mcp"), watcher.clone()).await;

    let caps = client
        .peer_info()
        .and_then(|i| i.capabilities.resources.clone());
    assert_eq!(
        caps.and_then(|r| r.subscribe),
        Some(true),
        "resources with subscribe are announced"
    );

    let target = ws.ws_path("a.txt");
    let r = call_ok(
        &client,
        "fs_write",
        &json!({"path": target, "content": "one\n"}),
    )
    .await;
    let saga_id = r
        .structured_content
        .as_ref()
        .and_then(|s| s.get("saga_id"))
        .and_then(Value::as_str)
        .expect("the call names its saga")
        .to_string();
    let uri = format!("capsaga://sagas/{saga_id}");

    // Listed, among the newest sagas.
    let listed = client.list_resources(None).await.unwrap();
    assert!(
        listed.resources.iter().any(|r| r.uri == uri),
        "{uri} not in {:?}",
        listed.resources.iter().map(|r| &r.uri).collect::<Vec<_>>()
    );
    let templates = client.list_resource_templates(None).await.unwrap();
    let names: Vec<&str> = templates
        .resource_templates
        .iter()
        .map(|t| t.uri_template.as_str())
        .collect();
    assert!(names.contains(&"capsaga://sagas/{id}"), "{names:?}");
    assert!(names.contains(&"capsaga://traces/{id}"), "{names:?}");

    // Read: the saga, its one step and its BEGIN/COMMIT-to-be records.
    let read = client
        .read_resource(ReadResourceRequestParams::new(uri.clone()))
        .await
        .unwrap();
    assert_eq!(read.contents.len(), 1);
    let doc: Value = serde_json::from_str(text_of(&read.contents[0])).unwrap();
    assert_eq!(doc["saga"]["saga_id"], json!(saga_id), "{doc}");
    let steps = doc["steps"].as_array().expect("steps");
    assert_eq!(steps.len(), 1, "{doc}");
    assert_eq!(steps[0]["tool_id"], json!("fs_write"), "{doc}");
    let records: Vec<&str> = doc["log"]
        .as_array()
        .expect("log")
        .iter()
        .filter_map(|r| r["record"].as_str())
        .collect();
    assert!(records.contains(&"BEGIN"), "{records:?}");

    // Completion of the id from its first characters.
    let done = client
        .complete_resource_argument("capsaga://sagas/{id}", "id", &saga_id[..4], None)
        .await
        .unwrap();
    assert!(done.values.contains(&saga_id), "{:?}", done.values);
    let none = client
        .complete_resource_argument("capsaga://sagas/{id}", "id", "%", None)
        .await
        .unwrap();
    assert!(none.values.is_empty(), "a LIKE wildcard matches nothing");

    // Subscribed: the next call in this session tells the client.
    #[allow(deprecated)]
    client
        .subscribe(SubscribeRequestParams::new(uri.clone()))
        .await
        .unwrap();
    call_ok(
        &client,
        "fs_write",
        &json!({"path": ws.ws_path("b.txt"), "content": "two\n"}),
    )
    .await;
    let what = format!("notifications/resources/updated for {uri}");
    capsaga_tests::wait_until_async(&what, || {
        std::future::ready(watcher.updated.lock().unwrap().contains(&uri))
    })
    .await;

    // Hostile or unknown URIs: an error, nothing read, and no subscription
    // either (subscribe checks a URI exactly as read does).
    let long_id = "a".repeat(65);
    for bad in [
        "capsaga://sagas/../../etc/passwd".to_string(),
        "capsaga://sagas/00000000-0000-0000-0000-000000000000".to_string(),
        format!("capsaga://sagas/{saga_id}' OR '1'='1"),
        format!("capsaga://sagas/{saga_id}%00"),
        format!("capsaga://sagas/{saga_id}/../../x"),
        format!("capsaga://sagas/{long_id}"),
        format!(
            "capsaga://sagas/{}",
            saga_id.to_uppercase().replace('-', "\u{2010}")
        ),
        "capsaga://sagas/".to_string(),
        "file:///etc/passwd".to_string(),
        "capsaga://traces/".to_string(),
        "CAPSAGA://sagas/x".to_string(),
    ] {
        let r = client
            .read_resource(ReadResourceRequestParams::new(bad.clone()))
            .await;
        assert!(r.is_err(), "{bad} was read: {r:?}");
        #[allow(deprecated)]
        let r = client
            .subscribe(SubscribeRequestParams::new(bad.clone()))
            .await;
        assert!(r.is_err(), "{bad} was subscribed to: {r:?}");
    }
    let _ = client.cancel().await;
}
