//! `capsaga-bench --hosts` (issue 48): several hosts that behave as one,
//! measured in one run on a throw-away PostgreSQL cluster (or `--pg-url`).
//!
//! - **Steps/s at 100 concurrent sagas on 1, 2 and 3 hosts, handed over
//!   against sticky.** Handed over: every step is a request of its own
//!   that re-opens the saga through its handle on the next host in turn
//!   (`Dispatcher::reopen` through `Via::Handle`: the owner taken by a
//!   compare-and-set, a new fencing token), runs the step and releases the
//!   saga (`Dispatcher::release`: no owner, the token moved), as a
//!   2026-07-28 client behind a round-robin load balancer makes it; on one
//!   host the lease is still handed over (released and taken again) at
//!   every request. Sticky: the saga stays on its host from its first step
//!   to its commit, as a 2025-11-25 session's. The hosts are separate
//!   [`Host`]s in this process (each its own pool, batching writer, chain
//!   of the log and lease), as in `--pg`; the step is the no-op built-in
//!   of `--wal`; no HTTP (its cost is `--mcp`'s). Both modes alternate
//!   host count by host count, so a drift of the machine's load weighs on
//!   both alike.
//! - **Takeover time**: real `capsaga serve` processes (the binary beside
//!   this one, or `--capsaga-bin`) sharing the database, the lease at
//!   `--hosts-lease-ms` (default 10 000, the product's default). One host's
//!   MCP session (2025-11-25) holds a saga with a committed step of
//!   `--component` (`time_now`); that host is then SIGKILLed, or SIGSTOPped
//!   (paused); the other recovers the saga. Reported per try: when the
//!   database saw the lease expire (the owner no longer alive, polled every
//!   10 ms), when the saga was rolled back, both from the fault; for a
//!   pause, then SIGCONT and how long the woken host took to stop itself
//!   and its exit code (11: its lease lost). Nothing is asserted.

use super::pg::{Base, Timing, median, open_hosts, pg_config};
use capsaga::render::Out;
use capsaga_core::principal::{Principal, Role};
use capsaga_door::dispatch::{Act, Args, Call, Dispatcher, Outcome, Scope, Via};
use capsaga_door::store_choice::DEFAULT_LEASE_MS;
use capsaga_store::postgres::PgOptions;
use serde::Serialize;
use serde_json::json;
use std::path::Path;
use std::time::{Duration, Instant};

mod takeover;

const HOSTS: [usize; 3] = [1, 2, 3];
const SAGAS: usize = 100;
/// Takeovers measured per kind of fault.
const TRIES: usize = 3;

/// How a saga's steps reach the hosts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
enum Mode {
    /// Every step on the next host, the saga released between steps.
    HandedOver,
    /// Every step on the saga's first host.
    Sticky,
}

/// One throughput run.
#[derive(Debug, Serialize)]
struct Run {
    mode: Mode,
    hosts: usize,
    sagas: usize,
    #[serde(flatten)]
    timing: Timing,
}

/// One takeover.
#[derive(Debug, Serialize)]
struct Takeover {
    /// `kill` (SIGKILL) or `pause` (SIGSTOP).
    fault: &'static str,
    /// From the fault to the database seeing the lease expired, s.
    expired_s: f64,
    /// From the fault to the saga rolled back by the other host, s.
    recovered_s: f64,
    /// From the lease's expiry to the saga rolled back, s.
    after_expiry_s: f64,
    /// A paused host, woken once its saga was recovered: how long it took
    /// to stop, s, and its exit code.
    woke_exit_s: Option<f64>,
    woke_exit_code: Option<i32>,
}

#[derive(Debug, Serialize)]
struct Report {
    runs: Vec<Run>,
    /// steps/s handed over / sticky, per host count (1, 2, 3).
    handed_vs_sticky: Vec<f64>,
    lease_ms: u64,
    takeovers: Vec<Takeover>,
    /// Medians over the tries, s.
    kill_after_expiry_s: f64,
    kill_recovered_s: f64,
    pause_after_expiry_s: f64,
    pause_recovered_s: f64,
}

/// What `--hosts` needs of the command line.
pub(crate) struct HostsArgs<'a> {
    pub url: Option<&'a str>,
    pub steps: u32,
    pub lease_ms: u64,
    pub component: &'a Path,
    pub capsaga_bin: Option<&'a Path>,
}

