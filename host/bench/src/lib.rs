//! # capsaga-bench
//!
//! Every benchmark of capsaga, outside the product: the `capsaga-bench`
//! binary (what `capsaga bench` was) and the criterion bench `saga_step`
//! (`cargo bench -p capsaga-bench`). It measures each layer, so it depends
//! on all of them: the sandbox directly (its per-call paths are measured
//! against bare Wasmtime, below the door: the named exception of
//! "only the door runs a tool"), the door, the servers, the memory, the
//! store's PostgreSQL test harness (`capsaga-pg-harness`), and the
//! `capsaga` library, whose output and exit codes it shares. Nothing
//! depends on it. Each mode is a module: `--wal` (`wal.rs`), `--group-commit`,
//! `--pg`, `--hosts`, `--memory`, `--fs-rollback`, `--first-start`, `--otel`, `--mcp`,
//! `--console`, `--flow`, and `capsaga-bench neurons` ([`neurons`]).
//!
//! Without a mode: what a tool call costs, measured in one process and one
//! run against floors measured alongside it (DESIGN §4, issue 3):
//! - a trivial call through capsaga (`Sandbox::call`: fresh instance,
//!   WASI context from the grants, limits, execute, output checked, drop);
//! - the bare Wasmtime floor for the same component: pooling allocator,
//!   `InstancePre`, instantiate + call + drop, no fuel, no epoch, an empty
//!   WASI context; synchronous (the cheapest way to call) and async (how
//!   capsaga must call, to yield and time out), and async with fuel and
//!   epoch interruption on (capsaga's engine settings, none of its per-call
//!   work), so that the gap can be attributed;
//! - a native Rust function doing the same work as `time_now`;
//! - spawning a process (`/bin/true`);
//! - cold start (engine + component ready to instantiate) with and without
//!   the compiled cache;
//! - peak resident memory while a guest returns 100 MB (optional).
//!
//! The per-call paths are measured interleaved: after a warm-up round, each
//! of [`ROUNDS`] rounds runs one batch of every path back to back, so that a
//! change of load on the machine (another build on a shared CPU) hits every
//! path alike. A path's figure is the median of its batch means; a ratio is
//! the median of the per-round ratios of the two paths (each pair measured
//! milliseconds apart). Nothing is asserted.

#![warn(missing_docs)]

#[macro_use]
extern crate capsaga;

mod cold;
mod console;
mod floor;
mod flow;
mod fs;
mod group;
mod hosts;
mod machine;
mod mcp;
mod memory;
mod memory_quality;
pub mod neurons;
mod otel;
mod pg;
mod shell;
mod start;
mod wal;

