//! `GET /metrics` (issue 30) on a real `capsaga serve`: an operator token
//! reads the OpenMetrics text Prometheus scrapes, with the MCP call just
//! made counted (tool call, MCP request duration, sessions gauge); a
//! client token gets 403 and no token 401.

use super::http;
use super::wire2026::serve_with_tokens;
use capsaga_core::principal::Role;
use capsaga_tests::TestWorkspace;
use capsaga_tests::mcp_rig::{YesMan, call, connect_as};
use serde_json::json;
use tracing_subscriber::layer::SubscriberExt;

const ALICE: &str = "alice-operator-metrics-0123456789";
const BOB: &str = "bob-client-metrics-0123456789abcd";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_operator_scrapes_metrics_and_a_client_cannot() {
    // The binary's subscriber (`main.rs`) in this test process: the
    // metrics layer over the process's metrics.
    let _ = tracing::subscriber::set_global_default(tracing_subscriber::registry().with(
        capsaga_telemetry::metrics::MetricsLayer::new(capsaga_telemetry::metrics::global().clone()),
    ));
    let ws = TestWorkspace::new(&["time_now"], "[tools.time_now]\n");
    let (_host, srv) = serve_with_tokens(
        &ws,
        &[("alice", Role::Operator, ALICE), ("bob", Role::Client, BOB)],
    )
    .await;
    let bob = connect_as(srv.url("/mcp"), Some(BOB), YesMan::default())
        .await
        .unwrap();
    let r = call(&bob, "time_now", &json!({})).await;
    assert_ne!(r.is_error, Some(true), "{r:?}");

    let c = http();
    let r = c.get(srv.url("/metrics")).send().await.unwrap();
    assert_eq!(r.status().as_u16(), 401, "no token");
    let r = c
        .get(srv.url("/metrics"))
        .bearer_auth(BOB)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 403, "a client cannot scrape");
    let r = c
        .get(srv.url("/metrics"))
        .bearer_auth(ALICE)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 200);
    let ct = r.headers()["content-type"].to_str().unwrap().to_string();
    assert!(ct.starts_with("application/openmetrics-text"), "{ct}");
    let text = r.text().await.unwrap();
    assert!(
        text.contains(r#"capsaga_tool_calls_total{tool="time_now",outcome="committed"}"#),
        "{text}"
    );
    assert!(
        text.contains(
            r#"capsaga_operation_duration_seconds_count{operation="mcp",name="tools/call"}"#
        ),
        "{text}"
    );
    assert!(text.contains("capsaga_sessions 1"), "{text}");
    assert!(text.contains("capsaga_approvals_pending 0"), "{text}");
    assert!(text.ends_with("# EOF\n"));
    // The scrape holds no secret: no token, no argument.
    assert!(!text.contains(ALICE) && !text.contains(BOB));
}
