//! OpenTelemetry export (issue 30 part 1) from the real `capsaga` binary
//! to a real OTLP receiver on 127.0.0.1 (`capsaga_tests::otlp_receiver`,
//! decoding with the OpenTelemetry proto definitions):
//! - a turn that rolls back sends `invoke_agent`, `chat`, `execute_tool`,
//!   `saga.step` and `saga.compensate` spans with the right parent/child
//!   links and semantic-convention attributes;
//! - no secret of the process (CAPSAGA_KEK, a provider key, a bearer
//!   token), no tool argument and no task text is in anything sent; with
//!   the operator's opt-in, arguments are sent redacted (HTTP/JSON);
//! - a collector that accepts and never answers does not fail or hold a
//!   tool call;
//! - every MCP request is a server span, joining the client's trace when
//!   its `_meta` carries one ([`mcp`]);
//! - the metrics are pushed over OTLP too, a neuron's call counted
//!   ([`pushed`]);
//! - the host's own secrets (tokens, keys, grant values, the store's
//!   password) reach no sink, known or by their shape, capture on or off
//!   ([`secrets`]).

mod mcp;
mod pushed;
mod secrets;

use capsaga_tests::otlp_receiver::{OtlpReceiver, attr};
use capsaga_tests::{FS_POLICY, TestWorkspace, wait_until};
use opentelemetry_proto::tonic::trace::v1::Span;
use std::process::Output;

const KEK: &str = "8f1e2d3c4b5a69788796a5b4c3d2e1f00f1e2d3c4b5a69788796a5b4c3d2e1f0";
const PROVIDER_KEY: &str = "sk-telemetry-test-provider-key-0123456789";
const TOKEN: &str = "tok-telemetry-test-bearer-abcdef123456";
const TASK: &str = "TASK-MARKER edit the notes";
const ARG_MARKER: &str = "ARG-MARKER-edited";

/// Make `cmd` export to `endpoint` (spans and metrics), with the
/// process's secrets set, and wait up to 10 s for the last exports at exit
/// (a loaded machine; the receiver answers at once).
fn exporting(cmd: &mut std::process::Command, endpoint: &str) {
    cmd.env("OTEL_EXPORTER_OTLP_ENDPOINT", endpoint)
        .env("CAPSAGA_KEK", KEK)
        .env("OPENAI_API_KEY", PROVIDER_KEY)
        .env("CAPSAGA_TOKEN", TOKEN)
        .env("CAPSAGA_OTEL_SHUTDOWN_MS", "10000")
        .env_remove("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
        .env_remove("OTEL_EXPORTER_OTLP_METRICS_ENDPOINT")
        .env_remove("OTEL_EXPORTER_OTLP_PROTOCOL")
        .env_remove("OTEL_METRICS_EXPORTER")
        .env_remove("OTEL_TRACES_EXPORTER")
        .env_remove("OTEL_SDK_DISABLED");
}

/// Run `capsaga` on `ws` with `args`, exporting to `endpoint`, with the
/// process's secrets set and `extra` variables.
async fn run(ws: &TestWorkspace, args: &[&str], endpoint: &str, extra: &[(&str, &str)]) -> Output {
    let mut cmd = ws.capsaga(args);
    exporting(&mut cmd, endpoint);
    for (k, v) in extra {
        cmd.env(k, v);
    }
    tokio::task::spawn_blocking(move || cmd.output().expect("run capsaga"))
        .await
        .unwrap()
}

fn script(ws: &TestWorkspace, text: &str) -> String {
    let path = ws.root.join("script.json");
    std::fs::write(&path, text).unwrap();
    path.to_string_lossy().into_owned()
}

fn named<'a>(spans: &'a [Span], op: &str) -> Vec<&'a Span> {
    spans
        .iter()
        .filter(|s| s.name == op || s.name.starts_with(&format!("{op} ")))
        .collect()
}

fn parent<'a>(spans: &'a [Span], s: &Span) -> Option<&'a Span> {
    spans.iter().find(|p| p.span_id == s.parent_span_id)
}

