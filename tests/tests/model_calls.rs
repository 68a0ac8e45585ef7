//! Each model call as the trace and the budget see it, over local servers
//! speaking each wire format: provider, model, finish reason, tokens, cost
//! and what was wrong; tokens billed for unusable answers; local (keyless)
//! models free unless the policy prices them; timeouts reported as
//! timeouts with their deadline; and the request bodies capsaga builds,
//! checked against the providers' published API shapes, also for histories
//! no single provider would produce (a failover between formats mid-turn).

use capsaga_agent::anthropic;
use capsaga_agent::openai;
use capsaga_agent::provider::{ChatRequest, FailureKind, Message, ToolCall, ToolSpec};
use capsaga_agent::runner::{TurnOptions, run_turn};
use capsaga_agent::select::{Env, Selection, select};
use capsaga_agent::trace::{Outcome, TraceStep};
use capsaga_tests::TestWorkspace;
use capsaga_tests::llm_server::{LlmServer, Reply};
use capsaga_tests::wire_rig::{FORMATS, Format, KEY_ENV, policy, thoughts, turn, turn_with};
use capsaga_tests::wire_schema::{Api, assert_valid, problems};
use serde_json::json;

const TOOLS: [&str; 4] = ["fs_read", "fs_write", "fs_list", "time_now"];

fn env() -> Env {
    [(KEY_ENV.to_string(), "sk-test-0123456789".to_string())]
        .into_iter()
        .collect()
}

/// Each Thought names provider, model, finish reason (normalised, and the
/// provider's own word), tokens and cost.
#[tokio::test(flavor = "multi_thread")]
async fn every_model_call_is_in_the_trace() {
    for f in FORMATS {
        let ws = TestWorkspace::new(&TOOLS, "");
        let t = turn(
            &ws,
            f,
            vec![
                Reply::ok(f.calls(
                    &[(Some(json!("c1")), "time_now", f.args("{}"))],
                    (1000, 100),
                )),
                Reply::ok(f.text("It is now.", (2000, 10))),
            ],
        )
        .await;
        assert_eq!(t.trace.outcome, Outcome::Success);
        let th = thoughts(&t.trace);
        assert_eq!(th.len(), 2);
        let (price_in, price_out) = match f {
            Format::OpenAi => (2.5, 10.0),
            Format::Anthropic => (3.0, 15.0),
        };
        let mut total = 0.0;
        for (step, (tin, tout, finish, raw)) in th.iter().zip([
            (
                1000u64,
                100u64,
                "tool_calls",
                if f == Format::OpenAi { "" } else { "tool_use" },
            ),
            (
                2000,
                10,
                "stop",
                if f == Format::OpenAi { "" } else { "end_turn" },
            ),
        ]) {
            let TraceStep::Thought {
                provider,
                model,
                prompt_tokens,
                response_tokens,
                finish_reason,
                finish_raw,
                cost_usd,
                problem,
                ..
            } = step
            else {
                unreachable!()
            };
            assert_eq!(provider, "wire");
            assert!(model.starts_with(f.model()), "{model}");
            assert_eq!((*prompt_tokens, *response_tokens), (tin, tout));
            assert_eq!((finish_reason.as_str(), finish_raw.as_str()), (finish, raw));
            let expected = (tin as f64 * price_in + tout as f64 * price_out) / 1e6;
            assert!(
                (cost_usd - expected).abs() < 1e-12,
                "{cost_usd} vs {expected}"
            );
            assert!(problem.is_none());
            total += expected;
        }
        assert!((t.trace.cost_usd - total).abs() < 1e-12);
    }
}

