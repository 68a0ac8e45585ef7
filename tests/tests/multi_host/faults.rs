//! Fault injection across hosts (issue 48), in the spirit of Jepsen: three
//! real `capsaga serve` hosts on a real PostgreSQL started by the test
//! (host 2 reaches it through a TCP proxy the test cuts), a mixed load of
//! MCP sessions (each a saga of ledger steps, committed) spread over the
//! hosts, and faults:
//!
//! - **boundary rounds**: one chosen saga is driven step by step on one
//!   host and that host is SIGKILLed at each step boundary once (after
//!   step 1, after step 2, ..., after the commit was acknowledged), while
//!   the load runs on the others;
//! - **random rounds**: at a random moment of the load, one fault of a
//!   random kind: `kill` (SIGKILL a host, start another in its place),
//!   `stop` (SIGSTOP a host past its lease, then SIGCONT: it must find its
//!   lease lost and exit 11 without writing, its sagas recovered by the
//!   others and its late writes fenced), `pg_restart` (PostgreSQL stopped
//!   as by a crash, `pg_ctl stop -m immediate`, and started again), `cut`
//!   (host 2's database connections closed and new ones held silent past
//!   its lease, then healed), `stall` (host 2's database connections kept
//!   open and silent past its lease, as packets dropped: it must find its
//!   lease lost and stop, not hang).
//!
//! After every round the invariants are checked (and counted, not
//! asserted one by one, so the table shows them all): every saga terminal
//! (Done or rolled back; none of this load parks), no step executed twice
//! (the ledger's journal, which the harness owns, has one `execute` line
//! per idempotency key at most), no effect lost (every step of a Done
//! saga is in its ledger, every saga whose commit was acknowledged is
//! Done with all its steps) and none left over (no entry of a rolled-back
//! saga remains), the paused host stopped itself, and `audit verify`
//! passes. The table of faults injected per kind, rounds and violations
//! is printed; the test fails on any violation.
//!
//! Sized by `CAPSAGA_FAULT_ROUNDS` (random rounds, default 4),
//! `CAPSAGA_FAULT_STEPS` (steps of each saga, default 3) and
//! `CAPSAGA_FAULT_SEED` (default: from the clock; printed). The long run
//! is documented in docs/several-hosts.md.

use super::chaos::{Rng, env_or, one_saga, session};
use super::proxy::Proxy;
use super::rig::{HostProc, Rig, lines, runtime};
use capsaga_store::{StepStatus, Store, audit};
use rmcp::model::{CallToolRequestParams, ClientConfig};
use serde_json::json;
use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// The hosts' lease (short, so rounds are short).
const LEASE_MS: u64 = 1500;
/// Sessions of the load per round.
const LOAD: u64 = 3;

/// What the harness counts.
#[derive(Default)]
struct Table {
    injected: BTreeMap<&'static str, u64>,
    rounds: u64,
    violations: Vec<String>,
}

impl Table {
    fn print(&self, sagas: u64, done: u64, seed: u64) {
        eprintln!(
            "fault injection (seed {seed}): {} rounds, {sagas} sagas, {done} Done",
            self.rounds
        );
        eprintln!("| fault | injected |");
        eprintln!("|---|---|");
        for (k, n) in &self.injected {
            eprintln!("| {k} | {n} |");
        }
        eprintln!("| violations | {} |", self.violations.len());
        for v in &self.violations {
            eprintln!("violation: {v}");
        }
    }
}

/// The rig's host `i`, started again (host 2 through the proxy).
fn respawn(rig: &mut Rig, i: usize, through: &str) {
    rig.kill(i);
    let h = if i == 2 {
        rig.spawn_with_store(through)
    } else {
        rig.spawn()
    };
    rig.hosts[i] = Some(h);
}

