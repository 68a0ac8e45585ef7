//! The span of each MCP request served (issue 30): `{mcp.method.name}
//! {target}` (kind server, `capsaga_telemetry::spans::mcp`), around the
//! handler, so the `execute_tool` span of a `tools/call` is its child. The
//! request's arguments are never attributes.
//!
//! Every request the handler answers has one ([`super::server`]): the
//! session's lifecycle (`initialize`, `ping`, `server/discover`,
//! `logging/setLevel`, `subscriptions/listen`), tools, resources,
//! templates, subscriptions, prompts, completion and `tasks/*`. A request
//! rmcp refuses over HTTP before the handler sees it gets its span from
//! [`super::refused`] (the handler's span marks the HTTP request as
//! handled: [`super::refused::Handled`]); over stdio, the transport
//! marks each request it hands to rmcp the same way, and gives an error
//! answer to an unmarked one its span (`serve::stdio`).
//!
//! The client's W3C trace context in `params._meta.traceparent` /
//! `tracestate` (the MCP semantic conventions' propagation), else over
//! Streamable HTTP in the request's `traceparent` / `tracestate` headers
//! (W3C Trace Context, as HTTP instrumentation sends it), makes the span a
//! child of the client's span; a malformed one is ignored.

use capsaga_telemetry::spans::{self, McpTarget};
use rmcp::service::RequestContext;
use rmcp::{ErrorData as McpError, RoleServer};
use std::future::Future;
use tracing::{Instrument, Span};

/// The span of one request of `method` about `target`, before it is
/// entered: its id, transport, protocol version, session and the client's
/// trace context.
pub(super) fn span(
    method: &str,
    target: McpTarget<'_>,
    context: &RequestContext<RoleServer>,
) -> Span {
    let id = serde_json::to_string(&context.id).unwrap_or_default();
    let http = context.extensions.get::<http::request::Parts>();
    // Over HTTP the mark is on the HTTP request; over stdio on the message.
    let mark = http
        .and_then(|p| p.extensions.get::<super::refused::Handled>())
        .or_else(|| context.extensions.get::<super::refused::Handled>());
    if let Some(h) = mark {
        h.set();
    }
    let transport = if http.is_some() { "tcp" } else { "pipe" };
    let span = spans::mcp(method, target, id.trim_matches('"'), transport);
    // The request's own (stateless), the HTTP session's negotiated one,
    // else the one the client asked for at `initialize`.
    let version = context
        .meta
        .protocol_version()
        .map(|v| v.as_str().to_string())
        .or_else(|| header(http, "mcp-protocol-version").map(str::to_string))
        .or_else(|| context.protocol_version().map(|v| v.as_str().to_string()));
    if let Some(v) = version {
        span.record("mcp.protocol.version", spans::bounded(&v));
    }
    if let Some(s) = header(http, "mcp-session-id") {
        span.record("mcp.session.id", spans::bounded(s));
    }
    // The request's own context first; the HTTP request's otherwise (a
    // `tracestate` only goes with the `traceparent` it came with).
    let joined = http.and_then(|p| tracestate(&p.headers));
    let (parent, state) = match meta(context, "traceparent") {
        Some(p) => (Some(p), meta(context, "tracestate")),
        None => (header(http, "traceparent"), joined.as_deref()),
    };
    capsaga_telemetry::propagation::remote_parent(&span, parent, state);
    span
}

/// The request's `params._meta[key]`, when it is text.
fn meta<'a>(context: &'a RequestContext<RoleServer>, key: &str) -> Option<&'a str> {
    context.meta.get(key).and_then(|v| v.as_str())
}

/// The `tracestate` headers of a request, joined (W3C Trace Context: a
/// list that may come in several headers, read whole).
pub(super) fn tracestate(headers: &http::HeaderMap) -> Option<String> {
    let parts: Vec<&str> = headers
        .get_all("tracestate")
        .iter()
        .filter_map(|v| v.to_str().ok())
        .collect();
    (!parts.is_empty()).then(|| parts.join(","))
}

/// The HTTP request's header `name`, as text (the routing headers it is
/// asked for are single: `serve::wire`).
fn header<'a>(http: Option<&'a http::request::Parts>, name: &str) -> Option<&'a str> {
    http.and_then(|p| p.headers.get(name))
        .and_then(|v| v.to_str().ok())
}

/// Run `fut`, the handler of `method` (about `target`), in its span, and
/// record a JSON-RPC error's code as `error.type` and
/// `rpc.response.status_code`.
pub(super) async fn traced<T>(
    method: &str,
    target: McpTarget<'_>,
    context: &RequestContext<RoleServer>,
    fut: impl Future<Output = Result<T, McpError>>,
) -> Result<T, McpError> {
    within(span(method, target, context), fut).await
}

/// Run `fut` in `span` (from [`span`]) and record its error, if any.
async fn within<T>(
    span: Span,
    fut: impl Future<Output = Result<T, McpError>>,
) -> Result<T, McpError> {
    let result = fut.instrument(span.clone()).await;
    if let Err(e) = &result {
        let code = e.code.0.to_string();
        span.record("rpc.response.status_code", code.as_str());
        spans::fail(&span, &code);
    }
    result
}

/// [`traced`] for a request naming the resource `uri`: recorded as
/// `mcp.resource.uri` once it was served (a URI the server does not know
/// stays out of the telemetry).
pub(super) async fn traced_resource<T>(
    method: &str,
    uri: &str,
    context: &RequestContext<RoleServer>,
    fut: impl Future<Output = Result<T, McpError>>,
) -> Result<T, McpError> {
    let span = span(method, McpTarget::None, context);
    let result = within(span.clone(), fut).await;
    if result.is_ok() {
        spans::mcp_resource(&span, uri);
    }
    result
}
