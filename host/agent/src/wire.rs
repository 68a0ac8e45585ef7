//! What the two wire formats (OpenAI-compatible chat completions and
//! Anthropic Messages) share in reading an answer and in writing the
//! conversation back, and the quirks of real servers each rule absorbs. Pure:
//! no I/O.
//!
//! Reading an answer:
//! - [`preflight`]: the body is JSON, not a stream, not empty, and not an
//!   error object sent with a 2xx status (`{"error": {...}}` or Anthropic's
//!   `{"type": "error", ...}`), which becomes a provider error with the
//!   provider's own message, retriable when its code says so.
//! - [`usage_of`]: the tokens a body reports, read leniently and before
//!   anything else, so that an answer that cannot be used is still billed.
//! - [`arguments_text`]: a tool call's arguments as the JSON text the host
//!   validates: an empty or whitespace-only string, `null` or a missing field
//!   mean "no arguments" (`{}`); an object where the format wants a string
//!   (or a string where it wants an object) is taken as it is; a JSON string
//!   that encodes the arguments again is unwrapped. Each such departure is
//!   noted for the trace.
//! - [`content_text`]: message content as a string, `null`, or an array of
//!   parts (text, refusal, thinking/reasoning parts, which are not the
//!   answer).
//! - [`settle_ids`]: every call of an answer gets an id unique in the whole
//!   conversation and valid for the wire format (missing, empty, duplicated
//!   or ill-formed ids are replaced).
//!
//! Writing the conversation back ([`replay_arguments`], [`replay_name`],
//! [`wire_ids`]): whatever a model wrote, the provider is only ever sent
//! well-formed history: arguments that are a JSON object (else `{}`; the raw
//! text stays in the trace, and the call's tool result says what was wrong),
//! tool names in the documented alphabet, and ids valid for the format the
//! history is sent in (a failover can move a conversation from one format to
//! the other mid-turn).

use super::provider::{FailureKind, Message, ProviderError, Role, ToolCall, Usage};
use serde_json::Value;
use serde_json::value::RawValue;
use std::collections::{BTreeMap, BTreeSet, VecDeque};

/// Longest id kept as the provider sent it, bytes.
pub const MAX_ID_LEN: usize = 128;
/// Longest tool name sent back to a provider (OpenAI's documented limit).
pub const MAX_NAME_LEN: usize = 64;
/// The tool name sent back in place of one outside the documented alphabet
/// `[A-Za-z0-9_-]{1,64}`.
pub const INVALID_NAME: &str = "invalid_tool_name";

/// The id rules of a wire format.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IdRule {
    /// OpenAI-compatible: any printable ASCII without spaces (servers use
    /// `call_...`, `chatcmpl-tool-...`, `functions.NAME:0`).
    OpenAi,
    /// Anthropic: `^[a-zA-Z0-9_-]+$` (the API refuses anything else).
    Anthropic,
}

impl IdRule {
    /// Whether `id` may be sent in this format as it is.
    pub fn valid(self, id: &str) -> bool {
        !id.is_empty()
            && id.len() <= MAX_ID_LEN
            && match self {
                IdRule::OpenAi => id.bytes().all(|b| b.is_ascii_graphic()),
                IdRule::Anthropic => id
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-'),
            }
    }

    fn prefix(self) -> &'static str {
        match self {
            IdRule::OpenAi => "call_capsaga_",
            IdRule::Anthropic => "toolu_capsaga_",
        }
    }

    /// A fresh id of this format not in `used` (which it joins).
    fn fresh(self, used: &mut BTreeSet<String>) -> String {
        let mut n = used.len();
        loop {
            let id = format!("{}{n}", self.prefix());
            if used.insert(id.clone()) {
                return id;
            }
            n += 1;
        }
    }
}

fn clip(s: &str, n: usize) -> String {
    let mut out: String = s.chars().take(n).collect();
    if out.len() < s.len() {
        out.push('…');
    }
    out
}

/// A provider error of kind [`FailureKind::Malformed`].
pub fn malformed(provider: &str, what: impl std::fmt::Display, retriable: bool) -> ProviderError {
    ProviderError::of_kind(
        provider,
        FailureKind::Malformed,
        format!("malformed answer: {what}"),
        retriable,
    )
}

/// An error object found in a 2xx body.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BodyError {
    /// `type: message`, as the provider wrote it (clipped).
    pub message: String,
    /// Whether its code or type says a retry may succeed.
    pub retriable: bool,
}

