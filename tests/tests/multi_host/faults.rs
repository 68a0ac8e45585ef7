//! Fault injection across hosts (issue 48), in the spirit of Jepsen: three
//! real `capsaga serve` hosts on a real PostgreSQL started by the test
//! (host 2 reaches it through a TCP proxy the test cuts), a mixed load
//! spread over the hosts, and faults.
//!
//! The load of every round: MCP sessions (each a saga of ledger steps,
//! committed), an approval group (a REST turn parks a ledger call for a
//! human, an operator approves it on a random host, then several turns of
//! the same task resume it at once on random hosts) and budgeted turns (a
//! priced model under a day's hard cap, more turns than it admits); the
//! turns' model is a real local provider ([`super::faults_load`]).
//!
//! The faults ([`Kind`]): `kill` (SIGKILL a host, start another in its
//! place), `stop` (SIGSTOP a host past its lease, then SIGCONT: it must
//! find its lease lost and exit 11 without writing, its sagas recovered by
//! the others and its late writes fenced), `pg_restart` (PostgreSQL
//! stopped as by a crash, `pg_ctl stop -m immediate`, and started again),
//! `cut` (host 2's database connections closed and new ones held silent
//! past its lease, then healed), `stall` (host 2's database connections
//! kept open and silent past its lease, as packets dropped: it must find
//! its lease lost and stop, not hang). They come in two kinds of rounds:
//!
//! - **boundary rounds**: one chosen saga is driven step by step on one
//!   host (host 0, or host 2 for a cut or a stall) and that host gets the
//!   fault at a step boundary (after step 1, after step 2, ..., after the
//!   commit was acknowledged), while the load runs. Kills are injected at
//!   every boundary; a stop, a cut and a stall at one boundary each, chosen
//!   by the seed, or at every boundary with `CAPSAGA_FAULT_EXHAUSTIVE=1`;
//! - **random rounds**: at a random moment of the load, one fault of a
//!   random kind.
//!
//! After every round the invariants are checked (and counted, not
//! asserted one by one, so the table shows them all): every saga terminal
//! (Done or rolled back; a turn's parked saga is rolled back by its turn),
//! no step executed twice (the ledger's journal, which the harness owns,
//! has one `execute` line per idempotency key at most), no effect lost
//! (every step of a Done saga is in its ledger, every saga whose commit
//! was acknowledged is Done with all its steps) and none left over (no
//! entry of a rolled-back saga remains), approvals claimed at most once
//! and no approved call executed twice or without its claim, the day's
//! spend (counted by the store, and answered by the provider) never past
//! the cap by more than one reservation, the paused or cut-off host
//! stopped itself (exit 11), and `audit verify` passes. The table of
//! faults injected per kind (with the boundaries), rounds and violations
//! per kind is printed; the test fails on any violation.
//!
//! Sized by `CAPSAGA_FAULT_ROUNDS` (random rounds, default 4),
//! `CAPSAGA_FAULT_STEPS` (steps of each saga, default 3),
//! `CAPSAGA_FAULT_EXHAUSTIVE` (1: every non-kill fault at every boundary
//! too) and `CAPSAGA_FAULT_SEED` (default: from the clock; printed). The
//! long run is documented in docs/several-hosts.md.

use super::chaos::{Rng, env_or, one_saga, session};
use super::faults_load::{self as turns, Group, Model, Picks};
use super::proxy::Proxy;
use super::rig::{HostProc, Rig, lines, runtime};
use capsaga_store::{StepStatus, Store, audit};
use rmcp::model::{CallToolRequestParams, ClientConfig};
use serde_json::json;
use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// The hosts' lease (short, so rounds are short).
const LEASE_MS: u64 = 1500;
/// MCP sessions of the load per round.
const LOAD: u64 = 3;
/// Budgeted turns of the load per round.
const BUDGETED: u64 = 4;

