//! SIGKILL at random points of a journaled step that changes about 100
//! files (`fs_churn`: overwrites, creations, removals, renames of a file and
//! of a directory) and of the host's restore of them (the next step fails,
//! so every run rolls back), and at random points of the recovery that
//! follows; then `capsaga recover` runs to the end. After every trial the
//! workspace is byte for byte what it was before the trial: no partial
//! state, whether the kill hit the start-up, the journal, the writes, the
//! restore or the recovery.
//!
//! `CAPSAGA_FS_CRASH_TRIALS` sets the number of kill points (default 200,
//! the issue's figure: about a minute here) and `CAPSAGA_CRASH_SEED` the
//! seed (printed).

use super::harness::{KillAt, Rng, report, run_and_kill};
use capsaga_store::SagaStore;
use capsaga_store::sqlite::SqliteStore as Db;
use capsaga_tests::{TestWorkspace, block_on, snapshot};
use serde_json::{Value, json};
use std::collections::BTreeMap;
use std::os::unix::fs::PermissionsExt;
use std::time::{Duration, Instant};

const POLICY: &str = r#"
[tools.fs_churn]
grants = ["fs:write:~/ws/**"]
"#;

/// 60 files of 4 KiB (modes vary), a directory of 10, a link.
fn populate(ws: &TestWorkspace) {
    let data = ws.ws().join("data");
    std::fs::create_dir_all(data.join("sub")).unwrap();
    for i in 0..60u32 {
        let p = data.join(format!("e{i}.txt"));
        std::fs::write(&p, format!("{i:04}").repeat(1024)).unwrap();
        let mode = if i % 3 == 0 { 0o600 } else { 0o644 };
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(mode)).unwrap();
    }
    for i in 0..10u32 {
        std::fs::write(data.join(format!("sub/s{i}")), format!("sub {i}\n")).unwrap();
    }
    std::os::unix::fs::symlink("e1.txt", data.join("link")).unwrap();
}

/// The step: 40 overwrites, 50 new files in a new directory, 5 removals,
/// a directory renamed and written into, a file renamed.
fn churn(ws: &TestWorkspace) -> Value {
    let d = |rel: &str| ws.ws_path(&format!("data/{rel}"));
    let mut ops = vec![json!({"op": "mkdir", "path": ws.ws_path("out")})];
    for i in 0..40 {
        ops.push(json!({"op": "write", "path": d(&format!("e{i}.txt")), "content": format!("changed {i}")}));
    }
    ops.push(json!({"op": "many", "dir": ws.ws_path("out"), "count": 50, "size": 4096}));
    for i in 50..55 {
        ops.push(json!({"op": "unlink", "path": d(&format!("e{i}.txt"))}));
    }
    ops.push(json!({"op": "rename", "from": d("sub"), "to": d("sub2")}));
    ops.push(json!({"op": "write", "path": d("sub2/s0"), "content": "moved and changed"}));
    ops.push(json!({"op": "rename", "from": d("e55.txt"), "to": d("e55.moved")}));
    json!({ "ops": ops })
}

fn plan(ws: &TestWorkspace, t: u64) -> std::path::PathBuf {
    let plan = json!({
        "description": format!("fs trial {t}"),
        "steps": [
            {"tool": "fs_churn", "args": churn(ws)},
            {"tool": "fs_churn", "args": {"ops": [], "after": "fail"}},
        ],
    });
    let p = ws.root.join(format!("fs_plan_{t}.json"));
    std::fs::write(&p, plan.to_string()).unwrap();
    p
}

