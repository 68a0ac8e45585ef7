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
//!
//! With `forced_call = "json_schema_always"` every other request of the
//! turn is answered the same way, with one more shape: a final answer
//! `{"answer": <text>}` whose length the schema bounds
//! ([`answer_chars`]), read back as the answer's text. A grammar-following
//! server then cannot let a small model write past `max_tokens`. After the
//! model repeats a call ([`repeating`]) only the final answer is offered.

use super::provider::{ChatRequest, ChatResponse, FinishReason, ToolCall, ToolChoice};
use serde_json::{Value, json};

/// Characters a final answer may hold under `max_tokens`: a third of it
/// (text of up to three tokens per character, as a byte-level tokenizer
/// spends on most non-Latin scripts, still fits), less 16 tokens for the
/// JSON around it, and at least 1.
pub fn answer_chars(max_tokens: u32) -> u32 {
    (max_tokens.saturating_sub(16) / 3).max(1)
}

/// The `response_format` of `req`: forcing its call, or (with `always`)
/// bounding every answer to a call or a final answer. `None` when nothing
/// is forced (and not `always`) or the choice names a tool `req` does not
/// offer.
pub fn response_format(req: &ChatRequest, always: bool) -> Option<Value> {
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
        ToolChoice::Required => return None,
        ToolChoice::Auto | ToolChoice::None if !always => return None,
        ToolChoice::Auto | ToolChoice::None => {
            let answer = json!({
                "type": "object",
                "properties": {"answer": {
                    "type": "string",
                    "maxLength": answer_chars(req.max_tokens),
                }},
                "required": ["answer"],
                "additionalProperties": false,
            });
            let mut shapes: Vec<Value> = Vec::new();
            if req.tool_choice == ToolChoice::Auto && !repeating(req) {
                shapes.extend(req.tools.iter().map(|t| call(&t.name, &t.parameters)));
            }
            if shapes.is_empty() {
                answer
            } else {
                shapes.push(answer);
                json!({ "anyOf": shapes })
            }
        }
    };
    Some(json!({
        "type": "json_schema",
        "json_schema": {"name": "tool_call", "strict": true, "schema": schema},
    }))
}

/// Whether the model's latest tool call repeats one it made before in the
/// conversation (same tool, same arguments as JSON values). A small model
/// held to JSON answers tends to call the same tool again and again until
/// the turn's step limit rolls everything back; under
/// `json_schema_always` the request after a repeat offers only the final
/// answer.
pub fn repeating(req: &ChatRequest) -> bool {
    let calls: Vec<(&str, Option<Value>)> = req
        .messages
        .iter()
        .flat_map(|m| m.tool_calls.iter())
        .map(|c| {
            (
                c.name.as_str(),
                serde_json::from_str::<Value>(&c.arguments).ok(),
            )
        })
        .collect();
    match calls.split_last() {
        Some((last, before)) => before.contains(last),
        None => false,
    }
}

/// What the system prompt adds when `req` goes with a JSON Schema
/// `response_format` (`format`, from [`response_format`]): the request
/// carries no tools, so the model is told the shapes it may answer with and
/// the offered tools' names and descriptions (the schema constrains the
/// answer, it does not explain it).
pub fn system_note(req: &ChatRequest, format: &Value) -> String {
    let schema = &format["json_schema"]["schema"];
    let shapes: Vec<&Value> = match schema.get("anyOf").and_then(Value::as_array) {
        Some(all) => all.iter().collect(),
        None => vec![schema],
    };
    let answers = shapes
        .iter()
        .find_map(|s| s["properties"]["answer"]["maxLength"].as_u64());
    let calls: Vec<&str> = shapes
        .iter()
        .filter_map(|s| s["properties"]["name"]["const"].as_str())
        .collect();
    let mut note = String::from("\n\nAnswer with one JSON object and nothing else.");
    if !calls.is_empty() {
        note.push_str(
            " To call a tool: {\"name\": \"<tool>\", \"arguments\": {<its arguments>}}. Tools:",
        );
        for t in req
            .tools
            .iter()
            .filter(|t| calls.contains(&t.name.as_str()))
        {
            note.push_str(&format!("\n- {}: {}", t.name, t.description));
        }
    }
    if let Some(n) = answers {
        note.push_str(&format!(
            "\nWhen a tool's result answers the task, or no tool is needed, give your final answer (at most {n} characters): {{\"answer\": \"<text>\"}}."
        ));
    }
    note
}

