//! `capsaga-bench --pg`: saga steps per second on a shared PostgreSQL
//! store at 1, 10 and 100 concurrent sagas spread over 1, 2 and 3 hosts,
//! next to SQLite with group commit and to the floor of one durable
//! PostgreSQL commit, all measured in the same run (issue 25).
//!
//! The database is `--pg-url` (the password from the environment), or a
//! throw-away cluster this command starts and stops (`initdb` + `pg_ctl`
//! in a temp dir, Debian's `postgresql` package). The hosts are separate
//! [`Host`]s in this process, each with its own pool, batching writer,
//! chain of the log and lease, on a fresh database per run (so several
//! hosts' writers meet in the database as separate machines' would, but
//! share this machine's cores). The step is the no-op built-in of `bench --wal`
//! through the door: a step writes what a real one writes (BEGIN with its
//! pre-image, COMMIT, the chained log rows).
//!
//! Reported: steps/s of every run, with the CPU this process used (the
//! hosts) and how many of the machine's cores were busy meanwhile (the
//! hosts, the server and anything else running: when that is near the
//! core count, the run was bound by CPU, not by the store); a step's
//! latency at 1 saga against two durable commits (a step is a BEGIN and a
//! COMMIT); 3 hosts / 1 host at 100 sagas, as the median of [`ROUNDS`]
//! pairs run one after the other (a 1-host run, then a 3-host run), so
//! that a disk or a machine whose speed drifts during the run (other work
//! on it) weighs on both sides of each pair alike, and the same pairs with
//! every host appending to one shared chain of the log (the design before
//! PostgreSQL migration 3, run alternately with the per-host pairs: the
//! effect of a chain per host, in the same run); the batching writer's
//! effect (batches of 1 at 100 sagas, 1 host). Nothing is asserted.

use super::wal::{Nop, workspace};
use capsaga::exit;
use capsaga::render::Out;
use capsaga_door::config::Config;
use capsaga_door::dispatch::{Args, Call, Dispatcher, Outcome, Scope};
use capsaga_door::host::Host;
use capsaga_door::store_choice::StoreChoice;
use capsaga_pg_harness::Cluster;
use capsaga_store::postgres::{PgOptions, PgStore};
use capsaga_store::sqlite::GroupCommit;
use serde::Serialize;
use serde_json::json;
use std::sync::Arc;
use std::time::Instant;

const CONCURRENCY: [usize; 3] = [1, 10, 100];
const HOSTS: [usize; 3] = [1, 2, 3];
/// Pairs of 1-host and 3-host runs at 100 sagas for their ratio.
const ROUNDS: usize = 3;

/// CPU time of this process so far, seconds (user + system, from
/// `/proc/self/stat`; 0 where there is none).
fn process_cpu_s() -> f64 {
    let Ok(stat) = std::fs::read_to_string("/proc/self/stat") else {
        return 0.0;
    };
    // Fields after the command's closing parenthesis: state is field 3,
    // utime 14 and stime 15, in clock ticks (USER_HZ, 100 on Linux).
    let Some(rest) = stat.rsplit_once(')').map(|(_, r)| r) else {
        return 0.0;
    };
    let f: Vec<&str> = rest.split_whitespace().collect();
    let tick = |i: usize| f.get(i).and_then(|v| v.parse::<f64>().ok()).unwrap_or(0.0);
    (tick(11) + tick(12)) / 100.0
}

/// The machine's busy and total CPU time so far (ticks, all cores, from
/// `/proc/stat`), and its core count.
fn machine_ticks() -> (f64, f64, f64) {
    let Ok(stat) = std::fs::read_to_string("/proc/stat") else {
        return (0.0, 0.0, 1.0);
    };
    let cores = stat
        .lines()
        .filter(|l| l.starts_with("cpu") && !l.starts_with("cpu "))
        .count()
        .max(1) as f64;
    let Some(first) = stat.lines().next() else {
        return (0.0, 0.0, cores);
    };
    let v: Vec<f64> = first
        .split_whitespace()
        .skip(1)
        .filter_map(|x| x.parse().ok())
        .collect();
    let total: f64 = v.iter().take(8).sum();
    // idle and iowait.
    let idle = v.get(3).copied().unwrap_or(0.0) + v.get(4).copied().unwrap_or(0.0);
    (total - idle, total, cores)
}

