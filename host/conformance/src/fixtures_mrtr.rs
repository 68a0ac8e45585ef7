//! The conformance suite's reference fixtures of MCP 2026-07-28 (beside
//! [`crate::fixtures`]): the tools and the prompt of the multi round-trip
//! request scenarios (SEP-2322:
//! a result that asks the client for input, `inputRequests`, and is retried
//! with `inputResponses` and the echoed `requestState`), and the stateless
//! scenario's `test_missing_capability` (SEP-2575: a request that needs a
//! capability the client did not declare in its `_meta` is refused with
//! `-32021`).
//!
//! Like the older fixtures they run no component and write no saga. Their
//! `requestState` is sealed (HMAC-SHA256, rmcp's `RequestStateCodec`) and
//! bound to the principal and the tool it was issued for: a state that was
//! altered, issued to another principal or for another tool is refused with
//! `-32602` (SEP-2322: the echoed state is attacker-controlled input).

// Sampling is deprecated by the MCP draft (SEP-2577), yet the 2026-07-28
// suite still asks for it.
#![allow(deprecated)]

use rmcp::ErrorData as McpError;
use rmcp::model::{ClientCapabilities, RequestStateCodec, SealOptions};
use serde_json::{Map, Value, json};
use std::time::Duration;

/// How long a sealed `requestState` stays valid.
pub const STATE_TTL: Duration = Duration::from_secs(600);

/// What a fixture answers: a complete result, or one asking for input
/// (both as JSON, in rmcp's shapes).
#[derive(Debug)]
pub enum Answer {
    /// A complete result (`CallToolResult` or `GetPromptResult`).
    Complete(Value),
    /// An `InputRequiredResult`.
    InputRequired(Value),
}

const TOOLS: [&str; 9] = [
    "test_input_required_result_elicitation",
    "test_input_required_result_sampling",
    "test_input_required_result_list_roots",
    "test_input_required_result_request_state",
    "test_input_required_result_multiple_inputs",
    "test_input_required_result_multi_round",
    "test_input_required_result_tampered_state",
    "test_input_required_result_capabilities",
    "test_missing_capability",
];

/// The diagnostic hook of the stateless scenario: calling it tells every
/// `subscriptions/listen` stream that the tool list changed.
pub const TRIGGER_TOOL_CHANGE: &str = "test_trigger_tool_change";

/// The prompt that asks for input before it can be rendered.
pub const PROMPT: &str = "test_input_required_result_prompt";

/// The fixture tools' definitions (`tools/list`).
pub fn tools() -> Vec<Value> {
    TOOLS
        .iter()
        .map(|name| {
            json!({"name": name,
                "description": "Conformance fixture (MCP 2026-07-28): asks the client for input.",
                "inputSchema": {"type": "object", "properties": {}}})
        })
        .chain(std::iter::once(json!({"name": TRIGGER_TOOL_CHANGE,
            "description": "Conformance fixture (MCP 2026-07-28): announces a tool list change.",
            "inputSchema": {"type": "object", "properties": {}}})))
        .collect()
}

/// Whether `name` is one of these fixture tools.
pub fn is_tool(name: &str) -> bool {
    TOOLS.contains(&name)
}

/// The fixture prompt's definition (`prompts/list`).
pub fn prompt_definition() -> Value {
    json!({"name": PROMPT, "description": "Conformance fixture (MCP 2026-07-28): asks for context first"})
}

/// One request's view of what the client sent back.
#[derive(Debug, Default)]
pub struct Round<'a> {
    /// `inputResponses`, keyed as the server asked.
    pub responses: Option<&'a Map<String, Value>>,
    /// The echoed `requestState`.
    pub state: Option<&'a str>,
    /// The principal making the request (binds the state).
    pub principal: &'a str,
    /// What the client declared in `_meta` (or at `initialize`).
    pub caps: Option<&'a ClientCapabilities>,
}

fn elicit(message: &str, field: &str) -> Value {
    json!({"method": "elicitation/create", "params": {"mode": "form", "message": message,
        "requestedSchema": {"type": "object", "properties": {field: {"type": "string"}},
        "required": [field]}}})
}