use capsaga::exit;
use capsaga::render::{self, Out};
use capsaga_core::policy::Limits;
use capsaga_core::tool::CallContext;
use capsaga_sandbox::{Bindings, CallRequest, Op, Sandbox, SandboxConfig};
use cold::{cold_start, peak_memory};
use floor::*;
pub(crate) use machine::{cpu_s, load_average, machine, rss};
use serde::Serialize;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// `capsaga-bench` arguments.
#[derive(Debug, Clone, clap::Args)]
pub struct BenchArgs {
    /// The component to call (`execute` with `{}`); a trivial one, e.g. the
    /// `time_now` tool.
    #[arg(long, default_value = "target/tools/time_now.wasm")]
    pub component: PathBuf,
    /// Arguments passed to `execute`, JSON text.
    #[arg(long, default_value = "{}")]
    pub args: String,
    /// Calls per batch for each wasm path (15 rounds of one batch per path
    /// are run; the native path runs 50 times as many calls per batch, the
    /// process spawn a quarter as many).
    #[arg(long, default_value_t = 200)]
    pub batch: u32,
    /// The `big_output` test component, for the peak-memory measurement
    /// (skipped when the file does not exist).
    #[arg(long, default_value = "target/test-components/big_output.wasm")]
    pub big_output: PathBuf,
    /// The `shell_run` tool, for the shell benchmark (a pipeline over a
    /// 10 MB file against the system's coreutils, and the per-call overhead
    /// against `time_now`; skipped when the file does not exist).
    #[arg(long, default_value = "target/tools/shell_run.wasm")]
    pub shell_run: PathBuf,
    /// Instead: the state database's `-wal` file after `--wal-steps` steps
    /// committed with a concurrent reader, and when the command returns.
    #[arg(long)]
    pub wal: bool,
    /// Steps of the `--wal` benchmark.
    #[arg(long, default_value_t = 20_000)]
    pub wal_steps: u32,
    /// Instead: saga steps/s at 1, 10 and 100 concurrent sagas
    /// (`synchronous = FULL`), with group commit off and on, in one run.
    #[arg(long)]
    pub group_commit: bool,
    /// Steps each run of `--group-commit` commits (and of `--pg`).
    #[arg(long, default_value_t = 2000)]
    pub group_commit_steps: u32,
    /// Instead: saga steps/s on a shared PostgreSQL store at 1, 10 and 100
    /// concurrent sagas over 1, 2 and 3 hosts, next to SQLite with group
    /// commit and the floor of one durable PostgreSQL commit, in one run
    /// (on a throw-away cluster unless `--pg-url`).
    #[arg(long)]
    pub pg: bool,
    /// Instead: several hosts on a shared PostgreSQL store (issue 48):
    /// steps/s at 100 concurrent sagas on 1, 2 and 3 hosts with the saga
    /// handed over to the next host at every request, next to sticky
    /// sagas, in one run; then the takeover time after a host dies
    /// (SIGKILL) and after one is paused (SIGSTOP), with real `capsaga
    /// serve` processes (`--capsaga-bin`) calling `--component`.
    #[arg(long)]
    pub hosts: bool,
    /// The lease of `--hosts`'s takeover, milliseconds (the product's
    /// default).
    #[arg(long, default_value_t = 10_000)]
    pub hosts_lease_ms: u64,
    /// The database of `--pg` (its password from PGPASSWORD); default: a
    /// throw-away cluster started for the run (Debian's postgresql).
    #[arg(long, env = "CAPSAGA_BENCH_PG_URL", hide_env_values = true)]
    pub pg_url: Option<String>,
    /// Instead: the memory (embedding a query beside the model's raw
    /// forward pass, retrieval over 100k episodes and 10k facts, indexing a
    /// trace, RSS, recall@5 per kind of question on the shipped retrieval
    /// sets next to BM25, import throughput), in one run.
    #[arg(long)]
    pub memory: bool,
    /// The retrieval sets of `--memory` (default: the repository's
    /// `host/memory/tests/data/retrieval`).
    #[arg(long, value_name = "DIR")]
    pub retrieval_sets: Option<PathBuf>,
    /// Which of the retrieval sets `--memory` imports and measures
    /// (comma-separated among `tuned`, `holdout`, `validation`; `none`:
    /// none, for the search and import figures alone).
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "tuned,holdout,validation",
        value_name = "SETS"
    )]
    pub memory_sets: Vec<String>,
    /// With `--memory`: also import this many generated exchanges (e.g.
    /// 100000) and report the time (0: only the sets' imports).
    #[arg(long, default_value_t = 0, value_name = "N")]
    pub import_exchanges: usize,
    /// The embedding model's directory for `--memory` (default
    /// `target/models/all-MiniLM-L6-v2`).
    #[arg(
        long,
        env = "CAPSAGA_MODEL_DIR",
        default_value = "target/models/all-MiniLM-L6-v2"
    )]
    pub model_dir: PathBuf,
    /// Instead: the host's file journal (issue 28): a step writing 100
    /// small files and one overwriting 100 files with and without the
    /// journal, their restore next to writing the files directly, a 64 MiB
    /// rewrite; ratios measured in one run.
    #[arg(long)]
    pub fs_rollback: bool,
    /// The `fs_churn` test component, for `--fs-rollback`.
    #[arg(long, default_value = "target/test-components/fs_churn.wasm")]
    pub fs_churn: PathBuf,
    /// Instead: the first `capsaga call` on a fresh state (cold compiled
    /// cache) next to a warm one, alone and `--processes` together.
    #[arg(long)]
    pub first_start: bool,
    /// The components of the `--first-start` workspace.
    #[arg(long, default_value = "target/tools")]
    pub tools_dir: PathBuf,
    /// Processes started together by `--first-start`.
    #[arg(long, default_value_t = 40)]
    pub processes: usize,
    /// The `capsaga` binary `--first-start` and `--hosts` start (default: the one beside
    /// this binary, as cargo builds them).
    #[arg(long, value_name = "PATH")]
    pub capsaga_bin: Option<PathBuf>,
    /// Instead: the OpenTelemetry export's cost on a tool call (issue 30):
    /// steps through the door with export off (metrics only), on to a local
    /// OTLP receiver, and on to a collector that never answers, ratios
    /// against export off, measured interleaved in one run.
    #[arg(long)]
    pub otel: bool,
    /// Steps per mode and round for `--otel`.
    #[arg(long, default_value_t = 20)]
    pub otel_calls: u32,
    /// Instead: an MCP `tools/call` of `--component` (`time_now`) over
    /// HTTP, stateful (2025-11-25) and stateless (2026-07-28), p50/p99 next
    /// to the same work through the library, and 200 concurrent clients,
    /// in one run.
    #[arg(long)]
    pub mcp: bool,
    /// Instead: the operator console's render time (p50/p95 against a
    /// static asset of the same server) over `--console-sagas` sagas, 1,000
    /// of them awaiting approval.
    #[arg(long)]
    pub console: bool,
    /// Sagas seeded for `--console`.
    #[arg(long, default_value_t = 100_000)]
    pub console_sagas: usize,
    /// Instead: the information-flow stage's share of a saga step (issue
    /// 47): `fs_write` of a long text through the door after `fs_read` of
    /// 0, 1, 10 and 100 files of 4 KB (untrusted), the provenance check,
    /// recording the output and writing its label timed apart (components
    /// from `--tools-dir`).
    #[arg(long)]
    pub flow: bool,
}