/// CPU use over a run.
struct CpuSpan {
    process: f64,
    machine: (f64, f64, f64),
}

impl CpuSpan {
    fn start() -> CpuSpan {
        CpuSpan {
            process: process_cpu_s(),
            machine: machine_ticks(),
        }
    }

    /// (this process's CPU seconds, busy cores of the machine).
    fn end(&self) -> (f64, f64) {
        let (busy, total, cores) = machine_ticks();
        let d_total = (total - self.machine.1).max(1.0);
        (
            process_cpu_s() - self.process,
            (busy - self.machine.0) / d_total * cores,
        )
    }
}

/// What a run of concurrent sagas did, and in how long.
#[derive(Debug, Serialize)]
pub(crate) struct Timing {
    pub(crate) steps: u32,
    pub(crate) wall_s: f64,
    pub(crate) steps_per_s: f64,
    /// CPU seconds this process (the hosts) used during the run.
    pub(crate) cpu_s: f64,
    /// Cores of the machine busy on average during the run (of
    /// `machine_cores`).
    pub(crate) busy_cores: f64,
}

impl Timing {
    /// Time `run` (its wall time in seconds and the steps it did), with the
    /// CPU it and the machine used meanwhile.
    ///
    /// # Errors
    /// `run`'s.
    pub(crate) async fn of(
        run: impl std::future::Future<Output = Result<(f64, u32), String>>,
    ) -> Result<Timing, String> {
        let cpu = CpuSpan::start();
        let (wall_s, steps) = run.await?;
        let (cpu_s, busy_cores) = cpu.end();
        Ok(Timing {
            steps,
            wall_s,
            steps_per_s: f64::from(steps) / wall_s.max(1e-9),
            cpu_s,
            busy_cores,
        })
    }
}

/// One run.
#[derive(Debug, Serialize)]
struct Run {
    store: &'static str,
    /// The log's chains (SQLite: one).
    chains: Chains,
    hosts: usize,
    sagas: usize,
    batching: bool,
    #[serde(flatten)]
    timing: Timing,
}

/// The figures.
#[derive(Debug, Serialize)]
struct Report {
    /// Mean of one durable commit (an UPDATE in its own transaction), µs.
    floor_commit_us: f64,
    runs: Vec<Run>,
    /// Mean step time at 1 saga on 1 host / (2 × the floor).
    step_vs_two_commits: f64,
    /// The machine's cores.
    machine_cores: f64,
    /// steps/s at 100 sagas, 3 hosts / 1 host: the median of the pairs.
    three_hosts_vs_one_at_100: f64,
    /// Each pair's ratio, in the order run.
    three_vs_one_pairs: Vec<f64>,
    /// The same with every host appending to one shared chain of the log
    /// (the design before PostgreSQL migration 3: all hosts' batches take
    /// turns on its head row), pairs run alternately with the above.
    three_hosts_vs_one_at_100_one_chain: f64,
    /// Its pairs.
    three_vs_one_pairs_one_chain: Vec<f64>,
    /// steps/s at 100 sagas on 1 host: batching on / off.
    batching_on_vs_off_at_100: f64,
}