/// The error object of a body, if it is one: OpenAI's `{"error": {...}}` (or
/// `{"error": "text"}`), Anthropic's `{"type": "error", "error": {...}}`.
/// Retriable: a numeric code or status 408, 409, 429 or 5xx, or a type/code
/// naming a rate limit, an overload, a timeout or a server error.
pub fn error_in_body(v: &Value) -> Option<BodyError> {
    let err = v.get("error").filter(|e| !e.is_null());
    if err.is_none() && v.get("type").and_then(Value::as_str) != Some("error") {
        return None;
    }
    let err = err.unwrap_or(&Value::Null);
    let message = err
        .get("message")
        .and_then(Value::as_str)
        .or_else(|| err.as_str())
        .or_else(|| v.get("message").and_then(Value::as_str))
        .unwrap_or("(no message)");
    let words: Vec<String> = ["type", "code", "status"]
        .iter()
        .filter_map(|k| err.get(*k))
        .map(|c| match c {
            Value::String(s) => s.clone(),
            other => other.to_string(),
        })
        .collect();
    let numeric = ["code", "status"]
        .iter()
        .filter_map(|k| err.get(*k).or_else(|| v.get(*k)))
        .filter_map(|c| {
            c.as_u64()
                .or_else(|| c.as_str().and_then(|s| s.parse().ok()))
        })
        .any(|c| super::http::retriable_status(c.min(999) as u16));
    let named = words.iter().any(|w| {
        let w = w.to_ascii_lowercase();
        [
            "rate_limit",
            "overloaded",
            "server_error",
            "api_error",
            "timeout",
            "unavailable",
            "internal",
        ]
        .iter()
        .any(|k| w.contains(k))
    });
    let label = words.first().map(|w| format!("{w}: ")).unwrap_or_default();
    Some(BodyError {
        message: clip(&format!("{label}{message}"), 300),
        retriable: numeric || named,
    })
}

/// The tokens a body reports, leniently: `prompt_tokens` or `input_tokens`
/// (plus Anthropic's `cache_creation_input_tokens` and
/// `cache_read_input_tokens`, billed as input too), `completion_tokens` or
/// `output_tokens`; integers or numbers; zero when absent.
pub fn usage_of(v: &Value) -> Usage {
    let Some(u) = v.get("usage").filter(|u| u.is_object()) else {
        return Usage::default();
    };
    let n = |k: &str| -> Option<u64> {
        u.get(k).and_then(|x| {
            x.as_u64().or_else(|| {
                x.as_f64()
                    .filter(|f| f.is_finite() && *f >= 0.0)
                    .map(|f| f as u64)
            })
        })
    };
    let input = n("prompt_tokens").unwrap_or_else(|| {
        n("input_tokens").unwrap_or(0)
            + n("cache_creation_input_tokens").unwrap_or(0)
            + n("cache_read_input_tokens").unwrap_or(0)
    });
    let output = n("completion_tokens")
        .or_else(|| n("output_tokens"))
        .unwrap_or(0);
    Usage {
        input_tokens: input,
        output_tokens: output,
    }
}

/// First checks of a 2xx body, shared by both formats: not empty (retriable),
/// not a server-sent event stream, JSON, not an error object (then a
/// [`FailureKind::ErrorInBody`] error with the provider's message and the
/// tokens the body reports). Returns the parsed body and its usage.
///
/// # Errors
/// [`ProviderError::Failed`] as above.
pub fn preflight(provider: &str, body: &str) -> Result<(Value, Usage), ProviderError> {
    let body = body.trim_start_matches('\u{feff}').trim();
    if body.is_empty() {
        return Err(malformed(provider, "an empty body", true));
    }
    if body.starts_with("data:") || body.starts_with("event:") {
        return Err(malformed(
            provider,
            "a server-sent event stream, although no stream was asked for",
            false,
        ));
    }
    let v: Value = serde_json::from_str(body).map_err(|e| {
        malformed(
            provider,
            format!("the body is not JSON ({e}): {}", clip(body, 200)),
            false,
        )
    })?;
    let usage = usage_of(&v);
    if let Some(err) = error_in_body(&v) {
        return Err(ProviderError::of_kind(
            provider,
            FailureKind::ErrorInBody,
            format!(
                "the provider answered with an error in a 2xx body: {}",
                err.message
            ),
            err.retriable,
        )
        .with_usage(usage));
    }
    if !v.is_object() {
        return Err(malformed(provider, "the body is not a JSON object", false).with_usage(usage));
    }
    Ok((v, usage))
}

