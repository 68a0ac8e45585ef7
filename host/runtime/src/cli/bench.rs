//! `capsaga bench`: what a tool call costs, measured in one process and one
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
//! Each per-call figure is the median of several batch means, after a
//! warm-up. Figures are printed with ratios against the floors of the same
//! run; nothing is asserted.

use super::exit;
use super::render::Out;
use crate::sandbox::bindings::{LogLevel, Tool, ToolPre, WitCallContext, capsaga};
use crate::sandbox::{CallRequest, Op, Sandbox, SandboxConfig, engine};
use capsaga_core::policy::Limits;
use capsaga_core::tool::CallContext;
use serde::Serialize;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};
use wasmtime::component::{Component, HasSelf, Linker, ResourceTable};
use wasmtime::{Config, Engine, InstanceAllocationStrategy, Store};
use wasmtime_wasi::{WasiCtx, WasiCtxView, WasiView};

/// Synchronous bindings of the tool world, for the synchronous floor only.
mod sync_bindings {
    wasmtime::component::bindgen!({
        path: "../../wit",
        world: "tool",
    });
}

/// `capsaga bench` arguments.
#[derive(Debug, Clone, clap::Args)]
pub struct BenchArgs {
    /// The component to call (`execute` with `{}`); a trivial one, e.g. the
    /// `time_now` tool.
    #[arg(long, default_value = "target/tools/time_now.wasm")]
    pub component: PathBuf,
    /// Arguments passed to `execute`, JSON text.
    #[arg(long, default_value = "{}")]
    pub args: String,
    /// Calls per batch for each wasm path (10 batches are run).
    #[arg(long, default_value_t = 200)]
    pub batch: u32,
    /// The `big_output` test component, for the peak-memory measurement
    /// (skipped when the file does not exist).
    #[arg(long, default_value = "target/test-components/big_output.wasm")]
    pub big_output: PathBuf,
}

const BATCHES: usize = 10;

/// One measured path, microseconds per call.
#[derive(Debug, Clone, Serialize)]
struct Figure {
    name: &'static str,
    us_per_call: f64,
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
}

/// Median of `BATCHES` batch means of `f`, microseconds per call, after one
/// warm-up batch.
async fn measure<F, Fut>(batch: u32, mut f: F) -> Result<f64, String>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<(), String>>,
{
    let batch = batch.max(1);
    for _ in 0..batch {
        f().await?;
    }
    let mut means = Vec::with_capacity(BATCHES);
    for _ in 0..BATCHES {
        let t0 = Instant::now();
        for _ in 0..batch {
            f().await?;
        }
        means.push(t0.elapsed().as_secs_f64() * 1e6 / f64::from(batch));
    }
    means.sort_by(f64::total_cmp);
    Ok(means[BATCHES / 2])
}

fn median_ms(mut v: Vec<Duration>) -> f64 {
    v.sort();
    v[v.len() / 2].as_secs_f64() * 1e3
}

/// Store data of the floors: an empty WASI context, nothing else.
struct FloorState {
    wasi: WasiCtx,
    table: ResourceTable,
}

impl FloorState {
    fn new() -> Self {
        FloorState {
            wasi: WasiCtx::builder().build(),
            table: ResourceTable::new(),
        }
    }
}

impl WasiView for FloorState {
    fn ctx(&mut self) -> WasiCtxView<'_> {
        WasiCtxView {
            ctx: &mut self.wasi,
            table: &mut self.table,
        }
    }
}

impl capsaga::tool::log::Host for FloorState {
    fn log(&mut self, _level: LogLevel, _message: String) {}
}
impl capsaga::tool::types::Host for FloorState {}
impl sync_bindings::capsaga::tool::log::Host for FloorState {
    fn log(&mut self, _level: sync_bindings::capsaga::tool::log::Level, _message: String) {}
}
impl sync_bindings::capsaga::tool::types::Host for FloorState {}

/// An engine with the pooling allocator sized like capsaga's, and fuel and
/// epoch interruption as asked.
fn floor_engine(instrumented: bool) -> Result<Engine, String> {
    let mut config = Config::new();
    config.wasm_component_model(true);
    config.consume_fuel(instrumented);
    config.epoch_interruption(instrumented);
    config.max_wasm_stack(engine::MAX_WASM_STACK_BYTES);
    // As in capsaga's engine: no WASI 0.3 concurrency state per store.
    config.concurrency_support(false);
    config.allocation_strategy(InstanceAllocationStrategy::Pooling(engine::pooling_config(
        &SandboxConfig::default(),
    )));
    Engine::new(&config).map_err(|e| format!("floor engine: {e:#}"))
}

