//! `http_request` compensation: what the API lets it undo.

use super::*;

fn ctx(dry_run: bool) -> CallContext {
    CallContext {
        saga_id: "s".into(),
        step_seq: 0,
        idempotency_key: "s:0:http_request:k".into(),
        deadline_ms: 0,
        dry_run,
    }
}

async fn call(
    host: &Host,
    tool: &str,
    args: Value,
    op: Op,
    dry: bool,
) -> Result<Option<ToolOutput>, ToolError> {
    let t = host.registry.get(tool).unwrap();
    let grants = t.grants.as_ref().unwrap().clone();
    let c = ctx(dry);
    let args = args.to_string();
    host.sandbox
        .call(CallRequest {
            tool,
            prepared: t.component().unwrap(),
            bindings: &host.sandbox.factors().configure(&grants),
            limits: &t.limits,
            ctx: &c,
            args_json: &args,
            op: &op,
        })
        .await
        .0
}

#[tokio::test(flavor = "multi_thread")]
async fn http_request_undoes_what_the_api_lets_it_undo() {
    let srv = TestServer::start().await;
    let tp = srv.tls_addr.port();
    let ws = workspace(
        &["http_request"],
        &srv,
        &format!(
            "[tools.http_request]\ngrants = [\"net:https:127.0.0.1:{tp}\"]\n[net]\nca_files = [\"ca.pem\"]\n"
        ),
    );
    let host = ws.host().await;
    // POST → 201 + Location: the undo is a DELETE of it.
    let args = json!({"method": "POST", "url": srv.tls_url("/items"), "json": {"name": "a"}});
    let out = call(&host, "http_request", args.clone(), Op::Execute, false)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(out.data["status"], 201);
    assert_eq!(out.data["undo"]["method"], "DELETE");
    assert_eq!(out.data["undo"]["url"], srv.tls_url("/items/1"));
    let post = &srv.requests()[0];
    assert_eq!(post.header("idempotency-key"), Some("s:0:http_request:k"));
    assert_eq!(post.header("content-type"), Some("application/json"));
    for _ in 0..2 {
        // Twice: compensation is idempotent (a 404 on the second DELETE is done).
        call(
            &host,
            "http_request",
            args.clone(),
            Op::Compensate(out.clone()),
            false,
        )
        .await
        .unwrap();
    }
    let methods: Vec<(String, String)> = srv
        .requests()
        .iter()
        .map(|s| (s.method.clone(), s.path.clone()))
        .collect();
    assert_eq!(
        methods[1..],
        [
            ("DELETE".to_string(), "/items/1".to_string()),
            ("DELETE".to_string(), "/items/1".to_string())
        ]
    );

    // PUT over an existing item: the undo puts the previous representation back.
    call(
        &host,
        "http_request",
        json!({"method": "POST", "url": srv.tls_url("/items"), "body": "v1"}),
        Op::Execute,
        false,
    )
    .await
    .unwrap();
    let put = json!({"method": "PUT", "url": srv.tls_url("/items/2"), "body": "v2"});
    let out = call(&host, "http_request", put.clone(), Op::Execute, false)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(out.data["undo"]["method"], "PUT");
    assert_eq!(out.data["undo"]["body"], "v1");
    call(&host, "http_request", put, Op::Compensate(out), false)
        .await
        .unwrap();
    let last = srv.requests().last().unwrap().clone();
    assert_eq!(
        (last.method.as_str(), last.path.as_str()),
        ("PUT", "/items/2")
    );

    // PATCH has no defined inverse: unrevertible.
    let patch = json!({"method": "PATCH", "url": srv.tls_url("/items/2"), "body": "v3"});
    let out = call(&host, "http_request", patch.clone(), Op::Execute, false)
        .await
        .unwrap()
        .unwrap();
    let err = call(&host, "http_request", patch, Op::Compensate(out), false)
        .await
        .unwrap_err();
    assert_eq!(err.kind, ErrorKind::Unrevertible);

    // In a dry run the host allows only GET and HEAD: a POST is refused
    // even from `execute`, and `dry-run` itself only reads.
    let before = srv.count();
    let err = call(&host, "http_request", args.clone(), Op::Execute, true)
        .await
        .unwrap_err();
    assert_eq!(err.kind, ErrorKind::PermissionDenied, "{err:?}");
    assert_eq!(srv.count(), before, "the POST never left the host");
    let out = call(
        &host,
        "http_request",
        json!({"method": "DELETE", "url": srv.tls_url("/items/2")}),
        Op::DryRun,
        true,
    )
    .await
    .unwrap()
    .unwrap();
    assert_eq!(out.data["current_status"], 200);
    let last = srv.requests().last().unwrap().clone();
    assert_eq!(
        (last.method.as_str(), last.path.as_str()),
        ("GET", "/items/2")
    );

    // The high-risk tool goes through the policy: a human must approve it,
    // so the step is parked and nothing is sent.
    let before = srv.count();
    let out = step(&host, "http_request", args).await;
    assert!(matches!(out, Outcome::AwaitingApproval { .. }), "{out:?}");
    assert_eq!(srv.count(), before, "a parked POST never leaves the host");
}
