//! `capsaga-bench --mcp` (issue 26): an MCP `tools/call` of `time_now` over
//! HTTP against a real `capsaga serve` on 127.0.0.1 in this process, on
//! the stateful wire (2025-11-25: one session, the call a step of the
//! session's saga) and the stateless one (2026-07-28: no session, the call
//! a saga of its own), next to the same work through the library (the
//! door) in the same run: a step in an open saga (the stateful call's
//! work) and a saga of one step (the stateless call's). Then 200
//! concurrent stateless clients. The client runs on a thread and a tokio
//! runtime of its own, as a separate program would. Rounds are interleaved
//! (a batch of each path per round) so that a change of load hits every
//! path alike; latencies are p50/p99 over every call of a path. Nothing is
//! asserted.

use capsaga::exit;
use capsaga::render::Out;
use capsaga_door::dispatch::{Args, Call, Dispatcher, Outcome, Scope};
use capsaga_door::host::Host;
use capsaga_server::{HttpOptions, app, conn};
use serde::Serialize;
use serde_json::{Value, json};
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Measured rounds (after one warm-up round).
const ROUNDS: usize = 10;
/// Calls per path per round.
const BATCH: usize = 50;
/// Concurrent clients of the load, and calls each.
const CLIENTS: usize = 200;
const CALLS_EACH: usize = 5;

const REV: &str = "2026-07-28";

/// One path's latencies, milliseconds.
#[derive(Debug, Clone, Serialize)]
struct Path50 {
    name: &'static str,
    calls: usize,
    p50_ms: f64,
    p99_ms: f64,
}

/// The report (`--json`).
#[derive(Debug, Clone, Serialize)]
struct McpReport {
    paths: Vec<Path50>,
    /// Stateful HTTP p50 minus the library step p50, ms.
    stateful_over_library_ms: f64,
    /// Stateless HTTP p50 minus the library one-step saga p50, ms.
    stateless_over_library_ms: f64,
    concurrent_clients: usize,
    concurrent_calls: usize,
    concurrent_errors: usize,
    concurrent_p50_ms: f64,
    concurrent_p99_ms: f64,
    concurrent_calls_per_s: f64,
}

fn pct(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i.min(sorted.len() - 1)]
}

fn summary(name: &'static str, mut v: Vec<f64>) -> Path50 {
    v.sort_by(f64::total_cmp);
    Path50 {
        name,
        calls: v.len(),
        p50_ms: pct(&v, 0.5),
        p99_ms: pct(&v, 0.99),
    }
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

/// A plain-HTTP client (reqwest is built without a default TLS provider:
/// ring is installed once for the process, as `agent::http` does).
pub(crate) fn client() -> Result<reqwest::Client, String> {
    let _ = rustls::crypto::ring::default_provider().install_default();
    reqwest::Client::builder()
        .no_proxy()
        .build()
        .map_err(|e| e.to_string())
}

fn stateless_meta() -> Value {
    json!({
        "io.modelcontextprotocol/protocolVersion": REV,
        "io.modelcontextprotocol/clientInfo": {"name": "capsaga-bench", "version": "1"},
        "io.modelcontextprotocol/clientCapabilities": {},
    })
}

/// The JSON-RPC answer in a JSON or SSE body.
fn answer(body: &str) -> Option<Value> {
    if let Ok(v) = serde_json::from_str::<Value>(body) {
        return Some(v);
    }
    body.lines()
        .filter_map(|l| l.strip_prefix("data:"))
        .filter_map(|d| serde_json::from_str::<Value>(d.trim()).ok())
        .rfind(|v| v.get("id").is_some())
}

/// One `tools/call` of `time_now`; `session`: the stateful wire's session
/// id, else the stateless wire. Errs on anything but a successful result.
pub(crate) async fn call(
    c: &reqwest::Client,
    url: &str,
    session: Option<&str>,
) -> Result<(), String> {
    let mut req = c
        .post(url)
        .header("Accept", "application/json, text/event-stream");
    let mut params = json!({"name": "time_now", "arguments": {}});
    match session {
        Some(s) => {
            req = req
                .header("Mcp-Session-Id", s)
                .header("MCP-Protocol-Version", "2025-11-25");
        }
        None => {
            req = req
                .header("MCP-Protocol-Version", REV)
                .header("Mcp-Method", "tools/call")
                .header("Mcp-Name", "time_now");
            params["_meta"] = stateless_meta();
        }
    }
    let r = req
        .json(&json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": params}))
        .send()
        .await
        .map_err(|e| e.to_string())?;
    let status = r.status();
    let body = r.text().await.map_err(|e| e.to_string())?;
    let v = answer(&body).ok_or_else(|| format!("{status}: {body}"))?;
    if v["result"]["isError"] == json!(false) {
        Ok(())
    } else {
        Err(format!("{status}: {v}"))
    }
}

/// `initialize` + `notifications/initialized`: the session id.
pub(crate) async fn open_session(c: &reqwest::Client, url: &str) -> Result<String, String> {
    let r = c
        .post(url)
        .header("Accept", "application/json, text/event-stream")
        .json(
            &json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-11-25", "capabilities": {},
            "clientInfo": {"name": "capsaga-bench", "version": "1"}}}),
        )
        .send()
        .await
        .map_err(|e| e.to_string())?;
    let sid = r
        .headers()
        .get("mcp-session-id")
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned)
        .ok_or("no session id")?;
    let _ = r.text().await;
    c.post(url)
        .header("Accept", "application/json, text/event-stream")
        .header("Mcp-Session-Id", &sid)
        .header("MCP-Protocol-Version", "2025-11-25")
        .json(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}))
        .send()
        .await
        .map_err(|e| e.to_string())?;
    Ok(sid)
}

