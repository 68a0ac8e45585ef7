//! `capsaga-bench neurons`: what a neuron costs, measured through the real
//! host and its door, against a Rust tool in the same run.
//!
//! - the one-time compile of the runner (`--compile`: into a fresh cache);
//! - a cached cold start: a host opened with the runner in the compiled
//!   cache, to the first neuron call's answer;
//! - source → callable: one `neuron_create` step (checks, two examples in
//!   fresh runner instances, storage, activation of a pure neuron,
//!   registration), then the neuron is in the catalog;
//! - a neuron call against a call of the Rust `time_now` tool: both through
//!   the door's dry-run mode (resolve, validate, a fresh instance per call;
//!   nothing logged, so the write-ahead log's fsyncs do not hide the
//!   sandbox), first call and p50/p99 of the steady state, as ratios (a
//!   neuron's first call includes the one-time compile of its bytecode in
//!   an instance of its own, see `sandbox::neuron`);
//! - the catalog the model sees, in estimated tokens, with 0, 10 and 100
//!   active neurons (with the `[neurons] catalog_tokens` cap, and what it
//!   would be without).

use capsaga::exit;
use capsaga::render::Out;
use capsaga_core::policy::Autonomy;
use capsaga_door::dispatch::{Args, Call, Dispatcher, Outcome, Scope};
use capsaga_door::host::Host;
use capsaga_door::neurons::catalog::entry_tokens;
use serde::Serialize;
use serde_json::json;
use std::path::{Path, PathBuf};
use std::time::Instant;

/// Options of `capsaga-bench neurons`.
#[derive(Debug, clap::Args)]
pub struct BenchNeuronsArgs {
    /// The runner component.
    #[arg(long, default_value = "target/neurons/neuron_runner.wasm")]
    pub runner: PathBuf,
    /// The compiled cache to load the runner from (and fill on a miss).
    #[arg(long, default_value = "target/neuron-runner-cache")]
    pub runner_cache: PathBuf,
    /// The Rust tool to compare with.
    #[arg(long, default_value = "target/tools/time_now.wasm")]
    pub baseline: PathBuf,
    /// Calls measured per path.
    #[arg(long, default_value_t = 200)]
    pub calls: usize,
    /// Also measure the one-time compile of the runner (into a fresh cache;
    /// about a minute on two cores).
    #[arg(long)]
    pub compile: bool,
}

#[derive(Debug, Serialize)]
struct Latency {
    first_ms: f64,
    p50_ms: f64,
    p99_ms: f64,
}

#[derive(Debug, Serialize)]
struct Report {
    runner_compile_ms: Option<u64>,
    cold_host_open_ms: f64,
    cold_runner_load_ms: u64,
    cold_to_first_neuron_call_ms: f64,
    source_to_callable_ms: Vec<f64>,
    source_to_callable_p50_ms: f64,
    rust_tool: Latency,
    neuron: Latency,
    neuron_vs_rust_first: f64,
    neuron_vs_rust_p50: f64,
    neuron_vs_rust_p99: f64,
    catalog_tokens: Vec<serde_json::Value>,
}

fn ms(t: Instant) -> f64 {
    t.elapsed().as_secs_f64() * 1000.0
}

fn pct(v: &mut [f64], p: f64) -> f64 {
    v.sort_by(f64::total_cmp);
    let rank = ((p / 100.0) * v.len() as f64).ceil() as usize;
    v.get(rank.clamp(1, v.len().max(1)) - 1)
        .copied()
        .unwrap_or(0.0)
}

fn abs(p: &Path) -> Result<PathBuf, String> {
    std::path::absolute(p).map_err(|e| format!("{}: {e}", p.display()))
}

/// A workspace: the baseline tool, neurons on with auto-activation.
fn workspace(dir: &Path, a: &BenchNeuronsArgs, cache: &Path) -> Result<PathBuf, String> {
    let tools = dir.join("tools");
    std::fs::create_dir_all(&tools).map_err(|e| e.to_string())?;
    std::fs::copy(&a.baseline, tools.join("time_now.wasm"))
        .map_err(|e| format!("{}: {e} (scripts/build-components)", a.baseline.display()))?;
    let config = dir.join("capsaga.toml");
    let text = format!(
        "home = \".\"\ntools_dir = \"tools\"\nstate_dir = \".capsaga\"\n[tools.time_now]\n[neurons]\nenabled = true\nauto_activate_pure = true\nrunner = \"{}\"\nrunner_cache = \"{}\"\n",
        abs(&a.runner)?.display(),
        cache.display()
    );
    std::fs::write(&config, text).map_err(|e| e.to_string())?;
    Ok(config)
}

