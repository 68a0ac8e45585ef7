//! The bearer token (seed 003): with `CAPSAGA_TOKEN` set, every route but
//! `GET /healthz` needs `Authorization: Bearer <token>`, else 401.
//!
//! The comparison is constant time by construction: both the presented
//! and the expected token are hashed (SHA-256, so equal lengths whatever
//! was sent) and the digests compared with `subtle`'s `ConstantTimeEq`,
//! which does not branch on the bytes. No `==` on secrets anywhere.
//!
//! An MCP session is bound to the credential that opened it: the digest of
//! the token of the `initialize` request is kept with the session id the
//! server gave, and a later request naming that session with another
//! credential is answered 404 (no such session), as if the id were unknown.

use axum::extract::{Request, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use sha2::{Digest, Sha256};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use subtle::ConstantTimeEq;

/// The header naming an MCP session.
pub const SESSION_HEADER: &str = "mcp-session-id";

/// Most sessions remembered for the binding (the oldest is forgotten past it).
const MAX_BOUND: usize = 65_536;

/// The server's credential, if any, and the sessions' bindings.
#[derive(Debug, Default)]
pub struct Auth {
    expected: Option<[u8; 32]>,
    bound: Mutex<HashMap<String, [u8; 32]>>,
}

fn digest(s: &[u8]) -> [u8; 32] {
    Sha256::digest(s).into()
}

/// Whether `presented` is the token whose digest is `expected`, in time
/// independent of where they differ.
pub fn matches(expected: &[u8; 32], presented: &[u8]) -> bool {
    bool::from(digest(presented).ct_eq(expected))
}

/// The bearer credential of a request (`Authorization: Bearer <t>`).
fn bearer(headers: &HeaderMap) -> Option<&[u8]> {
    let v = headers.get(header::AUTHORIZATION)?.as_bytes();
    let scheme = v.get(..7)?;
    if !scheme.eq_ignore_ascii_case(b"bearer ") {
        return None;
    }
    v.get(7..)
}

fn unauthorized() -> Response {
    (
        StatusCode::UNAUTHORIZED,
        [(header::WWW_AUTHENTICATE, "Bearer")],
        axum::Json(serde_json::json!({"detail": {"code": "unauthorized", "message": "a valid bearer token is required (Authorization: Bearer <CAPSAGA_TOKEN>)"}})),
    )
        .into_response()
}

impl Auth {
    /// Require `token` (none: every caller is the same, loopback only).
    pub fn new(token: Option<&str>) -> Auth {
        Auth {
            expected: token.map(|t| digest(t.as_bytes())),
            bound: Mutex::new(HashMap::new()),
        }
    }

    /// Whether a token is required.
    pub fn required(&self) -> bool {
        self.expected.is_some()
    }

    /// The caller's credential digest, when it is accepted.
    fn check(&self, headers: &HeaderMap) -> Result<[u8; 32], ()> {
        let presented = bearer(headers).unwrap_or_default();
        match &self.expected {
            None => Ok(digest(b"")),
            Some(e) if matches(e, presented) => Ok(*e),
            Some(_) => Err(()),
        }
    }
}

/// Middleware: the bearer token on every route it wraps.
pub async fn require(State(auth): State<Arc<Auth>>, req: Request, next: Next) -> Response {
    if auth.check(req.headers()).is_err() {
        return unauthorized();
    }
    next.run(req).await
}

/// Middleware for `/mcp`: the token, and the session bound to it.
pub async fn require_bound(State(auth): State<Arc<Auth>>, req: Request, next: Next) -> Response {
    let Ok(who) = auth.check(req.headers()) else {
        return unauthorized();
    };
    let named = req
        .headers()
        .get(SESSION_HEADER)
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned);
    if let Some(id) = &named {
        let known = auth.bound.lock().ok().and_then(|b| b.get(id).copied());
        if let Some(d) = known
            && !bool::from(d.ct_eq(&who))
        {
            return (StatusCode::NOT_FOUND, "no such session").into_response();
        }
    }
    let deleting = req.method() == axum::http::Method::DELETE;
    let res = next.run(req).await;
    if let Some(id) = res
        .headers()
        .get(SESSION_HEADER)
        .and_then(|v| v.to_str().ok())
        && named.is_none()
        && let Ok(mut b) = auth.bound.lock()
    {
        if b.len() >= MAX_BOUND {
            b.clear();
        }
        b.insert(id.to_owned(), who);
    }
    if deleting
        && let Some(id) = named
        && let Ok(mut b) = auth.bound.lock()
    {
        b.remove(&id);
    }
    res
}
