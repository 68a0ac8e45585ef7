//! The span of an MCP request refused before any handler saw it (issue
//! 30): one rmcp refuses itself (headers that contradict the body, an
//! unsupported protocol version, missing per-request `_meta`, an unknown
//! session), or a body the door does not admit (`serve::admit`: not strict
//! JSON, too large; its span is named `_OTHER`, since nothing of a refused
//! body is parsed, see [`record_unread`]). Such a request gets the same `{mcp.method.name}` span
//! as a served one (kind server, [`capsaga_telemetry::spans::mcp`]), failed
//! with `error.type` = the JSON-RPC error code of the answer, else its HTTP
//! status; the client's trace context (`params._meta`, else the HTTP
//! headers) is its parent, as for a served request.
//!
//! How a refusal is told from an answer: the middleware marks the HTTP
//! request ([`Handled`], carried into the handler's `RequestContext` with
//! the request's parts); [`super::observe::span`] sets the mark when a
//! handler opens its span. An answer whose request was not marked, that is
//! an error (a status other than 2xx, or a JSON body holding `error`), is a
//! refusal. A streamed (SSE) answer is never taken for one: its handler may
//! not have started yet when the response begins.
//!
//! The method name comes from the body only when it is one of the
//! protocol's (else `_OTHER`, as OpenTelemetry's HTTP conventions name an
//! unknown method): a hostile body cannot mint span names.

use axum::body::Body;
use axum::extract::Request;
use axum::http::{HeaderMap, Method, header};
use axum::middleware::Next;
use axum::response::Response;
use capsaga_telemetry::spans::{self, McpTarget};
use serde_json::Value;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

/// The mark a handler sets on its HTTP request when it opens its span.
#[derive(Clone, Debug, Default)]
pub struct Handled(Arc<AtomicBool>);

impl Handled {
    /// A handler served the request.
    pub fn set(&self) {
        self.0.store(true, Ordering::Relaxed);
    }

    /// Whether a handler served it.
    pub fn is_set(&self) -> bool {
        self.0.load(Ordering::Relaxed)
    }
}

/// Largest request or answer body this middleware looks into, bytes (the
/// request's was already bounded by the server's body limit; larger
/// answers are streamed through unread).
const MAX_PEEK_BYTES: usize = 64 * 1024;

/// The methods of the protocol's revisions (2025-11-25 and 2026-07-28,
/// with the tasks extension): the only names a refused request's span
/// takes from its body.
const METHODS: &[&str] = &[
    "initialize",
    "ping",
    "server/discover",
    "tools/list",
    "tools/call",
    "resources/list",
    "resources/read",
    "resources/templates/list",
    "resources/subscribe",
    "resources/unsubscribe",
    "prompts/list",
    "prompts/get",
    "completion/complete",
    "logging/setLevel",
    "subscriptions/listen",
    "tasks/get",
    "tasks/list",
    "tasks/result",
    "tasks/update",
    "tasks/cancel",
    "notifications/initialized",
    "notifications/cancelled",
    "notifications/progress",
    "notifications/roots/list_changed",
];

/// Middleware on `/mcp`, inside the door's admission (the body is already
/// read and bounded): gives a POST rmcp refuses its span (see the module
/// doc).
pub async fn refusals(mut req: Request, next: Next) -> Response {
    if req.method() != Method::POST {
        return next.run(req).await;
    }
    let handled = Handled::default();
    req.extensions_mut().insert(handled.clone());
    let headers = req.headers().clone();
    let (parts, body) = req.into_parts();
    // Already read and bounded by the admission outside.
    let Ok(bytes) = axum::body::to_bytes(body, usize::MAX).await else {
        return next.run(Request::from_parts(parts, Body::empty())).await;
    };
    let response = next
        .run(Request::from_parts(parts, Body::from(bytes.clone())))
        .await;
    if handled.is_set() || is_stream(response.headers()) {
        return response;
    }
    let status = response.status();
    let json = response
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|t| t.starts_with("application/json"));
    let small = response
        .headers()
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok()?.parse::<usize>().ok())
        .is_some_and(|n| n <= MAX_PEEK_BYTES);
    if !(json && small) {
        // Not an answer to look into: an error status alone says refused.
        if !status.is_success() {
            record(&bytes, &headers, status.as_u16(), None);
        }
        return response;
    }
    let (parts, body) = response.into_parts();
    // Within its announced length: cannot fail but by a broken body.
    let answer = axum::body::to_bytes(body, MAX_PEEK_BYTES)
        .await
        .unwrap_or_default();
    let code = serde_json::from_slice::<Value>(&answer)
        .ok()
        .and_then(|v| v.pointer("/error/code").and_then(Value::as_i64));
    if !status.is_success() || code.is_some() {
        record(&bytes, &headers, status.as_u16(), code);
    }
    Response::from_parts(parts, Body::from(answer))
}

