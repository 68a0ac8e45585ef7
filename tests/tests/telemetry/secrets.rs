//! Issue 45 item 5, from the attacker's side: the host's own secrets never
//! leave through an observability sink, with content capture on or off.
//!
//! A real `capsaga serve` (SQLite; PostgreSQL with capture on, so its
//! store password is one of the secrets) knows: `CAPSAGA_TOKEN`,
//! `CAPSAGA_KEK`, a named token (`csg_...`, created by `capsaga tokens
//! create`, used as the bearer), a sealed provider key (opened for the
//! turn), a `secret:` grant's value, the store's password. Over REST, a
//! model (a real local server speaking the OpenAI format) makes tools
//! carry them: `fs_write`'s arguments hold each one in the middle of a
//! longer string, percent-encoded, Base64-encoded, split over two JSON
//! members (`"h": "Authorization"`, `"v": "Bearer ..."`), the sealed key
//! cut in two members, the KEK percent-encoded byte by byte, beside an
//! `Authorization: Bearer ...` of a value the host does not know and an
//! unknown key of a provider's format (`sk-proj-...`), an unknown named
//! token's shape; `fs_read` returns them (a result) and fails on a path
//! holding one (an error); the model's answer and its `model` field echo
//! the sealed key; a second turn's provider fails with an error body
//! echoing `Authorization: Bearer <key>`.
//!
//! Searched afterwards, byte for byte: everything the OTLP receiver got,
//! the server's whole log output (`CAPSAGA_LOG=debug`), `GET /metrics`,
//! the `capsaga audit export --otel` file of each saga, and the console's
//! pages (sagas, each saga, each trace, approvals, health).
//!
//! In scope (each form above): the known values as they are, JSON- and
//! HTML-escaped, percent-encoded and Base64-encoded, cut into pieces of 8
//! bytes or more; the shapes wherever they appear. Out of scope (THREAT_MODEL.md): a secret transformed
//! otherwise, or an unknown one without a credential's shape.

use super::named as spans_named;
use base64::Engine as _;
use capsaga_pg_harness::Cluster;
use capsaga_tests::llm_server::{LlmServer, Reply};
use capsaga_tests::otlp_receiver::{OtlpReceiver, attr};
use capsaga_tests::{TestWorkspace, capsaga_bin, wait_until};
use serde_json::{Value, json};
use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};

const KEK: &str = "5a1e2d3c4b5a69788796a5b4c3d2e1f00f1e2d3c4b5a69788796a5b4c3d2e1a5";
const ENV_TOKEN: &str = "envtoken-Ht5Rk2Lw8Qz3Vn6Bx9Cm1";
/// No credential shape: only its known value can redact it.
const SEALED: &str = "orgkey-Zq8Wv3Lm5Np1Rt7Yx2Bc6Df4Gh9Jk0";
/// With characters that percent-encoding changes.
const GRANT: &str = "grant+val/Pm4Ns7Kd2=Fq9Lx3Ty6Wr";
/// Shapes the host knows nothing about.
const OPAQUE: &str = "opaque-bearer-7f6e5d4c3b2a";
const SPLIT: &str = "split-bearer-9f8e7d6c5b4a";
const UNKNOWN_SK: &str = "sk-proj-Unknown0Provider1Key2abcdef345";
const UNKNOWN_CSG: &str = "csg_Q1w2E3r4T5y6U7i8O9p0A1s2D3f4G5h6J7k8L9z0X1c";

fn pct(s: &str) -> String {
    s.bytes()
        .map(|b| {
            if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~') {
                char::from(b).to_string()
            } else {
                format!("%{b:02X}")
            }
        })
        .collect()
}

/// Every byte percent-encoded.
fn pct_all(s: &str) -> String {
    s.bytes().map(|b| format!("%{b:02x}")).collect()
}

fn b64(s: &str) -> String {
    base64::engine::general_purpose::STANDARD.encode(s)
}

