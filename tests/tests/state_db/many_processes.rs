//! Issue 13, item 11: many processes, one state database.

use capsaga_store::SCHEMA_VERSION;
use capsaga_store::sqlite::APPLICATION_ID;
use capsaga_tests::TestWorkspace;
use rusqlite::Connection;
use serde_json::json;
use std::process::{Child, Output, Stdio};

/// How many `capsaga run --plan` processes the stress test starts together
/// (`CAPSAGA_STRESS_PROCESSES` overrides; the issue's figure of 200 is the
/// ignored `two_hundred_plans_on_a_fresh_state_directory`).
fn processes(default: usize) -> usize {
    std::env::var("CAPSAGA_STRESS_PROCESSES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn spawn(ws: &TestWorkspace, args: &[&str]) -> Child {
    ws.capsaga(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

/// Wait for every child, draining its outputs.
fn wait_all(children: Vec<Child>) -> Vec<Output> {
    children
        .into_iter()
        .map(|c| c.wait_with_output().unwrap())
        .collect()
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

fn never_damaged(outputs: &[Output]) {
    for o in outputs {
        let e = stderr(o);
        assert_ne!(
            o.status.code(),
            Some(8),
            "exit 8 for a database that is only busy: {e}"
        );
        for bad in ["not a capsaga state database", "corrupt", "application id"] {
            assert!(!e.contains(bad), "{bad}: {e}");
        }
    }
}

fn stamped(db: &std::path::Path) {
    let c = Connection::open(db).unwrap();
    let app: i64 = c
        .query_row("PRAGMA application_id", [], |r| r.get(0))
        .unwrap();
    let version: i64 = c
        .query_row("PRAGMA user_version", [], |r| r.get(0))
        .unwrap();
    assert_eq!((app, version), (APPLICATION_ID, SCHEMA_VERSION));
}

#[test]
fn a_fresh_state_directory_is_created_once_by_many_processes() {
    // Several rounds, each on a state directory that does not exist yet,
    // with every kind of first command (readers and writers) at once.
    let commands: [&[&str]; 6] = [
        &["sagas"],
        &["approvals", "--all"],
        &["audit", "verify"],
        &["budget"],
        &["tools", "list"],
        &["recover"],
    ];
    for round in 0..3 {
        let ws = TestWorkspace::new(&[], "");
        assert!(!ws.root.join(".capsaga").exists());
        let children: Vec<Child> = (0..24)
            .map(|i| spawn(&ws, commands[(i + round) % commands.len()]))
            .collect();
        let outputs = wait_all(children);
        never_damaged(&outputs);
        for o in &outputs {
            assert_eq!(o.status.code(), Some(0), "round {round}: {}", stderr(o));
        }
        stamped(&ws.root.join(".capsaga/state.db"));
    }
}

const FS_WRITE: &str = r#"
[tools.fs_write]
grants = ["fs:write:~/ws/**"]
"#;

/// `n` processes each running a plan of ten `fs_write` steps to files of
/// its own, started together on a state directory that does not exist yet.
fn plans_on_a_fresh_state_directory(n: usize) {
    let ws = TestWorkspace::new(&["fs_write"], FS_WRITE);
    let plans: Vec<String> = (0..n)
        .map(|p| {
            let steps: Vec<_> = (0..10)
                .map(|s| json!({"tool": "fs_write", "args": {"path": ws.ws_path(&format!("p{p}/f{s}.txt")), "content": format!("{p}.{s}")}}))
                .collect();
            std::fs::create_dir(ws.ws().join(format!("p{p}"))).unwrap();
            let path = ws.root.join(format!("plan{p}.json"));
            std::fs::write(&path, json!({"description": format!("p{p}"), "steps": steps}).to_string()).unwrap();
            path.to_string_lossy().into_owned()
        })
        .collect();
    assert!(!ws.root.join(".capsaga").exists());
    let children: Vec<Child> = plans
        .iter()
        .map(|p| spawn(&ws, &["--json", "run", "--plan", p]))
        .collect();
    let outputs = wait_all(children);
    never_damaged(&outputs);
    let mut done = 0;
    for (p, o) in outputs.iter().enumerate() {
        let code = o.status.code();
        assert!(
            matches!(code, Some(0 | 5 | 11)),
            "plan {p}: exit {code:?}: {}",
            stderr(o)
        );
        if code == Some(0) {
            done += 1;
            for s in 0..10 {
                let f = ws.ws().join(format!("p{p}/f{s}.txt"));
                assert_eq!(std::fs::read_to_string(&f).unwrap(), format!("{p}.{s}"));
            }
        }
    }
    // A process that gave up (busy) left its saga to the next command's
    // recovery: run one, then nothing may be left in the middle.
    let rec = ws.capsaga(&["recover"]).output().unwrap();
    assert!(rec.status.success(), "{rec:?}");
    let db = ws.root.join(".capsaga/state.db");
    stamped(&db);
    let c = Connection::open(&db).unwrap();
    let mut st = c
        .prepare("SELECT state, count(*) FROM saga_state GROUP BY state")
        .unwrap();
    let states: Vec<(String, i64)> = st
        .query_map([], |r| Ok((r.get(0)?, r.get(1)?)))
        .unwrap()
        .map(Result::unwrap)
        .collect();
    let total: i64 = states.iter().map(|(_, k)| k).sum();
    assert_eq!(total, n as i64, "{states:?}");
    for (state, _) in &states {
        assert!(
            state == "Done" || state == "FailedRolledBack",
            "a saga left {state}: {states:?}"
        );
    }
    let done_rows = states
        .iter()
        .find(|(s, _)| s == "Done")
        .map_or(0, |(_, k)| *k);
    assert_eq!(done_rows, done, "{states:?}");
    assert_eq!(done, n as i64, "every plan ran to Done: {states:?}");
    let audit = ws.capsaga(&["audit", "verify"]).output().unwrap();
    assert!(audit.status.success(), "{audit:?}");
}

#[test]
fn many_plans_on_a_fresh_state_directory_all_finish() {
    plans_on_a_fresh_state_directory(processes(48));
}

/// The issue's figure: 200 processes (minutes on a 2-core machine; run with
/// `cargo test --workspace --test state_db -- --ignored`).
#[test]
#[ignore = "200 processes: minutes on a small machine"]
fn two_hundred_plans_on_a_fresh_state_directory() {
    plans_on_a_fresh_state_directory(200);
}

fn call_with(ws: &TestWorkspace, file: &str) -> Output {
    let args = json!({"path": ws.ws_path(file), "content": "x"}).to_string();
    ws.capsaga(&["call", "fs_write", &args]).output().unwrap()
}

#[test]
fn a_busy_database_is_busy_and_a_damaged_one_is_damaged() {
    let ws = TestWorkspace::new(&["fs_write"], &format!("busy_timeout_ms = 700\n{FS_WRITE}"));
    assert_eq!(call_with(&ws, "first.txt").status.code(), Some(0));
    let db = ws.root.join(".capsaga/state.db");

    // Another SQLite writer keeps the write lock past the wait.
    let outside = Connection::open(&db).unwrap();
    outside.execute_batch("BEGIN IMMEDIATE").unwrap();
    let o = call_with(&ws, "a.txt");
    assert_eq!(o.status.code(), Some(11), "{}", stderr(&o));
    assert!(stderr(&o).contains("busy"), "{}", stderr(&o));
    outside.execute_batch("ROLLBACK").unwrap();

    // An exclusive lock: not even a read gets through.
    outside
        .execute_batch("PRAGMA locking_mode = EXCLUSIVE; BEGIN EXCLUSIVE;")
        .unwrap();
    let o = call_with(&ws, "b.txt");
    assert_eq!(o.status.code(), Some(11), "{}", stderr(&o));
    assert!(stderr(&o).contains("busy"), "{}", stderr(&o));
    outside.execute_batch("COMMIT").unwrap();
    drop(outside);

    // Another capsaga process keeps the write turn past the wait.
    let turn = std::fs::OpenOptions::new()
        .write(true)
        .open(ws.root.join(".capsaga/state.db.lock"))
        .unwrap();
    turn.lock().unwrap();
    let o = call_with(&ws, "c.txt");
    assert_eq!(o.status.code(), Some(11), "{}", stderr(&o));
    assert!(stderr(&o).contains("busy"), "{}", stderr(&o));
    // Held for less than the wait: the step waits its turn and runs. The
    // lock is let go once the call is seen queued behind it (its blocked
    // request in /proc/locks), not after a guessed delay; and the call
    // waits as long as the test itself would (the test's wait bound), so
    // however late a loaded machine schedules this thread, the call is
    // still queued when it looks (with 700 ms it had given up first, and
    // the look waited for a request that was gone).
    ws.write_policy(&format!(
        "busy_timeout_ms = {}\n{FS_WRITE}",
        capsaga_tests::wait_bound().as_millis().clamp(1, 3_600_000)
    ));
    let args = json!({"path": ws.ws_path("d.txt"), "content": "x"}).to_string();
    let mut child = ws
        .capsaga(&["call", "fs_write", &args])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let pid = child.id().to_string();
    if std::path::Path::new("/proc/locks").exists() {
        // Queued, or already ended (then its exit status below says why,
        // at once, instead of a wait for a request that is gone).
        capsaga_tests::wait_until("the call queued for the write turn or ended", || {
            let queued = std::fs::read_to_string("/proc/locks").is_ok_and(|l| {
                l.lines()
                    .any(|line| line.contains("->") && line.split_whitespace().any(|w| w == pid))
            });
            queued || child.try_wait().is_ok_and(|s| s.is_some())
        });
    }
    turn.unlock().unwrap();
    let o = child.wait_with_output().unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert!(ws.ws().join("d.txt").exists());
    for f in ["a.txt", "b.txt", "c.txt"] {
        assert!(!ws.ws().join(f).exists(), "{f} written while busy");
    }
    let audit = ws.capsaga(&["audit", "verify"]).output().unwrap();
    assert!(audit.status.success(), "{audit:?}");

    // Damaged and foreign databases are still exit 8.
    let foreign = TestWorkspace::new(&["fs_write"], FS_WRITE);
    std::fs::create_dir(foreign.root.join(".capsaga")).unwrap();
    let c = Connection::open(foreign.root.join(".capsaga/state.db")).unwrap();
    c.execute_batch("PRAGMA application_id = 1234; CREATE TABLE t (x);")
        .unwrap();
    drop(c);
    let o = call_with(&foreign, "e.txt");
    assert_eq!(o.status.code(), Some(8), "{}", stderr(&o));
    let junk = TestWorkspace::new(&["fs_write"], FS_WRITE);
    std::fs::create_dir(junk.root.join(".capsaga")).unwrap();
    std::fs::write(junk.root.join(".capsaga/state.db"), vec![0x5a; 8192]).unwrap();
    let o = call_with(&junk, "f.txt");
    assert_eq!(o.status.code(), Some(8), "{}", stderr(&o));
}
