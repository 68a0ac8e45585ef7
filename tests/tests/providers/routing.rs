//! Routing across providers: retries, Retry-After, failover, allowlists, role order, the scripted default, budget tiers, redirects.

use super::*;

/// A server answering raw text bodies (for bodies serde_json cannot build).
pub(super) struct RawServer {
    pub(super) url: String,
    task: tokio::task::JoinHandle<()>,
}

impl RawServer {
    pub(super) async fn start(bodies: Vec<String>) -> RawServer {
        use std::sync::{Arc, Mutex};
        let bodies = Arc::new(Mutex::new(std::collections::VecDeque::from(bodies)));
        let app = axum::Router::new().fallback(move || {
            let bodies = bodies.clone();
            async move {
                let b = bodies.lock().unwrap().pop_front().unwrap_or_default();
                ([(axum::http::header::CONTENT_TYPE, "application/json")], b)
            }
        });
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        let task = tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        RawServer { url, task }
    }
}

impl Drop for RawServer {
    fn drop(&mut self) {
        self.task.abort();
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn retries_honour_retry_after_then_fail_over() {
    // Primary (OpenAI-compatible): 429 with Retry-After 0, then 503, then
    // gives up (retries = 1 means two tries); secondary (Anthropic): 529
    // overloaded with retry-after, then answers.
    let primary = LlmServer::start(vec![
        oa_error(429, "requests", "rate_limit_exceeded", "Rate limit reached")
            .header("retry-after", "0"),
        oa_error(
            503,
            "server_error",
            "overloaded",
            "The server is overloaded",
        ),
        Reply::ok(oa_text("never sent", (1, 1))),
    ])
    .await;
    let secondary = LlmServer::start(vec![
        an_error(529, "overloaded_error", "Overloaded").header("retry-after", "0"),
        Reply::ok(an_text("answered by the fallback", (10, 5))),
    ])
    .await;
    let ws = TestWorkspace::new(&["fs_read"], "");
    ws.write_policy(&format!(
        "{FS_POLICY}\n[agent]\nprovider_order = [\"primary\", \"secondary\"]\nretries = 1\nbackoff_ms = 5\n{}{}",
        openai_section("primary", &primary, ""),
        anthropic_section("secondary", &secondary, "")
    ));
    let host = ws.host().await;
    let tr = turn(
        &host,
        &keys(),
        RequestRoute::default(),
        TurnOptions::default(),
    )
    .await;
    assert_eq!(tr.outcome, Outcome::Success, "{tr:#?}");
    assert_eq!(
        tr.final_response.as_deref(),
        Some("answered by the fallback")
    );
    assert_eq!(primary.requests().len(), 2, "one retry, then failover");
    assert_eq!(secondary.requests().len(), 2);
    let TraceStep::Thought {
        attempts, provider, ..
    } = thoughts(&tr)[0]
    else {
        unreachable!()
    };
    assert_eq!(provider, "secondary");
    let tried: Vec<(&str, Option<u16>)> = attempts
        .iter()
        .map(|a| (a.provider.as_str(), a.status))
        .collect();
    assert_eq!(
        tried,
        [
            ("primary", Some(429)),
            ("primary", Some(503)),
            ("secondary", Some(529)),
            ("secondary", Some(200))
        ]
    );
    assert!(
        attempts[0]
            .error
            .as_deref()
            .unwrap()
            .contains("HTTP 429: requests: Rate limit reached")
    );
    assert!(
        attempts[2]
            .error
            .as_deref()
            .unwrap()
            .contains("overloaded_error: Overloaded")
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn long_retry_after_and_bad_key_fail_over_at_once() {
    // A Retry-After beyond max_backoff_ms, and a 401 (not retriable): each
    // provider is tried once, then the next.
    let slow = LlmServer::start(vec![
        oa_error(429, "requests", "rate_limit_exceeded", "Slow down").header("retry-after", "3600"),
    ])
    .await;
    let badkey = LlmServer::start(vec![oa_error(
        401,
        "invalid_request_error",
        "invalid_api_key",
        "Incorrect API key provided",
    )])
    .await;
    let good = LlmServer::start(vec![Reply::ok(oa_text("fine", (3, 2)))]).await;
    let ws = TestWorkspace::new(&["fs_read"], "");
    ws.write_policy(&format!(
        "{FS_POLICY}\n[agent]\nprovider_order = [\"a_slow\", \"b_badkey\", \"c_good\"]\nretries = 3\nbackoff_ms = 5\nmax_backoff_ms = 1000\n{}{}{}",
        openai_section("a_slow", &slow, ""),
        openai_section("b_badkey", &badkey, ""),
        openai_section("c_good", &good, "")
    ));
    let host = ws.host().await;
    let tr = turn(
        &host,
        &keys(),
        RequestRoute::default(),
        TurnOptions::default(),
    )
    .await;
    assert_eq!(tr.outcome, Outcome::Success, "{tr:#?}");
    assert_eq!(slow.requests().len(), 1);
    assert_eq!(badkey.requests().len(), 1);
    assert_eq!(good.requests().len(), 1);
}

#[tokio::test(flavor = "multi_thread")]
async fn every_provider_failing_ends_as_provider_error() {
    let a = LlmServer::start(vec![
        oa_error(500, "server_error", "internal", "boom"),
        oa_error(500, "server_error", "internal", "boom"),
    ])
    .await;
    let ws = TestWorkspace::new(&["fs_read"], "");
    ws.write_policy(&format!(
        "{FS_POLICY}\n[agent]\nretries = 1\nbackoff_ms = 1\n{}",
        openai_section("a", &a, "")
    ));
    let host = ws.host().await;
    let tr = turn(
        &host,
        &keys(),
        RequestRoute::default(),
        TurnOptions::default(),
    )
    .await;
    assert_eq!(tr.outcome, Outcome::ProviderError);
    assert_eq!(a.requests().len(), 2);
    assert!(
        tr.final_response
            .as_deref()
            .unwrap()
            .contains("every allowed provider failed")
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn allowlist_is_honoured_and_nothing_is_sent_when_nothing_is_allowed() {
    let a = LlmServer::start(vec![Reply::ok(oa_text("from a", (1, 1)))]).await;
    let b = LlmServer::start(vec![
        Reply::ok(an_text("from b", (1, 1))),
        Reply::ok(an_text("from b again", (1, 1))),
    ])
    .await;
    let ws = TestWorkspace::new(&["fs_read"], "");
    ws.write_policy(&format!(
        "{FS_POLICY}\n[agent]\nprovider_order = [\"a\", \"b\"]\nallowed_providers = [\"b\"]\n{}{}",
        openai_section("a", &a, ""),
        anthropic_section("b", &b, "")
    ));
    let host = ws.host().await;
    // The operator allows only b: a is first in the order but never called.
    let tr = turn(
        &host,
        &keys(),
        RequestRoute::default(),
        TurnOptions::default(),
    )
    .await;
    assert_eq!(tr.final_response.as_deref(), Some("from b"));
    assert_eq!(a.requests().len(), 0);
    assert_eq!(b.requests().len(), 1);

    // The request asks for a only: the intersection is empty; a request
    // cannot widen the operator's allowlist. Nothing is sent anywhere.
    let route = RequestRoute {
        preferred: vec!["a".into()],
        allowed: Some(vec!["a".into()]),
    };
    let tr = turn(&host, &keys(), route, TurnOptions::default()).await;
    assert_eq!(tr.outcome, Outcome::ProviderError);
    let msg = tr.final_response.clone().unwrap();
    assert!(msg.contains("no_allowed_provider"), "{msg}");
    assert!(msg.contains("nothing was sent"), "{msg}");
    assert!(thoughts(&tr).is_empty());
    assert_eq!(a.requests().len(), 0);
    assert_eq!(b.requests().len(), 1);

    // The environment narrows the file's allowlist too (to nothing here).
    let mut e = keys();
    e.insert("CAPSAGA_ALLOWED_PROVIDERS".into(), "a".into());
    let selected = select(&host.config, &e, &Selection::default()).unwrap();
    let tr = run_turn(
        &host,
        selected.provider.as_ref(),
        "x",
        &TurnOptions::default(),
    )
    .await
    .unwrap();
    assert_eq!(tr.outcome, Outcome::ProviderError);
    assert_eq!(a.requests().len() + b.requests().len(), 1);

    // `none` from the request: nothing.
    let route = RequestRoute {
        preferred: vec![],
        allowed: Some(capsaga_core::providers::parse_list("none")),
    };
    let tr = turn(&host, &keys(), route, TurnOptions::default()).await;
    assert!(tr.final_response.unwrap().contains("no_allowed_provider"));
    assert_eq!(a.requests().len() + b.requests().len(), 1);
    // A request naming an undeclared provider is refused outright.
    let sel = Selection {
        script: None,
        route: RequestRoute {
            preferred: vec![],
            allowed: Some(vec!["nope".into()]),
        },
        ..Selection::default()
    };
    assert!(select(&host.config, &keys(), &sel).is_err());
}

#[tokio::test(flavor = "multi_thread")]
async fn role_order_comes_first_and_keys_only_from_the_environment() {
    let a = LlmServer::start(vec![Reply::ok(oa_text("from a", (1, 1)))]).await;
    let b = LlmServer::start(vec![
        Reply::ok(an_text("from b", (1, 1))),
        Reply::ok(an_text("from b", (1, 1))),
    ])
    .await;
    let ws = TestWorkspace::new(&["fs_read"], "");
    ws.write_policy(&format!(
        "{FS_POLICY}\n[agent]\nprovider_order = [\"a\", \"b\"]\n[agent.provider_order_by_role]\nreview = [\"b\"]\n{}{}",
        openai_section("a", &a, ""),
        anthropic_section("b", &b, "")
    ));
    let host = ws.host().await;
    let opts = TurnOptions {
        role: Some("review".into()),
        ..TurnOptions::default()
    };
    let tr = turn(&host, &keys(), RequestRoute::default(), opts).await;
    assert_eq!(tr.final_response.as_deref(), Some("from b"));
    // The environment's per-role order wins over the file's.
    let mut e = keys();
    e.insert("CAPSAGA_PROVIDER_ORDER_REVIEW".into(), "a".into());
    let selected = select(&host.config, &e, &Selection::default()).unwrap();
    let opts = TurnOptions {
        role: Some("review".into()),
        ..TurnOptions::default()
    };
    let tr = run_turn(&host, selected.provider.as_ref(), "x", &opts)
        .await
        .unwrap();
    assert_eq!(tr.final_response.as_deref(), Some("from a"));
    // Without b's key, b is not configured: a alone remains.
    let only_a = env(&[("OA_KEY", OA_KEY)]);
    let selected = select(&host.config, &only_a, &Selection::default()).unwrap();
    assert!(
        selected.mode.contains("configured: a;"),
        "{}",
        selected.mode
    );
    assert!(
        selected.mode.contains("b needs AN_KEY"),
        "{}",
        selected.mode
    );
    assert!(!selected.mode.contains(AN_KEY) && !selected.mode.contains(OA_KEY));
}

#[tokio::test(flavor = "multi_thread")]
async fn scripted_is_the_default_when_no_provider_is_configured() {
    let never = LlmServer::start(vec![]).await;
    let ws = TestWorkspace::new(&["fs_read"], "");
    std::fs::write(
        ws.root.join("script.json"),
        r#"{"model":"scripted-demo","turns":[{"text":"scripted answer"}]}"#,
    )
    .unwrap();
    ws.write_policy(&format!(
        "{FS_POLICY}\n[agent]\nscript = \"script.json\"\n{}",
        openai_section("oa", &never, "")
    ));
    let host = ws.host().await;
    // No OA_KEY in the environment: oa is declared, not configured.
    let selected = select(&host.config, &Env::new(), &Selection::default()).unwrap();
    assert!(selected.scripted);
    assert!(
        selected
            .mode
            .starts_with("scripted (no provider is configured (oa needs OA_KEY)"),
        "{}",
        selected.mode
    );
    let opts = TurnOptions {
        provider_mode: selected.mode.clone(),
        ..TurnOptions::default()
    };
    let tr = run_turn(&host, selected.provider.as_ref(), "x", &opts)
        .await
        .unwrap();
    assert_eq!(tr.final_response.as_deref(), Some("scripted answer"));
    assert!(tr.provider_mode.starts_with("scripted"));
    assert_eq!(never.requests().len(), 0);
    // CAPSAGA_SIMULATION forces the script even with a key present.
    let e = env(&[("OA_KEY", OA_KEY), ("CAPSAGA_SIMULATION", "true")]);
    let selected = select(&host.config, &e, &Selection::default()).unwrap();
    assert!(selected.scripted, "{}", selected.mode);
    // Simulation without a script is an error, never a live call.
    ws.write_policy(&format!(
        "{FS_POLICY}\n{}",
        openai_section("oa", &never, "")
    ));
    let host = ws.host().await;
    let e = env(&[("OA_KEY", OA_KEY), ("CAPSAGA_SIMULATION", "1")]);
    assert!(select(&host.config, &e, &Selection::default()).is_err());
    // No script and nothing configured: an error naming what is missing.
    ws.write_policy(&format!(
        "{FS_POLICY}\n{}",
        openai_section("oa", &never, "")
    ));
    let host = ws.host().await;
    let e = select(&host.config, &Env::new(), &Selection::default()).unwrap_err();
    assert!(e.to_string().contains("oa needs OA_KEY"), "{e}");
}

#[tokio::test(flavor = "multi_thread")]
async fn soft_cap_moves_to_the_cheaper_tier_and_hard_cap_stops_calls() {
    let ws = TestWorkspace::new(&["fs_read"], "");
    std::fs::write(ws.ws().join("notes.txt"), "hi").unwrap();
    let notes = ws.ws_path("notes.txt");
    let args = format!("{{\"path\":\"{notes}\"}}");
    // First call: 100k input tokens of gpt-4o = $0.25, past the $0.10 soft
    // cap; second call goes to gpt-4o-mini; third would pass the hard cap.
    let server = LlmServer::start(vec![
        Reply::ok(oa_tool_call("c1", "fs_read", &args, (100_000, 10))),
        Reply::ok(oa_tool_call("c2", "fs_read", &args, (1_000_000, 10))),
        Reply::ok(oa_text("never", (1, 1))),
    ])
    .await;
    ws.write_policy(&format!(
        "{FS_POLICY}\n[budget]\nrequest_soft_usd = 0.10\nrequest_hard_usd = 0.30\n{}",
        openai_section("oa", &server, "")
    ));
    let host = ws.host().await;
    let tr = turn(
        &host,
        &keys(),
        RequestRoute::default(),
        TurnOptions::default(),
    )
    .await;
    let reqs = server.requests();
    assert_eq!(reqs.len(), 2, "the hard cap stops the third call");
    assert_eq!(reqs[0].body["model"], "gpt-4o");
    assert_eq!(reqs[1].body["model"], "gpt-4o-mini");
    assert_eq!(tr.outcome, Outcome::BudgetHit);
    assert!(
        tr.final_response
            .as_deref()
            .unwrap()
            .contains("per-request hard cap")
    );
    let tiers: Vec<Tier> = thoughts(&tr)
        .iter()
        .map(|t| match t {
            TraceStep::Thought { tier, .. } => *tier,
            _ => unreachable!(),
        })
        .collect();
    assert_eq!(tiers, [Tier::Normal, Tier::Cheap]);
}

#[tokio::test(flavor = "multi_thread")]
async fn redirects_are_not_followed() {
    // A provider answering with a redirect to another host must not make
    // capsaga resend the prompt and the key there.
    let elsewhere = LlmServer::start(vec![Reply::ok(oa_text("stolen", (1, 1)))]).await;
    let redirecting = LlmServer::start(vec![
        Reply::status(307, json!({})).header("location", &elsewhere.url("/v1/chat/completions")),
    ])
    .await;
    let ws = TestWorkspace::new(&["fs_read"], "");
    ws.write_policy(&format!(
        "{FS_POLICY}\n[agent]\nretries = 0\n{}",
        openai_section("r", &redirecting, "")
    ));
    let host = ws.host().await;
    let tr = turn(
        &host,
        &keys(),
        RequestRoute::default(),
        TurnOptions::default(),
    )
    .await;
    assert_eq!(tr.outcome, Outcome::ProviderError);
    assert!(tr.final_response.unwrap().contains("HTTP 307"));
    assert_eq!(redirecting.requests().len(), 1);
    assert_eq!(elsewhere.requests().len(), 0);
}