#[tokio::test(flavor = "multi_thread")]
async fn a_rolled_back_turn_exports_linked_spans_and_no_secret() {
    let rx = OtlpReceiver::start().await;
    let ws = TestWorkspace::new(&["fs_read", "fs_write", "fs_list"], FS_POLICY);
    std::fs::write(ws.ws().join("notes.txt"), "original\n").unwrap();
    let s = script(
        &ws,
        &r#"{"turns":[
            {"text":"","tool_calls":[
                {"name":"fs_write","arguments":{"path":"${home}/ws/notes.txt","content":"MARK\n"}},
                {"name":"fs_write","arguments":{"path":"${home}/ws/new.md","content":"MARK\n"}}]},
            {"text":"","tool_calls":[{"name":"fs_write","arguments":{"path":"${home}/elsewhere.txt","content":"MARK"}}]},
            {"text":"done"}
        ]}"#
        .replace("MARK", ARG_MARKER),
    );
    // The user's task names the files the agent writes: a path chosen after
    // a tool's output was read (fs_write's holds the file's previous
    // content, untrusted) would need a human (information flow).
    let task = format!(
        "{TASK}: {0}/ws/notes.txt and {0}/ws/new.md, a copy in {0}/elsewhere.txt",
        ws.root.display()
    );
    let out = run(&ws, &["agent", "--script", &s, &task], &rx.endpoint(), &[]).await;
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!stderr.contains("telemetry export off"), "{stderr}");
    wait_until("the turn's spans", || {
        !named(&rx.spans(), "invoke_agent").is_empty()
    });
    let spans = rx.spans();
    let names: Vec<&str> = spans.iter().map(|s| s.name.as_str()).collect();

    // The turn is the root, failed, rolled back.
    let turns = named(&spans, "invoke_agent");
    assert_eq!(turns.len(), 1, "{names:?}");
    let turn = turns[0];
    assert!(turn.parent_span_id.is_empty());
    assert_eq!(
        attr(turn, "gen_ai.operation.name").as_deref(),
        Some("invoke_agent")
    );
    assert_eq!(
        attr(turn, "capsaga.outcome").as_deref(),
        Some("rolled_back")
    );
    assert_eq!(
        turn.status.as_ref().map(|s| s.code),
        Some(2),
        "status ERROR"
    );
    assert!(attr(turn, "capsaga.saga.id").is_some());
    assert_eq!(rx.resource_attr("service.name").as_deref(), Some("capsaga"));

    // Every span is in the turn's trace.
    assert!(
        spans.iter().all(|s| s.trace_id == turn.trace_id),
        "{names:?}"
    );

    // Model calls: children of the turn.
    let chats = named(&spans, "chat");
    assert_eq!(chats.len(), 2, "{names:?}");
    for c in &chats {
        assert_eq!(c.parent_span_id, turn.span_id);
        assert_eq!(attr(c, "gen_ai.operation.name").as_deref(), Some("chat"));
        assert_eq!(attr(c, "gen_ai.provider.name").as_deref(), Some("scripted"));
        assert!(attr(c, "gen_ai.usage.input_tokens").is_some());
    }

    // Tool calls: children of the turn; the third is refused by the
    // sandbox and rolls the saga back.
    let mut calls = named(&spans, "execute_tool");
    calls.sort_by_key(|s| s.start_time_unix_nano);
    assert_eq!(calls.len(), 3, "{names:?}");
    for c in &calls {
        assert_eq!(c.parent_span_id, turn.span_id);
        assert_eq!(attr(c, "gen_ai.tool.name").as_deref(), Some("fs_write"));
        assert_eq!(
            attr(c, "gen_ai.operation.name").as_deref(),
            Some("execute_tool")
        );
        assert_eq!(attr(c, "capsaga.tool.source").as_deref(), Some("component"));
    }
    assert_eq!(
        attr(calls[0], "capsaga.outcome").as_deref(),
        Some("committed")
    );
    assert_eq!(
        attr(calls[2], "capsaga.outcome").as_deref(),
        Some("rolled_back")
    );
    assert!(attr(calls[2], "error.type").is_some());
    assert_eq!(calls[2].status.as_ref().map(|s| s.code), Some(2));

    // Saga steps: one per call, each the child of its call.
    let steps = named(&spans, "saga.step");
    assert_eq!(steps.len(), 3, "{names:?}");
    for st in &steps {
        let p = parent(&spans, st).expect("a step's parent was exported");
        assert!(p.name.starts_with("execute_tool"), "{}", p.name);
    }

    // Compensations: the two committed writes, undone inside the failed
    // step (under the third call), compensated.
    let comps = named(&spans, "saga.compensate");
    assert_eq!(comps.len(), 2, "{names:?}");
    for c in &comps {
        let step = parent(&spans, c).expect("a compensation's parent was exported");
        assert!(step.name.starts_with("saga.step"), "{}", step.name);
        assert_eq!(step.parent_span_id, calls[2].span_id);
        assert_eq!(attr(c, "capsaga.outcome").as_deref(), Some("compensated"));
    }

    // Nothing secret, no argument, no task text, in anything sent.
    let raw = rx.raw();
    let raw = String::from_utf8_lossy(&raw);
    for secret in [KEK, PROVIDER_KEY, TOKEN, ARG_MARKER, "TASK-MARKER"] {
        assert!(!raw.contains(secret), "`{secret}` was exported");
    }
    assert!(
        spans
            .iter()
            .all(|s| attr(s, "gen_ai.tool.call.arguments").is_none())
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn opted_in_arguments_are_sent_redacted_over_http_json() {
    let rx = OtlpReceiver::start().await;
    let ws = TestWorkspace::new(&["fs_write"], FS_POLICY);
    let content = format!("kek={KEK} auth=Bearer {TOKEN} visible-part");
    let s = script(
        &ws,
        &format!(
            r#"{{"turns":[
                {{"text":"","tool_calls":[{{"name":"fs_write","arguments":{{"path":"${{home}}/ws/a.txt","content":{}}}}}]}},
                {{"text":"done"}}
            ]}}"#,
            serde_json::to_string(&content).unwrap()
        ),
    );
    let out = run(
        &ws,
        &["agent", "--script", &s, "write"],
        &rx.endpoint(),
        &[
            ("OTEL_EXPORTER_OTLP_PROTOCOL", "http/json"),
            ("CAPSAGA_OTEL_CAPTURE_CONTENT", "true"),
        ],
    )
    .await;
    wait_until("the turn's spans", || {
        !named(&rx.spans(), "invoke_agent").is_empty()
    });
    assert!(
        rx.json_requests() >= 1,
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let spans = rx.spans();
    let calls = named(&spans, "execute_tool");
    assert!(!calls.is_empty());
    let raw = String::from_utf8_lossy(&rx.raw()).into_owned();
    for secret in [KEK, PROVIDER_KEY, TOKEN] {
        assert!(!raw.contains(secret), "`{secret}` was exported");
    }
    // The arguments are there, redacted: what is not secret stays readable.
    let with_args: Vec<String> = calls
        .iter()
        .filter_map(|c| attr(c, "gen_ai.tool.call.arguments"))
        .collect();
    assert!(!with_args.is_empty(), "no arguments captured");
    assert!(
        with_args
            .iter()
            .any(|a| a.contains("visible-part") && a.contains("[redacted]")),
        "{with_args:?}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_silent_collector_never_fails_a_tool_call() {
    // Accepts connections and never answers.
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let endpoint = format!("http://{}", listener.local_addr().unwrap());
    let held = std::thread::spawn(move || listener.incoming().take(8).collect::<Vec<_>>());
    let ws = TestWorkspace::new(&["fs_write"], FS_POLICY);
    let args = serde_json::json!({"path": ws.ws_path("a.txt"), "content": "x"}).to_string();
    for i in 0..3 {
        let out = run(
            &ws,
            &["--json", "call", "fs_write", &args],
            &endpoint,
            &[("CAPSAGA_OTEL_SHUTDOWN_MS", "200")],
        )
        .await;
        assert_eq!(
            out.status.code(),
            Some(0),
            "call {i}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    assert_eq!(std::fs::read_to_string(ws.ws().join("a.txt")).unwrap(), "x");
    drop(held);
}

/// `capsaga audit export --otel`: the document is OTLP JSON that a
/// collector's OTLP/HTTP receiver accepts (the test receiver decodes it
/// with the OpenTelemetry proto definitions), one span per step with its
/// outcome and its label under the saga's, and it holds no argument.
#[tokio::test(flavor = "multi_thread")]
async fn an_exported_saga_is_otlp_json_a_receiver_ingests() {
    let ws = TestWorkspace::new(&["fs_write"], FS_POLICY);
    let args = serde_json::json!({"path": ws.ws_path("a.txt"), "content": ARG_MARKER}).to_string();
    let out = ws
        .capsaga(&["--json", "call", "fs_write", &args])
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let saga = v["saga_id"].as_str().unwrap().to_string();
    let file = ws.root.join("saga.otlp.json");
    let out = ws
        .capsaga(&[
            "audit",
            "export",
            "--otel",
            &file.to_string_lossy(),
            &saga[..8],
        ])
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = std::fs::read_to_string(&file).unwrap();
    assert!(!text.contains(ARG_MARKER), "an argument was exported");

    let rx = OtlpReceiver::start().await;
    let _ = rustls::crypto::ring::default_provider().install_default();
    let r = reqwest::Client::new()
        .post(format!("{}/v1/traces", rx.endpoint()))
        .header("content-type", "application/json")
        .body(text)
        .send()
        .await
        .unwrap();
    assert_eq!(
        r.status().as_u16(),
        200,
        "{}",
        r.text().await.unwrap_or_default()
    );
    let spans = rx.spans();
    assert_eq!(spans.len(), 2, "the saga and its one step");
    let root = spans.iter().find(|s| s.name == "saga").unwrap();
    assert_eq!(
        attr(root, "capsaga.saga.id").as_deref(),
        Some(saga.as_str())
    );
    assert_eq!(attr(root, "capsaga.saga.state").as_deref(), Some("Done"));
    let step = spans
        .iter()
        .find(|s| s.name == "saga.step fs_write")
        .unwrap();
    assert_eq!(step.parent_span_id, root.span_id);
    assert_eq!(step.trace_id, root.trace_id);
    assert_eq!(attr(step, "capsaga.outcome").as_deref(), Some("COMMIT"));
    // The step's label (information flow, issue 47): fs_write's output
    // holds the file's previous content, untrusted.
    assert_eq!(
        attr(step, "capsaga.flow.integrity").as_deref(),
        Some("untrusted")
    );
    let events: Vec<&str> = step.events.iter().map(|e| e.name.as_str()).collect();
    assert_eq!(events, ["BEGIN", "COMMIT", "LABEL"]);
    assert!(step.end_time_unix_nano >= step.start_time_unix_nano);
    assert!(step.start_time_unix_nano > 0);
}

/// A tool name the host does not know (a hallucination, a probe, a name
/// carrying text) is exported as `_OTHER`: the span's name and its
/// `gen_ai.tool.name` stay of bounded cardinality, and the caller's text is
/// not in anything sent.
#[tokio::test(flavor = "multi_thread")]
async fn an_unknown_tool_name_is_exported_as_other() {
    const PROBE: &str = "PROBE-name-0042_with_text";
    let rx = OtlpReceiver::start().await;
    let ws = TestWorkspace::new(&["fs_write"], FS_POLICY);
    let s = script(
        &ws,
        &format!(
            r#"{{"turns":[
                {{"text":"","tool_calls":[{{"name":"{PROBE}","arguments":{{}}}}]}},
                {{"text":"done"}}
            ]}}"#
        ),
    );
    let out = run(
        &ws,
        &["agent", "--script", &s, "probe"],
        &rx.endpoint(),
        &[],
    )
    .await;
    wait_until("the turn's spans", || {
        !named(&rx.spans(), "invoke_agent").is_empty()
    });
    let spans = rx.spans();
    let calls = named(&spans, "execute_tool");
    assert!(
        !calls.is_empty(),
        "no execute_tool span: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    for c in &calls {
        assert_eq!(c.name, "execute_tool _OTHER");
        assert_eq!(attr(c, "gen_ai.tool.name").as_deref(), Some("_OTHER"));
    }
    let raw = String::from_utf8_lossy(&rx.raw()).into_owned();
    assert!(!raw.contains(PROBE), "the unknown name was exported");
}
