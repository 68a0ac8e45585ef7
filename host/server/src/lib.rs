//! # capsaga-server
//!
//! capsaga as a server (DESIGN §8b): an MCP server over stdio
//! (`capsaga mcp`) and over Streamable HTTP at `/mcp`, beside the runtime
//! REST API of seed 003 and the operator console (`capsaga serve`). Every
//! entry submits its calls through the one dispatch door (`capsaga-door`),
//! like the CLI and the agent loop (`capsaga-agent`, which runs the REST
//! API's turns); nothing here runs a tool or writes the log itself. It
//! depends on the door, the agent, the store, the console and rmcp/axum;
//! never on the sandbox or the binary. The MCP conformance suite's fixtures
//! are not here: `capsaga-conformance` plugs them in through
//! [`mcp::extension`].
//!
//! - [`mcp`]: the MCP handler (rmcp), one saga per session.
//! - [`tools`]: tool definitions and results as MCP shapes.
//! - [`resources`]: sagas and traces as MCP resources; [`views`]: what
//!   REST and MCP show of them.
//! - [`catalog`]: `notifications/tools/list_changed` when neurons are
//!   activated or retired, or the host reloaded, while the server runs.
//! - [`live`]: the host generation served, reloaded on SIGHUP or when the
//!   policy or the tools directory changed.
//! - [`rest`]: the REST routes; [`operator`]: the operator's routes (the
//!   kill switch, sealed keys).
//! - [`console`]: the operator web console at `/console` (the
//!   `capsaga-console` crate over the store and the door), its answers
//!   scrubbed of the host's secrets ([`scrubbed`]).
//! - [`auth`]: principals from named tokens and `CAPSAGA_TOKEN`
//!   (constant-time), 403 for clients on operator routes.
//! - [`sessions`]: MCP sessions bound to their principal, bounded globally
//!   and per principal (idle ones evicted least recently used first).
//! - [`conn`]: accepting connections (header-read timeout, connection
//!   limit, graceful shutdown).
//! - [`limits`]: `Host`/`Origin` allowlists, header and body limits,
//!   timeouts.
//! - [`wire`]: every routing and authentication header sent once and, on
//!   `/mcp`, saying what the body says (the outermost layer).
//! - [`admit`], [`stdio`]: every MCP message (an HTTP body, a stdio line)
//!   admitted by the dispatch door's rule (`capsaga_door::dispatch::admit`:
//!   strict JSON, size limits, no batch) before rmcp reads it.
//!
//! Without a token the HTTP server refuses to bind anything but a loopback
//! address.

#![warn(missing_docs)]

pub(crate) mod admit;
pub mod auth;
pub(crate) mod catalog;
pub(crate) mod cluster;
pub mod conn;
pub mod console;
pub mod console_data;
pub mod console_flow;
pub(crate) mod limits;
pub(crate) mod live;
pub mod mcp;
pub(crate) mod operator;
pub(crate) mod resources;
pub mod rest;
pub(crate) mod rest_memory;
pub mod scrubbed;
pub mod sessions;
pub(crate) mod stdio;
pub mod tools;
pub(crate) mod views;
pub mod wire;

use axum::Router;
use axum::routing::{get, post};
use capsaga_core::policy::Autonomy;
use capsaga_core::principal::{Principal, Role};
use capsaga_core::session_table::SessionCaps;
use capsaga_door::dispatch::AbandonedEnd;
use capsaga_door::host::Host;
use mcp::{McpSession, McpShared, SessionEnd};
use rmcp::ServiceExt;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

/// Why a server could not run.
#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    /// A non-loopback address without a token.
    #[error(
        "refusing to listen on {0} without a token: create one (`capsaga tokens create NAME --role operator`) or set CAPSAGA_TOKEN (every route but GET /healthz then needs `Authorization: Bearer <token>`), or listen on 127.0.0.1"
    )]
    NeedsToken(SocketAddr),
    /// The token is empty or too short.
    #[error("CAPSAGA_TOKEN must be at least 16 characters")]
    WeakToken,
    /// The address could not be bound.
    #[error("cannot listen on {addr}: {error}")]
    Bind {
        /// The address.
        addr: SocketAddr,
        /// The OS error.
        error: std::io::Error,
    },
    /// The server failed while running.
    #[error("server: {0}")]
    Io(String),
}