/// Read a JSON Schema answer back as the tool call it spells: `resp` gets
/// one call (its text cleared, finish `tool_calls`) when the text is a JSON
/// object with a string `name` naming an offered tool and an object
/// `arguments`. A request that did not force a call may instead be answered
/// `{"answer": <text>}` (`json_schema_always`): its text becomes the
/// answer. Anything else is left as it is (the turn sees an answer without
/// the call it was forced to make), with a note in `repairs`.
pub fn read_back(req: &ChatRequest, resp: &mut ChatResponse) {
    if !resp.tool_calls.is_empty() || resp.finish_reason == FinishReason::Length {
        return;
    }
    let value =
        capsaga_core::json::parse_strict(resp.text.trim(), capsaga_core::validate::MAX_ARGS_LEN)
            .ok();
    let forced = matches!(req.tool_choice, ToolChoice::Required | ToolChoice::Tool(_));
    if !forced
        && let Some(text) = value
            .as_ref()
            .and_then(|v| v.as_object())
            .filter(|o| o.len() == 1)
            .and_then(|o| o.get("answer"))
            .and_then(Value::as_str)
    {
        resp.text = text.to_string();
        resp.repairs
            .push("a final answer read from JSON (forced_call = \"json_schema_always\")".into());
        return;
    }
    let parsed: Option<(String, String)> = match value {
        Some(v) => (|| {
            let name = v.get("name")?.as_str()?.to_string();
            let args = v.get("arguments")?;
            args.is_object().then(|| (name, args.to_string()))
        })(),
        // Not strict JSON (a duplicate key, most often: a small model
        // repeating `"properties"`): when it still spells a call, the call
        // goes to the door with its arguments' text as written, so the
        // door's strict reader refuses it as an invalid call the model is
        // told about (a lenient parse would drop the duplicate and pass
        // arguments the model never wrote as such).
        None => spelled_call(resp.text.trim()),
    };
    match parsed {
        Some((name, args))
            if req.tool_choice != ToolChoice::None && req.tools.iter().any(|t| t.name == name) =>
        {
            resp.tool_calls = vec![ToolCall {
                id: String::new(),
                name,
                arguments: args,
            }];
            resp.text.clear();
            resp.finish_reason = FinishReason::ToolCalls;
            resp.repairs
                .push("a call answered as JSON (forced_call = \"json_schema\")".into());
        }
        Some((name, _)) if req.tool_choice == ToolChoice::None => resp.repairs.push(format!(
            "forced_call = \"json_schema_always\": a call of {name:?} under tool_choice none, left as text"
        )),
        _ => resp.repairs.push(
            "forced_call = \"json_schema\": the answer is not a call of an offered tool".into(),
        ),
    }
}