fn elicit_bool(message: &str, field: &str) -> Value {
    json!({"method": "elicitation/create", "params": {"mode": "form", "message": message,
        "requestedSchema": {"type": "object", "properties": {field: {"type": "boolean"}},
        "required": [field]}}})
}

fn sample(text: &str, max_tokens: u32) -> Value {
    json!({"method": "sampling/createMessage", "params": {
        "messages": [{"role": "user", "content": {"type": "text", "text": text}}],
        "maxTokens": max_tokens}})
}

fn roots() -> Value {
    json!({"method": "roots/list", "params": {}})
}

fn complete(text: impl Into<String>) -> Answer {
    Answer::Complete(json!({"content": [{"type": "text", "text": text.into()}]}))
}

fn ask(requests: Value, state: Option<String>) -> Answer {
    let mut r = json!({"resultType": "input_required", "inputRequests": requests});
    if let Some(s) = state {
        r["requestState"] = json!(s);
    }
    Answer::InputRequired(r)
}

/// The accepted elicitation answer's `field`, if the client sent one.
fn elicited<'a>(
    responses: Option<&'a Map<String, Value>>,
    key: &str,
    field: &str,
) -> Option<&'a Value> {
    let r = responses?.get(key)?;
    if r.get("action").and_then(Value::as_str) != Some("accept") {
        return None;
    }
    r.get("content")?.get(field)
}

fn has(responses: Option<&Map<String, Value>>, key: &str) -> bool {
    responses.is_some_and(|r| r.get(key).is_some_and(Value::is_object))
}

fn sampled(responses: Option<&Map<String, Value>>, key: &str) -> Option<String> {
    let c = responses?.get(key)?.get("content")?;
    let first = if let Some(a) = c.as_array() {
        a.first()?
    } else {
        c
    };
    first.get("text")?.as_str().map(str::to_owned)
}

fn bad_state(e: impl std::fmt::Display) -> McpError {
    McpError::invalid_params(format!("requestState rejected: {e}"), None)
}

/// The sealing of the fixtures' `requestState`: associated data binds a
/// state to the principal and the tool.
pub struct States<'a> {
    /// The server's codec.
    pub codec: &'a RequestStateCodec,
}

impl States<'_> {
    fn seal(&self, tool: &str, principal: &str, round: u32) -> String {
        let ad = format!("{principal}\u{0}{tool}");
        let payload = json!({"tool": tool, "round": round}).to_string();
        self.codec.seal_with(
            payload.as_bytes(),
            &SealOptions::new()
                .associated_data(ad.as_bytes())
                .ttl(STATE_TTL),
        )
    }

    /// The round a state was sealed at; `Ok(None)` without a state.
    ///
    /// # Errors
    /// `-32602` for a state that fails verification.
    fn open(
        &self,
        tool: &str,
        principal: &str,
        state: Option<&str>,
    ) -> Result<Option<u32>, McpError> {
        let Some(state) = state else {
            return Ok(None);
        };
        let ad = format!("{principal}\u{0}{tool}");
        let bytes = self
            .codec
            .open_with(state, ad.as_bytes())
            .map_err(bad_state)?;
        let v: Value = serde_json::from_slice(&bytes).map_err(bad_state)?;
        if v["tool"] != tool {
            return Err(bad_state("issued for another request"));
        }
        let round = v["round"].as_u64().and_then(|r| u32::try_from(r).ok());
        round.map(Some).ok_or_else(|| bad_state("no round"))
    }
}