fn wit_ctx() -> WitCallContext {
    WitCallContext {
        saga_id: "bench".into(),
        step_seq: 0,
        idempotency_key: "bench".into(),
        deadline_ms: u64::MAX,
        dry_run: false,
    }
}

async fn floor_sync(bytes: &[u8], args: &str, batch: u32) -> Result<f64, String> {
    let engine = floor_engine(false)?;
    let component = Component::from_binary(&engine, bytes).map_err(|e| format!("{e:#}"))?;
    let mut linker: Linker<FloorState> = Linker::new(&engine);
    wasmtime_wasi::p2::add_to_linker_sync(&mut linker).map_err(|e| format!("{e:#}"))?;
    sync_bindings::Tool::add_to_linker::<_, HasSelf<_>>(&mut linker, |s| s)
        .map_err(|e| format!("{e:#}"))?;
    let pre = sync_bindings::ToolPre::new(
        linker
            .instantiate_pre(&component)
            .map_err(|e| format!("{e:#}"))?,
    )
    .map_err(|e| format!("{e:#}"))?;
    let ctx = sync_bindings::capsaga::tool::types::CallContext {
        saga_id: "bench".into(),
        step_seq: 0,
        idempotency_key: "bench".into(),
        deadline_ms: u64::MAX,
        dry_run: false,
    };
    measure(batch, || {
        let r = (|| {
            let mut store = Store::new(&engine, FloorState::new());
            let tool = pre.instantiate(&mut store)?;
            tool.call_execute(&mut store, &ctx, args)
        })();
        async move {
            match r {
                Ok(Ok(_)) => Ok(()),
                Ok(Err(e)) => Err(format!("the tool failed: {}", e.message)),
                Err(e) => Err(format!("{e:#}")),
            }
        }
    })
    .await
}

async fn floor_async(
    bytes: &[u8],
    args: &str,
    batch: u32,
    instrumented: bool,
) -> Result<f64, String> {
    let engine = floor_engine(instrumented)?;
    let component = Component::from_binary(&engine, bytes).map_err(|e| format!("{e:#}"))?;
    let mut linker: Linker<FloorState> = Linker::new(&engine);
    wasmtime_wasi::p2::add_to_linker_async(&mut linker).map_err(|e| format!("{e:#}"))?;
    Tool::add_to_linker::<_, HasSelf<_>>(&mut linker, |s| s).map_err(|e| format!("{e:#}"))?;
    let pre = ToolPre::new(
        linker
            .instantiate_pre(&component)
            .map_err(|e| format!("{e:#}"))?,
    )
    .map_err(|e| format!("{e:#}"))?;
    let ctx = wit_ctx();
    measure(batch, || async {
        let mut store = Store::new(&engine, FloorState::new());
        if instrumented {
            store
                .set_fuel(Limits::DEFAULT.fuel)
                .map_err(|e| format!("{e:#}"))?;
            store.set_epoch_deadline(u64::MAX / 2);
        }
        let tool = pre
            .instantiate_async(&mut store)
            .await
            .map_err(|e| format!("{e:#}"))?;
        match tool.call_execute(&mut store, &ctx, args).await {
            Ok(Ok(_)) => Ok(()),
            Ok(Err(e)) => Err(format!("the tool failed: {}", e.message)),
            Err(e) => Err(format!("{e:#}")),
        }
    })
    .await
}

async fn through_capsaga(bytes: &[u8], args: &str, batch: u32) -> Result<(f64, String), String> {
    let sandbox = Sandbox::with_config(&SandboxConfig::default()).map_err(|e| e.to_string())?;
    let prepared = sandbox.prepare(bytes).map_err(|e| e.to_string())?;
    let limits = Limits::DEFAULT;
    let ctx = CallContext {
        saga_id: "bench".into(),
        step_seq: 0,
        idempotency_key: "bench".into(),
        deadline_ms: u64::MAX,
        dry_run: false,
    };
    let us = measure(batch, || async {
        let (res, _diag) = sandbox
            .call(CallRequest {
                tool: "bench",
                prepared: &prepared,
                grants: &[],
                limits: &limits,
                ctx: &ctx,
                args_json: args,
                op: &Op::Execute,
            })
            .await;
        res.map(|_| ()).map_err(|e| e.to_string())
    })
    .await?;
    let allocator = format!("{:?}", sandbox.allocator());
    Ok((us, allocator))
}