/// A failed model call names the provider and model that failed (not empty
/// strings), what went wrong, and every try.
#[tokio::test(flavor = "multi_thread")]
async fn failed_model_calls_name_provider_and_model() {
    for f in FORMATS {
        let ws = TestWorkspace::new(&TOOLS, "");
        let boom = Reply::status(
            500,
            json!({"error": {"message": "boom", "type": "server_error"}}),
        );
        let t = turn(&ws, f, vec![boom.clone(), boom]).await;
        assert_eq!(t.trace.outcome, Outcome::ProviderError);
        let th = thoughts(&t.trace);
        assert_eq!(th.len(), 1);
        let TraceStep::Thought {
            provider,
            model,
            finish_reason,
            problem,
            attempts,
            ..
        } = th[0]
        else {
            unreachable!()
        };
        assert_eq!((provider.as_str(), model.as_str()), ("wire", f.model()));
        assert_eq!(finish_reason, "error");
        assert!(
            problem.as_deref().unwrap().contains("HTTP 500"),
            "{problem:?}"
        );
        assert_eq!(attempts.len(), 2);
        assert!(
            attempts
                .iter()
                .all(|a| a.kind == Some(FailureKind::Http) && a.status == Some(500))
        );
    }
}

/// Tokens a provider reports for an answer that cannot be used are billed:
/// in the trace, and in the day's counters (`capsaga budget`'s source).
#[tokio::test(flavor = "multi_thread")]
async fn tokens_of_unusable_answers_are_billed() {
    for f in FORMATS {
        let ws = TestWorkspace::new(&TOOLS, "");
        // An error in a 200 body that still reports usage, then an answer
        // announcing calls without any: both billed.
        let err = match f {
            Format::OpenAi => json!({"error": {"message": "overloaded", "code": 503},
                "usage": {"prompt_tokens": 400, "completion_tokens": 0}}),
            Format::Anthropic => {
                json!({"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"},
                "usage": {"input_tokens": 400, "output_tokens": 0}})
            }
        };
        let hollow = f.finish(
            f.text("", (500, 20)),
            match f {
                Format::OpenAi => "tool_calls",
                Format::Anthropic => "tool_use",
            },
        );
        let t = turn(&ws, f, vec![Reply::ok(err), Reply::ok(hollow)]).await;
        assert_eq!(t.trace.outcome, Outcome::ProviderError, "{f:?}");
        assert_eq!((t.trace.prompt_tokens, t.trace.response_tokens), (900, 20));
        let host = ws.host().await;
        let days = host.store.budget_days(1).await.unwrap();
        assert_eq!((days[0].input_tokens, days[0].output_tokens), (900, 20));
        assert_eq!(days[0].calls, 2);
        assert!((days[0].spent_usd - t.trace.cost_usd).abs() < 1e-12);
        assert!(t.trace.cost_usd > 0.0);
    }
}

