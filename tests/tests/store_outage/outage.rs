//! The scenario every outage runs: three steps held between their effect
//! and their outcome, the store taken out, the steps released (their
//! outcome cannot be written), one session committing during the outage,
//! the store back, the other session committing, and what must follow.

use super::rig::{Ledger, Server};
use capsaga_core::fsm::State;
use capsaga_store::{StepStatus, Store, audit};
use capsaga_tests::mcp_rig::{http, http_builder};
use capsaga_tests::{TestWorkspace, wait_until_async};
use rmcp::model::{CallToolRequestParams, CallToolResult, ClientConfig};
use rmcp::service::RunningService;
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::{RoleClient, ServiceExt};
use serde_json::{Value, json};
use std::sync::Arc;

/// How the store is taken out and brought back.
pub trait Fault {
    /// Take the store out: every write of the server fails from now on.
    fn apply(&mut self);
    /// Bring it back.
    fn lift(&mut self);
}

type Client = RunningService<RoleClient, ClientConfig>;

async fn session(url: String) -> Client {
    let http = http_builder()
        .pool_max_idle_per_host(0)
        .build()
        .expect("an HTTP client");
    let transport = StreamableHttpClientTransport::with_client(
        http,
        StreamableHttpClientTransportConfig::with_uri(url),
    );
    ClientConfig::default()
        .serve(transport)
        .await
        .expect("the session starts")
}

async fn call(client: &Client, tool: &str, args: Value) -> Result<CallToolResult, String> {
    client
        .call_tool(
            CallToolRequestParams::new(tool.to_string())
                .with_arguments(args.as_object().cloned().unwrap_or_default()),
        )
        .await
        .map_err(|e| e.to_string())
}

/// The saga whose step wrote to `ledger`, with its step's status.
async fn saga_of(store: &dyn Store, ledger: &Ledger) -> Option<(String, State, StepStatus)> {
    for s in store.sagas(1000).await.ok()? {
        let steps = store.steps(&s.saga_id).await.ok()?;
        if let Some(st) = steps.iter().find(|st| st.args["path"] == ledger.path) {
            return Some((s.saga_id.clone(), s.state, st.status));
        }
    }
    None
}

/// Run the scenario on `server` with `fault`; `store` opens the server's
/// store for the test to read (after the outage).
pub async fn run<F, S, Fut>(ws: &TestWorkspace, server: &mut Server, fault: &mut F, store: S)
where
    F: Fault,
    S: Fn() -> Fut,
    Fut: std::future::Future<Output = Arc<dyn Store>>,
{
    let early = Ledger::new(ws, "early");
    let late = Ledger::new(ws, "late");
    let rest = Ledger::new(ws, "rest");
    let a = session(server.url("/mcp")).await;
    let b = session(server.url("/mcp")).await;
    // Three steps held after their effect (BEGIN is durable before a tool
    // runs): two MCP sessions' calls and a REST turn's.
    let (a, b) = (Arc::new(a), Arc::new(b));
    let held_a = {
        let (a, args) = (a.clone(), early.held_args("early"));
        tokio::spawn(async move { call(&a, "ledger", args).await })
    };
    let held_b = {
        let (b, args) = (b.clone(), late.held_args("late"));
        tokio::spawn(async move { call(&b, "ledger", args).await })
    };
    let turn = {
        let url = server.url("/v1/turns");
        tokio::spawn(async move {
            let r = http()
                .post(url)
                .json(&json!({"task": "append to the ledger"}))
                .send()
                .await
                .expect("the turn is answered");
            let status = r.status().as_u16();
            (status, r.text().await.unwrap_or_default())
        })
    };
    for l in [&early, &late, &rest] {
        l.wait_held();
    }
    // The store goes out; the steps return; their outcome cannot be written.
    fault.apply();
    for l in [&early, &late, &rest] {
        l.release();
    }
    let ra = held_a.await.expect("task");
    let rb = held_b.await.expect("task");
    let (status, body) = turn.await.expect("task");
    assert!(
        ra.is_err() && rb.is_err(),
        "the calls whose outcome could not be written fail: {ra:?} {rb:?}"
    );
    assert_ne!(status, 200, "the turn whose call failed fails: {body}");
    // Session A commits while the store is still out: it cannot, and its
    // saga is let go in doubt.
    let ca = call(&a, "capsaga_commit", json!({})).await;
    assert!(
        ca.as_ref()
            .map(|r| r.is_error == Some(true))
            .unwrap_or(true),
        "a commit during the outage is not acknowledged: {ca:?}"
    );
    // The store comes back.
    fault.lift();
    assert!(server.running(), "the server stayed up");
    // Session B commits now: refused, its saga rolled back instead.
    let cb = call(&b, "capsaga_commit", json!({}))
        .await
        .expect("the commit is answered");
    let sc = cb.structured_content.clone().unwrap_or(Value::Null);
    assert_eq!(cb.is_error, Some(true), "committed a step in doubt: {cb:?}");
    assert_ne!(sc["saga_state"], "Done", "{sc}");
    assert_eq!(sc["committed"], false, "{sc}");
    // Every saga ends rolled back, never Done: A's and the turn's (let go
    // in doubt) by the server once the store answers, B's by its commit.
    let store = store().await;
    for l in [&early, &late, &rest] {
        wait_until_async(&format!("the saga of {} rolled back", l.path), || {
            let (store, l) = (store.clone(), l.clone());
            async move {
                matches!(
                    saga_of(&*store, &l).await,
                    Some((_, State::FailedRolledBack, StepStatus::Compensated))
                )
            }
        })
        .await;
        assert!(
            l.lines().is_empty(),
            "{}: the effect of the step in doubt stayed: {:?}",
            l.path,
            l.lines()
        );
        let j = l.journal();
        assert!(
            j.iter().filter(|x| x.starts_with("execute ")).count() == 1
                && j.iter().any(|x| x.starts_with("compensate ")),
            "{}: {j:?}",
            l.path
        );
    }
    for s in store.sagas(1000).await.expect("sagas") {
        assert_ne!(s.state, State::Done, "saga {} is Done", s.saga_id);
    }
    let report = audit::verify(&*store, None).await.expect("audit");
    assert!(report.ok(), "{report:#?}");
    // The server serves again: a new session commits a step.
    let c = session(server.url("/mcp")).await;
    let again = Ledger::new(ws, "again");
    let r = call(&c, "ledger", json!({"path": again.path, "entry": "again"}))
        .await
        .expect("a call after the outage");
    assert_ne!(r.is_error, Some(true), "{r:?}");
    let r = call(&c, "capsaga_commit", json!({}))
        .await
        .expect("a commit after the outage");
    assert_eq!(
        r.structured_content.unwrap_or(Value::Null)["saga_state"],
        "Done"
    );
    assert_eq!(again.lines().len(), 1);
}
