//! Crash recovery with real processes: a real `capsaga` child runs
//! multi-step sagas over real components (fs_write, ledger) and a real
//! SQLite file, and is killed with SIGKILL at random points (after a random
//! number of write-ahead-log rows); then `capsaga recover` runs (and is itself
//! killed at random now and then, and run again). After every trial: every
//! saga is terminal and consistent, no effect was applied twice (the ledger's
//! journal counts every execute), no committed effect of a Done saga is lost,
//! and the files on disk are exactly what the WAL says.
//!
//! `CAPSAGA_CRASH_TRIALS` sets the number of trials (default 24) and
//! `CAPSAGA_CRASH_SEED` the random seed (default: from the clock; printed).

mod files;
mod harness;

use capsaga_store::sqlite::SqliteStore as Db;
use capsaga_store::{LogStore, SagaStore, StepRow, StepStatus, StepStore};
use capsaga_tests::{TestWorkspace, block_on};
use harness::{KillAt, Rng, report, run_and_kill};
use serde_json::{Value, json};
use std::collections::{BTreeMap, BTreeSet};
use std::process::Stdio;
use std::time::{Duration, Instant};

const POLICY: &str = r#"
[tools.fs_write]
grants = ["fs:write:~/ws/**"]
[tools.ledger]
grants = ["fs:write:~/ws/**"]
"#;

#[derive(Default, Debug)]
struct Tally {
    trials: u64,
    killed: u64,
    finished_before_kill: u64,
    recoveries_killed: u64,
    no_saga: u64,
    done: u64,
    rolled_back: u64,
    partial: u64,
    executes: u64,
    compensations: u64,
}

struct Trial {
    label: String,
    steps: Vec<(String, Value)>,
}

fn make_trial(rng: &mut Rng, t: u64, ws: &TestWorkspace) -> Trial {
    let n = 3 + rng.below(3);
    let mut steps = Vec::new();
    for k in 0..n {
        if rng.below(2) == 0 {
            steps.push((
                "fs_write".to_string(),
                json!({"path": ws.ws_path(&format!("t{t}_s{k}.txt")), "content": format!("trial {t} step {k}\n")}),
            ));
        } else {
            steps.push((
                "ledger".to_string(),
                json!({"path": ws.ws_path("ledger.txt"), "entry": format!("t{t}s{k}")}),
            ));
        }
    }
    if rng.below(4) == 0 {
        // A step the sandbox refuses: the saga rolls back by itself.
        let outside = ws.root.join(format!("outside_{t}.txt"));
        steps.push((
            "fs_write".to_string(),
            json!({"path": outside.to_string_lossy(), "content": "never"}),
        ));
    }
    Trial {
        label: format!("trial {t}"),
        steps,
    }
}

fn count_lines(text: &str, line: &str) -> usize {
    text.lines().filter(|l| *l == line).count()
}