/// A local or keyless provider's model costs nothing, even a model the
/// built-in table prices, unless the policy's own price table names it.
#[tokio::test(flavor = "multi_thread")]
async fn local_models_are_free_unless_the_policy_prices_them() {
    for f in FORMATS {
        // keyless = true, the model named like a priced one.
        let ws = TestWorkspace::new(&TOOLS, "");
        let t = turn_with(
            &ws,
            f,
            vec![Reply::ok(f.text("hi", (1_000_000, 1_000_000)))],
            "",
            "keyless = true",
            "x",
        )
        .await;
        assert_eq!(t.trace.outcome, Outcome::Success);
        assert_eq!(t.trace.prompt_tokens, 1_000_000);
        assert_eq!(t.trace.cost_usd, 0.0, "{f:?}: keyless is free");
        // The same server with a key is priced from the built-in table.
        let t = turn(&ws, f, vec![Reply::ok(f.text("hi", (1_000_000, 0)))]).await;
        assert!(t.trace.cost_usd >= 2.5, "{f:?}: {}", t.trace.cost_usd);
        // The policy's own table naming the model prices it.
        std::fs::write(
            ws.root.join("prices.json"),
            r#"{"default":{"input_per_m":99,"output_per_m":99},
                "models":{"gpt-4o":{"input_per_m":1,"output_per_m":2},
                          "claude-sonnet-4-5":{"input_per_m":1,"output_per_m":2}}}"#,
        )
        .unwrap();
        let server = LlmServer::start(vec![Reply::ok(f.text("hi", (1_000_000, 1_000_000)))]).await;
        ws.write_policy(&format!(
            "{}\n[budget]\nprices = \"prices.json\"\n{}",
            policy(),
            f.section("wire", &server, f.model(), "keyless = true")
        ));
        let host = ws.host().await;
        let sel = select(&host.config, &Env::new(), &Selection::default()).unwrap();
        let tr = run_turn(&host, sel.provider.as_ref(), "x", &TurnOptions::default())
            .await
            .unwrap();
        assert!((tr.cost_usd - 3.0).abs() < 1e-9, "{f:?}: {}", tr.cost_usd);
        // ...but not its default rate: an unnamed local model stays free.
        let mut answer = f.text("hi", (1_000_000, 1_000_000));
        answer["model"] = json!("smollm2-135m");
        let server = LlmServer::start(vec![Reply::ok(answer)]).await;
        ws.write_policy(&format!(
            "{}\n[budget]\nprices = \"prices.json\"\n{}",
            policy(),
            f.section("wire", &server, "smollm2-135m", "keyless = true")
        ));
        let host = ws.host().await;
        let sel = select(&host.config, &Env::new(), &Selection::default()).unwrap();
        let tr = run_turn(&host, sel.provider.as_ref(), "x", &TurnOptions::default())
            .await
            .unwrap();
        assert_eq!(tr.cost_usd, 0.0, "{f:?}");
    }
}

/// A server that does not answer within `[agent] timeout_ms` is a timeout,
/// named as one with its deadline, retried, and then the turn ends.
#[tokio::test(flavor = "multi_thread")]
async fn timeouts_are_reported_with_their_deadline() {
    for f in FORMATS {
        let ws = TestWorkspace::new(&TOOLS, "");
        let slow = Reply::ok(f.text("too late", (1, 1))).delayed(3_000);
        let t = turn_with(
            &ws,
            f,
            vec![slow.clone(), slow],
            "retries = 1\nbackoff_ms = 1\ntimeout_ms = 300",
            "",
            "x",
        )
        .await;
        assert_eq!(t.trace.outcome, Outcome::ProviderError);
        assert_eq!(t.requests.len(), 2, "a timeout is retried");
        let TraceStep::Thought {
            attempts, problem, ..
        } = thoughts(&t.trace)[0]
        else {
            unreachable!()
        };
        assert!(
            attempts
                .iter()
                .all(|a| a.kind == Some(FailureKind::Timeout))
        );
        let p = problem.clone().unwrap();
        assert!(p.contains("timed out") && p.contains("300 ms"), "{p}");
        assert!(!p.contains("error sending request"), "{p}");
        assert!(
            t.trace.wall_time_ms < 2_900,
            "the deadline was kept: {}",
            t.trace.wall_time_ms
        );
    }
}

