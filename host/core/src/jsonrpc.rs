//! Admission of one JSON-RPC message as its bytes arrive (issue 24 item 4):
//! the rule every MCP surface (Streamable HTTP at `/mcp`, `capsaga mcp` over
//! stdio) applies before anything else reads the message: the MCP SDK's
//! parser, a log line, the dispatch door.
//!
//! The SDK parses a message into plain `serde_json` values, where a
//! duplicated key silently keeps its last value and no size limit applies
//! to a tool's arguments; the command line refuses both. So the raw bytes
//! are checked here with the host's own rules first:
//!
//! 1. at most `limit` bytes (the transport's message limit);
//! 2. UTF-8 text, no byte-order mark;
//! 3. one JSON object, not a batch (a JSON array: batching was removed from
//!    MCP in its 2025-06-18 revision, and capsaga never accepted it);
//! 4. strict JSON throughout ([`crate::json::parse_strict_within`]): no
//!    duplicate key at any depth, at most [`crate::json::MAX_DEPTH`] levels
//!    inside a tool's arguments, no integer past 64 bits, no lone
//!    surrogate, no prototype-polluting key;
//! 5. for `tools/call`, the raw `params.arguments` text under the door's own
//!    argument rule ([`crate::validate::parse_args`]: 1 MiB at most), exactly
//!    as the command line's arguments are.
//!
//! A refusal carries the JSON-RPC error code to answer with
//! ([`Refused::code`]) and, when it can be read, the request's `id`.

use crate::json::{JsonError, MAX_DEPTH, parse_strict_within};
use serde::Deserialize;
use serde_json::Value;
use serde_json::value::RawValue;

/// Levels a message may add around a tool's arguments (`{"params":
/// {"arguments": ...}}`), so that the arguments get exactly
/// [`MAX_DEPTH`].
pub const ENVELOPE_DEPTH: usize = 2;

/// What an admitted message is.
#[derive(Debug, Clone, PartialEq)]
pub struct Admitted {
    /// Its `id` (`None` for a notification).
    pub id: Option<Value>,
    /// Its `method` (`None` for a response).
    pub method: Option<String>,
}

/// Why a message was refused. Nothing of it was read further.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum Refused {
    /// Over the transport's message limit.
    #[error("message of {len} bytes exceeds the limit of {limit} bytes")]
    TooLarge {
        /// Its size, bytes.
        len: usize,
        /// The limit, bytes.
        limit: usize,
    },
    /// Not UTF-8 text, or it starts with a byte-order mark.
    #[error("message is not UTF-8 JSON text{0}")]
    NotText(&'static str),
    /// A JSON array: a batch.
    #[error("JSON-RPC batches are not accepted: send one message per request")]
    Batch,
    /// Not strict JSON (duplicate key, too deep, a refused key or number).
    #[error("message refused: {0}")]
    Json(JsonError),
    /// Valid JSON but not an object.
    #[error("a JSON-RPC message is a JSON object")]
    NotObject,
    /// The arguments of `tools/call` broke the door's argument rule.
    #[error("arguments of tools/call refused: {0}")]
    Arguments(JsonError),
}

impl Refused {
    /// The JSON-RPC error code of the answer: -32700 (parse error) for what
    /// is not acceptable JSON, -32600 (invalid request) for a batch, a
    /// non-object or an oversized message, -32602 (invalid params) for
    /// refused arguments.
    pub fn code(&self) -> i64 {
        match self {
            Refused::NotText(_) | Refused::Json(_) => -32700,
            Refused::TooLarge { .. } | Refused::Batch | Refused::NotObject => -32600,
            Refused::Arguments(_) => -32602,
        }
    }

    /// A stable snake_case name of the refusal (`too_large`, `not_text`,
    /// `batch`, `not_object`, or the JSON refusal's kind, e.g.
    /// `duplicate_key`, prefixed with `arguments_` for the arguments).
    pub fn kind(&self) -> String {
        match self {
            Refused::TooLarge { .. } => "too_large".into(),
            Refused::NotText(_) => "not_text".into(),
            Refused::Batch => "batch".into(),
            Refused::NotObject => "not_object".into(),
            Refused::Json(e) => e.kind().into(),
            Refused::Arguments(e) => format!("arguments_{}", e.kind()),
        }
    }
}

#[derive(Deserialize)]
struct Envelope<'a> {
    #[serde(default)]
    id: Option<Value>,
    #[serde(default)]
    method: Option<String>,
    #[serde(default, borrow)]
    params: Option<&'a RawValue>,
}

#[derive(Deserialize)]
struct CallParams<'a> {
    #[serde(default, borrow)]
    arguments: Option<&'a RawValue>,
}

/// The `id` of a message, read leniently (for the answer to a refused
/// message); `None` when it cannot be read.
pub fn id_of(bytes: &[u8]) -> Option<Value> {
    #[derive(Deserialize)]
    struct Id {
        #[serde(default)]
        id: Option<Value>,
    }
    serde_json::from_slice::<Id>(bytes)
        .ok()
        .and_then(|m| m.id)
        .filter(|id| matches!(id, Value::String(_) | Value::Number(_)))
}