/// A kind of fault.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Kind {
    Kill,
    Stop,
    PgRestart,
    Cut,
    Stall,
}

impl Kind {
    fn name(self) -> &'static str {
        match self {
            Kind::Kill => "kill",
            Kind::Stop => "stop",
            Kind::PgRestart => "pg_restart",
            Kind::Cut => "cut",
            Kind::Stall => "stall",
        }
    }

    /// The host a boundary round drives its chosen saga on.
    fn boundary_host(self) -> usize {
        if matches!(self, Kind::Cut | Kind::Stall) {
            2
        } else {
            0
        }
    }
}

/// One round: a fault at a boundary of the chosen saga, or at random.
#[derive(Debug, Clone, Copy)]
enum Round {
    Boundary(Kind, u64),
    Random,
}

/// What the harness counts: per fault (`kill at a step boundary`, `stop`,
/// ...), how many were injected, at which boundaries, and the violations
/// found after its rounds.
#[derive(Default)]
struct Table {
    injected: BTreeMap<String, u64>,
    boundaries: BTreeMap<String, BTreeSet<u64>>,
    broken: BTreeMap<String, u64>,
    rounds: u64,
    violations: Vec<String>,
    /// Violations found already (checks are cumulative: one found again
    /// after a later round is not counted again).
    seen: BTreeSet<String>,
}

impl Table {
    fn inject(&mut self, fault: &str, boundary: Option<u64>) {
        *self.injected.entry(fault.to_string()).or_default() += 1;
        let b = self.boundaries.entry(fault.to_string()).or_default();
        b.extend(boundary);
    }

    fn violation(&mut self, fault: &str, v: String) {
        *self.broken.entry(fault.to_string()).or_default() += 1;
        self.violations.push(v);
    }

    /// A violation `v` found by the checks after round `round` (of
    /// `fault`), unless an earlier round's checks found it.
    fn found(&mut self, fault: &str, round: &str, v: String) {
        if self.seen.insert(v.clone()) {
            self.violation(fault, format!("{round}: {v}"));
        }
    }

