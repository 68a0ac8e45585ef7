//! The SQLite implementation of the store (the embedded default): one file
//! per workspace, `.capsaga/state.db`. Every SQL statement of capsaga is in
//! this directory.
//!
//! - WAL journal mode and `synchronous = FULL`, so a committed transaction
//!   survives a crash of the process or of the machine.
//! - Every write runs in an `IMMEDIATE` transaction (the write lock is taken
//!   before the first read), through `SqliteStore::write`, after taking
//!   the write turn (`<db>.lock`, [`turn`]): concurrent processes queue for
//!   it, each woken in turn, and one that waits longer than
//!   [`BUSY_TIMEOUT_MS`] fails with [`StoreError::Busy`] ("busy", not
//!   "corrupt"). One connection, owned by the writer thread ([`group`]), is
//!   the process's single writer path: it batches concurrent callers'
//!   transactions into one sync (group commit), each caller answered only
//!   once its record is durable. Reads use a second connection.
//! - First creation (create, WAL mode, tables, application id) and
//!   migrations happen in one transaction under the same lock, so no
//!   process ever sees a file created and not yet stamped.
//! - The `-wal` file is kept small ([`checkpoint`]): `journal_size_limit`,
//!   a `TRUNCATE` checkpoint past a threshold and when the store is
//!   dropped; a read never stays open across a tool call.
//! - Each write updates its table and appends the matching `wal_log` row,
//!   chained to the anchored head (`log`), in the same transaction.
//! - The file is tagged with an application id; a file that is not a SQLite
//!   database, or is another application's database, is refused with a clear
//!   error, never silently reset.
//!
//! One file per trait: `sagas`, `steps`, `log`, `approvals`,
//! `traces`, `budget`, `audit`, `neurons`, `tokens`, `keys`,
//! `switch`, [`owners`] (lock files); the schema and its
//! migrations in `schema`; the write turn in [`turn`]; the `-wal` file's
//! size in [`checkpoint`].
//!
//! The traits whose logic is written once (`crate::logic`: keys, tokens,
//! tasks, the kill switch, traces, audit) are thin here: a write or a read opened
//! and handed to that logic through this dialect's side of the backend
//! seam (`seam.rs`). The migrations are numbered files in `migrations/`.

mod approvals;
mod audit;
mod budget;
pub mod checkpoint;
pub mod group;
mod keys;
mod log;
mod neurons;
pub mod owners;
mod sagas;
mod schema;
mod seam;
mod steps;
mod switch;
mod tasks;
mod tokens;
mod traces;
pub mod turn;

pub use checkpoint::{Checkpoint, SnapshotReader, wal_bytes};
pub use group::GroupCommit;
pub use schema::{APPLICATION_ID, BUSY_TIMEOUT_MS};

use super::StoreError;
use rusqlite::{Connection, OpenFlags, Params, Row, Transaction, TransactionBehavior};
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::Duration;

/// The open SQLite store.
pub struct SqliteStore {
    /// The read connection.
    reader: Mutex<Connection>,
    /// The writer thread, with the write connection and the write turn.
    writer: group::Writer,
    path: PathBuf,
}

impl std::fmt::Debug for SqliteStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SqliteStore")
            .field("path", &self.path)
            .finish()
    }
}

impl From<rusqlite::Error> for StoreError {
    fn from(e: rusqlite::Error) -> Self {
        match &e {
            rusqlite::Error::SqliteFailure(f, _)
                if matches!(
                    f.code,
                    rusqlite::ErrorCode::DatabaseBusy | rusqlite::ErrorCode::DatabaseLocked
                ) =>
            {
                StoreError::Busy(e.to_string())
            }
            _ => StoreError::Backend(e.to_string()),
        }
    }
}

fn classify(path: &Path, e: rusqlite::Error) -> StoreError {
    match &e {
        rusqlite::Error::SqliteFailure(f, msg)
            if matches!(
                f.code,
                rusqlite::ErrorCode::NotADatabase | rusqlite::ErrorCode::DatabaseCorrupt
            ) =>
        {
            StoreError::Corrupt {
                path: path.to_path_buf(),
                detail: msg.clone().unwrap_or_else(|| f.to_string()),
            }
        }
        _ => e.into(),
    }
}

impl SqliteStore {
    /// Open (creating if needed) the database at `path`, check it is ours,
    /// and bring its schema up to date. Writers wait their turn up to
    /// [`BUSY_TIMEOUT_MS`].
    ///
    /// # Errors
    /// [`StoreError::Corrupt`], [`StoreError::Foreign`],
    /// [`StoreError::TooNew`], [`StoreError::Dir`], [`StoreError::Busy`] or
    /// [`StoreError::Backend`].
    pub fn open(path: &Path) -> Result<SqliteStore, StoreError> {
        SqliteStore::open_waiting(path, Duration::from_millis(BUSY_TIMEOUT_MS))
    }