/// How a format expects arguments: OpenAI a JSON *string*, Anthropic a JSON
/// object.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ArgsShape {
    /// `function.arguments`: a string holding JSON.
    String,
    /// `tool_use.input`: an object.
    Object,
}

/// Most levels of a JSON string encoding the arguments again that are
/// unwrapped.
const MAX_UNWRAP: usize = 3;

/// The arguments of a call as the JSON text the host validates, and what was
/// repaired (see the module docs). The text of an object is kept byte for
/// byte, so duplicate keys still reach validation.
pub fn arguments_text(raw: Option<&RawValue>, shape: ArgsShape) -> (String, Option<String>) {
    let field = match shape {
        ArgsShape::String => "arguments",
        ArgsShape::Object => "input",
    };
    let Some(raw) = raw else {
        return ("{}".into(), Some(format!("no `{field}`: read as {{}}")));
    };
    let text = raw.get().trim();
    match text.as_bytes().first() {
        Some(b'"') => {
            let Ok(mut s) = serde_json::from_str::<String>(text) else {
                return (text.to_string(), None);
            };
            let mut note = (shape == ArgsShape::Object)
                .then(|| format!("`{field}` was a string, not an object"));
            let mut depth = 0;
            loop {
                let t = s.trim();
                if t.is_empty() || t == "null" {
                    let what = if s.is_empty() {
                        "an empty string"
                    } else if t.is_empty() {
                        "whitespace only"
                    } else {
                        "the string \"null\""
                    };
                    return (
                        "{}".into(),
                        Some(format!("`{field}` was {what}: read as {{}}")),
                    );
                }
                if depth < MAX_UNWRAP
                    && t.starts_with('"')
                    && let Ok(inner) = serde_json::from_str::<String>(t)
                {
                    depth += 1;
                    note = Some(format!(
                        "`{field}` was JSON encoded {} times: unwrapped",
                        depth + 1
                    ));
                    s = inner;
                    continue;
                }
                return (s, note);
            }
        }
        Some(b'n') if text == "null" => (
            "{}".into(),
            Some(format!("`{field}` was null: read as {{}}")),
        ),
        Some(b'{') if shape == ArgsShape::String => (
            text.to_string(),
            Some(format!("`{field}` was an object, not a string")),
        ),
        _ => (text.to_string(), None),
    }
}

/// Message content as text: a string, `null`, one part, or an array of parts.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Content {
    /// The answer's text (text parts joined).
    pub text: String,
    /// A refusal, when a part (or the message's `refusal` field) is one.
    pub refusal: Option<String>,
    /// Part types left out of the answer (`thinking`, `reasoning`, images...).
    pub skipped: Vec<String>,
}

/// A tool call's id as sent: a string as it is, a number or another
/// value as its JSON text, an absent or `null` one empty ([`settle_ids`]
/// gives it one).
pub fn call_id(id: Option<Value>) -> String {
    match id {
        Some(Value::String(s)) => s,
        Some(Value::Null) | None => String::new(),
        Some(other) => other.to_string(),
    }
}

/// Read `content` (see [`Content`]). Text parts are `text`, `output_text`
/// and `input_text` (field `text`), or bare strings; `refusal` parts carry
/// `refusal`; `thinking`, `reasoning` and `redacted_thinking` parts are the
/// model's reasoning, not its answer.
///
/// # Errors
/// A description of a content that is neither text, null, a part nor an
/// array of parts.
pub fn content_text(v: Option<&Value>) -> Result<Content, String> {
    let mut c = Content::default();
    let parts: Vec<&Value> = match v {
        None | Some(Value::Null) => return Ok(c),
        Some(Value::String(s)) => {
            c.text = s.clone();
            return Ok(c);
        }
        Some(Value::Array(a)) => a.iter().collect(),
        Some(o @ Value::Object(_)) => vec![o],
        Some(other) => {
            return Err(format!(
                "`content` is {}, not text or parts",
                clip(&other.to_string(), 40)
            ));
        }
    };
    for p in parts {
        let kind = p.get("type").and_then(Value::as_str).unwrap_or("");
        match (p, kind) {
            (Value::String(s), _) => c.text.push_str(s),
            (_, "text" | "output_text" | "input_text") => {
                c.text
                    .push_str(p.get("text").and_then(Value::as_str).unwrap_or_default());
            }
            (_, "refusal") => {
                let r = p
                    .get("refusal")
                    .or_else(|| p.get("text"))
                    .and_then(Value::as_str)
                    .unwrap_or("(refused)");
                c.refusal = Some(match c.refusal.take() {
                    Some(prev) => format!("{prev}{r}"),
                    None => r.to_string(),
                });
            }
            _ => c.skipped.push(if kind.is_empty() {
                "untyped part".into()
            } else {
                clip(kind, 40)
            }),
        }
    }
    Ok(c)
}

