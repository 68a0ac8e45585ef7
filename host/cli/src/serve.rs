//! `capsaga mcp` (an MCP server over stdio) and `capsaga serve` (MCP over
//! Streamable HTTP at `/mcp` and the REST API), see [`capsaga_server`].

use super::exit;
use super::{Failure, render::Out};
use capsaga_core::policy::Autonomy;
use capsaga_door::dispatch::AbandonedEnd;
use capsaga_door::host::Host;
use capsaga_server::mcp::SessionEnd;
use capsaga_server::{HttpOptions, McpOptions, ServeError, serve_http, serve_stdio};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

/// How MCP sessions run (both commands).
#[derive(Debug, Clone, clap::Args)]
pub struct McpArgs {
    /// Autonomy of the sessions' sagas: read_only, supervised or
    /// autonomous (never above the operator's level).
    #[arg(long)]
    pub autonomy: Option<String>,
    /// Never ask the client by elicitation: a call that needs a human
    /// always parks its saga and names the pending approval.
    #[arg(long)]
    pub no_elicitation: bool,
    /// What happens to a session's open saga when the session ends: commit
    /// (keep what it committed) or rollback.
    #[arg(long, default_value = "commit", value_name = "commit|rollback")]
    pub on_session_end: String,
    /// Milliseconds between two looks at the policy file, its `fsm.toml`
    /// and the tools directory (a change reloads them: new or rebuilt
    /// components, new grants) and at the neurons stored as active (an
    /// operator's `capsaga neurons approve|retire`); a changed tool list
    /// sends `notifications/tools/list_changed` to every session. SIGHUP
    /// reloads at once. 0: never look (SIGHUP still reloads).
    #[arg(long, default_value_t = 2000, value_name = "MS")]
    pub catalog_poll_ms: u64,
    /// Milliseconds a saga handle (MCP 2026-07-28 `_meta
    /// "dev.capsaga/saga"`) may go unused before its saga is abandoned and
    /// ended by --on-abandoned-handle (by whichever host sharing the store
    /// sweeps first; hosts should agree on it). 0: never.
    #[arg(long, default_value_t = 30 * 60 * 1000, value_name = "MS")]
    pub handle_idle_ms: u64,
    /// What an abandoned handle's saga becomes: rollback (the default: the
    /// client kept it open and never committed it) or commit.
    #[arg(long, default_value = "rollback", value_name = "rollback|commit")]
    pub on_abandoned_handle: String,
}

/// `capsaga serve`.
#[derive(Debug, Clone, clap::Args)]
pub struct ServeArgs {
    /// Address to listen on. Anything but loopback needs CAPSAGA_TOKEN.
    #[arg(long, default_value = "127.0.0.1:8000")]
    pub listen: SocketAddr,
    /// The script of simulated turns for `POST /v1/turns` (the scripted
    /// provider).
    #[arg(long)]
    pub script: Option<PathBuf>,
    /// An allowed `Host` (repeatable; `name` for any port, `name:port`).
    /// Default: localhost, 127.0.0.1, [::1] and the listening address.
    #[arg(long = "allowed-host", value_name = "HOST")]
    pub allowed_hosts: Vec<String>,
    /// An allowed `Origin` (repeatable; `http://host:port`, `:*` for any
    /// port). Default: the loopback origins.
    #[arg(long = "allowed-origin", value_name = "ORIGIN")]
    pub allowed_origins: Vec<String>,
    /// Most bytes of a request body.
    #[arg(long, default_value_t = 4 << 20)]
    pub max_body_bytes: usize,
    /// Seconds for a response to start.
    #[arg(long, default_value_t = 300)]
    pub request_timeout_s: u64,
    /// Most live MCP sessions (at the cap, the least recently active idle
    /// session of the principal holding the most is closed; when none is
    /// idle, a new one gets 503).
    #[arg(long, default_value_t = capsaga_core::session_table::SessionCaps::DEFAULT.max_total)]
    pub max_sessions: usize,
    /// Most live MCP sessions of one principal (at the cap, its own least
    /// recently active idle session is closed; when none is idle, a new
    /// one gets 429).
    #[arg(long, default_value_t = capsaga_core::session_table::SessionCaps::DEFAULT.max_per_principal)]
    pub max_sessions_per_principal: usize,
    /// MCP sessions.
    #[command(flatten)]
    pub mcp: McpArgs,
}

