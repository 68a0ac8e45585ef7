//! The metrics pushed over OTLP (issue 30 part 1) from the real `capsaga`
//! binary to the real receiver (`POST /v1/metrics`, decoded as an
//! `ExportMetricsServiceRequest`): the tool-call counter after a call, a
//! neuron's call counted as one, and nothing pushed when
//! `OTEL_METRICS_EXPORTER=none`.

use super::run;
use capsaga_tests::neuron_rig::{cache_dir, runner_wasm};
use capsaga_tests::otlp_receiver::OtlpReceiver;
use capsaga_tests::{TestWorkspace, wait_until};
use serde_json::{Value, json};
use std::process::Output;

const POLICY: &str = "[tools.time_now]\n";

fn ok(out: &Output) -> Value {
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("the call's JSON report")
}

#[tokio::test(flavor = "multi_thread")]
async fn a_tool_call_is_counted_in_the_pushed_metrics() {
    let rx = OtlpReceiver::start().await;
    let ws = TestWorkspace::new(&["time_now"], POLICY);
    let out = run(
        &ws,
        &["--json", "call", "time_now", "{}"],
        &rx.endpoint(),
        &[],
    )
    .await;
    assert_eq!(ok(&out)["saga_state"], "Done");
    // Pushed at exit (the interval is a minute): the process has exited.
    wait_until("a metrics push", || rx.metric_requests() >= 1);
    let committed = [("tool", "time_now"), ("outcome", "committed")];
    assert_eq!(rx.sum("capsaga.tool.calls", &committed), Some(1.0));
    let names: Vec<String> = rx.metrics().iter().map(|m| m.name.clone()).collect();
    assert!(
        names.iter().any(|n| n == "capsaga.operation.duration"),
        "{names:?}"
    );
    assert_eq!(rx.resource_attr("service.name").as_deref(), Some("capsaga"));

    // Off when asked: the spans still go, the metrics do not.
    let rx = OtlpReceiver::start().await;
    let out = run(
        &ws,
        &["--json", "call", "time_now", "{}"],
        &rx.endpoint(),
        &[("OTEL_METRICS_EXPORTER", "none")],
    )
    .await;
    ok(&out);
    wait_until("the call's spans", || {
        rx.spans()
            .iter()
            .any(|s| s.name.starts_with("execute_tool"))
    });
    assert_eq!(rx.metric_requests(), 0);
}

/// A pure neuron doubling a number.
fn double() -> Value {
    json!({
        "name": "double_it",
        "description": "Twice a number.",
        "args_schema": {
            "type": "object", "additionalProperties": false,
            "required": ["x"], "properties": {"x": {"type": "number"}}
        },
        "capabilities": [],
        "source": "def execute(args):\n    return {\"y\": args[\"x\"] * 2}\n",
        "examples": [{"args": {"x": 2}, "expect": {"y": 4}}],
    })
}

#[tokio::test(flavor = "multi_thread")]
async fn a_neuron_call_is_counted_as_one() {
    let Some(wasm) = runner_wasm() else {
        return;
    };
    let ws = TestWorkspace::new(
        &[],
        &format!(
            "[neurons]\nenabled = true\nrunner = \"{}\"\nrunner_cache = \"{}\"\nauto_activate_pure = true\n",
            wasm.display(),
            cache_dir().display()
        ),
    );
    // Born, tested on its example and, pure, active at once.
    let created = ws
        .capsaga(&["--json", "call", "neuron_create", &double().to_string()])
        .output()
        .unwrap();
    let v = ok(&created);
    assert!(v["result"].to_string().contains("\"active\""), "{v:#}");

    let rx = OtlpReceiver::start().await;
    let out = run(
        &ws,
        &["--json", "call", "double_it", r#"{"x": 3}"#],
        &rx.endpoint(),
        &[],
    )
    .await;
    let v = ok(&out);
    assert!(v["result"].to_string().contains("\"y\":6"), "{v:#}");
    wait_until("a metrics push", || rx.metric_requests() >= 1);
    assert_eq!(rx.sum("capsaga.neuron.calls", &[]), Some(1.0));
    let committed = [("tool", "double_it"), ("outcome", "committed")];
    assert_eq!(rx.sum("capsaga.tool.calls", &committed), Some(1.0));
}
