//! Issue 24 item 4 (and 8c): every entry point applies the door's strict
//! JSON and size rules to the bytes it receives, before anything parses or
//! logs them: MCP over HTTP (each POST body, batches refused with HTTP 400),
//! MCP over stdio (each line, its length limit included: a 64 MiB line is
//! discarded as it streams and answered), REST bodies, and the agent loop
//! (a model's arguments), `capsaga call` and plans (`capsaga run --plan`).
//! Attacker's side: duplicate keys at any depth, `__proto__`-style keys,
//! deep nesting, huge numbers, lone surrogates, 1 MiB + 1 byte of
//! arguments. Real servers on 127.0.0.1, the real binary over stdio.

use super::{http, start};
use capsaga_server::HttpOptions;
use capsaga_tests::{TestWorkspace, capsaga_bin};
use serde_json::{Value, json};
use std::io::{BufRead, BufReader, Write};
use std::process::{Command, Stdio};

const POLICY: &str = "[tools.fs_write]\ngrants = [\"fs:write:~/ws/**\"]\n";

fn ws() -> TestWorkspace {
    TestWorkspace::new(&["fs_write"], POLICY)
}

/// A `tools/call` of `fs_write` with `args` as raw JSON text, id 7.
fn call(args: &str) -> String {
    format!(
        r#"{{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{{"name":"fs_write","arguments":{args}}}}}"#
    )
}