/// Give each call of a new answer an id valid for `rule` and unique in the
/// conversation (`history`, then the answer's earlier calls). Missing, empty,
/// ill-formed and duplicated ids are replaced by fresh ones; each
/// replacement is noted in `repairs`.
pub fn settle_ids(
    calls: &mut [ToolCall],
    history: &[Message],
    rule: IdRule,
    repairs: &mut Vec<String>,
) {
    let mut used: BTreeSet<String> = BTreeSet::new();
    for m in history {
        used.extend(m.tool_calls.iter().map(|c| c.id.clone()));
        used.extend(m.tool_call_id.iter().cloned());
    }
    for (i, c) in calls.iter_mut().enumerate() {
        let why = if c.id.is_empty() {
            Some("no id".to_string())
        } else if !rule.valid(&c.id) {
            Some(format!("id `{}` is not a valid id", clip(&c.id, 40)))
        } else if used.contains(&c.id) {
            Some(format!("id `{}` was already used", clip(&c.id, 40)))
        } else {
            None
        };
        match why {
            None => {
                used.insert(c.id.clone());
            }
            Some(why) => {
                let id = rule.fresh(&mut used);
                repairs.push(format!(
                    "call {} ({}): {why}: given `{id}`",
                    i + 1,
                    clip(&c.name, 40)
                ));
                c.id = id;
            }
        }
    }
}

/// The arguments sent back to a provider in the history: `text` when it is
/// a JSON object (no duplicate keys), else `{}`.
pub fn replay_arguments(text: &str) -> String {
    match capsaga_core::validate::parse_args(text) {
        Ok(v) if v.is_object() => text.to_string(),
        _ => "{}".into(),
    }
}

/// The arguments sent back as an object (Anthropic `input`).
pub fn replay_input(text: &str) -> Value {
    match capsaga_core::validate::parse_args(text) {
        Ok(v) if v.is_object() => v,
        _ => Value::Object(Default::default()),
    }
}

/// The tool name sent back to a provider: `name` when it matches
/// `[A-Za-z0-9_-]{1,64}`, else [`INVALID_NAME`] (the call's tool result names
/// the model's text).
pub fn replay_name(name: &str) -> &str {
    let ok = !name.is_empty()
        && name.len() <= MAX_NAME_LEN
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-');
    if ok { name } else { INVALID_NAME }
}

/// The ids to send for each message of `messages` in the format of `rule`:
/// for an assistant message one per tool call, for a tool message one (the
/// call it answers), else none. A call keeps its id when that is valid and
/// not yet used; otherwise it gets a fresh one, and the k-th tool result
/// naming an id answers the k-th call that had it.
pub fn wire_ids(messages: &[Message], rule: IdRule) -> Vec<Vec<String>> {
    let mut used: BTreeSet<String> = BTreeSet::new();
    let mut pending: BTreeMap<&str, VecDeque<String>> = BTreeMap::new();
    let mut last: BTreeMap<&str, String> = BTreeMap::new();
    let mut out = Vec::with_capacity(messages.len());
    for m in messages {
        match m.role {
            Role::Assistant => {
                let mut ids = Vec::new();
                for c in &m.tool_calls {
                    let id = if rule.valid(&c.id) && used.insert(c.id.clone()) {
                        c.id.clone()
                    } else {
                        rule.fresh(&mut used)
                    };
                    pending
                        .entry(c.id.as_str())
                        .or_default()
                        .push_back(id.clone());
                    last.insert(c.id.as_str(), id.clone());
                    ids.push(id);
                }
                out.push(ids);
            }
            Role::Tool => {
                let key = m.tool_call_id.as_deref().unwrap_or("");
                let id = pending
                    .get_mut(key)
                    .and_then(VecDeque::pop_front)
                    .or_else(|| last.get(key).cloned())
                    .unwrap_or_else(|| rule.fresh(&mut used));
                out.push(vec![id]);
            }
            Role::User => out.push(Vec::new()),
        }
    }
    out
}

#[cfg(test)]
mod tests;
