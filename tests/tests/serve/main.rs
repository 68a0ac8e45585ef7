//! capsaga as a server (issue 15): the REST API with a real HTTP client,
//! real MCP clients (the official Python SDK over stdio and Streamable HTTP,
//! rmcp's client for the load), 200 concurrent MCP calls, and SIGKILL of the
//! server under that load. Every server here is a real one on 127.0.0.1
//! over a real workspace (components, SQLite file).

mod clients;
mod crash;
mod load;
mod resources;
mod rest;

use capsaga_host::host::Host;
use capsaga_host::serve::{HttpOptions, serve_http};
use std::net::SocketAddr;
use std::sync::Arc;

/// A server running in this process until dropped.
pub struct Running {
    /// Its address.
    pub addr: SocketAddr,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
}

impl Running {
    /// `http://<addr><path>`.
    pub fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.addr)
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        if let Some(s) = self.stop.take() {
            let _ = s.send(());
        }
    }
}

/// Start `capsaga serve` in-process on 127.0.0.1 (a free port).
pub async fn start(host: Arc<Host>, mut o: HttpOptions) -> Running {
    o.listen = "127.0.0.1:0".parse().unwrap();
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let (tx, rx) = tokio::sync::oneshot::channel();
    tokio::spawn(async move {
        let r = serve_http(
            host,
            &o,
            async move {
                let _ = stopped.await;
            },
            move |a| {
                let _ = tx.send(a);
            },
        )
        .await;
        if let Err(e) = r {
            eprintln!("server: {e}");
        }
    });
    let addr = rx.await.expect("the server starts");
    Running {
        addr,
        stop: Some(stop),
    }
}

/// A plain HTTP client's builder.
pub fn http_builder() -> reqwest::ClientBuilder {
    let _ = rustls::crypto::ring::default_provider().install_default();
    reqwest::Client::builder().no_proxy()
}

/// A plain HTTP client.
pub fn http() -> reqwest::Client {
    http_builder().build().expect("an HTTP client")
}
