//! Responses scrubbed of the host's secrets (issue 45 item 5): a
//! middleware for the routes whose answers show what the host recorded to
//! an operator's eyes rather than return a call's result: the console
//! (`/console`: sagas' arguments and results, log records, traces with the
//! model's answers and the providers' errors, approvals, memory). Every
//! textual body (HTML, JSON, text, an event stream frame by frame) passes
//! through `capsaga_telemetry::secrets::scrub`, the function the log
//! output, the exported spans, the metrics and the audit export use, so a
//! page added later cannot forget it.

use axum::body::{Body, Bytes};
use axum::extract::Request;
use axum::http::{HeaderMap, header};
use axum::middleware::Next;
use axum::response::Response;
use futures::StreamExt as _;

/// Whether a body of these headers may show data, to scrub (`Some(true)`:
/// an event stream): any type but the console's own compiled-in assets
/// (script, style sheet, images, fonts), which show none and are left as
/// they are (a script's `token = ...` is code, not a secret).
fn textual(headers: &HeaderMap) -> Option<bool> {
    let ct = headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
        .to_ascii_lowercase();
    if ct.starts_with("text/event-stream") {
        return Some(true);
    }
    let own_asset = ct.starts_with("text/javascript")
        || ct.starts_with("application/javascript")
        || ct.starts_with("text/css")
        || ct.starts_with("image/")
        || ct.starts_with("font/");
    (!own_asset).then_some(false)
}

/// Middleware: scrub every textual response body (see the module doc).
pub async fn responses(req: Request, next: Next) -> Response {
    let res = next.run(req).await;
    let Some(stream) = textual(res.headers()) else {
        return res;
    };
    let (mut parts, body) = res.into_parts();
    parts.headers.remove(header::CONTENT_LENGTH);
    if stream {
        // Frame by frame: a server-sent event is written whole.
        let frames = body.into_data_stream().map(|chunk| {
            chunk.map(|b| match capsaga_telemetry::secrets::scrub_bytes(&b) {
                std::borrow::Cow::Borrowed(_) => b,
                std::borrow::Cow::Owned(o) => Bytes::from(o),
            })
        });
        return Response::from_parts(parts, Body::from_stream(frames));
    }
    let bytes = match axum::body::to_bytes(body, usize::MAX).await {
        Ok(b) => b,
        Err(_) => return Response::from_parts(parts, Body::empty()),
    };
    let out = match capsaga_telemetry::secrets::scrub_bytes(&bytes) {
        std::borrow::Cow::Borrowed(_) => bytes,
        std::borrow::Cow::Owned(o) => Bytes::from(o),
    };
    Response::from_parts(parts, Body::from(out))
}
