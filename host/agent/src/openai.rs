//! The OpenAI-compatible chat completions provider: OpenAI, DeepSeek, Kimi
//! (Moonshot), vLLM, llama.cpp's server, Ollama, ... (base URL configurable).
//!
//! Request: `POST {base_url}/chat/completions`, `Authorization: Bearer
//! <key>` (none when keyless), body `{model, messages, tools, tool_choice,
//! max_tokens | max_completion_tokens}` (`tool_choice` only when forced or
//! `none`: `"required"`, `"none"` or `{type: "function", function: {name}}`); the system prompt is the first message (role
//! `system`), tool results are `{role: "tool", tool_call_id, content}`
//! (the format has no error flag: an error result says so in its text),
//! tools are `{type: "function", function: {name, description,
//! parameters}}`. Response: `choices[0].message` with `content` (string,
//! null, or an array of text / refusal / reasoning parts), `refusal`, and
//! `tool_calls[]` whose `function.arguments` is a JSON *string*, kept as the
//! model wrote it; `finish_reason` `stop | tool_calls | length |
//! content_filter`; `usage.prompt_tokens` and `usage.completion_tokens`.
//! No streaming.
//!
//! What real servers send besides (see [`super::wire`]): an error object in
//! a 200 body, `tool_calls: null`, arguments as an object, an empty string,
//! or JSON encoded twice, calls without an id or with the same id, content as
//! parts. An answer announcing tool calls without any (`finish_reason:
//! "tool_calls"` with none, the call left as text) is malformed, retriable.
//! History sent back is always well-formed ([`super::wire::replay_arguments`]
//! and friends): llama.cpp's server refuses a whole request whose history
//! holds arguments that are not JSON.

use super::http::{self, ApiKey};
use super::provider::{
    ChatRequest, ChatResponse, FinishReason, Provider, ProviderError, Role, Tier, ToolCall,
    ToolChoice,
};
use super::wire::{self, ArgsShape, IdRule, malformed};
use capsaga_core::providers::{ForcedCall, MaxTokensField};
use reqwest::header::{AUTHORIZATION, HeaderMap};
use serde::Deserialize;
use serde_json::value::RawValue;
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
    forced_call: ForcedCall,
    temperature: Option<f64>,
    client: http::Client,
}

impl OpenAiProvider {
    /// The same provider, sending a forced tool call as `forced_call` says
    /// (see [`super::forced`]).
    pub fn with_forced_call(mut self, forced_call: ForcedCall) -> Self {
        self.forced_call = forced_call;
        self
    }

    /// The same provider, sending `temperature` (0 to 2, checked by the
    /// policy) with every request; `None` sends none.
    pub fn with_temperature(mut self, temperature: Option<f64>) -> Self {
        self.temperature = temperature;
        self
    }

    /// A provider named `name` at `base_url` (e.g. `https://api.openai.com/v1`).
    pub fn new(
        name: &str,
        base_url: &str,
        model: &str,
        cheap_model: Option<&str>,
        key: Option<ApiKey>,
        max_tokens_field: MaxTokensField,
        client: http::Client,
    ) -> Self {
        OpenAiProvider {
            name: name.to_string(),
            base_url: base_url.trim_end_matches('/').to_string(),
            model: model.to_string(),
            cheap_model: cheap_model.map(str::to_string),
            key,
            max_tokens_field,
            forced_call: ForcedCall::Native,
            temperature: None,
            client,
        }
    }
}

/// The request body for `model`. The history is sent well-formed whatever
/// the model wrote: arguments that are a JSON object (else `{}`), tool names
/// in the documented alphabet, ids unique and printable.
pub fn request_body(req: &ChatRequest, model: &str, max_tokens_field: MaxTokensField) -> Value {
    let ids = wire::wire_ids(&req.messages, IdRule::OpenAi);
    let mut messages = vec![json!({"role": "system", "content": req.system})];
    for (m, ids) in req.messages.iter().zip(&ids) {
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
                        .zip(ids)
                        .map(|(c, id)| {
                            json!({
                                "id": id,
                                "type": "function",
                                "function": {
                                    "name": wire::replay_name(&c.name),
                                    "arguments": wire::replay_arguments(&c.arguments),
                                },
                            })
                        })
                        .collect();
                }
                v
            }
            Role::Tool => json!({
                "role": "tool",
                "tool_call_id": ids.first().cloned().unwrap_or_default(),
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
        match &req.tool_choice {
            ToolChoice::Auto => {}
            ToolChoice::Required => body["tool_choice"] = json!("required"),
            ToolChoice::None => body["tool_choice"] = json!("none"),
            ToolChoice::Tool(name) => {
                body["tool_choice"] = json!({"type": "function", "function": {"name": name}})
            }
        }
    }
    let field = match max_tokens_field {
        MaxTokensField::MaxTokens => "max_tokens",
        MaxTokensField::MaxCompletionTokens => "max_completion_tokens",
    };
    body[field] = json!(req.max_tokens);
    body
}

