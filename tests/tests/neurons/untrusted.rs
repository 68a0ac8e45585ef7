//! Issue 24 item 7: whether a tool's output is untrusted is the host's
//! decision. A component (`net_escape`, `net:` grant) and a neuron
//! (`csv_stats`, `fs:read` grant) that both declare `returns_untrusted:
//! false` are wrapped in `<untrusted>` markers for every model-facing
//! surface (the agent loop, MCP); `time_now` (no grant) stays unwrapped.
//! Real components, the real runner, a real HTTP server and MCP server on
//! 127.0.0.1.

use super::*;
use capsaga_agent::provider::{ChatRequest, ChatResponse, Provider, ProviderError, Role};
use capsaga_agent::runner::{TurnOptions, run_turn};
use capsaga_agent::scripted::ScriptedProvider;
use capsaga_door::neurons::operator;
use capsaga_server::HttpOptions;
use capsaga_tests::http_server::TestServer;
use capsaga_tests::mcp_rig::{ListChanged, call_ok, connect, start};
use std::sync::Mutex;

/// The scripted provider, recording what the model is sent.
struct Recording {
    inner: ScriptedProvider,
    seen: Mutex<Vec<ChatRequest>>,
}

#[async_trait::async_trait]
impl Provider for Recording {
    fn name(&self) -> &str {
        "recording"
    }
    async fn complete(&self, request: &ChatRequest) -> Result<ChatResponse, ProviderError> {
        self.seen.lock().unwrap().push(request.clone());
        self.inner.complete(request).await
    }
}

