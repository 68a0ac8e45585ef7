//! Tampering with the write-ahead log of a real SQLite file, and `audit
//! verify` catching it: an edited row, an edited and re-hashed row, a deleted
//! row in the middle, the newest rows deleted, rows reordered, and tables
//! edited behind the log's back (a forged approval, a hidden failed
//! compensation). Each is caught, with the first bad row named.

use capsaga_door::dispatch::Dispatcher;
use capsaga_door::plan::{self, Plan, PlanStep};
use capsaga_store::LogStore;
use capsaga_store::audit::{self, AuditReport};
use capsaga_store::sqlite::SqliteStore;
use capsaga_tests::{FS_POLICY, TestWorkspace};
use rusqlite::Connection;
use serde_json::json;
use std::path::{Path, PathBuf};

/// A workspace whose log has a few sagas: one Done, one rolled back, one
/// parked on an approval. Returns it and the number of log rows.
async fn populated() -> (TestWorkspace, i64) {
    let policy = format!(
        "{FS_POLICY}\n[tools.ledger]\ngrants = [\"fs:write:~/ws/**\"]\napproval = \"always\"\n"
    );
    let ws = TestWorkspace::new(&["fs_write", "ledger"], &policy);
    let host = ws.host().await;
    let write = |name: &str, content: &str| PlanStep {
        tool: "fs_write".into(),
        args: json!({"path": ws.ws_path(name), "content": content}),
    };
    let plans = [
        Plan {
            description: "done".into(),
            steps: vec![write("a.txt", "A"), write("b.txt", "B")],
        },
        Plan {
            description: "rolled back".into(),
            steps: vec![
                write("c.txt", "C"),
                PlanStep {
                    tool: "fs_write".into(),
                    args: json!({"path": ws.root.join("outside.txt").to_string_lossy(), "content": "x"}),
                },
            ],
        },
        Plan {
            description: "parked".into(),
            steps: vec![
                write("d.txt", "D"),
                PlanStep {
                    tool: "ledger".into(),
                    args: json!({"path": ws.ws_path("l.txt"), "entry": "e"}),
                },
            ],
        },
    ];
    let door = Dispatcher::new(host.clone());
    for p in &plans {
        plan::run(&door, p, None).await.unwrap();
    }
    let rows = host.store.log(None).await.unwrap().len() as i64;
    drop(door);
    drop(host);
    // Fold the SQLite WAL file into the database so that one file is the
    // whole state, then check the untouched copy is clean.
    tamper(&state_db(&ws), "PRAGMA wal_checkpoint(TRUNCATE);");
    let db = SqliteStore::open(&state_db(&ws)).unwrap();
    let report = audit::verify(&db, None).await.unwrap();
    assert!(report.ok(), "{report:#?}");
    (ws, rows)
}

fn state_db(ws: &TestWorkspace) -> PathBuf {
    ws.root.join(".capsaga/state.db")
}

/// Run `sql` on the database file as someone with write access to it would,
/// outside capsaga.
fn tamper(path: &Path, sql: &str) {
    let c = Connection::open(path).unwrap();
    c.execute_batch(sql).unwrap();
}

/// Copy the database, tamper with the copy, audit it.
async fn tampered(ws: &TestWorkspace, name: &str, sql: &str) -> AuditReport {
    let copy = ws.root.join(format!("{name}.db"));
    std::fs::copy(state_db(ws), &copy).unwrap();
    audit_after(&copy, sql).await
}

async fn audit_after(path: &Path, sql: &str) -> AuditReport {
    tamper(path, &format!("BEGIN IMMEDIATE;\n{sql};\nCOMMIT;"));
    let db = SqliteStore::open(path).unwrap();
    audit::verify(&db, None).await.unwrap()
}

fn assert_caught(report: &AuditReport, first_bad: i64, check: &str, words: &str) {
    assert!(!report.ok(), "not caught");
    assert_eq!(report.first_bad_row(), Some(first_bad), "{report:#?}");
    let f = report
        .findings
        .iter()
        .find(|f| f.seq == Some(first_bad) && f.check == check)
        .unwrap_or_else(|| panic!("no {check} finding at row {first_bad}: {report:#?}"));
    assert!(f.reason.contains(words), "{}", f.reason);
}

