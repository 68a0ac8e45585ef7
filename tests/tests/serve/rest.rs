//! The REST API (seed 003) with a real HTTP client: the token, healthz in
//! each mode, a full simulated turn, approvals over HTTP, the
//! `no_allowed_provider` detail, and the limits on by default.

use super::{http, start};
use capsaga_server::{HttpOptions, ServeError, serve_http};
use capsaga_tests::TestWorkspace;
use capsaga_tests::llm_server::LlmServer;
use serde_json::{Value, json};

const TOKEN: &str = "test-token-0123456789abcdef";

const POLICY: &str = r#"
[tools.fs_write]
grants = ["fs:write:~/ws/**"]
[tools.fs_edit]
grants = ["fs:write:~/ws/**"]
approval = "always"
"#;

/// A scripted turn: write a file, then answer.
fn script(ws: &TestWorkspace, name: &str, calls: &str) -> std::path::PathBuf {
    let p = ws.root.join(name);
    std::fs::write(
        &p,
        format!(
            r#"{{"model":"scripted","turns":[
            {{"text":"Working.","tool_calls":[{calls}]}},
            {{"text":"Done."}}
        ]}}"#
        ),
    )
    .unwrap();
    p
}

fn ws_with(extra: &str) -> TestWorkspace {
    TestWorkspace::new(&["fs_write", "fs_edit"], &format!("{POLICY}\n{extra}"))
}