/// Hostile messages, each with the `refused` kind the answer must carry.
fn hostile(ws: &TestWorkspace) -> Vec<(String, Vec<u8>, &'static str)> {
    let p = ws.ws_path("pwned.txt");
    let nest = |n: usize| format!("{}{}", "[".repeat(n), "]".repeat(n));
    let big = format!(
        r#"{{"path":"{p}","content":"{}"}}"#,
        "a".repeat((1 << 20) - p.len() - 23)
    );
    let mut out: Vec<(String, String, &'static str)> =
        vec![
        (
            "duplicate key".into(),
            call(&format!(r#"{{"path":"{p}","content":"x","path":"/etc/x"}}"#)),
            "duplicate_key",
        ),
        (
            "duplicate key, escaped".into(),
            call(&format!(r#"{{"path":"{p}","content":"x","p\u0061th":"/etc/x"}}"#)),
            "duplicate_key",
        ),
        (
            "duplicate key at depth 3".into(),
            call(&format!(r#"{{"path":"{p}","content":"x","m":{{"a":[{{"k":1,"k":2}}]}}}}"#)),
            "duplicate_key",
        ),
        (
            "duplicate method in the envelope".into(),
            r#"{"jsonrpc":"2.0","id":7,"method":"tools/list","method":"tools/call","params":{}}"#
                .into(),
            "duplicate_key",
        ),
        (
            "__proto__".into(),
            call(&format!(r#"{{"path":"{p}","content":"x","__proto__":{{"isAdmin":true}}}}"#)),
            "reserved_key",
        ),
        (
            "constructor.prototype".into(),
            call(&format!(r#"{{"path":"{p}","content":"x","constructor":{{"prototype":{{}}}}}}"#)),
            "reserved_key",
        ),
        (
            "65 levels of arguments".into(),
            call(&format!(r#"{{"path":"{p}","content":"x","d":{}}}"#, nest(64))),
            "too_deep",
        ),
        (
            "an integer past 64 bits".into(),
            call(&format!(r#"{{"path":"{p}","content":"x","n":18446744073709551617}}"#)),
            "number_range",
        ),
        (
            "a lone surrogate".into(),
            call(&format!(r#"{{"path":"{p}","content":"\ud800"}}"#)),
            "syntax",
        ),
    ];
    assert_eq!(big.len(), (1 << 20) + 1, "1 MiB + 1 byte of arguments");
    out.push((
        "1 MiB + 1 byte of arguments".into(),
        call(&big),
        "arguments_too_large",
    ));
    out.push(("a batch".into(), format!("[{}]", call("{}")), "batch"));
    let mut v: Vec<(String, Vec<u8>, &'static str)> = out
        .into_iter()
        .map(|(w, m, k)| (w, m.into_bytes(), k))
        .collect();
    let mut bom = "\u{FEFF}".as_bytes().to_vec();
    bom.extend_from_slice(call("{}").as_bytes());
    v.push(("a byte-order mark".into(), bom, "not_text"));
    let mut latin1 = br#"{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"fs_write","arguments":{"path":"x","content":"caf"#.to_vec();
    latin1.extend_from_slice(b"\xe9\"}}}");
    v.push(("bytes that are not UTF-8".into(), latin1, "not_text"));
    v
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mcp_over_http_refuses_every_hostile_body_before_rmcp_reads_it() {
    let ws = ws();
    let host = ws.host().await;
    let srv = start(
        host.clone(),
        HttpOptions::new("127.0.0.1:0".parse().unwrap()),
    )
    .await;
    let c = http();
    let post = |sid: Option<String>, body: Vec<u8>| {
        let mut r = c
            .post(srv.url("/mcp"))
            .header("Accept", "application/json, text/event-stream")
            .header("Content-Type", "application/json")
            .body(body);
        if let Some(s) = sid {
            r = r.header("Mcp-Session-Id", s);
        }
        r.send()
    };
    let init = json!({"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}});
    let opened = post(None, init.to_string().into_bytes()).await.unwrap();
    assert_eq!(opened.status().as_u16(), 200);
    let sid = opened.headers()["mcp-session-id"]
        .to_str()
        .unwrap()
        .to_string();
    let note = json!({"jsonrpc":"2.0","method":"notifications/initialized"});
    let r = post(Some(sid.clone()), note.to_string().into_bytes())
        .await
        .unwrap();
    assert!(r.status().is_success(), "{}", r.status());

    for (what, body, kind) in hostile(&ws) {
        let r = post(Some(sid.clone()), body).await.unwrap();
        let status = r.status().as_u16();
        let answer: Value = r.json().await.unwrap();
        assert_eq!(status, 400, "{what}: {answer}");
        assert_eq!(answer["jsonrpc"], "2.0", "{what}");
        assert_eq!(answer["error"]["data"]["refused"], kind, "{what}: {answer}");
        let code = answer["error"]["code"].as_i64().unwrap();
        assert!([-32700, -32600, -32602].contains(&code), "{what}: {code}");
        if !matches!(kind, "batch" | "not_text") {
            assert_eq!(answer["id"], 7, "{what}: the request's id is answered");
        }
    }
    // A batch without a session: refused the same way (before rmcp).
    let r = post(None, format!("[{init}]").into_bytes()).await.unwrap();
    assert_eq!(r.status().as_u16(), 400);
    let answer: Value = r.json().await.unwrap();
    assert_eq!(answer["error"]["code"], -32600, "{answer}");
    // Nothing ran, nothing was logged: no saga, no file.
    assert!(host.store.sagas(10).await.unwrap().is_empty());
    assert!(!ws.ws().join("pwned.txt").exists());
    // The session still works: a well-formed call runs.
    let ok = call(&format!(
        r#"{{"path":"{}","content":"fine"}}"#,
        ws.ws_path("ok.txt")
    ));
    let r = post(Some(sid), ok.into_bytes()).await.unwrap();
    assert_eq!(r.status().as_u16(), 200);
    let text = r.text().await.unwrap();
    assert!(text.contains("\"id\":7"), "{text}");
    assert_eq!(
        std::fs::read_to_string(ws.ws().join("ok.txt")).unwrap(),
        "fine"
    );
}

#[test]
fn mcp_over_stdio_refuses_every_hostile_line_and_survives_a_64_mib_one() {
    let ws = ws();
    let mut child = Command::new(capsaga_bin())
        .arg("--config")
        .arg(ws.config())
        .args(["mcp", "--no-elicitation", "--catalog-poll-ms", "0"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let mut stdout = BufReader::new(child.stdout.take().unwrap());
    let mut send = |line: &[u8]| {
        stdin.write_all(line).unwrap();
        stdin.write_all(b"\n").unwrap();
        stdin.flush().unwrap();
    };
    let mut recv = || -> Value {
        let mut line = String::new();
        stdout.read_line(&mut line).unwrap();
        serde_json::from_str(&line).unwrap_or_else(|e| panic!("{e}: {line:?}"))
    };
    let init = json!({"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}});
    send(init.to_string().as_bytes());
    assert_eq!(recv()["id"], 1);
    send(br#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#);

    for (what, line, kind) in hostile(&ws) {
        send(&line);
        let answer = recv();
        assert_eq!(answer["error"]["data"]["refused"], kind, "{what}: {answer}");
        if !matches!(kind, "batch" | "not_text") {
            assert_eq!(answer["id"], 7, "{what}");
        }
    }
    // A 64 MiB line: read in bounded memory and discarded, answered with
    // id null (it was never parsed), and the session goes on.
    let mut huge = call(r#"{"path":"x","content":""#).into_bytes();
    huge.resize(64 << 20, b'a');
    send(&huge);
    let answer = recv();
    assert_eq!(answer["id"], Value::Null, "{answer}");
    assert_eq!(answer["error"]["data"]["refused"], "too_large", "{answer}");
    let ok = call(&format!(
        r#"{{"path":"{}","content":"fine"}}"#,
        ws.ws_path("ok.txt")
    ));
    send(ok.as_bytes());
    let answer = recv();
    assert_eq!(answer["id"], 7, "{answer}");
    assert!(answer["result"].is_object(), "{answer}");
    // End of input: the session ends and the process exits.
    drop(stdin);
    let status = child.wait().unwrap();
    assert!(status.success(), "{status}");
    assert!(!ws.ws().join("pwned.txt").exists());
    assert_eq!(
        std::fs::read_to_string(ws.ws().join("ok.txt")).unwrap(),
        "fine"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rest_bodies_and_model_arguments_meet_the_same_rule() {
    let ws = ws();
    // The model's own calls: a `__proto__` key and a huge integer in its
    // arguments are answered as invalid, nothing runs; then it gives up.
    let p = ws.ws_path("pwned.txt");
    let script = ws.root.join("s.json");
    std::fs::write(
        &script,
        json!({"model": "scripted", "turns": [
            {"text": "", "tool_calls": [{"name": "fs_write",
                "arguments": format!(r#"{{"path":"{p}","content":"x","__proto__":{{}}}}"#)}]},
            {"text": "", "tool_calls": [{"name": "fs_write",
                "arguments": format!(r#"{{"path":"{p}","content":"x","n":99999999999999999999}}"#)}]},
            {"text": "never"}
        ]})
        .to_string(),
    )
    .unwrap();
    let mut o = HttpOptions::new("127.0.0.1:0".parse().unwrap());
    o.script = Some(script);
    let host = ws.host().await;
    let srv = start(host.clone(), o).await;
    let c = http();
    for (what, body) in [
        ("duplicate key", r#"{"task":"a","task":"b"}"#.to_string()),
        (
            "duplicate key, escaped",
            r#"{"task":"a","t\u0061sk":"b"}"#.to_string(),
        ),
        (
            "__proto__",
            r#"{"task":"a","__proto__":{"x":1}}"#.to_string(),
        ),
        (
            "huge number",
            r#"{"task":"a","max_steps":18446744073709551616}"#.to_string(),
        ),
        ("lone surrogate", r#"{"task":"\udc00"}"#.to_string()),
        (
            "deep nesting",
            format!(
                r#"{{"task":"a","x":{}}}"#,
                "[".repeat(200) + &"]".repeat(200)
            ),
        ),
        ("a batch", r#"[{"task":"a"}]"#.to_string()),
    ] {
        let r = c
            .post(srv.url("/v1/turns"))
            .header("Content-Type", "application/json")
            .body(body)
            .send()
            .await
            .unwrap();
        let status = r.status().as_u16();
        let answer: Value = r.json().await.unwrap();
        assert_eq!(status, 400, "{what}: {answer}");
        assert_eq!(answer["detail"]["code"], "invalid_json", "{what}: {answer}");
    }
    assert!(
        host.store.sagas(10).await.unwrap().is_empty(),
        "no turn ran"
    );
    let r: Value = c
        .post(srv.url("/v1/turns"))
        .json(&json!({"task": "write it"}))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(r["outcome"], "tool_hallucination", "{r:#}");
    let errors: Vec<String> = r["trace"]["steps"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|s| s["type"] == "action")
        .map(|s| s["error"]["message"].as_str().unwrap_or("").to_string())
        .collect();
    assert_eq!(errors.len(), 2, "{r:#}");
    assert!(errors[0].contains("__proto__"), "{errors:?}");
    assert!(errors[1].contains("does not fit 64 bits"), "{errors:?}");
    assert!(!ws.ws().join("pwned.txt").exists());
}

#[test]
fn the_command_line_and_plans_meet_the_same_rule() {
    let ws = ws();
    let p = ws.ws_path("pwned.txt");
    for args in [
        format!(r#"{{"path":"{p}","content":"x","path":"{p}2"}}"#),
        format!(r#"{{"path":"{p}","content":"x","__proto__":{{}}}}"#),
        format!(r#"{{"path":"{p}","content":"x","n":18446744073709551616}}"#),
        format!(r#"{{"path":"{p}","content":"\udfff"}}"#),
        format!(
            r#"{{"path":"{p}","content":"x","d":{}}}"#,
            "[".repeat(70) + &"]".repeat(70)
        ),
    ] {
        let out = ws
            .capsaga(&["--json", "call", "fs_write", &args])
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&out.stdout).to_string()
            + &String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(4), "{args:.80}: {text:.400}");
        assert!(text.contains("not valid JSON"), "{args:.80}: {text:.400}");
    }
    // A plan: its step's arguments are held to the same rule (the 1 MiB
    // limit included: an argument on a command line cannot be that long).
    for (n, step_args) in [
        format!(r#"{{"path":"{p}","content":"{}"}}"#, "a".repeat(1 << 20)),
        format!(r#"{{"path":"{p}","content":"x","__proto__":{{"a":1}}}}"#),
        format!(r#"{{"path":"{p}","content":"x","n":99999999999999999999}}"#),
        format!(r#"{{"path":"{p}","content":"x","path":"{p}"}}"#),
    ]
    .iter()
    .enumerate()
    {
        let plan = ws.root.join(format!("plan{n}.json"));
        std::fs::write(
            &plan,
            format!(
                r#"{{"description":"hostile","steps":[{{"tool":"fs_write","args":{step_args}}}]}}"#
            ),
        )
        .unwrap();
        let out = ws
            .capsaga(&["--json", "run", "--plan", &plan.to_string_lossy()])
            .output()
            .unwrap();
        assert!(!out.status.success(), "{step_args:.80}");
    }
    assert!(!ws.ws().join("pwned.txt").exists());
}

/// Every REST route that reads a body reads it under the same rule, the
/// operator's routes and the approval decision included (their body may be
/// left out, never read leniently).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_route_with_a_body_refuses_a_duplicate_key() {
    let ws = ws();
    let host = ws.host().await;
    let srv = start(
        host.clone(),
        HttpOptions::new("127.0.0.1:0".parse().unwrap()),
    )
    .await;
    let c = http();
    for (method, path, body) in [
        (
            "POST",
            "/v1/pause",
            r#"{"mode":"read_only","mode":"paused"}"#,
        ),
        ("POST", "/v1/pause", r#"{"note":"a","n\u006fte":"b"}"#),
        ("POST", "/v1/resume", r#"{"note":"a","note":"b"}"#),
        (
            "POST",
            "/v1/approvals/ap-1/approve",
            r#"{"note":"a","note":"b"}"#,
        ),
        (
            "POST",
            "/v1/approvals/ap-1/deny",
            r#"{"note":"a","__proto__":{}}"#,
        ),
        ("PUT", "/v1/keys/k", r#"{"secret":"a","secret":"b"}"#),
        ("POST", "/v1/pause", r#"{"mode":"paused"} trailing"#),
    ] {
        let req = if method == "PUT" {
            c.put(srv.url(path))
        } else {
            c.post(srv.url(path))
        };
        let r = req
            .header("Content-Type", "application/json")
            .body(body)
            .send()
            .await
            .unwrap();
        let status = r.status().as_u16();
        let answer: Value = r.json().await.unwrap();
        assert_eq!(status, 400, "{method} {path} {body}: {answer}");
        assert_eq!(answer["detail"]["code"], "invalid_json", "{path}: {answer}");
    }
    // Nothing was paused by a refused body; an empty body still means the
    // defaults.
    let mode = || async {
        let sw: Value = c
            .get(srv.url("/v1/pause"))
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        sw["mode"].clone()
    };
    let sw = mode().await;
    assert_eq!(sw, "running", "{sw}");
    let r = c.post(srv.url("/v1/pause")).send().await.unwrap();
    assert!(r.status().is_success(), "{r:?}");
    let sw = mode().await;
    assert_eq!(sw, "paused", "{sw}");
    let r = c.post(srv.url("/v1/resume")).send().await.unwrap();
    assert!(r.status().is_success(), "{r:?}");
}
