//! `capsaga-conformance`: `capsaga serve` (MCP over Streamable HTTP at
//! `/mcp`, on a loopback address, no token) with the MCP conformance
//! suite's reference fixtures plugged in, for `scripts/mcp-conformance`.
//! Never for agents: the fixtures run outside the door.
//!
//! Prints `{"listening": "ADDR", "mcp": "http://ADDR/mcp"}` on stdout once
//! it listens; runs until interrupted. Exit status: 0 after an interrupt,
//! 3 for a configuration it cannot serve, 1 for anything else.

use capsaga_door::host::Host;
use capsaga_server::{HttpOptions, ServeError, serve_http};
use clap::Parser;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;

/// Serve capsaga with the MCP conformance suite's fixtures.
#[derive(Debug, Parser)]
#[command(name = "capsaga-conformance", version)]
struct Args {
    /// The policy file of the workspace served.
    #[arg(long, env = "CAPSAGA_CONFIG", default_value = "capsaga.toml")]
    config: PathBuf,
    /// A loopback address to listen on (port 0 picks one).
    #[arg(long, default_value = "127.0.0.1:0")]
    listen: SocketAddr,
}

#[tokio::main]
async fn main() -> ExitCode {
    let args = Args::parse();
    let _ = tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_env("CAPSAGA_LOG")
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn")),
        )
        .try_init();
    let host = match Host::open(&args.config).await {
        Ok(h) => h,
        Err(e) => {
            eprintln!("capsaga-conformance: {e}");
            return ExitCode::from(3);
        }
    };
    let mut o = HttpOptions::new(args.listen);
    o.mcp.extension = Some(capsaga_conformance::extension());
    let stop = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    let served = serve_http(host, &o, stop, |addr| {
        println!(
            "{}",
            serde_json::json!({"listening": addr.to_string(), "mcp": format!("http://{addr}/mcp")})
        );
    })
    .await;
    match served {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("capsaga-conformance: {e}");
            let config = matches!(
                e,
                ServeError::NeedsToken(_) | ServeError::WeakToken | ServeError::Bind { .. }
            );
            ExitCode::from(if config { 3 } else { 1 })
        }
    }
}
