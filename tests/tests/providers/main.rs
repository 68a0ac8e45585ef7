//! The HTTP providers against a local server on 127.0.0.1 that speaks each
//! provider's wire format: OpenAI-compatible chat completions and Anthropic
//! Messages. Requests are checked field by field (model, messages with tool
//! results, tools with their JSON Schema, the output-token limit, auth
//! headers); responses are the providers' documented shapes (tool calls,
//! usage, stop reasons, error bodies, 429 and 5xx). Failover, retries with
//! `Retry-After`, allowlists (nothing sent when nothing is allowed) and the
//! scripted default are shown on real agent turns over real components.

use capsaga_agent::provider::Tier;
use capsaga_agent::router::RequestRoute;
use capsaga_agent::runner::{TurnOptions, run_turn};
use capsaga_agent::select::{Env, Selection, select};
use capsaga_agent::trace::{ExecutionTrace, Outcome, TraceStep};
use capsaga_door::host::Host;
use capsaga_tests::llm_server::{LlmServer, Reply};
use capsaga_tests::{FS_POLICY, TestWorkspace};
use serde_json::{Value, json};

mod routing;
mod sealed;
mod tool_choice;

use routing::RawServer;

const OA_KEY: &str = "sk-test-openai-0123456789";
const AN_KEY: &str = "sk-ant-test-9876543210";