#[derive(Deserialize)]
struct Completion<'a> {
    #[serde(default)]
    model: Option<String>,
    #[serde(default, borrow)]
    choices: Option<Vec<Choice<'a>>>,
}

#[derive(Deserialize)]
struct Choice<'a> {
    #[serde(default, borrow)]
    message: Option<AssistantMessage<'a>>,
    #[serde(default)]
    finish_reason: Option<String>,
}

#[derive(Deserialize)]
struct AssistantMessage<'a> {
    #[serde(default)]
    content: Option<Value>,
    #[serde(default)]
    refusal: Option<String>,
    #[serde(default, borrow)]
    tool_calls: Option<Vec<WireToolCall<'a>>>,
    /// The legacy single call.
    #[serde(default, borrow)]
    function_call: Option<WireFunction<'a>>,
}

#[derive(Deserialize)]
struct WireToolCall<'a> {
    #[serde(default)]
    id: Option<Value>,
    #[serde(default, borrow)]
    function: Option<WireFunction<'a>>,
}

#[derive(Deserialize)]
struct WireFunction<'a> {
    #[serde(default)]
    name: Option<String>,
    /// A JSON string per the spec; servers also send an object, `""`, null.
    #[serde(default, borrow)]
    arguments: Option<&'a RawValue>,
}

/// Map a `finish_reason` (OpenAI's, and the words compatible servers use).
fn finish_reason(raw: Option<&str>) -> FinishReason {
    match raw {
        Some("stop" | "eos" | "eos_token" | "end_turn" | "stop_sequence") => FinishReason::Stop,
        Some("tool_calls" | "function_call" | "tool_use") => FinishReason::ToolCalls,
        Some("length" | "max_tokens" | "model_length") => FinishReason::Length,
        Some("content_filter") => FinishReason::ContentFilter,
        Some("refusal") => FinishReason::Refusal,
        _ => FinishReason::Other,
    }
}

/// The answer's tool calls, each repair noted in `repairs`.
fn read_tool_calls(wire_calls: Vec<WireToolCall>, repairs: &mut Vec<String>) -> Vec<ToolCall> {
    let mut tool_calls = Vec::new();
    for (i, t) in wire_calls.into_iter().enumerate() {
        let f = t.function.unwrap_or(WireFunction {
            name: None,
            arguments: None,
        });
        let name = f.name.unwrap_or_default();
        let (arguments, note) = wire::arguments_text(f.arguments, ArgsShape::String);
        if let Some(n) = note {
            repairs.push(format!("call {} ({name}): {n}", i + 1));
        }
        if name.is_empty() {
            repairs.push(format!("call {}: no function name", i + 1));
        }
        tool_calls.push(ToolCall {
            id: wire::call_id(t.id),
            name,
            arguments,
        });
    }
    tool_calls
}

