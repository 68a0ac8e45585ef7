//! The Anthropic Messages provider.
//!
//! Request: `POST {base_url}/v1/messages` with `x-api-key: <key>` and
//! `anthropic-version: 2023-06-01`; body `{model, max_tokens, system,
//! messages, tools}`. The system prompt is one text block marked
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

use super::http::{self, ApiKey, malformed};
use super::provider::{
    ChatRequest, ChatResponse, FinishReason, Provider, ProviderError, Role, Tier, ToolCall, Usage,
};
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
    client: reqwest::Client,
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
        client: reqwest::Client,
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

/// The request body for `model`.
pub fn request_body(req: &ChatRequest, model: &str) -> Value {
    // (role, content blocks); consecutive same-role turns are merged, since
    // the API wants user and assistant to alternate.
    let mut turns: Vec<(&str, Vec<Value>)> = Vec::new();
    let mut push = |role: &'static str, blocks: Vec<Value>| match turns.last_mut() {
        Some((r, b)) if *r == role => b.extend(blocks),
        _ => turns.push((role, blocks)),
    };
    for m in &req.messages {
        match m.role {
            Role::User => push("user", vec![json!({"type": "text", "text": m.content})]),
            Role::Assistant => {
                let mut blocks = Vec::new();
                if !m.content.is_empty() {
                    blocks.push(json!({"type": "text", "text": m.content}));
                }
                for c in &m.tool_calls {
                    // `input` must be an object: a call whose arguments were
                    // not a JSON object is replayed with `{}` (its tool_result
                    // says what was wrong).
                    let input = serde_json::from_str::<Value>(&c.arguments)
                        .ok()
                        .filter(Value::is_object)
                        .unwrap_or_else(|| json!({}));
                    blocks.push(json!({
                        "type": "tool_use", "id": c.id, "name": c.name, "input": input,
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
                    "tool_use_id": m.tool_call_id.clone().unwrap_or_default(),
                    "content": m.content,
                    "is_error": m.is_error,
                })],
            ),
        }
    }
    let messages: Vec<Value> = turns
        .into_iter()
        .map(|(role, content)| json!({"role": role, "content": content}))
        .collect();
    let mut body = json!({
        "model": model,
        "max_tokens": req.max_tokens,
        "system": [{"type": "text", "text": req.system, "cache_control": {"type": "ephemeral"}}],
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
    }
    body
}

#[derive(Deserialize)]
struct MessageResponse<'a> {
    #[serde(default)]
    model: Option<String>,
    #[serde(borrow)]
    content: Vec<Block<'a>>,
    #[serde(default)]
    stop_reason: Option<String>,
    #[serde(default)]
    usage: Option<MessageUsage>,
}

#[derive(Deserialize)]
struct Block<'a> {
    #[serde(rename = "type")]
    kind: String,
    #[serde(default)]
    text: Option<String>,
    #[serde(default)]
    id: Option<String>,
    #[serde(default)]
    name: Option<String>,
    #[serde(default, borrow)]
    input: Option<&'a RawValue>,
}

#[derive(Deserialize, Default)]
struct MessageUsage {
    #[serde(default)]
    input_tokens: u64,
    #[serde(default)]
    output_tokens: u64,
    #[serde(default)]
    cache_creation_input_tokens: Option<u64>,
    #[serde(default)]
    cache_read_input_tokens: Option<u64>,
}

/// Parse a Messages response body.
///
/// # Errors
/// [`ProviderError::Failed`] (not retriable) for a body that is not a
/// message.
pub fn parse_response(
    provider: &str,
    requested_model: &str,
    body: &str,
) -> Result<ChatResponse, ProviderError> {
    let m: MessageResponse<'_> = serde_json::from_str(body).map_err(|e| malformed(provider, e))?;
    let mut text = String::new();
    let mut tool_calls = Vec::new();
    for (i, b) in m.content.into_iter().enumerate() {
        match b.kind.as_str() {
            "text" => {
                if !text.is_empty() {
                    text.push('\n');
                }
                text.push_str(b.text.as_deref().unwrap_or_default());
            }
            "tool_use" => tool_calls.push(ToolCall {
                id: b.id.unwrap_or_else(|| format!("toolu_{i}")),
                name: b
                    .name
                    .ok_or_else(|| malformed(provider, "tool_use without a name"))?,
                arguments: b
                    .input
                    .map(|r| r.get().to_string())
                    .unwrap_or_else(|| "{}".into()),
            }),
            // thinking, redacted_thinking, server tool blocks: not for us.
            _ => {}
        }
    }
    let finish_reason = match m.stop_reason.as_deref() {
        Some("end_turn" | "stop_sequence") => FinishReason::Stop,
        Some("tool_use") => FinishReason::ToolCalls,
        Some("max_tokens") => FinishReason::Length,
        _ if !tool_calls.is_empty() => FinishReason::ToolCalls,
        _ => FinishReason::Other,
    };
    let u = m.usage.unwrap_or_default();
    Ok(ChatResponse {
        provider: provider.to_string(),
        model: m.model.unwrap_or_else(|| requested_model.to_string()),
        text,
        tool_calls,
        finish_reason,
        usage: Usage {
            input_tokens: u.input_tokens
                + u.cache_creation_input_tokens.unwrap_or(0)
                + u.cache_read_input_tokens.unwrap_or(0),
            output_tokens: u.output_tokens,
        },
        attempts: Vec::new(),
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
        parse_response(&self.name, &model, &text)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::agent::provider::Message;

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
        assert_eq!(msgs[1]["content"][1]["input"], json!({"a": 2}));
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