async fn json_of(r: reqwest::Response) -> (u16, Value) {
    let status = r.status().as_u16();
    let text = r.text().await.unwrap();
    (
        status,
        serde_json::from_str(&text).unwrap_or(Value::String(text)),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_token_guards_every_route_but_healthz() {
    let ws = ws_with("");
    let mut o = HttpOptions::new("127.0.0.1:0".parse().unwrap());
    o.token = Some(TOKEN.into());
    let srv = start(ws.host().await, o).await;
    let c = http();
    let ok = c.get(srv.url("/healthz")).send().await.unwrap();
    assert_eq!(ok.status().as_u16(), 200);
    for (method, path) in [
        ("GET", "/v1/sagas"),
        ("GET", "/v1/approvals"),
        ("GET", "/v1/traces/00000000"),
        ("POST", "/v1/turns"),
        ("POST", "/v1/approvals/0000/approve"),
        ("POST", "/mcp"),
    ] {
        let m: reqwest::Method = method.parse().unwrap();
        let none = c.request(m.clone(), srv.url(path)).send().await.unwrap();
        assert_eq!(
            none.status().as_u16(),
            401,
            "{method} {path} without a token"
        );
        let wrong = c
            .request(m.clone(), srv.url(path))
            .bearer_auth("test-token-0123456789abcdeX")
            .send()
            .await
            .unwrap();
        assert_eq!(
            wrong.status().as_u16(),
            401,
            "{method} {path} with a wrong token"
        );
        let short = c
            .request(m.clone(), srv.url(path))
            .bearer_auth("t")
            .send()
            .await
            .unwrap();
        assert_eq!(
            short.status().as_u16(),
            401,
            "{method} {path} with a prefix"
        );
    }
    let (status, body) = json_of(
        c.get(srv.url("/v1/sagas"))
            .bearer_auth(TOKEN)
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(status, 200, "{body}");
    assert!(body["sagas"].is_array());
}

#[test]
fn the_token_comparison_hashes_both_sides_and_compares_in_constant_time() {
    use capsaga_server::auth;
    use sha2::Digest;
    let expected: [u8; 32] = sha2::Sha256::digest(TOKEN.as_bytes()).into();
    assert!(auth::matches(&expected, TOKEN.as_bytes()));
    assert!(!auth::matches(&expected, b""));
    assert!(!auth::matches(&expected, &TOKEN.as_bytes()[..10]));
    assert!(!auth::matches(&expected, format!("{TOKEN}x").as_bytes()));
    // By construction: `matches` compares two SHA-256 digests (always 32
    // bytes) with subtle's ConstantTimeEq; the source says so and has no `==`.
    let src = std::fs::read_to_string(capsaga_tests::repo_root().join("host/server/src/auth.rs"))
        .unwrap();
    assert!(src.contains("ct_eq"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_a_token_only_loopback_is_served() {
    let ws = ws_with("");
    let o = HttpOptions::new("0.0.0.0:0".parse().unwrap());
    let r = serve_http(ws.host().await, &o, async {}, |_| {}).await;
    assert!(matches!(r, Err(ServeError::NeedsToken(_))), "{r:?}");
    let mut weak = HttpOptions::new("0.0.0.0:0".parse().unwrap());
    weak.token = Some("short".into());
    let r = serve_http(ws.host().await, &weak, async {}, |_| {}).await;
    assert!(matches!(r, Err(ServeError::WeakToken)), "{r:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn healthz_in_each_mode() {
    // Simulation: a script and no provider.
    let ws = ws_with("");
    let s = script(
        &ws,
        "s.json",
        r#"{"name":"fs_write","arguments":{"path":"${home}/ws/a.txt","content":"a"}}"#,
    );
    let mut o = HttpOptions::new("127.0.0.1:0".parse().unwrap());
    o.script = Some(s);
    let srv = start(ws.host().await, o).await;
    let (_, h) = json_of(http().get(srv.url("/healthz")).send().await.unwrap()).await;
    assert_eq!(h["status"], "ok", "{h}");
    assert_eq!(h["mode"], "simulation", "{h}");
    assert_eq!(h["provider"], "scripted", "{h}");
    // Live: a configured (keyless) OpenAI-compatible provider.
    let llm = LlmServer::start(vec![]).await;
    let live = ws_with(&format!(
        "[providers.local]\nkind = \"openai\"\nbase_url = \"{}\"\nmodel = \"m\"\nkeyless = true\n",
        llm.url("/v1")
    ));
    let srv = start(
        live.host().await,
        HttpOptions::new("127.0.0.1:0".parse().unwrap()),
    )
    .await;
    let (_, h) = json_of(http().get(srv.url("/healthz")).send().await.unwrap()).await;
    assert_eq!(h["status"], "ok", "{h}");
    assert_eq!(h["mode"], "live", "{h}");
    assert_eq!(h["provider"], "local", "{h}");
    assert_eq!(h["default_provider"], "local", "{h}");
    assert_eq!(h["configured_providers"], json!(["local"]), "{h}");
    // Degraded: nothing configured and no script.
    let none = ws_with("");
    let srv = start(
        none.host().await,
        HttpOptions::new("127.0.0.1:0".parse().unwrap()),
    )
    .await;
    let (_, h) = json_of(http().get(srv.url("/healthz")).send().await.unwrap()).await;
    assert_eq!(h["status"], "degraded", "{h}");
    assert!(h["warning"].as_str().is_some_and(|w| !w.is_empty()), "{h}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_full_turn_in_simulation_then_its_trace_and_saga() {
    let ws = ws_with("");
    let s = script(
        &ws,
        "s.json",
        r#"{"name":"fs_write","arguments":{"path":"${home}/ws/a.txt","content":"from a turn"}}"#,
    );
    let mut o = HttpOptions::new("127.0.0.1:0".parse().unwrap());
    o.script = Some(s);
    o.token = Some(TOKEN.into());
    let srv = start(ws.host().await, o).await;
    let c = http();
    let (status, turn) = json_of(
        c.post(srv.url("/v1/turns"))
            .bearer_auth(TOKEN)
            .json(&json!({"task": "write a.txt", "role": "legal", "autonomy": "autonomous"}))
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(status, 200, "{turn}");
    assert_eq!(turn["outcome"], "success", "{turn}");
    assert_eq!(turn["mode"], "simulation");
    assert_eq!(turn["saga_state"], "Done", "{turn}");
    assert_eq!(
        std::fs::read_to_string(ws.ws().join("a.txt")).unwrap(),
        "from a turn"
    );
    let trace_id = turn["trace_id"].as_str().unwrap();
    let (status, tr) = json_of(
        c.get(srv.url(&format!("/v1/traces/{trace_id}")))
            .bearer_auth(TOKEN)
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(status, 200, "{tr}");
    assert_eq!(tr["trace_id"], trace_id);
    let saga_id = turn["saga_id"].as_str().unwrap();
    let (status, saga) = json_of(
        c.get(srv.url(&format!("/v1/sagas/{saga_id}")))
            .bearer_auth(TOKEN)
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(status, 200, "{saga}");
    assert_eq!(saga["steps"].as_array().unwrap().len(), 1, "{saga}");
    assert_eq!(saga["steps"][0]["status"], "COMMIT", "{saga}");
    let (status, _) = json_of(
        c.get(srv.url("/v1/sagas/ffffffff-0000"))
            .bearer_auth(TOKEN)
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(status, 404);
    // A body the contract does not know is refused, not ignored.
    let (status, _) = json_of(
        c.post(srv.url("/v1/turns"))
            .bearer_auth(TOKEN)
            .json(&json!({"task": "x", "credentials": "k"}))
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert!(status == 400 || status == 422, "{status}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn approvals_over_http_approve_then_the_same_call_runs_once() {
    let ws = ws_with("");
    std::fs::write(ws.ws().join("e.txt"), "hello world").unwrap();
    let s = script(
        &ws,
        "s.json",
        r#"{"name":"fs_edit","arguments":{"path":"${home}/ws/e.txt","old_string":"world","new_string":"there"}}"#,
    );
    let mut o = HttpOptions::new("127.0.0.1:0".parse().unwrap());
    o.script = Some(s);
    let srv = start(ws.host().await, o).await;
    let c = http();
    let turn = |c: reqwest::Client, url: String| async move {
        json_of(
            c.post(url)
                .json(&json!({"task": "edit e.txt"}))
                .send()
                .await
                .unwrap(),
        )
        .await
    };
    let (status, first) = turn(c.clone(), srv.url("/v1/turns")).await;
    assert_eq!(status, 200, "{first}");
    assert_eq!(first["outcome"], "user_aborted", "{first}");
    assert_eq!(
        std::fs::read_to_string(ws.ws().join("e.txt")).unwrap(),
        "hello world"
    );
    let (_, list) = json_of(c.get(srv.url("/v1/approvals")).send().await.unwrap()).await;
    let pending = list["approvals"].as_array().unwrap();
    assert_eq!(pending.len(), 1, "{list}");
    let id = pending[0]["approval_id"].as_str().unwrap().to_string();
    let (status, decided) = json_of(
        c.post(srv.url(&format!("/v1/approvals/{id}/approve")))
            .json(&json!({"by": "alice", "note": "fine"}))
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(status, 200, "{decided}");
    assert_eq!(decided["approval"]["status"], "approved", "{decided}");
    // Recorded under the authenticated principal (no token: the loopback
    // operator), never the `by` the request names.
    assert_eq!(
        decided["approval"]["decided_by"], "loopback (operator)",
        "{decided}"
    );
    // Deciding twice is a conflict, an unknown id is 404.
    let (status, _) = json_of(
        c.post(srv.url(&format!("/v1/approvals/{id}/deny")))
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(status, 409);
    let (status, _) = json_of(
        c.post(srv.url("/v1/approvals/abcdef12/approve"))
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(status, 404);
    let (status, second) = turn(c.clone(), srv.url("/v1/turns")).await;
    assert_eq!(status, 200, "{second}");
    assert_eq!(second["outcome"], "success", "{second}");
    assert_eq!(
        std::fs::read_to_string(ws.ws().join("e.txt")).unwrap(),
        "hello there"
    );
    // Claimed once: a third identical turn asks again.
    let (_, third) = turn(c.clone(), srv.url("/v1/turns")).await;
    assert_eq!(third["outcome"], "user_aborted", "{third}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_allowed_provider_has_the_seed_detail_and_sends_nothing() {
    let llm = LlmServer::start(vec![]).await;
    let ws = ws_with(&format!(
        "[providers.local]\nkind = \"openai\"\nbase_url = \"{}\"\nmodel = \"m\"\nkeyless = true\n",
        llm.url("/v1")
    ));
    let srv = start(
        ws.host().await,
        HttpOptions::new("127.0.0.1:0".parse().unwrap()),
    )
    .await;
    let (status, body) = json_of(
        http()
            .post(srv.url("/v1/turns"))
            .json(&json!({"task": "hi", "allowed_providers": ["none"]}))
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(status, 422, "{body}");
    assert_eq!(
        body,
        json!({"detail": {
            "code": "no_allowed_provider",
            "message": "No allowed model provider is configured for this request; nothing was sent.",
            "providers_tried": [],
            "allowed_providers": [],
            "configured_providers": ["local"],
        }})
    );
    assert!(llm.requests().is_empty(), "nothing reached the provider");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rebinding_hosts_foreign_origins_and_big_bodies_are_refused_by_default() {
    let ws = ws_with("");
    let mut o = HttpOptions::new("127.0.0.1:0".parse().unwrap());
    o.max_body_bytes = 1024;
    let srv = start(ws.host().await, o).await;
    let c = http();
    let init = json!({"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}});
    let mcp = |host: &str, origin: Option<&str>| {
        let mut r = c
            .post(srv.url("/mcp"))
            .header("Host", host)
            .header("Accept", "application/json, text/event-stream")
            .json(&init);
        if let Some(o) = origin {
            r = r.header("Origin", o);
        }
        r.send()
    };
    let evil = mcp("evil.example.com", Some("http://evil.example.com"))
        .await
        .unwrap();
    assert_eq!(evil.status().as_u16(), 403);
    let evil_host = mcp("evil.example.com", None).await.unwrap();
    assert_eq!(evil_host.status().as_u16(), 403);
    let bound = srv.addr.to_string();
    let foreign_origin = mcp(&bound, Some("https://evil.example.com")).await.unwrap();
    assert_eq!(foreign_origin.status().as_u16(), 403);
    let good = mcp(&bound, Some(&format!("http://{bound}"))).await.unwrap();
    assert_eq!(good.status().as_u16(), 200);
    assert!(
        good.headers().get("access-control-allow-origin").is_none(),
        "no CORS"
    );
    let sid = good
        .headers()
        .get("mcp-session-id")
        .unwrap()
        .to_str()
        .unwrap()
        .to_string();
    assert_eq!(sid.len(), 64, "256-bit session id: {sid}");
    assert!(sid.bytes().all(|b| b.is_ascii_hexdigit()));
    let rest = c
        .get(srv.url("/v1/sagas"))
        .header("Host", "evil.example.com")
        .send()
        .await
        .unwrap();
    assert_eq!(rest.status().as_u16(), 421);
    let big = c
        .post(srv.url("/v1/turns"))
        .header("Content-Type", "application/json")
        .body(format!("{{\"task\": \"{}\"}}", "x".repeat(4096)))
        .send()
        .await
        .unwrap();
    assert_eq!(big.status().as_u16(), 413);
    let huge_header = c
        .get(srv.url("/healthz"))
        .header("X-Big", "y".repeat(40 * 1024))
        .send()
        .await
        .unwrap();
    assert_eq!(huge_header.status().as_u16(), 431);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn forged_guessed_and_closed_session_ids_are_unknown() {
    let ws = ws_with("");
    let mut o = HttpOptions::new("127.0.0.1:0".parse().unwrap());
    o.token = Some("session-token-0123456789".into());
    let srv = start(ws.host().await, o).await;
    let c = http();
    let bearer = "Bearer session-token-0123456789";
    let post = |sid: Option<&str>, auth: Option<&str>, body: Value| {
        let mut r = c
            .post(srv.url("/mcp"))
            .header("Accept", "application/json, text/event-stream")
            .json(&body);
        if let Some(s) = sid {
            r = r.header("Mcp-Session-Id", s);
        }
        if let Some(a) = auth {
            r = r.header("Authorization", a);
        }
        r.send()
    };
    let init = json!({"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}});
    let list = json!({"jsonrpc":"2.0","id":2,"method":"tools/list"});
    let opened = post(None, Some(bearer), init).await.unwrap();
    assert_eq!(opened.status().as_u16(), 200);
    let sid = opened.headers()["mcp-session-id"]
        .to_str()
        .unwrap()
        .to_string();
    // The real id without the token, or with a wrong one: 401.
    for auth in [None, Some("Bearer session-token-0123456780")] {
        let r = post(Some(&sid), auth, list.clone()).await.unwrap();
        assert_eq!(r.status().as_u16(), 401, "{auth:?}");
    }
    // Ids that were never issued, with the right token: unknown.
    let mut flipped = sid.clone().into_bytes();
    flipped[0] = if flipped[0] == b'0' { b'1' } else { b'0' };
    let flipped = String::from_utf8(flipped).unwrap();
    for forged in [
        flipped.as_str(),
        &sid[..32],
        "0000000000000000000000000000000000000000000000000000000000000000",
        "../../sessions",
        &format!("{sid}{sid}"),
    ] {
        let r = post(Some(forged), Some(bearer), list.clone())
            .await
            .unwrap();
        let s = r.status().as_u16();
        assert!(s == 404 || s == 400, "{forged}: {s}");
    }
    // Closed by its client: unknown from then on.
    let closed = c
        .delete(srv.url("/mcp"))
        .header("Mcp-Session-Id", &sid)
        .header("Authorization", bearer)
        .send()
        .await
        .unwrap();
    assert!(closed.status().is_success(), "{}", closed.status());
    let r = post(Some(&sid), Some(bearer), list).await.unwrap();
    assert_eq!(r.status().as_u16(), 404);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_trickling_its_headers_is_disconnected() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let ws = ws_with("");
    let srv = start(
        ws.host().await,
        HttpOptions::new("127.0.0.1:0".parse().unwrap()),
    )
    .await;
    let mut slow = tokio::net::TcpStream::connect(srv.addr).await.unwrap();
    slow.write_all(b"GET /healthz HTTP/1.1\r\nHost: localhost\r\n")
        .await
        .unwrap();
    let t = std::time::Instant::now();
    let limit = capsaga_server::conn::HEADER_READ_TIMEOUT;
    let mut buf = Vec::new();
    let read = tokio::time::timeout(limit * 3, slow.read_to_end(&mut buf)).await;
    assert!(
        read.is_ok(),
        "still connected {} s after the headers began",
        t.elapsed().as_secs()
    );
    assert!(t.elapsed() >= limit / 2, "closed before the timeout");
    // The server still answers a well-behaved client.
    let r = http().get(srv.url("/healthz")).send().await.unwrap();
    assert_eq!(r.status().as_u16(), 200);
}
