//! `capsaga-bench --otel` (issue 30): what exporting spans costs a tool
//! call. The same steps (the do-nothing built-in of `--wal`, through the
//! door: BEGIN with its pre-image, execute, COMMIT; an `execute_tool` and a
//! `saga.step` span each) run under three subscribers, interleaved round by
//! round so that the machine's load falls on all three alike:
//!
//! 1. export off: the metrics layer only (what every process has);
//! 2. export on, to a local OTLP receiver on 127.0.0.1 that answers 200;
//! 3. export on, to a collector that accepts connections and never
//!    answers (its batches wait for the export timeout; spans queue, then
//!    are dropped and counted).
//!
//! Figures: median µs per step of each, and the ratios of 2 and 3 to 1.
//! Everything runs on one current-thread runtime (the exporter's requests
//! included), so the export's own work is inside the figures.

use super::exit;
use super::render::Out;
use super::wal::{Nop, saga, workspace};
use capsaga_door::dispatch::Dispatcher;
use capsaga_door::host::Host;
use capsaga_telemetry::export::{DEFAULT_QUEUE, Settings};
use capsaga_telemetry::{Metrics, Telemetry};
use serde::Serialize;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};
use tracing_subscriber::layer::SubscriberExt;

/// Measured rounds (after one warm-up round).
const ROUNDS: usize = 15;

#[derive(Debug, Serialize)]
struct Mode {
    name: &'static str,
    us_per_step: f64,
    x_export_off: f64,
    spans_dropped: u64,
    export_failures: u64,
}

#[derive(Debug, Serialize)]
struct OtelReport {
    steps_per_round: u32,
    rounds: usize,
    receiver_requests: u64,
    modes: Vec<Mode>,
}

pub(crate) async fn run(out: &Out, calls: u32) -> u8 {
    let calls = calls.max(1);
    let r = tokio::task::spawn_blocking(move || measure(calls)).await;
    match r {
        Ok(Ok(report)) if out.json => {
            out.json(&report);
            exit::OK
        }
        Ok(Ok(r)) => {
            outln!(
                "otel: {} steps per mode and round, {} rounds interleaved; the local receiver took {} requests",
                r.steps_per_round,
                r.rounds,
                r.receiver_requests
            );
            for m in &r.modes {
                outln!(
                    "  {:<44} {:>9.1} µs/step  {:>5.2} x export off  (dropped {}, failed batches {})",
                    m.name,
                    m.us_per_step,
                    m.x_export_off,
                    m.spans_dropped,
                    m.export_failures
                );
            }
            exit::OK
        }
        Ok(Err(e)) => {
            errln!("capsaga-bench --otel: {e}");
            exit::INTERNAL
        }
        Err(e) => {
            errln!("capsaga-bench --otel: {e}");
            exit::INTERNAL
        }
    }
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v.get(v.len() / 2).copied().unwrap_or(f64::NAN)
}

/// The silent collector: accepts and never answers (the thread ends with
/// the process; it holds nothing but the sockets). Its traces URL.
fn silent_collector() -> Result<String, String> {
    let dead = std::net::TcpListener::bind("127.0.0.1:0").map_err(|e| e.to_string())?;
    let dead_url = format!(
        "http://{}/v1/traces",
        dead.local_addr().map_err(|e| e.to_string())?
    );
    std::thread::spawn(move || {
        let mut held = Vec::new();
        for c in dead.incoming() {
            held.push(c);
        }
    });
    Ok(dead_url)
}

fn measure(calls: u32) -> Result<OtelReport, String> {
    let dir = tempfile::tempdir().map_err(|e| e.to_string())?;
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| e.to_string())?;
    let config = workspace(dir.path())?;
    let door = rt.block_on(async {
        let host = Host::open(&config).await.map_err(|e| e.to_string())?;
        host.registry
            .register_builtin(&host.sandbox, &host.config.policy, Arc::new(Nop))
            .map_err(|e| e.to_string())?;
        Ok::<_, String>(Dispatcher::new(host))
    })?;
    // The local receiver: answers every export with 200.
    let received = Arc::new(AtomicU64::new(0));
    let counter = received.clone();
    let app = axum::Router::new().route(
        "/v1/traces",
        axum::routing::post(move |_body: axum::body::Bytes| {
            counter.fetch_add(1, Ordering::Relaxed);
            async { axum::http::StatusCode::OK }
        }),
    );
    let listener = rt
        .block_on(tokio::net::TcpListener::bind("127.0.0.1:0"))
        .map_err(|e| e.to_string())?;
    let local = format!(
        "http://{}/v1/traces",
        listener.local_addr().map_err(|e| e.to_string())?
    );
    let server = rt.spawn(async move {
        let _ = axum::serve(listener, app).await;
    });
    let dead_url = silent_collector()?;
    let modes: [(&'static str, Option<String>); 3] = [
        ("export off (metrics only)", None),
        ("export on, local receiver", Some(local)),
        ("export on, collector that never answers", Some(dead_url)),
    ];
    let mut subs = Vec::new();
    for (_, endpoint) in &modes {
        let metrics = Arc::new(Metrics::new());
        let settings = Settings {
            export: endpoint.is_some(),
            endpoint: endpoint.clone(),
            json: false,
            queue: DEFAULT_QUEUE,
            timeout: Duration::from_secs(10),
            shutdown: Duration::from_millis(200),
        };
        let t = Telemetry::with(settings, rt.handle().clone(), metrics.clone())
            .map_err(|e| e.to_string())?;
        let dispatch = tracing::Dispatch::new(tracing_subscriber::registry().with(t.layer()));
        subs.push((dispatch, t, metrics));
    }
    let mut times: Vec<Vec<f64>> = vec![Vec::new(); modes.len()];
    let mut next = 0u32;
    for round in 0..=ROUNDS {
        for (i, (dispatch, _, _)) in subs.iter().enumerate() {
            let t0 = Instant::now();
            tracing::dispatcher::with_default(dispatch, || {
                rt.block_on(saga(&door, "bench_step", next, calls))
            })?;
            next += calls;
            if round > 0 {
                times[i].push(t0.elapsed().as_secs_f64() * 1e6 / f64::from(calls));
            }
        }
    }
    let off = median(times[0].clone());
    let mut out = Vec::new();
    for (i, (name, _)) in modes.iter().enumerate() {
        let us = median(times[i].clone());
        out.push(Mode {
            name,
            us_per_step: us,
            x_export_off: us / off,
            spans_dropped: subs[i].2.spans_dropped_total(),
            export_failures: subs[i].2.export_failures_total(),
        });
    }
    // Shut the pipelines down while the runtime runs their requests.
    for (_, t, _) in subs {
        rt.block_on(async {
            let _ = tokio::task::spawn_blocking(move || t.shutdown()).await;
        });
    }
    server.abort();
    Ok(OtelReport {
        steps_per_round: calls,
        rounds: ROUNDS,
        receiver_requests: received.load(Ordering::Relaxed),
        modes: out,
    })
}
