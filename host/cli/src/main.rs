//! The `capsaga` binary.

use capsaga::{Cli, exit, main_with};
use clap::Parser;
use std::process::ExitCode;

fn main() -> ExitCode {
    // SAFETY: the first statement of `main`: no other thread exists yet
    // that could read the environment at the same time.
    unsafe { capsaga::process::fix_model_threads() };
    let cli = Cli::parse();
    let filter = match cli.verbose {
        0 => "warn",
        1 => "info",
        _ => "debug",
    };
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
    let telemetry = capsaga::process::subscribe(rt.handle(), filter);
    let code = rt.block_on(main_with(cli));
    // The last spans, bounded by CAPSAGA_OTEL_SHUTDOWN_MS (they are sent
    // by tasks of the runtime, still running here).
    if let Some(t) = telemetry {
        t.shutdown();
    }
    // Every call has already returned within its deadline; a host thread a
    // guest left blocked (e.g. in a slow read) must not keep the process
    // alive: give the runtime a moment, then exit without it.
    rt.shutdown_timeout(std::time::Duration::from_millis(SHUTDOWN_GRACE_MS));
    ExitCode::from(code)
}

/// How long the process waits for the async runtime's threads after the
/// command is done, milliseconds.
const SHUTDOWN_GRACE_MS: u64 = 500;
