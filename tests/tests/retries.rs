//! No automatic retry of a step that may have had its effect (issue 13,
//! item 3): `http_request` (meta `idempotent = false`) approved once, to a
//! real server on 127.0.0.1 answering 5xx/429 with a retriable error, must
//! reach the server exactly once, for every write method; the step fails
//! and the saga rolls back, and the error says why it was not retried. A
//! request that provably left nothing (connection refused: no connection
//! was ever made) is retried, as is an idempotent tool
//! (`saga_engine::retriable_errors_are_retried_with_the_same_key_and_bounded`).

use async_trait::async_trait;
use capsaga_core::principal::{Principal, Role};
use capsaga_door::dispatch::{Approver, Args, Call, Dispatcher, Outcome};
use capsaga_store::{ApprovalRow, Scope};
use capsaga_tests::TestWorkspace;
use capsaga_tests::http_server::TestServer;
use serde_json::json;

/// Approves every call (a human who said yes once).
struct Yes;

#[async_trait]
impl Approver for Yes {
    fn who(&self) -> Option<Principal> {
        Some(Principal::new("test:yes", Role::Operator))
    }

    async fn ask(&self, _a: &ApprovalRow) -> Option<bool> {
        Some(true)
    }
}

fn workspace(srv: &TestServer, extra_port: u16) -> TestWorkspace {
    let tp = srv.tls_addr.port();
    let ws = TestWorkspace::new(
        &["http_request"],
        &format!(
            "[tools.http_request]\ngrants = [\"net:https:127.0.0.1:{tp}\", \"net:https:127.0.0.1:{extra_port}\"]\n[net]\nca_files = [\"ca.pem\"]\n"
        ),
    );
    std::fs::write(ws.root.join("ca.pem"), &srv.ca_pem).unwrap();
    ws
}

/// Submit one approved call as the only step of a new saga; the outcome
/// and the number of RETRY records logged for it.
async fn approved_call(door: &Dispatcher, args: serde_json::Value) -> (Outcome, usize) {
    let mut saga = door.start(Scope::Call, "retry test", None).await.unwrap();
    let out = door
        .submit(
            &mut saga,
            Call::new("http_request", Args::Value(&args)).with_approver(&Yes),
        )
        .await
        .unwrap()
        .outcome;
    let retries = door
        .host()
        .store
        .log(Some(saga.id()))
        .await
        .unwrap()
        .iter()
        .filter(|r| r.record == "RETRY")
        .count();
    let _ = door.abort(&mut saga).await;
    (out, retries)
}

#[tokio::test(flavor = "multi_thread")]
async fn a_non_idempotent_write_reaches_the_server_once_whatever_it_answers() {
    let srv = TestServer::start().await;
    let ws = workspace(&srv, srv.tls_addr.port());
    let door = Dispatcher::new(ws.host().await);
    let cases = [
        ("POST", 502),
        ("POST", 503),
        ("POST", 429),
        ("PUT", 500),
        ("PATCH", 504),
        ("DELETE", 502),
    ];
    for (i, (method, status)) in cases.into_iter().enumerate() {
        let path = format!("/status/{status}?case={i}");
        let args = json!({"method": method, "url": srv.tls_url(&path), "json": {"n": i}});
        let (out, retries) = approved_call(&door, args).await;
        let sent = srv
            .requests()
            .iter()
            .filter(|r| r.method == method && r.path == path)
            .count();
        assert_eq!(sent, 1, "{method} answered {status}: sent {sent} times");
        assert_eq!(retries, 0, "{method} {status}: no RETRY record");
        let Outcome::Failed { error, .. } = out else {
            panic!("{method} {status}: the step fails, got {out:?}");
        };
        assert!(!error.retriable, "{method} {status}: {error:?}");
        assert!(
            error.message.contains("not retried"),
            "{method} {status}: the error says why: {}",
            error.message
        );
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_request_that_never_left_is_retried() {
    let srv = TestServer::start().await;
    // A port with nothing listening: the connection is refused, so no byte
    // of the request left the host.
    let closed = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    let ws = workspace(&srv, closed);
    let door = Dispatcher::new(ws.host().await);
    let args =
        json!({"method": "POST", "url": format!("https://127.0.0.1:{closed}/items"), "json": {}});
    let (out, retries) = approved_call(&door, args).await;
    assert!(matches!(out, Outcome::Failed { .. }), "{out:?}");
    assert_eq!(
        retries, 2,
        "retried up to the policy's 3 attempts: nothing was sent"
    );
}
