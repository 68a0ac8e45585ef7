//! A rig for agent turns against a local server speaking one provider's wire
//! format ([`crate::llm_server`]): answers written in each format, a turn run
//! through the real provider selection and agent loop over real components,
//! and every request capsaga sent checked against the provider's published
//! API shape ([`crate::wire_schema`]).

use crate::llm_server::{LlmServer, Recorded, Reply};
use crate::wire_schema::{Api, assert_valid};
use crate::{FS_POLICY, TestWorkspace};
use capsaga_agent::runner::{TurnOptions, run_turn};
use capsaga_agent::select::{Env, Selection, select};
use capsaga_agent::trace::{ExecutionTrace, TraceStep};
use serde_json::{Value, json};

/// The wire format of a test server.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// OpenAI-compatible chat completions.
    OpenAi,
    /// Anthropic Messages.
    Anthropic,
}

/// Both formats, for tests that run one family over each.
pub const FORMATS: [Format; 2] = [Format::OpenAi, Format::Anthropic];

/// The tools section of the rig's policies: the fs tools granted the
/// workspace ([`FS_POLICY`]) and the argument-less `time_now`.
pub fn policy() -> String {
    format!("{FS_POLICY}\n[tools.time_now]\n")
}

/// The environment variable holding the test key.
pub const KEY_ENV: &str = "WIRE_TEST_KEY";

impl Format {
    /// The API whose schema its requests are checked against.
    pub fn api(self) -> Api {
        match self {
            Format::OpenAi => Api::OpenAiChat,
            Format::Anthropic => Api::AnthropicMessages,
        }
    }

    /// A `[providers.NAME]` section for `server` (model `model`), plus `extra`
    /// lines.
    pub fn section(self, name: &str, server: &LlmServer, model: &str, extra: &str) -> String {
        let (kind, url) = match self {
            Format::OpenAi => ("openai", server.url("/v1")),
            Format::Anthropic => ("anthropic", server.url("")),
        };
        let key = if extra.contains("keyless") {
            String::new()
        } else {
            format!("api_key_env = \"{KEY_ENV}\"\n")
        };
        format!(
            "[providers.{name}]\nkind = \"{kind}\"\nbase_url = \"{url}\"\nmodel = \"{model}\"\n{key}{extra}\n"
        )
    }

    /// The model the sections use by default (priced in the built-in table).
    pub fn model(self) -> &'static str {
        match self {
            Format::OpenAi => "gpt-4o",
            Format::Anthropic => "claude-sonnet-4-5",
        }
    }

    /// A final text answer.
    pub fn text(self, text: &str, usage: (u64, u64)) -> Value {
        match self {
            Format::OpenAi => oa_answer(
                json!({"role": "assistant", "content": text, "refusal": null}),
                json!("stop"),
                usage,
            ),
            Format::Anthropic => {
                an_answer(json!([{"type": "text", "text": text}]), "end_turn", usage)
            }
        }
    }

    /// An answer calling tools: `(id, name, arguments)` where `arguments`
    /// is what goes on the wire (for OpenAI usually a JSON string, for
    /// Anthropic usually an object); `None` leaves the field out.
    pub fn calls(self, calls: &[(Option<Value>, &str, Option<Value>)], usage: (u64, u64)) -> Value {
        match self {
            Format::OpenAi => {
                let calls: Vec<Value> = calls
                    .iter()
                    .map(|(id, name, args)| {
                        let mut f = json!({"name": name});
                        if let Some(a) = args {
                            f["arguments"] = a.clone();
                        }
                        let mut c = json!({"type": "function", "function": f});
                        if let Some(id) = id {
                            c["id"] = id.clone();
                        }
                        c
                    })
                    .collect();
                oa_answer(
                    json!({"role": "assistant", "content": null, "tool_calls": calls}),
                    json!("tool_calls"),
                    usage,
                )
            }
            Format::Anthropic => {
                let blocks: Vec<Value> = calls
                    .iter()
                    .map(|(id, name, input)| {
                        let mut b = json!({"type": "tool_use", "name": name});
                        if let Some(id) = id {
                            b["id"] = id.clone();
                        }
                        if let Some(i) = input {
                            b["input"] = i.clone();
                        }
                        b
                    })
                    .collect();
                an_answer(Value::Array(blocks), "tool_use", usage)
            }
        }
    }

    /// Arguments for [`Format::calls`] given as JSON text the way the format
    /// documents them: a string for OpenAI, an object for Anthropic.
    pub fn args(self, text: &str) -> Option<Value> {
        Some(match self {
            Format::OpenAi => Value::String(text.to_string()),
            Format::Anthropic => serde_json::from_str(text).expect("test args are JSON"),
        })
    }

    /// The same answer with another finish reason (OpenAI `finish_reason`,
    /// Anthropic `stop_reason`).
    pub fn finish(self, mut answer: Value, reason: &str) -> Value {
        match self {
            Format::OpenAi => answer["choices"][0]["finish_reason"] = json!(reason),
            Format::Anthropic => answer["stop_reason"] = json!(reason),
        }
        answer
    }
}