    /// [`SqliteStore::open`] with writers waiting their turn up to `wait`.
    ///
    /// # Errors
    /// As [`SqliteStore::open`].
    pub fn open_waiting(path: &Path, wait: Duration) -> Result<SqliteStore, StoreError> {
        SqliteStore::open_with(path, wait, GroupCommit::On)
    }

    /// [`SqliteStore::open_waiting`], with group commit on or off (off: one
    /// sync per write, the baseline of `capsaga-bench --group-commit`).
    ///
    /// # Errors
    /// As [`SqliteStore::open`].
    pub fn open_with(
        path: &Path,
        wait: Duration,
        mode: GroupCommit,
    ) -> Result<SqliteStore, StoreError> {
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir).map_err(|e| StoreError::Dir {
                path: dir.to_path_buf(),
                error: e.to_string(),
            })?;
        }
        let turn = turn::Turn::open(path)?;
        // Creation, the checks and the migrations under the write turn: of
        // many processes starting on a fresh directory, one creates and
        // stamps the file, the others find it complete.
        let held = turn.take(wait)?;
        let mut conn = Connection::open_with_flags(
            path,
            OpenFlags::SQLITE_OPEN_READ_WRITE
                | OpenFlags::SQLITE_OPEN_CREATE
                | OpenFlags::SQLITE_OPEN_NO_MUTEX,
        )
        .map_err(|e| classify(path, e))?;
        conn.busy_timeout(wait).map_err(|e| classify(path, e))?;
        conn.set_prepared_statement_cache_capacity(STATEMENT_CACHE);
        let current = schema::check_ours(&conn, path)?;
        for (pragma, value) in [
            ("journal_mode", "WAL"),
            ("synchronous", "FULL"),
            ("foreign_keys", "ON"),
        ] {
            conn.pragma_update(None, pragma, value)
                .map_err(|e| classify(path, e))?;
        }
        checkpoint::configure(&conn).map_err(|e| classify(path, e))?;
        if !current {
            let tx = conn
                .transaction_with_behavior(TransactionBehavior::Immediate)
                .map_err(|e| classify(path, e))?;
            schema::bring_up_to_date(&tx, path)?;
            tx.commit().map_err(|e| classify(path, e))?;
        }
        drop(held);
        let reader = Connection::open_with_flags(
            path,
            OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_NO_MUTEX,
        )
        .map_err(|e| classify(path, e))?;
        reader.busy_timeout(wait).map_err(|e| classify(path, e))?;
        reader.set_prepared_statement_cache_capacity(STATEMENT_CACHE);
        let writer = group::Writer::start(group::Owned {
            conn,
            turn,
            path: path.to_path_buf(),
            busy_wait: wait,
            mode,
            next_checkpoint_at: checkpoint::CHECKPOINT_THRESHOLD_BYTES,
        })?;
        Ok(SqliteStore {
            reader: Mutex::new(reader),
            writer,
            path: path.to_path_buf(),
        })
    }

    /// The database file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Write transactions this store committed so far: with group commit,
    /// fewer than the writes (one sync per transaction).
    pub fn commits(&self) -> u64 {
        self.writer.commits()
    }

    /// Writes waiting for the writer thread (sent, not yet taken into a
    /// transaction): the depth of the group-commit queue now.
    pub fn queued_writes(&self) -> u64 {
        self.writer.queued()
    }

    /// Run `f` in an `IMMEDIATE` transaction under the write turn, shared
    /// with other callers' when group commit is on ([`group`]); its value
    /// once the transaction is durable.
    ///
    /// # Errors
    /// Whatever `f` returns (its writes are then rolled back), or the
    /// commit's error. [`StoreError::Busy`] when the turn did not come.
    async fn write<T: Send + 'static>(
        &self,
        f: impl FnOnce(&Transaction<'_>) -> Result<T, StoreError> + Send + 'static,
    ) -> Result<T, StoreError> {
        self.writer.write(f).await
    }

    /// Run `f` with the connection, for reads. No read transaction may
    /// outlive `f` (it would hold a snapshot, and the `-wal` file, across
    /// whatever the caller does next, a tool call included): one left open
    /// is rolled back and reported.
    ///
    /// # Errors
    /// Whatever `f` returns; [`StoreError::Backend`] for a transaction left
    /// open.
    pub(crate) fn read<T>(
        &self,
        f: impl FnOnce(&Connection) -> Result<T, StoreError>,
    ) -> Result<T, StoreError> {
        let conn = self.reader.lock().map_err(|_| StoreError::Poisoned)?;
        let out = f(&conn);
        if !conn.is_autocommit() {
            let _ = conn.execute_batch("ROLLBACK");
            return Err(StoreError::Backend(
                "a read left a transaction open (rolled back)".into(),
            ));
        }
        out
    }
}