#[tokio::test(flavor = "multi_thread")]
async fn every_kind_of_tampering_is_caught_at_the_first_bad_row() {
    let (ws, rows) = populated().await;
    assert!(rows > 20, "{rows}");

    // An edited row.
    let r = tampered(
        &ws,
        "edit",
        "UPDATE wal_log SET detail = replace(detail, '\"A\"', '\"Z\"') WHERE seq = 3",
    )
    .await;
    assert_caught(&r, 3, "chain", "edited");
    let r = tampered(
        &ws,
        "edit_time",
        "UPDATE wal_log SET at = '2000-01-01T00:00:00.000Z' WHERE seq = 4",
    )
    .await;
    assert_caught(&r, 4, "chain", "edited");

    // An edited row whose own hash was recomputed, as someone who knows the
    // scheme would (the row verifies; the next one's link does not).
    let copy = ws.root.join("rehash.db");
    std::fs::copy(state_db(&ws), &copy).unwrap();
    {
        let db = SqliteStore::open(&copy).unwrap();
        let row = db
            .log(None)
            .await
            .unwrap()
            .into_iter()
            .find(|r| r.seq == 6)
            .unwrap();
        let mut detail = row.detail.clone();
        detail["forged"] = json!(true);
        let hash = capsaga_core::wal_row::row_hash(
            &row.prev_hash,
            row.seq,
            &row.saga_id,
            row.step_seq,
            &row.record,
            &detail,
            &row.at,
        );
        Connection::open(&copy)
            .unwrap()
            .execute(
                "UPDATE wal_log SET detail = ?1, hash = ?2 WHERE seq = 6",
                (detail.to_string(), hash),
            )
            .unwrap();
        let r = audit::verify(&db, None).await.unwrap();
        assert_caught(&r, 6, "chain", "re-hashed");
    }

    // A row deleted in the middle.
    let r = tampered(&ws, "delete", "DELETE FROM wal_log WHERE seq = 9").await;
    assert_caught(&r, 9, "chain", "deleted");

    // The newest rows deleted: the chain alone still verifies; the anchored
    // head does not.
    let cut = rows - 2;
    let r = tampered(
        &ws,
        "truncate",
        &format!("DELETE FROM wal_log WHERE seq >= {cut}"),
    )
    .await;
    assert!(r.chain.is_none(), "the chain cannot see this: {r:#?}");
    assert_caught(&r, cut, "head", "deleted from the end");

    // The newest rows deleted and the head moved to match: the tables no
    // longer agree with a replay of the log.
    let r = tampered(
        &ws,
        "truncate_head",
        &format!(
            "DELETE FROM wal_log WHERE seq >= {cut};
             UPDATE wal_head SET seq = (SELECT max(seq) FROM wal_log), hash = (SELECT hash FROM wal_log ORDER BY seq DESC LIMIT 1);"
        ),
    ).await;
    assert!(r.chain.is_none());
    assert!(!r.ok(), "{r:#?}");
    assert!(r.findings.iter().all(|f| f.check == "replay"), "{r:#?}");

    // Two rows swapped.
    let r = tampered(
        &ws,
        "reorder",
        "UPDATE wal_log SET seq = -1 WHERE seq = 12;
         UPDATE wal_log SET seq = 12 WHERE seq = 13;
         UPDATE wal_log SET seq = 13 WHERE seq = -1;",
    )
    .await;
    assert_caught(&r, 12, "chain", "reordered");

    // A forged approval, written into the table without a logged decision.
    let r = tampered(
        &ws,
        "forged",
        "UPDATE approvals SET status = 'approved', decided_by = 'cli:mallory'",
    )
    .await;
    assert!(!r.ok());
    assert!(r.chain.is_none());
    let f = &r.findings[0];
    assert_eq!(f.check, "replay");
    assert!(
        f.reason
            .contains("approved in its table but pending in the log"),
        "{}",
        f.reason
    );

    // A saga's state changed behind the log.
    let r = tampered(
        &ws,
        "state",
        "UPDATE saga_state SET state = 'Done' WHERE label = 'rolled back'",
    )
    .await;
    assert!(
        r.findings
            .iter()
            .any(|f| f.check == "replay" && f.reason.contains("Done in its table")),
        "{r:#?}"
    );

    // The CLI says the same about the workspace itself, and exits 7.
    tamper(
        &state_db(&ws),
        &format!("DELETE FROM wal_log WHERE seq >= {cut}"),
    );
    let out = ws.capsaga(&["audit", "verify"]).output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(7), "{text}");
    assert!(text.contains(&format!("first bad row {cut}")), "{text}");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_witnessed_head_catches_a_consistent_rewrite_of_the_end() {
    let (ws, rows) = populated().await;
    let out = ws.capsaga(&["--json", "audit", "verify"]).output().unwrap();
    assert!(out.status.success());
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let head = v["head"].as_str().unwrap().to_string();
    assert!(head.starts_with(&format!("{rows}:")), "{head}");
    let ok = ws
        .capsaga(&["audit", "verify", "--expect-head", &head])
        .output()
        .unwrap();
    assert!(ok.status.success());
    // Remove the newest row and re-anchor the head, as someone who knows the
    // scheme would: only the witnessed head (and the replay) can tell.
    tamper(
        &state_db(&ws),
        &format!(
            "BEGIN IMMEDIATE;
             DELETE FROM wal_log WHERE seq = {rows};
             UPDATE wal_head SET seq = (SELECT max(seq) FROM wal_log), hash = (SELECT hash FROM wal_log ORDER BY seq DESC LIMIT 1);
             COMMIT;"
        ),
    );
    let out = ws
        .capsaga(&["--json", "audit", "verify", "--expect-head", &head])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(7));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["first_bad_row"], rows, "{v:#}");
    let bad = ws
        .capsaga(&["audit", "verify", "--expect-head", "12:nothex"])
        .output()
        .unwrap();
    assert_eq!(bad.status.code(), Some(2));
}

