//! Neurons through the host: `neuron_create` in the dispatch door (checks,
//! examples in fresh runner instances with no grants, the stored version
//! and its report, compensation), the operator's approval, active neurons
//! called through the door with exactly the granted capabilities, hash
//! pinning, and hostile submissions contained.
//!
//! Real parts only: the runner built by `scripts/build-components`, real
//! SQLite files, real files in temp dirs. The runner is compiled once per
//! test run into `target/neuron-runner-cache` (every host of this binary
//! loads it from there).

mod birth;
mod code_run;
mod files;
mod flow;
mod grants;
mod hostile;
mod list_changed;
mod names;
mod paused;
mod pinning;
mod untrusted;

use capsaga_door::dispatch::{Args, Call, Dispatcher, Outcome, Submitted};
use capsaga_door::host::Host;
use capsaga_door::neurons::operator::Coverage::{All, Subset};
use capsaga_store::Scope;
use capsaga_tests::TestWorkspace;
use capsaga_tests::neuron_rig::{cache_dir, runner_wasm};
use serde_json::{Value, json};
use std::sync::{Arc, OnceLock};

/// The `[neurons]` section of the test policies: the built runner, the
/// shared compiled cache, and `extra` lines.
pub fn neurons_section(extra: &str) -> Option<String> {
    let wasm = runner_wasm()?;
    Some(format!(
        "[neurons]\nenabled = true\nrunner = \"{}\"\nrunner_cache = \"{}\"\n{extra}\n",
        wasm.display(),
        cache_dir().display()
    ))
}

/// A workspace with the given components and policy body plus the
/// `[neurons]` section; `None` when the runner is not built and
/// `CAPSAGA_SKIP_RUNNER` is set.
pub fn workspace(components: &[&str], policy: &str, neurons: &str) -> Option<TestWorkspace> {
    let section = neurons_section(neurons)?;
    warm();
    Some(TestWorkspace::new(
        components,
        &format!("{policy}\n{section}"),
    ))
}

/// Compile the runner into the shared cache once, before any test's host
/// opens (the first host of the binary does it on a thread of its own).
fn warm() {
    static WARM: OnceLock<()> = OnceLock::new();
    WARM.get_or_init(|| {
        std::thread::spawn(|| {
            let Some(section) = neurons_section("") else {
                return;
            };
            let ws = TestWorkspace::new(&[], &section);
            capsaga_tests::block_on(async {
                let host = ws.host().await;
                let n = host.neurons.as_ref().expect("the runner loads");
                eprintln!(
                    "neuron runner {} loaded in {} ms ({:?})",
                    n.runner.hash, n.load_ms, n.runner.loaded
                );
            });
        })
        .join()
        .expect("warming the runner cache");
    });
}

/// A door on a freshly opened host of `ws`.
pub async fn door(ws: &TestWorkspace) -> (Arc<Host>, Dispatcher) {
    let host = ws.host().await;
    let door = Dispatcher::new(host.clone());
    (host, door)
}

/// One call as the only step of a new saga, which is then finished (or
/// aborted when it did not commit).
pub async fn call_one(door: &Dispatcher, tool: &str, args: &Value) -> Submitted {
    let mut saga = door.start(Scope::Call, "neurons test", None).await.unwrap();
    let out = door
        .submit(&mut saga, Call::new(tool, Args::Value(args)))
        .await
        .unwrap();
    match &out.outcome {
        Outcome::Committed { .. } | Outcome::ReadFailed { .. } => {
            let _ = door.finish(&mut saga).await;
        }
        _ => {
            let _ = door.abort(&mut saga).await;
        }
    }
    out
}

/// The committed output's data.
///
/// # Panics
/// When the call did not commit.
pub fn data(out: &Submitted) -> Value {
    match &out.outcome {
        Outcome::Committed { output, .. } => output.data.clone(),
        other => panic!("not committed: {other:#?}"),
    }
}

/// A CSV statistics neuron (the demo's): mean, min, max of a column.
pub fn csv_stats(examples: Value, capabilities: Value) -> Value {
    json!({
        "name": "csv_stats",
        "description": "Statistics (count, mean, min, max) of one numeric column of a CSV file.",
        "args_schema": {
            "type": "object", "additionalProperties": false,
            "required": ["path", "column"],
            "properties": {"path": {"type": "string"}, "column": {"type": "string"}}
        },
        "capabilities": capabilities,
        "source": CSV_STATS_SOURCE,
        "examples": examples,
    })
}

/// The source of [`csv_stats`].
pub const CSV_STATS_SOURCE: &str = r#"import csv, statistics
from capsaga import ToolError

def execute(args):
    try:
        f = open(args["path"], newline="")
    except FileNotFoundError:
        raise ToolError("not-found", "no such file: " + args["path"], "List the directory first.")
    with f:
        rows = list(csv.DictReader(f))
    if not rows or args["column"] not in rows[0]:
        raise ToolError("invalid-args", "no column " + args["column"], "Use one of the header's columns.")
    values = [float(r[args["column"]]) for r in rows]
    return {"count": len(values), "mean": statistics.fmean(values), "min": min(values), "max": max(values)}
"#;

/// Examples of [`csv_stats`] using a scratch file.
pub fn csv_examples() -> Value {
    json!([
        {"args": {"path": "$SCRATCH/s.csv", "column": "n"}, "files": {"s.csv": "n,m\n1,x\n2,y\n6,z\n"},
         "expect": {"count": 3, "mean": 3.0, "min": 1.0, "max": 6.0}},
        {"args": {"path": "$SCRATCH/s.csv", "column": "zz"}, "files": {"s.csv": "n\n1\n"},
         "expect_error": "invalid-args"}
    ])
}