fn env(pairs: &[(&str, &str)]) -> Env {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

fn keys() -> Env {
    env(&[("OA_KEY", OA_KEY), ("AN_KEY", AN_KEY)])
}

fn openai_section(name: &str, server: &LlmServer, extra: &str) -> String {
    format!(
        "[providers.{name}]\nkind = \"openai\"\nbase_url = \"{}\"\nmodel = \"gpt-4o\"\ncheap_model = \"gpt-4o-mini\"\napi_key_env = \"OA_KEY\"\n{extra}\n",
        server.url("/v1")
    )
}

fn anthropic_section(name: &str, server: &LlmServer, extra: &str) -> String {
    format!(
        "[providers.{name}]\nkind = \"anthropic\"\nbase_url = \"{}\"\nmodel = \"claude-sonnet-4-5\"\napi_key_env = \"AN_KEY\"\n{extra}\n",
        server.url("")
    )
}

/// A chat completion calling `tool` with `args` (a JSON *string*, per spec).
fn oa_tool_call(id: &str, tool: &str, args: &str, usage: (u64, u64)) -> Value {
    json!({
        "id": "chatcmpl-AB12", "object": "chat.completion", "created": 1_760_000_000,
        "model": "gpt-4o-2024-08-06", "system_fingerprint": "fp_test",
        "choices": [{
            "index": 0,
            "message": {"role": "assistant", "content": null, "refusal": null,
                "tool_calls": [{"id": id, "type": "function",
                    "function": {"name": tool, "arguments": args}}]},
            "logprobs": null, "finish_reason": "tool_calls"
        }],
        "usage": {"prompt_tokens": usage.0, "completion_tokens": usage.1,
            "total_tokens": usage.0 + usage.1,
            "prompt_tokens_details": {"cached_tokens": 0, "audio_tokens": 0}}
    })
}

fn oa_text(text: &str, usage: (u64, u64)) -> Value {
    json!({
        "id": "chatcmpl-CD34", "object": "chat.completion", "created": 1_760_000_001,
        "model": "gpt-4o-2024-08-06",
        "choices": [{"index": 0,
            "message": {"role": "assistant", "content": text, "refusal": null},
            "logprobs": null, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": usage.0, "completion_tokens": usage.1,
            "total_tokens": usage.0 + usage.1}
    })
}

fn oa_error(status: u16, kind: &str, code: &str, message: &str) -> Reply {
    Reply::status(
        status,
        json!({"error": {"message": message, "type": kind, "param": null, "code": code}}),
    )
}

/// A Messages response: optional text, then one tool_use with an object input.
fn an_tool_use(text: &str, id: &str, tool: &str, input: Value, usage: (u64, u64)) -> Value {
    let mut content = vec![];
    if !text.is_empty() {
        content.push(json!({"type": "text", "text": text}));
    }
    content.push(json!({"type": "tool_use", "id": id, "name": tool, "input": input}));
    json!({
        "id": "msg_01XYZ", "type": "message", "role": "assistant",
        "model": "claude-sonnet-4-5-20250929", "content": content,
        "stop_reason": "tool_use", "stop_sequence": null,
        "usage": {"input_tokens": usage.0, "output_tokens": usage.1,
            "cache_creation_input_tokens": 0, "cache_read_input_tokens": 0}
    })
}

fn an_text(text: &str, usage: (u64, u64)) -> Value {
    json!({
        "id": "msg_02XYZ", "type": "message", "role": "assistant",
        "model": "claude-sonnet-4-5-20250929",
        "content": [{"type": "text", "text": text}],
        "stop_reason": "end_turn", "stop_sequence": null,
        "usage": {"input_tokens": usage.0, "output_tokens": usage.1,
            "cache_creation_input_tokens": 0, "cache_read_input_tokens": 0}
    })
}

fn an_error(status: u16, kind: &str, message: &str) -> Reply {
    Reply::status(
        status,
        json!({"type": "error", "error": {"type": kind, "message": message}}),
    )
}

async fn turn(
    host: &std::sync::Arc<Host>,
    env: &Env,
    route: RequestRoute,
    opts: TurnOptions,
) -> ExecutionTrace {
    let selected = select(
        &host.config,
        env,
        &Selection {
            script: None,
            route,
            ..Selection::default()
        },
    )
    .unwrap();
    assert!(!selected.scripted, "{}", selected.mode);
    let opts = TurnOptions {
        provider_mode: selected.mode.clone(),
        ..opts
    };
    run_turn(host, selected.provider.as_ref(), "read the notes", &opts)
        .await
        .unwrap()
}

fn thoughts(tr: &ExecutionTrace) -> Vec<&TraceStep> {
    tr.steps
        .iter()
        .filter(|s| matches!(s, TraceStep::Thought { .. }))
        .collect()
}

#[tokio::test(flavor = "multi_thread")]
async fn openai_wire_format_field_by_field() {
    let ws = TestWorkspace::new(&["fs_read", "fs_write", "fs_list"], "");
    std::fs::write(ws.ws().join("notes.txt"), "hello from the notes").unwrap();
    let notes = ws.ws_path("notes.txt");
    let args = format!("{{\"path\":\"{notes}\"}}");
    let server = LlmServer::start(vec![
        Reply::ok(oa_tool_call("call_abc123", "fs_read", &args, (1200, 30))),
        Reply::ok(oa_text("The notes say hello.", (1500, 20))),
    ])
    .await;
    ws.write_policy(&format!(
        "{FS_POLICY}\n[agent]\nmax_tokens = 777\n{}",
        openai_section("oa", &server, "")
    ));
    let host2 = ws.host().await;
    let tr = turn(
        &host2,
        &keys(),
        RequestRoute::default(),
        TurnOptions::default(),
    )
    .await;
    assert_eq!(tr.outcome, Outcome::Success, "{tr:#?}");
    assert_eq!(tr.final_response.as_deref(), Some("The notes say hello."));

    let reqs = server.requests();
    assert_eq!(reqs.len(), 2);
    for r in &reqs {
        assert_eq!(r.path, "/v1/chat/completions");
        assert_eq!(r.headers["authorization"], format!("Bearer {OA_KEY}"));
        assert!(!r.headers.contains_key("x-api-key"));
        assert_eq!(r.headers["content-type"], "application/json");
        assert_eq!(r.body["model"], "gpt-4o");
        assert_eq!(r.body["max_tokens"], 777);
        assert!(r.body.get("stream").is_none());
    }
    let first = &reqs[0].body;
    let msgs = first["messages"].as_array().unwrap();
    assert_eq!(msgs.len(), 2);
    assert_eq!(msgs[0]["role"], "system");
    assert!(
        msgs[0]["content"]
            .as_str()
            .unwrap()
            .starts_with("# Constitution")
    );
    assert_eq!(
        msgs[1],
        json!({"role": "user", "content": "read the notes"})
    );
    // Tools: every catalog tool as a function with its JSON Schema.
    let tools = first["tools"].as_array().unwrap();
    let names: Vec<&str> = tools
        .iter()
        .map(|t| t["function"]["name"].as_str().unwrap())
        .collect();
    assert_eq!(names.len(), 3);
    for n in ["fs_list", "fs_read", "fs_write"] {
        assert!(names.contains(&n), "{names:?}");
    }
    let fs_read = tools
        .iter()
        .find(|t| t["function"]["name"] == "fs_read")
        .unwrap();
    assert_eq!(fs_read["type"], "function");
    assert_eq!(
        fs_read["function"]["parameters"],
        host2.registry.get("fs_read").unwrap().meta.args_schema
    );
    assert_eq!(
        fs_read["function"]["parameters"]["required"],
        json!(["path"])
    );
    assert!(fs_read["function"]["description"].as_str().unwrap().len() > 10);
    // Second request: the assistant's tool call (arguments a JSON string,
    // as the model wrote it) and the tool result answering it.
    let msgs = reqs[1].body["messages"].as_array().unwrap();
    assert_eq!(msgs.len(), 4);
    assert_eq!(msgs[2]["role"], "assistant");
    assert_eq!(msgs[2]["content"], Value::Null);
    assert_eq!(
        msgs[2]["tool_calls"],
        json!([{"id": "call_abc123", "type": "function",
                "function": {"name": "fs_read", "arguments": args}}])
    );
    assert_eq!(msgs[3]["role"], "tool");
    assert_eq!(msgs[3]["tool_call_id"], "call_abc123");
    let content = msgs[3]["content"].as_str().unwrap();
    assert!(
        content.starts_with("<untrusted source=\"tool:fs_read\" retrieved_at=\""),
        "{content}"
    );
    assert!(content.contains("hello from the notes"));

    // Usage and cost from the responses: gpt-4o-2024-08-06 is priced as
    // gpt-4o ($2.50 in, $10 out per million).
    assert_eq!((tr.prompt_tokens, tr.response_tokens), (2700, 50));
    let expected = (1200.0 * 2.5 + 30.0 * 10.0 + 1500.0 * 2.5 + 20.0 * 10.0) / 1e6;
    assert!((tr.cost_usd - expected).abs() < 1e-12, "{}", tr.cost_usd);
    match thoughts(&tr)[0] {
        TraceStep::Thought {
            provider,
            model,
            cost_usd,
            finish_reason,
            attempts,
            ..
        } => {
            assert_eq!(
                (provider.as_str(), model.as_str()),
                ("oa", "gpt-4o-2024-08-06")
            );
            assert!((cost_usd - 0.0033).abs() < 1e-12);
            assert_eq!(finish_reason, "tool_calls");
            assert_eq!(attempts.len(), 1);
        }
        _ => unreachable!(),
    }
    assert!(tr.provider_mode.starts_with("live (configured: oa)"));
    // The key is in no trace.
    let stored = serde_json::to_string(&tr).unwrap();
    assert!(!stored.contains(OA_KEY));
}

#[tokio::test(flavor = "multi_thread")]
async fn anthropic_wire_format_field_by_field() {
    let ws = TestWorkspace::new(&["fs_read", "fs_write", "fs_list"], "");
    std::fs::write(ws.ws().join("notes.txt"), "hello from the notes").unwrap();
    let notes = ws.ws_path("notes.txt");
    let server = LlmServer::start(vec![
        // A wrong type first: the tool_result must carry is_error = true.
        Reply::ok(an_tool_use(
            "Let me read it.",
            "toolu_01A",
            "fs_read",
            json!({"path": 5}),
            (900, 40),
        )),
        Reply::ok(an_tool_use(
            "",
            "toolu_01B",
            "fs_read",
            json!({"path": notes}),
            (1000, 30),
        )),
        Reply::ok(an_text("It says hello.", (1100, 10))),
    ])
    .await;
    ws.write_policy(&format!(
        "{FS_POLICY}\n[agent]\nmax_tokens = 512\n{}",
        anthropic_section("an", &server, "")
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

    let reqs = server.requests();
    assert_eq!(reqs.len(), 3);
    for r in &reqs {
        assert_eq!(r.path, "/v1/messages");
        assert_eq!(r.headers["x-api-key"], AN_KEY);
        assert_eq!(r.headers["anthropic-version"], "2023-06-01");
        assert!(!r.headers.contains_key("authorization"));
        assert_eq!(r.body["model"], "claude-sonnet-4-5");
        assert_eq!(r.body["max_tokens"], 512);
        let system = &r.body["system"][0];
        assert_eq!(system["type"], "text");
        assert!(
            system["text"]
                .as_str()
                .unwrap()
                .starts_with("# Constitution")
        );
        assert_eq!(system["cache_control"], json!({"type": "ephemeral"}));
        let tools = r.body["tools"].as_array().unwrap();
        let fs_read = tools.iter().find(|t| t["name"] == "fs_read").unwrap();
        assert_eq!(
            fs_read["input_schema"],
            host.registry.get("fs_read").unwrap().meta.args_schema
        );
        assert!(fs_read.get("parameters").is_none());
    }
    // The system prompt is byte-identical across calls (prompt caching).
    assert_eq!(reqs[0].body["system"], reqs[2].body["system"]);
    assert_eq!(
        reqs[0].body["messages"],
        json!([{"role": "user", "content": [{"type": "text", "text": "read the notes"}]}])
    );
    let m1 = reqs[1].body["messages"].as_array().unwrap();
    assert_eq!(m1.len(), 3);
    assert_eq!(
        m1[1],
        json!({"role": "assistant", "content": [
            {"type": "text", "text": "Let me read it."},
            {"type": "tool_use", "id": "toolu_01A", "name": "fs_read", "input": {"path": 5}}]})
    );
    assert_eq!(m1[2]["role"], "user");
    let result = &m1[2]["content"][0];
    assert_eq!(result["type"], "tool_result");
    assert_eq!(result["tool_use_id"], "toolu_01A");
    assert_eq!(result["is_error"], true);
    assert!(
        result["content"]
            .as_str()
            .unwrap()
            .contains("- argument \"path\": expected string, got integer 5"),
        "{result}"
    );
    let m2 = reqs[2].body["messages"].as_array().unwrap();
    assert_eq!(m2.len(), 5);
    let result = &m2[4]["content"][0];
    assert_eq!(
        (
            result["type"].as_str(),
            result["tool_use_id"].as_str(),
            result["is_error"].as_bool()
        ),
        (Some("tool_result"), Some("toolu_01B"), Some(false))
    );
    assert!(
        result["content"]
            .as_str()
            .unwrap()
            .contains("hello from the notes")
    );
    assert_eq!((tr.prompt_tokens, tr.response_tokens), (3000, 80));
    // claude-sonnet-4-5-20250929 priced as claude-sonnet-4-5: $3 / $15.
    let expected = (3000.0 * 3.0 + 80.0 * 15.0) / 1e6;
    assert!((tr.cost_usd - expected).abs() < 1e-12, "{}", tr.cost_usd);
    assert!(!serde_json::to_string(&tr).unwrap().contains(AN_KEY));
}

#[tokio::test(flavor = "multi_thread")]
async fn anthropic_duplicate_keys_in_tool_input_are_refused() {
    let ws = TestWorkspace::new(&["fs_read"], "");
    // A raw body: the tool_use input has `path` twice.
    let raw = r#"{"id":"msg_1","type":"message","role":"assistant","model":"claude-sonnet-4-5","content":[{"type":"tool_use","id":"toolu_1","name":"fs_read","input":{"path":"/etc/passwd","path":"PLACEHOLDER"}}],"stop_reason":"tool_use","stop_sequence":null,"usage":{"input_tokens":5,"output_tokens":5}}"#
        .replace("PLACEHOLDER", &ws.ws_path("notes.txt"));
    // serde_json would merge the duplicates; the server sends raw text.
    let server = RawServer::start(vec![raw, an_text("giving up", (1, 1)).to_string()]).await;
    ws.write_policy(&format!(
        "{FS_POLICY}\n[providers.an]\nkind = \"anthropic\"\nbase_url = \"{}\"\nmodel = \"claude-sonnet-4-5\"\napi_key_env = \"AN_KEY\"\n",
        server.url
    ));
    let host = ws.host().await;
    let tr = turn(
        &host,
        &keys(),
        RequestRoute::default(),
        TurnOptions::default(),
    )
    .await;
    let invalid = tr.steps.iter().find_map(|s| match s {
        TraceStep::Action {
            validation, error, ..
        } => Some((*validation, error.clone())),
        _ => None,
    });
    let (validation, error) = invalid.unwrap();
    assert_eq!(validation, capsaga_agent::trace::Validation::SchemaError);
    assert!(
        error.unwrap().llm_hint.contains("duplicate key `path`"),
        "{tr:#?}"
    );
}
