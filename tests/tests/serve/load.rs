//! Load: 200 concurrent MCP tool calls over Streamable HTTP (rmcp's client,
//! 200 sessions sharing one host): `fs_write` into 100 distinct files and
//! 100 `time_now`. All complete, the log has exactly one BEGIN and one
//! COMMIT per step, nothing is lost or duplicated. Then the same calls
//! through the library directly (the door, 200 concurrent sagas) for the
//! figures: calls/s, p50 and p99, printed.

use super::start;
use capsaga_door::dispatch::{Args, Call, Dispatcher, Outcome};
use capsaga_server::HttpOptions;
use capsaga_store::Scope;
use capsaga_tests::TestWorkspace;
use rmcp::ServiceExt;
use rmcp::model::{CallToolRequestParams, ClientConfig};
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use serde_json::{Map, Value, json};
use std::collections::BTreeMap;
use std::time::{Duration, Instant};

/// Concurrent calls.
pub const CALLS: usize = 200;

pub const POLICY: &str = r#"
[tools.fs_write]
grants = ["fs:write:~/ws/**"]
[tools.time_now]
"#;

/// The arguments of call `i`: even ones write `f<i>.txt`, odd ones ask the time.
pub fn call_of(ws_path: &str, i: usize) -> (&'static str, Map<String, Value>) {
    if i.is_multiple_of(2) {
        let args = json!({"path": format!("{ws_path}/f{i}.txt"), "content": format!("file {i}\n")});
        ("fs_write", args.as_object().cloned().unwrap_or_default())
    } else {
        ("time_now", Map::new())
    }
}

/// p50, p99 of `v` (sorted in place).
pub fn percentiles(v: &mut [Duration]) -> (Duration, Duration) {
    v.sort();
    let at = |q: f64| v[((v.len() as f64 - 1.0) * q).round() as usize];
    (at(0.50), at(0.99))
}

/// One MCP session: connect, one call, commit. Its call's latency.
pub async fn one_session(
    url: String,
    tool: &'static str,
    args: Map<String, Value>,
) -> Result<Duration, String> {
    // rmcp's default client would need a TLS provider compiled in; plain
    // HTTP needs none (no idle pooling, as rmcp's default).
    let http = super::http_builder()
        .pool_max_idle_per_host(0)
        .build()
        .map_err(|e| format!("client: {e}"))?;
    let transport = StreamableHttpClientTransport::with_client(
        http,
        StreamableHttpClientTransportConfig::with_uri(url),
    );
    let client = ClientConfig::default()
        .serve(transport)
        .await
        .map_err(|e| format!("connect: {e}"))?;
    let t = Instant::now();
    let r = client
        .call_tool(CallToolRequestParams::new(tool).with_arguments(args))
        .await
        .map_err(|e| format!("call: {e}"))?;
    let took = t.elapsed();
    if r.is_error == Some(true) {
        return Err(format!("{tool}: {:?}", r.content));
    }
    let c = client
        .call_tool(CallToolRequestParams::new("capsaga_commit"))
        .await
        .map_err(|e| format!("commit: {e}"))?;
    if c.is_error == Some(true) {
        return Err(format!("commit: {:?}", c.content));
    }
    let _ = client.cancel().await;
    Ok(took)
}

fn report(what: &str, lat: &mut [Duration], wall: Duration) -> f64 {
    let (p50, p99) = percentiles(lat);
    let rate = lat.len() as f64 / wall.as_secs_f64();
    eprintln!(
        "load: {what}: {} calls in {:.2} s = {rate:.1} calls/s, p50 {:.1} ms, p99 {:.1} ms",
        lat.len(),
        wall.as_secs_f64(),
        p50.as_secs_f64() * 1e3,
        p99.as_secs_f64() * 1e3
    );
    rate
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_hundred_concurrent_mcp_calls_all_complete_once() {
    let ws = TestWorkspace::new(&["fs_write", "time_now"], POLICY);
    let host = ws.host().await;
    let srv = start(
        host.clone(),
        HttpOptions::new("127.0.0.1:0".parse().unwrap()),
    )
    .await;
    let base = ws.ws_path("");
    let base = base.trim_end_matches('/').to_string();
    let t0 = Instant::now();
    let tasks: Vec<_> = (0..CALLS)
        .map(|i| {
            let (tool, args) = call_of(&base, i);
            tokio::spawn(one_session(srv.url("/mcp"), tool, args))
        })
        .collect();
    let mut lat = Vec::new();
    let mut failed = Vec::new();
    for t in tasks {
        match t.await.unwrap() {
            Ok(d) => lat.push(d),
            Err(e) => failed.push(e),
        }
    }
    let wall = t0.elapsed();
    assert!(
        failed.is_empty(),
        "{} failed: {:?}",
        failed.len(),
        &failed[..failed.len().min(5)]
    );
    let mcp_rate = report("MCP over HTTP (200 sessions)", &mut lat, wall);

    // Nothing lost, nothing duplicated.
    for i in (0..CALLS).step_by(2) {
        assert_eq!(
            std::fs::read_to_string(ws.ws().join(format!("f{i}.txt"))).unwrap(),
            format!("file {i}\n")
        );
    }
    let log = capsaga_store::LogStore::log(&*host.store, None)
        .await
        .unwrap();
    let mut per_step: BTreeMap<(String, u64), Vec<String>> = BTreeMap::new();
    for r in &log {
        if let Some(s) = r.step_seq
            && (r.record == "BEGIN" || r.record == "COMMIT")
        {
            per_step
                .entry((r.saga_id.clone(), s))
                .or_default()
                .push(r.record.clone());
        }
    }
    assert_eq!(per_step.len(), CALLS, "one step per call");
    for (k, v) in &per_step {
        assert_eq!(v, &["BEGIN", "COMMIT"], "{k:?}");
    }
    let sagas = capsaga_store::SagaStore::sagas(&*host.store, 10_000)
        .await
        .unwrap();
    let mcp: Vec<_> = sagas.iter().filter(|s| s.origin == "mcp").collect();
    assert_eq!(mcp.len(), CALLS);
    assert!(
        mcp.iter().all(|s| s.state.to_string() == "Done"),
        "every session's saga committed"
    );
    drop(srv);

    // The same calls through the library directly.
    let door = Dispatcher::new(host.clone());
    std::fs::create_dir_all(ws.ws().join("lib")).unwrap();
    let t0 = Instant::now();
    let tasks: Vec<_> = (0..CALLS)
        .map(|i| {
            let door = door.clone();
            let (tool, args) = call_of(&format!("{base}/lib"), i);
            tokio::spawn(async move {
                let mut saga = door.start(Scope::Call, "lib", None).await.unwrap();
                let args = Value::Object(args);
                let t = Instant::now();
                let s = door
                    .submit(&mut saga, Call::new(tool, Args::Value(&args)))
                    .await
                    .unwrap();
                let took = t.elapsed();
                assert!(
                    matches!(s.outcome, Outcome::Committed { .. }),
                    "{:?}",
                    s.outcome
                );
                door.finish(&mut saga).await.unwrap();
                took
            })
        })
        .collect();
    let mut lat = Vec::new();
    for t in tasks {
        lat.push(t.await.unwrap());
    }
    let lib_rate = report("library (200 sagas)", &mut lat, t0.elapsed());
    eprintln!("load: MCP over HTTP / library = {:.2}", mcp_rate / lib_rate);
}
