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
pub(super) const SCHEMA: &str = include_str!("migrations/0001.sql");

/// Version 2: approvals, the anchored head of the log, saga owners and plans.
const MIGRATE_V2: &str = include_str!("migrations/0002.sql");

/// Version 3: approvals expire, keep the decision's note, and can be
/// replaced (stale, expired), so a step may have several; the table is rebuilt (SQLite cannot change a
/// CHECK or drop a UNIQUE constraint in place).
const MIGRATE_V3: &str = include_str!("migrations/0003.sql");

/// Version 4: agent-written tools, every version (see `store::NeuronStore`).
const MIGRATE_V4: &str = include_str!("migrations/0004.sql");

/// Version 5 (issue 24): the principal that started each saga (added by
/// [`migrate`] when missing), named tokens (the SHA-256 of their secret,
/// never the secret), provider keys sealed under `CAPSAGA_KEK`, and the
/// kill switch.
const MIGRATE_V5: &str = include_str!("migrations/0005.sql");

/// Version 6: the reservations of model calls in flight (issue 24 item 3,
/// `BudgetStore::reserve_spend`): each call's maximum estimate, USD, held
/// until settled or expired.
const MIGRATE_V6: &str = include_str!("migrations/0006.sql");

/// Version 7: fencing tokens (`store::SagaRow::fence`). A saga's token
/// moves at every take-over; every insert or update of one of its steps
/// must carry the current token, or the trigger aborts the write (the host
/// maps the message to `StoreError::Fenced`): refused by the database, not
/// by the writer's good faith.
const MIGRATE_V7: &str = include_str!("migrations/0007.sql");

/// Version 8 (issue 29): the sagas in creation order without a sort, for
/// the operator console's pages (`SagaStore::saga_page`, newest first;
/// the index's entries are ordered by `(created_at, rowid)`).
const MIGRATE_V8: &str = include_str!("migrations/0008.sql");

/// Version 10 (issue 31): fewer pages written per record. Each record's
/// transaction wrote `sqlite_sequence` (both tables were `AUTOINCREMENT`,
/// yet a log row's `seq` is set from the anchored head and a step's `id`
/// only orders the rows of one table, whose rows are never deleted) and
/// `idx_saga`, the same key as the `UNIQUE (saga_id, step_seq)`
/// constraint's own index: three pages of the WAL frame a step wrote
/// (`capsaga-bench` saga step). SQLite cannot drop `AUTOINCREMENT` in place:
/// both tables are rebuilt with their rows, keys, constraints, indexes and
/// the fencing triggers, in the migration's transaction.
const MIGRATE_V10: &str = include_str!("migrations/0010.sql");

/// Version 11 (issue 45): `scope` of `saga_state`, the scope that opened
/// each saga (`capsaga_core::scope::Scope`: a session, a saga handle, a
/// task, a turn, a plan, a call); only that scope continues, commits or
/// rolls it back. Older sagas get the scope their origin tells for sure (a
/// plan, a call, an MCP saga released between requests: a handle's), the
/// others none (then only the operator acts on them).
const MIGRATE_V11: &str = include_str!("migrations/0011.sql");

/// Version 12 (issue 45): what providers' reports cost beyond the host's
/// estimates, per provider, model asked and UTC day
/// (`BudgetStore::settle_spend_learnt`): the largest ratios of the last
/// days scale later reservations (`capsaga_core::budget::learn`).
const MIGRATE_V12: &str = include_str!("migrations/0012.sql");

/// Version 14 (issue 48): the tasks of the MCP tasks
/// extension (`TaskStore`), so a task outlives its host's process and any
/// process on the state answers for it.
const MIGRATE_V14: &str = include_str!("migrations/0014.sql");

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

/// Bring the schema from `version` to [`SCHEMA_VERSION`], inside `tx`.
fn migrate(tx: &Transaction<'_>, version: i64) -> Result<(), StoreError> {
    migrate_to(tx, version, SCHEMA_VERSION)
}

/// One version of the schema: the columns it adds to existing tables
/// (`table`, `column`, declaration; each added only when missing, as SQLite
/// has no `ADD COLUMN IF NOT EXISTS`), then its SQL files, in order.
struct Migration {
    version: i64,
    columns: &'static [(&'static str, &'static str, &'static str)],
    sql: &'static [&'static str],
}

/// A version that adds no column.
const fn sql(version: i64, sql: &'static [&'static str]) -> Migration {
    Migration {
        version,
        columns: &[],
        sql,
    }
}

/// Columns (SQLite's type declaration) added by several versions.
const TEXT: &str = "TEXT";
const FENCE: &str = "INTEGER NOT NULL DEFAULT 1";
const FLAG: &str = "INTEGER NOT NULL DEFAULT 0";

/// Every version, in order. Forward only: a released version is never
/// edited, a change is a new one (its file `migrations/NNNN.sql`).
#[rustfmt::skip]
const MIGRATIONS: [Migration; 15] = [
    sql(1, &[SCHEMA]),
    Migration { version: 2, columns: &[("saga_state", "owner", TEXT), ("saga_state", "plan", TEXT)], sql: &[MIGRATE_V2] },
    sql(3, &[MIGRATE_V3]),
    sql(4, &[MIGRATE_V4]),
    Migration { version: 5, columns: &[("saga_state", "principal", TEXT)], sql: &[MIGRATE_V5] },
    sql(6, &[MIGRATE_V6]),
    Migration { version: 7, columns: &[("saga_state", "fence", FENCE), ("saga_steps", "fence", FENCE)], sql: &[MIGRATE_V7] },
    sql(8, &[MIGRATE_V8]),
    // Version 9 (issue 26): `released_at` of `saga_state`, set while a
    // saga continued across requests (an MCP 2026-07-28 saga handle) is
    // released by its owner between two requests (`SagaStore::release_saga`).
    Migration { version: 9, columns: &[("saga_state", "released_at", TEXT)], sql: &[] },
    // The fencing triggers went with the old `saga_steps`: created again.
    sql(10, &[MIGRATE_V10, MIGRATE_V7]),
    Migration { version: 11, columns: &[("saga_state", "scope", TEXT)], sql: &[MIGRATE_V11] },
    sql(12, &[MIGRATE_V12]),
    // Version 13 (issue 47): the label of what each step brought into its
    // saga (information flow).
    Migration { version: 13, columns: &[("saga_steps", "label", TEXT)], sql: &[] },
    sql(14, &[MIGRATE_V14]),
    // Version 15 (issue 48): a reservation expired unsettled is charged to
    // its day (`charged`); a task written since is in the hash-chained log
    // (`chained`; a row from before is not).
    Migration { version: 15, columns: &[("budget_reservations", "charged", FLAG), ("mcp_tasks", "chained", FLAG)], sql: &[] },
];

/// Bring the schema from `version` to `target` (at most
/// [`SCHEMA_VERSION`]), inside `tx`: the tests build a database of an older
/// version exactly as that version's capsaga did.
pub(super) fn migrate_to(
    tx: &Transaction<'_>,
    version: i64,
    target: i64,
) -> Result<(), StoreError> {
    for m in MIGRATIONS
        .iter()
        .filter(|m| version < m.version && m.version <= target)
    {
        for (table, column, decl) in m.columns {
            if !has_column(tx, table, column)? {
                tx.execute_batch(&format!("ALTER TABLE {table} ADD COLUMN {column} {decl}"))?;
            }
        }
        for sql in m.sql {
            tx.execute_batch(sql)?;
        }
    }
    Ok(())
}