/// Check every invariant over everything run so far.
fn check(ws: &TestWorkspace, db: &Db, trials: &[Trial], tally: &mut Tally) {
    let sagas = block_on(db.sagas(100_000)).unwrap();
    let by_label: BTreeMap<&str, _> = sagas.iter().map(|s| (s.label.as_str(), s)).collect();
    let ledger = std::fs::read_to_string(ws.ws().join("ledger.txt")).unwrap_or_default();
    let journal = std::fs::read_to_string(ws.ws().join("ledger.txt.journal")).unwrap_or_default();
    let mut expected_files: BTreeMap<String, String> = BTreeMap::new();
    let mut expected_ledger: BTreeSet<String> = BTreeSet::new();
    let (mut done, mut rolled_back, mut partial, mut no_saga) = (0, 0, 0, 0);
    for trial in trials {
        let Some(saga) = by_label.get(trial.label.as_str()) else {
            no_saga += 1;
            // Killed before the saga existed: nothing of it may exist.
            for (tool, args) in &trial.steps {
                if tool == "fs_write" {
                    let p = args["path"].as_str().unwrap();
                    assert!(
                        !std::path::Path::new(p).exists(),
                        "{p} exists without a saga"
                    );
                }
            }
            continue;
        };
        let steps: Vec<StepRow> = block_on(db.steps(&saga.saga_id)).unwrap();
        let state = saga.state.as_str();
        assert!(
            saga.state.is_terminal(),
            "{}: saga {} left {state}",
            trial.label,
            saga.saga_id
        );
        match state {
            "Done" => done += 1,
            "FailedRolledBack" => rolled_back += 1,
            _ => partial += 1,
        }
        for s in &steps {
            let planned = &trial.steps[s.step_seq as usize];
            assert_eq!(s.tool_id, planned.0, "{}: step {}", trial.label, s.step_seq);
            assert_eq!(s.args, planned.1, "{}: step {}", trial.label, s.step_seq);
            match state {
                "Done" => assert_eq!(s.status, StepStatus::Commit, "{}: {s:?}", trial.label),
                "FailedRolledBack" => assert!(
                    matches!(s.status, StepStatus::Compensated | StepStatus::Fail),
                    "{}: step {} is {} in a rolled-back saga",
                    trial.label,
                    s.step_seq,
                    s.status
                ),
                _ => {}
            }
            let key = &s.idempotency_key;
            if s.tool_id == "ledger" {
                let executes = count_lines(&journal, &format!("execute {key}"));
                let compensates = count_lines(&journal, &format!("compensate {key}"));
                let lines = ledger
                    .lines()
                    .filter(|l| l.ends_with(&format!(" {key}")))
                    .count();
                assert!(
                    executes <= 1,
                    "{}: step {} executed {executes} times",
                    trial.label,
                    s.step_seq
                );
                if state == "Done" {
                    assert_eq!(
                        (executes, compensates, lines),
                        (1, 0, 1),
                        "{}: committed ledger step {} lost or doubled",
                        trial.label,
                        s.step_seq
                    );
                    expected_ledger.insert(format!("{} {key}", s.args["entry"].as_str().unwrap()));
                } else {
                    assert_eq!(lines, 0, "{}: undone entry still in ledger", trial.label);
                    if executes == 1 {
                        assert!(
                            compensates >= 1,
                            "{}: executed, never compensated",
                            trial.label
                        );
                    }
                }
            } else if s.tool_id == "fs_write" {
                let p = s.args["path"].as_str().unwrap();
                if state == "Done" {
                    expected_files.insert(
                        p.to_string(),
                        s.args["content"].as_str().unwrap().to_string(),
                    );
                }
            }
        }
        // Steps the saga never logged must have left nothing.
        for (k, (tool, args)) in trial.steps.iter().enumerate() {
            if !steps.iter().any(|s| s.step_seq == k as u64) && tool == "fs_write" {
                let p = args["path"].as_str().unwrap();
                assert!(
                    !std::path::Path::new(p).exists(),
                    "{}: unlogged step {k} left {p}",
                    trial.label
                );
            }
        }
    }
    // The files on disk are exactly what the WAL says.
    let mut found: BTreeMap<String, String> = BTreeMap::new();
    for e in std::fs::read_dir(ws.ws()).unwrap() {
        let e = e.unwrap();
        let name = e.file_name().to_string_lossy().into_owned();
        if name == "ledger.txt" || name == "ledger.txt.journal" {
            continue;
        }
        found.insert(
            e.path().to_string_lossy().into_owned(),
            std::fs::read_to_string(e.path()).unwrap_or_else(|_| "<unreadable>".into()),
        );
    }
    assert_eq!(found, expected_files, "files on disk differ from the WAL");
    let ledger_lines: BTreeSet<String> = ledger.lines().map(str::to_string).collect();
    assert_eq!(
        ledger.lines().count(),
        ledger_lines.len(),
        "a ledger line appears twice"
    );
    assert_eq!(ledger_lines, expected_ledger, "ledger differs from the WAL");
    for t in trials {
        let outside = ws.root.join(format!(
            "outside_{}.txt",
            t.label.trim_start_matches("trial ")
        ));
        assert!(!outside.exists(), "a refused write reached {outside:?}");
    }
    tally.done = done;
    tally.rolled_back = rolled_back;
    tally.partial = partial;
    tally.no_saga = no_saga;
    tally.executes = journal
        .lines()
        .filter(|l| l.starts_with("execute "))
        .count() as u64;
    tally.compensations = journal
        .lines()
        .filter(|l| l.starts_with("compensate "))
        .count() as u64;
    assert_eq!(partial, 0, "a compensation failed");
}

