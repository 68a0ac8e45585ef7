//! Rule 6: every sink through which text leaves the process scrubs it.

use super::*;

/// Building a sink through which text leaves the process: a log layer, an
/// exporter, the console's router.
const SINKS: &[&str] = &[
    "tracing_subscriber::fmt",
    "fmt::layer(",
    "SpanExporter::builder",
    "MetricExporter::builder",
    "impl SpanExporter",
    "impl<E: SpanExporter> SpanExporter",
    "capsaga_console::router(",
];

/// Writing to stderr directly.
const STDERR: &[&str] = &["eprintln!", "eprint!(", "io::stderr()"];

#[test]
fn every_sink_leaves_through_the_scrubber() {
    let r = root();
    let dirs = [
        ("sandbox", r.join("host/sandbox/src")),
        ("door", r.join("host/door/src")),
        ("agent", r.join("host/agent/src")),
        ("server", r.join("host/server/src")),
        ("cli", r.join("host/cli/src")),
        ("bench", r.join("host/bench/src")),
        ("conformance", r.join("host/conformance/src")),
        ("telemetry", r.join("host/telemetry/src")),
        ("console", r.join("host/console/src")),
        ("core", r.join("host/core/src")),
        ("untrusted", r.join("host/untrusted/src")),
        ("secrets", r.join("host/secrets/src")),
        ("net-guard", r.join("host/net-guard/src")),
        ("flow", r.join("host/flow/src")),
        ("check", r.join("host/check/src")),
        ("memory", r.join("host/memory/src")),
        ("guest-fs", r.join("host/guest-fs/src")),
    ];
    // Each place a sink is built, and why its text is scrubbed.
    let builds = |k: &str, f: &str| {
        matches!(
            (k, f),
            // The log layer, every event scrubbed.
            ("telemetry", "logs.rs")
            // The span exporter (every span scrubbed) and the metrics'
            // (labels scrubbed when made).
            | ("telemetry", "export.rs")
            | ("telemetry", "otlp_metrics.rs")
            // The conformance server's own log output: a test fixture
            // beside the product, holding none of the host's secrets.
            | ("conformance", "main.rs")
            // The console's router, behind `serve::scrubbed`.
            | ("server", "console.rs")
        )
    };
    // Each place that writes to stderr itself, and why.
    let writes = |k: &str, f: &str| {
        matches!(
            (k, f),
            // The log layer's writer.
            ("telemetry", "logs.rs")
            // The command line's stderr (`errln!`), scrubbed.
            | ("cli", "pipe.rs")
            // Before any log exists: the runtime could not start, a
            // telemetry variable is wrong.
            | ("cli", "main.rs")
            | ("cli", "process.rs")
            // The other binaries' own start-up failures, before any log.
            | ("bench", "main.rs")
            | ("conformance", "main.rs")
            // The operator's own terminal, asked to approve a call (it
            // must show the call as it is).
            | ("agent", "approval.rs")
            // Compile progress (tool names, seconds) and benchmarks.
            | ("sandbox", "cache/mod.rs")
            | ("bench", "console.rs")
            | ("bench", "neurons.rs")
        )
    };
    let mut bad = Vec::new();
    for (k, dir) in &dirs {
        for (file, text) in sources(dir) {
            if file.ends_with("tests.rs") || file.contains("/tests/") {
                continue;
            }
            // A unit test module's own test doubles are not sinks.
            let code = text.split("#[cfg(test)]").next().unwrap_or_default();
            let name = format!("{k}/{file}");
            if !builds(k, &file) {
                bad.extend(hits(&name, code, SINKS));
            }
            if !writes(k, &file) {
                bad.extend(hits(&name, code, STDERR));
            }
        }
    }
    assert!(
        bad.is_empty(),
        "a sink built, or stderr written, outside its scrubbed place (see capsaga_telemetry::secrets):\n{}",
        bad.join("\n")
    );
    let console = std::fs::read_to_string(r.join("host/server/src/console.rs")).unwrap();
    assert!(
        console.contains("scrubbed::responses"),
        "the console's router is not behind the server's scrubbed"
    );
    let planted = "let l = tracing_subscriber::fmt::layer().with_writer(|| std::io::stderr());";
    assert_eq!(hits("planted.rs", planted, SINKS).len(), 1);
    assert_eq!(hits("planted.rs", planted, STDERR).len(), 1);
}
