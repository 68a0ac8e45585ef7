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
///
/// For `capsaga memory import` it also sets `CANDLE_NUM_THREADS=1` (when
/// unset): candle's pool off, the import embeds on one thread per CPU
/// itself ([`capsaga_memory::embed::import_workers`]) instead of having
/// each matrix product split over threads that spin between products.
pub unsafe fn fix_model_threads() {
    if std::env::var_os("RAYON_NUM_THREADS").is_none() {
        let n = capsaga_memory::embed::model_threads();
        // SAFETY: the caller's promise: no other thread exists yet that
        // could read the environment at the same time.
        unsafe { std::env::set_var("RAYON_NUM_THREADS", n.to_string()) };
    }
    if std::env::var_os("CANDLE_NUM_THREADS").is_none() && is_import(std::env::args_os()) {
        // SAFETY: as above.
        unsafe { std::env::set_var("CANDLE_NUM_THREADS", "1") };
    }
}

/// Whether a command line (program name first) runs `memory import`.
fn is_import(args: impl Iterator<Item = std::ffi::OsString>) -> bool {
    let args: Vec<std::ffi::OsString> = args.skip(1).collect();
    args.windows(2)
        .any(|w| w[0] == "memory" && w[1] == "import")
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

#[cfg(test)]
mod tests {
    use super::is_import;

    fn line(s: &str) -> impl Iterator<Item = std::ffi::OsString> {
        s.split(' ')
            .map(std::ffi::OsString::from)
            .collect::<Vec<_>>()
            .into_iter()
    }

    #[test]
    fn only_memory_import_embeds_on_its_own_threads() {
        assert!(is_import(line("capsaga memory import talks.jsonl")));
        assert!(is_import(line("capsaga -v memory import -")));
        assert!(!is_import(line("capsaga memory export")));
        assert!(!is_import(line("capsaga serve")));
        assert!(!is_import(line("import memory")));
    }
}
