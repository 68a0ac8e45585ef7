//! The OpenAI-compatible chat completions provider: OpenAI, DeepSeek, Kimi
//! (Moonshot), vLLM, llama.cpp's server, Ollama, ... (base URL configurable).
//!
//! Request: `POST {base_url}/chat/completions`, `Authorization: Bearer
//! <key>` (none when keyless), body `{model, messages, tools, max_tokens |
//! max_completion_tokens}`; the system prompt is the first message (role
//! `system`), tool results are `{role: "tool", tool_call_id, content}`
//! (the format has no error flag: an error result says so in its text),
//! tools are `{type: "function", function: {name, description,
//! parameters}}`. Response: `choices[0].message` with `content` (string or
//! null) and `tool_calls[]` whose `function.arguments` is a JSON *string*,
//! kept as the model wrote it; `finish_reason` `stop | tool_calls | length |
//! content_filter`; `usage.prompt_tokens` and `usage.completion_tokens`.
//! No streaming.

use super::http::{self, ApiKey, malformed};
use super::provider::{
    ChatRequest, ChatResponse, FinishReason, Provider, ProviderError, Role, Tier, ToolCall, Usage,
};
use capsaga_core::providers::MaxTokensField;
use reqwest::header::{AUTHORIZATION, HeaderMap};
use serde::Deserialize;
use serde_json::{Value, json};

/// An OpenAI-compatible endpoint.
#[derive(Debug)]
pub struct OpenAiProvider {
    name: String,
    base_url: String,
    model: String,
    cheap_model: Option<String>,
    key: Option<ApiKey>,
    max_tokens_field: MaxTokensField,
    client: reqwest::Client,
}

impl OpenAiProvider {
    /// A provider named `name` at `base_url` (e.g. `https://api.openai.com/v1`).
    pub fn new(
        name: &str,
        base_url: &str,
        model: &str,
        cheap_model: Option<&str>,
        key: Option<ApiKey>,
        max_tokens_field: MaxTokensField,
        client: reqwest::Client,
    ) -> Self {
        OpenAiProvider {
            name: name.to_string(),
            base_url: base_url.trim_end_matches('/').to_string(),
            model: model.to_string(),
            cheap_model: cheap_model.map(str::to_string),
            key,
            max_tokens_field,
            client,
        }
    }
}

/// The request body for `model`.
pub fn request_body(req: &ChatRequest, model: &str, max_tokens_field: MaxTokensField) -> Value {
    let mut messages = vec![json!({"role": "system", "content": req.system})];
    for m in &req.messages {
        messages.push(match m.role {
            Role::User => json!({"role": "user", "content": m.content}),
            Role::Assistant => {
                let mut v = json!({
                    "role": "assistant",
                    "content": if m.content.is_empty() && !m.tool_calls.is_empty() {
                        Value::Null
                    } else {
                        Value::String(m.content.clone())
                    },
                });
                if !m.tool_calls.is_empty() {
                    v["tool_calls"] = m
                        .tool_calls
                        .iter()
                        .map(|c| {
                            json!({
                                "id": c.id,
                                "type": "function",
                                "function": {"name": c.name, "arguments": c.arguments},
                            })
                        })
                        .collect();
                }
                v
            }
            Role::Tool => json!({
                "role": "tool",
                "tool_call_id": m.tool_call_id.clone().unwrap_or_default(),
                "content": m.content,
            }),
        });
    }
    let mut body = json!({"model": model, "messages": messages});
    if !req.tools.is_empty() {
        body["tools"] = req
            .tools
            .iter()
            .map(|t| {
                json!({
                    "type": "function",
                    "function": {
                        "name": t.name,
                        "description": t.description,
                        "parameters": t.parameters,
                    },
                })
            })
            .collect();
    }
    let field = match max_tokens_field {
        MaxTokensField::MaxTokens => "max_tokens",
        MaxTokensField::MaxCompletionTokens => "max_completion_tokens",
    };
    body[field] = json!(req.max_tokens);
    body
}

#[derive(Deserialize)]
struct Completion {
    #[serde(default)]
    model: Option<String>,
    choices: Vec<Choice>,
    #[serde(default)]
    usage: Option<CompletionUsage>,
}

#[derive(Deserialize)]
struct Choice {
    message: AssistantMessage,
    #[serde(default)]
    finish_reason: Option<String>,
}

#[derive(Deserialize)]
struct AssistantMessage {
    #[serde(default)]
    content: Option<String>,
    #[serde(default)]
    refusal: Option<String>,
    #[serde(default)]
    tool_calls: Vec<WireToolCall>,
}

#[derive(Deserialize)]
struct WireToolCall {
    #[serde(default)]
    id: Option<String>,
    function: WireFunction,
}

#[derive(Deserialize)]
struct WireFunction {
    name: String,
    /// A JSON string per the spec; some servers send an object.
    #[serde(default)]
    arguments: Option<Value>,
}

#[derive(Deserialize)]
struct CompletionUsage {
    #[serde(default)]
    prompt_tokens: u64,
    #[serde(default)]
    completion_tokens: u64,
}