/// Run the benchmark (`steps` per run) against `url`, or a cluster of its
/// own; print the report.
pub(crate) async fn run(out: &Out, url: Option<&str>, steps: u32) -> u8 {
    let base = match Base::open(url, "--pg") {
        Ok(b) => b,
        Err(code) => return code,
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
                    "  {:<8} {} host{} {:>3} sagas, batching {:<3}: {:>6} steps in {:>6.2} s = {:>7.0} steps/s; hosts' CPU {:>5.2} s, {:.2} of {} cores busy",
                    run.store,
                    run.hosts,
                    if run.hosts == 1 { " " } else { "s" },
                    run.sagas,
                    if run.batching { "on" } else { "off" },
                    run.timing.steps,
                    run.timing.wall_s,
                    run.timing.steps_per_s,
                    run.timing.cpu_s,
                    run.timing.busy_cores,
                    r.machine_cores
                );
            }
            let pairs: Vec<String> = r
                .three_vs_one_pairs
                .iter()
                .map(|p| format!("{p:.2}"))
                .collect();
            let pairs_one: Vec<String> = r
                .three_vs_one_pairs_one_chain
                .iter()
                .map(|p| format!("{p:.2}"))
                .collect();
            outln!(
                "  a step at 1 saga = {:.2} x two durable commits; batching on / off at 100 sagas = {:.2}x",
                r.step_vs_two_commits,
                r.batching_on_vs_off_at_100
            );
            outln!(
                "  3 hosts / 1 host at 100 sagas: a chain per host {:.2}x (median of pairs {}); one chain for all {:.2}x (pairs {})",
                r.three_hosts_vs_one_at_100,
                pairs.join(", "),
                r.three_hosts_vs_one_at_100_one_chain,
                pairs_one.join(", ")
            );
            exit::OK
        }
        Err(e) => {
            errln!("capsaga-bench --pg: {e}");
            exit::INTERNAL
        }
    }
}

/// Where the runs' databases come from: the one given, or a throw-away
/// cluster of the run's own (stopped when dropped).
pub(crate) enum Base {
    Given(String),
    Cluster(Cluster),
}

impl Base {
    /// `url`, or a cluster started now; the exit code when none starts
    /// (said on stderr, naming the benchmark `mode`).
    pub(crate) fn open(url: Option<&str>, mode: &str) -> Result<Base, u8> {
        match url {
            Some(u) => Ok(Base::Given(u.to_string())),
            None => match Cluster::start() {
                Ok(Some(c)) => Ok(Base::Cluster(c)),
                Ok(None) => {
                    errln!(
                        "capsaga-bench {mode}: PostgreSQL is not installed (apt-get install postgresql), and no --pg-url was given"
                    );
                    Err(exit::CONFIG)
                }
                Err(e) => {
                    errln!("capsaga-bench {mode}: PostgreSQL did not start: {e}");
                    Err(exit::INTERNAL)
                }
            },
        }
    }

    /// A fresh database (for a cluster of our own), or the given one.
    pub(crate) fn database(&self) -> Result<String, String> {
        match self {
            Base::Given(u) => Ok(u.clone()),
            Base::Cluster(c) => c.fresh_database(),
        }
    }
}

async fn measure_all(base: &Base, steps: u32) -> Result<Report, String> {
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
            runs.push(measure(base, hosts, sagas, GroupCommit::On, Chains::PerHost, steps).await?);
        }
    }
    runs.push(measure(base, 1, 100, GroupCommit::Off, Chains::PerHost, steps).await?);
    let mut pairs = Vec::new();
    let mut pairs_one_chain = Vec::new();
    for _ in 0..ROUNDS {
        for (chains, into) in [
            (Chains::PerHost, &mut pairs),
            (Chains::One, &mut pairs_one_chain),
        ] {
            let one = measure(base, 1, 100, GroupCommit::On, chains, steps).await?;
            let three = measure(base, 3, 100, GroupCommit::On, chains, steps).await?;
            into.push(three.timing.steps_per_s / one.timing.steps_per_s.max(1e-9));
        }
    }
    for sagas in CONCURRENCY {
        runs.push(sqlite(sagas, steps).await?);
    }
    let rate = |store: &str, hosts: usize, sagas: usize, batching: bool| {
        runs.iter()
            .find(|r| {
                r.store == store && r.hosts == hosts && r.sagas == sagas && r.batching == batching
            })
            .map_or(0.0, |r| r.timing.steps_per_s)
    };
    let one = rate("postgres", 1, 1, true);
    Ok(Report {
        floor_commit_us: floor,
        step_vs_two_commits: (1e6 / one.max(1e-9)) / (2.0 * floor),
        machine_cores: machine_ticks().2,
        three_hosts_vs_one_at_100: median(&pairs),
        three_vs_one_pairs: pairs,
        three_hosts_vs_one_at_100_one_chain: median(&pairs_one_chain),
        three_vs_one_pairs_one_chain: pairs_one_chain,
        batching_on_vs_off_at_100: rate("postgres", 1, 100, true)
            / rate("postgres", 1, 100, false).max(1e-9),
        runs,
    })
}