/// Measured rounds of the per-call paths (after one warm-up round).
const ROUNDS: usize = 15;

/// One measured path.
#[derive(Debug, Clone, Serialize)]
struct Figure {
    name: &'static str,
    /// Median of the batch means, microseconds per call.
    us_per_call: f64,
    /// Median of the per-round ratios against the synchronous floor.
    x_sync_floor: f64,
}

/// Cold start, milliseconds.
#[derive(Debug, Clone, Serialize)]
struct ColdStart {
    without_cache_ms: f64,
    with_cache_ms: f64,
    compile_ms: f64,
    cache_load_ms: f64,
}

/// Peak resident memory around one refused 100 MB output.
#[derive(Debug, Clone, Serialize)]
struct PeakMemory {
    rss_before_mb: f64,
    peak_rss_mb: f64,
    growth_mb: f64,
    memory_cap_mb: f64,
    error: String,
}

#[derive(Debug, Serialize)]
struct Report {
    machine: String,
    component: String,
    component_bytes: u64,
    allocator: String,
    calls_per_path: u32,
    per_call: Vec<Figure>,
    capsaga_vs_sync_floor: f64,
    capsaga_vs_async_floor: f64,
    spawn_vs_capsaga: f64,
    cold_start: ColdStart,
    peak_memory: Option<PeakMemory>,
    shell: Option<shell::ShellReport>,
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn median_ms(v: Vec<Duration>) -> f64 {
    median(v.into_iter().map(|d| d.as_secs_f64() * 1e3).collect())
}

/// The per-call paths, in the order of the report (index 1 is the sync floor).
const PATHS: [&str; 6] = [
    "native Rust function (same work as time_now)",
    "bare Wasmtime, sync: InstancePre + pooling, instantiate + call",
    "bare Wasmtime, async",
    "bare Wasmtime, async, fuel + epoch on",
    "capsaga Sandbox::call (fresh instance, execute, drop)",
    "process spawn (/bin/true)",
];
const SYNC_FLOOR: usize = 1;
const ASYNC_FLOOR: usize = 2;
const CAPSAGA: usize = 4;
const SPAWN: usize = 5;

/// Everything the per-call paths need, set up before the first round.
struct Paths {
    sync_floor: SyncFloor,
    async_floor: AsyncFloor,
    instrumented_floor: AsyncFloor,
    capsaga: ThroughCapsaga,
}

impl Paths {
    /// Calls per batch of path `i`.
    fn calls(i: usize, batch: u32) -> u32 {
        match i {
            0 => batch.saturating_mul(50),
            SPAWN => (batch / 4).max(10),
            _ => batch,
        }
    }

