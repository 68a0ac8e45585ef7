//! The workspace's SQLite database (`.capsaga/state.db`): opening, schema,
//! migrations and the one writer path.
//!
//! - WAL journal mode and `synchronous = FULL`, so a committed transaction
//!   survives a crash of the process or of the machine.
//! - Every write runs in an `IMMEDIATE` transaction (the write lock is taken
//!   before the first read), through [`Db::write`]; a busy timeout makes
//!   concurrent processes wait instead of failing.
//! - The file is tagged with an application id; a file that is not a SQLite
//!   database, or is another application's database, is refused with a clear
//!   error, never silently reset.

use rusqlite::{Connection, OpenFlags, Transaction, TransactionBehavior};
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::Duration;

/// `PRAGMA application_id` of capsaga databases ("CAPS").
pub const APPLICATION_ID: i64 = 0x4341_5053;
/// Current schema version (`PRAGMA user_version`). Version 2 added the
/// `approvals` and `wal_head` tables and the `owner` and `plan` columns of
/// `saga_state`; a version 1 file is migrated in place, in one transaction.
pub const SCHEMA_VERSION: i64 = 2;
/// How long a writer waits for another process's lock, milliseconds.
pub const BUSY_TIMEOUT_MS: u64 = 10_000;

/// Why the database could not be used.
#[derive(Debug, thiserror::Error)]
pub enum DbError {
    /// The file is not a SQLite database or is damaged.
    #[error(
        "state database {path} is corrupt or not a SQLite database ({detail}); it was left untouched: move it aside to start afresh"
    )]
    Corrupt {
        /// The file.
        path: PathBuf,
        /// SQLite's message.
        detail: String,
    },
    /// A SQLite database of another application.
    #[error(
        "{path} is not a capsaga state database (application id {found:#x}); it was left untouched"
    )]
    Foreign {
        /// The file.
        path: PathBuf,
        /// Its application id.
        found: i64,
    },
    /// A newer schema than this binary knows.
    #[error(
        "state database {path} has schema version {found}, newer than this capsaga ({SCHEMA_VERSION}); upgrade capsaga"
    )]
    TooNew {
        /// The file.
        path: PathBuf,
        /// Its schema version.
        found: i64,
    },
    /// The directory could not be created.
    #[error("cannot create state directory {path}: {error}")]
    Dir {
        /// The directory.
        path: PathBuf,
        /// The OS error.
        error: String,
    },
    /// Any other SQLite error.
    #[error("state database error: {0}")]
    Sqlite(#[from] rusqlite::Error),
    /// A stored value that does not decode (edited or damaged row).
    #[error("state database row does not decode: {0}")]
    Decode(String),
    /// The connection mutex was poisoned by a panic in another thread.
    #[error("state database connection is unusable after a panic")]
    Poisoned,
}