/// How MCP sessions run.
#[derive(Debug, Clone)]
pub struct McpOptions {
    /// The autonomy level of the sessions' sagas (`None`: the operator's).
    pub autonomy: Option<Autonomy>,
    /// Never ask the client by elicitation (approvals then always park).
    pub no_elicitation: bool,
    /// What happens to a saga still open when its session ends.
    pub session_end: SessionEnd,
    /// Tools, resources and prompts served beside capsaga's own
    /// ([`mcp::extension`]: the conformance suite's fixtures, in
    /// `capsaga-conformance`); `None` in the `capsaga` binary.
    pub extension: Option<Arc<dyn mcp::extension::McpExtension>>,
    /// How often the watcher ([`catalog`]) looks for a changed policy or
    /// tools directory (reloading the host) and for neurons activated or
    /// retired; `None`: never (only SIGHUP reloads, and neuron decisions
    /// made elsewhere are not seen).
    pub catalog_poll: Option<Duration>,
    /// How long a saga handle (MCP 2026-07-28) may go unused before its
    /// released saga is abandoned and ended by [`McpOptions::abandoned`]
    /// (`None`: never). Default [`HANDLE_IDLE`].
    pub handle_idle: Option<Duration>,
    /// What an abandoned handle's saga becomes (default: rolled back; see
    /// `dispatch::handles`).
    pub abandoned: AbandonedEnd,
}

/// Default of [`McpOptions::handle_idle`]: 30 minutes.
pub const HANDLE_IDLE: Duration = Duration::from_secs(30 * 60);

/// Default of [`McpOptions::catalog_poll`]: 2 s.
pub const CATALOG_POLL: Duration = Duration::from_secs(2);

/// The largest MCP message accepted by default, bytes: an HTTP body
/// ([`HttpOptions::max_body_bytes`]) or a stdio line (4 MiB; a tool call's
/// arguments are held to 1 MiB within it).
pub const MAX_MESSAGE_BYTES: usize = 4 << 20;

/// How the HTTP server runs.
#[derive(Debug, Clone)]
pub struct HttpOptions {
    /// Where to listen.
    pub listen: SocketAddr,
    /// The bearer token (`CAPSAGA_TOKEN`).
    pub token: Option<String>,
    /// `Host` allowlist (`None`: loopback names and the bound address).
    pub hosts: Option<Vec<String>>,
    /// `Origin` allowlist (`None`: loopback origins).
    pub origins: Option<Vec<String>>,
    /// Most bytes of a request body.
    pub max_body_bytes: usize,
    /// Time for a response to start.
    pub request_timeout: Duration,
    /// MCP sessions.
    pub mcp: McpOptions,
    /// The script of simulated turns (`--script`).
    pub script: Option<PathBuf>,
    /// Most live MCP sessions, in all and per principal.
    pub sessions: SessionCaps,
}

impl HttpOptions {
    /// Defaults for `listen`: no token, default allowlists, 4 MiB bodies,
    /// 300 s to respond.
    pub fn new(listen: SocketAddr) -> HttpOptions {
        HttpOptions {
            listen,
            token: None,
            hosts: None,
            origins: None,
            max_body_bytes: MAX_MESSAGE_BYTES,
            request_timeout: Duration::from_secs(300),
            mcp: McpOptions::default(),
            script: None,
            sessions: SessionCaps::DEFAULT,
        }
    }
}

impl Default for McpOptions {
    /// The operator's autonomy, elicitation on, [`SessionEnd`]'s default,
    /// no extension, the catalog compared every [`CATALOG_POLL`], handles
    /// abandoned after [`HANDLE_IDLE`] rolled back.
    fn default() -> McpOptions {
        McpOptions {
            autonomy: None,
            no_elicitation: false,
            session_end: SessionEnd::default(),
            extension: None,
            catalog_poll: Some(CATALOG_POLL),
            handle_idle: Some(HANDLE_IDLE),
            abandoned: AbandonedEnd::default(),
        }
    }
}

