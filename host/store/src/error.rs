//! [`StoreError`]: why the state store could not be used. No backend type
//! appears in it (the SQLite implementation converts its errors), so that
//! another store can report the same kinds.

use std::path::PathBuf;

/// Current schema version of the SQLite state database (`PRAGMA
/// user_version`). Version 2 added the `approvals` and `wal_head` tables and
/// the `owner` and `plan` columns of `saga_state`; version 3 rebuilt
/// `approvals` (expiry, note, replacement); version 4 added the `neurons`
/// table; version 5 the `principal` of each saga and the `tokens`,
/// `provider_keys` and `host_switch` tables; version 6 the
/// `budget_reservations` table; version 7 the fencing tokens (`fence` of
/// `saga_state` and `saga_steps`, checked by triggers); version 8 the index
/// of sagas by creation time (the console's pages); version 9 the
/// `released_at` of `saga_state` (sagas released between requests);
/// version 10 rebuilt `saga_steps` and `wal_log` without `AUTOINCREMENT`
/// and dropped an index that duplicated a unique constraint (fewer pages
/// written per record); version 11 the `scope` of `saga_state` (the scope
/// that opened each saga); version 12 the `budget_ratios` table (what
/// providers' reports cost beyond the estimates); version 13 the `label`
/// of `saga_steps` (information flow: what each step brought into its
/// saga); version 14 the `mcp_tasks` table (tasks of the MCP tasks
/// extension); version 15 `charged` of `budget_reservations` (a
/// reservation expired unsettled, charged to its day) and `chained` of
/// `mcp_tasks` (a task in the hash-chained log). The PostgreSQL schema has its own numbered migrations
/// (`postgres::schema`).
pub const SCHEMA_VERSION: i64 = 15;

/// Why the state store could not be used.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// The file is not a database of the backend, or is damaged.
    #[error(
        "state database {path} is corrupt or not a SQLite database ({detail}); it was left untouched: move it aside to start afresh"
    )]
    Corrupt {
        /// The file.
        path: PathBuf,
        /// The backend's message.
        detail: String,
    },
    /// A database of another application.
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
    /// Other writers kept the database longer than the store waits: the
    /// database is fine, only busy (exit code 11, not 8).
    #[error(
        "state database busy: {0}; nothing committed was lost: run the command again, or `capsaga resume --saga ID` (a saga left in the middle is rolled back by the next command)"
    )]
    Busy(String),
    /// Any other error of the backend.
    #[error("state database error: {0}")]
    Backend(String),
    /// A stored value that does not decode (edited or damaged row), or a
    /// row that should exist and does not.
    #[error("state database row does not decode: {0}")]
    Decode(String),
    /// The connection was poisoned by a panic in another thread.
    #[error("state database connection is unusable after a panic")]
    Poisoned,
    /// A write carried a fencing token that is not the saga's current one:
    /// another process took the saga over (its owner was found dead or its
    /// lease expired). Refused by the database; nothing was written.
    #[error(
        "saga `{saga}` was taken over by another process (this process holds fencing token {held}, no longer current): the write was refused and nothing was written; this process no longer drives the saga"
    )]
    Fenced {
        /// The saga.
        saga: String,
        /// The token the writer held.
        held: u64,
    },
    /// The database server could not be reached, or the connection broke
    /// (a network partition, a restart): the operation did not happen, or,
    /// when the connection broke during a commit, its outcome is unknown
    /// (a BEGIN found later without an outcome is compensated by recovery).
    #[error(
        "cannot reach the state database {target}: {detail}; nothing was written by this operation (if the connection broke during a commit, recovery resolves it)"
    )]
    Unreachable {
        /// Where (the connection string without its password).
        target: String,
        /// Why.
        detail: String,
    },
    /// A saga asked to end Done while one of its steps has no outcome (a
    /// BEGIN without COMMIT or FAIL: its outcome could not be written, e.g.
    /// the store failed while the step ran). Refused by the store's state
    /// transition; nothing was written. Such a saga can only be rolled back
    /// (the step compensated from its pre-image, as crash recovery does).
    #[error(
        "saga `{saga}` cannot end Done: its step {step} has no logged outcome (BEGIN without COMMIT or FAIL: it is in doubt); nothing was written, the saga must be rolled back"
    )]
    InDoubt {
        /// The saga.
        saga: String,
        /// The first step in doubt.
        step: u64,
    },
    /// A connection string (`store = "..."`, `CAPSAGA_STORE`) that cannot be
    /// used; the message never repeats a password.
    #[error("bad state store `{target}`: {detail}")]
    BadUrl {
        /// The setting, password removed.
        target: String,
        /// What is wrong.
        detail: String,
    },
}

impl StoreError {
    /// The fencing error for `saga` and the token `held`.
    pub fn fenced(saga: &str, held: u64) -> StoreError {
        StoreError::Fenced {
            saga: saga.to_string(),
            held,
        }
    }
}