/// The same work as `time_now` in native Rust: read the clock, format
/// RFC 3339, serialize the JSON output.
fn native_time_now() -> String {
    let now = jiff::Timestamp::now();
    let unix_ms = now.as_millisecond();
    serde_json::json!({ "unix_ms": unix_ms, "rfc3339": now.to_string() }).to_string()
}

async fn native(batch: u32) -> Result<f64, String> {
    measure(batch.saturating_mul(50), || async {
        std::hint::black_box(native_time_now());
        Ok(())
    })
    .await
}

async fn spawn(batch: u32) -> Result<f64, String> {
    measure((batch / 4).max(10), || async {
        let status = std::process::Command::new("/bin/true")
            .status()
            .map_err(|e| format!("cannot spawn /bin/true: {e}"))?;
        if status.success() {
            Ok(())
        } else {
            Err(format!("/bin/true exited with {status}"))
        }
    })
    .await
}

async fn cold_start(bytes: &[u8]) -> Result<ColdStart, String> {
    let dir = std::env::temp_dir().join(format!("capsaga-bench-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let cached = SandboxConfig {
        compiled_cache: Some(dir.join("compiled")),
        ..SandboxConfig::default()
    };
    let result = async {
        let (mut without, mut with, mut compile, mut load) = (vec![], vec![], vec![], vec![]);
        // Fill the cache once.
        let s = Sandbox::with_config(&cached).map_err(|e| e.to_string())?;
        s.prepare_cached(bytes).map_err(|e| e.to_string())?;
        drop(s);
        for _ in 0..5 {
            let t0 = Instant::now();
            let s = Sandbox::with_config(&SandboxConfig::default()).map_err(|e| e.to_string())?;
            let t1 = Instant::now();
            s.prepare(bytes).map_err(|e| e.to_string())?;
            without.push(t0.elapsed());
            compile.push(t1.elapsed());
            drop(s);

            let t0 = Instant::now();
            let s = Sandbox::with_config(&cached).map_err(|e| e.to_string())?;
            let t1 = Instant::now();
            let (_, outcome) = s.prepare_cached(bytes).map_err(|e| e.to_string())?;
            with.push(t0.elapsed());
            load.push(t1.elapsed());
            if outcome != crate::sandbox::CacheOutcome::Hit {
                return Err(format!("the compiled cache was not hit: {outcome:?}"));
            }
        }
        Ok(ColdStart {
            without_cache_ms: median_ms(without),
            with_cache_ms: median_ms(with),
            compile_ms: median_ms(compile),
            cache_load_ms: median_ms(load),
        })
    }
    .await;
    let _ = std::fs::remove_dir_all(&dir);
    result
}

/// `VmRSS` and `VmHWM` (peak) of this process, bytes, from /proc.
fn rss() -> Option<(u64, u64)> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let field = |name: &str| {
        status
            .lines()
            .find(|l| l.starts_with(name))?
            .split_whitespace()
            .nth(1)?
            .parse::<u64>()
            .ok()
            .map(|kb| kb * 1024)
    };
    Some((field("VmRSS:")?, field("VmHWM:")?))
}

async fn peak_memory(path: &Path) -> Result<Option<PeakMemory>, String> {
    let Ok(bytes) = std::fs::read(path) else {
        return Ok(None);
    };
    let sandbox = Sandbox::with_config(&SandboxConfig::default()).map_err(|e| e.to_string())?;
    let prepared = sandbox.prepare(&bytes).map_err(|e| e.to_string())?;
    let limits = Limits::DEFAULT;
    let ctx = CallContext {
        saga_id: "bench".into(),
        step_seq: 0,
        idempotency_key: "bench".into(),
        deadline_ms: u64::MAX,
        dry_run: false,
    };
    // Reset the peak (Linux ≥ 4.0); without it the figure is the process's
    // lifetime peak and is reported as such.
    let _ = std::fs::write("/proc/self/clear_refs", "5");
    let Some((before, _)) = rss() else {
        return Ok(None);
    };
    let (res, _) = sandbox
        .call(CallRequest {
            tool: "big_output",
            prepared: &prepared,
            grants: &[],
            limits: &limits,
            ctx: &ctx,
            args_json: r#"{"mb":100}"#,
            op: &Op::Execute,
        })
        .await;
    let Some((_, peak)) = rss() else {
        return Ok(None);
    };
    let mb = |b: u64| b as f64 / 1e6;
    Ok(Some(PeakMemory {
        rss_before_mb: mb(before),
        peak_rss_mb: mb(peak),
        growth_mb: mb(peak.saturating_sub(before)),
        memory_cap_mb: mb(limits.memory_bytes),
        error: match res {
            Ok(_) => "none (the output was accepted)".into(),
            Err(e) => format!("{}: {}", e.kind, e.message),
        },
    }))
}