/// Whether host `i`'s process ended by itself within `within`, and its
/// exit code.
fn exited(h: &mut HostProc, within: Duration) -> Option<Option<i32>> {
    let t0 = Instant::now();
    loop {
        if let Ok(Some(st)) = h.child.try_wait() {
            return Some(st.code());
        }
        if t0.elapsed() > within {
            return None;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// A session driven step by step: `b` ledger steps acknowledged (and the
/// commit too when `b > steps`), the client kept open; then the caller
/// injects its fault and [`finish`] tries the rest.
async fn until_boundary(
    url: String,
    ledger: &str,
    saga: u64,
    steps: u64,
    b: u64,
) -> Result<rmcp::service::RunningService<rmcp::RoleClient, ClientConfig>, String> {
    let client = session(url).await?;
    for i in 0..b.min(steps) {
        let args = json!({"path": ledger, "entry": format!("saga{saga}-step{i}")});
        let r = client
            .call_tool(
                CallToolRequestParams::new("ledger")
                    .with_arguments(args.as_object().cloned().unwrap_or_default()),
            )
            .await
            .map_err(|e| format!("call: {e}"))?;
        if r.is_error == Some(true) {
            return Err(format!("{:?}", r.content));
        }
    }
    if b > steps {
        let c = client
            .call_tool(CallToolRequestParams::new("capsaga_commit"))
            .await
            .map_err(|e| format!("commit: {e}"))?;
        if c.is_error == Some(true) {
            return Err(format!("commit: {:?}", c.content));
        }
    }
    Ok(client)
}

/// The invariants over every saga so far; each broken one is a violation.
async fn check(
    rig: &Rig,
    store: &Arc<dyn Store>,
    acked: &BTreeSet<u64>,
    sagas: u64,
    steps: u64,
    round: &str,
    table: &mut Table,
) -> u64 {
    let mut v = |s: String| table.violations.push(format!("{round}: {s}"));
    let t0 = Instant::now();
    loop {
        match store.unfinished_sagas().await {
            Ok(u) if u.is_empty() => break,
            Ok(u) if t0.elapsed() > Duration::from_secs(60) => {
                v(format!(
                    "{} sagas never ended: {:?}",
                    u.len(),
                    u.iter().map(|s| s.state).collect::<Vec<_>>()
                ));
                break;
            }
            Ok(_) => {}
            Err(e) if t0.elapsed() > Duration::from_secs(60) => {
                v(format!("the store never answered: {e}"));
                break;
            }
            Err(_) => {}
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let mut entries: BTreeSet<String> = BTreeSet::new();
    let mut journal: Vec<String> = Vec::new();
    for n in 0..sagas {
        let (ledger, j) = rig.ledger(&format!("ledger-{n}.txt"));
        entries.extend(lines(std::path::Path::new(&ledger)));
        journal.extend(lines(&j));
    }
    let mut executed: BTreeMap<&str, usize> = BTreeMap::new();
    for l in &journal {
        if let Some(k) = l.strip_prefix("execute ") {
            *executed.entry(k).or_default() += 1;
        }
    }
    for (k, n) in &executed {
        if *n > 1 {
            v(format!("step {k} executed {n} times"));
        }
    }
    let mut done = 0;
    for s in store.sagas(100_000).await.unwrap_or_default() {
        let is_done = s.state.as_str() == "Done";
        done += u64::from(is_done);
        for step in store.steps(&s.saga_id).await.unwrap_or_default() {
            let key = &step.idempotency_key;
            let entry = step.args["entry"].as_str().unwrap_or_default();
            let present = entries.contains(&format!("{entry} {key}"));
            if is_done && (step.status != StepStatus::Commit || !present) {
                v(format!(
                    "{entry} of Done saga {} lost ({:?})",
                    s.saga_id, step.status
                ));
            }
            if !is_done && present {
                v(format!(
                    "{entry} of {} saga {} left over",
                    s.state, s.saga_id
                ));
            }
        }
    }
    for n in acked {
        for i in 0..steps {
            let entry = format!("saga{n}-step{i} ");
            if !entries.iter().any(|e| e.starts_with(&entry)) {
                v(format!("acknowledged {entry}lost"));
            }
        }
    }
    match audit::verify(&**store, None).await {
        Ok(r) if r.ok() => {}
        Ok(r) => v(format!("audit verify: {r:?}")),
        Err(e) => v(format!("audit verify: {e}")),
    }
    done
}

#[test]
fn faults_at_every_step_boundary_and_at_random_points_keep_the_invariants() {
    let policy = super::rig::policy(LEASE_MS);
    let Some(mut rig) = Rig::with_policy("multi_host::faults", 2, &policy) else {
        return;
    };
    let rounds = env_or("CAPSAGA_FAULT_ROUNDS", 4);
    let steps = env_or("CAPSAGA_FAULT_STEPS", 3);
    let seed = env_or(
        "CAPSAGA_FAULT_SEED",
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos() as u64)
            .unwrap_or(7)
            | 1,
    );
    let mut rng = Rng(seed);
    let mut table = Table::default();
    let acked: Arc<Mutex<BTreeSet<u64>>> = Arc::default();
    let rt = runtime();
    let proxy = rt.block_on(Proxy::start(rig.cluster.port()));
    let through = proxy.url(&rig.url, rig.cluster.port());
    rig.hosts.push(Some(rig.spawn_with_store(&through)));
    let mut next: u64 = 0;
    let mut done = 0;
    // Boundaries 1..=steps (after each step) and steps + 1 (after the
    // commit), then the random rounds.
    let plan: Vec<Option<u64>> = (1..=steps + 1)
        .map(Some)
        .chain((0..rounds).map(|_| None))
        .collect();
    for (r, boundary) in plan.into_iter().enumerate() {
        table.rounds += 1;
        let round = format!(
            "round {r} ({})",
            boundary.map_or("random".to_string(), |b| format!("boundary {b}"))
        );
        rt.block_on(async {
            // The load, on random hosts.
            let mut load = tokio::task::JoinSet::new();
            for _ in 0..LOAD {
                let n = next;
                next += 1;
                let url = rig.mcp(rng.below(3) as usize);
                let (ledger, acked) = (rig.ledger(&format!("ledger-{n}.txt")).0, acked.clone());
                load.spawn(async move {
                    let r = tokio::time::timeout(Duration::from_secs(30), one_saga(url, ledger, n, steps)).await;
                    if matches!(r, Ok(Ok(()))) {
                        acked.lock().unwrap().insert(n);
                    }
                });
            }
            match boundary {
                Some(b) => {
                    // The chosen saga, on host 0, to boundary b; then host 0
                    // is killed.
                    let n = next;
                    next += 1;
                    let ledger = rig.ledger(&format!("ledger-{n}.txt")).0;
                    let client = until_boundary(rig.mcp(0), &ledger, n, steps, b).await;
                    if b > steps && client.is_ok() {
                        acked.lock().unwrap().insert(n);
                    }
                    if let Err(e) = &client {
                        table.violations.push(format!("{round}: the chosen saga failed before its boundary: {e}"));
                    }
                    rig.kill(0);
                    *table.injected.entry("kill at a step boundary").or_default() += 1;
                    drop(client);
                    respawn(&mut rig, 0, &through);
                }
                None => {
                    tokio::time::sleep(Duration::from_millis(100 + rng.below(700))).await;
                    let kind = ["kill", "stop", "pg_restart", "cut", "stall"][rng.below(5) as usize];
                    *table.injected.entry(kind).or_default() += 1;
                    match kind {
                        "kill" => {
                            let i = rng.below(3) as usize;
                            rig.kill(i);
                            respawn(&mut rig, i, &through);
                        }
                        "stop" => {
                            let i = rng.below(2) as usize;
                            let pid = rig.hosts[i].as_ref().map(|h| h.child.id() as i32).unwrap_or(0);
                            signal(pid, "STOP");
                            tokio::time::sleep(Duration::from_millis(LEASE_MS * 2)).await;
                            signal(pid, "CONT");
                            let code = rig.hosts[i].as_mut().and_then(|h| exited(h, Duration::from_secs(10)));
                            if code != Some(Some(11)) {
                                table.violations.push(format!("{round}: host {i} woke past its lease and did not exit 11 ({code:?})"));
                            }
                            respawn(&mut rig, i, &through);
                        }
                        "pg_restart" => {
                            if let Err(e) = rig.cluster.stop() {
                                table.violations.push(format!("{round}: pg_ctl stop: {e}"));
                            }
                            tokio::time::sleep(Duration::from_millis(300)).await;
                            if let Err(e) = rig.cluster.start_again() {
                                table.violations.push(format!("{round}: pg_ctl start: {e}"));
                            }
                        }
                        _ => {
                            if kind == "cut" {
                                proxy.cut();
                            } else {
                                proxy.stall();
                            }
                            tokio::time::sleep(Duration::from_millis(LEASE_MS * 2)).await;
                            // Its lease could not be renewed for twice its
                            // length: it stops itself (exit 11), never
                            // hangs or runs on without a lease.
                            let code = rig.hosts[2].as_mut().and_then(|h| exited(h, Duration::from_secs(10)));
                            proxy.heal();
                            if code != Some(Some(11)) {
                                table.violations.push(format!("{round}: host 2 cut off ({kind}) did not exit 11 ({code:?})"));
                            }
                            respawn(&mut rig, 2, &through);
                        }
                    }
                }
            }
            while load.join_next().await.is_some() {}
            // A host that stopped itself (its lease lost during a database
            // restart) is started again.
            for i in 0..3 {
                if !rig.running(i) {
                    respawn(&mut rig, i, &through);
                }
            }
            let store = rig.store().await;
            let acked = acked.lock().unwrap().clone();
            done = check(&rig, &store, &acked, next, steps, &round, &mut table).await;
        });
    }
    table.print(next, done, seed);
    assert!(
        table.violations.is_empty(),
        "{} violations (seed {seed})",
        table.violations.len()
    );
}

/// `kill -SIG pid`.
fn signal(pid: i32, sig: &str) {
    let _ = std::process::Command::new("kill")
        .arg(format!("-{sig}"))
        .arg(pid.to_string())
        .status();
}