/// Admit one message (see the module documentation).
///
/// # Errors
/// [`Refused`], with the message's `id` when it could be read.
pub fn admit(bytes: &[u8], limit: usize) -> Result<Admitted, (Refused, Option<Value>)> {
    if bytes.len() > limit {
        return Err((
            Refused::TooLarge {
                len: bytes.len(),
                limit,
            },
            None,
        ));
    }
    if bytes.starts_with("\u{FEFF}".as_bytes()) {
        return Err((Refused::NotText(" (a byte-order mark)"), None));
    }
    let Ok(text) = std::str::from_utf8(bytes) else {
        return Err((Refused::NotText(""), None));
    };
    let refused = |r: Refused| (r, id_of(bytes));
    if text.trim_start().starts_with('[') {
        return Err((Refused::Batch, None));
    }
    let value = parse_strict_within(text, limit, MAX_DEPTH + ENVELOPE_DEPTH)
        .map_err(|e| refused(Refused::Json(e)))?;
    if !value.is_object() {
        return Err(refused(Refused::NotObject));
    }
    // The text is strict JSON: this second, borrowing read sees the same
    // message, and finds the raw arguments.
    let env: Envelope<'_> = serde_json::from_str(text).map_err(|_| refused(Refused::NotObject))?;
    if env.method.as_deref() == Some("tools/call")
        && let Some(params) = env.params
        && let Ok(p) = serde_json::from_str::<CallParams<'_>>(params.get())
        && let Some(args) = p.arguments
    {
        crate::validate::parse_args(args.get()).map_err(|e| refused(Refused::Arguments(e)))?;
    }
    Ok(Admitted {
        id: env.id,
        method: env.method,
    })
}

/// The JSON-RPC error response answering a refused message.
pub fn error_response(refused: &Refused, id: Option<&Value>) -> Value {
    serde_json::json!({
        "jsonrpc": "2.0",
        "id": id.cloned().unwrap_or(Value::Null),
        "error": {
            "code": refused.code(),
            "message": refused.to_string(),
            "data": {"refused": refused.kind()},
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn call(args: &str) -> String {
        format!(
            r#"{{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{{"name":"fs_read","arguments":{args}}}}}"#
        )
    }

    fn kind(msg: &str) -> Result<(), String> {
        admit(msg.as_bytes(), 4 << 20)
            .map(|_| ())
            .map_err(|(r, _)| r.kind())
    }

    #[test]
    fn good_messages_pass() {
        let a = admit(call(r#"{"path":"/a"}"#).as_bytes(), 1 << 20).unwrap();
        assert_eq!(a.id, Some(serde_json::json!(7)));
        assert_eq!(a.method.as_deref(), Some("tools/call"));
        assert!(kind(r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#).is_ok());
        assert!(kind(r#"{"jsonrpc":"2.0","id":"x","result":{}}"#).is_ok());
        assert!(kind(&call("null")).is_ok());
    }

    #[test]
    fn every_class_is_refused_with_its_code() {
        // Duplicate keys at any depth, in the arguments or the envelope.
        assert_eq!(
            kind(&call(r#"{"path":"/a","path":"/etc/passwd"}"#)),
            Err("duplicate_key".into())
        );
        assert_eq!(
            kind(&call(r#"{"a":{"b":[{"c":1,"c":2}]}}"#)),
            Err("duplicate_key".into())
        );
        assert_eq!(
            kind(r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","method":"tools/list"}"#),
            Err("duplicate_key".into())
        );
        assert_eq!(
            kind(&call(r#"{"__proto__":{"x":1}}"#)),
            Err("reserved_key".into())
        );
        assert_eq!(
            kind(&call("{\"n\":99999999999999999999}")),
            Err("number_range".into())
        );
        assert_eq!(kind(&call(r#"{"s":"\ud800"}"#)), Err("syntax".into()));
        // Nesting: the arguments get exactly MAX_DEPTH levels.
        let nest = |n: usize| format!("{}{}", "[".repeat(n), "]".repeat(n));
        assert!(kind(&call(&format!(r#"{{"a":{}}}"#, nest(MAX_DEPTH - 1)))).is_ok());
        assert_eq!(
            kind(&call(&format!(r#"{{"a":{}}}"#, nest(MAX_DEPTH)))),
            Err("too_deep".into())
        );
        // Arguments past 1 MiB, though the message is within its limit.
        let big = format!(r#"{{"s":"{}"}}"#, "a".repeat(1 << 20));
        assert_eq!(kind(&call(&big)), Err("arguments_too_large".into()));
        let exact = format!(r#"{{"s":"{}"}}"#, "a".repeat((1 << 20) - 8));
        assert_eq!(exact.len(), 1 << 20);
        assert!(kind(&call(&exact)).is_ok());
        // The message limit, batches, non-objects, bytes that are not text.
        let (r, id) = admit(call("{}").as_bytes(), 10).unwrap_err();
        assert_eq!((r.code(), id), (-32600, None));
        let (r, _) = admit(format!("[{}]", call("{}")).as_bytes(), 1 << 20).unwrap_err();
        assert_eq!((r.code(), r), (-32600, Refused::Batch));
        assert_eq!(kind("  \n[]"), Err("batch".into()));
        assert_eq!(kind("42"), Err("not_object".into()));
        assert_eq!(kind("\u{FEFF}{}"), Err("not_text".into()));
        assert!(admit(b"{\"a\":\"\xff\"}", 100).is_err());
        // The id of a refused request is answered when it can be read.
        let (r, id) = admit(call(r#"{"x":1,"x":2}"#).as_bytes(), 1 << 20).unwrap_err();
        let resp = error_response(&r, id.as_ref());
        assert_eq!(resp["id"], 7);
        assert_eq!(resp["error"]["code"], -32700);
        assert_eq!(resp["error"]["data"]["refused"], "duplicate_key");
    }
}
