//! `capsaga-bench --group-commit`: saga steps per second at 1, 10 and 100
//! concurrent sagas, with `synchronous = FULL`, the state store's group
//! commit off (one sync per write) and on (one sync per batch of writes),
//! in the same run (DESIGN §8d).
//!
//! Each run is a fresh workspace in a temporary directory; the step is the
//! host built-in that does nothing (`bench --wal`'s), through the dispatch
//! door, so a step writes what a real one writes (BEGIN with its dry-run
//! pre-image, COMMIT, the chained log rows) and the figure is the log's,
//! not a tool's.

use super::wal::{Nop, workspace};
use capsaga::exit;
use capsaga::render::Out;
use capsaga_door::config::Config;
use capsaga_door::dispatch::{Args, Call, Dispatcher, Outcome, Scope};
use capsaga_door::host::Host;
use capsaga_store::sqlite::GroupCommit;
use serde::Serialize;
use serde_json::json;
use std::sync::Arc;
use std::time::Instant;

/// Concurrent sagas measured.
const CONCURRENCY: [usize; 3] = [1, 10, 100];

/// One run.
#[derive(Debug, Serialize)]
struct Run {
    sagas: usize,
    group_commit: bool,
    steps: u32,
    wall_s: f64,
    steps_per_s: f64,
}

/// The figures, and on/off per concurrency.
#[derive(Debug, Serialize)]
struct Report {
    runs: Vec<Run>,
    /// `(sagas, on / off)`.
    speedup: Vec<(usize, f64)>,
}

/// Run the benchmark, `steps` steps per run, and print the report.
pub(crate) async fn run(out: &Out, steps: u32) -> u8 {
    match measure_all(steps.max(100)).await {
        Ok(r) if out.json => {
            out.json(&r);
            exit::OK
        }
        Ok(r) => {
            outln!(
                "group commit: saga steps/s, synchronous = FULL, built-in no-op step through the door"
            );
            for run in &r.runs {
                outln!(
                    "  {:>3} concurrent sagas, group commit {:<3}: {:>6} steps in {:>6.2} s = {:>8.0} steps/s",
                    run.sagas,
                    if run.group_commit { "on" } else { "off" },
                    run.steps,
                    run.wall_s,
                    run.steps_per_s
                );
            }
            for (n, x) in &r.speedup {
                outln!("  {n:>3} sagas: on / off = {x:.2}x");
            }
            exit::OK
        }
        Err(e) => {
            errln!("capsaga-bench --group-commit: {e}");
            exit::INTERNAL
        }
    }
}

async fn measure_all(steps: u32) -> Result<Report, String> {
    let mut runs = Vec::new();
    let mut speedup = Vec::new();
    for n in CONCURRENCY {
        let off = measure(n, GroupCommit::Off, steps).await?;
        let on = measure(n, GroupCommit::On, steps).await?;
        speedup.push((n, on.steps_per_s / off.steps_per_s.max(1e-9)));
        runs.push(off);
        runs.push(on);
    }
    Ok(Report { runs, speedup })
}

/// `sagas` concurrent sagas sharing `steps` steps.
async fn measure(sagas: usize, mode: GroupCommit, steps: u32) -> Result<Run, String> {
    let dir = std::env::temp_dir().join(format!("capsaga-bench-gc-{}", uuid::Uuid::new_v4()));
    let r = measure_in(&dir, sagas, mode, steps).await;
    let _ = std::fs::remove_dir_all(&dir);
    r
}

async fn measure_in(
    dir: &std::path::Path,
    sagas: usize,
    mode: GroupCommit,
    steps: u32,
) -> Result<Run, String> {
    let config = Config::load(&workspace(dir)?).map_err(|e| e.to_string())?;
    let host = Host::with_group_commit(config, mode)
        .await
        .map_err(|e| e.to_string())?;
    host.registry
        .register_builtin(&host.sandbox, &host.config.policy, Arc::new(Nop))
        .map_err(|e| e.to_string())?;
    let door = Dispatcher::new(Arc::clone(&host));
    let per = (steps as usize).div_ceil(sagas) as u32;
    let started = Instant::now();
    let tasks: Vec<_> = (0..sagas)
        .map(|k| {
            let door = door.clone();
            tokio::spawn(async move {
                let mut saga = door
                    .start(Scope::Call, "bench --group-commit", None)
                    .await
                    .map_err(|e| e.to_string())?;
                for i in 0..per {
                    let args = json!({ "n": k as u32 * per + i });
                    let s = door
                        .submit(&mut saga, Call::new("bench_step", Args::Value(&args)))
                        .await
                        .map_err(|e| e.to_string())?;
                    if !matches!(s.outcome, Outcome::Committed { .. }) {
                        return Err(format!("step {i}: {:?}", s.outcome));
                    }
                }
                door.finish(&mut saga).await.map_err(|e| e.to_string())?;
                Ok::<(), String>(())
            })
        })
        .collect();
    for t in tasks {
        t.await.map_err(|e| e.to_string())??;
    }
    let wall_s = started.elapsed().as_secs_f64();
    let done = per * sagas as u32;
    Ok(Run {
        sagas,
        group_commit: mode == GroupCommit::On,
        steps: done,
        wall_s,
        steps_per_s: f64::from(done) / wall_s.max(1e-9),
    })
}