fn recover(ws: &TestWorkspace) {
    let out = ws.capsaga(&["--json", "recover"]).output().unwrap();
    assert!(
        out.status.success(),
        "recover failed ({:?}): {} {}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Bytes of the journals under the state directory now.
fn journal_bytes(ws: &TestWorkspace) -> u64 {
    let dir = ws.root.join(".capsaga/fs-journal");
    let Ok(sagas) = std::fs::read_dir(dir) else {
        return 0;
    };
    sagas
        .flatten()
        .filter_map(|d| std::fs::read_dir(d.path()).ok())
        .flat_map(|rd| rd.flatten())
        .filter_map(|f| f.metadata().ok())
        .map(|m| m.len())
        .sum()
}

/// The state the kill left the trial's saga in (before recovery).
fn phase(db: &Db, label: &str) -> &'static str {
    let sagas = block_on(db.sagas(100_000)).unwrap();
    match sagas.iter().find(|s| s.label == label) {
        None => "before the saga",
        Some(s) if s.state.is_terminal() => "after the end",
        Some(s) if s.state.as_str() == "Compensating" => "in the restore",
        Some(_) => "in the step",
    }
}

#[test]
fn sigkill_during_a_journaled_step_and_its_restore_leaves_no_partial_state() {
    let trials: u64 = std::env::var("CAPSAGA_FS_CRASH_TRIALS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(200);
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
        "fs crash test: {trials} kill points, CAPSAGA_CRASH_SEED={seed}"
    ));
    let mut rng = Rng(seed);
    let ws = TestWorkspace::new(&["fs_churn"], POLICY);
    populate(&ws);
    let before = snapshot(&ws.ws());
    recover(&ws);
    let db = Db::open(&ws.root.join(".capsaga/state.db")).unwrap();

    // Runs to the end: how long a run and a recovery take here, and how
    // big the step's journal grows (its pre-images, then the restore's
    // progress notes).
    let mut runs = Vec::new();
    let mut journal_max = 0u64;
    for t in 0..3 {
        let t0 = Instant::now();
        let mut child = ws
            .capsaga(&[
                "--json",
                "run",
                "--plan",
                plan(&ws, 1000 + t).to_str().unwrap(),
            ])
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap();
        while child.try_wait().unwrap().is_none() {
            journal_max = journal_max.max(journal_bytes(&ws));
            std::thread::sleep(Duration::from_micros(200));
        }
        runs.push(t0.elapsed());
        let out = child.wait_with_output().unwrap();
        let v: Value = serde_json::from_slice(&out.stdout).unwrap_or_default();
        assert_eq!(v["final_state"], "FailedRolledBack", "{v:#}");
        assert_eq!(snapshot(&ws.ws()), before, "an uninterrupted run");
    }
    runs.sort();
    let run_time = runs[1];
    let t0 = Instant::now();
    recover(&ws);
    let recover_time = t0.elapsed();
    assert!(journal_max > 0, "the step journaled nothing");

    let mut phases: BTreeMap<&str, u64> = BTreeMap::new();
    let mut recoveries_killed = 0;
    let started = Instant::now();
    for t in 1..=trials {
        let label = format!("fs trial {t}");
        let plan = plan(&ws, t);
        let cmd = ws.capsaga(&["run", "--plan", plan.to_str().unwrap()]);
        // A third of the kill points at a random time, a third when the
        // step's journal reaches a random size (inside the step's writes or
        // the restore's notes), a third after a random number of WAL rows.
        let threshold = rng.below(journal_max) + 1;
        let grown = || journal_bytes(&ws) >= threshold;
        let at = match rng.below(3) {
            0 => KillAt::After(Duration::from_micros(
                rng.below(run_time.as_micros() as u64),
            )),
            1 => KillAt::When(&grown),
            _ => KillAt::Rows(1 + rng.below(8) as i64, rng.below(3000)),
        };
        let how = match at {
            KillAt::After(d) => format!("after {d:?}"),
            KillAt::When(_) => format!("at {threshold} journal bytes"),
            KillAt::Rows(r, j) => format!("after {r} rows + {j} us"),
        };
        let killed = run_and_kill(cmd, &db, at);
        *phases
            .entry(if killed {
                phase(&db, &label)
            } else {
                "not killed"
            })
            .or_default() += 1;
        if rng.below(3) == 0 {
            let at = Duration::from_micros(rng.below(recover_time.as_micros() as u64 * 5 / 4));
            if run_and_kill(ws.capsaga(&["recover"]), &db, KillAt::After(at)) {
                recoveries_killed += 1;
            }
        }
        recover(&ws);
        let now = snapshot(&ws.ws());
        if now != before {
            let diff: Vec<_> = now
                .keys()
                .chain(before.keys())
                .filter(|k| now.get(*k) != before.get(*k))
                .take(10)
                .collect();
            panic!("trial {t} (seed {seed}, killed {how}): partial state at {diff:?}");
        }
        let sagas = block_on(db.sagas(100_000)).unwrap();
        for s in &sagas {
            assert!(
                s.state.is_terminal(),
                "trial {t}: saga {} left {}",
                s.saga_id,
                s.state
            );
            assert_ne!(
                s.state.as_str(),
                "FailedRollbackPartial",
                "trial {t}: {}",
                s.saga_id
            );
        }
    }
    report(&format!(
        "fs crash test: {trials} kill points in {:.1} s (a run {} ms, a recovery {} ms): {phases:?}, {recoveries_killed} recoveries killed; 0 partial states",
        started.elapsed().as_secs_f64(),
        run_time.as_millis(),
        recover_time.as_millis()
    ));
}
