//! `capsaga bench --pg`: saga steps per second on a shared PostgreSQL
//! store at 1, 10 and 100 concurrent sagas spread over 1, 2 and 3 hosts,
//! next to SQLite with group commit and to the floor of one durable
//! PostgreSQL commit, all measured in the same run (issue 25).
//!
//! The database is `--pg-url` (the password from the environment), or a
//! throw-away cluster this command starts and stops (`initdb` + `pg_ctl`
//! in a temp dir, Debian's `postgresql` package). The hosts are separate
//! [`Host`]s in this process, each with its own pool, batching writer and
//! lease, on a fresh database per host count (so several hosts' writers
//! contend on the one log as separate machines would, but share this
//! machine's cores). The step is the no-op built-in of `bench --wal`
//! through the door: a step writes what a real one writes (BEGIN with its
//! pre-image, COMMIT, the chained log rows).
//!
//! Reported: steps/s of every run; a step's latency at 1 saga against two
//! durable commits (a step is a BEGIN and a COMMIT); 3 hosts / 1 host at 100
//! sagas; the batching writer's effect (batches of 1 at 100 sagas, 1
//! host). Nothing is asserted.

use super::exit;
use super::render::Out;
use super::wal::{Nop, workspace};
use crate::config::Config;
use crate::dispatch::{Args, Call, Dispatcher, Outcome};
use crate::host::Host;
use crate::store::Origin;
use crate::store::postgres::harness::Cluster;
use crate::store::postgres::{PgOptions, PgStore};
use crate::store::sqlite::GroupCommit;
use crate::store_choice::StoreChoice;
use serde::Serialize;
use serde_json::json;
use std::sync::Arc;
use std::time::Instant;

const CONCURRENCY: [usize; 3] = [1, 10, 100];
const HOSTS: [usize; 3] = [1, 2, 3];

/// One run.
#[derive(Debug, Serialize)]
struct Run {
    store: &'static str,
    hosts: usize,
    sagas: usize,
    batching: bool,
    steps: u32,
    wall_s: f64,
    steps_per_s: f64,
}

/// The figures.
#[derive(Debug, Serialize)]
struct Report {
    /// Mean of one durable commit (an UPDATE in its own transaction), µs.
    floor_commit_us: f64,
    runs: Vec<Run>,
    /// Mean step time at 1 saga on 1 host / (2 × the floor).
    step_vs_two_commits: f64,
    /// steps/s at 100 sagas: 3 hosts / 1 host.
    three_hosts_vs_one_at_100: f64,
    /// steps/s at 100 sagas on 1 host: batching on / off.
    batching_on_vs_off_at_100: f64,
}

/// Run the benchmark (`steps` per run) against `url`, or a cluster of its
/// own; print the report.
pub(crate) async fn run(out: &Out, url: Option<&str>, steps: u32) -> u8 {
    let cluster;
    let base = match url {
        Some(u) => Base::Given(u.to_string()),
        None => match Cluster::start() {
            Ok(Some(c)) => {
                cluster = c;
                Base::Cluster(&cluster)
            }
            Ok(None) => {
                errln!(
                    "capsaga bench --pg: PostgreSQL is not installed (apt-get install postgresql), and no --pg-url was given"
                );
                return exit::CONFIG;
            }
            Err(e) => {
                errln!("capsaga bench --pg: PostgreSQL did not start: {e}");
                return exit::INTERNAL;
            }
        },
    };
    match measure_all(&base, steps.max(100)).await {
        Ok(r) if out.json => {
            out.json(&r);
            exit::OK
        }
        Ok(r) => {
            outln!(
                "shared store: saga steps/s, built-in no-op step through the door; one durable PostgreSQL commit = {:.0} us",
                r.floor_commit_us
            );
            for run in &r.runs {
                outln!(
                    "  {:<8} {} host{} {:>3} sagas, batching {:<3}: {:>6} steps in {:>6.2} s = {:>7.0} steps/s",
                    run.store,
                    run.hosts,
                    if run.hosts == 1 { " " } else { "s" },
                    run.sagas,
                    if run.batching { "on" } else { "off" },
                    run.steps,
                    run.wall_s,
                    run.steps_per_s
                );
            }
            outln!(
                "  a step at 1 saga = {:.2} x two durable commits; 3 hosts / 1 host at 100 sagas = {:.2}x; batching on / off at 100 sagas = {:.2}x",
                r.step_vs_two_commits,
                r.three_hosts_vs_one_at_100,
                r.batching_on_vs_off_at_100
            );
            exit::OK
        }
        Err(e) => {
            errln!("capsaga bench --pg: {e}");
            exit::INTERNAL
        }
    }
}

enum Base<'a> {
    Given(String),
    Cluster(&'a Cluster),
}

