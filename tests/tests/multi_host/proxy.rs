//! A TCP proxy between a host and PostgreSQL that a test can cut (a network
//! partition) and heal.
//!
//! - Forwarding: each connection accepted is forwarded to the server on a
//!   connection of its own.
//! - [`Proxy::cut`]: every forwarded connection is closed on both sides at
//!   once (the server sees its client gone and rolls its open transaction
//!   back; the host's in-flight statement fails), and connections opened
//!   during the cut are accepted and left silent (no byte forwarded, as
//!   packets dropped), until the cut heals; then they are closed.
//! - [`Proxy::stall`]: a silent partition: every forwarded connection
//!   stops forwarding but stays open (bytes the host sends are taken and
//!   never answered, as packets dropped past the proxy), and new ones are
//!   held silent, until the stall heals; then they are closed.
//! - [`Proxy::heal`]: new connections are forwarded again.

use std::time::Duration;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;

/// The proxy (stopped when dropped).
pub struct Proxy {
    /// Its port on 127.0.0.1.
    pub port: u16,
    cut: watch::Sender<bool>,
    stall: watch::Sender<bool>,
    task: tokio::task::JoinHandle<()>,
}

impl Proxy {
    /// Listen on a free port of 127.0.0.1, forwarding to `upstream` (a port
    /// of 127.0.0.1). Must run inside a tokio runtime.
    pub async fn start(upstream: u16) -> Proxy {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let port = listener.local_addr().expect("addr").port();
        let (cut, _) = watch::channel(false);
        let (stall, _) = watch::channel(false);
        let (state, stalled) = (cut.clone(), stall.clone());
        let task = tokio::spawn(async move {
            while let Ok((client, _)) = listener.accept().await {
                tokio::spawn(forward(
                    client,
                    upstream,
                    state.subscribe(),
                    stalled.subscribe(),
                ));
            }
        });
        Proxy {
            port,
            cut,
            stall,
            task,
        }
    }

    /// `url` (a connection string to the server) through the proxy.
    pub fn url(&self, url: &str, upstream: u16) -> String {
        url.replace(&format!(":{upstream}/"), &format!(":{}/", self.port))
    }

    /// Cut: close what is forwarded, hold new connections silent.
    pub fn cut(&self) {
        let _ = self.cut.send(true);
    }

    /// Stall: forward nothing more, close nothing, until healed.
    pub fn stall(&self) {
        let _ = self.stall.send(true);
    }

    /// Heal: forward new connections again (stalled ones are closed).
    pub fn heal(&self) {
        let _ = self.stall.send(false);
        let _ = self.cut.send(false);
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        self.task.abort();
        self.cut();
    }
}

async fn forward(
    mut client: TcpStream,
    upstream: u16,
    mut cut: watch::Receiver<bool>,
    mut stall: watch::Receiver<bool>,
) {
    if *cut.borrow_and_update() {
        // Opened during the cut: nothing answers; closed once it heals.
        let _ = cut.wait_for(|c| !*c).await;
        return;
    }
    if *stall.borrow_and_update() {
        let _ = stall.wait_for(|s| !*s).await;
        return;
    }
    let Ok(Ok(mut server)) = tokio::time::timeout(
        Duration::from_secs(5),
        TcpStream::connect(("127.0.0.1", upstream)),
    )
    .await
    else {
        return;
    };
    let stalled = tokio::select! {
        _ = tokio::io::copy_bidirectional(&mut client, &mut server) => false,
        _ = cut.wait_for(|c| *c) => false,
        _ = stall.wait_for(|s| *s) => true,
    };
    if stalled {
        // Both sides stay open and silent until the stall heals.
        let _ = stall.wait_for(|s| !*s).await;
    }
    // Both sides dropped: closed.
}