    /// One call of path `i`.
    async fn call(&self, i: usize, args: &str) -> Result<(), String> {
        match i {
            0 => {
                std::hint::black_box(native_time_now());
                Ok(())
            }
            SYNC_FLOOR => self.sync_floor.call(args),
            ASYNC_FLOOR => self.async_floor.call(args).await,
            3 => self.instrumented_floor.call(args).await,
            CAPSAGA => self.capsaga.call(args).await,
            _ => spawn_true(),
        }
    }

    /// One batch of path `i`, microseconds per call.
    async fn batch(&self, i: usize, batch: u32, args: &str) -> Result<f64, String> {
        let n = Self::calls(i, batch.max(1));
        let t0 = Instant::now();
        for _ in 0..n {
            self.call(i, args).await?;
        }
        Ok(t0.elapsed().as_secs_f64() * 1e6 / f64::from(n))
    }

    /// A warm-up round, then [`ROUNDS`] rounds of one batch per path:
    /// `[path][round]`, microseconds per call.
    async fn measure(&self, batch: u32, args: &str) -> Result<Vec<Vec<f64>>, String> {
        let mut means = vec![Vec::with_capacity(ROUNDS); PATHS.len()];
        for round in 0..=ROUNDS {
            for (i, m) in means.iter_mut().enumerate() {
                let us = self.batch(i, batch, args).await?;
                if round > 0 {
                    m.push(us);
                }
            }
        }
        Ok(means)
    }
}

/// Median over the rounds of `a[round] / b[round]`.
fn paired_ratio(a: &[f64], b: &[f64]) -> f64 {
    median(a.iter().zip(b).map(|(x, y)| x / y).collect())
}

/// A benchmark's report `r` on `out` (JSON, or text by `print`), or its
/// error said on stderr naming the benchmark `mode`: the exit code.
pub(crate) fn report<R: Serialize>(
    out: &Out,
    mode: &str,
    r: Result<R, String>,
    print: fn(&R),
) -> u8 {
    match r {
        Ok(r) if out.json => {
            out.json(&r);
            exit::OK
        }
        Ok(r) => {
            print(&r);
            exit::OK
        }
        Err(e) => {
            errln!("capsaga-bench {mode}: {e}");
            exit::INTERNAL
        }
    }
}

/// Run the benchmark and print the report.
pub async fn run(out: &Out, args: &BenchArgs) -> u8 {
    if args.wal {
        return wal::run(out, args.wal_steps).await;
    }
    if args.pg {
        return pg::run(out, args.pg_url.as_deref(), args.group_commit_steps).await;
    }
    if args.hosts {
        let a = hosts::HostsArgs {
            url: args.pg_url.as_deref(),
            steps: args.group_commit_steps,
            lease_ms: args.hosts_lease_ms,
            component: &args.component,
            capsaga_bin: args.capsaga_bin.as_deref(),
        };
        return hosts::run(out, &a).await;
    }
    if args.group_commit {
        return group::run(out, args.group_commit_steps).await;
    }
    if args.memory {
        let sets = args
            .retrieval_sets
            .clone()
            .unwrap_or_else(capsaga_memory::eval::shipped_dir);
        let names: Vec<String> = args
            .memory_sets
            .iter()
            .filter(|n| n.as_str() != "none")
            .cloned()
            .collect();
        return memory::run(out, &args.model_dir, &sets, &names, args.import_exchanges).await;
    }
    if args.fs_rollback {
        return fs::run(out, &args.fs_churn).await;
    }
    if args.otel {
        return otel::run(out, args.otel_calls).await;
    }
    if args.mcp {
        return mcp::run(out, &args.component).await;
    }
    if args.first_start {
        return start::run(
            out,
            &args.tools_dir,
            args.processes,
            args.capsaga_bin.as_deref(),
        )
        .await;
    }
    if args.console {
        return console::run(out, args.console_sagas).await;
    }
    if args.flow {
        return flow::run(out, &args.tools_dir).await;
    }
    match run_inner(args).await {
        Ok(report) => {
            if out.json {
                out.json(&report);
            } else {
                print_report(&report);
            }
            exit::OK
        }
        Err(e) => {
            errln!("capsaga-bench: {e}");
            exit::INTERNAL
        }
    }
}

async fn run_inner(args: &BenchArgs) -> Result<Report, String> {
    let bytes = std::fs::read(&args.component).map_err(|e| {
        format!(
            "cannot read {}: {e} (build it with scripts/build-components, or pass --component)",
            args.component.display()
        )
    })?;
    let n = args.batch.max(1);
    let paths = Paths {
        sync_floor: SyncFloor::new(&bytes)?,
        async_floor: AsyncFloor::new(&bytes, false)?,
        instrumented_floor: AsyncFloor::new(&bytes, true)?,
        capsaga: ThroughCapsaga::new(&bytes)?,
    };
    let allocator = format!("{:?}", paths.capsaga.sandbox.allocator());
    let means = paths.measure(n, &args.args).await?;
    drop(paths);
    let cold = cold_start(&bytes).await?;
    let peak = peak_memory(&args.big_output).await?;
    let shell = shell::measure(&args.shell_run, &bytes).await?;
    let per_call = PATHS
        .iter()
        .zip(&means)
        .map(|(&name, m)| Figure {
            name,
            us_per_call: median(m.clone()),
            x_sync_floor: paired_ratio(m, &means[SYNC_FLOOR]),
        })
        .collect();
    Ok(Report {
        machine: machine(),
        component: args.component.display().to_string(),
        component_bytes: bytes.len() as u64,
        allocator,
        calls_per_path: n * ROUNDS as u32,
        per_call,
        capsaga_vs_sync_floor: paired_ratio(&means[CAPSAGA], &means[SYNC_FLOOR]),
        capsaga_vs_async_floor: paired_ratio(&means[CAPSAGA], &means[ASYNC_FLOOR]),
        spawn_vs_capsaga: paired_ratio(&means[SPAWN], &means[CAPSAGA]),
        cold_start: cold,
        peak_memory: peak,
        shell,
    })
}

fn print_report(r: &Report) {
    outln!("capsaga-bench");
    outln!("  machine:   {}", r.machine);
    outln!(
        "  component: {} ({} bytes), {} calls per wasm path, {} allocator",
        r.component,
        r.component_bytes,
        r.calls_per_path,
        r.allocator.to_lowercase()
    );
    outln!();
    outln!(
        "  per call, {ROUNDS} interleaved rounds (medians)                     µs/call   x sync floor"
    );
    for f in &r.per_call {
        outln!(
            "    {:<62} {:>9.2} {:>9.2}",
            f.name,
            f.us_per_call,
            f.x_sync_floor
        );
    }
    outln!();
    outln!(
        "  capsaga call / bare Wasmtime floor: {:.2}x (sync floor), {:.2}x (async floor); goal <= 1.25x the sync floor (issue 31; 1.5x before)",
        r.capsaga_vs_sync_floor,
        r.capsaga_vs_async_floor
    );
    outln!(
        "  process spawn / capsaga call:       {:.1}x; goal >= 20x",
        r.spawn_vs_capsaga
    );
    let c = &r.cold_start;
    outln!();
    outln!("  cold start (engine + component ready), median of 5:");
    outln!(
        "    without compiled cache  {:>8.1} ms  (compile {:.1} ms)",
        c.without_cache_ms,
        c.compile_ms
    );
    outln!(
        "    with compiled cache     {:>8.1} ms  (load {:.1} ms)   {:.1}x faster",
        c.with_cache_ms,
        c.cache_load_ms,
        c.without_cache_ms / c.with_cache_ms
    );
    if let Some(p) = &r.peak_memory {
        outln!();
        outln!("  peak RSS while big_output returns 100 MB (default limits):");
        outln!(
            "    before {:.1} MB, peak {:.1} MB, growth {:.1} MB (guest linear memory included; cap {:.0} MB)",
            p.rss_before_mb,
            p.peak_rss_mb,
            p.growth_mb,
            p.memory_cap_mb
        );
        outln!("    result: {}", p.error);
    }
    if let Some(s) = &r.shell {
        shell::print(s);
    }
}
