//! A running server reloads its host (issue 15: `tools/list_changed` on a
//! policy reload; a changed component is a new tool version): a real
//! `capsaga serve` on 127.0.0.1, rmcp's client, real components copied
//! into and rewritten in the tools directory, a real policy file edited
//! under the server, and the real binary reloading on SIGHUP.
//!
//! Attacker's side: a policy that does not parse, and one granting a tool
//! what it does not declare, are refused whole; the server keeps serving
//! what it had, and a session's saga keeps its steps and compensates a step
//! with the component it ran with, whatever the directory holds now.

use super::start;
use capsaga_server::HttpOptions;
use capsaga_store::{SagaStore, StepStore};
use capsaga_tests::mcp_rig::{ListChanged, call_ok, connect, reload_stats, stat_after};
use capsaga_tests::{TestWorkspace, component, open_store, wait_until_async};
use rmcp::RoleClient;
use rmcp::model::CallToolRequestParams;
use rmcp::service::RunningService;
use serde_json::{Value, json};
use std::process::Command;
use std::sync::Arc;
use std::time::Duration;

type Counter = ListChanged;

type Client = RunningService<RoleClient, Counter>;

/// The served tools: name and `_meta["capsaga/hash"]`.
async fn listed(client: &Client) -> Vec<(String, String)> {
    client
        .list_all_tools()
        .await
        .expect("tools/list")
        .into_iter()
        .map(|t| {
            let hash = t
                .meta
                .as_ref()
                .and_then(|m| m.get("capsaga/hash"))
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_string();
            (t.name.to_string(), hash)
        })
        .collect()
}

async fn names(client: &Client) -> Vec<String> {
    listed(client).await.into_iter().map(|(n, _)| n).collect()
}

/// `host` served in-process, looking for changes every 100 ms, and a
/// client counting `tools/list_changed`.
async fn watched(
    host: Arc<capsaga_door::host::Host>,
) -> (capsaga_tests::mcp_rig::Running, Counter, Client) {
    let mut o = HttpOptions::new("127.0.0.1:0".parse().unwrap());
    o.mcp.catalog_poll = Some(Duration::from_millis(100));
    let srv = start(host, o).await;
    let counter = Counter::default();
    let client = connect(srv.url("/mcp"), counter.clone()).await;
    (srv, counter, client)
}

/// Wait until the client was told of more than `seen` changes.
async fn told_after(c: &Counter, seen: usize, what: &str) {
    let what = format!("tools/list_changed: {what}");
    wait_until_async(&what, || {
        let n = c.count();
        async move { n > seen }
    })
    .await;
}

async fn call(client: &Client, tool: &str, args: &Value) -> rmcp::model::CallToolResult {
    client
        .call_tool(
            CallToolRequestParams::new(tool.to_string())
                .with_arguments(args.as_object().cloned().unwrap_or_default()),
        )
        .await
        .expect("the call is answered")
}

/// The component bytes with one more custom section: the same code and
/// meta, another content hash (what a rebuild with another toolchain gives).
fn rebuilt(wasm: &[u8]) -> Vec<u8> {
    let name = b"capsaga-test-rebuild";
    let payload = b"v2";
    let mut out = wasm.to_vec();
    out.push(0); // custom section id
    out.push((1 + name.len() + payload.len()) as u8); // size (< 128: one LEB byte)
    out.push(name.len() as u8);
    out.extend_from_slice(name);
    out.extend_from_slice(payload);
    out
}

fn sha256(bytes: &[u8]) -> String {
    capsaga_core::idempotency::sha256_hex(bytes)
}

