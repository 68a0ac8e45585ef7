//! Rules 1-3: SQL only in the storage layers, only the door runs a tool,
//! only the door writes the log and the approvals.

use super::*;

/// SQL statements and the SQLite crate, as they appear in Rust code.
const SQL: &[&str] = &[
    "rusqlite",
    "\"SELECT ",
    "SELECT count(",
    " FROM saga_",
    "INSERT INTO",
    "INSERT OR ",
    "UPDATE saga_",
    "UPDATE approvals",
    "UPDATE wal_",
    "DELETE FROM",
    "CREATE TABLE",
    "CREATE INDEX",
    "ALTER TABLE",
    "DROP TABLE",
    "PRAGMA ",
    "execute_batch",
];

/// Building a sandbox call or naming an export to run.
const RUNS_A_TOOL: &[&str] = &[
    "CallRequest {",
    "Op::Execute",
    "Op::DryRun",
    "Op::Compensate(",
];

/// The store's writing methods (the write-ahead log, sagas, approvals).
const WRITES_THE_LOG: &[&str] = &[
    ".create_saga(",
    ".take_over(",
    ".release_saga(",
    ".claim_released(",
    ".set_state(",
    ".begin_step(",
    ".commit_step(",
    ".fail_step(",
    ".retry_attempt(",
    ".compensated(",
    ".compensation_failed(",
    ".fs_restored(",
    ".request_approval(",
    ".decide_approval(",
];

#[test]
fn sql_only_in_the_storage_layer() {
    let bad = violations(SQL, |k, f| {
        k == "store" || k == "pg-harness" || (k == "memory" && f.starts_with("store/"))
    });
    assert!(
        bad.is_empty(),
        "SQL outside host/store/ (the capsaga-store crate), host/pg-harness/ and host/memory/src/store/:\n{}",
        bad.join("\n")
    );
    // The scanner sees the storage layer's own SQL, and a planted statement.
    let dir = root().join("host/store/src/sqlite");
    let found: usize = sources(&dir)
        .iter()
        .map(|(f, t)| hits(f, t, SQL).len())
        .sum();
    assert!(
        found > 20,
        "the scanner found only {found} SQL lines in the store"
    );
    let dir = root().join("host/memory/src/store");
    let found: usize = sources(&dir)
        .iter()
        .map(|(f, t)| hits(f, t, SQL).len())
        .sum();
    assert!(
        found > 10,
        "the scanner found only {found} SQL lines in the memory's store"
    );
    let planted =
        "fn f(c: &rusqlite::Connection) {\n    c.execute(\"DELETE FROM wal_log\", []);\n}";
    assert_eq!(hits("planted.rs", planted, SQL).len(), 2);
}

#[test]
fn only_the_door_runs_a_tool() {
    let bad = violations(RUNS_A_TOOL, |k, f| {
        in_the_door(k, f)
            || k == "sandbox"
            // Measures the sandbox layer alone against bare Wasmtime: no
            // saga, no log, never a tool call of an agent or an operator.
            || (k == "bench" && ["lib.rs", "cold.rs", "floor.rs", "shell.rs"].contains(&f))
    });
    assert!(
        bad.is_empty(),
        "a tool run outside host/door/src/dispatch/:\n{}",
        bad.join("\n")
    );
    let door = root().join("host/door/src/dispatch");
    let found: usize = sources(&door)
        .iter()
        .map(|(f, t)| hits(f, t, RUNS_A_TOOL).len())
        .sum();
    assert!(found >= 3, "the scanner found {found} runs in the door");
    let planted = "let r = sandbox.call(CallRequest { op: &Op::Execute, ..req });";
    assert_eq!(hits("planted.rs", planted, RUNS_A_TOOL).len(), 1);
}

#[test]
fn only_the_door_writes_the_log_and_the_approvals() {
    let bad = violations(WRITES_THE_LOG, |k, f| in_the_door(k, f) || k == "store");
    assert!(
        bad.is_empty(),
        "the write-ahead log or the approvals written outside the door:\n{}",
        bad.join("\n")
    );
    let door = root().join("host/door/src/dispatch");
    let found: usize = sources(&door)
        .iter()
        .map(|(f, t)| hits(f, t, WRITES_THE_LOG).len())
        .sum();
    assert!(found >= 10, "the scanner found {found} writes in the door");
}
