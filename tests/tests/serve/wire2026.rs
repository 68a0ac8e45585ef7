//! What the serve tests share: tokens, a server with them, and (for the
//! stateless-revision tests) reading a JSON-RPC answer from a body.

use super::{Running, start};
use capsaga_core::principal::Role;
use capsaga_door::host::Host;
use capsaga_server::HttpOptions;
use capsaga_server::auth::digest;
use capsaga_tests::TestWorkspace;
use serde_json::Value;
use std::sync::Arc;

/// The bearer token of the client principal `name`.
pub fn secret(name: &str) -> String {
    format!("{name}-secret-0123456789abcdef")
}

/// A server on 127.0.0.1 over `ws`'s host, with a client-role token for
/// each of `clients` ([`secret`]).
pub async fn serve_clients(ws: &TestWorkspace, clients: &[&str]) -> (Arc<Host>, Running) {
    let secrets: Vec<String> = clients.iter().map(|n| secret(n)).collect();
    let tokens: Vec<(&str, Role, &str)> = clients
        .iter()
        .zip(&secrets)
        .map(|(n, s)| (*n, Role::Client, s.as_str()))
        .collect();
    serve_with_tokens(ws, &tokens).await
}

/// A server on 127.0.0.1 over `ws`'s host, with a token for each
/// `(name, role, bearer secret)`.
pub async fn serve_with_tokens(
    ws: &TestWorkspace,
    tokens: &[(&str, Role, &str)],
) -> (Arc<Host>, Running) {
    let host = ws.host().await;
    for (name, role, s) in tokens {
        host.store
            .create_token(name, *role, &digest(s.as_bytes()), "test")
            .await
            .unwrap();
    }
    let srv = start(
        host.clone(),
        HttpOptions::new("127.0.0.1:0".parse().unwrap()),
    )
    .await;
    (host, srv)
}

/// The JSON-RPC answer in a body that is JSON or an SSE stream.
pub fn answer(body: &str) -> Value {
    if let Ok(v) = serde_json::from_str::<Value>(body) {
        return v;
    }
    body.lines()
        .filter_map(|l| l.strip_prefix("data:"))
        .filter_map(|d| serde_json::from_str::<Value>(d.trim()).ok())
        .rfind(|v| v.get("id").is_some())
        .unwrap_or_else(|| panic!("no JSON-RPC answer in {body}"))
}