/// A failover from an OpenAI-compatible server to an Anthropic one in the
/// middle of a turn: the history written by the first (Kimi-style ids,
/// arguments that are not JSON) reaches the second in its own valid shape.
#[tokio::test(flavor = "multi_thread")]
async fn failover_between_formats_sends_valid_history() {
    let ws = TestWorkspace::new(&TOOLS, "");
    let oa = Format::OpenAi;
    let an = Format::Anthropic;
    let first = LlmServer::start(vec![
        Reply::ok(oa.calls(
            &[
                (
                    Some(json!("functions.time_now:0")),
                    "time_now",
                    Some(json!("{}")),
                ),
                (
                    Some(json!("functions.fs_read:1")),
                    "fs_read",
                    Some(json!("{oops")),
                ),
            ],
            (5, 5),
        )),
        Reply::status(
            503,
            json!({"error": {"message": "down", "type": "server_error"}}),
        ),
    ])
    .await;
    let second =
        LlmServer::start(vec![Reply::ok(an.text("finished by the fallback", (5, 5)))]).await;
    ws.write_policy(&format!(
        "{}\n[agent]\nprovider_order = [\"a\", \"b\"]\nretries = 0\n{}{}",
        policy(),
        oa.section("a", &first, "gpt-4o", ""),
        an.section("b", &second, "claude-sonnet-4-5", "")
    ));
    let host = ws.host().await;
    let sel = select(&host.config, &env(), &Selection::default()).unwrap();
    let tr = run_turn(&host, sel.provider.as_ref(), "x", &TurnOptions::default())
        .await
        .unwrap();
    assert_eq!(
        tr.final_response.as_deref(),
        Some("finished by the fallback"),
        "{tr:#?}"
    );
    assert_valid(Api::OpenAiChat, first.requests().iter().map(|r| &r.body));
    let reqs = second.requests();
    assert_valid(Api::AnthropicMessages, reqs.iter().map(|r| &r.body));
    let uses: Vec<&serde_json::Value> = reqs[0].body["messages"][1]["content"]
        .as_array()
        .unwrap()
        .iter()
        .collect();
    assert_eq!(uses.len(), 2);
    assert!(
        uses.iter()
            .all(|u| u["id"].as_str().unwrap().starts_with("toolu_"))
    );
    assert_eq!(uses[1]["input"], json!({}));
}

fn call(id: &str, name: &str, args: &str) -> ToolCall {
    ToolCall {
        id: id.into(),
        name: name.into(),
        arguments: args.into(),
    }
}

/// The bodies of both formats for a history holding every kind of damage a
/// model or a server can bring (empty and whitespace texts, duplicate and
/// foreign ids, arguments that are not JSON or not an object, duplicate
/// keys, names outside the alphabet, a paused answer last) match the
/// published schemas and the documented conversation rules; and the
/// checker itself refuses the raw history.
#[test]
fn request_bodies_match_the_published_schemas() {
    let history = vec![
        Message::user(""),
        Message::assistant(
            "  ",
            vec![
                call("dup", "fs_read", "{path: x}"),
                call("dup", "fs.read", r#"{"a":1,"a":2}"#),
                call("functions.time_now:0", "time_now", ""),
                call("", "time_now", "[1,2]"),
            ],
        ),
        Message::tool("dup", "not valid JSON", true),
        Message::tool("dup", "unknown tool", true),
        Message::tool("functions.time_now:0", "ok", false),
        Message::tool("", "not an object", true),
        Message::assistant("thinking out loud   \n", vec![]),
    ];
    let tools = vec![ToolSpec {
        name: "time_now".into(),
        description: "the time".into(),
        parameters: json!({"type": "object", "properties": {}, "additionalProperties": false}),
        grants: vec![],
    }];
    let mut req = ChatRequest::new("system prompt", history, tools);
    req.max_tokens = 256;
    let oa = openai::request_body(&req, "gpt-4o", Default::default());
    assert_eq!(
        problems(Api::OpenAiChat, &oa),
        Vec::<String>::new(),
        "{oa:#}"
    );
    let an = anthropic::request_body(&req, "claude-sonnet-4-5");
    assert_eq!(
        problems(Api::AnthropicMessages, &an),
        Vec::<String>::new(),
        "{an:#}"
    );
    // Sent as the model wrote it, the same history breaks the rules: the
    // checks are not vacuous.
    let mut raw = oa.clone();
    raw["messages"][2]["tool_calls"][0]["function"]["arguments"] = json!("{path: x}");
    raw["messages"][2]["tool_calls"][1]["id"] = json!("dup");
    raw["messages"][2]["tool_calls"][1]["function"]["name"] = json!("fs.read");
    assert!(problems(Api::OpenAiChat, &raw).len() >= 3);
    let mut raw = an.clone();
    raw["messages"][1]["content"][0]["id"] = json!("functions.time_now:0");
    raw["messages"][0]["content"][0]["text"] = json!("");
    assert!(problems(Api::AnthropicMessages, &raw).len() >= 2);
}