/// What a `requestState` key is derived for (`Kek::derive_key`).
const REQUEST_STATE_PURPOSE: &str = "mcp requestState";

/// The `requestState` codec (HMAC-SHA256, rmcp's keyring form, whose
/// sealed values name their key id):
/// - `CAPSAGA_KEK` set: a key derived from it, id `kek-<KEK id>`, so every
///   host holding the same KEK (several hosts on one store) opens the
///   states any of them sealed, across restarts too;
/// - unset: 32 random bytes from the operating system, id
///   `process-<random>`: states only this process opens (a client must
///   answer to the host that asked);
/// - `None` (fail closed: no state issued or accepted) when the KEK is set
///   but malformed, or the random source fails; said in the log.
fn request_state_codec() -> Option<rmcp::model::RequestStateCodec> {
    use rmcp::model::RequestStateCodec;
    let (kid, key) = match capsaga_agent::keys::kek_from_env() {
        Ok(kek) => (
            format!("kek-{}", kek.id()),
            zeroize::Zeroizing::new(kek.derive_key(REQUEST_STATE_PURPOSE).to_vec()),
        ),
        Err(capsaga_secrets::sealed::SealError::NoKek) => {
            let mut key = zeroize::Zeroizing::new(vec![0u8; 32]);
            let mut id = [0u8; 8];
            if let Err(e) = getrandom::fill(&mut key).and_then(|()| getrandom::fill(&mut id)) {
                tracing::error!(
                    "no requestState key (OS random source: {e}): input-required rounds are refused"
                );
                return None;
            }
            (format!("process-{}", hex::encode(id)), key)
        }
        Err(e) => {
            tracing::error!(
                "no requestState key ({e}): input-required rounds are refused until CAPSAGA_KEK is fixed"
            );
            return None;
        }
    };
    match RequestStateCodec::new_with_keyring(kid.clone(), [(kid, key.to_vec())]) {
        Ok(c) => Some(c),
        Err(e) => {
            tracing::error!("no requestState key ({e}): input-required rounds are refused");
            None
        }
    }
}

/// The state every session of one server shares; its catalog watcher
/// ([`catalog::watch`]) and SIGHUP handler ([`live::on_hangup`]) run until
/// the last reference is dropped.
fn shared(live: &Arc<live::Live>, o: &McpOptions) -> Arc<McpShared> {
    let shared = Arc::new(McpShared {
        live: live.clone(),
        asked_autonomy: o.autonomy,
        elicit_approvals: !o.no_elicitation,
        session_end: o.session_end,
        extension: o.extension.clone(),
        listeners: mcp::listeners::Listeners::default(),
        request_states: request_state_codec(),
        tasks: mcp::tasks::Tasks::default(),
    });
    if let Ok(rt) = tokio::runtime::Handle::try_current() {
        let every = o.catalog_poll.filter(|d| !d.is_zero());
        rt.spawn(catalog::watch(Arc::downgrade(&shared), every));
        rt.spawn(live::on_hangup(Arc::downgrade(live)));
        rt.spawn(cluster::recover_loop(Arc::downgrade(live)));
        rt.spawn(cluster::doubt_loop(Arc::downgrade(live)));
        rt.spawn(mcp::tasks::watch(Arc::downgrade(&shared)));
        if let Some(idle) = o.handle_idle.filter(|d| !d.is_zero()) {
            rt.spawn(cluster::expire_loop(
                Arc::downgrade(live),
                idle,
                o.abandoned,
            ));
        }
    }
    shared
}

