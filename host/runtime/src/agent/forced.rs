//! A forced tool call sent as a JSON Schema answer
//! (`[providers.x] forced_call = "json_schema"`, OpenAI-compatible only).
//!
//! Some servers honour `tool_choice: "required"` with a grammar that lets
//! free text precede the call, or read a named `tool_choice` as `auto`
//! (llama.cpp's `llama-server`): a small model then never reaches the call.
//! The same servers constrain a `response_format` JSON Schema from the first
//! token. So for a request whose choice forces a call, the tools are left
//! out and the answer must be `{"name": <tool>, "arguments": <its args>}`
//! (one tool's schema, or `anyOf` over all offered tools for `required`);
//! the answer is read back as that tool call. The arguments still go
//! through the door's validation like any call's.

use super::provider::{ChatRequest, ChatResponse, FinishReason, ToolCall, ToolChoice};
use serde_json::{Value, json};

/// The `response_format` forcing `req`'s call, or `None` when its choice
/// forces nothing or names a tool it does not offer.
pub fn response_format(req: &ChatRequest) -> Option<Value> {
    let call = |name: &str, params: &Value| {
        json!({
            "type": "object",
            "properties": {"name": {"const": name}, "arguments": params},
            "required": ["name", "arguments"],
            "additionalProperties": false,
        })
    };
    let schema = match &req.tool_choice {
        ToolChoice::Tool(name) => {
            let t = req.tools.iter().find(|t| &t.name == name)?;
            call(&t.name, &t.parameters)
        }
        ToolChoice::Required if !req.tools.is_empty() => json!({
            "anyOf": req.tools.iter().map(|t| call(&t.name, &t.parameters)).collect::<Vec<_>>()
        }),
        _ => return None,
    };
    Some(json!({
        "type": "json_schema",
        "json_schema": {"name": "tool_call", "strict": true, "schema": schema},
    }))
}

/// Read a JSON Schema answer back as the tool call it spells: `resp` gets
/// one call (its text cleared, finish `tool_calls`) when the text is a JSON
/// object with a string `name` naming an offered tool and an object
/// `arguments`; otherwise it is left as it is (the turn sees an answer
/// without the call it was forced to make), with a note in `repairs`.
pub fn read_back(req: &ChatRequest, resp: &mut ChatResponse) {
    if !resp.tool_calls.is_empty() || resp.finish_reason == FinishReason::Length {
        return;
    }
    let parsed: Option<(String, Value)> =
        capsaga_core::json::parse_strict(resp.text.trim(), capsaga_core::validate::MAX_ARGS_LEN)
            .ok()
            .and_then(|v| {
                let name = v.get("name")?.as_str()?.to_string();
                let args = v.get("arguments")?.clone();
                args.is_object().then_some((name, args))
            });
    match parsed {
        Some((name, args)) if req.tools.iter().any(|t| t.name == name) => {
            resp.tool_calls = vec![ToolCall {
                id: String::new(),
                name,
                arguments: args.to_string(),
            }];
            resp.text.clear();
            resp.finish_reason = FinishReason::ToolCalls;
            resp.repairs
                .push("a forced call answered as JSON (forced_call = \"json_schema\")".into());
        }
        _ => resp.repairs.push(
            "forced_call = \"json_schema\": the answer is not a call of an offered tool".into(),
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::agent::provider::{Message, ToolSpec, Usage};

    fn req(choice: ToolChoice) -> ChatRequest {
        let tool = |n: &str| ToolSpec {
            name: n.into(),
            description: "d".into(),
            parameters: json!({"type": "object", "properties": {"path": {"type": "string"}}}),
            grants: vec![],
        };
        let mut r = ChatRequest::new("s", vec![Message::user("u")], vec![tool("a"), tool("b")]);
        r.tool_choice = choice;
        r
    }

    fn answer(text: &str) -> ChatResponse {
        ChatResponse {
            provider: "p".into(),
            model: "m".into(),
            text: text.into(),
            tool_calls: vec![],
            finish_reason: FinishReason::Stop,
            finish_raw: "stop".into(),
            usage: Usage::default(),
            attempts: vec![],
            repairs: vec![],
        }
    }

    #[test]
    fn schemas_for_each_choice() {
        let named = response_format(&req(ToolChoice::Tool("b".into()))).unwrap();
        let s = &named["json_schema"]["schema"];
        assert_eq!(s["properties"]["name"]["const"], "b");
        assert_eq!(s["required"], json!(["name", "arguments"]));
        let any = response_format(&req(ToolChoice::Required)).unwrap();
        assert_eq!(
            any["json_schema"]["schema"]["anyOf"]
                .as_array()
                .unwrap()
                .len(),
            2
        );
        assert!(response_format(&req(ToolChoice::Auto)).is_none());
        assert!(response_format(&req(ToolChoice::None)).is_none());
        assert!(response_format(&req(ToolChoice::Tool("zz".into()))).is_none());
    }

    #[test]
    fn an_answer_is_read_back_only_as_a_call_of_an_offered_tool() {
        let r = req(ToolChoice::Required);
        let mut ok = answer(r#"{"name": "a", "arguments": {"path": "/x"}}"#);
        read_back(&r, &mut ok);
        assert_eq!(ok.tool_calls.len(), 1);
        assert_eq!(ok.tool_calls[0].name, "a");
        assert_eq!(ok.finish_reason, FinishReason::ToolCalls);
        assert!(ok.text.is_empty());
        for bad in [
            r#"{"name": "shell", "arguments": {}}"#,
            r#"{"name": "a", "arguments": "rm -rf /"}"#,
            r#"{"name": "a", "name": "b", "arguments": {}}"#,
            "prose",
            "",
        ] {
            let mut resp = answer(bad);
            read_back(&r, &mut resp);
            assert!(resp.tool_calls.is_empty(), "{bad}");
            assert_eq!(resp.text, bad, "{bad}");
        }
    }
}
