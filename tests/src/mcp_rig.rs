//! A real `capsaga serve` in the test's process (127.0.0.1, a free port)
//! and rmcp's client connected to it over Streamable HTTP, for the server
//! tests (`tests/tests/serve/`) and the neuron tests that watch a running
//! server.

use capsaga_door::host::Host;
use capsaga_server::{HttpOptions, serve_http};
use rmcp::model::{CallToolRequestParams, CallToolResult};
use rmcp::service::RunningService;
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::{ClientHandler, RoleClient, ServiceExt};
use serde_json::Value;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

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

    /// Another server of the test's, at `addr`, ended by `stop`.
    pub fn stopped_by(addr: SocketAddr, stop: tokio::sync::oneshot::Sender<()>) -> Running {
        Running {
            addr,
            stop: Some(stop),
        }
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
    o.listen = "127.0.0.1:0".parse().expect("an address");
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

/// rmcp's client with `handler`, connected to the MCP endpoint `url`
/// (plain HTTP, no idle pooling, as rmcp's default).
pub async fn connect<H: ClientHandler>(url: String, handler: H) -> RunningService<RoleClient, H> {
    connect_as(url, None, handler)
        .await
        .expect("the client connects")
}

/// [`connect`] with a bearer token (`None`: none); the error of a refused
/// connection as text.
///
/// # Errors
/// The handshake's error.
pub async fn connect_as<H: ClientHandler>(
    url: String,
    token: Option<&str>,
    handler: H,
) -> Result<RunningService<RoleClient, H>, String> {
    let http = http_builder()
        .pool_max_idle_per_host(0)
        .build()
        .expect("an HTTP client");
    let mut config = StreamableHttpClientTransportConfig::with_uri(url);
    if let Some(t) = token {
        config = config.auth_header(t);
    }
    let transport = StreamableHttpClientTransport::with_client(http, config);
    handler.serve(transport).await.map_err(|e| e.to_string())
}

/// A client that declares elicitation and answers every elicitation
/// "accept, approve: true" (a client trying to approve its own calls),
/// counting the elicitations and keeping the log messages it is sent.
#[derive(Clone, Default)]
pub struct YesMan {
    /// Elicitations received.
    pub asked: Arc<AtomicUsize>,
    /// `notifications/message` data received.
    pub told: Arc<std::sync::Mutex<Vec<Value>>>,
}

impl ClientHandler for YesMan {
    fn get_info(&self) -> rmcp::model::ClientConfig {
        serde_json::from_value(serde_json::json!({
            "protocolVersion": "2025-11-25",
            "capabilities": {"elicitation": {}},
            "clientInfo": {"name": "operator", "version": "1"},
        }))
        .expect("client info")
    }

    async fn create_elicitation(
        &self,
        _request: rmcp::model::ElicitRequestParams,
        _context: rmcp::service::RequestContext<RoleClient>,
    ) -> Result<rmcp::model::ElicitResult, rmcp::ErrorData> {
        self.asked.fetch_add(1, Ordering::SeqCst);
        Ok(serde_json::from_value(
            serde_json::json!({"action": "accept", "content": {"approve": true}}),
        )
        .expect("elicit result"))
    }

    #[allow(deprecated)]
    async fn on_logging_message(
        &self,
        params: rmcp::model::LoggingMessageNotificationParam,
        _context: rmcp::service::NotificationContext<RoleClient>,
    ) {
        if let Ok(mut t) = self.told.lock() {
            t.push(params.data);
        }
    }
}

/// Call `tool` with the object `args` and return the result, error or not
/// (panics only on a protocol error).
pub async fn call<H: ClientHandler>(
    client: &RunningService<RoleClient, H>,
    tool: &str,
    args: &Value,
) -> CallToolResult {
    client
        .call_tool(
            CallToolRequestParams::new(tool.to_string())
                .with_arguments(args.as_object().cloned().unwrap_or_default()),
        )
        .await
        .expect("the call is answered")
}

/// Call `tool` with the object `args`; panics on a protocol error or an
/// `isError` result.
pub async fn call_ok<H: ClientHandler>(
    client: &RunningService<RoleClient, H>,
    tool: &str,
    args: &Value,
) -> CallToolResult {
    let r = client
        .call_tool(
            CallToolRequestParams::new(tool.to_string())
                .with_arguments(args.as_object().cloned().unwrap_or_default()),
        )
        .await
        .expect("the call is answered");
    assert_ne!(r.is_error, Some(true), "{tool}: {:?}", r.content);
    r
}

/// A client handler counting `notifications/tools/list_changed`.
#[derive(Clone, Default)]
pub struct ListChanged {
    /// Notifications received.
    pub changed: Arc<AtomicUsize>,
}

impl ListChanged {
    /// Notifications received so far.
    pub fn count(&self) -> usize {
        self.changed.load(Ordering::SeqCst)
    }
}

impl ClientHandler for ListChanged {
    async fn on_tool_list_changed(&self, _context: rmcp::service::NotificationContext<RoleClient>) {
        self.changed.fetch_add(1, Ordering::SeqCst);
    }
}

/// The reload counters of the server at `base` (`GET /healthz`: `reload`:
/// `checks`, `generation`, `refused`).
pub async fn reload_stats(base: &str) -> Value {
    let body: Value = http()
        .get(format!("{base}/healthz"))
        .send()
        .await
        .expect("GET /healthz")
        .json()
        .await
        .expect("JSON");
    body["reload"].clone()
}

/// Wait until the server at `base` has counted more than `n` of `field`
/// (`checks`, `generation`, `refused`): its watcher saw what the test did,
/// whatever it made of it. Returns the count seen.
pub async fn stat_after(base: &str, field: &str, n: u64) -> u64 {
    let what = format!("/healthz reload.{field} > {n}");
    let last = std::sync::atomic::AtomicU64::new(0);
    crate::wait_until_async(&what, || async {
        let v = reload_stats(base).await[field].as_u64().unwrap_or(0);
        last.store(v, std::sync::atomic::Ordering::SeqCst);
        v > n
    })
    .await;
    last.into_inner()
}
