//! Keeping the `-wal` file small (issue 13, item 9).
//!
//! SQLite appends every commit to `<db>-wal` and copies it back into the
//! database at checkpoints; the file can only start over from its beginning
//! once no reader still uses an older snapshot. A reader holding a snapshot
//! while many steps commit (a monitoring script, a backup, `sqlite3` left
//! open) makes it grow, and SQLite never shrinks it by itself. So:
//! - `journal_size_limit` ([`JOURNAL_SIZE_LIMIT_BYTES`]): whenever SQLite
//!   starts the file over, it cuts it back to this size;
//! - after a commit that leaves the file past a threshold
//!   ([`CHECKPOINT_THRESHOLD_BYTES`]), a `TRUNCATE` checkpoint is tried
//!   without waiting for anyone (a reader in the way makes it a no-op, tried
//!   again after as much growth again);
//! - when the store is dropped (the command returns, the host is idle), one
//!   more `TRUNCATE` checkpoint without waiting;
//! - capsaga itself never holds a read transaction across a tool call: a
//!   read is one statement (or one short transaction) under the
//!   connection's mutex, checked by `SqliteStore::read`.

use super::super::StoreError;
use super::SqliteStore;
use rusqlite::Connection;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// `PRAGMA journal_size_limit`, bytes (4 MiB): the size the `-wal` file is
/// cut back to whenever SQLite starts it over.
pub const JOURNAL_SIZE_LIMIT_BYTES: u64 = 4 << 20;

/// Size of the `-wal` file, bytes (16 MiB), past which a commit is followed
/// by a `TRUNCATE` checkpoint attempt.
pub const CHECKPOINT_THRESHOLD_BYTES: u64 = 16 << 20;

/// What one checkpoint did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Checkpoint {
    /// Another connection was in the way (a reader on an older snapshot, a
    /// writer): the file could not be truncated.
    pub busy: bool,
    /// Size of the `-wal` file afterwards, bytes (0 when absent).
    pub wal_bytes: u64,
}

/// The `-wal` file of the database at `db`.
pub fn wal_path(db: &Path) -> PathBuf {
    let mut name = db.file_name().unwrap_or_default().to_os_string();
    name.push("-wal");
    db.with_file_name(name)
}

/// Size of the `-wal` file of the database at `db`, bytes (0 when absent).
pub fn wal_bytes(db: &Path) -> u64 {
    std::fs::metadata(wal_path(db)).map_or(0, |m| m.len())
}

/// Set the connection's `journal_size_limit`.
pub(super) fn configure(conn: &Connection) -> Result<(), rusqlite::Error> {
    conn.pragma_update(None, "journal_size_limit", JOURNAL_SIZE_LIMIT_BYTES as i64)
}

/// `PRAGMA wal_checkpoint(TRUNCATE)` without waiting for other connections
/// (busy timeout 0 for its duration); `busy` in the result when one was in
/// the way.
pub(super) fn truncate_nowait(conn: &Connection, db: &Path, busy_wait: Duration) -> Checkpoint {
    let done = conn
        .busy_timeout(Duration::ZERO)
        .and_then(|()| {
            conn.query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |r| {
                r.get::<_, i64>(0)
            })
        })
        .is_ok_and(|b| b == 0);
    let busy = !done;
    let _ = conn.busy_timeout(busy_wait);
    Checkpoint {
        busy,
        wal_bytes: wal_bytes(db),
    }
}

/// After a commit on the write connection: past `next_at` bytes, try to
/// truncate the `-wal` file. Returns the size past which to try next.
pub(super) fn after_commit(conn: &Connection, db: &Path, busy_wait: Duration, next_at: u64) -> u64 {
    let size = wal_bytes(db);
    if size < next_at {
        return next_at;
    }
    let c = truncate_nowait(conn, db, busy_wait);
    if c.busy {
        // A reader is in the way: try again after as much growth again.
        size.saturating_add(CHECKPOINT_THRESHOLD_BYTES)
    } else {
        CHECKPOINT_THRESHOLD_BYTES
    }
}

impl SqliteStore {
    /// Checkpoint the database and truncate its `-wal` file now, without
    /// waiting for other connections (for an idle host; the writer does it
    /// too when the store is dropped).
    ///
    /// # Errors
    /// [`StoreError::Poisoned`] when the store's writer is gone.
    pub fn checkpoint(&self) -> Result<Checkpoint, StoreError> {
        self.writer.checkpoint()
    }
}

/// A reader holding a snapshot of the database: a read transaction left
/// open, as a monitoring script, a backup or an `sqlite3` shell does. Used
/// by `capsaga-bench --wal` to make the `-wal` file grow; capsaga never does
/// this itself.
pub struct SnapshotReader {
    conn: Connection,
    open: bool,
}

impl SnapshotReader {
    /// Open a connection to the database at `db`.
    ///
    /// # Errors
    /// [`StoreError::Backend`].
    pub fn open(db: &Path) -> Result<SnapshotReader, StoreError> {
        let conn = Connection::open(db)?;
        conn.busy_timeout(Duration::from_secs(5))?;
        Ok(SnapshotReader { conn, open: false })
    }

    /// Start a read transaction on the current snapshot and read from it
    /// (ending the previous one first); the number of log rows it sees.
    ///
    /// # Errors
    /// [`StoreError::Backend`] or [`StoreError::Busy`].
    pub fn hold(&mut self) -> Result<i64, StoreError> {
        self.release()?;
        self.conn.execute_batch("BEGIN DEFERRED")?;
        self.open = true;
        Ok(self
            .conn
            .query_row("SELECT count(*) FROM wal_log", [], |r| r.get(0))?)
    }

    /// End the read transaction, if any.
    ///
    /// # Errors
    /// [`StoreError::Backend`].
    pub fn release(&mut self) -> Result<(), StoreError> {
        if self.open {
            self.conn.execute_batch("COMMIT")?;
            self.open = false;
        }
        Ok(())
    }
}
