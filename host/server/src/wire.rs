//! The headers every route reads, single and agreeing (issue 45 item 3;
//! the rule is `capsaga_core::routing_headers`):
//!
//! - [`single`], the outermost layer of the whole HTTP app (before the
//!   `Host`/`Origin` allowlists, the token, the console's cookie and
//!   origin checks, rmcp): a routing or authentication header sent twice
//!   (whatever the case of its name), folded into a comma list, empty or
//!   not visible ASCII, a console session cookie sent twice, or a
//!   request-target whose authority is not the `Host`, is answered 400
//!   before anything reads it: a JSON-RPC error (`-32020`, header
//!   mismatch) on `/mcp`, `{"detail": {"code": "bad_header"}}` elsewhere.
//! - [`agree`], called by `super::admit` on each `/mcp` POST body it
//!   admitted: `Mcp-Method`, `Mcp-Name` and `MCP-Protocol-Version` say
//!   what the body says, for every revision (rmcp checks the 2026-07-28
//!   requests only); else 400 with `-32020` naming the request's id.

use axum::extract::Request;
use axum::http::{HeaderMap, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use capsaga_core::routing_headers::{self, HeaderRefusal};
use serde_json::Value;

/// The JSON-RPC error code of a header that contradicts the body or
/// breaks the single-copy rule (MCP's `HeaderMismatch`).
pub const HEADER_MISMATCH: i64 = -32020;

/// Whether the request's headers and target keep the single-copy rule.
///
/// # Errors
/// [`HeaderRefusal`].
pub fn check(req: &Request) -> Result<(), HeaderRefusal> {
    let headers = req.headers();
    routing_headers::single(headers.iter().map(|(k, v)| (k.as_str(), v.as_bytes())))?;
    routing_headers::target_agrees(
        req.uri().authority().map(|a| a.as_str()),
        headers.get(header::HOST).map(|v| v.as_bytes()),
    )
}

/// The 400 answer: a JSON-RPC error on `/mcp` (with `id` when known), the
/// REST shape elsewhere.
pub fn refusal(mcp: bool, r: &HeaderRefusal, id: Option<&Value>) -> Response {
    if mcp {
        return (
            StatusCode::BAD_REQUEST,
            axum::Json(serde_json::json!({
                "jsonrpc": "2.0",
                "id": id.cloned().unwrap_or(Value::Null),
                "error": {"code": HEADER_MISMATCH, "message": r.to_string()},
            })),
        )
            .into_response();
    }
    super::auth::detail(StatusCode::BAD_REQUEST, "bad_header", r.to_string())
}

/// Middleware on the whole app: [`check`], else 400.
pub async fn single(req: Request, next: Next) -> Response {
    if let Err(r) = check(&req) {
        let mcp = req.uri().path().starts_with("/mcp");
        if mcp {
            super::mcp::refused::record_unread(req.headers(), 400);
        }
        return refusal(mcp, &r, None);
    }
    next.run(req).await
}

/// Whether the routing headers of an `/mcp` POST say what its admitted
/// `body` says ([`routing_headers::agree`]); the body is read only when
/// one of them is present.
///
/// # Errors
/// [`HeaderRefusal`], with the request's id when the body has one.
pub fn agree(headers: &HeaderMap, body: &[u8]) -> Result<(), (HeaderRefusal, Option<Value>)> {
    let present = ["mcp-method", "mcp-name", "mcp-protocol-version"]
        .iter()
        .any(|n| headers.contains_key(*n));
    if !present {
        return Ok(());
    }
    // Admitted as strict JSON already.
    let message: Value = serde_json::from_slice(body).unwrap_or(Value::Null);
    let value = |name: &str| {
        headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .map(str::trim)
    };
    routing_headers::agree(value, &message).map_err(|r| (r, message.get("id").cloned()))
}
