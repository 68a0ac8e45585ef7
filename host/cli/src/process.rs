//! What a capsaga process sets up before its command runs (the `capsaga`
//! binary's `main`, and `capsaga-bench`'s): the embedding model's threads
//! and the tracing subscriber (telemetry and log lines).

use tracing_subscriber::layer::SubscriberExt as _;
use tracing_subscriber::util::SubscriberInitExt as _;

/// Set `RAYON_NUM_THREADS` (when unset) to the count the memory's
/// embedding model would pick anyway, so that candle stops counting the
/// CPUs at every matrix product (see
/// [`capsaga_memory::embed::model_threads`]). rayon's global pool, which
/// Wasmtime's parallel compilation also uses, gets the same count.
///
/// # Safety
/// It writes the process's environment: call it as the first statement of
/// `main`, before any other thread exists.
pub unsafe fn fix_model_threads() {
    if std::env::var_os("RAYON_NUM_THREADS").is_none() {
        let n = capsaga_memory::embed::model_threads();
        // SAFETY: the caller's promise: no other thread exists yet that
        // could read the environment at the same time.
        unsafe { std::env::set_var("RAYON_NUM_THREADS", n.to_string()) };
    }
}

/// Install the process's tracing subscriber: telemetry (issue 30: metrics
/// always, OTLP export when an `OTEL_EXPORTER_OTLP_*` endpoint is set) and
/// log lines on stderr at `filter` (`warn`, `info`, `debug`; `CAPSAGA_LOG`
/// wins). A telemetry configuration it cannot use is reported and the
/// process runs without export. The telemetry, to shut down before the
/// process exits (its last spans are sent by tasks of `rt`).
pub fn subscribe(
    rt: &tokio::runtime::Handle,
    filter: &str,
) -> Option<capsaga_telemetry::Telemetry> {
    let telemetry = match capsaga_telemetry::Telemetry::from_env(rt.clone()) {
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
    telemetry
}