fn neuron(name: &str) -> serde_json::Value {
    json!({
        "name": name,
        "description": format!("Adds two integers ({name})."),
        "args_schema": {"type": "object", "required": ["a", "b"], "additionalProperties": false,
            "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}}},
        "source": "def execute(args):\n    return args['a'] + args['b']\n",
        "examples": [{"args": {"a": 1, "b": 2}, "expect": 3}, {"args": {"a": -1, "b": 1}, "expect": 0}]
    })
}

async fn create(door: &Dispatcher, name: &str) -> Result<f64, String> {
    let started = Instant::now();
    let mut saga = door
        .start(Scope::Call, "bench-neurons", None)
        .await
        .map_err(|e| e.to_string())?;
    let args = neuron(name);
    let out = door
        .submit(&mut saga, Call::new("neuron_create", Args::Value(&args)))
        .await
        .map_err(|e| e.to_string())?;
    door.finish(&mut saga).await.map_err(|e| e.to_string())?;
    let t = ms(started);
    match out.outcome {
        Outcome::Committed { output, .. } if output.data["status"] == "active" => {}
        other => return Err(format!("neuron_create did not activate {name}: {other:?}")),
    }
    if door.host().registry.get(name).is_none() {
        return Err(format!("{name} is not callable"));
    }
    Ok(t)
}

async fn preview(door: &Dispatcher, tool: &str, args: &serde_json::Value) -> Result<f64, String> {
    let started = Instant::now();
    let out = door.dry_run(Call::new(tool, Args::Value(args))).await;
    let t = ms(started);
    match out.outcome {
        Outcome::Previewed { result: Ok(_), .. } => Ok(t),
        other => Err(format!("{tool}: {other:?}")),
    }
}

async fn latency(
    door: &Dispatcher,
    tool: &str,
    args: &serde_json::Value,
    n: usize,
) -> Result<Latency, String> {
    let first_ms = preview(door, tool, args).await?;
    let mut v = Vec::with_capacity(n);
    for _ in 0..n {
        v.push(preview(door, tool, args).await?);
    }
    Ok(Latency {
        first_ms,
        p50_ms: pct(&mut v, 50.0),
        p99_ms: pct(&mut v, 99.0),
    })
}

fn catalog_tokens(door: &Dispatcher) -> (usize, usize, usize) {
    let offered = door.catalog(Autonomy::Autonomous);
    let all: usize = door
        .host()
        .registry
        .tools()
        .iter()
        .map(|t| entry_tokens(t))
        .sum();
    let shown: usize = offered.iter().map(|t| entry_tokens(t)).sum();
    let neurons = offered
        .iter()
        .filter(|t| capsaga_door::neurons::is_neuron(t))
        .count();
    (shown, all, neurons)
}

async fn run_inner(a: &BenchNeuronsArgs) -> Result<Report, String> {
    let dir = tempfile_dir()?;
    let cache = abs(&a.runner_cache)?;
    let runner_compile_ms = if a.compile {
        let fresh = dir.join("fresh-cache");
        let config = workspace(&dir.join("compile"), a, &fresh)?;
        let host = Host::open(&config).await.map_err(|e| e.to_string())?;
        host.neurons.as_ref().map(|n| n.load_ms)
    } else {
        None
    };
    // Fill the shared cache first (a miss compiles) and store one neuron;
    // then measure a cold start that loads both, to the neuron's answer.
    let config = workspace(&dir.join("ws"), a, &cache)?;
    {
        let host = Host::open(&config).await.map_err(|e| e.to_string())?;
        if host.neurons.is_none() {
            return Err(
                "the neuron runner did not load (see the log; scripts/build-components builds it)"
                    .into(),
            );
        }
        let door = Dispatcher::new(host);
        create(&door, "add_first").await?;
    }
    let args = json!({"a": 2, "b": 3});
    let started = Instant::now();
    let host = Host::open(&config).await.map_err(|e| e.to_string())?;
    let cold_host_open_ms = ms(started);
    let cold_runner_load_ms = host.neurons.as_ref().map(|n| n.load_ms).unwrap_or(0);
    let door = Dispatcher::new(host);
    preview(&door, "add_first", &args).await?;
    let cold_to_first_neuron_call_ms = ms(started);
    let (t0, _, _) = {
        let ws0 = workspace(&dir.join("ws0"), a, &cache)?;
        let h0 = Host::open(&ws0).await.map_err(|e| e.to_string())?;
        catalog_tokens(&Dispatcher::new(h0))
    };
    let mut s2c = Vec::new();
    for i in 0..5 {
        s2c.push(create(&door, &neuron_name(i)).await?);
    }
    let source_to_callable_p50_ms = pct(&mut s2c.clone(), 50.0);
    let rust_tool = latency(&door, "time_now", &json!({}), a.calls).await?;
    let neuron = latency(&door, &neuron_name(0), &args, a.calls).await?;
    for i in 5..9 {
        create(&door, &neuron_name(i)).await?;
    }
    let (t10, a10, n10) = catalog_tokens(&door);
    for i in 9..99 {
        create(&door, &neuron_name(i)).await?;
    }
    let (t100, a100, n100) = catalog_tokens(&door);
    let _ = std::fs::remove_dir_all(&dir);
    Ok(Report {
        runner_compile_ms,
        cold_host_open_ms,
        cold_runner_load_ms,
        cold_to_first_neuron_call_ms,
        source_to_callable_ms: s2c,
        source_to_callable_p50_ms,
        neuron_vs_rust_first: neuron.first_ms / rust_tool.first_ms.max(1e-9),
        neuron_vs_rust_p50: neuron.p50_ms / rust_tool.p50_ms.max(1e-9),
        neuron_vs_rust_p99: neuron.p99_ms / rust_tool.p99_ms.max(1e-9),
        rust_tool,
        neuron,
        catalog_tokens: vec![
            json!({"active_neurons": 0, "catalog_tokens": t0}),
            json!({"active_neurons": 10, "catalog_tokens": t10, "uncapped_tokens": a10, "neurons_shown": n10}),
            json!({"active_neurons": 100, "catalog_tokens": t100, "uncapped_tokens": a100, "neurons_shown": n100}),
        ],
    })
}

fn tempfile_dir() -> Result<PathBuf, String> {
    let dir = std::env::temp_dir().join(format!("capsaga-bench-neurons-{}", uuid::Uuid::new_v4()));
    std::fs::create_dir_all(&dir).map_err(|e| e.to_string())?;
    dir.canonicalize().map_err(|e| e.to_string())
}

/// Run the benchmark and print its figures.
pub async fn run(out: &Out, a: &BenchNeuronsArgs) -> u8 {
    match run_inner(a).await {
        Ok(r) if out.json => {
            out.json(&r);
            exit::OK
        }
        Ok(r) => {
            if let Some(c) = r.runner_compile_ms {
                println!("runner compile (one time, cache miss)      {c} ms");
            }
            println!(
                "cached cold start: host open               {:.1} ms (runner loaded in {} ms)",
                r.cold_host_open_ms, r.cold_runner_load_ms
            );
            println!(
                "cached cold start to first neuron answer   {:.1} ms",
                r.cold_to_first_neuron_call_ms
            );
            println!(
                "source → callable (neuron_create, 2 examples, activation)  p50 {:.1} ms  {:?}",
                r.source_to_callable_p50_ms,
                r.source_to_callable_ms
                    .iter()
                    .map(|x| (x * 10.0).round() / 10.0)
                    .collect::<Vec<_>>()
            );
            println!(
                "Rust tool call (time_now, door dry-run)    first {:.2} ms  p50 {:.2} ms  p99 {:.2} ms",
                r.rust_tool.first_ms, r.rust_tool.p50_ms, r.rust_tool.p99_ms
            );
            println!(
                "neuron call (runner, door dry-run)         first {:.2} ms  p50 {:.2} ms  p99 {:.2} ms",
                r.neuron.first_ms, r.neuron.p50_ms, r.neuron.p99_ms
            );
            println!(
                "neuron / Rust tool                         first {:.1}×  p50 {:.1}×  p99 {:.1}×",
                r.neuron_vs_rust_first, r.neuron_vs_rust_p50, r.neuron_vs_rust_p99
            );
            for c in &r.catalog_tokens {
                println!(
                    "catalog with {:>3} active neurons: {}",
                    c["active_neurons"], c
                );
            }
            exit::OK
        }
        Err(e) => {
            eprintln!("capsaga-bench neurons: {e}");
            exit::INTERNAL
        }
    }
}

/// The bench's `i`-th neuron name, `add_` and `i` in base ten written with
/// letters that the name check's skeleton keeps apart (`f h j k p q t u x
/// y` for 0-9): digits themselves fold together (`6` and `8` read alike),
/// and a neuron whose name reads like another's is refused.
fn neuron_name(i: usize) -> String {
    const DIGITS: [char; 10] = ['f', 'h', 'j', 'k', 'p', 'q', 't', 'u', 'x', 'y'];
    let letters: String = i
        .to_string()
        .bytes()
        .map(|d| DIGITS[usize::from(d - b'0')])
        .collect();
    format!("add_{letters}")
}

#[cfg(test)]
mod tests {
    use super::neuron_name;
    use capsaga_core::neuron::name::{check, skeleton};

    #[test]
    fn the_bench_neuron_names_pass_the_name_check_together() {
        let mut taken = vec!["add_first".to_string(), "time_now".to_string()];
        for i in 0..100 {
            let name = neuron_name(i);
            assert!(
                check(&name, taken.iter().map(String::as_str)).is_ok(),
                "{name} refused beside {taken:?}"
            );
            taken.push(name);
        }
        let mut skeletons: Vec<String> = taken.iter().map(|n| skeleton(n)).collect();
        skeletons.sort();
        skeletons.dedup();
        assert_eq!(skeletons.len(), taken.len());
        // What the bench used before: digits fold together.
        assert!(check("add_8", ["add_6"]).is_err());
    }
}