/// `capsaga mcp`: one MCP session over stdin/stdout until the client
/// closes it; then the session-end rule applies to its open saga. The
/// client program is a client (`stdio:<os user>`): it confirms only the
/// tools the policy lists in `[approvals] client_confirm`.
/// Each line is admitted by the door's rule first ([`stdio`]), at most
/// [`MAX_MESSAGE_BYTES`].
///
/// # Errors
/// [`ServeError::Io`].
pub async fn serve_stdio(host: Arc<Host>, o: &McpOptions) -> Result<(), ServeError> {
    let live = Arc::new(live::Live::new(host));
    let user = std::env::var("USER").ok();
    let who = Principal::local("stdio", user.as_deref(), Role::Client);
    let session = McpSession::for_principal(shared(&live, o), who);
    let (sink, stream, writer) =
        stdio::transport(tokio::io::stdin(), tokio::io::stdout(), MAX_MESSAGE_BYTES);
    let running = session
        .clone()
        .serve((sink, stream))
        .await
        .map_err(|e| ServeError::Io(e.to_string()))?;
    let r = running.waiting().await;
    session.end().await;
    // What rmcp wrote last reaches the client before the process ends.
    let _ = tokio::time::timeout(Duration::from_secs(5), writer).await;
    r.map(|_| ()).map_err(|e| ServeError::Io(e.to_string()))
}

/// The operator's routes (clients get 403), not yet given their state.
fn operator_routes() -> Router<Arc<rest::Rest>> {
    Router::new()
        .route("/v1/approvals", get(rest::approvals))
        .route("/v1/approvals/{id}/{verb}", post(rest::decide))
        .route("/v1/memory/proposals", get(rest_memory::proposals))
        .route(
            "/v1/memory/proposals/{id}/{verb}",
            post(rest_memory::decide),
        )
        .route("/v1/memory/import", post(rest_memory::import))
        .route("/v1/pause", get(operator::switch).post(operator::pause))
        .route("/v1/resume", post(operator::resume))
        .route("/v1/keys", get(operator::keys))
        .route("/metrics", get(operator::metrics))
        .route(
            "/v1/keys/{name}",
            axum::routing::put(operator::put_key).delete(operator::remove_key),
        )
        .layer(axum::middleware::from_fn(auth::require_operator))
}

/// The server's background work, when a runtime is running: reflection
/// every `every` seconds (`[memory] reflect_every_s`), and the gauges
/// pushed every 15 s when metrics are pushed.
fn spawn_background(rest: &Arc<rest::Rest>, every: Option<u64>) {
    if let (Some(s), Ok(rt)) = (every, tokio::runtime::Handle::try_current()) {
        rt.spawn(rest_memory::reflect_every(
            Arc::downgrade(rest),
            std::time::Duration::from_secs(s),
        ));
    }
    if capsaga_telemetry::metrics::global().pushed()
        && let Ok(rt) = tokio::runtime::Handle::try_current()
    {
        rt.spawn(operator::gauges_every(
            Arc::downgrade(rest),
            std::time::Duration::from_secs(15),
        ));
    }
}

