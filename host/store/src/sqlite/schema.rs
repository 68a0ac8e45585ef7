//! The schema of the state database, its version and its migrations.

use super::super::{SCHEMA_VERSION, StoreError};
use super::classify;
use rusqlite::{Connection, Transaction};
use std::path::Path;

/// `PRAGMA application_id` of capsaga databases ("CAPS").
pub const APPLICATION_ID: i64 = 0x4341_5053;
/// How long a write waits for its turn while other processes write,
/// milliseconds (then [`StoreError::Busy`]).
pub const BUSY_TIMEOUT_MS: u64 = 60_000;

/// Version 1.
pub(super) const SCHEMA: &str = r#"
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

/// Version 3: approvals expire, keep the decision's note, and can be
/// replaced (stale, expired), so a step may have several; the table is rebuilt (SQLite cannot change a
/// CHECK or drop a UNIQUE constraint in place).
const MIGRATE_V3: &str = r#"
CREATE TABLE approvals_v3 (
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
    status       TEXT NOT NULL CHECK (status IN ('pending','approved','denied','claimed','stale','expired')),
    decided_by   TEXT,
    decided_at   TEXT,
    claimed_saga TEXT,
    claimed_step INTEGER,
    claimed_at   TEXT,
    created_at   TEXT NOT NULL,
    expires_at   TEXT,
    replaces     TEXT,
    note         TEXT
);
INSERT INTO approvals_v3 (approval_id, saga_id, step_seq, tool_id, tool_hash, args_hash, args, reason, summary, preview, status, decided_by, decided_at, claimed_saga, claimed_step, claimed_at, created_at)
    SELECT approval_id, saga_id, step_seq, tool_id, tool_hash, args_hash, args, reason, summary, preview, status, decided_by, decided_at, claimed_saga, claimed_step, claimed_at, created_at FROM approvals;
DROP TABLE approvals;
ALTER TABLE approvals_v3 RENAME TO approvals;
CREATE INDEX IF NOT EXISTS idx_approvals_binding ON approvals(tool_id, tool_hash, args_hash, status);
CREATE INDEX IF NOT EXISTS idx_approvals_step ON approvals(saga_id, step_seq);
"#;

/// Version 4: agent-written tools, every version (see `store::NeuronStore`).
const MIGRATE_V4: &str = r#"
CREATE TABLE IF NOT EXISTS neurons (
    name        TEXT NOT NULL,
    version     INTEGER NOT NULL,
    identity    TEXT NOT NULL UNIQUE,
    runner_hash TEXT NOT NULL,
    status      TEXT NOT NULL CHECK (status IN ('proposed','tested','awaiting_operator','active','retired','rejected')),
    meta        TEXT NOT NULL,
    source      TEXT NOT NULL,
    examples    TEXT NOT NULL,
    report      TEXT,
    granted     TEXT NOT NULL,
    saga_id     TEXT,
    step_seq    INTEGER,
    decided_by  TEXT,
    note        TEXT,
    created_at  TEXT NOT NULL,
    updated_at  TEXT NOT NULL,
    PRIMARY KEY (name, version)
);
CREATE INDEX IF NOT EXISTS idx_neurons_status ON neurons(status);
CREATE INDEX IF NOT EXISTS idx_steps_tool_hash ON saga_steps(tool_hash);
"#;