/// A saga the log ends Done while one of its steps has no outcome (BEGIN
/// only: what an older capsaga left when the store failed while a step's
/// outcome was written, and the saga was committed anyway) fails `audit
/// verify`, naming the saga and the step; the chain itself is intact.
#[tokio::test(flavor = "multi_thread")]
async fn a_done_saga_holding_a_begin_only_step_fails_audit_verify() {
    use capsaga_core::fsm::State;
    use capsaga_store::{FIRST_FENCE, NewSaga, NewStep, Scope};
    let (ws, _) = populated().await;
    let db = SqliteStore::open(&state_db(&ws)).unwrap();
    use capsaga_store::{SagaStore, StepStore};
    db.create_saga(&NewSaga {
        saga_id: "committed-in-doubt",
        scope: Scope::Session,
        label: "an older capsaga's commit",
        state: State::Planning,
        owner: "gone",
        plan: None,
        principal: None,
    })
    .await
    .unwrap();
    db.set_state(
        "committed-in-doubt",
        FIRST_FENCE,
        State::Done,
        "ValidationPassed",
        None,
    )
    .await
    .unwrap();
    let args = json!({"path": ws.ws_path("l.txt"), "entry": "x"});
    db.begin_step(&NewStep {
        saga_id: "committed-in-doubt",
        step_seq: 0,
        tool_id: "ledger",
        tool_hash: "h",
        grants: &[],
        has_side_effects: true,
        idempotency_key: "committed-in-doubt-0",
        args: &args,
        preimage: None,
        approval: None,
        fence: FIRST_FENCE,
    })
    .await
    .unwrap();
    drop(db);
    let out = ws.capsaga(&["--json", "audit", "verify"]).output().unwrap();
    assert_eq!(out.status.code(), Some(7), "{out:?}");
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let findings = v["findings"].as_array().unwrap();
    assert_eq!(findings.len(), 1, "{v:#}");
    assert_eq!(findings[0]["check"], "outcome");
    let reason = findings[0]["reason"].as_str().unwrap();
    assert!(
        reason.contains("saga committed-in-doubt is Done")
            && reason.contains("step 0 has no outcome"),
        "{reason}"
    );
}