/// `{"name": <string>, "arguments": <object>}` read leniently (no other
/// key, `name` once): the name and the arguments' exact text.
fn spelled_call(text: &str) -> Option<(String, String)> {
    #[derive(serde::Deserialize)]
    #[serde(deny_unknown_fields)]
    struct Spelled<'a> {
        name: String,
        #[serde(borrow)]
        arguments: &'a serde_json::value::RawValue,
    }
    if text.len() > capsaga_core::validate::MAX_ARGS_LEN {
        return None;
    }
    let s: Spelled<'_> = serde_json::from_str(text).ok()?;
    let raw = s.arguments.get();
    raw.starts_with('{').then(|| (s.name, raw.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::provider::{Message, ToolSpec, Usage};

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
        let named = response_format(&req(ToolChoice::Tool("b".into())), false).unwrap();
        let s = &named["json_schema"]["schema"];
        assert_eq!(s["properties"]["name"]["const"], "b");
        assert_eq!(s["required"], json!(["name", "arguments"]));
        let any = response_format(&req(ToolChoice::Required), false).unwrap();
        assert_eq!(
            any["json_schema"]["schema"]["anyOf"]
                .as_array()
                .unwrap()
                .len(),
            2
        );
        assert!(response_format(&req(ToolChoice::Auto), false).is_none());
        assert!(response_format(&req(ToolChoice::None), false).is_none());
        assert!(response_format(&req(ToolChoice::Tool("zz".into())), false).is_none());
        assert!(response_format(&req(ToolChoice::Tool("zz".into())), true).is_none());
    }

    #[test]
    fn always_bounds_every_answer_to_a_call_or_a_short_final_answer() {
        let mut auto = req(ToolChoice::Auto);
        auto.max_tokens = 256;
        let f = response_format(&auto, true).unwrap();
        let shapes = f["json_schema"]["schema"]["anyOf"].as_array().unwrap();
        assert_eq!(shapes.len(), 3, "two calls and the answer");
        assert_eq!(
            shapes[2]["properties"]["answer"]["maxLength"],
            answer_chars(256)
        );
        assert_eq!(answer_chars(256), 80);
        assert_eq!(answer_chars(0), 1);
        // `none`: only the answer.
        let mut none = req(ToolChoice::None);
        none.max_tokens = 64;
        let f = response_format(&none, true).unwrap();
        let s = &f["json_schema"]["schema"];
        assert_eq!(s["required"], json!(["answer"]));
        assert_eq!(s["properties"]["answer"]["maxLength"], 16);
        // A forced choice is the same as without `always`.
        assert_eq!(
            response_format(&req(ToolChoice::Required), true),
            response_format(&req(ToolChoice::Required), false)
        );
    }

    #[test]
    fn after_a_repeated_call_only_the_final_answer_is_offered() {
        let call = |args: &str| ToolCall {
            id: String::new(),
            name: "a".into(),
            arguments: args.into(),
        };
        let mut r = req(ToolChoice::Auto);
        r.messages.push(Message::assistant(
            "",
            vec![call(r#"{"path": "/x", "n": 1}"#)],
        ));
        r.messages.push(Message::tool("c1", "ok", false));
        assert!(!repeating(&r));
        let f = response_format(&r, true).unwrap();
        assert_eq!(
            f["json_schema"]["schema"]["anyOf"]
                .as_array()
                .unwrap()
                .len(),
            3
        );
        // Another call: still free.
        r.messages
            .push(Message::assistant("", vec![call(r#"{"path": "/y"}"#)]));
        assert!(!repeating(&r));
        // The first again, its keys in another order: a repeat.
        r.messages.push(Message::assistant(
            "",
            vec![call(r#"{"n": 1, "path": "/x"}"#)],
        ));
        assert!(repeating(&r));
        let f = response_format(&r, true).unwrap();
        assert_eq!(f["json_schema"]["schema"]["required"], json!(["answer"]));
        // Not without `always`, and never under a forced choice.
        assert!(response_format(&r, false).is_none());
        r.tool_choice = ToolChoice::Required;
        assert!(f != response_format(&r, true).unwrap());
    }

    #[test]
    fn the_system_note_names_the_shapes_and_the_tools() {
        let mut auto = req(ToolChoice::Auto);
        auto.max_tokens = 256;
        let note = system_note(&auto, &response_format(&auto, true).unwrap());
        assert!(note.contains("- a: d") && note.contains("- b: d"), "{note}");
        assert!(note.contains("at most 80 characters"), "{note}");
        let named = req(ToolChoice::Tool("b".into()));
        let note = system_note(&named, &response_format(&named, false).unwrap());
        assert!(
            note.contains("- b: d") && !note.contains("- a: d"),
            "{note}"
        );
        assert!(!note.contains("final answer"), "{note}");
        let none = req(ToolChoice::None);
        let note = system_note(&none, &response_format(&none, true).unwrap());
        assert!(
            !note.contains("Tools:") && note.contains("final answer"),
            "{note}"
        );
    }

    #[test]
    fn a_final_answer_is_read_back_only_where_no_call_was_forced() {
        let mut resp = answer(r#"{"answer": "Paris"}"#);
        read_back(&req(ToolChoice::Auto), &mut resp);
        assert_eq!(resp.text, "Paris");
        assert!(resp.tool_calls.is_empty());
        // Under a forced choice an answer is not what was asked: left as
        // text (the turn sees no call).
        let raw = r#"{"answer": "Paris"}"#;
        let mut forced = answer(raw);
        read_back(&req(ToolChoice::Required), &mut forced);
        assert_eq!(forced.text, raw);
        // A call under `none` is not run.
        let call = r#"{"name": "a", "arguments": {}}"#;
        let mut none = answer(call);
        read_back(&req(ToolChoice::None), &mut none);
        assert!(none.tool_calls.is_empty());
        assert_eq!(none.text, call);
        // Extra keys, duplicate keys, a non-string answer: left as text.
        for bad in [
            r#"{"answer": "a", "name": "a"}"#,
            r#"{"answer": "a", "answer": "b"}"#,
            r#"{"answer": 3}"#,
        ] {
            let mut r = answer(bad);
            read_back(&req(ToolChoice::Auto), &mut r);
            assert_eq!(r.text, bad, "{bad}");
        }
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

    #[test]
    fn a_call_whose_arguments_repeat_a_key_goes_to_the_door_as_written() {
        let r = req(ToolChoice::Required);
        let text = r#"{"name": "a", "arguments": {"path": "/x", "path": "/etc/passwd"}}"#;
        let mut resp = answer(text);
        read_back(&r, &mut resp);
        assert_eq!(resp.tool_calls.len(), 1);
        let args = &resp.tool_calls[0].arguments;
        // Both keys kept, so the door's strict reader refuses the call;
        // neither value was picked on the model's behalf.
        assert_eq!(args, r#"{"path": "/x", "path": "/etc/passwd"}"#);
        assert!(
            capsaga_core::json::parse_strict(args, capsaga_core::validate::MAX_ARGS_LEN).is_err()
        );
        // Not an offered tool, or arguments that are not an object: no call.
        for bad in [
            r#"{"name": "shell", "arguments": {"p": 1, "p": 2}}"#,
            r#"{"name": "a", "arguments": [1, 1], "x": {"k": 1, "k": 2}}"#,
            r#"{"name": "a", "arguments": "x", "arguments": {"p": 1}}"#,
        ] {
            let mut resp = answer(bad);
            read_back(&r, &mut resp);
            assert!(resp.tool_calls.is_empty(), "{bad}");
        }
    }
}
