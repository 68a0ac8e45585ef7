use super::super::*;
use super::schema::SCHEMA;
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