/// The HTTP application: `/mcp` and the REST routes, behind the limits and
/// the authentication (every route but `GET /healthz`; operator routes
/// answer 403 to clients). `bound` is the address clients use (for the
/// `Host` allowlist).
pub fn app(host: Arc<Host>, o: &HttpOptions, bound: SocketAddr) -> Router {
    let live = Arc::new(live::Live::new(host.clone()));
    let auth = Arc::new(auth::Auth::new(
        o.token.as_deref(),
        host.store.clone(),
        !bound.ip().is_loopback(),
    ));
    let hosts = o
        .hosts
        .clone()
        .unwrap_or_else(|| limits::default_hosts(&bound.to_string()));
    let origins = o.origins.clone().unwrap_or_else(limits::default_origins);
    let limits = Arc::new(limits::Limits {
        hosts: hosts.clone(),
        origins: origins.clone(),
        request_timeout: o.request_timeout,
    });
    let mut rmcp_hosts = hosts.clone();
    rmcp_hosts.extend(
        hosts
            .iter()
            .map(|h| h.trim_start_matches('[').trim_end_matches(']').to_string()),
    );
    // A request served statelessly (2026-07-28) whose handler answers
    // with nothing before its result gets its answer as one JSON body: the
    // server does not hold an event stream open until the request's
    // service has wound down. A handler that sends a notification first
    // (progress) still gets an event stream (rmcp falls back to SSE).
    // Sessions (2025-11-25) keep their per-request event streams.
    let config = StreamableHttpServerConfig::default()
        .with_json_response(true)
        .with_allowed_hosts(rmcp_hosts)
        .with_allowed_origins(origins)
        .enforce_origin_validation()
        .with_max_request_body_bytes(o.max_body_bytes);
    let mcp_shared = shared(&live, &o.mcp);
    let caps = SessionCaps {
        // Every live session must fit the list_changed listeners.
        max_total: o.sessions.max_total.min(mcp::listeners::MAX_LISTENERS),
        ..o.sessions
    };
    let sessions = Arc::new(sessions::Sessions::new(caps, live.host().owner.id()));
    let service: StreamableHttpService<McpSession, sessions::Sessions> = StreamableHttpService::new(
        move || Ok(McpSession::new(mcp_shared.clone())),
        sessions.clone(),
        config,
    );
    let every = live.host().config.policy.memory.reflect_every_s;
    let rest = Arc::new(rest::Rest {
        live,
        script: o.script.clone(),
        sessions: sessions.clone(),
    });
    spawn_background(&rest, every);
    let authenticated = axum::middleware::from_fn_with_state(auth.clone(), auth::require);
    let operator_only = operator_routes();
    let api = Router::new()
        .route("/v1/turns", post(rest::turns))
        .route("/v1/sagas", get(rest::sagas))
        .route("/v1/sagas/{id}", get(rest::saga))
        .route("/v1/traces/{id}", get(rest::trace))
        .merge(operator_only)
        .with_state(rest.clone())
        .layer(authenticated.clone());
    let mcp = Router::new()
        .nest_service("/mcp", service)
        // A request rmcp refuses before any handler gets its span.
        .layer(axum::middleware::from_fn(mcp::refused::refusals))
        .layer(axum::middleware::from_fn_with_state(
            o.max_body_bytes,
            admit::guard,
        ))
        // Inner to outer: the refusals' spans, the door's admission of each body, the session's
        // binding to its principal, then the token.
        .layer(axum::middleware::from_fn_with_state(
            sessions,
            sessions::bind,
        ))
        .layer(authenticated);
    // The console authenticates by its own session cookie (an operator
    // token exchanged at sign-in), behind the same Host/Origin allowlist.
    let console = console::router(rest.clone(), auth);
    Router::new()
        .route("/healthz", get(rest::healthz))
        .with_state(rest)
        .merge(api)
        .merge(console)
        .merge(mcp)
        .layer(axum::extract::DefaultBodyLimit::max(o.max_body_bytes))
        .layer(axum::middleware::from_fn_with_state(limits, limits::guard))
        // Outermost: no layer inside reads a header sent twice.
        .layer(axum::middleware::from_fn(wire::single))
}

/// `capsaga serve`: the HTTP server until `shutdown` resolves. `on_bound`
/// is told the address once listening (port 0 picks one).
///
/// # Errors
/// [`ServeError`].
pub async fn serve_http(
    host: Arc<Host>,
    o: &HttpOptions,
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
    on_bound: impl FnOnce(SocketAddr),
) -> Result<(), ServeError> {
    match o.token.as_deref() {
        Some(t) if t.len() < 16 => return Err(ServeError::WeakToken),
        None if !o.listen.ip().is_loopback() => {
            // Named tokens in the store are tokens too.
            let named = host
                .store
                .active_tokens()
                .await
                .map_err(|e| ServeError::Io(e.to_string()))?;
            if named.is_empty() {
                return Err(ServeError::NeedsToken(o.listen));
            }
        }
        _ => {}
    }
    let listener = tokio::net::TcpListener::bind(o.listen)
        .await
        .map_err(|error| ServeError::Bind {
            addr: o.listen,
            error,
        })?;
    let bound = listener
        .local_addr()
        .map_err(|e| ServeError::Io(e.to_string()))?;
    let app = app(host, o, bound);
    on_bound(bound);
    conn::serve(listener, app, shutdown).await
}
