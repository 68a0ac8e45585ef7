//! MCP session ids: 256 random bits from the operating system (rmcp's own
//! are UUID v4, 122 random bits), hex-encoded. Everything else about a
//! session is rmcp's local session manager, which this one wraps. The
//! binding of a session to the caller's credential is in [`super::auth`].

use futures::Stream;
use rmcp::model::{ClientJsonRpcMessage, ServerJsonRpcMessage};
use rmcp::transport::WorkerTransport;
use rmcp::transport::streamable_http_server::SessionManager;
use rmcp::transport::streamable_http_server::session::local::{
    LocalSessionManager, LocalSessionManagerError, LocalSessionWorker, create_local_session,
};
use rmcp::transport::streamable_http_server::session::{ServerSseMessage, SessionId};

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
}

/// rmcp's local session manager with capsaga's session ids.
#[derive(Debug, Default)]
pub struct Sessions {
    inner: LocalSessionManager,
}

impl SessionManager for Sessions {
    type Error = SessionsError;
    type Transport = WorkerTransport<LocalSessionWorker>;

    async fn create_session(&self) -> Result<(SessionId, Self::Transport), Self::Error> {
        let id: SessionId = fresh_id()
            .map_err(|e| SessionsError::Random(e.to_string()))?
            .into();
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
        Ok(self.inner.close_session(id).await?)
    }

    async fn create_stream(
        &self,
        id: &SessionId,
        message: ClientJsonRpcMessage,
    ) -> Result<impl Stream<Item = ServerSseMessage> + Send + Sync + 'static, Self::Error> {
        Ok(self.inner.create_stream(id, message).await?)
    }

    async fn accept_message(
        &self,
        id: &SessionId,
        message: ClientJsonRpcMessage,
    ) -> Result<(), Self::Error> {
        Ok(self.inner.accept_message(id, message).await?)
    }

    async fn create_standalone_stream(
        &self,
        id: &SessionId,
    ) -> Result<impl Stream<Item = ServerSseMessage> + Send + Sync + 'static, Self::Error> {
        Ok(self.inner.create_standalone_stream(id).await?)
    }

    async fn resume(
        &self,
        id: &SessionId,
        last_event_id: String,
    ) -> Result<impl Stream<Item = ServerSseMessage> + Send + Sync + 'static, Self::Error> {
        Ok(self.inner.resume(id, last_event_id).await?)
    }
}