/// Call the fixture tool `name` for one round.
///
/// # Errors
/// `-32602` for a tampered `requestState`; `-32021` when the tool needs a
/// capability the client did not declare.
// Over 100 lines: the fixture table, an arm per conformance tool.
pub fn call(name: &str, round: &Round<'_>, states: &States<'_>) -> Result<Answer, McpError> {
    let r = round.responses;
    let who = round.principal;
    Ok(match name {
        "test_missing_capability" => {
            let declared = round.caps.is_some_and(|c| c.sampling.is_some());
            if !declared {
                return Err(McpError::missing_required_client_capability(
                    ClientCapabilities::builder().enable_sampling().build(),
                ));
            }
            complete("the client declared sampling")
        }
        "test_input_required_result_elicitation" => match elicited(r, "user_name", "name") {
            Some(n) => complete(format!("Hello, {}!", n.as_str().unwrap_or("stranger"))),
            None => ask(
                json!({"user_name": elicit("What is your name?", "name")}),
                None,
            ),
        },
        "test_input_required_result_sampling" => match sampled(r, "capital_question") {
            Some(t) => complete(format!("The client's model said: {t}")),
            None => ask(
                json!({"capital_question": sample("What is the capital of France?", 100)}),
                None,
            ),
        },
        "test_input_required_result_list_roots" => {
            let listed = r
                .and_then(|r| r.get("client_roots"))
                .and_then(|v| v.get("roots"))
                .and_then(Value::as_array);
            match listed {
                Some(list) => {
                    let uris: Vec<&str> = list
                        .iter()
                        .filter_map(|x| x.get("uri").and_then(Value::as_str))
                        .collect();
                    complete(format!("The client's roots: {}", uris.join(", ")))
                }
                None => ask(json!({"client_roots": roots()}), None),
            }
        }
        "test_input_required_result_request_state"
        | "test_input_required_result_tampered_state" => {
            let opened = states.open(name, who, round.state)?;
            if opened == Some(1) && has(r, "confirm") {
                complete("state-ok: the request state was verified")
            } else {
                ask(
                    json!({"confirm": elicit_bool("Please confirm", "ok")}),
                    Some(states.seal(name, who, 1)),
                )
            }
        }
        "test_input_required_result_multiple_inputs" => {
            let opened = states.open(name, who, round.state)?;
            let all = ["user_name", "greeting", "client_roots"]
                .iter()
                .all(|k| has(r, k));
            if opened == Some(1) && all {
                complete("all three inputs received")
            } else {
                ask(
                    json!({"user_name": elicit("What is your name?", "name"),
                        "greeting": sample("Generate a greeting", 50),
                        "client_roots": roots()}),
                    Some(states.seal(name, who, 1)),
                )
            }
        }
        "test_input_required_result_multi_round" => match states.open(name, who, round.state)? {
            Some(1) if elicited(r, "step1", "name").is_some() => ask(
                json!({"step2": elicit("Step 2: What is your favorite color?", "color")}),
                Some(states.seal(name, who, 2)),
            ),
            Some(2) if elicited(r, "step2", "color").is_some() => complete("both rounds answered"),
            Some(2) => ask(
                json!({"step2": elicit("Step 2: What is your favorite color?", "color")}),
                Some(states.seal(name, who, 2)),
            ),
            _ => ask(
                json!({"step1": elicit("Step 1: What is your name?", "name")}),
                Some(states.seal(name, who, 1)),
            ),
        },
        "test_input_required_result_capabilities" => {
            let caps = round.caps;
            let mut asks = Map::new();
            if caps.is_some_and(|c| c.sampling.is_some()) {
                asks.insert("summary".into(), sample("Summarize the request", 50));
            }
            if caps.is_some_and(|c| c.elicitation.is_some()) {
                asks.insert("user_name".into(), elicit("What is your name?", "name"));
            }
            if caps.is_some_and(|c| c.roots.is_some()) {
                asks.insert("client_roots".into(), roots());
            }
            let answered = !asks.is_empty() && asks.keys().all(|k| has(r, k));
            if asks.is_empty() {
                return Err(McpError::missing_required_client_capability(
                    ClientCapabilities::builder().enable_sampling().build(),
                ));
            }
            if answered {
                complete("every declared capability answered")
            } else {
                ask(Value::Object(asks), None)
            }
        }
        other => {
            return Err(McpError::invalid_params(
                format!(
                    "no fixture tool {}",
                    other.chars().take(100).collect::<String>()
                ),
                None,
            ));
        }
    })
}

/// `prompts/get` of [`PROMPT`] for one round.
pub fn prompt(round: &Round<'_>) -> Answer {
    match elicited(round.responses, "user_context", "context") {
        Some(c) => Answer::Complete(json!({"messages": [{"role": "user", "content": {
            "type": "text",
            "text": format!("Answer with this context in mind: {}", c.as_str().unwrap_or_default())}}]})),
        None => ask(
            json!({"user_context": elicit("What context should the prompt use?", "context")}),
            None,
        ),
    }
}