const OPEN: &str = "<untrusted source=\"tool:";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn outside_data_is_wrapped_whatever_the_tool_declares() {
    let web = TestServer::start().await;
    let port = web.addr.port();
    let Some(ws) = workspace(
        &["net_escape", "time_now"],
        &format!(
            "[tools.net_escape]\ngrants = [\"net:http:127.0.0.1:{port}\"]\n[tools.time_now]\n"
        ),
        "max_grants = [\"fs:read:~/ws/**\"]",
    ) else {
        return;
    };
    // The neuron: declares nothing about its output (false), reads files.
    let (host, door) = door(&ws).await;
    let caps = json!([format!("fs:read:{}/**", ws.ws().display())]);
    let out = call_one(&door, "neuron_create", &csv_stats(csv_examples(), caps)).await;
    assert_eq!(
        data(&out)["status"],
        "awaiting_operator",
        "{:#}",
        data(&out)
    );
    let row = host.store.neuron("csv_stats", None).await.unwrap().unwrap();
    assert!(
        !row.meta.returns_untrusted,
        "the neuron claims trusted output"
    );
    let home = host.config.home.to_string_lossy().into_owned();
    let grants = [format!("fs:read:{}/**", ws.ws().display())];
    operator::approve(&*host.store, &home, &row, &grants, All, "cli:test", None)
        .await
        .unwrap();
    drop(door);
    drop(host);
    let host = ws.host().await;
    std::fs::write(ws.ws().join("sales.csv"), "amount\n10\n20\n60\n").unwrap();

    // The door's decision, for each tool source.
    let door = Dispatcher::new(host.clone());
    for (tool, declared, wrapped) in [
        ("net_escape", false, true),
        ("csv_stats", false, true),
        ("time_now", false, false),
        ("neuron_create", false, false),
    ] {
        let t = host.registry.get(tool).expect(tool);
        assert_eq!(t.meta.returns_untrusted, declared, "{tool}");
        assert_eq!(
            capsaga_door::dispatch::untrusted_output(&t),
            wrapped,
            "{tool}"
        );
    }
    let fetched = call_one(
        &door,
        "net_escape",
        &json!({"mode": "get", "url": web.url("/hello")}),
    )
    .await;
    assert!(fetched.untrusted_output());
    assert!(
        !call_one(&door, "time_now", &json!({}))
            .await
            .untrusted_output()
    );

    // MCP: the same decision in every result and in `tools/list`.
    let srv = start(
        host.clone(),
        HttpOptions::new("127.0.0.1:0".parse().unwrap()),
    )
    .await;
    let client = connect(srv.url("/mcp"), ListChanged::default()).await;
    let listed = client.list_all_tools().await.unwrap();
    for (tool, wrapped) in [
        ("net_escape", true),
        ("csv_stats", true),
        ("time_now", false),
    ] {
        let def = listed.iter().find(|t| t.name == tool).expect(tool);
        let meta = serde_json::to_value(&def.meta).unwrap();
        assert_eq!(
            meta["capsaga/returns_untrusted"],
            json!(wrapped),
            "{tool}: {meta}"
        );
    }
    let text = |r: &rmcp::model::CallToolResult| -> String {
        r.content
            .iter()
            .filter_map(|c| c.as_text().map(|t| t.text.clone()))
            .collect()
    };
    let r = call_ok(
        &client,
        "net_escape",
        &json!({"mode": "get", "url": web.url("/hello")}),
    )
    .await;
    let t = text(&r);
    assert!(
        t.starts_with("<untrusted source=\"tool:net_escape\""),
        "{t}"
    );
    assert!(t.contains("hello world from the test server"), "{t}");
    assert_eq!(r.structured_content.as_ref().unwrap()["data"], Value::Null);
    let args = json!({"path": ws.ws_path("sales.csv"), "column": "amount"});
    let r = call_ok(&client, "csv_stats", &args).await;
    let t = text(&r);
    assert!(t.starts_with("<untrusted source=\"tool:csv_stats\""), "{t}");
    assert!(t.contains("30"), "{t}");
    let r = call_ok(&client, "time_now", &json!({})).await;
    let t = text(&r);
    assert!(!t.contains("<untrusted"), "{t}");
    assert!(r.structured_content.as_ref().unwrap()["data"].is_object());
    let _ = client.cancel().await;
    drop(srv);

    // The agent loop: what the model reads.
    let script = ws.root.join("script.json");
    std::fs::write(
        &script,
        format!(
            r#"{{"turns":[
            {{"text":"","tool_calls":[{{"name":"net_escape","arguments":{{"mode":"get","url":"{}"}}}}]}},
            {{"text":"","tool_calls":[{{"name":"csv_stats","arguments":{{"path":"${{home}}/ws/sales.csv","column":"amount"}}}}]}},
            {{"text":"","tool_calls":[{{"name":"time_now","arguments":{{}}}}]}},
            {{"text":"done"}}]}}"#,
            web.url("/hello")
        ),
    )
    .unwrap();
    let p = Recording {
        inner: ScriptedProvider::from_file(&script, &ws.root).unwrap(),
        seen: Mutex::new(Vec::new()),
    };
    // The user names the file (a neuron's arguments must be the user's once
    // untrusted data was read: information flow).
    let task = format!(
        "use the tools on the amount column of {}/ws/sales.csv",
        ws.root.display()
    );
    let tr = run_turn(&host, &p, &task, &TurnOptions::default())
        .await
        .unwrap();
    assert_eq!(tr.outcome.as_str(), "success", "{tr:#?}");
    let seen = p.seen.lock().unwrap();
    let tool_msgs: Vec<String> = seen
        .last()
        .unwrap()
        .messages
        .iter()
        .filter(|m| m.role == Role::Tool)
        .map(|m| m.content.clone())
        .collect();
    assert_eq!(tool_msgs.len(), 3, "{tool_msgs:#?}");
    assert!(
        tool_msgs[0].starts_with(&format!("{OPEN}net_escape\"")),
        "{}",
        tool_msgs[0]
    );
    assert!(
        tool_msgs[1].starts_with(&format!("{OPEN}csv_stats\"")),
        "{}",
        tool_msgs[1]
    );
    assert!(!tool_msgs[2].contains("<untrusted"), "{}", tool_msgs[2]);
}
