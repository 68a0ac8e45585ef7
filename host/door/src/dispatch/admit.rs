//! Stage 0, admit: the bytes of a call before any surface reads them
//! (issue 24 item 4). The door owns the rule every entry point applies to
//! what arrives raw, so that no surface keeps a copy of its own:
//!
//! | surface | what it hands here |
//! |---|---|
//! | MCP over HTTP (`/mcp`, `serve::admit`) | each POST body, before rmcp parses it |
//! | MCP over stdio (`serve::stdio`) | each line, at most the message limit, before rmcp parses it |
//! | REST (`POST /v1/turns`, decisions) | each JSON body ([`admit_body`]) |
//! | command line, agent loop, plans | their argument text goes to stage 2 as [`super::Args::Text`] ([`capsaga_core::validate::parse_args`]); values as [`super::Args::Value`] ([`capsaga_core::validate::check_args_value`]) |
//!
//! A JSON-RPC message is admitted by [`capsaga_core::jsonrpc::admit`]
//! (size, UTF-8, no batch, strict JSON throughout, and a `tools/call`'s
//! raw arguments under the very rule of stage 2); a refusal is answered
//! with [`capsaga_core::jsonrpc::error_response`] and nothing of the
//! message is logged.

use capsaga_core::json::{JsonError, parse_strict};
pub use capsaga_core::jsonrpc::{Admitted, Refused, admit as admit_message, error_response};
use serde_json::Value;

/// A JSON request body (REST): strict JSON ([`parse_strict`]: duplicate
/// keys at any depth, depth, integers past 64 bits, lone surrogates,
/// prototype-polluting keys refused) within `limit` bytes, UTF-8.
///
/// # Errors
/// [`JsonError`].
pub fn admit_body(bytes: &[u8], limit: usize) -> Result<Value, JsonError> {
    if bytes.len() > limit {
        return Err(JsonError::TooLarge {
            len: bytes.len(),
            limit,
        });
    }
    let text = std::str::from_utf8(bytes)
        .map_err(|e| JsonError::Syntax(format!("the body is not UTF-8 text: {e}")))?;
    parse_strict(text, limit)
}