impl Base<'_> {
    /// A fresh database (for a cluster of our own), or the given one.
    fn database(&self) -> Result<String, String> {
        match self {
            Base::Given(u) => Ok(u.clone()),
            Base::Cluster(c) => c.fresh_database(),
        }
    }
}

async fn measure_all(base: &Base<'_>, steps: u32) -> Result<Report, String> {
    let floor_db = base.database()?;
    let floor = PgStore::open(&floor_db, &PgOptions::default())
        .await
        .map_err(|e| e.to_string())?
        .commit_floor_us(200)
        .await
        .map_err(|e| e.to_string())?;
    let mut runs = Vec::new();
    for hosts in HOSTS {
        for sagas in CONCURRENCY {
            runs.push(measure(base, hosts, sagas, GroupCommit::On, steps).await?);
        }
    }
    runs.push(measure(base, 1, 100, GroupCommit::Off, steps).await?);
    for sagas in CONCURRENCY {
        runs.push(sqlite(sagas, steps).await?);
    }
    let rate = |store: &str, hosts: usize, sagas: usize, batching: bool| {
        runs.iter()
            .find(|r| {
                r.store == store && r.hosts == hosts && r.sagas == sagas && r.batching == batching
            })
            .map_or(0.0, |r| r.steps_per_s)
    };
    let one = rate("postgres", 1, 1, true);
    Ok(Report {
        floor_commit_us: floor,
        step_vs_two_commits: (1e6 / one.max(1e-9)) / (2.0 * floor),
        three_hosts_vs_one_at_100: rate("postgres", 3, 100, true)
            / rate("postgres", 1, 100, true).max(1e-9),
        batching_on_vs_off_at_100: rate("postgres", 1, 100, true)
            / rate("postgres", 1, 100, false).max(1e-9),
        runs,
    })
}

/// `sagas` concurrent sagas over `hosts` hosts on a fresh database.
async fn measure(
    base: &Base<'_>,
    hosts: usize,
    sagas: usize,
    mode: GroupCommit,
    steps: u32,
) -> Result<Run, String> {
    let url = base.database()?;
    let dir = std::env::temp_dir().join(format!("capsaga-bench-pg-{}", uuid::Uuid::new_v4()));
    let r = async {
        let mut config = Config::load(&workspace(&dir)?).map_err(|e| e.to_string())?;
        config.store = StoreChoice::Postgres {
            url,
            lease_ms: crate::store_choice::DEFAULT_LEASE_MS,
        };
        let mut doors = Vec::new();
        for _ in 0..hosts {
            let host = Host::with_group_commit(config.clone(), mode)
                .await
                .map_err(|e| e.to_string())?;
            host.registry
                .register_builtin(&host.sandbox, &host.config.policy, Arc::new(Nop))
                .map_err(|e| e.to_string())?;
            doors.push(Dispatcher::new(host));
        }
        let (wall_s, done) = drive(&doors, sagas, steps).await?;
        Ok(Run {
            store: "postgres",
            hosts,
            sagas,
            batching: mode == GroupCommit::On,
            steps: done,
            wall_s,
            steps_per_s: f64::from(done) / wall_s.max(1e-9),
        })
    }
    .await;
    let _ = std::fs::remove_dir_all(&dir);
    r
}

/// SQLite with group commit, the same steps, in the same run.
async fn sqlite(sagas: usize, steps: u32) -> Result<Run, String> {
    let dir = std::env::temp_dir().join(format!("capsaga-bench-pg-{}", uuid::Uuid::new_v4()));
    let r = async {
        let config = Config::load(&workspace(&dir)?).map_err(|e| e.to_string())?;
        let host = Host::with_group_commit(config, GroupCommit::On)
            .await
            .map_err(|e| e.to_string())?;
        host.registry
            .register_builtin(&host.sandbox, &host.config.policy, Arc::new(Nop))
            .map_err(|e| e.to_string())?;
        let (wall_s, done) = drive(&[Dispatcher::new(host)], sagas, steps).await?;
        Ok(Run {
            store: "sqlite",
            hosts: 1,
            sagas,
            batching: true,
            steps: done,
            wall_s,
            steps_per_s: f64::from(done) / wall_s.max(1e-9),
        })
    }
    .await;
    let _ = std::fs::remove_dir_all(&dir);
    r
}

/// `sagas` sagas sharing `steps` steps, saga `k` on host `k % hosts`; the
/// wall time and the steps done.
async fn drive(doors: &[Dispatcher], sagas: usize, steps: u32) -> Result<(f64, u32), String> {
    let per = (steps as usize).div_ceil(sagas) as u32;
    let started = Instant::now();
    let tasks: Vec<_> = (0..sagas)
        .map(|k| {
            let door = doors[k % doors.len()].clone();
            tokio::spawn(async move {
                let mut saga = door
                    .start(Origin::Call, "bench --pg", None)
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
    Ok((started.elapsed().as_secs_f64(), per * sagas as u32))
}
