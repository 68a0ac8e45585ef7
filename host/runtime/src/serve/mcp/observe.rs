//! The span of each MCP request served (issue 30): `{mcp.method.name}
//! {target}` (kind server, `capsaga_telemetry::spans::mcp`), around the
//! handler, so the `execute_tool` span of a `tools/call` is its child. The
//! request's arguments are never attributes.

use rmcp::service::RequestContext;
use rmcp::{ErrorData as McpError, RoleServer};
use std::future::Future;
use tracing::Instrument;

/// Run `fut`, the handler of `method` (naming `tool` for `tools/call`), in
/// its span, and record a JSON-RPC error's code as `error.type` and
/// `rpc.response.status_code`.
pub(super) async fn traced<T>(
    method: &str,
    tool: Option<&str>,
    context: &RequestContext<RoleServer>,
    fut: impl Future<Output = Result<T, McpError>>,
) -> Result<T, McpError> {
    let id = serde_json::to_string(&context.id).unwrap_or_default();
    let http = context.extensions.get::<http::request::Parts>();
    let transport = if http.is_some() { "tcp" } else { "pipe" };
    let span = capsaga_telemetry::spans::mcp(method, tool, id.trim_matches('"'), transport);
    if let Some(v) = http.and_then(|p| p.headers.get("mcp-protocol-version"))
        && let Ok(v) = v.to_str()
    {
        span.record("mcp.protocol.version", capsaga_telemetry::spans::bounded(v));
    }
    let result = fut.instrument(span.clone()).await;
    if let Err(e) = &result {
        let code = e.code.0.to_string();
        span.record("rpc.response.status_code", code.as_str());
        capsaga_telemetry::spans::fail(&span, &code);
    }
    result
}
