//! Neuron runner figures (issue 14), on the sandbox's engine configuration
//! (pooling allocator, epoch interruption, fuel) and its compiled cache. Run
//! with `cargo bench -p capsaga-tests --bench neuron_runner` after
//! `scripts/build-components`.
//!
//! Printed after criterion's report, all measured in this run:
//! - **one-time compile**: Cranelift compiling the runner component (about
//!   20 MB) on a fresh engine; skipped with `CAPSAGA_BENCH_COMPILE=0`;
//! - **cached cold start** (goal ≤ 300 ms to first call): a fresh engine,
//!   the compiled runner loaded from the on-disk cache (read, checksum,
//!   deserialize), linked, instantiated and called once;
//! - **per call** (goals: p50 ≤ 5 ms, p99 ≤ 20 ms): a fresh pre-initialised
//!   runner instance per call (store, instantiate, `execute` of a small
//!   neuron, drop), p50/p99 over interleaved rounds with a Rust tool call
//!   (`target/tools/time_now.wasm`) in the same process, and the ratio;
//!   the same for instantiation alone, for `meta` (instantiate, ask the host
//!   for the definition, return its meta: no neuron code) and for a
//!   CSV-statistics neuron, to show where the time goes.
//!
//! Criterion's groups measure the same per-call paths.

use capsaga_core::policy::Limits;
use capsaga_sandbox::Factors;
use capsaga_sandbox::bindings::ToolPre;
use capsaga_sandbox::{CompiledCache, SandboxConfig};
use capsaga_tests::neuron_rig::{
    Loaded, NeuronDefinition, Op, Rig, RunnerState, cache_dir, neuron, runner_wasm,
};
use criterion::Criterion;
use std::path::PathBuf;
use std::time::{Duration, Instant};
use wasmtime::component::Component;

const SMALL: &str = "def execute(args):\n    return {'sum': args['a'] + args['b']}\n";

const CSV_STATS: &str = "import csv, statistics\n\
def execute(args):\n    with open(args['path'], newline='') as f:\n        rows = list(csv.DictReader(f))\n    \
values = [float(r['x']) for r in rows]\n    \
return {'n': len(values), 'mean': statistics.fmean(values), 'stdev': statistics.stdev(values)}\n";

/// Rounds of the per-call summary.
const ROUNDS: usize = 400;

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

fn pct(v: &mut [f64], p: f64) -> f64 {
    v.sort_by(f64::total_cmp);
    let i = ((v.len() as f64 - 1.0) * p).round() as usize;
    v[i.min(v.len() - 1)]
}

struct Paths {
    time_now: PathBuf,
    csv_dir: tempfile::TempDir,
}

fn call_ms(
    rt: &tokio::runtime::Runtime,
    rig: &Rig,
    pre: Option<&ToolPre<RunnerState>>,
    def: &NeuronDefinition,
    grants: &[capsaga_core::capability::Capability],
    args: &str,
) -> f64 {
    let none = Factors::none();
    let t = Instant::now();
    let c = rt.block_on(async {
        match pre {
            Some(p) => {
                rig.call_pre(p, def, &Op::Execute, grants, &Limits::DEFAULT, args, &none)
                    .await
            }
            None => {
                rig.call(def, &Op::Execute, grants, &Limits::DEFAULT, args)
                    .await
            }
        }
    });
    let took = ms(t.elapsed());
    assert!(c.result.is_ok(), "call failed: {:?}\n{}", c.result, c.stdio);
    took
}

fn one_time_compile(wasm: &std::path::Path) -> Option<f64> {
    if std::env::var("CAPSAGA_BENCH_COMPILE").as_deref() == Ok("0") {
        return None;
    }
    let (engine, _) = capsaga_sandbox::engine::build(&SandboxConfig::default()).expect("engine");
    let bytes = std::fs::read(wasm).expect("runner");
    let t = Instant::now();
    let c = Component::from_binary(&engine, &bytes).expect("compile");
    let took = ms(t.elapsed());
    drop(c);
    Some(took)
}

/// Fresh engine → cache load → link → first call, in milliseconds:
/// (engine, deserialize, link, first call, total to first call).
fn cold_start(rt: &tokio::runtime::Runtime, wasm: &std::path::Path) -> [f64; 5] {
    let t0 = Instant::now();
    let (engine, _) = capsaga_sandbox::engine::build(&SandboxConfig::default()).expect("engine");
    let t_engine = ms(t0.elapsed());
    let bytes = std::fs::read(wasm).expect("runner");
    let hash = capsaga_core::idempotency::sha256_hex(&bytes);
    let t = Instant::now();
    let cache = CompiledCache::open(&cache_dir(), &engine).expect("cache");
    let component = cache
        .load(&engine, &hash)
        .expect("a trusted cache entry")
        .expect("the runner is in the cache (Rig::load stored it)");
    let t_load = ms(t.elapsed());
    let t = Instant::now();
    let rig = Rig::from_parts(engine, &component, Loaded::Cached(0), hash);
    let t_link = ms(t.elapsed());
    let t = Instant::now();
    call_ms(
        rt,
        &rig,
        None,
        &neuron("small", SMALL),
        &[],
        r#"{"a":1,"b":2}"#,
    );
    let t_call = ms(t.elapsed());
    [t_engine, t_load, t_link, t_call, ms(t0.elapsed())]
}

