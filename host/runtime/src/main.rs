//! The `capsaga` binary.

use capsaga_host::cli::{Cli, exit, main_with};
use clap::Parser;
use std::process::ExitCode;

fn main() -> ExitCode {
    let cli = Cli::parse();
    let filter = match cli.verbose {
        0 => "warn",
        1 => "info",
        _ => "debug",
    };
    let _ = tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_env("CAPSAGA_LOG")
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(filter)),
        )
        .with_writer(std::io::stderr)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .try_init();
    let rt = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("capsaga: cannot start the async runtime: {e}");
            return ExitCode::from(exit::INTERNAL);
        }
    };
    let code = rt.block_on(main_with(cli));
    // Every call has already returned within its deadline; a host thread a
    // guest left blocked (e.g. in a slow read) must not keep the process
    // alive: give the runtime a moment, then exit without it.
    rt.shutdown_timeout(std::time::Duration::from_millis(SHUTDOWN_GRACE_MS));
    ExitCode::from(code)
}

/// How long the process waits for the async runtime's threads after the
/// command is done, milliseconds.
const SHUTDOWN_GRACE_MS: u64 = 500;
