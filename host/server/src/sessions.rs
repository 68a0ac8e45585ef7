//! MCP sessions of `capsaga serve`: their ids, their principal and their
//! bound (issue 24 item 5).
//!
//! - Ids are 256 random bits from the operating system (rmcp's own are
//!   UUID v4, 122 random bits), hex-encoded.
//! - Each session is bound to the principal that opened it: a request
//!   naming it with another principal's token is answered 404, as if the
//!   id were unknown ([`bind`]).
//! - Live sessions are bounded globally and per principal
//!   (`capsaga_core::session_table`): at a cap the least recently active
//!   idle session of the principal (or, at the global cap, of the heaviest
//!   principal) is closed to make room; when none can be, the `initialize`
//!   is refused with 429 (per principal) or 503 (server) and a JSON-RPC
//!   error body. A session with a request in flight is busy, never evicted.
//!   The table is the only per-client state of the HTTP layer; a session
//!   leaves it when it is closed (by its client, rmcp's idle timeout, or an
//!   eviction), so it never grows past the cap and is never cleared
//!   wholesale.
//!
//! Everything else about a session is rmcp's local session manager, which
//! [`Sessions`] wraps. The principal reaches [`Sessions::create_session`]
//! (and the session's handler, `super::mcp`) through a task-local set by
//! [`bind`] around the `initialize` request, which rmcp handles in the
//! request's own task.

use capsaga_core::principal::Principal;
use capsaga_core::session_table::{Full, SessionCaps, SessionTable};
use futures::Stream;
use rmcp::model::{ClientJsonRpcMessage, ServerJsonRpcMessage};
use rmcp::transport::WorkerTransport;
use rmcp::transport::streamable_http_server::SessionManager;
use rmcp::transport::streamable_http_server::session::local::{
    LocalSessionManager, LocalSessionManagerError, LocalSessionWorker, create_local_session,
};
use rmcp::transport::streamable_http_server::session::{ServerSseMessage, SessionId};
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};

/// Bytes of randomness in a session id.
pub const SESSION_ID_BYTES: usize = 32;

/// A fresh session id: [`SESSION_ID_BYTES`] random bytes, hex.
///
/// # Errors
/// The operating system's random source failed.
pub fn fresh_id() -> Result<String, getrandom::Error> {
    let mut b = [0u8; SESSION_ID_BYTES];
    getrandom::fill(&mut b)?;
    Ok(hex::encode(b))
}

