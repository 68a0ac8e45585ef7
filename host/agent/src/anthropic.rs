//! The Anthropic Messages provider.
//!
//! Request: `POST {base_url}/v1/messages` with `x-api-key: <key>` and
//! `anthropic-version: 2023-06-01`; body `{model, max_tokens, system,
//! messages, tools, tool_choice}` (`tool_choice` only when forced or `none`:
//! `{type: "any"}`, `{type: "none"}` or `{type: "tool", name}`). The system prompt is one text block marked
//! `cache_control: {type: "ephemeral"}`, so the stable prefix (tools, then
//! system) is cached by the provider. Messages alternate `user` and
//! `assistant`; an assistant turn is a list of `text` and `tool_use {id,
//! name, input}` blocks (`input` an object); tool results go back in the next
//! user turn as `tool_result {tool_use_id, content, is_error}` blocks, all
//! results of one turn in one message. Tools are `{name, description,
//! input_schema}`. Response: `content[]` of `text` and `tool_use` blocks
//! (each `input` kept as the raw JSON text the server sent, so duplicate
//! keys are still seen by validation), `stop_reason` `end_turn | tool_use |
//! max_tokens | stop_sequence | pause_turn | refusal`, `usage.input_tokens`
//! (plus `cache_creation_input_tokens` and `cache_read_input_tokens`, all
//! counted as input) and `usage.output_tokens`. No streaming.
//!
//! What servers and gateways send besides (see [`super::wire`]): an error
//! object in a 200 body, `input` as a string (empty, or JSON encoded again),
//! null or missing, `tool_use` blocks without an id or with the same id,
//! `thinking` blocks (not the answer). `stop_reason: "tool_use"` without any
//! `tool_use` block is malformed, retriable. History sent back is always
//! well-formed: `input` an object (else `{}`), names and ids in the
//! documented alphabets (ids from another format are rewritten
//! consistently), no empty text block.

use super::http::{self, ApiKey};
use super::provider::{
    ChatRequest, ChatResponse, FinishReason, Provider, ProviderError, Role, Tier, ToolCall,
    ToolChoice,
};
use super::wire::{self, ArgsShape, IdRule, malformed};
use reqwest::header::{HeaderMap, HeaderValue};
use serde::Deserialize;
use serde_json::value::RawValue;
use serde_json::{Value, json};

/// An Anthropic Messages endpoint.
#[derive(Debug)]
pub struct AnthropicProvider {
    name: String,
    base_url: String,
    model: String,
    cheap_model: Option<String>,
    key: Option<ApiKey>,
    version: String,
    client: http::Client,
}

impl AnthropicProvider {
    /// A provider named `name` at `base_url` (e.g. `https://api.anthropic.com`).
    pub fn new(
        name: &str,
        base_url: &str,
        model: &str,
        cheap_model: Option<&str>,
        key: Option<ApiKey>,
        version: &str,
        client: http::Client,
    ) -> Self {
        AnthropicProvider {
            name: name.to_string(),
            base_url: base_url.trim_end_matches('/').to_string(),
            model: model.to_string(),
            cheap_model: cheap_model.map(str::to_string),
            key,
            version: version.to_string(),
            client,
        }
    }
}

/// Text for a text block: the API refuses empty ones.
fn block_text(text: &str) -> &str {
    if text.trim().is_empty() {
        "(empty)"
    } else {
        text
    }
}

