//! Live MCP sessions are bounded (issue 24 item 5), tried from the
//! attacker's side against a real `capsaga serve`: one principal opening
//! thousands of sessions only ever evicts its own least recently active
//! idle ones; a session with a call in flight is never evicted; past the
//! caps with nothing idle, `initialize` gets 429 (per principal) or 503
//! (server) with a JSON-RPC error body; `/healthz` reports the count.

use super::{http, start};
use capsaga_core::principal::Role;
use capsaga_core::session_table::SessionCaps;
use capsaga_server::HttpOptions;
use capsaga_server::auth::digest;
use capsaga_tests::TestWorkspace;
use capsaga_tests::mcp_rig::{YesMan, call, connect_as};
use serde_json::{Value, json};
use std::time::{Duration, Instant};

const POLICY: &str = r#"
[tools.time_now]
[tools.spin]
limits = { deadline_ms = 120000, fuel = 10000000000000 }
"#;

const INIT: &str = r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}"#;

async fn server(
    caps: SessionCaps,
    names: &[(&str, Role)],
) -> (TestWorkspace, capsaga_tests::mcp_rig::Running) {
    let ws = TestWorkspace::new(&["time_now", "spin"], POLICY);
    let host = ws.host().await;
    for (name, role) in names {
        host.store
            .create_token(name, *role, &digest(secret(name).as_bytes()), "test")
            .await
            .unwrap();
    }
    let mut o = HttpOptions::new("127.0.0.1:0".parse().unwrap());
    o.sessions = caps;
    let srv = start(host, o).await;
    (ws, srv)
}

fn secret(name: &str) -> String {
    format!("{name}-secret-0123456789abcdef")
}

/// A raw `initialize`: the status, the session id, the body.
async fn open(c: &reqwest::Client, url: &str, who: &str) -> (u16, Option<String>, String) {
    let r = c
        .post(url)
        .header("Accept", "application/json, text/event-stream")
        .header("Content-Type", "application/json")
        .bearer_auth(secret(who))
        .body(INIT)
        .send()
        .await
        .unwrap();
    let status = r.status().as_u16();
    let sid = r
        .headers()
        .get("mcp-session-id")
        .map(|v| v.to_str().unwrap().to_string());
    (status, sid, r.text().await.unwrap())
}

/// `tools/list` on session `sid`: its HTTP status.
async fn list(c: &reqwest::Client, url: &str, who: &str, sid: &str) -> u16 {
    let r = c
        .post(url)
        .header("Accept", "application/json, text/event-stream")
        .header("Mcp-Session-Id", sid)
        .header("Mcp-Protocol-Version", "2025-11-25")
        .bearer_auth(secret(who))
        .json(&json!({"jsonrpc":"2.0","id":2,"method":"tools/list"}))
        .send()
        .await
        .unwrap();
    let s = r.status().as_u16();
    let _ = r.text().await;
    s
}

async fn health(c: &reqwest::Client, url: &str) -> Value {
    c.get(url).send().await.unwrap().json().await.unwrap()
}