/// Version 5 (issue 24): the principal that started each saga (added by
/// [`migrate`] when missing), named tokens (the SHA-256 of their secret,
/// never the secret), provider keys sealed under `CAPSAGA_KEK`, and the
/// kill switch.
const MIGRATE_V5: &str = r#"
CREATE INDEX IF NOT EXISTS idx_saga_principal ON saga_state(principal, created_at);
CREATE TABLE IF NOT EXISTS tokens (
    name          TEXT PRIMARY KEY,
    role          TEXT NOT NULL CHECK (role IN ('client','operator')),
    secret_sha256 TEXT NOT NULL UNIQUE CHECK (length(secret_sha256) = 64),
    created_at    TEXT NOT NULL,
    created_by    TEXT NOT NULL,
    revoked_at    TEXT,
    revoked_by    TEXT
);
CREATE TABLE IF NOT EXISTS provider_keys (
    name        TEXT PRIMARY KEY,
    format      TEXT NOT NULL,
    kek_id      TEXT NOT NULL,
    wrapped_dek BLOB NOT NULL,
    ciphertext  BLOB NOT NULL,
    last4       TEXT NOT NULL,
    created_at  TEXT NOT NULL,
    created_by  TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS host_switch (
    id     INTEGER PRIMARY KEY CHECK (id = 1),
    mode   TEXT NOT NULL CHECK (mode IN ('running','read_only','paused')),
    set_by TEXT,
    set_at TEXT,
    note   TEXT
);
"#;

/// Version 6: the reservations of model calls in flight (issue 24 item 3,
/// `BudgetStore::reserve_spend`): each call's maximum estimate, USD, held
/// until settled or expired.
const MIGRATE_V6: &str = r#"
CREATE TABLE IF NOT EXISTS budget_reservations (
    id          TEXT PRIMARY KEY,
    day         TEXT NOT NULL,
    usd         REAL NOT NULL CHECK (usd >= 0),
    holder      TEXT NOT NULL,
    created_at  TEXT NOT NULL,
    expires_at  TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS idx_budget_reservations_day ON budget_reservations(day, expires_at);
"#;

/// Version 6 (see [`MIGRATE_V6`]).
fn migrate_v6(tx: &Transaction<'_>) -> Result<(), StoreError> {
    tx.execute_batch(MIGRATE_V6)?;
    Ok(())
}

/// Version 7: fencing tokens (`store::SagaRow::fence`). A saga's token
/// moves at every take-over; every insert or update of one of its steps
/// must carry the current token, or the trigger aborts the write (the host
/// maps the message to `StoreError::Fenced`): refused by the database, not
/// by the writer's good faith.
const MIGRATE_V7: &str = r#"
CREATE TRIGGER IF NOT EXISTS saga_steps_fence_insert BEFORE INSERT ON saga_steps
WHEN NEW.fence IS NOT (SELECT fence FROM saga_state WHERE saga_id = NEW.saga_id)
BEGIN SELECT RAISE(ABORT, 'capsaga: fenced'); END;
CREATE TRIGGER IF NOT EXISTS saga_steps_fence_update BEFORE UPDATE ON saga_steps
WHEN NEW.fence IS NOT (SELECT fence FROM saga_state WHERE saga_id = NEW.saga_id)
BEGIN SELECT RAISE(ABORT, 'capsaga: fenced'); END;
"#;

/// Version 8 (issue 29): the sagas in creation order without a sort, for
/// the operator console's pages (`SagaStore::saga_page`, newest first;
/// the index's entries are ordered by `(created_at, rowid)`).
const MIGRATE_V8: &str = r#"
CREATE INDEX IF NOT EXISTS idx_saga_created ON saga_state(created_at);
"#;

/// Version 8, in a function of its own (see [`MIGRATE_V8`]).
fn migrate_v8(tx: &Transaction<'_>) -> Result<(), StoreError> {
    tx.execute_batch(MIGRATE_V8)?;
    Ok(())
}

/// Version 9 (issue 26): `released_at` of `saga_state`, set while a saga
/// continued across requests (an MCP 2026-07-28 saga handle) is released
/// by its owner between two requests (`SagaStore::release_saga`).
fn migrate_v9(tx: &Transaction<'_>) -> Result<(), StoreError> {
    if !has_column(tx, "saga_state", "released_at")? {
        tx.execute_batch("ALTER TABLE saga_state ADD COLUMN released_at TEXT")?;
    }
    Ok(())
}

/// Version 10 (issue 31): fewer pages written per record. Each record's
/// transaction wrote `sqlite_sequence` (both tables were `AUTOINCREMENT`,
/// yet a log row's `seq` is set from the anchored head and a step's `id`
/// only orders the rows of one table, whose rows are never deleted) and
/// `idx_saga`, the same key as the `UNIQUE (saga_id, step_seq)`
/// constraint's own index: three pages of the WAL frame a step wrote
/// (`capsaga-bench` saga step). SQLite cannot drop `AUTOINCREMENT` in place:
/// both tables are rebuilt with their rows, keys, constraints, indexes and
/// the fencing triggers, in the migration's transaction.
const MIGRATE_V10: &str = r#"
DROP INDEX IF EXISTS idx_saga;
CREATE TABLE wal_log_v10 (
    seq        INTEGER PRIMARY KEY,
    saga_id    TEXT NOT NULL,
    step_seq   INTEGER,
    record     TEXT NOT NULL,
    detail     TEXT NOT NULL,
    at         TEXT NOT NULL,
    prev_hash  TEXT NOT NULL,
    hash       TEXT NOT NULL
);
INSERT INTO wal_log_v10 (seq, saga_id, step_seq, record, detail, at, prev_hash, hash)
    SELECT seq, saga_id, step_seq, record, detail, at, prev_hash, hash FROM wal_log;
DROP TABLE wal_log;
ALTER TABLE wal_log_v10 RENAME TO wal_log;
CREATE INDEX idx_wal_log_saga ON wal_log(saga_id, seq);
CREATE TABLE saga_steps_v10 (
    id               INTEGER PRIMARY KEY,
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
    fence            INTEGER NOT NULL DEFAULT 1,
    UNIQUE (saga_id, step_seq)
);
INSERT INTO saga_steps_v10 (id, saga_id, step_seq, tool_id, tool_hash, grants, has_side_effects, idempotency_key, args, preimage, output, status, error, created_at, updated_at, fence)
    SELECT id, saga_id, step_seq, tool_id, tool_hash, grants, has_side_effects, idempotency_key, args, preimage, output, status, error, created_at, updated_at, fence FROM saga_steps;
DROP TABLE saga_steps;
ALTER TABLE saga_steps_v10 RENAME TO saga_steps;
CREATE INDEX idx_steps_tool_hash ON saga_steps(tool_hash);
"#;

/// Version 10, in a function of its own (see [`MIGRATE_V10`]): the fencing
/// triggers went with the old `saga_steps` and are created again.
fn migrate_v10(tx: &Transaction<'_>) -> Result<(), StoreError> {
    tx.execute_batch(MIGRATE_V10)?;
    tx.execute_batch(MIGRATE_V7)?;
    Ok(())
}

/// Version 11 (issue 45): `scope` of `saga_state`, the scope that opened
/// each saga (`capsaga_core::scope::Scope`: a session, a saga handle, a
/// task, a turn, a plan, a call); only that scope continues, commits or
/// rolls it back. Older sagas get the scope their origin tells for sure (a
/// plan, a call, an MCP saga released between requests: a handle's), the
/// others none (then only the operator acts on them).
const MIGRATE_V11: &str = r#"
UPDATE saga_state SET scope = CASE
    WHEN origin = 'plan' THEN 'plan'
    WHEN origin = 'call' THEN 'call'
    WHEN origin = 'mcp' AND released_at IS NOT NULL THEN 'handle'
END;
"#;

/// Version 11, in a function of its own (see [`MIGRATE_V11`]).
fn migrate_v11(tx: &Transaction<'_>) -> Result<(), StoreError> {
    if !has_column(tx, "saga_state", "scope")? {
        tx.execute_batch("ALTER TABLE saga_state ADD COLUMN scope TEXT")?;
    }
    tx.execute_batch(MIGRATE_V11)?;
    Ok(())
}

/// Version 12 (issue 45): what providers' reports cost beyond the host's
/// estimates, per provider, model asked and UTC day
/// (`BudgetStore::settle_spend_learnt`): the largest ratios of the last
/// days scale later reservations (`capsaga_core::budget::learn`).
const MIGRATE_V12: &str = r#"
CREATE TABLE IF NOT EXISTS budget_ratios (
    provider      TEXT NOT NULL,
    model         TEXT NOT NULL,
    day           TEXT NOT NULL,
    calls         INTEGER NOT NULL DEFAULT 0,
    reserved_usd  REAL NOT NULL DEFAULT 0,
    charged_usd   REAL NOT NULL DEFAULT 0,
    over_usd      REAL NOT NULL DEFAULT 0,
    input_ratio   REAL NOT NULL DEFAULT 0,
    output_ratio  REAL NOT NULL DEFAULT 0,
    updated_at    TEXT NOT NULL,
    PRIMARY KEY (provider, model, day)
);
CREATE INDEX IF NOT EXISTS idx_budget_ratios_day ON budget_ratios(day);
"#;

/// Version 14 (issue 48): the tasks of the MCP tasks
/// extension (`TaskStore`), so a task outlives its host's process and any
/// process on the state answers for it.
const MIGRATE_V14: &str = r#"
CREATE TABLE IF NOT EXISTS mcp_tasks (
    task_id           TEXT PRIMARY KEY,
    principal         TEXT NOT NULL,
    saga_id           TEXT,
    owner             TEXT,
    status            TEXT NOT NULL CHECK (status IN ('working','input_required','completed','failed','cancelled')),
    detail            TEXT,
    answers           TEXT,
    cancel_requested  INTEGER NOT NULL DEFAULT 0,
    created_at        TEXT NOT NULL,
    updated_at        TEXT NOT NULL,
    version           INTEGER NOT NULL DEFAULT 1
);
CREATE INDEX IF NOT EXISTS idx_mcp_tasks_open ON mcp_tasks(status, owner);
"#;

/// The message of the fencing triggers.
pub(super) const FENCED: &str = "capsaga: fenced";

/// The spend counters (created at every open when missing: they are not
/// part of the write-ahead log and need no migration).
const BUDGET: &str = "CREATE TABLE IF NOT EXISTS budget_days (
    day        TEXT PRIMARY KEY,
    spent_usd  REAL NOT NULL DEFAULT 0,
    calls      INTEGER NOT NULL DEFAULT 0,
    input_tokens  INTEGER NOT NULL DEFAULT 0,
    output_tokens INTEGER NOT NULL DEFAULT 0,
    updated_at TEXT NOT NULL
);";

/// Refuse a file that is another application's database or has a newer
/// schema (a file that is not a database at all fails here too, as
/// corrupt); `Ok(true)` when the file is ours and current (nothing to
/// migrate or stamp), `Ok(false)` when it is empty or older.
///
/// Every value is read in one read transaction, so that a file another
/// process is creating is seen either empty or complete, never created and
/// not yet stamped.
pub(super) fn check_ours(conn: &Connection, path: &Path) -> Result<bool, StoreError> {
    let read = || -> Result<(i64, i64, i64, i64), rusqlite::Error> {
        conn.execute_batch("BEGIN DEFERRED")?;
        let out = (|| -> Result<(i64, i64, i64, i64), rusqlite::Error> {
            let q = |sql: &str| conn.query_row(sql, [], |r| r.get::<_, i64>(0));
            Ok((
                q("PRAGMA application_id")?,
                q("PRAGMA user_version")?,
                q("SELECT count(*) FROM sqlite_schema")?,
                q("SELECT count(*) FROM sqlite_schema WHERE name = 'budget_days'")?,
            ))
        })();
        let end = conn.execute_batch("COMMIT");
        let out = out?;
        end?;
        Ok(out)
    };
    let (app_id, version, tables, budget) = read().map_err(|e| classify(path, e))?;
    if app_id != APPLICATION_ID && (app_id != 0 || tables > 0) {
        return Err(StoreError::Foreign {
            path: path.to_path_buf(),
            found: app_id,
        });
    }
    if version > SCHEMA_VERSION {
        return Err(StoreError::TooNew {
            path: path.to_path_buf(),
            found: version,
        });
    }
    Ok(app_id == APPLICATION_ID && version == SCHEMA_VERSION && budget == 1)
}

/// Migrate to [`SCHEMA_VERSION`] and stamp the application id, inside the
/// caller's write transaction (the version is read again under the write
/// lock: another process may have migrated the file since it was opened).
pub(super) fn bring_up_to_date(tx: &Transaction<'_>, path: &Path) -> Result<(), StoreError> {
    let version: i64 = tx.query_row("PRAGMA user_version", [], |r| r.get(0))?;
    if version > SCHEMA_VERSION {
        return Err(StoreError::TooNew {
            path: path.to_path_buf(),
            found: version,
        });
    }
    if version < SCHEMA_VERSION {
        migrate(tx, version)?;
        tx.pragma_update(None, "user_version", SCHEMA_VERSION)?;
    }
    tx.pragma_update(None, "application_id", APPLICATION_ID)?;
    tx.execute_batch(BUDGET)?;
    Ok(())
}

fn has_column(tx: &Transaction<'_>, table: &str, column: &str) -> Result<bool, StoreError> {
    let mut st = tx.prepare(&format!("PRAGMA table_info({table})"))?;
    let names = st.query_map([], |r| r.get::<_, String>(1))?;
    for n in names {
        if n? == column {
            return Ok(true);
        }
    }
    Ok(false)
}

/// Version 5, in a function of its own (see [`MIGRATE_V5`]).
fn migrate_v5(tx: &Transaction<'_>) -> Result<(), StoreError> {
    if !has_column(tx, "saga_state", "principal")? {
        tx.execute_batch("ALTER TABLE saga_state ADD COLUMN principal TEXT")?;
    }
    tx.execute_batch(MIGRATE_V5)?;
    Ok(())
}

/// Version 7 (issue 25), in a function of its own (see [`MIGRATE_V7`]).
fn migrate_v7(tx: &Transaction<'_>) -> Result<(), StoreError> {
    for table in ["saga_state", "saga_steps"] {
        if !has_column(tx, table, "fence")? {
            tx.execute_batch(&format!(
                "ALTER TABLE {table} ADD COLUMN fence INTEGER NOT NULL DEFAULT 1"
            ))?;
        }
    }
    tx.execute_batch(MIGRATE_V7)?;
    Ok(())
}

/// Bring the schema from `version` to [`SCHEMA_VERSION`], inside `tx`.
fn migrate(tx: &Transaction<'_>, version: i64) -> Result<(), StoreError> {
    migrate_to(tx, version, SCHEMA_VERSION)
}

/// Bring the schema from `version` to `target` (at most
/// [`SCHEMA_VERSION`]), inside `tx`: the tests build a database of an older
/// version exactly as that version's capsaga did.
pub(super) fn migrate_to(
    tx: &Transaction<'_>,
    version: i64,
    target: i64,
) -> Result<(), StoreError> {
    if version < 1 && target >= 1 {
        tx.execute_batch(SCHEMA)?;
    }
    if version < 2 && target >= 2 {
        for (column, decl) in [("owner", "TEXT"), ("plan", "TEXT")] {
            if !has_column(tx, "saga_state", column)? {
                tx.execute_batch(&format!(
                    "ALTER TABLE saga_state ADD COLUMN {column} {decl}"
                ))?;
            }
        }
        tx.execute_batch(MIGRATE_V2)?;
    }
    if version < 3 && target >= 3 {
        tx.execute_batch(MIGRATE_V3)?;
    }
    if version < 4 && target >= 4 {
        tx.execute_batch(MIGRATE_V4)?;
    }
    if version < 5 && target >= 5 {
        migrate_v5(tx)?;
    }
    if version < 6 && target >= 6 {
        migrate_v6(tx)?;
    }
    if version < 7 && target >= 7 {
        migrate_v7(tx)?;
    }
    if version < 8 && target >= 8 {
        migrate_v8(tx)?;
    }
    if version < 9 && target >= 9 {
        migrate_v9(tx)?;
    }
    if version < 10 && target >= 10 {
        migrate_v10(tx)?;
    }
    if version < 11 && target >= 11 {
        migrate_v11(tx)?;
    }
    if version < 12 && target >= 12 {
        tx.execute_batch(MIGRATE_V12)?;
    }
    if version < 13 && target >= 13 && !has_column(tx, "saga_steps", "label")? {
        // Version 13 (issue 47): the label of what each step brought into
        // its saga (information flow).
        tx.execute_batch("ALTER TABLE saga_steps ADD COLUMN label TEXT")?;
    }
    if version < 14 && target >= 14 {
        tx.execute_batch(MIGRATE_V14)?;
    }
    Ok(())
}
