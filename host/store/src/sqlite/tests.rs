use super::super::*;
use super::schema::{SCHEMA, migrate_to};
use super::*;

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

/// A database of version 6 (issue 24's last) migrates forward to version 7
/// (fencing): its sagas and steps get token 1, its other rows are kept, and
/// from then on the triggers refuse a stale token.
#[test]
fn version_6_file_gains_fencing_in_place() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("state.db");
    {
        let c = older_file(
            &p,
            6,
            &format!(
                "INSERT INTO saga_state (saga_id, state, origin, created_at, updated_at, owner, principal) VALUES ('s', 'Acting', 'mcp', 't', 't', 'gone', 'token:bob');
             INSERT INTO saga_steps (saga_id, step_seq, tool_id, tool_hash, grants, has_side_effects, idempotency_key, args, status, created_at, updated_at)
               VALUES ('s', 0, 't', 'h', '[]', 1, 'k0', '{{}}', 'BEGIN', 't', 't');
             INSERT INTO tokens (name, role, secret_sha256, created_at, created_by) VALUES ('bob', 'client', '{}', 't', 'cli:root');
             INSERT INTO budget_reservations (id, day, usd, holder, created_at, expires_at) VALUES ('r', '2026-12-01', 0.5, 'x', 't', '9999-01-01T00:00:00.000Z');",
                "ab".repeat(32)
            ),
        );
        let fence_columns: i64 = c
            .query_row(
                "SELECT count(*) FROM pragma_table_info('saga_steps') WHERE name = 'fence'",
                [],
                |r| r.get(0),
            )
            .unwrap();
        assert_eq!(fence_columns, 0, "a version 6 file has no fencing");
    }
    let db = SqliteStore::open(&p).unwrap();
    let version: i64 = db
        .read(|c| Ok(c.query_row("PRAGMA user_version", [], |r| r.get(0))?))
        .unwrap();
    assert_eq!(version, SCHEMA_VERSION);
    block(async {
        let saga = db.saga("s").await.unwrap().unwrap();
        assert_eq!(
            (saga.fence, saga.principal.as_deref()),
            (FIRST_FENCE, Some("token:bob"))
        );
        assert_eq!(db.tokens().await.unwrap().len(), 1);
        assert!((db.day_reserved("2026-12-01").await.unwrap() - 0.5).abs() < 1e-12);
        let stale = StepKey {
            saga_id: "s",
            fence: 2,
            step_seq: 0,
        };
        let out = capsaga_core::tool::ToolOutput {
            data: serde_json::json!(1),
            effects: vec![],
            next_hint: None,
            summary: String::new(),
        };
        assert!(matches!(
            db.commit_step(stale, &out).await,
            Err(StoreError::Fenced { held: 2, .. })
        ));
        let current = StepKey { fence: 1, ..stale };
        db.commit_step(current, &out).await.unwrap();
        assert_eq!(
            db.step_at("s", 0).await.unwrap().unwrap().status,
            StepStatus::Commit
        );
    });
    drop(db);
    assert!(
        SqliteStore::open(&p).is_ok(),
        "opening again changes nothing"
    );
}