/// Why a session operation failed.
#[derive(Debug, thiserror::Error)]
pub enum SessionsError {
    /// rmcp's session manager.
    #[error(transparent)]
    Local(#[from] LocalSessionManagerError),
    /// No random id could be drawn.
    #[error("cannot draw a session id: {0}")]
    Random(String),
    /// The caps are reached and nothing can be evicted.
    #[error(transparent)]
    Full(#[from] Full),
    /// `initialize` reached the manager without a principal (a bug).
    #[error("a session cannot be opened without an authenticated principal")]
    NoPrincipal,
}

/// What [`bind`] hands to the `initialize` it wraps, and gets back.
#[derive(Debug)]
pub struct Opening {
    /// The authenticated principal opening the session.
    pub principal: Principal,
    /// Set by [`Sessions::create_session`] when the caps refused it.
    refused: Mutex<Option<Full>>,
}

tokio::task_local! {
    /// The session being opened in this request's task (see [`bind`]).
    pub static OPENING: Arc<Opening>;
}

/// The principal of the session being opened in this task, if any (read
/// by `super::mcp` when rmcp makes the session's handler).
pub fn opening_principal() -> Option<Principal> {
    OPENING.try_with(|o| o.principal.clone()).ok()
}

/// rmcp's local session manager with capsaga's ids, principals and caps.
#[derive(Debug)]
pub struct Sessions {
    inner: LocalSessionManager,
    table: Arc<Mutex<SessionTable>>,
}

impl Default for Sessions {
    fn default() -> Self {
        Sessions::new(SessionCaps::DEFAULT)
    }
}

impl Sessions {
    /// Sessions bounded by `caps`.
    pub fn new(caps: SessionCaps) -> Sessions {
        Sessions {
            inner: LocalSessionManager::default(),
            table: Arc::new(Mutex::new(SessionTable::new(caps))),
        }
    }

    /// Live sessions, and how many of them have a request in flight.
    pub fn counts(&self) -> (usize, usize) {
        self.table
            .lock()
            .map(|t| (t.len(), t.busy()))
            .unwrap_or_default()
    }

    /// Live sessions per principal, most first.
    pub fn per_principal(&self) -> Vec<(String, usize)> {
        self.table
            .lock()
            .map(|t| t.principals())
            .unwrap_or_default()
    }

    /// The caps.
    pub fn caps(&self) -> SessionCaps {
        self.table
            .lock()
            .map(|t| t.caps())
            .unwrap_or(SessionCaps::DEFAULT)
    }

    /// The principal name session `id` is bound to.
    pub fn principal_of(&self, id: &str) -> Option<String> {
        self.table
            .lock()
            .ok()
            .and_then(|t| t.principal_of(id).map(str::to_owned))
    }

    fn touch(&self, id: &str) {
        if let Ok(mut t) = self.table.lock() {
            t.touch(id);
        }
    }

    fn forget(&self, id: &str) {
        if let Ok(mut t) = self.table.lock() {
            t.remove(id);
        }
    }
}

/// A request-wise stream that keeps its session busy until it is dropped
/// (the response sent, or the client gone).
struct Busy<S> {
    inner: Pin<Box<S>>,
    table: Arc<Mutex<SessionTable>>,
    id: String,
}

impl<S> Busy<S> {
    fn new(inner: S, table: Arc<Mutex<SessionTable>>, id: &str) -> Busy<S> {
        if let Ok(mut t) = table.lock() {
            t.set_busy(id, true);
        }
        Busy {
            inner: Box::pin(inner),
            table,
            id: id.to_string(),
        }
    }
}

impl<S> Drop for Busy<S> {
    fn drop(&mut self) {
        if let Ok(mut t) = self.table.lock() {
            t.set_busy(&self.id, false);
        }
    }
}

impl<S: Stream> Stream for Busy<S> {
    type Item = S::Item;
    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<S::Item>> {
        self.inner.as_mut().poll_next(cx)
    }
}

impl SessionManager for Sessions {
    type Error = SessionsError;
    type Transport = WorkerTransport<LocalSessionWorker>;

    async fn create_session(&self) -> Result<(SessionId, Self::Transport), Self::Error> {
        let opening = OPENING
            .try_with(Arc::clone)
            .map_err(|_| SessionsError::NoPrincipal)?;
        let id: SessionId = fresh_id()
            .map_err(|e| SessionsError::Random(e.to_string()))?
            .into();
        let admitted = match self.table.lock() {
            Ok(mut t) => t.admit(&id, &opening.principal.name),
            Err(_) => return Err(SessionsError::NoPrincipal),
        };
        let evicted = match admitted {
            Ok(ev) => ev,
            Err(full) => {
                if let Ok(mut r) = opening.refused.lock() {
                    *r = Some(full.clone());
                }
                return Err(full.into());
            }
        };
        for old in evicted {
            tracing::info!(
                "mcp session cap: closing the least recently active idle session of {} ",
                opening.principal.name
            );
            let old: SessionId = old.into();
            if let Err(e) = self.inner.close_session(&old).await {
                tracing::debug!("closing an evicted session: {e}");
            }
        }
        let (handle, worker) = create_local_session(id.clone(), self.inner.session_config.clone());
        self.inner.sessions.write().await.insert(id.clone(), handle);
        Ok((id, WorkerTransport::spawn(worker)))
    }

    async fn initialize_session(
        &self,
        id: &SessionId,
        message: ClientJsonRpcMessage,
    ) -> Result<ServerJsonRpcMessage, Self::Error> {
        Ok(self.inner.initialize_session(id, message).await?)
    }

    async fn has_session(&self, id: &SessionId) -> Result<bool, Self::Error> {
        Ok(self.inner.has_session(id).await?)
    }

    async fn close_session(&self, id: &SessionId) -> Result<(), Self::Error> {
        self.forget(id);
        Ok(self.inner.close_session(id).await?)
    }

    async fn create_stream(
        &self,
        id: &SessionId,
        message: ClientJsonRpcMessage,
    ) -> Result<impl Stream<Item = ServerSseMessage> + Send + Sync + 'static, Self::Error> {
        let inner = self.inner.create_stream(id, message).await?;
        Ok(Busy::new(inner, self.table.clone(), id))
    }

    async fn accept_message(
        &self,
        id: &SessionId,
        message: ClientJsonRpcMessage,
    ) -> Result<(), Self::Error> {
        self.touch(id);
        Ok(self.inner.accept_message(id, message).await?)
    }

    async fn create_standalone_stream(
        &self,
        id: &SessionId,
    ) -> Result<impl Stream<Item = ServerSseMessage> + Send + Sync + 'static, Self::Error> {
        self.touch(id);
        Ok(self.inner.create_standalone_stream(id).await?)
    }

    async fn resume(
        &self,
        id: &SessionId,
        last_event_id: String,
    ) -> Result<impl Stream<Item = ServerSseMessage> + Send + Sync + 'static, Self::Error> {
        self.touch(id);
        Ok(self.inner.resume(id, last_event_id).await?)
    }
}

/// A JSON-RPC error answer with an HTTP status (the request's id is not
/// known here: `null`).
fn jsonrpc_error(
    status: axum::http::StatusCode,
    code: i64,
    message: String,
) -> axum::response::Response {
    use axum::response::IntoResponse;
    (
        status,
        axum::Json(serde_json::json!({
            "jsonrpc": "2.0", "id": null,
            "error": {"code": code, "message": message},
        })),
    )
        .into_response()
}

/// Middleware for `/mcp`, after `super::auth::require`: a request naming
/// a session must come from the principal the session is bound to (else
/// 404, as for an unknown id); a request opening one runs with the
/// principal in [`OPENING`], and a refusal of the caps becomes 429 or 503
/// with a JSON-RPC error.
pub async fn bind(
    axum::extract::State(sessions): axum::extract::State<Arc<Sessions>>,
    req: axum::extract::Request,
    next: axum::middleware::Next,
) -> axum::response::Response {
    use axum::response::IntoResponse;
    let principal = super::auth::principal_of(req.extensions());
    let named = req
        .headers()
        .get(super::auth::SESSION_HEADER)
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned);
    if let Some(id) = &named {
        if let Some(owner) = sessions.principal_of(id)
            && owner != principal.name
        {
            return (axum::http::StatusCode::NOT_FOUND, "no such session").into_response();
        }
        sessions.touch(id);
        return next.run(req).await;
    }
    let opening = Arc::new(Opening {
        principal,
        refused: Mutex::new(None),
    });
    let res = OPENING.scope(opening.clone(), next.run(req)).await;
    let refused = opening.refused.lock().ok().and_then(|mut r| r.take());
    match refused {
        Some(full @ Full::Principal { .. }) => jsonrpc_error(
            axum::http::StatusCode::TOO_MANY_REQUESTS,
            -32000,
            full.to_string(),
        ),
        Some(full @ Full::Server { .. }) => jsonrpc_error(
            axum::http::StatusCode::SERVICE_UNAVAILABLE,
            -32000,
            full.to_string(),
        ),
        None => res,
    }
}