const SCHEMA: &str = r#"
CREATE TABLE IF NOT EXISTS saga_state (
    saga_id     TEXT PRIMARY KEY,
    state       TEXT NOT NULL,
    origin      TEXT NOT NULL,
    label       TEXT NOT NULL DEFAULT '',
    created_at  TEXT NOT NULL,
    updated_at  TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS saga_steps (
    id               INTEGER PRIMARY KEY AUTOINCREMENT,
    saga_id          TEXT NOT NULL REFERENCES saga_state(saga_id),
    step_seq         INTEGER NOT NULL,
    tool_id          TEXT NOT NULL,
    tool_hash        TEXT NOT NULL,
    grants           TEXT NOT NULL,
    has_side_effects INTEGER NOT NULL,
    idempotency_key  TEXT NOT NULL UNIQUE,
    args             TEXT NOT NULL,
    preimage         TEXT,
    output           TEXT,
    status           TEXT NOT NULL CHECK (status IN ('BEGIN','COMMIT','FAIL','COMPENSATED','COMPENSATION_FAILED')),
    error            TEXT,
    created_at       TEXT NOT NULL,
    updated_at       TEXT NOT NULL,
    UNIQUE (saga_id, step_seq)
);
CREATE INDEX IF NOT EXISTS idx_saga ON saga_steps(saga_id, step_seq);
CREATE TABLE IF NOT EXISTS wal_log (
    seq        INTEGER PRIMARY KEY AUTOINCREMENT,
    saga_id    TEXT NOT NULL,
    step_seq   INTEGER,
    record     TEXT NOT NULL,
    detail     TEXT NOT NULL,
    at         TEXT NOT NULL,
    prev_hash  TEXT NOT NULL,
    hash       TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS idx_wal_log_saga ON wal_log(saga_id, seq);
CREATE TABLE IF NOT EXISTS traces (
    trace_id       TEXT PRIMARY KEY,
    saga_id        TEXT,
    task           TEXT NOT NULL,
    outcome        TEXT NOT NULL,
    started_at     TEXT NOT NULL,
    finished_at    TEXT,
    wall_ms        INTEGER NOT NULL,
    trace          TEXT NOT NULL
);
"#;

/// Version 2: approvals, the anchored head of the log, saga owners and plans.
const MIGRATE_V2: &str = r#"
CREATE TABLE IF NOT EXISTS approvals (
    approval_id  TEXT PRIMARY KEY,
    saga_id      TEXT NOT NULL REFERENCES saga_state(saga_id),
    step_seq     INTEGER NOT NULL,
    tool_id      TEXT NOT NULL,
    tool_hash    TEXT NOT NULL,
    args_hash    TEXT NOT NULL,
    args         TEXT NOT NULL,
    reason       TEXT NOT NULL,
    summary      TEXT NOT NULL,
    preview      TEXT,
    status       TEXT NOT NULL CHECK (status IN ('pending','approved','denied','claimed')),
    decided_by   TEXT,
    decided_at   TEXT,
    claimed_saga TEXT,
    claimed_step INTEGER,
    claimed_at   TEXT,
    created_at   TEXT NOT NULL,
    UNIQUE (saga_id, step_seq)
);
CREATE INDEX IF NOT EXISTS idx_approvals_binding ON approvals(tool_id, tool_hash, args_hash, status);
CREATE TABLE IF NOT EXISTS wal_head (
    id    INTEGER PRIMARY KEY CHECK (id = 1),
    seq   INTEGER NOT NULL,
    hash  TEXT NOT NULL
);
INSERT OR IGNORE INTO wal_head (id, seq, hash)
    SELECT 1, seq, hash FROM wal_log ORDER BY seq DESC LIMIT 1;
"#;

fn has_column(tx: &Transaction<'_>, table: &str, column: &str) -> Result<bool, DbError> {
    let mut st = tx.prepare(&format!("PRAGMA table_info({table})"))?;
    let names = st.query_map([], |r| r.get::<_, String>(1))?;
    for n in names {
        if n? == column {
            return Ok(true);
        }
    }
    Ok(false)
}

/// Bring the schema from `version` to [`SCHEMA_VERSION`], inside `tx`.
fn migrate(tx: &Transaction<'_>, version: i64) -> Result<(), DbError> {
    if version < 1 {
        tx.execute_batch(SCHEMA)?;
    }
    if version < 2 {
        for (column, decl) in [("owner", "TEXT"), ("plan", "TEXT")] {
            if !has_column(tx, "saga_state", column)? {
                tx.execute_batch(&format!(
                    "ALTER TABLE saga_state ADD COLUMN {column} {decl}"
                ))?;
            }
        }
        tx.execute_batch(MIGRATE_V2)?;
    }
    Ok(())
}

/// The open database. One connection behind a mutex: the process's single
/// writer path.
pub struct Db {
    conn: Mutex<Connection>,
    path: PathBuf,
}

impl std::fmt::Debug for Db {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Db").field("path", &self.path).finish()
    }
}

fn classify(path: &Path, e: rusqlite::Error) -> DbError {
    match &e {
        rusqlite::Error::SqliteFailure(f, msg)
            if matches!(
                f.code,
                rusqlite::ErrorCode::NotADatabase | rusqlite::ErrorCode::DatabaseCorrupt
            ) =>
        {
            DbError::Corrupt {
                path: path.to_path_buf(),
                detail: msg.clone().unwrap_or_else(|| f.to_string()),
            }
        }
        _ => DbError::Sqlite(e),
    }
}

impl Db {
    /// Open (creating if needed) the database at `path`, check it is ours,
    /// and bring its schema up to date.
    ///
    /// # Errors
    /// [`DbError::Corrupt`], [`DbError::Foreign`], [`DbError::TooNew`],
    /// [`DbError::Dir`] or [`DbError::Sqlite`].
    pub fn open(path: &Path) -> Result<Db, DbError> {
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir).map_err(|e| DbError::Dir {
                path: dir.to_path_buf(),
                error: e.to_string(),
            })?;
        }
        let existed = path.exists()
            && std::fs::metadata(path)
                .map(|m| m.len() > 0)
                .unwrap_or(false);
        let conn = Connection::open_with_flags(
            path,
            OpenFlags::SQLITE_OPEN_READ_WRITE
                | OpenFlags::SQLITE_OPEN_CREATE
                | OpenFlags::SQLITE_OPEN_NO_MUTEX,
        )
        .map_err(|e| classify(path, e))?;
        conn.busy_timeout(Duration::from_millis(BUSY_TIMEOUT_MS))
            .map_err(|e| classify(path, e))?;
        let app_id: i64 = conn
            .query_row("PRAGMA application_id", [], |r| r.get(0))
            .map_err(|e| classify(path, e))?;
        let version: i64 = conn
            .query_row("PRAGMA user_version", [], |r| r.get(0))
            .map_err(|e| classify(path, e))?;
        if existed {
            let tables: i64 = conn
                .query_row("SELECT count(*) FROM sqlite_schema", [], |r| r.get(0))
                .map_err(|e| classify(path, e))?;
            if app_id != APPLICATION_ID && (app_id != 0 || tables > 0) {
                return Err(DbError::Foreign {
                    path: path.to_path_buf(),
                    found: app_id,
                });
            }
            if version > SCHEMA_VERSION {
                return Err(DbError::TooNew {
                    path: path.to_path_buf(),
                    found: version,
                });
            }
        }
        conn.pragma_update(None, "journal_mode", "WAL")
            .map_err(|e| classify(path, e))?;
        conn.pragma_update(None, "synchronous", "FULL")
            .map_err(|e| classify(path, e))?;
        conn.pragma_update(None, "foreign_keys", "ON")
            .map_err(|e| classify(path, e))?;
        let db = Db {
            conn: Mutex::new(conn),
            path: path.to_path_buf(),
        };
        db.write(|tx| {
            // Read again under the write lock: another process may have
            // migrated the file since it was opened.
            let version: i64 = tx.query_row("PRAGMA user_version", [], |r| r.get(0))?;
            if version > SCHEMA_VERSION {
                return Err(DbError::TooNew {
                    path: path.to_path_buf(),
                    found: version,
                });
            }
            if version < SCHEMA_VERSION {
                migrate(tx, version)?;
                tx.pragma_update(None, "user_version", SCHEMA_VERSION)?;
            }
            tx.pragma_update(None, "application_id", APPLICATION_ID)?;
            Ok(())
        })?;
        Ok(db)
    }

    /// The database file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Run `f` in an `IMMEDIATE` transaction and commit it.
    ///
    /// # Errors
    /// Whatever `f` returns, or the commit's error; the transaction is rolled
    /// back on error.
    pub fn write<T>(
        &self,
        f: impl FnOnce(&Transaction<'_>) -> Result<T, DbError>,
    ) -> Result<T, DbError> {
        let mut conn = self.conn.lock().map_err(|_| DbError::Poisoned)?;
        let tx = conn
            .transaction_with_behavior(TransactionBehavior::Immediate)
            .map_err(|e| classify(&self.path, e))?;
        let out = f(&tx)?;
        tx.commit().map_err(|e| classify(&self.path, e))?;
        Ok(out)
    }

    /// Run `f` with the connection, for reads.
    ///
    /// # Errors
    /// Whatever `f` returns.
    pub fn read<T>(&self, f: impl FnOnce(&Connection) -> Result<T, DbError>) -> Result<T, DbError> {
        let conn = self.conn.lock().map_err(|_| DbError::Poisoned)?;
        f(&conn)
    }
}