/// Run the benchmark; print the report.
pub(crate) async fn run(out: &Out, a: &HostsArgs<'_>) -> u8 {
    let base = match Base::open(a.url, "--hosts") {
        Ok(b) => b,
        Err(code) => return code,
    };
    let r = measure_all(&base, a).await;
    crate::report(out, "--hosts", r, print)
}

fn print(r: &Report) {
    outln!(
        "several hosts: saga steps/s at {SAGAS} concurrent sagas, built-in no-op step through the door"
    );
    for run in &r.runs {
        outln!(
            "  {:<11} {} host{} {:>6} steps in {:>6.2} s = {:>7.0} steps/s; hosts' CPU {:>5.2} s, {:.2} cores busy",
            match run.mode {
                Mode::HandedOver => "handed over",
                Mode::Sticky => "sticky",
            },
            run.hosts,
            if run.hosts == 1 { " " } else { "s" },
            run.timing.steps,
            run.timing.wall_s,
            run.timing.steps_per_s,
            run.timing.cpu_s,
            run.timing.busy_cores
        );
    }
    let ratios: Vec<String> = r
        .handed_vs_sticky
        .iter()
        .zip(HOSTS)
        .map(|(x, h)| format!("{h}: {x:.2}x"))
        .collect();
    outln!("  handed over / sticky, by hosts: {}", ratios.join(", "));
    outln!(
        "takeover (lease {} ms, real capsaga serve processes):",
        r.lease_ms
    );
    for t in &r.takeovers {
        let woke = match (t.woke_exit_s, t.woke_exit_code) {
            (Some(s), Some(code)) => format!("; woken, it stopped in {s:.2} s (exit {code})"),
            (Some(s), None) => format!("; woken, it stopped in {s:.2} s (by a signal)"),
            _ => String::new(),
        };
        outln!(
            "  {:<5}: lease expired at {:>5.2} s, saga rolled back at {:>5.2} s = {:.2} s after the expiry{}",
            t.fault,
            t.expired_s,
            t.recovered_s,
            t.after_expiry_s,
            woke
        );
    }
    outln!(
        "  medians: kill {:.2} s after the expiry ({:.2} s after the kill); pause {:.2} s after the expiry ({:.2} s after the pause)",
        r.kill_after_expiry_s,
        r.kill_recovered_s,
        r.pause_after_expiry_s,
        r.pause_recovered_s
    );
}

async fn measure_all(base: &Base, a: &HostsArgs<'_>) -> Result<Report, String> {
    let steps = a.steps.max(SAGAS as u32);
    let mut runs = Vec::new();
    let mut handed_vs_sticky = Vec::new();
    for hosts in HOSTS {
        let handed = measure(base, hosts, Mode::HandedOver, steps).await?;
        let sticky = measure(base, hosts, Mode::Sticky, steps).await?;
        handed_vs_sticky.push(handed.timing.steps_per_s / sticky.timing.steps_per_s.max(1e-9));
        runs.push(handed);
        runs.push(sticky);
    }
    let exe = super::start::capsaga_exe(a.capsaga_bin)?;
    let mut takeovers = Vec::new();
    for _ in 0..TRIES {
        for fault in ["kill", "pause"] {
            let url = base.database()?;
            takeovers.push(takeover::takeover(&exe, &url, a.component, a.lease_ms, fault).await?);
        }
    }
    let med = |fault: &str, f: fn(&Takeover) -> f64| {
        median(
            &takeovers
                .iter()
                .filter(|t| t.fault == fault)
                .map(f)
                .collect::<Vec<_>>(),
        )
    };
    Ok(Report {
        kill_after_expiry_s: med("kill", |t| t.after_expiry_s),
        kill_recovered_s: med("kill", |t| t.recovered_s),
        pause_after_expiry_s: med("pause", |t| t.after_expiry_s),
        pause_recovered_s: med("pause", |t| t.recovered_s),
        runs,
        handed_vs_sticky,
        lease_ms: a.lease_ms,
        takeovers,
    })
}

