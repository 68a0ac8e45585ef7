//! The `capsaga-bench` binary: `capsaga-bench [--json] [FLAGS]` (what
//! `capsaga bench` was) and `capsaga-bench [--json] neurons [FLAGS]` (what
//! `capsaga bench-neurons` was). Exit codes are the `capsaga` binary's.

use capsaga::exit;
use capsaga::render::Out;
use capsaga_bench::BenchArgs;
use capsaga_bench::neurons::BenchNeuronsArgs;
use clap::Parser;
use std::process::ExitCode;

/// Measure capsaga: a tool call against its floors by default, or one of
/// the other benchmarks by its flag (`--wal`, `--group-commit`, `--pg`,
/// `--hosts`, `--memory`, `--fs-rollback`, `--first-start`, `--otel`, `--mcp`,
/// `--console`, `--flow`), or neurons (`capsaga-bench neurons`). Nothing is asserted:
/// the figures are printed (docs/performance.md says what each means).
#[derive(Debug, Parser)]
#[command(
    name = "capsaga-bench",
    version,
    args_conflicts_with_subcommands = true
)]
struct Cli {
    /// Print one JSON document instead of text.
    #[arg(long, global = true)]
    json: bool,
    /// The benchmark of neurons instead.
    #[command(subcommand)]
    neurons: Option<Neurons>,
    /// The tool-call benchmarks.
    #[command(flatten)]
    bench: BenchArgs,
}

#[derive(Debug, clap::Subcommand)]
enum Neurons {
    /// Measure neurons: the runner's compile and cached cold start, source
    /// to callable, a neuron call against a Rust tool call, the catalog's
    /// size with 0, 10 and 100 neurons.
    Neurons(BenchNeuronsArgs),
}

fn main() -> ExitCode {
    // SAFETY: the first statement of `main`: no other thread exists yet
    // that could read the environment at the same time.
    unsafe { capsaga::process::fix_model_threads() };
    // `--memory --import-exchanges N` measures the import as `capsaga
    // memory import` runs it: candle's pool off (`CANDLE_NUM_THREADS=1`,
    // read once by candle, so for the whole run), one embedding thread per
    // CPU (`capsaga_memory::embed::import_workers`). The run's other
    // embedding figures are then those of one thread.
    if std::env::var_os("CANDLE_NUM_THREADS").is_none()
        && std::env::args().any(|a| a.starts_with("--import-exchanges"))
    {
        // SAFETY: as above, still before any other thread exists.
        unsafe { std::env::set_var("CANDLE_NUM_THREADS", "1") };
    }
    let cli = Cli::parse();
    let rt = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("capsaga-bench: cannot start the async runtime: {e}");
            return ExitCode::from(exit::INTERNAL);
        }
    };
    // As `capsaga` sets its process up (the metrics layer included: the
    // figures are those of the binary's tool calls).
    let telemetry = capsaga::process::subscribe(rt.handle(), "warn");
    let out = Out { json: cli.json };
    let code = rt.block_on(async {
        match &cli.neurons {
            Some(Neurons::Neurons(a)) => capsaga_bench::neurons::run(&out, a).await,
            None => capsaga_bench::run(&out, &cli.bench).await,
        }
    });
    if let Some(t) = telemetry {
        t.shutdown();
    }
    rt.shutdown_timeout(std::time::Duration::from_millis(500));
    ExitCode::from(code)
}