const ONLY_TIME: &str = "[tools.time_now]\n";
const TIME_AND_WRITE: &str = r#"
[tools.time_now]
[tools.fs_write]
grants = ["fs:write:~/ws/**"]
[tools.fs_read]
grants = ["fs:read:~/ws/**"]
"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_changed_policy_and_tools_directory_reach_a_running_server() {
    let ws = TestWorkspace::new(&["time_now", "fs_write"], ONLY_TIME);
    let host = ws.host().await;
    let (srv, counter, client) = watched(host).await;
    let before = names(&client).await;
    assert!(before.contains(&"time_now".to_string()), "{before:?}");
    assert!(!before.contains(&"fs_write".to_string()), "{before:?}");
    call_ok(&client, "time_now", &json!({})).await;
    // Nothing changed: two more checks of the sources, and nobody is told.
    let base = srv.url("");
    let checks = stat_after(&base, "checks", 0).await;
    stat_after(&base, "checks", checks + 1).await;
    assert_eq!(counter.count(), 0);

    // The operator grants fs_write: the running server reloads.
    let seen = counter.count();
    ws.write_policy(TIME_AND_WRITE);
    told_after(&counter, seen, "fs_write granted").await;
    assert!(names(&client).await.contains(&"fs_write".to_string()));
    let note = ws.ws_path("note.txt");
    call_ok(
        &client,
        "fs_write",
        &json!({"path": note, "content": "hello\n"}),
    )
    .await;
    assert_eq!(std::fs::read_to_string(&note).unwrap(), "hello\n");

    // A component dropped into the tools directory, already granted.
    let seen = counter.count();
    std::fs::copy(component("fs_read"), ws.root.join("tools/fs_read.wasm")).unwrap();
    told_after(&counter, seen, "fs_read added").await;
    let r = call_ok(&client, "fs_read", &json!({"path": note})).await;
    assert!(
        format!("{:?}", r.content).contains("hello"),
        "{:?}",
        r.content
    );

    // Hostile or broken policies are refused whole: nothing changes.
    let seen = counter.count();
    let listed_before = listed(&client).await;
    let refused = reload_stats(&base).await["refused"].as_u64().unwrap_or(0);
    let generation = reload_stats(&base).await["generation"].clone();
    std::fs::write(ws.config(), "[tools.fs_write\ngrants = [").unwrap();
    let refused = stat_after(&base, "refused", refused).await;
    // Granting fs_write the network it does not declare (and dropping
    // the other tools, so an accepted reload would show).
    ws.write_policy(
        "[tools.fs_write]\ngrants = [\"fs:write:~/ws/**\", \"net:https:evil.example\"]\n",
    );
    stat_after(&base, "refused", refused).await;
    assert_eq!(
        reload_stats(&base).await["generation"],
        generation,
        "nothing reloaded"
    );
    assert_eq!(counter.count(), seen, "no change told");
    assert_eq!(
        listed(&client).await,
        listed_before,
        "the same tools served"
    );
    call_ok(&client, "time_now", &json!({})).await;

    // Withdrawn: fs_write leaves the list and is refused.
    ws.write_policy(ONLY_TIME);
    told_after(&counter, seen, "fs_write withdrawn").await;
    assert!(!names(&client).await.contains(&"fs_write".to_string()));
    let r = call(
        &client,
        "fs_write",
        &json!({"path": ws.ws_path("x.txt"), "content": "x"}),
    )
    .await;
    assert_eq!(r.is_error, Some(true), "a withdrawn tool is refused");
    assert!(!ws.ws().join("x.txt").exists());

    // One saga across the generations: its steps are all there.
    let r = call_ok(&client, "capsaga_commit", &json!({})).await;
    let saga_id = r
        .structured_content
        .as_ref()
        .and_then(|v| v["saga_id"].as_str())
        .map(String::from);
    let _ = client.cancel().await;
    drop(srv);
    let store = open_store(&ws);
    let saga_id = match saga_id {
        Some(s) => s,
        None => store.sagas(10).await.unwrap()[0].saga_id.clone(),
    };
    let tools: Vec<String> = store
        .steps(&saga_id)
        .await
        .unwrap()
        .into_iter()
        .map(|s| s.tool_id)
        .collect();
    for t in ["time_now", "fs_write", "fs_read"] {
        assert!(tools.contains(&t.to_string()), "{t} in {tools:?}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rebuilt_component_is_a_new_version_and_old_steps_compensate_with_theirs() {
    let ws = TestWorkspace::new(&["time_now", "fs_write"], TIME_AND_WRITE);
    let v1 = std::fs::read(ws.root.join("tools/fs_write.wasm")).unwrap();
    let host = ws.host().await;
    let (srv, counter, client) = watched(host).await;
    let hash_of = |l: &[(String, String)]| {
        l.iter()
            .find(|(n, _)| n == "fs_write")
            .map(|(_, h)| h.clone())
            .unwrap_or_default()
    };
    assert_eq!(hash_of(&listed(&client).await), sha256(&v1));
    let first = ws.ws_path("first.txt");
    call_ok(
        &client,
        "fs_write",
        &json!({"path": first, "content": "1\n"}),
    )
    .await;

    // Rebuilt in place (same name, same meta, other bytes).
    let v2 = rebuilt(&v1);
    let seen = counter.count();
    let tmp = ws.root.join("tools/.fs_write.tmp");
    std::fs::write(&tmp, &v2).unwrap();
    std::fs::rename(&tmp, ws.root.join("tools/fs_write.wasm")).unwrap();
    told_after(&counter, seen, "fs_write rebuilt").await;
    assert_eq!(
        hash_of(&listed(&client).await),
        sha256(&v2),
        "the new version is served"
    );
    let second = ws.ws_path("second.txt");
    call_ok(
        &client,
        "fs_write",
        &json!({"path": second, "content": "2\n"}),
    )
    .await;

    // The session rolls back: both steps compensated, each pinned to the
    // component it ran with.
    let r = call_ok(&client, "capsaga_rollback", &json!({})).await;
    let saga_id = r
        .structured_content
        .as_ref()
        .and_then(|v| v["saga_id"].as_str())
        .map(String::from)
        .expect("saga_id");
    assert!(!ws.ws().join("first.txt").exists(), "v1's step undone");
    assert!(!ws.ws().join("second.txt").exists(), "v2's step undone");
    let _ = client.cancel().await;
    drop(srv);
    let store = open_store(&ws);
    let hashes: Vec<(String, String)> = store
        .steps(&saga_id)
        .await
        .unwrap()
        .into_iter()
        .map(|s| (s.tool_id, s.tool_hash))
        .collect();
    assert_eq!(
        hashes,
        vec![
            ("fs_write".to_string(), sha256(&v1)),
            ("fs_write".to_string(), sha256(&v2))
        ]
    );
}

/// `capsaga serve` with polling off reloads on SIGHUP only, and SIGHUP does
/// not end it.
#[test]
fn sighup_reloads_the_real_binary() {
    let ws = TestWorkspace::new(&["time_now", "fs_write"], ONLY_TIME);
    let (mut child, url) = super::crash::serve_with(&ws, &["--catalog-poll-ms", "0"]);
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let counter = Counter::default();
        let client = connect(url.clone(), counter.clone()).await;
        assert!(!names(&client).await.contains(&"fs_write".to_string()));
        ws.write_policy(TIME_AND_WRITE);
        // Polling is off: nothing looks at the edit (no check at all).
        let base = url.trim_end_matches("/mcp").to_string();
        assert_eq!(reload_stats(&base).await["checks"], 0);
        assert!(!names(&client).await.contains(&"fs_write".to_string()));
        let status = Command::new("kill")
            .args(["-HUP", &child.id().to_string()])
            .status()
            .expect("kill -HUP");
        assert!(status.success());
        told_after(&counter, 0, "SIGHUP").await;
        assert!(names(&client).await.contains(&"fs_write".to_string()));
        let _ = client.cancel().await;
    });
    assert!(
        child.try_wait().unwrap().is_none(),
        "SIGHUP did not end the server"
    );
    let _ = child.kill();
    let _ = child.wait();
}
