//! The request bodies capsaga sends, checked against the providers'
//! published API shapes (the schema files under `tests/schemas/`, vendored
//! with their licences; see `tests/schemas/README.md`) and against the
//! conversation rules the APIs document but no schema expresses:
//!
//! - OpenAI chat completions: every assistant tool call's `arguments` is a
//!   JSON object in a string ("the arguments ... in JSON format"; llama.cpp's
//!   server refuses the whole request otherwise), function names match
//!   `^[a-zA-Z0-9_-]{1,64}$` (FunctionObject), tool-call ids are unique and
//!   every call is answered by one `tool` message before the conversation
//!   goes on, and no `tool` message answers an unknown call.
//! - Anthropic Messages: the conversation starts with `user` and alternates;
//!   tool_use ids are unique; each assistant turn's tool_use blocks are all
//!   answered by tool_result blocks of the next user turn, which answer
//!   nothing else; a final assistant turn (a prefill) does not end with
//!   whitespace.

use crate::repo_root;
use serde_json::Value;
use std::collections::BTreeSet;
use std::sync::OnceLock;

/// Which API a body is for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Api {
    /// `POST /v1/chat/completions`.
    OpenAiChat,
    /// `POST /v1/messages`.
    AnthropicMessages,
}

fn load(rel: &str) -> jsonschema::Validator {
    let path = repo_root().join("tests/schemas").join(rel);
    let text =
        std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("read {}: {e}", path.display()));
    let schema: Value = serde_json::from_str(&text).expect("schema is JSON");
    jsonschema::options()
        .build(&schema)
        .unwrap_or_else(|e| panic!("{rel} does not compile: {e}"))
}

fn validator(api: Api) -> &'static jsonschema::Validator {
    static OPENAI: OnceLock<jsonschema::Validator> = OnceLock::new();
    static ANTHROPIC: OnceLock<jsonschema::Validator> = OnceLock::new();
    match api {
        Api::OpenAiChat => {
            OPENAI.get_or_init(|| load("openai/chat-completions-request.schema.json"))
        }
        Api::AnthropicMessages => {
            ANTHROPIC.get_or_init(|| load("anthropic/messages-request.schema.json"))
        }
    }
}

/// Everything wrong with `body` as a request of `api` (empty: valid).
pub fn problems(api: Api, body: &Value) -> Vec<String> {
    let mut out: Vec<String> = validator(api)
        .iter_errors(body)
        .take(20)
        .map(|e| format!("schema: {} at {}", e, e.instance_path()))
        .collect();
    match api {
        Api::OpenAiChat => openai_rules(body, &mut out),
        Api::AnthropicMessages => anthropic_rules(body, &mut out),
    }
    out
}

/// Panic with every problem of every body in `bodies`.
pub fn assert_valid<'a>(api: Api, bodies: impl IntoIterator<Item = &'a Value>) {
    for (i, b) in bodies.into_iter().enumerate() {
        let p = problems(api, b);
        assert!(
            p.is_empty(),
            "request {i} is not a valid {api:?} body:\n  {}\nbody: {b:#}",
            p.join("\n  ")
        );
    }
}

fn name_ok(n: &str) -> bool {
    !n.is_empty()
        && n.len() <= 64
        && n.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
}

fn openai_rules(body: &Value, out: &mut Vec<String>) {
    for t in body["tools"].as_array().into_iter().flatten() {
        let n = t["function"]["name"].as_str().unwrap_or_default();
        if !name_ok(n) {
            out.push(format!("tool name {n:?} outside [a-zA-Z0-9_-]{{1,64}}"));
        }
    }
    let mut seen: BTreeSet<String> = BTreeSet::new();
    let mut open: Vec<String> = Vec::new();
    for (i, m) in body["messages"]
        .as_array()
        .into_iter()
        .flatten()
        .enumerate()
    {
        let role = m["role"].as_str().unwrap_or_default();
        if role == "tool" {
            let id = m["tool_call_id"].as_str().unwrap_or_default().to_string();
            match open.iter().position(|o| *o == id) {
                Some(k) => {
                    open.remove(k);
                }
                None => out.push(format!(
                    "message {i}: tool result for `{id}`, which no open call has"
                )),
            }
            continue;
        }
        if !open.is_empty() {
            out.push(format!("message {i}: calls {open:?} were never answered"));
            open.clear();
        }
        for c in m["tool_calls"].as_array().into_iter().flatten() {
            let id = c["id"].as_str().unwrap_or_default().to_string();
            if !seen.insert(id.clone()) {
                out.push(format!("message {i}: tool call id `{id}` used twice"));
            }
            let name = c["function"]["name"].as_str().unwrap_or_default();
            if !name_ok(name) {
                out.push(format!("message {i}: function name {name:?}"));
            }
            let args = c["function"]["arguments"].as_str().unwrap_or_default();
            match serde_json::from_str::<Value>(args) {
                Ok(v) if v.is_object() => {}
                _ => out.push(format!(
                    "message {i}: arguments {args:?} are not a JSON object"
                )),
            }
            open.push(id);
        }
    }
}