async fn library_step(
    door: &Dispatcher,
    saga: &mut capsaga_door::saga::Saga,
) -> Result<(), String> {
    let s = door
        .submit(saga, Call::new("time_now", Args::Value(&json!({}))))
        .await
        .map_err(|e| e.to_string())?;
    match s.outcome {
        Outcome::Committed { .. } => Ok(()),
        other => Err(format!("{other:?}")),
    }
}

async fn library_saga(door: &Dispatcher) -> Result<(), String> {
    let mut saga = door
        .start(Scope::Call, "bench --mcp", None)
        .await
        .map_err(|e| e.to_string())?;
    library_step(door, &mut saga).await?;
    door.finish(&mut saga).await.map_err(|e| e.to_string())?;
    Ok(())
}

/// `BATCH` timed calls, on the session's wire or (`None`) stateless.
async fn timed_batch(
    c: reqwest::Client,
    url: String,
    session: Option<String>,
) -> Result<Vec<f64>, String> {
    let mut lat = Vec::with_capacity(BATCH);
    for _ in 0..BATCH {
        let t = Instant::now();
        call(&c, &url, session.as_deref()).await?;
        lat.push(ms(t.elapsed()));
    }
    Ok(lat)
}

/// `CLIENTS` concurrent stateless clients, each its own connection: their
/// latencies, the calls that failed, and the seconds from the first
/// client's start to the last one's end.
async fn load(url: String) -> (Vec<f64>, usize, f64) {
    let started = Instant::now();
    let mut tasks = Vec::with_capacity(CLIENTS);
    for _ in 0..CLIENTS {
        let url = url.clone();
        tasks.push(tokio::spawn(async move {
            let mut lat = Vec::new();
            let mut errors = 0usize;
            let Ok(c) = client() else {
                return (lat, CALLS_EACH);
            };
            for _ in 0..CALLS_EACH {
                let t = Instant::now();
                match call(&c, &url, None).await {
                    Ok(()) => lat.push(ms(t.elapsed())),
                    Err(_) => errors += 1,
                }
            }
            (lat, errors)
        }));
    }
    let (mut all, mut errors) = (Vec::new(), 0usize);
    for t in tasks {
        match t.await {
            Ok((lat, e)) => {
                all.extend(lat);
                errors += e;
            }
            Err(_) => errors += CALLS_EACH,
        }
    }
    (all, errors, started.elapsed().as_secs_f64())
}

/// The bench's host in `dir`, with `component` as its one tool
/// (`time_now`).
async fn bench_host(dir: &Path, component: &Path) -> Result<Arc<Host>, String> {
    std::fs::create_dir_all(dir.join("tools")).map_err(|e| e.to_string())?;
    std::fs::copy(component, dir.join("tools/time_now.wasm")).map_err(|e| {
        format!(
            "cannot copy {}: {e} (build it with scripts/build-components, or pass --component)",
            component.display()
        )
    })?;
    let config = dir.join("capsaga.toml");
    std::fs::write(
        &config,
        "home = \".\"\ntools_dir = \"tools\"\nstate_dir = \".capsaga\"\n[tools.time_now]\n",
    )
    .map_err(|e| e.to_string())?;
    Host::open(&config).await.map_err(|e| e.to_string())
}