/// The request body for `model`. The history is sent well-formed whatever
/// the model wrote (see the module docs).
pub fn request_body(req: &ChatRequest, model: &str) -> Value {
    let ids = wire::wire_ids(&req.messages, IdRule::Anthropic);
    // (role, content blocks); consecutive same-role turns are merged, since
    // the API wants user and assistant to alternate.
    let mut turns: Vec<(&str, Vec<Value>)> = Vec::new();
    let mut push = |role: &'static str, blocks: Vec<Value>| match turns.last_mut() {
        Some((r, b)) if *r == role => b.extend(blocks),
        _ => turns.push((role, blocks)),
    };
    for (m, ids) in req.messages.iter().zip(&ids) {
        match m.role {
            Role::User => push(
                "user",
                vec![json!({"type": "text", "text": block_text(&m.content)})],
            ),
            Role::Assistant => {
                let mut blocks = Vec::new();
                if !m.content.trim().is_empty() {
                    blocks.push(json!({"type": "text", "text": m.content}));
                }
                for (c, id) in m.tool_calls.iter().zip(ids) {
                    // `input` must be an object: a call whose arguments were
                    // not a JSON object is replayed with `{}` (its tool_result
                    // says what was wrong).
                    blocks.push(json!({
                        "type": "tool_use",
                        "id": id,
                        "name": wire::replay_name(&c.name),
                        "input": wire::replay_input(&c.arguments),
                    }));
                }
                if blocks.is_empty() {
                    blocks.push(json!({"type": "text", "text": "(no text)"}));
                }
                push("assistant", blocks);
            }
            Role::Tool => push(
                "user",
                vec![json!({
                    "type": "tool_result",
                    "tool_use_id": ids.first().cloned().unwrap_or_default(),
                    "content": m.content,
                    "is_error": m.is_error,
                })],
            ),
        }
    }
    // A history ending with the assistant (a paused turn sent back to go on)
    // is a prefill, whose last text may not end with whitespace.
    if let Some(("assistant", blocks)) = turns.last_mut()
        && let Some(last) = blocks.last_mut()
        && let Some(t) = last.get("text").and_then(Value::as_str)
    {
        let trimmed = block_text(t.trim_end()).to_string();
        last["text"] = Value::String(trimmed);
    }
    let messages: Vec<Value> = turns
        .into_iter()
        .map(|(role, content)| json!({"role": role, "content": content}))
        .collect();
    let mut body = json!({
        "model": model,
        "max_tokens": req.max_tokens,
        "system": [{"type": "text", "text": block_text(&req.system), "cache_control": {"type": "ephemeral"}}],
        "messages": messages,
    });
    if !req.tools.is_empty() {
        body["tools"] = req
            .tools
            .iter()
            .map(|t| {
                json!({
                    "name": t.name,
                    "description": t.description,
                    "input_schema": t.parameters,
                })
            })
            .collect();
        match &req.tool_choice {
            ToolChoice::Auto => {}
            ToolChoice::Required => body["tool_choice"] = json!({"type": "any"}),
            ToolChoice::None => body["tool_choice"] = json!({"type": "none"}),
            ToolChoice::Tool(name) => body["tool_choice"] = json!({"type": "tool", "name": name}),
        }
    }
    body
}

#[derive(Deserialize)]
struct MessageResponse<'a> {
    #[serde(default)]
    model: Option<String>,
    #[serde(default, borrow)]
    content: Option<&'a RawValue>,
    #[serde(default)]
    stop_reason: Option<String>,
}

#[derive(Deserialize)]
struct Block<'a> {
    #[serde(rename = "type", default)]
    kind: String,
    #[serde(default)]
    text: Option<String>,
    #[serde(default)]
    id: Option<Value>,
    #[serde(default)]
    name: Option<String>,
    #[serde(default, borrow)]
    input: Option<&'a RawValue>,
}

/// Map a `stop_reason`.
fn stop_reason(raw: &str) -> FinishReason {
    match raw {
        "end_turn" | "stop_sequence" | "stop" => FinishReason::Stop,
        "tool_use" | "tool_calls" => FinishReason::ToolCalls,
        "max_tokens" | "model_context_window_exceeded" | "length" => FinishReason::Length,
        "refusal" => FinishReason::Refusal,
        "pause_turn" => FinishReason::PauseTurn,
        _ => FinishReason::Other,
    }
}

/// The answer's text and tool calls from its content blocks, each repair
/// noted in `repairs`.
fn read_blocks(blocks: Vec<Block<'_>>, repairs: &mut Vec<String>) -> (String, Vec<ToolCall>) {
    let mut text = String::new();
    let mut tool_calls = Vec::new();
    let mut skipped: Vec<String> = Vec::new();
    for b in blocks {
        match b.kind.as_str() {
            "text" => {
                if !text.is_empty() {
                    text.push('\n');
                }
                text.push_str(b.text.as_deref().unwrap_or_default());
            }
            "tool_use" => {
                let n = tool_calls.len() + 1;
                let name = b.name.unwrap_or_default();
                if name.is_empty() {
                    repairs.push(format!("call {n}: no tool name"));
                }
                let (arguments, note) = wire::arguments_text(b.input, ArgsShape::Object);
                if let Some(note) = note {
                    repairs.push(format!("call {n} ({name}): {note}"));
                }
                tool_calls.push(ToolCall {
                    id: wire::call_id(b.id),
                    name,
                    arguments,
                });
            }
            // thinking, redacted_thinking, server tool blocks: not the
            // answer, and not ours to run.
            other => skipped.push(other.chars().take(40).collect()),
        }
    }
    if !skipped.is_empty() {
        repairs.push(format!(
            "blocks left out of the answer: {}",
            skipped.join(", ")
        ));
    }
    (text, tool_calls)
}