/// Parse a chat completion body. Call ids are left as sent (an absent one
/// empty): [`wire::settle_ids`] makes them unique in the conversation.
///
/// # Errors
/// [`ProviderError::Failed`], carrying the tokens the body reports: an error
/// object ([`super::provider::FailureKind::ErrorInBody`]), a body that is not
/// a completion with a message (malformed), an answer announcing tool calls
/// without any (malformed, retriable).
pub fn parse_response(
    provider: &str,
    requested_model: &str,
    body: &str,
) -> Result<ChatResponse, ProviderError> {
    let (_, usage) = wire::preflight(provider, body)?;
    let body = body.trim_start_matches('\u{feff}');
    let bad =
        |what: String, retriable: bool| malformed(provider, what, retriable).with_usage(usage);
    let c: Completion<'_> = serde_json::from_str(body)
        .map_err(|e| bad(format!("not a chat completion ({e})"), false))?;
    let Some(choice) = c.choices.and_then(|v| v.into_iter().next()) else {
        return Err(bad("no choice in `choices`".into(), true));
    };
    let Some(message) = choice.message else {
        return Err(bad("the choice has no `message`".into(), true));
    };
    let mut repairs = Vec::new();
    let mut wire_calls = message.tool_calls.unwrap_or_default();
    if let Some(f) = message.function_call {
        repairs.push("a legacy `function_call`: read as a tool call".into());
        wire_calls.push(WireToolCall {
            id: None,
            function: Some(f),
        });
    }
    let tool_calls = read_tool_calls(wire_calls, &mut repairs);
    let content = wire::content_text(message.content.as_ref()).map_err(|e| bad(e, false))?;
    if !content.skipped.is_empty() {
        repairs.push(format!(
            "content parts left out of the answer: {}",
            content.skipped.join(", ")
        ));
    }
    let refusal = message
        .refusal
        .filter(|r| !r.trim().is_empty())
        .or(content.refusal);
    let finish_raw = choice.finish_reason.unwrap_or_default();
    let mut finish = finish_reason(Some(finish_raw.as_str()).filter(|s| !s.is_empty()));
    if finish == FinishReason::ToolCalls && tool_calls.is_empty() {
        let text = content.text.trim();
        let shown = if text.is_empty() {
            "and no text".to_string()
        } else {
            format!(
                "and the text {:?}",
                text.chars().take(120).collect::<String>()
            )
        };
        return Err(bad(
            format!("finish_reason `{finish_raw}` but no tool call, {shown}"),
            true,
        ));
    }
    if finish == FinishReason::Other && !tool_calls.is_empty() {
        finish = FinishReason::ToolCalls;
    }
    if refusal.is_some() && tool_calls.is_empty() && finish != FinishReason::Length {
        finish = FinishReason::Refusal;
    }
    let text = match (&refusal, content.text.is_empty()) {
        (Some(r), true) => r.clone(),
        _ => content.text,
    };
    Ok(ChatResponse {
        provider: provider.to_string(),
        model: c.model.unwrap_or_else(|| requested_model.to_string()),
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
impl Provider for OpenAiProvider {
    fn name(&self) -> &str {
        &self.name
    }

    fn model_for(&self, tier: Tier) -> String {
        tier.pick(&self.model, self.cheap_model.as_deref())
    }

    async fn complete(&self, request: &ChatRequest) -> Result<ChatResponse, ProviderError> {
        let model = self.model_for(request.tier);
        let mut body = request_body(request, &model, self.max_tokens_field);
        if let (Some(t), Some(b)) = (self.temperature, body.as_object_mut()) {
            b.insert("temperature".into(), serde_json::json!(t));
        }
        let as_schema = match self.forced_call {
            ForcedCall::JsonSchema => super::forced::response_format(request, false),
            ForcedCall::JsonSchemaAlways => super::forced::response_format(request, true),
            ForcedCall::Native => None,
        };
        if let (Some(format), Some(b)) = (&as_schema, body.as_object_mut()) {
            b.remove("tools");
            b.remove("tool_choice");
            b.insert("response_format".into(), format.clone());
            let note = super::forced::system_note(request, format);
            if let Some(Value::String(system)) = b
                .get_mut("messages")
                .and_then(|m| m.get_mut(0))
                .and_then(|m| m.get_mut("content"))
            {
                system.push_str(&note);
            }
        }
        let mut headers = HeaderMap::new();
        if let Some(k) = &self.key {
            headers.insert(AUTHORIZATION, k.header_value("Bearer ", &self.name)?);
        }
        let url = format!("{}/chat/completions", self.base_url);
        let text = http::post_json(&self.client, &self.name, &url, headers, &body).await?;
        let mut resp = parse_response(&self.name, &model, &text)?;
        if as_schema.is_some() {
            super::forced::read_back(request, &mut resp);
        }
        wire::settle_ids(
            &mut resp.tool_calls,
            &request.messages,
            IdRule::OpenAi,
            &mut resp.repairs,
        );
        Ok(resp)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::provider::{Message, ToolSpec};

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
        assert_eq!(r.tool_calls[0].id, "");
        assert_eq!(
            r.repairs,
            ["call 1 (t): `arguments` was an object, not a string"]
        );
        assert_eq!(r.model, "m");
        assert!(parse_response("p", "m", r#"{"choices":[]}"#).is_err());
        assert!(parse_response("p", "m", "<html>").is_err());
    }
}
