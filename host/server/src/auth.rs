//! Who is calling (issue 24 items 1-2): every request to `capsaga serve`
//! but `GET /healthz` is made by an authenticated principal
//! (`capsaga_core::principal`), put into the request's extensions for the
//! handlers, the MCP session and the door.
//!
//! - **Named tokens** (`capsaga tokens create NAME --role client|operator`)
//!   are stored as the SHA-256 of their secret (`capsaga_store::TokenStore`);
//!   a token authenticates as `token:<name>` with its role. A revoked token
//!   authenticates nothing from the next request on (the table is read at
//!   every request).
//! - **`CAPSAGA_TOKEN`** (seed 003) is one operator token,
//!   `env:CAPSAGA_TOKEN`, beside the named ones.
//! - **No token at all** (none configured, none ever created): the server
//!   listens on loopback only and its one caller is `loopback`, an
//!   operator, as before tokens existed. Once a token was created, or the
//!   server listens beyond loopback, a token is always required.
//!
//! The comparison is constant time by construction: the presented secret
//! is hashed once (SHA-256, so equal lengths whatever was sent) and its
//! digest compared with **every** live token's digest with `subtle`'s
//! `ConstantTimeEq`, without stopping at a match; no `==` on secrets
//! anywhere.
//!
//! Role checks: [`require_operator`] answers 403 to a client on operator
//! routes. An MCP session is bound to the principal that opened it
//! ([`super::sessions`]): another principal naming it gets 404.