fn is_stream(headers: &HeaderMap) -> bool {
    headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|t| t.starts_with("text/event-stream"))
}

/// The request's method when it is one of the protocol's.
fn known_method(request: &Value) -> &'static str {
    let asked = request.get("method").and_then(Value::as_str);
    asked
        .and_then(|m| METHODS.iter().find(|k| **k == m).copied())
        .unwrap_or("_OTHER")
}

/// Emit the span of a request the door refused without reading its body
/// (`serve::admit`).
pub fn record_unread(headers: &HeaderMap, status: u16) {
    record(b"", headers, status, None);
}

/// Emit the span of a request whose body was admitted but refused before
/// any handler (its routing headers say another request than the body:
/// `wire::agree`): named and parented from the body, as rmcp's own
/// refusals are, failed with the JSON-RPC `code` of the answer.
pub fn record_admitted(body: &[u8], headers: &HeaderMap, status: u16, code: i64) {
    record(body, headers, status, Some(code));
}

/// Emit the span of one refused HTTP request.
fn record(body: &[u8], headers: &HeaderMap, status: u16, code: Option<i64>) {
    let request = serde_json::from_slice::<Value>(body).unwrap_or(Value::Null);
    Asked::read(&request, Some(headers)).refused("tcp", Some(status), code);
}

/// What the span of a refused request says of it, read from its body (and,
/// over HTTP, its headers) when it is answered: the method (one of the
/// protocol's, else `_OTHER`), the id, the protocol version, the session
/// and the client's trace context, each bounded.
#[derive(Debug, Clone, Default)]
pub struct Asked {
    method: &'static str,
    id: String,
    version: Option<String>,
    session: Option<String>,
    parent: Option<String>,
    state: Option<String>,
}

impl Asked {
    /// Read `request` (any JSON; `Value::Null` when it was not read) and
    /// the HTTP `headers` if any: `params._meta` first, the headers else.
    pub fn read(request: &Value, headers: Option<&HeaderMap>) -> Asked {
        let header = |name: &str| {
            headers
                .and_then(|h| h.get(name))
                .and_then(|v| v.to_str().ok())
        };
        let meta = |key: &str| {
            request
                .pointer("/params/_meta")
                .and_then(|m| m.get(key))
                .and_then(Value::as_str)
        };
        let id = match request.get("id") {
            Some(Value::String(s)) => spans::bounded(s).to_string(),
            Some(Value::Number(n)) => n.to_string(),
            _ => String::new(),
        };
        let joined = headers.and_then(super::observe::tracestate);
        let (parent, state) = match meta("traceparent") {
            Some(p) => (Some(p), meta("tracestate")),
            None => (header("traceparent"), joined.as_deref()),
        };
        let own = |v: Option<&str>| v.map(|v| spans::bounded(v).to_string());
        Asked {
            method: known_method(request),
            id,
            version: own(meta("io.modelcontextprotocol/protocolVersion")
                .or_else(|| header("mcp-protocol-version"))),
            session: own(header("mcp-session-id")),
            parent: own(parent),
            state: own(state),
        }
    }

    /// Emit its span over `transport` (`tcp`, `pipe`), failed with
    /// `error.type` = the answer's JSON-RPC error `code` (also its
    /// `rpc.response.status_code`), else its HTTP `status`, else `_OTHER`.
    pub fn refused(&self, transport: &'static str, status: Option<u16>, code: Option<i64>) {
        let span = spans::mcp(self.method, McpTarget::None, &self.id, transport);
        if let Some(v) = &self.version {
            span.record("mcp.protocol.version", v.as_str());
        }
        if let Some(s) = &self.session {
            span.record("mcp.session.id", s.as_str());
        }
        capsaga_telemetry::propagation::remote_parent(
            &span,
            self.parent.as_deref(),
            self.state.as_deref(),
        );
        let kind = match (code, status) {
            (Some(c), _) => {
                let c = c.to_string();
                span.record("rpc.response.status_code", c.as_str());
                c
            }
            (None, Some(s)) => s.to_string(),
            (None, None) => "_OTHER".to_string(),
        };
        spans::fail(&span, &kind);
        // The span ends here: the request is answered.
        drop(span);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn only_the_protocols_method_names_name_a_span() {
        assert_eq!(known_method(&json!({"method": "tools/call"})), "tools/call");
        for hostile in [
            json!({"method": "tools/call\u{0}x"}),
            json!({"method": "x".repeat(10_000)}),
            json!({"method": 7}),
            json!({"id": 1}),
            json!([{"method": "tools/call"}]),
        ] {
            assert_eq!(known_method(&hostile), "_OTHER", "{hostile}");
        }
    }
}