#[test]
fn sigkill_at_random_points_then_recover() {
    let trials_n: u64 = std::env::var("CAPSAGA_CRASH_TRIALS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(24);
    let seed: u64 = std::env::var("CAPSAGA_CRASH_SEED")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| {
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_nanos() as u64)
                .unwrap_or(1)
        })
        | 1;
    report(&format!(
        "crash test: {trials_n} trials, CAPSAGA_CRASH_SEED={seed}"
    ));
    let mut rng = Rng(seed);
    let ws = TestWorkspace::new(&["fs_write", "ledger"], POLICY);
    // Create the database (and compile the components once) before polling it.
    let st = ws.capsaga(&["recover"]).output().unwrap();
    assert!(st.status.success(), "{st:?}");
    let db = Db::open(&ws.root.join(".capsaga/state.db")).unwrap();

    let mut tally = Tally::default();
    let mut trials = Vec::new();
    let started = Instant::now();
    for t in 0..trials_n {
        let trial = make_trial(&mut rng, t, &ws);
        let plan = json!({
            "description": trial.label,
            "steps": trial.steps.iter().map(|(tool, args)| json!({"tool": tool, "args": args})).collect::<Vec<_>>(),
        });
        let plan_path = ws.root.join(format!("plan_{t}.json"));
        std::fs::write(&plan_path, plan.to_string()).unwrap();
        // About three log rows per step, plus the saga's own.
        // Now and then a kill at any moment, start-up included.
        let at = if rng.below(8) == 0 {
            KillAt::After(Duration::from_millis(rng.below(1200)))
        } else {
            KillAt::Rows(
                1 + rng.below(3 * trial.steps.len() as u64 + 6) as i64,
                rng.below(3000),
            )
        };
        let cmd = ws.capsaga(&["run", "--plan", plan_path.to_str().unwrap()]);
        trials.push(trial);
        if run_and_kill(cmd, &db, at) {
            tally.killed += 1;
        } else {
            tally.finished_before_kill += 1;
        }
        // Recovery, itself killed now and then: the next one must finish it.
        if rng.below(3) == 0 {
            let at = KillAt::Rows(1 + rng.below(6) as i64, rng.below(2000));
            if run_and_kill(ws.capsaga(&["recover"]), &db, at) {
                tally.recoveries_killed += 1;
            }
        }
        let out = ws.capsaga(&["--json", "recover"]).output().unwrap();
        assert!(
            out.status.success(),
            "recover failed ({:?}): {} {}",
            out.status,
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        tally.trials += 1;
        check(&ws, &db, &trials, &mut tally);
    }
    // The audit of everything that happened, crashes included, is clean.
    let audit = ws.capsaga(&["audit", "verify"]).output().unwrap();
    assert!(
        audit.status.success(),
        "{}",
        String::from_utf8_lossy(&audit.stdout)
    );
    report(&format!(
        "crash test: {} trials in {:.1} s: {} killed mid-run, {} finished before the kill, {} recoveries killed and finished by the next; sagas: {} Done, {} FailedRolledBack, {} FailedRollbackPartial, {} killed before the saga began; ledger: {} executes, {} compensations, none twice",
        tally.trials,
        started.elapsed().as_secs_f64(),
        tally.killed,
        tally.finished_before_kill,
        tally.recoveries_killed,
        tally.done,
        tally.rolled_back,
        tally.partial,
        tally.no_saga,
        tally.executes,
        tally.compensations
    ));
    assert!(
        tally.killed > 0,
        "no trial was killed: the test tested nothing"
    );
}

/// Recovery must never touch a saga whose process is alive: a second
/// `capsaga` started while a first one is in the middle of a saga leaves it
/// alone, and the first one finishes it.
#[test]
fn recovery_leaves_a_live_process_alone() {
    let ws = TestWorkspace::new(&["fs_write", "spin"], &format!("{POLICY}\n[tools.spin]\n"));
    // spin must outlast a second process's whole `recover`: its deadline
    // is that command's time on this machine, measured now (the first run
    // compiles the components; the second is timed), times ten, at least
    // 4 s.
    let mut t = Instant::now();
    for _ in 0..2 {
        t = Instant::now();
        let warm = ws.capsaga(&["--json", "recover"]).output().unwrap();
        assert!(warm.status.success(), "{warm:?}");
    }
    let deadline_ms = (t.elapsed().as_millis() as u64 * 10).max(4000);
    ws.write_policy(&format!(
        "{POLICY}\n[tools.spin]\nlimits = {{ deadline_ms = {deadline_ms} }}\n"
    ));
    let plan = json!({"description": "slow", "steps": [
        {"tool": "fs_write", "args": {"path": ws.ws_path("a.txt"), "content": "A"}},
        {"tool": "spin", "args": {}},
    ]});
    let plan_path = ws.root.join("slow.json");
    std::fs::write(&plan_path, plan.to_string()).unwrap();
    let first = ws
        .capsaga(&["--json", "run", "--plan", plan_path.to_str().unwrap()])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    // Wait until the write committed and spin began.
    let db = Db::open(&ws.root.join(".capsaga/state.db")).unwrap();
    capsaga_tests::wait_until("the write committed and spin begun", || {
        let sagas = block_on(db.sagas(1)).unwrap();
        sagas.first().is_some_and(|s| {
            let steps = block_on(db.steps(&s.saga_id)).unwrap();
            steps.iter().any(|st| st.tool_id == "spin")
        })
    });
    let second = ws.capsaga(&["--json", "recover"]).output().unwrap();
    assert!(second.status.success());
    let report: Value = serde_json::from_slice(&second.stdout).unwrap();
    assert_eq!(
        report["recovered"],
        json!([]),
        "recovery touched a live saga"
    );
    assert!(
        ws.ws().join("a.txt").exists(),
        "the live saga's write was undone"
    );
    let out = first.wait_with_output().unwrap();
    let report: Value = serde_json::from_slice(&out.stdout).unwrap();
    // spin hits its deadline, so the first process rolls its own saga back.
    assert_eq!(report["final_state"], "FailedRolledBack", "{report}");
    assert!(!ws.ws().join("a.txt").exists());
    let log = block_on(db.log(None)).unwrap();
    assert!(
        !log.iter().any(|r| r.record == "OWNER"),
        "ownership changed hands"
    );
}
