//! An unreachable collector never fails or holds up the spans' end (and so
//! the tool calls they measure): the queue is bounded, what does not fit is
//! dropped and counted, failed exports are counted; the metrics' last push
//! does not hold up the exit beyond its bound. Real TCP sockets on
//! 127.0.0.1: a port that refuses, and a listener that accepts and never
//! answers.

use capsaga_telemetry::export::Settings;
use capsaga_telemetry::{Metrics, Telemetry};
use std::net::TcpListener;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tracing_subscriber::layer::SubscriberExt;

fn settings(endpoint: String, queue: usize) -> Settings {
    Settings {
        export: true,
        endpoint: Some(endpoint),
        json: false,
        queue,
        timeout: Duration::from_secs(30),
        shutdown: Duration::from_millis(200),
    }
}

/// End `n` tool-call spans under `telemetry`'s layer.
fn end_spans(telemetry: &Telemetry, n: usize) {
    let sub = tracing_subscriber::registry().with(telemetry.layer());
    tracing::subscriber::with_default(sub, || {
        for i in 0..n {
            let s = capsaga_telemetry::spans::execute_tool("time_now");
            capsaga_telemetry::spans::outcome(&s, "committed");
            s.record("capsaga.step.seq", i as u64);
            drop(s);
        }
    });
}

fn wait_until(what: &str, mut cond: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(120);
    while !cond() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn a_silent_collector_fills_the_bounded_queue_and_the_rest_is_dropped_and_counted() {
    let rt = tokio::runtime::Runtime::new().unwrap();
    // Accepts connections and never answers: the first export hangs (up to
    // its 30 s timeout) and holds its queue places.
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}/v1/traces", listener.local_addr().unwrap());
    let held = std::thread::spawn(move || {
        let mut conns = Vec::new();
        for c in listener.incoming().take(4) {
            conns.push(c);
        }
        conns
    });
    let metrics = Arc::new(Metrics::new());
    let t = Telemetry::with(settings(url, 4), rt.handle().clone(), metrics.clone()).unwrap();
    assert!(t.exporting());
    end_spans(&t, 100);
    // Every span beyond the 4 queue places was dropped, none waited.
    assert_eq!(metrics.spans_dropped_total(), 96);
    let text = metrics.encode();
    assert!(
        text.contains("capsaga_otel_spans_dropped_total 96"),
        "{text}"
    );
    // The tool-call metrics counted all 100 calls regardless.
    assert!(
        text.contains(r#"capsaga_tool_calls_total{tool="(unknown)",outcome="committed"} 100"#),
        "{text}"
    );
    // Shutdown is bounded by its own timeout, not the export's 30 s.
    let t0 = Instant::now();
    t.shutdown();
    assert!(t0.elapsed() < Duration::from_secs(25), "{:?}", t0.elapsed());
    drop(held);
}

#[test]
fn a_refusing_port_fails_exports_which_are_counted_and_frees_the_queue() {
    let rt = tokio::runtime::Runtime::new().unwrap();
    // A port nothing listens on: bind, note it, close.
    let port = {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    let url = format!("http://127.0.0.1:{port}/v1/traces");
    let metrics = Arc::new(Metrics::new());
    let t = Telemetry::with(settings(url, 8), rt.handle().clone(), metrics.clone()).unwrap();
    end_spans(&t, 8);
    wait_until("a failed export to be counted", || {
        metrics.export_failures_total() >= 1
    });
    // The failed batch gave its places back: more spans are accepted.
    let dropped = metrics.spans_dropped_total();
    wait_until("the queue to drain", || {
        end_spans(&t, 1);
        metrics.spans_dropped_total() == dropped
    });
    t.shutdown();
}

/// The metrics' last push at exit to a collector that never answers: the
/// shutdown still returns after its own bound, not after the SDK reader's
/// fixed 5 s wait or the export's 30 s timeout; the calls were counted all
/// the same.
#[test]
fn a_silent_metrics_collector_does_not_hold_the_shutdown() {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}/v1/metrics", listener.local_addr().unwrap());
    let held = std::thread::spawn(move || {
        let mut conns = Vec::new();
        for c in listener.incoming().take(2) {
            conns.push(c);
        }
        conns
    });
    let metrics = Arc::new(Metrics::new());
    let mut off = settings(String::new(), 8);
    off.export = false;
    let pushed = capsaga_telemetry::otlp_metrics::MetricsSettings {
        export: true,
        endpoint: Some(url),
        json: false,
        interval: Duration::from_secs(3600),
        timeout: Duration::from_secs(30),
    };
    let t = Telemetry::with(off, rt.handle().clone(), metrics.clone())
        .unwrap()
        .with_metrics_push(&pushed, rt.handle().clone())
        .unwrap();
    assert!(t.pushing_metrics() && !t.exporting());
    end_spans(&t, 3);
    assert!(
        metrics
            .encode()
            .contains(r#"capsaga_tool_calls_total{tool="(unknown)",outcome="committed"} 3"#)
    );
    // The last push waits on the silent collector (the SDK's reader gives
    // it up to 5 s) on a thread of its own; the shutdown must return while
    // that thread is still waiting, not after it.
    t.shutdown();
    assert!(
        threads_named("capsaga-otel-me") > 0,
        "the shutdown waited for the push to the silent collector"
    );
    drop(held);
}

/// How many threads of this process have a name starting with `prefix`
/// (Linux keeps the first 15 bytes of a thread's name in `comm`).
fn threads_named(prefix: &str) -> usize {
    std::fs::read_dir("/proc/self/task")
        .unwrap()
        .filter_map(|t| std::fs::read_to_string(t.ok()?.path().join("comm")).ok())
        .filter(|name| name.starts_with(prefix))
        .count()
}