fn machine() -> String {
    let cpu = std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("model name"))
                .and_then(|l| l.split(':').nth(1))
                .map(|s| s.trim().to_string())
        })
        .unwrap_or_else(|| "unknown CPU".into());
    let cpus = std::thread::available_parallelism().map_or(0, |n| n.get());
    let kernel = std::fs::read_to_string("/proc/sys/kernel/osrelease")
        .map(|s| s.trim().to_string())
        .unwrap_or_default();
    let build = if cfg!(debug_assertions) {
        "debug build"
    } else {
        "release build"
    };
    format!("{cpus} x {cpu}, Linux {kernel}, {build}")
}

/// Run the benchmark and print the report.
pub(crate) async fn run(out: &Out, args: &BenchArgs) -> u8 {
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
            eprintln!("capsaga bench: {e}");
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
    let n = args.batch;
    let native_us = native(n).await?;
    let spawn_us = spawn(n).await?;
    let sync_us = floor_sync(&bytes, &args.args, n).await?;
    let async_us = floor_async(&bytes, &args.args, n, false).await?;
    let instrumented_us = floor_async(&bytes, &args.args, n, true).await?;
    let (capsaga_us, allocator) = through_capsaga(&bytes, &args.args, n).await?;
    let cold = cold_start(&bytes).await?;
    let peak = peak_memory(&args.big_output).await?;
    Ok(Report {
        machine: machine(),
        component: args.component.display().to_string(),
        component_bytes: bytes.len() as u64,
        allocator,
        calls_per_path: n * BATCHES as u32,
        per_call: vec![
            Figure {
                name: "native Rust function (same work as time_now)",
                us_per_call: native_us,
            },
            Figure {
                name: "bare Wasmtime, sync: InstancePre + pooling, instantiate + call",
                us_per_call: sync_us,
            },
            Figure {
                name: "bare Wasmtime, async",
                us_per_call: async_us,
            },
            Figure {
                name: "bare Wasmtime, async, fuel + epoch on",
                us_per_call: instrumented_us,
            },
            Figure {
                name: "capsaga Sandbox::call (fresh instance, execute, drop)",
                us_per_call: capsaga_us,
            },
            Figure {
                name: "process spawn (/bin/true)",
                us_per_call: spawn_us,
            },
        ],
        capsaga_vs_sync_floor: capsaga_us / sync_us,
        capsaga_vs_async_floor: capsaga_us / async_us,
        spawn_vs_capsaga: spawn_us / capsaga_us,
        cold_start: cold,
        peak_memory: peak,
    })
}

fn print_report(r: &Report) {
    println!("capsaga bench");
    println!("  machine:   {}", r.machine);
    println!(
        "  component: {} ({} bytes), execute {} calls per path, {} allocator",
        r.component,
        r.component_bytes,
        r.calls_per_path,
        r.allocator.to_lowercase()
    );
    let floor = r.per_call[1].us_per_call;
    println!();
    println!("  per call (median of {BATCHES} batch means)           µs/call   x sync floor");
    for f in &r.per_call {
        println!(
            "    {:<62} {:>9.2} {:>9.2}",
            f.name,
            f.us_per_call,
            f.us_per_call / floor
        );
    }
    println!();
    println!(
        "  capsaga call / bare Wasmtime floor: {:.2}x (sync floor), {:.2}x (async floor); goal <= 1.5x",
        r.capsaga_vs_sync_floor, r.capsaga_vs_async_floor
    );
    println!(
        "  process spawn / capsaga call:       {:.1}x; goal >= 20x",
        r.spawn_vs_capsaga
    );
    let c = &r.cold_start;
    println!();
    println!("  cold start (engine + component ready), median of 5:");
    println!(
        "    without compiled cache  {:>8.1} ms  (compile {:.1} ms)",
        c.without_cache_ms, c.compile_ms
    );
    println!(
        "    with compiled cache     {:>8.1} ms  (load {:.1} ms)   {:.1}x faster",
        c.with_cache_ms,
        c.cache_load_ms,
        c.without_cache_ms / c.with_cache_ms
    );
    if let Some(p) = &r.peak_memory {
        println!();
        println!("  peak RSS while big_output returns 100 MB (default limits):");
        println!(
            "    before {:.1} MB, peak {:.1} MB, growth {:.1} MB (guest linear memory included; cap {:.0} MB)",
            p.rss_before_mb, p.peak_rss_mb, p.growth_mb, p.memory_cap_mb
        );
        println!("    result: {}", p.error);
    }
}