async fn measure(dir: &Path, component: &Path) -> Result<McpReport, String> {
    let host = bench_host(dir, component).await?;
    let door = Dispatcher::new(Arc::clone(&host));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .map_err(|e| e.to_string())?;
    let bound = listener.local_addr().map_err(|e| e.to_string())?;
    let mut o = HttpOptions::new(bound);
    o.mcp.catalog_poll = None;
    let router = app(Arc::clone(&host), &o, bound);
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let server = tokio::spawn(conn::serve(listener, router, async move {
        let _ = stopped.await;
    }));
    let url = format!("http://{bound}/mcp");
    // The client on a runtime and a thread of its own, as a client program
    // would be: one sharing the server's runtime workers made the HTTP
    // calls 0.4 to 0.7 ms slower at p50 in a release build (2026-12-04).
    let client_rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .thread_name("bench-mcp-client")
        .enable_all()
        .build()
        .map_err(|e| e.to_string())?;
    let joined = |e: tokio::task::JoinError| e.to_string();
    let c = client()?;
    let sid = {
        let (c, url) = (c.clone(), url.clone());
        client_rt
            .spawn(async move { open_session(&c, &url).await })
            .await
            .map_err(joined)??
    };
    let mut open = door
        .start(Scope::Call, "bench --mcp (library steps)", None)
        .await
        .map_err(|e| e.to_string())?;
    let (mut lib_step, mut lib_saga, mut stateful, mut stateless) =
        (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    for round in 0..=ROUNDS {
        let keep = round > 0;
        for _ in 0..BATCH {
            let t = Instant::now();
            library_step(&door, &mut open).await?;
            if keep {
                lib_step.push(ms(t.elapsed()));
            }
        }
        let done = client_rt.spawn(timed_batch(c.clone(), url.clone(), Some(sid.clone())));
        let batch = done.await.map_err(joined)??;
        if keep {
            stateful.extend(batch);
        }
        for _ in 0..BATCH {
            let t = Instant::now();
            library_saga(&door).await?;
            if keep {
                lib_saga.push(ms(t.elapsed()));
            }
        }
        let done = client_rt.spawn(timed_batch(c.clone(), url.clone(), None));
        let batch = done.await.map_err(joined)??;
        if keep {
            stateless.extend(batch);
        }
    }
    door.finish(&mut open).await.map_err(|e| e.to_string())?;
    let (all, errors, wall) = client_rt.spawn(load(url)).await.map_err(joined)?;
    // Not dropped inside the bench's own runtime (tokio refuses to).
    client_rt.shutdown_background();
    let _ = stop.send(());
    let _ = server.await;
    let load = summary("200 clients", all);
    let paths = vec![
        summary("library: a step in an open saga", lib_step),
        summary("HTTP stateful (2025-11-25 session)", stateful),
        summary("library: a saga of one step", lib_saga),
        summary("HTTP stateless (2026-07-28)", stateless),
    ];
    Ok(McpReport {
        stateful_over_library_ms: paths[1].p50_ms - paths[0].p50_ms,
        stateless_over_library_ms: paths[3].p50_ms - paths[2].p50_ms,
        paths,
        concurrent_clients: CLIENTS,
        concurrent_calls: load.calls,
        concurrent_errors: errors,
        concurrent_p50_ms: load.p50_ms,
        concurrent_p99_ms: load.p99_ms,
        concurrent_calls_per_s: load.calls as f64 / wall.max(1e-9),
    })
}

/// Run `capsaga-bench --mcp` with `component` as `time_now`.
pub(crate) async fn run(out: &Out, component: &Path) -> u8 {
    let dir = std::env::temp_dir().join(format!("capsaga-bench-mcp-{}", uuid::Uuid::new_v4()));
    let r = measure(&dir, component).await;
    let _ = std::fs::remove_dir_all(&dir);
    match r {
        Ok(r) if out.json => {
            out.json(&r);
            exit::OK
        }
        Ok(r) => {
            outln!(
                "mcp: tools/call of time_now, {ROUNDS} interleaved rounds of {BATCH} calls per path ({})",
                super::machine()
            );
            for p in &r.paths {
                outln!(
                    "  {:<38} p50 {:>7.3} ms  p99 {:>7.3} ms  ({} calls)",
                    p.name,
                    p.p50_ms,
                    p.p99_ms,
                    p.calls
                );
            }
            outln!(
                "  over the library at p50: stateful +{:.3} ms, stateless +{:.3} ms (goal: <= 1 ms)",
                r.stateful_over_library_ms,
                r.stateless_over_library_ms
            );
            outln!(
                "  {} concurrent stateless clients x {CALLS_EACH} calls: {} ok, {} errors, p50 {:.2} ms, p99 {:.2} ms, {:.0} calls/s",
                r.concurrent_clients,
                r.concurrent_calls,
                r.concurrent_errors,
                r.concurrent_p50_ms,
                r.concurrent_p99_ms,
                r.concurrent_calls_per_s
            );
            exit::OK
        }
        Err(e) => {
            errln!("capsaga-bench --mcp: {e}");
            exit::INTERNAL
        }
    }
}