/// `sagas` concurrent sagas over `hosts` hosts on a fresh database.
/// The median of `v` (0 when empty).
pub(crate) fn median(v: &[f64]) -> f64 {
    let mut sorted = v.to_vec();
    sorted.sort_by(f64::total_cmp);
    sorted.get(sorted.len() / 2).copied().unwrap_or(0.0)
}

/// Which chains of the log the hosts append to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
enum Chains {
    /// Each host its own (the design).
    PerHost,
    /// All hosts one (the baseline: one head row for all).
    One,
}

/// `sagas` concurrent sagas over `hosts` hosts on a fresh database.
async fn measure(
    base: &Base,
    hosts: usize,
    sagas: usize,
    mode: GroupCommit,
    chains: Chains,
    steps: u32,
) -> Result<Run, String> {
    let url = base.database()?;
    let dir = std::env::temp_dir().join(format!("capsaga-bench-pg-{}", uuid::Uuid::new_v4()));
    let r = async {
        let config = pg_config(&dir, &url)?;
        // As `host::open_store` opens it, the chain aside.
        let options = PgOptions {
            lease: std::time::Duration::from_millis(capsaga_door::store_choice::DEFAULT_LEASE_MS),
            max_batch: match mode {
                GroupCommit::On => capsaga_store::postgres::writer::MAX_BATCH,
                GroupCommit::Off => 1,
            },
            chain: (chains == Chains::One).then(|| "bench-one-chain".to_string()),
            ..PgOptions::default()
        };
        let doors = open_hosts(&config, &url, hosts, &options).await?;
        let timing = Timing::of(drive(&doors, sagas, steps)).await?;
        Ok(Run {
            store: "postgres",
            chains,
            hosts,
            sagas,
            batching: mode == GroupCommit::On,
            timing,
        })
    }
    .await;
    let _ = std::fs::remove_dir_all(&dir);
    r
}

/// The configuration of the no-op step's workspace in `dir` on the
/// database `url` (the product's lease).
pub(crate) fn pg_config(dir: &std::path::Path, url: &str) -> Result<Config, String> {
    let mut config = Config::load(&workspace(dir)?).map_err(|e| e.to_string())?;
    config.store = StoreChoice::Postgres {
        url: url.to_string(),
        lease_ms: capsaga_door::store_choice::DEFAULT_LEASE_MS,
    };
    Ok(config)
}

/// `hosts` hosts of `config` on the database `url`, each with a store of
/// its own opened with `options` and the no-op step registered.
pub(crate) async fn open_hosts(
    config: &Config,
    url: &str,
    hosts: usize,
    options: &PgOptions,
) -> Result<Vec<Dispatcher>, String> {
    let mut doors = Vec::new();
    for _ in 0..hosts {
        let store = PgStore::open(url, options)
            .await
            .map_err(|e| e.to_string())?;
        let host = Host::with_store(config.clone(), Arc::new(store))
            .await
            .map_err(|e| e.to_string())?;
        host.registry
            .register_builtin(&host.sandbox, &host.config.policy, Arc::new(Nop))
            .map_err(|e| e.to_string())?;
        doors.push(Dispatcher::new(host));
    }
    Ok(doors)
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
        let timing = Timing::of(drive(&[Dispatcher::new(host)], sagas, steps)).await?;
        Ok(Run {
            store: "sqlite",
            chains: Chains::One,
            hosts: 1,
            sagas,
            batching: true,
            timing,
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
                    .start(Scope::Call, "bench --pg", None)
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