/// A chat completion with `message` and `finish_reason`.
pub fn oa_answer(message: Value, finish: Value, usage: (u64, u64)) -> Value {
    json!({
        "id": "chatcmpl-rig", "object": "chat.completion", "created": 1_760_000_000,
        "model": "gpt-4o-2024-08-06",
        "choices": [{"index": 0, "message": message, "logprobs": null, "finish_reason": finish}],
        "usage": {"prompt_tokens": usage.0, "completion_tokens": usage.1,
            "total_tokens": usage.0 + usage.1}
    })
}

/// A Messages response with `content` blocks and `stop_reason`.
pub fn an_answer(content: Value, stop: &str, usage: (u64, u64)) -> Value {
    json!({
        "id": "msg_rig", "type": "message", "role": "assistant",
        "model": "claude-sonnet-4-5-20250929", "content": content,
        "stop_reason": stop, "stop_sequence": null,
        "usage": {"input_tokens": usage.0, "output_tokens": usage.1}
    })
}

/// One turn's result.
pub struct Turn {
    /// The stored trace.
    pub trace: ExecutionTrace,
    /// Every request capsaga sent (each checked against the format's schema).
    pub requests: Vec<Recorded>,
    /// The server (for tests that look again).
    pub server: LlmServer,
}

/// Run one turn of `task` against a server answering `replies` in
/// `format`, with `[agent]` lines `agent`, on the workspace `ws` (tools as
/// in [`policy`]); `section_extra` goes into the
/// provider section. Every request is checked against the published schema.
pub async fn turn_with(
    ws: &TestWorkspace,
    format: Format,
    replies: Vec<Reply>,
    agent: &str,
    section_extra: &str,
    task: &str,
) -> Turn {
    let server = LlmServer::start(replies).await;
    ws.write_policy(&format!(
        "{}\n[agent]\n{agent}\n{}",
        policy(),
        format.section("wire", &server, format.model(), section_extra)
    ));
    let host = ws.host().await;
    let env: Env = [(KEY_ENV.to_string(), "sk-rig-0123456789".to_string())]
        .into_iter()
        .collect();
    let selected = select(&host.config, &env, &Selection::default()).expect("select");
    let opts = TurnOptions {
        provider_mode: selected.mode.clone(),
        max_steps: 8,
        ..TurnOptions::default()
    };
    let trace = run_turn(&host, selected.provider.as_ref(), task, &opts)
        .await
        .expect("run_turn");
    let requests = server.requests();
    assert_valid(format.api(), requests.iter().map(|r| &r.body));
    Turn {
        trace,
        requests,
        server,
    }
}

/// [`turn_with`] with `retries = 1`, short backoffs and nothing extra.
pub async fn turn(ws: &TestWorkspace, format: Format, replies: Vec<Reply>) -> Turn {
    turn_with(
        ws,
        format,
        replies,
        "retries = 1\nbackoff_ms = 1",
        "",
        "do the task",
    )
    .await
}

/// The Thought steps of a trace.
pub fn thoughts(tr: &ExecutionTrace) -> Vec<&TraceStep> {
    tr.steps
        .iter()
        .filter(|s| matches!(s, TraceStep::Thought { .. }))
        .collect()
}

/// The Action steps of a trace.
pub fn actions(tr: &ExecutionTrace) -> Vec<&TraceStep> {
    tr.steps
        .iter()
        .filter(|s| matches!(s, TraceStep::Action { .. }))
        .collect()
}

/// The tool results (or errors) of a request's history, in order, as
/// `(call id, text)`, whatever the format.
pub fn tool_results(format: Format, body: &Value) -> Vec<(String, String)> {
    let msgs = body["messages"].as_array().cloned().unwrap_or_default();
    match format {
        Format::OpenAi => msgs
            .iter()
            .filter(|m| m["role"] == "tool")
            .map(|m| {
                (
                    m["tool_call_id"].as_str().unwrap_or_default().to_string(),
                    m["content"].as_str().unwrap_or_default().to_string(),
                )
            })
            .collect(),
        Format::Anthropic => msgs
            .iter()
            .flat_map(|m| m["content"].as_array().cloned().unwrap_or_default())
            .filter(|b| b["type"] == "tool_result")
            .map(|b| {
                (
                    b["tool_use_id"].as_str().unwrap_or_default().to_string(),
                    b["content"].as_str().unwrap_or_default().to_string(),
                )
            })
            .collect(),
    }
}

/// The tool calls of a request's history, in order, as `(id, name,
/// arguments as JSON text)`, whatever the format.
pub fn history_calls(format: Format, body: &Value) -> Vec<(String, String, String)> {
    let msgs = body["messages"].as_array().cloned().unwrap_or_default();
    match format {
        Format::OpenAi => msgs
            .iter()
            .flat_map(|m| m["tool_calls"].as_array().cloned().unwrap_or_default())
            .map(|c| {
                (
                    c["id"].as_str().unwrap_or_default().to_string(),
                    c["function"]["name"]
                        .as_str()
                        .unwrap_or_default()
                        .to_string(),
                    c["function"]["arguments"]
                        .as_str()
                        .unwrap_or_default()
                        .to_string(),
                )
            })
            .collect(),
        Format::Anthropic => msgs
            .iter()
            .flat_map(|m| m["content"].as_array().cloned().unwrap_or_default())
            .filter(|b| b["type"] == "tool_use")
            .map(|b| {
                (
                    b["id"].as_str().unwrap_or_default().to_string(),
                    b["name"].as_str().unwrap_or_default().to_string(),
                    b["input"].to_string(),
                )
            })
            .collect(),
    }
}
