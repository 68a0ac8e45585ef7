//! Secrets: injected into requests to their hosts only, never printed, logged or stored.

use super::*;

const SECRET: &str = "sk-test-7a1f9c0e-DO-NOT-LEAK";

fn bytes_contain(hay: &[u8], needle: &str) -> bool {
    hay.windows(needle.len()).any(|w| w == needle.as_bytes())
}

/// Every file under `.capsaga` (the SQLite database, its WAL and journal).
fn state_files_contain(ws: &TestWorkspace, needle: &str) -> Vec<String> {
    capsaga_tests::snapshot(&ws.root.join(".capsaga"))
        .into_iter()
        .filter(|(_, bytes)| bytes_contain(bytes, needle))
        .map(|(name, _)| name)
        .collect()
}

#[tokio::test(flavor = "multi_thread")]
async fn secrets_reach_the_server_and_nothing_else() {
    let srv = TestServer::start().await;
    let tp = srv.tls_addr.port();
    let p = srv.addr.port();
    let ws = workspace(
        &["secret_probe", "net_escape"],
        &srv,
        &format!(
            r#"[tools.secret_probe]
grants = ["net:https:127.0.0.1:{tp}", "secret:api@127.0.0.1"]
[tools.net_escape]
grants = ["net:http:127.0.0.1:{p}"]
[secrets.api]
value = "{SECRET}"
prefix = "Bearer "
[net]
ca_files = ["ca.pem"]
"#
        ),
    );
    let host = ws.host().await;
    let out = step(&host, "secret_probe", json!({"url": srv.tls_url("/echo")})).await;
    let (data, diag) = ok(&out);
    // The server got the operator's credential, not the guest's value.
    let seen = srv.requests();
    assert_eq!(seen.len(), 1);
    assert_eq!(
        seen[0].header("authorization"),
        Some(format!("Bearer {SECRET}").as_str())
    );
    // The echo came back redacted; the guest saw no secret anywhere.
    let body = data["body"].as_str().unwrap();
    assert!(body.contains("authorization: Bearer [redacted]"), "{body}");
    let everything = format!("{out:?}{}", serde_json::to_string(&diag).unwrap());
    assert!(
        !everything.contains(SECRET),
        "secret visible to the guest or in diagnostics"
    );
    assert_eq!(
        seen[0]
            .headers
            .iter()
            .filter(|(k, _)| k == "authorization")
            .count(),
        1,
        "the guest's own authorization header was replaced, not added to"
    );
    // A tool without the secret grant sends no credential (and plain HTTP
    // never carries one).
    let out = step(
        &host,
        "net_escape",
        json!({"mode": "get", "url": srv.url("/echo")}),
    )
    .await;
    let body = ok(&out).0["observed"]["body"].as_str().unwrap().to_string();
    assert!(
        !body.to_ascii_lowercase().contains("authorization"),
        "{body}"
    );
    // An agent turn using it: trace and WAL rows hold no secret.
    let script = ws.root.join("script.json");
    std::fs::write(
        &script,
        json!({"turns": [
            {"text": "probe", "tool_calls": [{"name": "secret_probe", "arguments": {"url": srv.tls_url("/echo")}}]},
            {"text": "done"}
        ]})
        .to_string(),
    )
    .unwrap();
    let provider = capsaga_agent::scripted::ScriptedProvider::from_file(&script, &ws.root).unwrap();
    let tr =
        capsaga_agent::runner::run_turn(&host, &provider, "probe the API", &Default::default())
            .await
            .unwrap();
    assert!(!format!("{tr:?}").contains(SECRET));
    assert_eq!(srv.count(), 3);
    drop(host);
    assert!(
        state_files_contain(&ws, SECRET).is_empty(),
        "secret written to {:?}",
        state_files_contain(&ws, SECRET)
    );
    // Sanity: the scan does see what was stored (the redacted echo).
    assert!(!state_files_contain(&ws, "[redacted]").is_empty());
}

/// Run a child process without blocking the runtime that serves its requests.
async fn run(mut cmd: std::process::Command) -> std::process::Output {
    tokio::task::spawn_blocking(move || cmd.output().unwrap())
        .await
        .unwrap()
}

#[tokio::test(flavor = "multi_thread")]
async fn the_cli_never_prints_or_logs_the_secret() {
    let srv = TestServer::start().await;
    let tp = srv.tls_addr.port();
    let ws = workspace(
        &["secret_probe"],
        &srv,
        &format!(
            r#"[tools.secret_probe]
grants = ["net:https:127.0.0.1:{tp}", "secret:api@127.0.0.1"]
[secrets.api]
env = "CAPSAGA_TEST_API_TOKEN"
[net]
ca_files = ["ca.pem"]
"#
        ),
    );
    let bin = tokio::task::spawn_blocking(capsaga_tests::capsaga_bin)
        .await
        .unwrap();
    let url = srv.tls_url("/echo");
    let mut cmd = std::process::Command::new(&bin);
    cmd.arg("--config")
        .arg(ws.config())
        .args(["--json", "call", "secret_probe"])
        .arg(json!({ "url": url }).to_string())
        .env("CAPSAGA_TEST_API_TOKEN", SECRET)
        .env("RUST_LOG", "trace");
    let out = run(cmd).await;
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stdout}\n{stderr}");
    assert!(stdout.contains("[redacted]"), "{stdout}");
    assert!(
        !stdout.contains(SECRET) && !stderr.contains(SECRET),
        "{stdout}\n{stderr}"
    );
    assert_eq!(
        srv.requests()[0].header("authorization"),
        Some(SECRET),
        "the env-provided secret was sent"
    );
    // Without the variable the host refuses to start, naming the variable only.
    let mut cmd = std::process::Command::new(&bin);
    cmd.arg("--config")
        .arg(ws.config())
        .args(["tools", "list"])
        .env_remove("CAPSAGA_TEST_API_TOKEN");
    let out = run(cmd).await;
    assert_eq!(out.status.code(), Some(3));
    assert!(String::from_utf8_lossy(&out.stderr).contains("CAPSAGA_TEST_API_TOKEN"));
    assert!(state_files_contain(&ws, SECRET).is_empty());
}