/// A database of version 9 migrates to version 10 (issue 31: both tables
/// of a record rebuilt without `AUTOINCREMENT`, the duplicate index
/// dropped): its steps keep their ids, its log still verifies and goes on
/// from its head, and the fencing triggers are back on the new table.
#[test]
fn version_9_file_is_rebuilt_for_fewer_pages() {
    use capsaga_core::wal_row::{GENESIS, row_hash, verify};
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("state.db");
    {
        let mut c = older_file(
            &p,
            9,
            "INSERT INTO saga_state (saga_id, state, origin, created_at, updated_at, owner, fence) VALUES ('s', 'Acting', 'mcp', 't', 't', 'gone', 1);
             INSERT INTO saga_steps (id, saga_id, step_seq, tool_id, tool_hash, grants, has_side_effects, idempotency_key, args, status, created_at, updated_at, fence)
               VALUES (7, 's', 0, 't', 'h', '[]', 1, 'k0', '{}', 'BEGIN', 't', 't', 1);",
        );
        let tx = c.transaction().unwrap();
        let mut prev = GENESIS.to_string();
        for seq in 1..=2i64 {
            let detail = serde_json::json!({ "n": seq });
            let hash = row_hash(&prev, seq, "s", Some(0), "BEGIN", &detail, "t");
            tx.execute(
                "INSERT INTO wal_log (seq, saga_id, step_seq, record, detail, at, prev_hash, hash) VALUES (?1, 's', 0, 'BEGIN', ?2, 't', ?3, ?4)",
                rusqlite::params![seq, detail.to_string(), prev, hash],
            )
            .unwrap();
            tx.execute(
                "INSERT INTO wal_head (id, seq, hash) VALUES (1, ?1, ?2) ON CONFLICT(id) DO UPDATE SET seq = excluded.seq, hash = excluded.hash",
                rusqlite::params![seq, hash],
            )
            .unwrap();
            prev = hash;
        }
        tx.commit().unwrap();
    }
    let db = SqliteStore::open(&p).unwrap();
    let (version, autoincrement, duplicate, sequences): (i64, i64, i64, i64) = db
        .read(|c| {
            let q = |sql: &str| c.query_row(sql, [], |r| r.get::<_, i64>(0));
            Ok((
                q("PRAGMA user_version")?,
                q("SELECT count(*) FROM sqlite_schema WHERE name IN ('saga_steps', 'wal_log') AND sql LIKE '%AUTOINCREMENT%'")?,
                q("SELECT count(*) FROM sqlite_schema WHERE name = 'idx_saga'")?,
                q("SELECT count(*) FROM sqlite_schema WHERE name LIKE 'saga_steps%' OR name LIKE 'wal_log%' OR name LIKE 'idx_%'")?,
            ))
        })
        .unwrap();
    assert_eq!(version, SCHEMA_VERSION);
    assert_eq!((autoincrement, duplicate), (0, 0));
    // saga_steps, its two unique indexes and idx_steps_tool_hash; wal_log
    // and idx_wal_log_saga; the other tables' indexes are unchanged.
    assert!(sequences >= 6, "{sequences}");
    block(async {
        let rows = db.log(None).await.unwrap();
        assert_eq!(rows.len(), 2);
        assert_eq!(verify(&rows), None);
        let out = capsaga_core::tool::ToolOutput {
            data: serde_json::json!(1),
            effects: vec![],
            next_hint: None,
            summary: String::new(),
        };
        let stale = StepKey {
            saga_id: "s",
            fence: 2,
            step_seq: 0,
        };
        assert!(matches!(
            db.commit_step(stale, &out).await,
            Err(StoreError::Fenced { held: 2, .. })
        ));
        db.commit_step(StepKey { fence: 1, ..stale }, &out)
            .await
            .unwrap();
        let args = serde_json::json!({});
        db.begin_step(&NewStep {
            saga_id: "s",
            step_seq: 1,
            tool_id: "t",
            tool_hash: "h",
            grants: &[],
            has_side_effects: true,
            idempotency_key: "k1",
            args: &args,
            preimage: None,
            approval: None,
            fence: FIRST_FENCE,
        })
        .await
        .unwrap();
        let rows = db.log(None).await.unwrap();
        assert_eq!(
            rows.iter().map(|r| r.seq).collect::<Vec<_>>(),
            vec![1, 2, 3, 4]
        );
        assert_eq!(verify(&rows), None);
        assert_eq!(
            db.step_at("s", 0).await.unwrap().unwrap().status,
            StepStatus::Commit
        );
    });
    let ids: Vec<i64> = db
        .read(|c| {
            let mut st = c.prepare("SELECT id FROM saga_steps ORDER BY id")?;
            let ids = st.query_map([], |r| r.get(0))?;
            Ok(ids.collect::<Result<_, _>>()?)
        })
        .unwrap();
    assert_eq!(ids, vec![7, 8], "ids kept, the next one after them");
}

/// A database of version 10 migrates to version 11 (issue 45): each saga
/// gets the scope its origin tells for sure, the others none.
#[test]
fn version_10_sagas_get_the_scope_their_origin_tells() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("state.db");
    drop(older_file(&p, 10, crate::rows::scopeless::ROWS));
    let db = SqliteStore::open(&p).unwrap();
    block(crate::rows::scopeless::check(&db));
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

/// A state file at `p` exactly as capsaga of schema `version` made it
/// (its tables, application id and version), with `rows` inserted.
pub(super) fn older_file(p: &std::path::Path, version: i64, rows: &str) -> Connection {
    let mut c = Connection::open(p).unwrap();
    let tx = c.transaction().unwrap();
    migrate_to(&tx, 0, version).unwrap();
    tx.execute_batch(&format!(
        "PRAGMA application_id = {APPLICATION_ID}; PRAGMA user_version = {version};"
    ))
    .unwrap();
    tx.execute_batch(rows).unwrap();
    tx.commit().unwrap();
    c
}

pub(super) fn block<F: std::future::Future>(f: F) -> F::Output {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime")
        .block_on(f)
}