fn main() {
    let Some(wasm) = runner_wasm() else { return };
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let compile_ms = one_time_compile(&wasm);
    let rig = Rig::load(&wasm, &cache_dir());
    let paths = Paths {
        time_now: capsaga_tests::component("time_now"),
        csv_dir: tempfile::tempdir().expect("tempdir"),
    };
    let time_now = rig.prepare(&paths.time_now);
    let csv_root = paths.csv_dir.path().canonicalize().expect("canonical");
    let mut csv = String::from("x\n");
    for i in 0..1000 {
        csv.push_str(&format!("{}\n", i % 97));
    }
    std::fs::write(csv_root.join("d.csv"), csv).expect("csv");
    let csv_grants = vec![
        capsaga_core::capability::Capability::parse(&format!("fs:read:{}/**", csv_root.display()))
            .expect("grant"),
    ];
    let csv_args =
        serde_json::json!({"path": csv_root.join("d.csv").display().to_string()}).to_string();
    let small = neuron("small", SMALL);
    let csv_def = neuron("csv_stats", CSV_STATS);
    let tool_def = neuron("time_now", "");
    let args = r#"{"a":1,"b":2}"#;

    let mut c = Criterion::default()
        .warm_up_time(Duration::from_secs(2))
        .measurement_time(Duration::from_secs(4))
        .sample_size(30)
        .configure_from_args();
    let mut g = c.benchmark_group("neuron_call");
    g.bench_function("rust_tool_time_now_fresh_instance", |b| {
        b.iter(|| call_ms(&rt, &rig, Some(&time_now), &tool_def, &[], "{}"))
    });
    g.bench_function("runner_instantiate_only", |b| {
        b.iter(|| rt.block_on(rig.instantiate_only(&small)))
    });
    g.bench_function("neuron_small_fresh_instance", |b| {
        b.iter(|| call_ms(&rt, &rig, None, &small, &[], args))
    });
    g.bench_function("neuron_csv_stats_fresh_instance", |b| {
        b.iter(|| call_ms(&rt, &rig, None, &csv_def, &csv_grants, &csv_args))
    });
    g.finish();
    c.final_summary();

    // ---- summary: interleaved rounds in one process ----------------------------
    let (mut tool, mut inst, mut neu, mut stats) = (vec![], vec![], vec![], vec![]);
    let mut meta = vec![];
    for _ in 0..ROUNDS {
        let t = Instant::now();
        rt.block_on(rig.meta(&small));
        meta.push(ms(t.elapsed()));
        tool.push(call_ms(&rt, &rig, Some(&time_now), &tool_def, &[], "{}"));
        let t = Instant::now();
        rt.block_on(rig.instantiate_only(&small));
        inst.push(ms(t.elapsed()));
        neu.push(call_ms(&rt, &rig, None, &small, &[], args));
        stats.push(call_ms(&rt, &rig, None, &csv_def, &csv_grants, &csv_args));
    }
    let cold: Vec<[f64; 5]> = (0..5).map(|_| cold_start(&rt, &wasm)).collect();
    let med = |i: usize| {
        let mut v: Vec<f64> = cold.iter().map(|r| r[i]).collect();
        pct(&mut v, 0.5)
    };
    let (t50, t99) = (pct(&mut tool, 0.5), pct(&mut tool, 0.99));
    let (n50, n99) = (pct(&mut neu, 0.5), pct(&mut neu, 0.99));
    let (i50, i99) = (pct(&mut inst, 0.5), pct(&mut inst, 0.99));
    let (s50, s99) = (pct(&mut stats, 0.5), pct(&mut stats, 0.99));
    println!("\nneuron runner summary ({ROUNDS} interleaved rounds, fresh instance per call)");
    println!(
        "  runner component: {} bytes, sha256 {}",
        std::fs::metadata(&wasm).map(|m| m.len()).unwrap_or(0),
        rig.runner_hash
    );
    match compile_ms {
        Some(t) => println!("  one-time compile (Cranelift, fresh engine):   {t:9.0} ms"),
        None => println!("  one-time compile: skipped (CAPSAGA_BENCH_COMPILE=0)"),
    }
    println!("  runner for the calls below: {:?} (ms)", rig.loaded);
    println!(
        "  cached cold start to first call, median of 5:  {:9.1} ms  (goal <= 300 ms)\n    \
         engine {:.1} ms + cache load/deserialize {:.1} ms + link {:.1} ms + first call {:.1} ms",
        med(4),
        med(0),
        med(1),
        med(2),
        med(3)
    );
    println!("  Rust tool call (time_now):      p50 {t50:7.3} ms  p99 {t99:7.3} ms");
    println!("  runner instantiate only:        p50 {i50:7.3} ms  p99 {i99:7.3} ms");
    let (m50, m99) = (pct(&mut meta, 0.5), pct(&mut meta, 0.99));
    println!("  runner meta (no neuron code):   p50 {m50:7.3} ms  p99 {m99:7.3} ms");
    println!(
        "  neuron call (a + b):            p50 {n50:7.3} ms  p99 {n99:7.3} ms  (goals 5 / 20 ms)  = {:.1}x / {:.1}x the Rust tool",
        n50 / t50,
        n99 / t99
    );
    println!(
        "  neuron call (CSV stats, 1000 rows): p50 {s50:7.3} ms  p99 {s99:7.3} ms  = {:.1}x the Rust tool",
        s50 / t50
    );
}
