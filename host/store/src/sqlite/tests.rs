use super::super::*;
use super::schema::SCHEMA;
use super::*;
use capsaga_core::error::{ErrorKind, ToolError};
use capsaga_core::fsm::State;
use capsaga_core::tool::ToolOutput;
use serde_json::{Value, json};

fn block<F: std::future::Future>(f: F) -> F::Output {
    tokio::runtime::Builder::new_current_thread()
        .build()
        .expect("runtime")
        .block_on(f)
}

#[test]
fn creates_and_reopens() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("s/state.db");
    drop(SqliteStore::open(&p).unwrap());
    let db = SqliteStore::open(&p).unwrap();
    let mode: String = db
        .read(|c| Ok(c.query_row("PRAGMA journal_mode", [], |r| r.get(0))?))
        .unwrap();
    assert_eq!(mode, "wal");
}

#[test]
fn garbage_file_is_corrupt_and_untouched() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("state.db");
    let junk = b"this is not a database at all, but it is long enough to look like a header...."
        .repeat(20);
    std::fs::write(&p, &junk).unwrap();
    let err = SqliteStore::open(&p).unwrap_err();
    assert!(matches!(err, StoreError::Corrupt { .. }), "{err}");
    assert_eq!(std::fs::read(&p).unwrap(), junk);
}

#[test]
fn foreign_database_refused() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("other.db");
    {
        let c = Connection::open(&p).unwrap();
        c.execute_batch("CREATE TABLE customers(id INTEGER); INSERT INTO customers VALUES (1);")
            .unwrap();
    }
    assert!(matches!(
        SqliteStore::open(&p),
        Err(StoreError::Foreign { .. })
    ));
}

#[test]
fn version_1_file_is_migrated_in_place() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("state.db");
    {
        let c = Connection::open(&p).unwrap();
        c.execute_batch(SCHEMA).unwrap();
        c.execute_batch(&format!(
            "PRAGMA application_id = {APPLICATION_ID}; PRAGMA user_version = 1;
             INSERT INTO saga_state (saga_id, state, origin, created_at, updated_at) VALUES ('s', 'Done', 'plan', 't', 't');
             INSERT INTO wal_log (seq, saga_id, record, detail, at, prev_hash, hash) VALUES (1, 's', 'STATE', '{{}}', 't', 'p', 'h1');
             INSERT INTO wal_log (seq, saga_id, record, detail, at, prev_hash, hash) VALUES (2, 's', 'STATE', '{{}}', 't', 'h1', 'h2');"
        ))
        .unwrap();
    }
    let db = SqliteStore::open(&p).unwrap();
    let (version, head, owner): (i64, (i64, String), Option<String>) = db
        .read(|c| {
            Ok((
                c.query_row("PRAGMA user_version", [], |r| r.get(0))?,
                c.query_row("SELECT seq, hash FROM wal_head", [], |r| {
                    Ok((r.get(0)?, r.get(1)?))
                })?,
                c.query_row("SELECT owner FROM saga_state", [], |r| r.get(0))?,
            ))
        })
        .unwrap();
    assert_eq!(version, SCHEMA_VERSION);
    assert_eq!(
        head,
        (2, "h2".to_string()),
        "the head is anchored at the last row"
    );
    assert_eq!(owner, None);
    // Opening again changes nothing.
    drop(db);
    assert!(SqliteStore::open(&p).is_ok());
}

#[test]
fn newer_schema_refused() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("state.db");
    drop(SqliteStore::open(&p).unwrap());
    {
        let c = Connection::open(&p).unwrap();
        c.execute_batch("PRAGMA user_version = 99").unwrap();
    }
    assert!(matches!(
        SqliteStore::open(&p),
        Err(StoreError::TooNew { found: 99, .. })
    ));
}

fn out(v: Value) -> ToolOutput {
    ToolOutput {
        data: v,
        effects: vec![],
        next_hint: None,
        summary: String::new(),
    }
}

#[test]
fn begin_commit_and_replay() {
    block(async {
        let dir = tempfile::tempdir().unwrap();
        let db = SqliteStore::open(&dir.path().join("s.db")).unwrap();
        db.create_saga(&NewSaga {
            saga_id: "s1",
            origin: Origin::Plan,
            label: "test",
            state: State::Planning,
            owner: "me",
            plan: None,
            principal: None,
        })
        .await
        .unwrap();
        let args = json!({"a": 1});
        let grants = vec!["fs:write:/x/**".to_string()];
        let step = NewStep {
            saga_id: "s1",
            step_seq: 0,
            tool_id: "t",
            tool_hash: "h",
            grants: &grants,
            has_side_effects: true,
            idempotency_key: "k0",
            args: &args,
            preimage: None,
            approval: None,
        };
        assert_eq!(db.begin_step(&step).await.unwrap(), BeginOutcome::Started);
        assert_eq!(
            db.begin_step(&step).await.unwrap(),
            BeginOutcome::Exists(StepStatus::Begin)
        );
        db.commit_step("s1", 0, &out(json!({"ok": true})))
            .await
            .unwrap();
        assert_eq!(
            db.begin_step(&step).await.unwrap(),
            BeginOutcome::AlreadyCommitted(out(json!({"ok": true})))
        );
        // A committed step cannot fail afterwards.
        let e = ToolError::with_hint(ErrorKind::Unknown, "x", "y");
        assert!(db.fail_step("s1", 0, &e).await.is_err());
        db.compensated("s1", 0).await.unwrap();
        let steps = db.steps("s1").await.unwrap();
        assert_eq!(steps[0].status, StepStatus::Compensated);
        let log = db.log(Some("s1")).await.unwrap();
        let records: Vec<&str> = log.iter().map(|l| l.record.as_str()).collect();
        assert_eq!(records, ["STATE", "BEGIN", "COMMIT", "COMPENSATED"]);
        assert!(capsaga_core::wal_row::verify(&log).is_none());
        // Budget counters exist from the first open.
        db.record_spend("2026-01-01", 0.5, 10, 20).await.unwrap();
        assert_eq!(db.day_spent("2026-01-01").await.unwrap(), 0.5);
        assert_eq!(db.budget_days(7).await.unwrap().len(), 1);
    });
}

#[test]
fn busy_is_told_apart() {
    let e: StoreError = rusqlite::Error::SqliteFailure(
        rusqlite::ffi::Error::new(rusqlite::ffi::SQLITE_BUSY),
        Some("database is locked".into()),
    )
    .into();
    assert!(matches!(e, StoreError::Busy(_)), "{e}");
    assert!(e.to_string().contains("database is locked"));
}