/// The capsaga command on `ws`, with the store `store` (PostgreSQL) if any.
fn capsaga(ws: &TestWorkspace, store: Option<&str>, args: &[&str]) -> Command {
    let mut c = Command::new(capsaga_bin());
    c.arg("--config")
        .arg(ws.config())
        .args(args)
        .current_dir(&ws.root)
        .env_remove("CAPSAGA_CONFIG")
        .env_remove("CAPSAGA_TOKEN")
        .env_remove("OPENAI_API_KEY")
        .env_remove("OTEL_EXPORTER_OTLP_ENDPOINT")
        .env_remove("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
        .env_remove("OTEL_EXPORTER_OTLP_METRICS_ENDPOINT")
        .env_remove("OTEL_EXPORTER_OTLP_PROTOCOL")
        .env_remove("OTEL_TRACES_EXPORTER")
        .env_remove("OTEL_METRICS_EXPORTER")
        .env_remove("OTEL_SDK_DISABLED")
        .env_remove("CAPSAGA_OTEL_CAPTURE_CONTENT")
        .env("CAPSAGA_KEK", KEK);
    match store {
        Some(s) => c.env("CAPSAGA_STORE", s),
        None => c.env_remove("CAPSAGA_STORE"),
    };
    c
}

fn run_ok(mut c: Command, stdin: &str) -> Value {
    let out = capsaga_tests::output_with_stdin(c.arg("--json"), stdin);
    assert!(
        out.status.success(),
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap_or(Value::Null)
}

fn oa(content: Value, tool: Option<(&str, Value)>, model: &str) -> Value {
    let message = match tool {
        Some((name, args)) => json!({"role": "assistant", "content": null,
            "tool_calls": [{"id": format!("call_{name}"), "type": "function",
                "function": {"name": name, "arguments": args.to_string()}}]}),
        None => json!({"role": "assistant", "content": content}),
    };
    let finish = if message.get("tool_calls").is_some() {
        "tool_calls"
    } else {
        "stop"
    };
    json!({"id": "chatcmpl-S1", "object": "chat.completion", "created": 1_760_000_000,
        "model": model,
        "choices": [{"index": 0, "message": message, "logprobs": null, "finish_reason": finish}],
        "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}})
}

/// Every secret, and every encoded form of one, that must not be found.
fn forbidden(named: &str, pg: Option<&str>) -> Vec<String> {
    let mut v: Vec<String> = [
        KEK,
        ENV_TOKEN,
        SEALED,
        GRANT,
        OPAQUE,
        SPLIT,
        UNKNOWN_SK,
        UNKNOWN_CSG,
        named,
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    v.push(pct(GRANT));
    v.push(b64(ENV_TOKEN));
    v.push(b64(SEALED));
    // The pieces of a secret cut over two members, and every byte of one
    // percent-encoded.
    let (head, tail) = SEALED.split_at(15);
    v.push(head.to_string());
    v.push(tail.to_string());
    v.push(pct_all(KEK)[..48].to_string());
    if let Some(p) = pg {
        v.push(p.to_string());
    }
    v
}

fn clean(sink: &str, text: &[u8], forbidden: &[String]) {
    for f in forbidden {
        assert!(
            !text.windows(f.len()).any(|w| w == f.as_bytes()),
            "`{f}` reached {sink}:\n{}",
            String::from_utf8_lossy(text)
        );
    }
}

/// The text the model makes `fs_write` carry.
fn leak_text(named: &str, pg: Option<&str>) -> String {
    let split = json!({"h": "Authorization", "v": format!("Bearer {SPLIT}")}).to_string();
    let (head, tail) = SEALED.split_at(15);
    let cut = json!({"first": head, "then": "x", "second": tail}).to_string();
    format!(
        "visible-part named={named} env:{ENV_TOKEN} kek {KEK} key:{SEALED} grant/{GRANT} \
         upstream said Authorization: Bearer {OPAQUE}, and {UNKNOWN_SK}; raw {UNKNOWN_CSG} \
         pct {} b64 {} sealed64 {} split {split} cut {cut} pctall {} pg [{}] end-part",
        pct(GRANT),
        b64(ENV_TOKEN),
        b64(SEALED),
        pct_all(KEK),
        pg.unwrap_or("none")
    )
}

/// The server's process, killed when the test ends, however it ends.
struct Server(std::process::Child);

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

async fn scenario(capture: bool, pg: Option<&Cluster>) {
    let rx = OtlpReceiver::start().await;
    let store = pg.map(|c| c.fresh_database().expect("a database"));
    let pg_pw = pg.map(|c| c.password().to_string());
    let ws_policy = |llm: &LlmServer| {
        format!(
            r#"
[tools.fs_read]
grants = ["fs:read:~/ws/**"]
[tools.fs_write]
grants = ["fs:write:~/ws/**"]
[providers.org]
kind = "openai"
base_url = "{}"
model = "gpt-4o"
api_key_sealed = "orgkey"
[secrets.api]
value = "{GRANT}"
prefix = "Bearer "
"#,
            llm.url("/v1")
        )
    };
    // The named token and the sealed key exist before the model's replies
    // are written (they hold the token's secret).
    let ws = TestWorkspace::new(&["fs_read", "fs_write"], "");
    let token = run_ok(
        capsaga(
            &ws,
            store.as_deref(),
            &["tokens", "create", "ops", "--role", "operator"],
        ),
        "",
    );
    let named = token["secret"]
        .as_str()
        .expect("a token secret")
        .to_string();
    assert!(named.starts_with("csg_"), "{named}");
    run_ok(
        capsaga(&ws, store.as_deref(), &["keys", "add", "orgkey"]),
        &format!("{SEALED}\n"),
    );
    let leak = leak_text(&named, pg_pw.as_deref());
    let missing = ws.ws_path(&format!("missing-{named}.txt"));
    let llm = LlmServer::start(vec![
        Reply::ok(oa(
            Value::Null,
            Some((
                "fs_write",
                json!({"path": ws.ws_path("leak.txt"), "content": leak}),
            )),
            "gpt-4o",
        )),
        Reply::ok(oa(
            Value::Null,
            Some(("fs_read", json!({"path": ws.ws_path("leak.txt")}))),
            "gpt-4o",
        )),
        Reply::ok(oa(
            Value::Null,
            Some(("fs_read", json!({"path": missing}))),
            "gpt-4o",
        )),
        Reply::ok(oa(
            json!(format!(
                "Done. My key is {SEALED}; I send Authorization: Bearer {SEALED}."
            )),
            None,
            &format!("gpt-4o {SEALED}"),
        )),
        Reply::status(
            401,
            json!({"error": {
                "message": format!("Incorrect API key provided. We got the header Authorization: Bearer {SEALED}"),
                "type": "invalid_request_error", "param": null, "code": "invalid_api_key"}}),
        ),
    ])
    .await;
    ws.write_policy(&ws_policy(&llm));

    // The server.
    let stderr_path = ws.root.join("serve.stderr");
    let mut cmd = capsaga(
        &ws,
        store.as_deref(),
        &[
            "--json",
            "serve",
            "--listen",
            "127.0.0.1:0",
            "--catalog-poll-ms",
            "0",
        ],
    );
    cmd.env("CAPSAGA_TOKEN", ENV_TOKEN)
        .env("CAPSAGA_LOG", "debug")
        .env("OTEL_EXPORTER_OTLP_ENDPOINT", rx.endpoint())
        .env("CAPSAGA_OTEL_SHUTDOWN_MS", "10000")
        .env(
            "CAPSAGA_OTEL_CAPTURE_CONTENT",
            if capture { "true" } else { "false" },
        )
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(std::fs::File::create(&stderr_path).unwrap());
    let mut child = Server(cmd.spawn().expect("capsaga serve starts"));
    let mut line = String::new();
    BufReader::new(child.0.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let listening: Value = serde_json::from_str(&line).unwrap_or_else(|e| {
        panic!(
            "{e}: `{line}`: {}",
            std::fs::read_to_string(&stderr_path).unwrap_or_default()
        )
    });
    let base = format!("http://{}", listening["listening"].as_str().unwrap());
    // Redirects are not followed: the console's sign-in answers 303 with
    // its cookie.
    let http = capsaga_tests::mcp_rig::http_builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap();
    let bearer = format!("Bearer {named}");

    // Two turns: the first carries every secret through three tool calls
    // and an answer; the second's provider fails, echoing the key.
    let mut sagas = Vec::new();
    let mut traces = Vec::new();
    for task in [
        format!("write and read the notes; remember {ENV_TOKEN}"),
        "once more".to_string(),
    ] {
        let r = http
            .post(format!("{base}/v1/turns"))
            .header("Authorization", &bearer)
            .json(&json!({"task": task}))
            .send()
            .await
            .unwrap();
        let v: Value = r.json().await.unwrap();
        if let Some(s) = v["saga_id"].as_str() {
            sagas.push(s.to_string());
        }
        if let Some(t) = v["trace_id"].as_str() {
            traces.push(t.to_string());
        }
    }
    assert_eq!(llm.requests().len(), 5, "every reply was asked for");
    assert!(
        std::fs::read_to_string(ws.ws().join("leak.txt"))
            .unwrap()
            .contains("visible-part"),
        "the first turn wrote the file"
    );
    assert_eq!(traces.len(), 2, "{traces:?}");

    let forbidden = forbidden(&named, pg_pw.as_deref());

    // `/metrics`.
    let metrics = http
        .get(format!("{base}/metrics"))
        .header("Authorization", &bearer)
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(metrics.contains("capsaga_tool_calls_total"), "{metrics}");
    clean("/metrics", metrics.as_bytes(), &forbidden);

    // The console's pages.
    let login = http
        .post(format!("{base}/console/login"))
        .header("Origin", &base)
        .header("Content-Type", "application/x-www-form-urlencoded")
        .body(format!("token={named}"))
        .send()
        .await
        .unwrap();
    let cookie = login
        .headers()
        .get("set-cookie")
        .and_then(|v| v.to_str().ok())
        .and_then(|c| c.split(';').next())
        .expect("a console session")
        .to_string();
    let mut pages = vec![
        "/console/sagas".to_string(),
        "/console/approvals".to_string(),
        "/console/health".to_string(),
    ];
    pages.extend(sagas.iter().map(|s| format!("/console/sagas/{s}")));
    pages.extend(traces.iter().map(|t| format!("/console/traces/{t}")));
    let mut seen_visible = false;
    for p in &pages {
        let r = http
            .get(format!("{base}{p}"))
            .header("Cookie", &cookie)
            .send()
            .await
            .unwrap();
        assert_eq!(r.status().as_u16(), 200, "{p}");
        let page = r.text().await.unwrap();
        seen_visible |= page.contains("visible-part");
        clean(
            &format!("the console page {p}"),
            page.as_bytes(),
            &forbidden,
        );
    }
    assert!(seen_visible, "the console shows the arguments");

    // The spans: wait for the failed turn's chat span, then stop the
    // server (SIGTERM: the last batch is sent).
    wait_until("the second turn's spans", || {
        spans_named(&rx.spans(), "invoke_agent").len() >= 2
    });
    let _ = Command::new("kill")
        .args(["-TERM", &child.0.id().to_string()])
        .status();
    let _ = child.0.wait();
    let spans = rx.spans();
    assert!(!spans_named(&spans, "chat").is_empty());
    if capture {
        let args: Vec<String> = spans_named(&spans, "execute_tool")
            .iter()
            .filter_map(|s| attr(s, "gen_ai.tool.call.arguments"))
            .collect();
        assert!(
            args.iter()
                .any(|a| a.contains("visible-part") && a.contains("[redacted]")),
            "{args:?}"
        );
    }
    clean("the OTLP receiver", &rx.raw(), &forbidden);

    // The log output.
    let log = std::fs::read(&stderr_path).unwrap();
    assert!(
        String::from_utf8_lossy(&log).contains("model call failed"),
        "{}",
        String::from_utf8_lossy(&log)
    );
    clean("the log output", &log, &forbidden);

    // The audit export of each saga.
    for s in &sagas {
        let file = ws.root.join(format!("{s}.otlp.json"));
        run_ok(
            capsaga(
                &ws,
                store.as_deref(),
                &["audit", "export", "--otel", &file.to_string_lossy(), s],
            ),
            "",
        );
        clean(
            "the audit export",
            &std::fs::read(&file).unwrap(),
            &forbidden,
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_hosts_secrets_never_leave_with_content_capture_off() {
    scenario(false, None).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_hosts_secrets_never_leave_with_content_capture_on_over_postgres() {
    let cluster = match Cluster::start() {
        Ok(Some(c)) => c,
        Ok(None) => panic!("PostgreSQL is not installed (apt-get install postgresql)"),
        Err(e) => panic!("PostgreSQL did not start: {e}"),
    };
    scenario(true, Some(&cluster)).await;
}