fn config_error(message: String) -> Failure {
    Failure {
        code: exit::CONFIG,
        message,
    }
}

fn mcp_options(a: &McpArgs) -> Result<McpOptions, Failure> {
    Ok(McpOptions {
        autonomy: a
            .autonomy
            .as_deref()
            .map(str::parse::<Autonomy>)
            .transpose()
            .map_err(config_error)?,
        no_elicitation: a.no_elicitation,
        extension: None,
        catalog_poll: (a.catalog_poll_ms > 0).then(|| Duration::from_millis(a.catalog_poll_ms)),
        session_end: a
            .on_session_end
            .parse::<SessionEnd>()
            .map_err(|e| config_error(format!("--on-session-end {e}")))?,
        handle_idle: (a.handle_idle_ms > 0).then(|| Duration::from_millis(a.handle_idle_ms)),
        abandoned: match a
            .on_abandoned_handle
            .parse::<SessionEnd>()
            .map_err(|e| config_error(format!("--on-abandoned-handle {e}")))?
        {
            SessionEnd::Commit => AbandonedEnd::Commit,
            SessionEnd::Rollback => AbandonedEnd::Rollback,
        },
    })
}

/// `capsaga mcp`.
pub(crate) async fn mcp(host: &Arc<Host>, a: &McpArgs) -> Result<u8, Failure> {
    let o = mcp_options(a)?;
    serve_stdio(host.clone(), &o).await.map_err(|e| Failure {
        code: exit::INTERNAL,
        message: e.to_string(),
    })?;
    Ok(exit::OK)
}

async fn stopped() {
    let ctrl_c = tokio::signal::ctrl_c();
    #[cfg(unix)]
    {
        let mut term =
            match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
                Ok(s) => s,
                Err(_) => {
                    let _ = ctrl_c.await;
                    return;
                }
            };
        tokio::select! {
            _ = ctrl_c => {}
            _ = term.recv() => {}
        }
    }
    #[cfg(not(unix))]
    {
        let _ = ctrl_c.await;
    }
}

/// `capsaga serve`.
pub(crate) async fn serve(host: &Arc<Host>, out: &Out, a: &ServeArgs) -> Result<u8, Failure> {
    let mut o = HttpOptions::new(a.listen);
    o.token = std::env::var("CAPSAGA_TOKEN")
        .ok()
        .filter(|t| !t.is_empty());
    o.hosts = (!a.allowed_hosts.is_empty()).then(|| a.allowed_hosts.clone());
    o.origins = (!a.allowed_origins.is_empty()).then(|| a.allowed_origins.clone());
    o.max_body_bytes = a.max_body_bytes;
    o.request_timeout = Duration::from_secs(a.request_timeout_s.max(1));
    o.mcp = mcp_options(&a.mcp)?;
    o.script = a.script.clone();
    o.sessions = capsaga_core::session_table::SessionCaps {
        max_total: a.max_sessions,
        max_per_principal: a.max_sessions_per_principal,
    }
    .normalised();
    let json = out.json;
    let token = o.token.is_some();
    serve_http(host.clone(), &o, stopped(), move |addr| {
        if json {
            outln!("{}", serde_json::json!({"listening": addr.to_string(), "mcp": format!("http://{addr}/mcp"), "token": token}));
        } else {
            outln!("capsaga serve: listening on http://{addr} (MCP at /mcp){}", if token { "; bearer token required" } else { "" });
        }
    })
    .await
    .map_err(|e| Failure {
        code: match e {
            ServeError::NeedsToken(_) | ServeError::WeakToken | ServeError::Bind { .. } => exit::CONFIG,
            ServeError::Io(_) => exit::INTERNAL,
        },
        message: e.to_string(),
    })?;
    Ok(exit::OK)
}
