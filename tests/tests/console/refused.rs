//! From the attacker's side: a page of another origin submitting a
//! decision with the operator's cookie, a same-origin POST without (or
//! with a wrong) CSRF token, a client token at sign-in, a revoked token's
//! session, and the console's headers.

use super::{ALICE, BOB, PAYLOAD, no_script_ran, parked_plan, server, shot, sign_in, ws};
use capsaga_core::approval::ApprovalStatus;
use capsaga_tests::mcp_rig::http;
use capsaga_tests::webdriver::Browser;
use serde_json::json;

/// A page on `127.0.0.1:<another port>` whose inline script submits a
/// form to `target` (the browser sends the console's cookie with it: the
/// two origins are the same site).
async fn attacker(target: String) -> capsaga_tests::mcp_rig::Running {
    let page = format!(
        r#"<!doctype html><html><body>
<form id="f" method="post" action="{target}">
<input name="csrf" value="guessed"><input name="verb" value="approve"></form>
<script>document.getElementById("f").submit();</script></body></html>"#
    );
    let app = axum::Router::new().route(
        "/",
        axum::routing::get(move || {
            let page = page.clone();
            async move { axum::response::Html(page) }
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    tokio::spawn(async move {
        let _ = axum::serve(listener, app)
            .with_graceful_shutdown(async move {
                let _ = stopped.await;
            })
            .await;
    });
    capsaga_tests::mcp_rig::Running::stopped_by(addr, stop)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn csrf_from_another_origin_a_missing_token_and_client_tokens_are_refused() {
    let Some(b) = Browser::start().await else {
        return;
    };
    let ws = ws();
    let (_, id) = parked_plan(
        &ws,
        "p.json",
        json!([{"tool": "fs_write", "args": {"path": ws.ws_path("p.txt"), "content": PAYLOAD}}]),
    );
    let (host, srv) = server(&ws, "hi").await;
    let pending =
        || async { host.store.approval(&id).await.unwrap().status == ApprovalStatus::Pending };

    // The headers of every console answer.
    let r = http().get(srv.url("/console/login")).send().await.unwrap();
    let csp = r.headers()["content-security-policy"]
        .to_str()
        .unwrap()
        .to_string();
    assert!(
        csp.contains("script-src 'self'") && csp.contains("default-src 'none'"),
        "{csp}"
    );
    assert!(!csp.contains("unsafe-inline"), "{csp}");
    assert_eq!(r.headers()["x-frame-options"], "DENY");

    // The same Host and Origin guard as /mcp: a rebinding name, a page of
    // another origin (even with a valid operator session, further down,
    // a foreign Origin on a POST is refused).
    let r = http()
        .get(srv.url("/console/login"))
        .header("host", "evil.example")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 421, "a Host outside the allowlist");
    let r = http()
        .get(srv.url("/console/login"))
        .header("origin", "http://evil.example")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 403, "an Origin outside the allowlist");

    // A client token cannot open the console: no session cookie.
    sign_in(&b, &srv, BOB).await;
    b.wait_text("#flash", "client-role token cannot open the console")
        .await;
    assert!(
        b.cookies()
            .await
            .iter()
            .all(|c| c["name"] != "capsaga_console"),
        "no session for a client"
    );
    b.screenshot(&shot("client-refused")).await;
    b.goto(&srv.url("/console/approvals")).await;
    assert!(b.url().await.ends_with("/console/login"));
    // Neither can a made-up token.
    sign_in(&b, &srv, "not-a-token-0123456789abcdef").await;
    b.wait_text("#flash", "not a valid token").await;

    // The operator signs in; a page of another origin posts a decision.
    sign_in(&b, &srv, ALICE).await;
    b.wait_text("#operator", "token:alice").await;
    let evil = attacker(srv.url(&format!("/console/approvals/{id}/decide"))).await;
    b.goto(&evil.url("/")).await;
    b.wait_text("body", "Refused").await;
    assert!(
        b.text("body").await.contains("another origin"),
        "{}",
        b.text("body").await
    );
    assert!(pending().await, "the cross-origin POST decided nothing");

    // The same origin without the session's CSRF token, or with a wrong
    // one: refused too (the cookie taken from the browser, as a script
    // could not: it is HttpOnly).
    let cookie = b
        .cookies()
        .await
        .into_iter()
        .find(|c| c["name"] == "capsaga_console")
        .unwrap();
    let cookie = format!("capsaga_console={}", cookie["value"].as_str().unwrap());
    for body in [
        "verb=approve",
        "verb=approve&csrf=0000",
        "verb=approve&csrf=",
    ] {
        let r = http()
            .post(srv.url(&format!("/console/approvals/{id}/decide")))
            .header("cookie", &cookie)
            .header("origin", format!("http://{}", srv.addr))
            .header("content-type", "application/x-www-form-urlencoded")
            .body(body)
            .send()
            .await
            .unwrap();
        assert_eq!(r.status().as_u16(), 403, "{body}");
    }
    assert!(
        pending().await,
        "no POST without the CSRF token decided anything"
    );

    // The queue still renders the hostile arguments as text.
    b.goto(&srv.url("/console/approvals")).await;
    b.wait_text("#pending", "1 pending").await;
    no_script_ran(&b, "approvals").await;

    // Revoking alice's token ends her session at the next request.
    host.store.revoke_token("alice", "test").await.unwrap();
    b.goto(&srv.url("/console/approvals")).await;
    assert!(
        b.url().await.ends_with("/console/login"),
        "{}",
        b.url().await
    );
    assert!(pending().await);
}