/// Parse a Messages response body. Call ids are left as sent (an absent one
/// empty): [`wire::settle_ids`] makes them unique in the conversation.
///
/// # Errors
/// [`ProviderError::Failed`], carrying the tokens the body reports: an error
/// object ([`super::provider::FailureKind::ErrorInBody`]), a body that is not
/// a message (malformed), `stop_reason: "tool_use"` without a `tool_use`
/// block (malformed, retriable).
pub fn parse_response(
    provider: &str,
    requested_model: &str,
    body: &str,
) -> Result<ChatResponse, ProviderError> {
    let (_, usage) = wire::preflight(provider, body)?;
    let body = body.trim_start_matches('\u{feff}');
    let bad =
        |what: String, retriable: bool| malformed(provider, what, retriable).with_usage(usage);
    let m: MessageResponse<'_> =
        serde_json::from_str(body).map_err(|e| bad(format!("not a message ({e})"), false))?;
    let Some(content) = m.content.filter(|c| c.get() != "null") else {
        return Err(bad("the message has no `content`".into(), true));
    };
    let mut repairs = Vec::new();
    let blocks: Vec<Block<'_>> = if content.get().starts_with('"') {
        repairs.push("`content` was a string, not blocks".into());
        let text: String = serde_json::from_str(content.get()).unwrap_or_default();
        vec![Block {
            kind: "text".into(),
            text: Some(text),
            id: None,
            name: None,
            input: None,
        }]
    } else {
        serde_json::from_str(content.get())
            .map_err(|e| bad(format!("`content` is not a list of blocks ({e})"), false))?
    };
    let (text, tool_calls) = read_blocks(blocks, &mut repairs);
    let finish_raw = m.stop_reason.unwrap_or_default();
    let mut finish = stop_reason(&finish_raw);
    if finish == FinishReason::ToolCalls && tool_calls.is_empty() {
        let shown = if text.trim().is_empty() {
            "and no text".to_string()
        } else {
            format!(
                "and the text {:?}",
                text.trim().chars().take(120).collect::<String>()
            )
        };
        return Err(bad(
            format!("stop_reason `{finish_raw}` but no tool_use block, {shown}"),
            true,
        ));
    }
    if finish == FinishReason::Other && !tool_calls.is_empty() {
        finish = FinishReason::ToolCalls;
    }
    Ok(ChatResponse {
        provider: provider.to_string(),
        model: m.model.unwrap_or_else(|| requested_model.to_string()),
        text,
        tool_calls,
        finish_reason: finish,
        finish_raw,
        usage,
        attempts: Vec::new(),
        repairs,
    })
}

#[async_trait::async_trait]
impl Provider for AnthropicProvider {
    fn name(&self) -> &str {
        &self.name
    }

    fn model_for(&self, tier: Tier) -> String {
        tier.pick(&self.model, self.cheap_model.as_deref())
    }

    async fn complete(&self, request: &ChatRequest) -> Result<ChatResponse, ProviderError> {
        let model = self.model_for(request.tier);
        let body = request_body(request, &model);
        let mut headers = HeaderMap::new();
        if let Some(k) = &self.key {
            headers.insert("x-api-key", k.header_value("", &self.name)?);
        }
        headers.insert(
            "anthropic-version",
            HeaderValue::from_str(&self.version)
                .map_err(|_| ProviderError::failed(&self.name, "bad anthropic_version", false))?,
        );
        let url = format!("{}/v1/messages", self.base_url);
        let text = http::post_json(&self.client, &self.name, &url, headers, &body).await?;
        let mut resp = parse_response(&self.name, &model, &text)?;
        wire::settle_ids(
            &mut resp.tool_calls,
            &request.messages,
            IdRule::Anthropic,
            &mut resp.repairs,
        );
        Ok(resp)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::provider::Message;

    #[test]
    fn tool_results_merge_into_one_user_turn() {
        let call = |id: &str| ToolCall {
            id: id.into(),
            name: "t".into(),
            arguments: "{\"a\":1,\"a\":2}".into(),
        };
        let req = ChatRequest::new(
            "sys",
            vec![
                Message::user("task"),
                Message::assistant("thinking", vec![call("c1"), call("c2")]),
                Message::tool("c1", "ok", false),
                Message::tool("c2", "bad", true),
            ],
            vec![],
        );
        let b = request_body(&req, "m");
        let msgs = b["messages"].as_array().unwrap();
        assert_eq!(msgs.len(), 3);
        assert_eq!(msgs[2]["role"], "user");
        assert_eq!(msgs[2]["content"][1]["is_error"], true);
        // Duplicate keys: an invalid call, replayed as {} (its result says why).
        assert_eq!(msgs[1]["content"][1]["input"], json!({}));
        assert!(b.get("tools").is_none());
        assert_eq!(b["system"][0]["cache_control"]["type"], "ephemeral");
    }

    #[test]
    fn raw_input_kept_for_validation() {
        let r = parse_response(
            "a",
            "m",
            r#"{"id":"msg_1","type":"message","role":"assistant","model":"claude-x","content":[{"type":"text","text":"ok"},{"type":"tool_use","id":"toolu_1","name":"t","input":{"k":1,"k":2}}],"stop_reason":"tool_use","stop_sequence":null,"usage":{"input_tokens":10,"output_tokens":5,"cache_read_input_tokens":90}}"#,
        )
        .unwrap();
        assert_eq!(r.tool_calls[0].arguments, r#"{"k":1,"k":2}"#);
        assert_eq!(r.usage.input_tokens, 100);
        assert_eq!(r.finish_reason, FinishReason::ToolCalls);
        assert_eq!(r.model, "claude-x");
    }
}