/// Parse a chat completion body.
///
/// # Errors
/// [`ProviderError::Failed`] (not retriable) when the body is not a
/// completion with at least one choice.
pub fn parse_response(
    provider: &str,
    requested_model: &str,
    body: &str,
) -> Result<ChatResponse, ProviderError> {
    let c: Completion = serde_json::from_str(body).map_err(|e| malformed(provider, e))?;
    let Some(choice) = c.choices.into_iter().next() else {
        return Err(malformed(provider, "no choices"));
    };
    let tool_calls: Vec<ToolCall> = choice
        .message
        .tool_calls
        .into_iter()
        .enumerate()
        .map(|(i, t)| ToolCall {
            id: t
                .id
                .filter(|s| !s.is_empty())
                .unwrap_or_else(|| format!("call_{i}")),
            name: t.function.name,
            arguments: match t.function.arguments {
                Some(Value::String(s)) => s,
                Some(Value::Null) | None => "{}".into(),
                Some(other) => other.to_string(),
            },
        })
        .collect();
    let finish_reason = match choice.finish_reason.as_deref() {
        Some("stop") => FinishReason::Stop,
        Some("tool_calls" | "function_call") => FinishReason::ToolCalls,
        Some("length") => FinishReason::Length,
        _ if !tool_calls.is_empty() => FinishReason::ToolCalls,
        _ => FinishReason::Other,
    };
    let text = choice
        .message
        .content
        .or(choice.message.refusal)
        .unwrap_or_default();
    let usage = c.usage.unwrap_or(CompletionUsage {
        prompt_tokens: 0,
        completion_tokens: 0,
    });
    Ok(ChatResponse {
        provider: provider.to_string(),
        model: c.model.unwrap_or_else(|| requested_model.to_string()),
        text,
        tool_calls,
        finish_reason,
        usage: Usage {
            input_tokens: usage.prompt_tokens,
            output_tokens: usage.completion_tokens,
        },
        attempts: Vec::new(),
    })
}

#[async_trait::async_trait]
impl Provider for OpenAiProvider {
    fn name(&self) -> &str {
        &self.name
    }

    fn model_for(&self, tier: Tier) -> String {
        tier.pick(&self.model, self.cheap_model.as_deref())
    }

    async fn complete(&self, request: &ChatRequest) -> Result<ChatResponse, ProviderError> {
        let model = self.model_for(request.tier);
        let body = request_body(request, &model, self.max_tokens_field);
        let mut headers = HeaderMap::new();
        if let Some(k) = &self.key {
            headers.insert(AUTHORIZATION, k.header_value("Bearer ", &self.name)?);
        }
        let url = format!("{}/chat/completions", self.base_url);
        let text = http::post_json(&self.client, &self.name, &url, headers, &body).await?;
        parse_response(&self.name, &model, &text)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::agent::provider::{Message, ToolSpec};

    #[test]
    fn body_shapes() {
        let mut req = ChatRequest::new(
            "sys",
            vec![
                Message::user("task"),
                Message::assistant(
                    "",
                    vec![ToolCall {
                        id: "c1".into(),
                        name: "fs_read".into(),
                        arguments: "{\"path\":\"/a\"}".into(),
                    }],
                ),
                Message::tool("c1", "oops", true),
            ],
            vec![ToolSpec {
                name: "fs_read".into(),
                description: "reads".into(),
                parameters: json!({"type": "object"}),
                grants: vec!["fs:read:/a/**".into()],
            }],
        );
        req.max_tokens = 100;
        let b = request_body(&req, "m", MaxTokensField::MaxCompletionTokens);
        assert_eq!(b["max_completion_tokens"], 100);
        assert!(b.get("max_tokens").is_none());
        assert_eq!(
            b["messages"][0],
            json!({"role": "system", "content": "sys"})
        );
        assert_eq!(b["messages"][2]["content"], Value::Null);
        assert_eq!(
            b["messages"][2]["tool_calls"][0]["function"]["arguments"],
            "{\"path\":\"/a\"}"
        );
        assert_eq!(
            b["messages"][3],
            json!({"role": "tool", "tool_call_id": "c1", "content": "oops"})
        );
        // Grants are for the system prompt, not the wire.
        assert!(!b["tools"].to_string().contains("fs:read"));
    }

    #[test]
    fn object_arguments_and_missing_ids_tolerated() {
        let r = parse_response(
            "p",
            "m",
            r#"{"choices":[{"message":{"role":"assistant","content":null,"tool_calls":[{"type":"function","function":{"name":"t","arguments":{"a":1}}}]},"finish_reason":"tool_calls"}]}"#,
        )
        .unwrap();
        assert_eq!(r.tool_calls[0].arguments, r#"{"a":1}"#);
        assert_eq!(r.tool_calls[0].id, "call_0");
        assert_eq!(r.model, "m");
        assert!(parse_response("p", "m", r#"{"choices":[]}"#).is_err());
        assert!(parse_response("p", "m", "<html>").is_err());
    }
}