use axum::extract::{Request, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use capsaga_core::principal::{Action, ENV_TOKEN, LOOPBACK, Principal, Role};
use capsaga_store::Store;
use sha2::{Digest, Sha256};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use subtle::ConstantTimeEq;

/// The header naming an MCP session.
pub const SESSION_HEADER: &str = "mcp-session-id";

/// The server's credentials: `CAPSAGA_TOKEN`'s digest, the store's named
/// tokens, and whether a token is required whatever the store says.
#[derive(Debug)]
pub struct Auth {
    env: Option<[u8; 32]>,
    store: Arc<dyn Store>,
    /// Set when the server listens beyond loopback or has `CAPSAGA_TOKEN`,
    /// and once the store has had a token: never cleared.
    required: AtomicBool,
}

/// SHA-256 of `s`.
pub fn digest(s: &[u8]) -> [u8; 32] {
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

/// A JSON error answer of the REST API.
pub fn detail(status: StatusCode, code: &str, message: impl Into<String>) -> Response {
    (
        status,
        axum::Json(serde_json::json!({"detail": {"code": code, "message": message.into()}})),
    )
        .into_response()
}

fn unauthorized() -> Response {
    let mut r = detail(
        StatusCode::UNAUTHORIZED,
        "unauthorized",
        "a valid bearer token is required (Authorization: Bearer <token>: CAPSAGA_TOKEN or a token from `capsaga tokens create`)",
    );
    r.headers_mut().insert(
        header::WWW_AUTHENTICATE,
        header::HeaderValue::from_static("Bearer"),
    );
    r
}

/// Why a request was not authenticated.
#[derive(Debug)]
pub enum Refused {
    /// No valid token.
    Unauthorized,
    /// The token table could not be read.
    Store(String),
}

impl Refused {
    /// The HTTP answer: 401, or 503 when the store failed.
    pub fn response(&self) -> Response {
        match self {
            Refused::Unauthorized => unauthorized(),
            Refused::Store(e) => detail(
                StatusCode::SERVICE_UNAVAILABLE,
                "store_unavailable",
                format!("cannot read the tokens: {e}"),
            ),
        }
    }
}

impl Auth {
    /// `token` is `CAPSAGA_TOKEN`; `always` requires a token even when none
    /// exists yet (a server listening beyond loopback).
    pub fn new(token: Option<&str>, store: Arc<dyn Store>, always: bool) -> Auth {
        if let Some(t) = token {
            capsaga_telemetry::secrets::remember(t);
        }
        Auth {
            env: token.map(|t| digest(t.as_bytes())),
            required: AtomicBool::new(always || token.is_some()),
            store,
        }
    }

    /// Whether a token is required now.
    ///
    /// # Errors
    /// The store's, as text.
    pub async fn required(&self) -> Result<bool, String> {
        if self.required.load(Ordering::SeqCst) {
            return Ok(true);
        }
        let ever = self
            .store
            .any_token_ever()
            .await
            .map_err(|e| e.to_string())?;
        if ever {
            self.required.store(true, Ordering::SeqCst);
        }
        Ok(ever)
    }

    /// The principal a request authenticates as.
    ///
    /// # Errors
    /// [`Refused`].
    pub async fn authenticate(&self, headers: &HeaderMap) -> Result<Principal, Refused> {
        let presented = digest(bearer(headers).unwrap_or_default());
        let live = self
            .store
            .active_tokens()
            .await
            .map_err(|e| Refused::Store(e.to_string()))?;
        // Every candidate is compared, whichever matches.
        let mut found: Option<Principal> = None;
        if let Some(env) = &self.env
            && bool::from(presented.ct_eq(env))
        {
            found = Some(Principal::new(ENV_TOKEN, Role::Operator));
        }
        for t in &live {
            if bool::from(presented.ct_eq(&t.secret_sha256)) && found.is_none() {
                found = Some(Principal::token(&t.name, t.role));
            }
        }
        if let Some(p) = found {
            // A token that authenticated is one of the host's secrets from
            // now on (never in a log, a span or the console), whatever its
            // shape.
            if let Some(b) = bearer(headers).and_then(|b| std::str::from_utf8(b).ok()) {
                capsaga_telemetry::secrets::remember(b);
            }
            return Ok(p);
        }
        match self.required().await {
            Ok(false) => Ok(Principal::new(LOOPBACK, Role::Operator)),
            Ok(true) => Err(Refused::Unauthorized),
            Err(e) => Err(Refused::Store(e)),
        }
    }
}

impl Auth {
    /// Whether the principal named `name` (one [`Auth::authenticate`]
    /// returned) is still an operator now: a named token still live with
    /// the operator role, `CAPSAGA_TOKEN` when the server has it, or
    /// `loopback` while no token is required. The console re-checks its
    /// sessions with this at every request, so a revoked token's session
    /// ends at once.
    pub async fn is_operator(&self, name: &str) -> bool {
        if name == ENV_TOKEN {
            return self.env.is_some();
        }
        if name == LOOPBACK {
            return matches!(self.required().await, Ok(false));
        }
        let Some(token) = name.strip_prefix("token:") else {
            return false;
        };
        match self.store.active_tokens().await {
            Ok(live) => live
                .iter()
                .any(|t| t.name == token && t.role == Role::Operator),
            Err(_) => false,
        }
    }
}

/// Middleware: authenticate, and put the [`Principal`] into the request's
/// extensions (401 without a valid token).
pub async fn require(State(auth): State<Arc<Auth>>, mut req: Request, next: Next) -> Response {
    match auth.authenticate(req.headers()).await {
        Ok(p) => {
            req.extensions_mut().insert(p);
            next.run(req).await
        }
        Err(r) => r.response(),
    }
}

/// Middleware after [`require`]: 403 unless the principal is an operator.
pub async fn require_operator(req: Request, next: Next) -> Response {
    let ok = req
        .extensions()
        .get::<Principal>()
        .is_some_and(|p| p.may(Action::DecideApproval));
    if !ok {
        return detail(
            StatusCode::FORBIDDEN,
            "forbidden",
            "this route needs an operator token (capsaga tokens create NAME --role operator)",
        );
    }
    next.run(req).await
}

/// The principal [`require`] put into a request's extensions; without
/// one (a route mounted without the middleware: a bug), the least
/// privilege: a client named `unauthenticated` that owns nothing.
pub fn principal_of(extensions: &axum::http::Extensions) -> Principal {
    extensions
        .get::<Principal>()
        .cloned()
        .unwrap_or_else(|| Principal::new("unauthenticated", Role::Client))
}