    fn print(&self, sagas: u64, done: u64, seed: u64, extra: &str) {
        eprintln!(
            "fault injection (seed {seed}): {} rounds, {sagas} MCP sagas, {done} sagas Done in all; {extra}",
            self.rounds
        );
        eprintln!("| fault | injected | at step boundaries | violations |");
        eprintln!("|---|---|---|---|");
        for (k, n) in &self.injected {
            let at: Vec<String> = self.boundaries[k].iter().map(u64::to_string).collect();
            let at = if at.is_empty() {
                "random moments".to_string()
            } else {
                at.join(", ")
            };
            let broken = self.broken.get(k).copied().unwrap_or(0);
            eprintln!("| {k} | {n} | {at} | {broken} |");
        }
        eprintln!(
            "| **all** | {} rounds | | {} |",
            self.rounds,
            self.violations.len()
        );
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

/// What the rounds so far have made, for the checks.
#[derive(Default)]
struct Made {
    /// MCP sagas (`ledger-{n}.txt`).
    sagas: u64,
    /// Approval groups, with their ledger's journal.
    groups: Vec<(Group, PathBuf)>,
}

/// The invariants over everything so far; each broken one is a violation
/// of `fault`.
#[allow(clippy::too_many_arguments)]
async fn check(
    rig: &Rig,
    store: &Arc<dyn Store>,
    model: &Model,
    acked: &BTreeSet<u64>,
    made: &Made,
    steps: u64,
    round: &str,
    fault: &str,
    table: &mut Table,
) -> u64 {
    let mut found: Vec<String> = Vec::new();
    let mut v = |s: String| found.push(s);
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
    let ledgers = (0..made.sagas)
        .map(|n| rig.ledger(&format!("ledger-{n}.txt")))
        .chain(
            made.groups
                .iter()
                .map(|(g, j)| (g.ledger.clone(), j.clone())),
        );
    for (ledger, j) in ledgers {
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
    // The saga of each entry, and its state (to say what became of a lost
    // one).
    let mut saga_of: BTreeMap<String, (String, String)> = BTreeMap::new();
    for s in store.sagas(100_000).await.unwrap_or_default() {
        let is_done = s.state.as_str() == "Done";
        done += u64::from(is_done);
        for step in store.steps(&s.saga_id).await.unwrap_or_default() {
            let key = &step.idempotency_key;
            let entry = step.args["entry"].as_str().unwrap_or_default();
            saga_of.insert(entry.to_string(), (s.saga_id.clone(), s.state.to_string()));
            let present = entries.contains(&format!("{entry} {key}"));
            if is_done && (step.status != StepStatus::Commit || !present) {
                v(format!(
                    "{entry} of Done saga {} lost ({:?})",
                    s.saga_id, step.status
                ));
            }
            if !is_done && present {
                // What the ledger's journal saw of it, in order: an execute
                // after its compensate is an effect that landed late (a
                // host woken after another compensated the step).
                let seen: Vec<&str> = journal
                    .iter()
                    .filter(|l| l.ends_with(key.as_str()))
                    .filter_map(|l| l.split(' ').next())
                    .collect();
                v(format!(
                    "{entry} of {} saga {} left over (step {} {:?}; its journal: {})",
                    s.state,
                    s.saga_id,
                    step.step_seq,
                    step.status,
                    seen.join(", ")
                ));
            }
        }
    }
    for n in acked {
        for i in 0..steps {
            let entry = format!("saga{n}-step{i}");
            if !entries.iter().any(|e| e.starts_with(&format!("{entry} "))) {
                v(format!(
                    "acknowledged {entry} lost: {}",
                    what_became(store, saga_of.get(&entry)).await
                ));
            }
        }
    }
    turns::check_approvals(store, &made.groups, &mut v).await;
    turns::check_budget(store, model, &mut v).await;
    match audit::verify(&**store, None).await {
        Ok(r) if r.ok() => {}
        Ok(r) => v(format!("audit verify: {r:?}")),
        Err(e) => v(format!("audit verify: {e}")),
    }
    for f in found {
        table.found(fault, round, f);
    }
    done
}

/// What became of a saga (its id and state): the records of its log.
async fn what_became(store: &Arc<dyn Store>, saga: Option<&(String, String)>) -> String {
    let Some((id, state)) = saga else {
        return "no step of it in the store".to_string();
    };
    let log = store.log(Some(id)).await.unwrap_or_default();
    let records: Vec<String> = log
        .iter()
        .map(|r| match r.record.as_str() {
            "OWNER" | "STATE" => {
                let d: String = r.detail.to_string().chars().take(160).collect();
                format!("{}({d})", r.record)
            }
            other => other.to_string(),
        })
        .collect();
    format!("saga {id} is {state}; its log: {}", records.join(" "))
}

/// Pause or cut off host `i` past its lease (`kind`: stop, cut, stall),
/// then let it run or heal: it must have stopped itself with exit 11.
async fn past_the_lease(rig: &mut Rig, proxy: &Proxy, kind: Kind, i: usize) -> Result<(), String> {
    let code = if kind == Kind::Stop {
        let pid = rig.hosts[i]
            .as_ref()
            .map(|h| h.child.id() as i32)
            .unwrap_or(0);
        signal(pid, "STOP");
        tokio::time::sleep(Duration::from_millis(LEASE_MS * 2)).await;
        signal(pid, "CONT");
        rig.hosts[i]
            .as_mut()
            .and_then(|h| exited(h, Duration::from_secs(10)))
    } else {
        if kind == Kind::Cut {
            proxy.cut();
        } else {
            proxy.stall();
        }
        tokio::time::sleep(Duration::from_millis(LEASE_MS * 2)).await;
        // Its lease could not be renewed for twice its length: it stops
        // itself (exit 11), never hangs or runs on without a lease.
        let code = rig.hosts[i]
            .as_mut()
            .and_then(|h| exited(h, Duration::from_secs(10)));
        proxy.heal();
        code
    };
    if code == Some(Some(11)) {
        Ok(())
    } else {
        Err(format!(
            "host {i} ({}) past its lease did not exit 11 ({code:?})",
            kind.name()
        ))
    }
}

/// The rounds: kills at every boundary `1..=steps + 1`, the other faults
/// of a boundary round at every boundary (`exhaustive`) or at one drawn
/// from `rng`, then `random` random rounds.
fn plan(steps: u64, random: u64, exhaustive: bool, rng: &mut Rng) -> Vec<Round> {
    let every: Vec<u64> = (1..=steps + 1).collect();
    let mut plan: Vec<Round> = every
        .iter()
        .map(|b| Round::Boundary(Kind::Kill, *b))
        .collect();
    for kind in [Kind::Stop, Kind::Cut, Kind::Stall] {
        if exhaustive {
            plan.extend(every.iter().map(|b| Round::Boundary(kind, *b)));
        } else {
            plan.push(Round::Boundary(kind, 1 + rng.below(steps + 1)));
        }
    }
    plan.extend((0..random).map(|_| Round::Random));
    plan
}

#[test]
fn faults_at_every_step_boundary_and_at_random_points_keep_the_invariants() {
    let rt = runtime();
    let model = rt.block_on(Model::start());
    let policy = format!("{}{}", super::rig::policy(LEASE_MS), model.policy());
    let Some(mut rig) = Rig::with_policy("multi_host::faults", 2, &policy) else {
        return;
    };
    let rounds = env_or("CAPSAGA_FAULT_ROUNDS", 4);
    let steps = env_or("CAPSAGA_FAULT_STEPS", 3);
    let exhaustive = env_or("CAPSAGA_FAULT_EXHAUSTIVE", 0) == 1;
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
    let proxy = rt.block_on(Proxy::start(rig.cluster.port()));
    let through = proxy.url(&rig.url, rig.cluster.port());
    rig.hosts.push(Some(rig.spawn_with_store(&through)));
    let mut made = Made::default();
    let mut done = 0;
    let started = Instant::now();
    for (r, round) in plan(steps, rounds, exhaustive, &mut rng)
        .into_iter()
        .enumerate()
    {
        table.rounds += 1;
        let name = match round {
            Round::Boundary(k, b) => format!("round {r} ({} at boundary {b})", k.name()),
            Round::Random => format!("round {r} (random)"),
        };
        rt.block_on(async {
            let store = rig.store().await;
            // The load, on random hosts.
            let mut load = tokio::task::JoinSet::new();
            for _ in 0..LOAD {
                let n = made.sagas;
                made.sagas += 1;
                let url = rig.mcp(rng.below(3) as usize);
                let (ledger, acked) = (rig.ledger(&format!("ledger-{n}.txt")).0, acked.clone());
                load.spawn(async move {
                    let r = tokio::time::timeout(
                        Duration::from_secs(30),
                        one_saga(url, ledger, n, steps),
                    )
                    .await;
                    if matches!(r, Ok(Ok(()))) {
                        acked.lock().unwrap().insert(n);
                    }
                });
            }
            let bases: Vec<String> = (0..3).map(|i| rig.base(i)).collect();
            let (ledger, journal) = rig.ledger(&format!("approved-{r}.txt"));
            let group = Group {
                ledger,
                entry: format!("approved{r}"),
            };
            made.groups.push((group.clone(), journal));
            let picks = Picks::new(&mut rng, &bases);
            let s = store.clone();
            load.spawn(async move {
                let _ = tokio::time::timeout(
                    Duration::from_secs(60),
                    turns::approval_group(group, picks, s),
                )
                .await;
            });
            for _ in 0..BUDGETED {
                let base = bases[rng.below(3) as usize].clone();
                load.spawn(turns::budget_turn(base));
            }
            let fault = match round {
                Round::Boundary(kind, b) => {
                    // The chosen saga, on its host, to boundary b; then that
                    // host gets the fault.
                    let i = kind.boundary_host();
                    let n = made.sagas;
                    made.sagas += 1;
                    let ledger = rig.ledger(&format!("ledger-{n}.txt")).0;
                    let client = until_boundary(rig.mcp(i), &ledger, n, steps, b).await;
                    if b > steps && client.is_ok() {
                        acked.lock().unwrap().insert(n);
                    }
                    let fault = format!("{} at a step boundary", kind.name());
                    table.inject(&fault, Some(b));
                    if let Err(e) = &client {
                        table.violation(
                            &fault,
                            format!("{name}: the chosen saga failed before its boundary: {e}"),
                        );
                    }
                    if kind == Kind::Kill {
                        rig.kill(i);
                    } else if let Err(e) = past_the_lease(&mut rig, &proxy, kind, i).await {
                        table.violation(&fault, format!("{name}: {e}"));
                    }
                    drop(client);
                    respawn(&mut rig, i, &through);
                    fault
                }
                Round::Random => {
                    tokio::time::sleep(Duration::from_millis(100 + rng.below(700))).await;
                    let kind = [
                        Kind::Kill,
                        Kind::Stop,
                        Kind::PgRestart,
                        Kind::Cut,
                        Kind::Stall,
                    ][rng.below(5) as usize];
                    let fault = kind.name().to_string();
                    table.inject(&fault, None);
                    match kind {
                        Kind::Kill => {
                            let i = rng.below(3) as usize;
                            rig.kill(i);
                            respawn(&mut rig, i, &through);
                        }
                        Kind::PgRestart => {
                            if let Err(e) = rig.cluster.stop() {
                                table.violation(&fault, format!("{name}: pg_ctl stop: {e}"));
                            }
                            tokio::time::sleep(Duration::from_millis(300)).await;
                            if let Err(e) = rig.cluster.start_again() {
                                table.violation(&fault, format!("{name}: pg_ctl start: {e}"));
                            }
                        }
                        Kind::Stop | Kind::Cut | Kind::Stall => {
                            let i = if kind == Kind::Stop {
                                rng.below(2) as usize
                            } else {
                                2
                            };
                            if let Err(e) = past_the_lease(&mut rig, &proxy, kind, i).await {
                                table.violation(&fault, format!("{name}: {e}"));
                            }
                            respawn(&mut rig, i, &through);
                        }
                    }
                    fault
                }
            };
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
            done = check(
                &rig, &store, &model, &acked, &made, steps, &name, &fault, &mut table,
            )
            .await;
        });
    }
    let (claimed, spent) = rt.block_on(async {
        let store = rig.store().await;
        let claimed = store
            .approvals(true)
            .await
            .unwrap_or_default()
            .iter()
            .filter(|a| a.claimed_saga.is_some())
            .count();
        let spent = store
            .budget_days(1)
            .await
            .ok()
            .and_then(|d| d.first().map(|d| d.spent_usd))
            .unwrap_or(0.0);
        (claimed, spent)
    });
    let extra = format!(
        "{} approval groups ({claimed} approvals claimed), {} budgeted turns ({} answered by the provider, ${spent:.2} spent under a ${} cap); {:.0} s",
        made.groups.len(),
        table.rounds * BUDGETED,
        model.priced_answered(),
        turns::CAP_USD,
        started.elapsed().as_secs_f64()
    );
    table.print(made.sagas, done, seed, &extra);
    assert!(
        table.violations.is_empty(),
        "{} violations (seed {seed})",
        table.violations.len()
    );
}

/// `kill -SIG pid`.
pub(super) fn signal(pid: i32, sig: &str) {
    let _ = std::process::Command::new("kill")
        .arg(format!("-{sig}"))
        .arg(pid.to_string())
        .status();
}