/// `SAGAS` sagas over `hosts` hosts on a fresh database, `steps` steps in
/// all, in `mode`.
async fn measure(base: &Base, hosts: usize, mode: Mode, steps: u32) -> Result<Run, String> {
    let url = base.database()?;
    let dir = std::env::temp_dir().join(format!("capsaga-bench-hosts-{}", uuid::Uuid::new_v4()));
    let r = async {
        let config = pg_config(&dir, &url)?;
        let options = PgOptions {
            lease: Duration::from_millis(DEFAULT_LEASE_MS),
            ..PgOptions::default()
        };
        let doors = open_hosts(&config, &url, hosts, &options).await?;
        let timing = Timing::of(drive(&doors, mode, steps)).await?;
        Ok(Run {
            mode,
            hosts,
            sagas: SAGAS,
            timing,
        })
    }
    .await;
    let _ = std::fs::remove_dir_all(&dir);
    r
}

/// One step of `saga` through `door`, committed.
async fn step(
    door: &Dispatcher,
    saga: &mut capsaga_door::saga::Saga,
    n: u32,
) -> Result<(), String> {
    let args = json!({ "n": n });
    let s = door
        .submit(saga, Call::new("bench_step", Args::Value(&args)))
        .await
        .map_err(|e| e.to_string())?;
    match s.outcome {
        Outcome::Committed { .. } => Ok(()),
        other => Err(format!("step {n}: {other:?}")),
    }
}

/// The `SAGAS` sagas, saga `k` opened on host `k % hosts`; the wall time
/// and the steps done.
async fn drive(doors: &[Dispatcher], mode: Mode, steps: u32) -> Result<(f64, u32), String> {
    let per = (steps as usize).div_ceil(SAGAS) as u32;
    let who = Principal::local("cli", Some("bench"), Role::Operator);
    let started = Instant::now();
    let tasks: Vec<_> = (0..SAGAS)
        .map(|k| {
            let doors = doors.to_vec();
            let who = who.clone();
            tokio::spawn(async move {
                match mode {
                    Mode::Sticky => sticky(&doors[k % doors.len()], &who, k, per).await,
                    Mode::HandedOver => handed_over(&doors, &who, k, per).await,
                }
            })
        })
        .collect();
    for t in tasks {
        t.await.map_err(|e| e.to_string())??;
    }
    Ok((started.elapsed().as_secs_f64(), per * SAGAS as u32))
}

/// Saga `k`: `per` steps on `door`, then its commit.
async fn sticky(door: &Dispatcher, who: &Principal, k: usize, per: u32) -> Result<(), String> {
    let (mut saga, _hold) = door
        .open(who, Scope::Handle, "bench --hosts", None)
        .await
        .map_err(|e| e.to_string())?;
    for i in 0..per {
        step(door, &mut saga, k as u32 * per + i).await?;
    }
    door.finish(&mut saga).await.map_err(|e| e.to_string())?;
    Ok(())
}

/// Saga `k`: opened on host `k % hosts` and released; then each step a
/// request on the next host (re-opened by its handle, the step, released;
/// the last request commits it).
async fn handed_over(
    doors: &[Dispatcher],
    who: &Principal,
    k: usize,
    per: u32,
) -> Result<(), String> {
    let n = doors.len();
    let first = &doors[k % n];
    let (saga, hold) = first
        .open(who, Scope::Handle, "bench --hosts", None)
        .await
        .map_err(|e| e.to_string())?;
    let id = saga.id().to_string();
    release(first, saga).await?;
    drop(hold);
    for i in 0..per {
        let door = &doors[(k + i as usize + 1) % n];
        let (mut saga, _hold) = door
            .reopen(&id, Via::Handle, Act::Continue, who)
            .await
            .map_err(|e| e.to_string())?;
        step(door, &mut saga, k as u32 * per + i).await?;
        if i + 1 < per {
            release(door, saga).await?;
        } else {
            door.finish(&mut saga).await.map_err(|e| e.to_string())?;
        }
    }
    Ok(())
}

/// Release `saga` from `door`'s host (an error when it was not).
async fn release(door: &Dispatcher, saga: capsaga_door::saga::Saga) -> Result<(), String> {
    let id = saga.id().to_string();
    if door.release(saga).await.map_err(|e| e.to_string())? {
        Ok(())
    } else {
        Err(format!("saga {id} was not released"))
    }
}