/// The current time as RFC 3339 UTC with milliseconds, e.g.
/// `2026-11-30T04:05:06.789Z`.
pub fn now_rfc3339() -> String {
    jiff::Timestamp::now()
        .strftime("%Y-%m-%dT%H:%M:%S%.3fZ")
        .to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn creates_and_reopens() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("s/state.db");
        drop(Db::open(&p).unwrap());
        let db = Db::open(&p).unwrap();
        let mode: String = db
            .read(|c| Ok(c.query_row("PRAGMA journal_mode", [], |r| r.get(0))?))
            .unwrap();
        assert_eq!(mode, "wal");
    }

    #[test]
    fn garbage_file_is_corrupt_and_untouched() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("state.db");
        let junk =
            b"this is not a database at all, but it is long enough to look like a header...."
                .repeat(20);
        std::fs::write(&p, &junk).unwrap();
        let err = Db::open(&p).unwrap_err();
        assert!(matches!(err, DbError::Corrupt { .. }), "{err}");
        assert_eq!(std::fs::read(&p).unwrap(), junk);
    }

    #[test]
    fn foreign_database_refused() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("other.db");
        {
            let c = Connection::open(&p).unwrap();
            c.execute_batch(
                "CREATE TABLE customers(id INTEGER); INSERT INTO customers VALUES (1);",
            )
            .unwrap();
        }
        assert!(matches!(Db::open(&p), Err(DbError::Foreign { .. })));
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
        let db = Db::open(&p).unwrap();
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
        assert!(Db::open(&p).is_ok());
    }

    #[test]
    fn newer_schema_refused() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("state.db");
        drop(Db::open(&p).unwrap());
        {
            let c = Connection::open(&p).unwrap();
            c.execute_batch("PRAGMA user_version = 99").unwrap();
        }
        assert!(matches!(
            Db::open(&p),
            Err(DbError::TooNew { found: 99, .. })
        ));
    }

    #[test]
    fn timestamps_are_rfc3339_millis() {
        let t = now_rfc3339();
        assert_eq!(t.len(), 24, "{t}");
        assert!(t.ends_with('Z'));
    }
}