/// Wait (bounded, generously) until `f` holds.
async fn until<F: std::future::Future<Output = bool>>(what: &str, mut f: impl FnMut() -> F) {
    let t = Instant::now();
    while !f().await {
        assert!(t.elapsed() < Duration::from_secs(120), "never: {what}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn thousands_of_sessions_of_one_principal_never_evict_another_principals() {
    let caps = SessionCaps {
        max_total: 64,
        max_per_principal: 16,
    };
    let (_ws, srv) = server(caps, &[("bob", Role::Client), ("mallory", Role::Client)]).await;
    let url = srv.url("/mcp");
    let c = http();
    let bob = connect_as(url.clone(), Some(&secret("bob")), YesMan::default())
        .await
        .unwrap();
    call(&bob, "time_now", &json!({})).await;
    let t = Instant::now();
    let mut sids = Vec::new();
    for _ in 0..2000 {
        let (status, sid, body) = open(&c, &url, "mallory").await;
        assert_eq!(status, 200, "{body}");
        sids.push(sid.unwrap());
    }
    eprintln!(
        "sessions: 2000 initialize of one principal in {} ms",
        t.elapsed().as_millis()
    );
    let h = health(&c, &srv.url("/healthz")).await;
    assert_eq!(h["sessions"]["max"], 64, "{h}");
    assert_eq!(h["sessions"]["live"], 17, "16 of Mallory's and Bob's: {h}");
    // Bob's idle session survived all of it.
    let r = call(&bob, "time_now", &json!({})).await;
    assert_ne!(r.is_error, Some(true), "{r:?}");
    // Mallory's oldest are gone, her newest live; touching one keeps it.
    assert_eq!(list(&c, &url, "mallory", &sids[0]).await, 404);
    assert_eq!(list(&c, &url, "mallory", &sids[1983]).await, 404);
    let newest = &sids[1984..];
    for s in newest {
        assert_eq!(list(&c, &url, "mallory", s).await, 200);
    }
    assert_eq!(list(&c, &url, "mallory", &newest[0]).await, 200);
    let (status, _, _) = open(&c, &url, "mallory").await;
    assert_eq!(status, 200);
    // Touched in order, then newest[0] again: newest[1] was the least
    // recently active, and made room.
    assert_eq!(list(&c, &url, "mallory", &newest[1]).await, 404);
    assert_eq!(list(&c, &url, "mallory", &newest[0]).await, 200);
    bob.cancel().await.ok();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn busy_sessions_are_kept_and_the_excess_gets_429_then_503() {
    let caps = SessionCaps {
        max_total: 3,
        max_per_principal: 2,
    };
    let (_ws, srv) = server(
        caps,
        &[
            ("carol", Role::Client),
            ("dave", Role::Client),
            ("eve", Role::Client),
            ("alice", Role::Operator),
        ],
    )
    .await;
    let url = srv.url("/mcp");
    let c = http();
    // Three sessions each running a call that spins until stopped.
    let mut clients = Vec::new();
    let mut calls = Vec::new();
    for who in ["carol", "carol", "dave"] {
        let cl = connect_as(url.clone(), Some(&secret(who)), YesMan::default())
            .await
            .unwrap();
        let cl = std::sync::Arc::new(cl);
        let c2 = cl.clone();
        calls.push(tokio::spawn(
            async move { call(&c2, "spin", &json!({})).await },
        ));
        clients.push(cl);
    }
    let h = srv.url("/healthz");
    until("three sessions busy", || {
        let (c, h) = (c.clone(), h.clone());
        async move { health(&c, &h).await["sessions"]["busy"] == 3 }
    })
    .await;
    // Carol at her cap, both busy: 429, a JSON-RPC error.
    let (status, sid, body) = open(&c, &url, "carol").await;
    assert_eq!(status, 429, "{body}");
    assert!(sid.is_none());
    let v: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(v["jsonrpc"], "2.0", "{v}");
    assert_eq!(v["error"]["code"], -32000, "{v}");
    assert!(
        v["error"]["message"]
            .as_str()
            .unwrap()
            .contains("per principal")
    );
    // Eve: the server is full and nothing is idle: 503.
    let (status, _, body) = open(&c, &url, "eve").await;
    assert_eq!(status, 503, "{body}");
    let v: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(v["error"]["code"], -32000, "{v}");
    assert_eq!(health(&c, &h).await["sessions"]["live"], 3);
    // The operator pauses: the spinning calls are stopped, the sessions
    // become idle; after resuming, Eve gets in (a session of Carol, the
    // heaviest principal, makes room) and every busy one answered.
    let r = c
        .post(srv.url("/v1/pause"))
        .bearer_auth(secret("alice"))
        .json(&json!({"note": "session test"}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 200);
    for t in calls {
        let r = tokio::time::timeout(Duration::from_secs(60), t)
            .await
            .expect("the paused call ends")
            .unwrap();
        assert_eq!(r.is_error, Some(true), "{r:?}");
    }
    until("no session busy", || {
        let (c, h) = (c.clone(), h.clone());
        async move { health(&c, &h).await["sessions"]["busy"] == 0 }
    })
    .await;
    let r = c
        .post(srv.url("/v1/resume"))
        .bearer_auth(secret("alice"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 200);
    let (status, _, body) = open(&c, &url, "eve").await;
    assert_eq!(status, 200, "{body}");
    let h = health(&c, &h).await;
    assert_eq!(h["sessions"]["live"], 3, "{h}");
    for cl in clients {
        if let Ok(cl) = std::sync::Arc::try_unwrap(cl) {
            cl.cancel().await.ok();
        }
    }
}
