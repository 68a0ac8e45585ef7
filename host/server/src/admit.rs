//! `/mcp` over HTTP: every POST body goes through the door's admission
//! ([`capsaga_door::dispatch::admit`]) before rmcp parses it (issue 24 item 4 and
//! item 8c). A refused body gets HTTP 400 (413 when over the body limit)
//! with a JSON-RPC error response naming the request's `id` when it could
//! be read; a JSON array (a batch) is refused the same way. Nothing of a
//! refused body is parsed further or logged. An admitted body's routing
//! headers must then say what it says (`super::wire::agree`).

use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::{Method, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use capsaga_door::dispatch::admit::{Refused, admit_message, error_response};
use serde_json::Value;

/// The JSON-RPC error answer to a refused body.
fn refuse(status: StatusCode, r: &Refused, id: Option<&Value>) -> Response {
    (
        status,
        [(header::CONTENT_TYPE, "application/json")],
        error_response(r, id).to_string(),
    )
        .into_response()
}

/// Middleware on `/mcp`: admit each POST body (at most `limit` bytes).
pub async fn guard(State(limit): State<usize>, req: Request, next: Next) -> Response {
    if req.method() != Method::POST {
        return next.run(req).await;
    }
    let (parts, body) = req.into_parts();
    let bytes = match axum::body::to_bytes(body, limit).await {
        Ok(b) => b,
        Err(_) => {
            let r = Refused::TooLarge {
                len: limit.saturating_add(1),
                limit,
            };
            super::mcp::refused::record_unread(&parts.headers, 413);
            return refuse(StatusCode::PAYLOAD_TOO_LARGE, &r, None);
        }
    };
    if let Err((r, id)) = admit_message(&bytes, limit) {
        let status = match r {
            Refused::TooLarge { .. } => StatusCode::PAYLOAD_TOO_LARGE,
            _ => StatusCode::BAD_REQUEST,
        };
        super::mcp::refused::record_unread(&parts.headers, status.as_u16());
        return refuse(status, &r, id.as_ref());
    }
    // The routing headers say what the admitted body says (issue 45 item 3).
    if let Err((r, id)) = super::wire::agree(&parts.headers, &bytes) {
        super::mcp::refused::record_admitted(
            &bytes,
            &parts.headers,
            400,
            super::wire::HEADER_MISMATCH,
        );
        return super::wire::refusal(true, &r, id.as_ref());
    }
    next.run(Request::from_parts(parts, Body::from(bytes)))
        .await
}

/// A REST JSON body admitted by the door's rule
/// ([`capsaga_door::dispatch::admit::admit_body`]: strict JSON, within the body
/// limit) and then read as `T`. A refused body is 400 with
/// `{"detail": {"code": "invalid_json", "message": ...}}` (413 past the body
/// limit, as axum answers).
#[derive(Debug)]
pub struct StrictJson<T>(pub T);

impl<S, T> axum::extract::FromRequest<S> for StrictJson<T>
where
    S: Send + Sync,
    T: serde::de::DeserializeOwned,
{
    type Rejection = Response;

    async fn from_request(req: Request, state: &S) -> Result<Self, Self::Rejection> {
        let bytes = axum::body::Bytes::from_request(req, state)
            .await
            .map_err(IntoResponse::into_response)?;
        strict_body(&bytes).map(StrictJson).map_err(invalid_json)
    }
}

/// `bytes` admitted by the door's rule and read as `T`; why not otherwise.
fn strict_body<T: serde::de::DeserializeOwned>(bytes: &[u8]) -> Result<T, String> {
    let value = capsaga_door::dispatch::admit::admit_body(bytes, super::MAX_MESSAGE_BYTES)
        .map_err(|e| format!("the body is not acceptable JSON: {e}"))?;
    serde_json::from_value(value).map_err(|e| format!("the body does not match the request: {e}"))
}

/// The 400 `invalid_json` answer to a refused body.
fn invalid_json(message: String) -> Response {
    (
        StatusCode::BAD_REQUEST,
        axum::Json(serde_json::json!({"detail": {"code": "invalid_json", "message": message}})),
    )
        .into_response()
}

/// [`StrictJson`] for a route whose body may be left out: an empty body is
/// `None`; any other body is admitted by the same rule (a duplicate key, a
/// body over the limit or one that does not match `T` is refused, never read
/// leniently).
#[derive(Debug)]
pub struct StrictJsonOrEmpty<T>(pub Option<T>);

impl<S, T> axum::extract::FromRequest<S> for StrictJsonOrEmpty<T>
where
    S: Send + Sync,
    T: serde::de::DeserializeOwned,
{
    type Rejection = Response;

    async fn from_request(req: Request, state: &S) -> Result<Self, Self::Rejection> {
        let bytes = axum::body::Bytes::from_request(req, state)
            .await
            .map_err(IntoResponse::into_response)?;
        if bytes.iter().all(u8::is_ascii_whitespace) {
            return Ok(StrictJsonOrEmpty(None));
        }
        strict_body(&bytes)
            .map(|t| StrictJsonOrEmpty(Some(t)))
            .map_err(invalid_json)
    }
}
