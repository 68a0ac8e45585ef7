//! What the HTTP server refuses before any handler runs, on by default:
//!
//! - `Host` not in the allowlist (DNS rebinding: a page of `evil.example`
//!   whose name resolves to 127.0.0.1 reaches a local server with its own
//!   `Host`): 421 on every route (403 on `/mcp`, where rmcp checks it too).
//!   Default: `localhost`, `127.0.0.1`, `[::1]` with any port, and the
//!   address the server is bound to.
//! - `Origin` present and not in the allowlist (a browser page calling the
//!   server): 403. Default: the loopback origins (`http://localhost:*`,
//!   `http://127.0.0.1:*`, `http://[::1]:*`). No CORS headers are ever sent,
//!   so a browser page of another origin cannot read any answer.
//! - Headers larger than [`MAX_HEADER_BYTES`] in total: 431; bodies larger
//!   than the body limit: 413 (axum's `DefaultBodyLimit`, rmcp's
//!   `max_request_body_bytes`).
//! - A request whose response has not started within the request timeout:
//!   504 (an MCP SSE stream, once started, is not cut).

use axum::extract::{Request, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use std::sync::Arc;
use std::time::Duration;

/// Most bytes of request headers (names and values) accepted.
pub const MAX_HEADER_BYTES: usize = 32 * 1024;

/// The allowlists and limits of one server.
#[derive(Debug, Clone)]
pub struct Limits {
    /// Allowed `Host` values: `name` (any port) or `name:port`.
    pub hosts: Vec<String>,
    /// Allowed `Origin` values: `scheme://host:port`, `scheme://host:*`.
    pub origins: Vec<String>,
    /// Time for a response to start.
    pub request_timeout: Duration,
}

/// The default `Host` allowlist, plus `bound` (the server's address).
pub fn default_hosts(bound: &str) -> Vec<String> {
    let mut v: Vec<String> = ["localhost", "127.0.0.1", "[::1]"]
        .into_iter()
        .map(String::from)
        .collect();
    if !v.iter().any(|h| h == bound) {
        v.push(bound.to_string());
    }
    v
}

/// The default `Origin` allowlist: loopback origins, any port.
pub fn default_origins() -> Vec<String> {
    ["http://localhost:*", "http://127.0.0.1:*", "http://[::1]:*"]
        .into_iter()
        .map(String::from)
        .collect()
}

/// `authority` without its port (`[::1]:80` → `[::1]`, `a:1` → `a`).
fn host_part(authority: &str) -> &str {
    if authority.starts_with('[') {
        return authority.find(']').map_or(authority, |i| &authority[..=i]);
    }
    authority.rsplit_once(':').map_or(authority, |(h, _)| h)
}

/// Whether `authority` names a port.
fn has_port(authority: &str) -> bool {
    if authority.starts_with('[') {
        authority.contains("]:")
    } else {
        authority.contains(':')
    }
}

/// Whether `host` (a `Host` header) is allowed by `list`: an entry with a
/// port matches exactly, one without matches any port.
pub fn host_allowed(list: &[String], host: &str) -> bool {
    let host = host.trim().to_ascii_lowercase();
    let bare = host_part(&host);
    list.iter().any(|a| {
        let a = a.to_ascii_lowercase();
        if has_port(&a) { a == host } else { a == bare }
    })
}

/// Whether `origin` (an `Origin` header) is allowed by `list`.
pub fn origin_allowed(list: &[String], origin: &str) -> bool {
    let origin = origin.trim().to_ascii_lowercase();
    list.iter().any(|a| {
        let a = a.to_ascii_lowercase();
        if let Some(prefix) = a.strip_suffix(":*") {
            origin == prefix
                || origin
                    .strip_prefix(prefix)
                    .and_then(|rest| rest.strip_prefix(':'))
                    .is_some_and(|port| {
                        !port.is_empty() && port.bytes().all(|b| b.is_ascii_digit())
                    })
        } else {
            a == origin
        }
    })
}

fn header_bytes(h: &HeaderMap) -> usize {
    h.iter().map(|(k, v)| k.as_str().len() + v.len() + 4).sum()
}

fn refuse(status: StatusCode, code: &str, message: &str) -> Response {
    (
        status,
        axum::Json(serde_json::json!({"detail": {"code": code, "message": message}})),
    )
        .into_response()
}

/// Middleware: the allowlists, the header limit and the request timeout.
pub async fn guard(State(l): State<Arc<Limits>>, req: Request, next: Next) -> Response {
    if header_bytes(req.headers()) > MAX_HEADER_BYTES {
        return refuse(
            StatusCode::REQUEST_HEADER_FIELDS_TOO_LARGE,
            "headers_too_large",
            "request headers too large",
        );
    }
    let host = req
        .headers()
        .get(header::HOST)
        .and_then(|v| v.to_str().ok())
        .or_else(|| req.uri().authority().map(|a| a.as_str()))
        .unwrap_or_default();
    if !host_allowed(&l.hosts, host) {
        let status = if req.uri().path().starts_with("/mcp") {
            StatusCode::FORBIDDEN
        } else {
            StatusCode::MISDIRECTED_REQUEST
        };
        return refuse(
            status,
            "host_not_allowed",
            "this Host is not served here (DNS rebinding protection)",
        );
    }
    if let Some(origin) = req.headers().get(header::ORIGIN) {
        let ok = origin.to_str().is_ok_and(|o| origin_allowed(&l.origins, o));
        if !ok {
            return refuse(
                StatusCode::FORBIDDEN,
                "origin_not_allowed",
                "this Origin is not allowed",
            );
        }
    }
    match tokio::time::timeout(l.request_timeout, next.run(req)).await {
        Ok(res) => res,
        Err(_) => refuse(
            StatusCode::GATEWAY_TIMEOUT,
            "timeout",
            "the request took too long",
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hosts() {
        let l = default_hosts("127.0.0.1:8000");
        assert!(host_allowed(&l, "127.0.0.1:8000"));
        assert!(host_allowed(&l, "127.0.0.1:9"));
        assert!(host_allowed(&l, "localhost"));
        assert!(host_allowed(&l, "[::1]:80"));
        assert!(!host_allowed(&l, "evil.example.com"));
        assert!(!host_allowed(&l, "evil.example.com:8000"));
        assert!(!host_allowed(&l, "127.0.0.1.evil.example"));
        let pinned = vec!["example.com:8443".to_string()];
        assert!(host_allowed(&pinned, "example.com:8443"));
        assert!(!host_allowed(&pinned, "example.com:80"));
        assert!(!host_allowed(&pinned, "example.com"));
    }

    #[test]
    fn origins() {
        let l = default_origins();
        assert!(origin_allowed(&l, "http://localhost:6274"));
        assert!(origin_allowed(&l, "http://127.0.0.1:1"));
        assert!(!origin_allowed(&l, "http://evil.example.com"));
        assert!(!origin_allowed(&l, "http://localhost.evil.example:1"));
        assert!(!origin_allowed(&l, "http://localhost:1x"));
        assert!(!origin_allowed(&l, "null"));
    }
}
