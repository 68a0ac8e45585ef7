//! The `capsaga` binary.

use capsaga_host::cli::{Cli, exit, main_with};
use clap::Parser;
use std::process::ExitCode;
use tracing_subscriber::layer::SubscriberExt as _;
use tracing_subscriber::util::SubscriberInitExt as _;

fn main() -> ExitCode {
    fix_model_threads();
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
    // Telemetry (issue 30): metrics always, OTLP export when an
    // OTEL_EXPORTER_OTLP_* endpoint is set. A configuration it cannot use
    // is reported and the command runs without export.
    let telemetry = match capsaga_telemetry::Telemetry::from_env(rt.handle().clone()) {
        Ok(t) => Some(t),
        Err(e) => {
            eprintln!("capsaga: telemetry export off: {e}");
            None
        }
    };
    // The log output: every event scrubbed of the host's secrets and of
    // credential shapes (`capsaga_telemetry::logs`).
    let logs = capsaga_telemetry::logs::layer(filter);
    let _ = tracing_subscriber::registry()
        .with(telemetry.as_ref().map(|t| t.layer()))
        .with(logs)
        .try_init();
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

/// Set `RAYON_NUM_THREADS` (when unset) to the count the memory's
/// embedding model would pick anyway, so that candle stops counting the
/// CPUs at every matrix product (see
/// [`capsaga_memory::embed::model_threads`]). rayon's global pool, which
/// Wasmtime's parallel compilation also uses, gets the same count.
fn fix_model_threads() {
    if std::env::var_os("RAYON_NUM_THREADS").is_none() {
        let n = capsaga_memory::embed::model_threads();
        // SAFETY: the first statement of `main`: no other thread exists
        // yet that could read the environment at the same time.
        unsafe { std::env::set_var("RAYON_NUM_THREADS", n.to_string()) };
    }
}

/// How long the process waits for the async runtime's threads after the
/// command is done, milliseconds.
const SHUTDOWN_GRACE_MS: u64 = 500;