/// Distinct statements each connection keeps prepared ([`Cached`]): every
/// static statement of the store fits, so a saga step prepares none.
const STATEMENT_CACHE: usize = 128;

/// rusqlite's one-shot `execute` and `query_row`, through the connection's
/// prepared-statement cache. rusqlite's own compile the SQL text at every
/// call: a saga step runs about a dozen statements, and compiling them was
/// about a sixth of the writer thread's time (`perf` over `capsaga-bench
/// --mcp`, release build, 2026-12-04). rusqlite resets a statement when
/// its `execute` returns or its rows are dropped, before it goes back to
/// the cache, so a cached statement holds no transaction or snapshot.
pub(crate) trait Cached {
    /// `Connection::execute` from the cache: rows changed.
    fn exec<P: Params>(&self, sql: &str, params: P) -> rusqlite::Result<usize>;
    /// `Connection::query_row` from the cache.
    fn row<T, P: Params, F: FnOnce(&Row<'_>) -> rusqlite::Result<T>>(
        &self,
        sql: &str,
        params: P,
        f: F,
    ) -> rusqlite::Result<T>;
}

impl Cached for Connection {
    fn exec<P: Params>(&self, sql: &str, params: P) -> rusqlite::Result<usize> {
        self.prepare_cached(sql)?.execute(params)
    }

    fn row<T, P: Params, F: FnOnce(&Row<'_>) -> rusqlite::Result<T>>(
        &self,
        sql: &str,
        params: P,
        f: F,
    ) -> rusqlite::Result<T> {
        self.prepare_cached(sql)?.query_row(params, f)
    }
}

impl crate::decode::Cells for Row<'_> {
    fn cell<T: crate::decode::Column>(&self, i: usize) -> Result<T, StoreError> {
        Ok(Row::get::<usize, T>(self, i)?)
    }
}

/// Every row of the cached statement `sql`, decoded by `f`.
///
/// # Errors
/// The statement's, or `f`'s.
fn all<T>(
    c: &Connection,
    sql: &str,
    params: impl Params,
    f: impl Fn(&Row<'_>) -> Result<T, StoreError>,
) -> Result<Vec<T>, StoreError> {
    let mut st = c.prepare_cached(sql)?;
    let mut rows = st.query(params)?;
    let mut out = Vec::new();
    while let Some(r) = rows.next()? {
        out.push(f(r)?);
    }
    Ok(out)
}

/// The first row of the cached statement `sql` (if any), decoded by `f`.
///
/// # Errors
/// The statement's, or `f`'s.
fn first<T>(
    c: &Connection,
    sql: &str,
    params: impl Params,
    f: impl FnOnce(&Row<'_>) -> Result<T, StoreError>,
) -> Result<Option<T>, StoreError> {
    let mut st = c.prepare_cached(sql)?;
    let mut rows = st.query(params)?;
    rows.next()?.map(f).transpose()
}

/// The first row of the cached statement `sql`, decoded by `f`; none is
/// rusqlite's `QueryReturnedNoRows`, as `query_row` says.
///
/// # Errors
/// The statement's, or `f`'s.
fn one<T>(
    c: &Connection,
    sql: &str,
    params: impl Params,
    f: impl FnOnce(&Row<'_>) -> Result<T, StoreError>,
) -> Result<T, StoreError> {
    first(c, sql, params, f)?.ok_or_else(|| rusqlite::Error::QueryReturnedNoRows.into())
}

/// A write refused by the fencing triggers becomes [`StoreError::Fenced`];
/// any other error is converted as usual.
fn fenced_or(e: rusqlite::Error, saga: &str, fence: u64) -> StoreError {
    if let rusqlite::Error::SqliteFailure(_, Some(msg)) = &e
        && msg.contains(schema::FENCED)
    {
        return StoreError::fenced(saga, fence);
    }
    e.into()
}

/// JSON text of a value (`null` if it cannot be serialised, which the
/// host's types never are).
fn to_json<T: serde::Serialize>(v: &T) -> String {
    serde_json::to_string(v).unwrap_or_else(|_| "null".into())
}

#[cfg(test)]
mod group_tests;
#[cfg(test)]
mod neuron_tests;
#[cfg(test)]
mod schema_tests;
#[cfg(test)]
mod tests;
