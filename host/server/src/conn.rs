//! Accepting HTTP connections for [`super::serve_http`]: hyper's HTTP/1
//! server on each, with what `axum::serve` does not bound. A client must
//! send a request's headers within [`HEADER_READ_TIMEOUT`] (a slow-loris
//! client that trickles them is disconnected), at most
//! [`MAX_CONNECTIONS`] connections are open at once (the next ones wait in
//! the listen backlog), and a shutdown lets the requests in flight finish
//! for up to [`SHUTDOWN_GRACE`].

use super::ServeError;
use axum::Router;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::server::graceful::GracefulShutdown;
use hyper_util::service::TowerToHyperService;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;
use tokio::net::TcpListener;

/// Time a client has to send a request's headers, from the connection's
/// start or the end of its previous request.
pub const HEADER_READ_TIMEOUT: Duration = Duration::from_secs(10);
/// Connections open at once.
pub const MAX_CONNECTIONS: usize = 1024;
/// How long a shutdown waits for the requests in flight (an MCP event
/// stream stays open until its client leaves: it is cut after this).
pub const SHUTDOWN_GRACE: Duration = Duration::from_secs(10);

/// Serve `app` on `listener` until `shutdown` resolves.
///
/// # Errors
/// [`ServeError::Io`] when the connection limit's semaphore is closed
/// (never in practice). A failed `accept` (too many open files) is logged
/// and retried after a pause.
pub async fn serve(
    listener: TcpListener,
    app: Router,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> Result<(), ServeError> {
    let permits = Arc::new(tokio::sync::Semaphore::new(MAX_CONNECTIONS));
    let graceful = GracefulShutdown::new();
    let mut http = hyper::server::conn::http1::Builder::new();
    http.timer(TokioTimer::new())
        .header_read_timeout(HEADER_READ_TIMEOUT);
    tokio::pin!(shutdown);
    loop {
        let permit = tokio::select! {
            () = &mut shutdown => break,
            p = permits.clone().acquire_owned() => p.map_err(|e| ServeError::Io(e.to_string()))?,
        };
        let stream = tokio::select! {
            () = &mut shutdown => break,
            r = listener.accept() => match r {
                Ok((stream, _)) => stream,
                Err(e) => {
                    tracing::warn!("accept: {e}");
                    tokio::time::sleep(Duration::from_millis(100)).await;
                    continue;
                }
            },
        };
        let _ = stream.set_nodelay(true);
        // No upgrades: nothing here speaks WebSocket; MCP's event streams
        // are plain responses.
        let conn = graceful.watch(
            http.serve_connection(TokioIo::new(stream), TowerToHyperService::new(app.clone())),
        );
        tokio::spawn(async move {
            if let Err(e) = conn.await {
                tracing::debug!("connection: {e}");
            }
            drop(permit);
        });
    }
    drop(listener);
    if tokio::time::timeout(SHUTDOWN_GRACE, graceful.shutdown())
        .await
        .is_err()
    {
        tracing::info!(
            "shutdown: connections still open after {} s are dropped",
            SHUTDOWN_GRACE.as_secs()
        );
    }
    Ok(())
}