fn anthropic_rules(body: &Value, out: &mut Vec<String>) {
    let msgs: Vec<&Value> = body["messages"].as_array().into_iter().flatten().collect();
    let mut seen: BTreeSet<String> = BTreeSet::new();
    let mut expected: Vec<String> = Vec::new();
    for (i, m) in msgs.iter().enumerate() {
        let role = m["role"].as_str().unwrap_or_default();
        let want = if i % 2 == 0 { "user" } else { "assistant" };
        if role != want {
            out.push(format!(
                "message {i}: role {role}, expected {want} (alternation)"
            ));
        }
        let blocks: Vec<&Value> = m["content"].as_array().into_iter().flatten().collect();
        let results: Vec<String> = blocks
            .iter()
            .filter(|b| b["type"] == "tool_result")
            .map(|b| b["tool_use_id"].as_str().unwrap_or_default().to_string())
            .collect();
        if role == "user" {
            let mut r = results.clone();
            r.sort();
            let mut e = expected.clone();
            e.sort();
            if r != e {
                out.push(format!(
                    "message {i}: tool_result ids {results:?} do not answer the previous turn's tool_use ids {expected:?}"
                ));
            }
            expected.clear();
        } else {
            expected = blocks
                .iter()
                .filter(|b| b["type"] == "tool_use")
                .map(|b| b["id"].as_str().unwrap_or_default().to_string())
                .collect();
            for id in &expected {
                if !seen.insert(id.clone()) {
                    out.push(format!("message {i}: tool_use id `{id}` used twice"));
                }
            }
            if i + 1 == msgs.len()
                && let Some(t) = blocks.last().and_then(|b| b["text"].as_str())
                && t.trim_end() != t
            {
                out.push(format!(
                    "message {i}: final assistant text ends with whitespace"
                ));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn the_checks_can_fail() {
        // A well-formed body passes; each broken rule is reported.
        let ok = json!({"model": "m", "messages": [
            {"role": "system", "content": "s"},
            {"role": "user", "content": "u"},
            {"role": "assistant", "content": null, "tool_calls": [
                {"id": "a", "type": "function", "function": {"name": "t", "arguments": "{}"}}]},
            {"role": "tool", "tool_call_id": "a", "content": "r"}]});
        assert_eq!(problems(Api::OpenAiChat, &ok), Vec::<String>::new());
        let mut bad = ok.clone();
        bad["messages"][2]["tool_calls"][0]["function"]["arguments"] = json!("{oops");
        bad["messages"][3]["tool_call_id"] = json!("b");
        bad["messages"][1]["content"] = json!(5);
        let p = problems(Api::OpenAiChat, &bad);
        assert!(p.iter().any(|x| x.starts_with("schema:")), "{p:?}");
        assert!(p.iter().any(|x| x.contains("not a JSON object")), "{p:?}");
        assert!(p.iter().any(|x| x.contains("no open call")), "{p:?}");

        let ok = json!({"model": "m", "max_tokens": 5, "messages": [
            {"role": "user", "content": [{"type": "text", "text": "u"}]},
            {"role": "assistant", "content": [{"type": "tool_use", "id": "a", "name": "t", "input": {}}]},
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "a", "content": "r"}]}]});
        assert_eq!(problems(Api::AnthropicMessages, &ok), Vec::<String>::new());
        let mut bad = ok.clone();
        bad["messages"][1]["content"][0]["id"] = json!("functions.t:0");
        bad["messages"][1]["content"][0]["input"] = json!("{}");
        bad["messages"][0]["content"][0]["text"] = json!("");
        bad["extra"] = json!(1);
        let p = problems(Api::AnthropicMessages, &bad);
        assert!(p.len() >= 3, "{p:?}");
        assert!(p.iter().any(|x| x.contains("do not answer")), "{p:?}");
    }
}
