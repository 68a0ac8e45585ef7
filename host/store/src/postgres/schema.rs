//! The PostgreSQL schema: forward-only numbered migrations, applied at open
//! under an advisory lock, each in the transaction that records it in
//! `capsaga_schema` (PostgreSQL's DDL is transactional: a migration is whole
//! or absent, never half done).
//!
//! Every host runs `bring_up_to_date` when it opens the store; the first
//! takes the advisory lock and migrates, the others wait for the lock and
//! find the schema current. A database whose `capsaga_schema` records a
//! version newer than [`PG_SCHEMA_VERSION`] is refused (upgrade capsaga); a
//! database with tables and no `capsaga_schema` is another application's
//! and is refused. Neither is touched.

use super::super::StoreError;
use super::Conn;
use capsaga_core::wal_row::GENESIS;
use std::path::PathBuf;

/// The newest migration this capsaga knows.
pub const PG_SCHEMA_VERSION: i64 = 9;

/// The advisory lock key of migrations ("CAPS").
const MIGRATION_LOCK: i64 = 0x4341_5053;

/// Version 1: every table of the SQLite store as of its version 4, the
/// fencing of its version 7 (its trigger), and `hosts`, the leases of the
/// hosts sharing the database. Text columns hold what SQLite holds (RFC 3339 timestamps as
/// written by the host, JSON as text) so that the hash chain and the rows
/// read back are the same on both back ends; `ord` columns give rows a
/// creation order (SQLite's rowid).
const V1: &str = include_str!("migrations/0001.sql");

/// Version 2: what the SQLite store's versions 5 and 6 added (issue 24):
/// the principal that started each saga, named tokens (the SHA-256 of
/// their secret, never the secret), provider keys sealed under
/// `CAPSAGA_KEK`, the kill switch, and the budget's reservations of calls
/// in flight. A reservation's expiry is the database's clock
/// (`TIMESTAMPTZ`, compared with `clock_timestamp()`), as the hosts' leases
/// are: hosts whose clocks disagree still agree on which reservations
/// count.
const V2: &str = include_str!("migrations/0002.sql");

/// Version 3: one hash chain per writer (issue 25's follow-up: hosts append
/// in parallel instead of taking turns on one head row). `wal_log.chain`
/// names each row's chain; `wal_chains` holds each chain's anchored head
/// and replaces `wal_head`; `wal_order` gives every row of every chain its
/// place in one order (`seq`). The rows written before stay the chain `''`
/// (numbered 1, 2, 3... as before, verified as before), its head moved to
/// `wal_chains`; nobody appends to it again.
const V3: &str = include_str!("migrations/0003.sql");

/// Version 4 (issue 26): `released_at` of `saga_state`, set (by the
/// database's clock, as text like every timestamp column) while a saga
/// continued across requests (an MCP 2026-07-28 saga handle) is released
/// by its owner between two requests: crash recovery leaves it alone, any
/// host claims it.
const V4: &str = include_str!("migrations/0004.sql");

/// Version 5 (issue 45): `scope` of `saga_state`, the scope that opened
/// each saga (`capsaga_core::scope::Scope`); only that scope continues,
/// commits or rolls it back. Older sagas get the scope their origin tells
/// for sure (a plan, a call, an MCP saga released between requests: a
/// handle's), the others none (then only the operator acts on them).
const V5: &str = include_str!("migrations/0005.sql");

/// Version 6 (issue 45): what providers' reports cost beyond the hosts'
/// estimates, per provider, model asked and UTC day, written with each
/// settlement under the day's advisory lock; the largest ratios of the
/// last days scale later reservations (`capsaga_core::budget::learn`).
const V6: &str = include_str!("migrations/0006.sql");

/// Version 7: what the SQLite store's version 13 added (issue 47): the
/// label of what each step brought into its saga (information flow).
const V7: &str = include_str!("migrations/0007.sql");

/// Migration 8 (issue 48): the tasks of the MCP tasks
/// extension (`TaskStore`), shared by every host, so any host answers for
/// a task and a task outlives the host that ran it.
const V8: &str = include_str!("migrations/0008.sql");

/// Migration 9 (issue 48): `charged` of `budget_reservations`, set when a
/// reservation that expired unsettled is charged to its day's spend (its
/// host died after its call was sent); `chained` of `mcp_tasks`, true for
/// every task written since, whose creation and changes are `TASK` records
/// of the hash-chained log (a row from before is not).
const V9: &str = include_str!("migrations/0009.sql");

/// The migrations, by version, in order. Forward only: a released
/// migration is never edited, a change is a new one. A database records each
/// version applied, and every migration this capsaga knows that is not
/// recorded is applied, in order (a database made by a build that lacked a
/// lower number gets it later).
pub(crate) fn migrations() -> Vec<(i64, String)> {
    vec![
        (
            1,
            format!("{V1}\nINSERT INTO wal_head (id, seq, hash) VALUES (1, 0, '{GENESIS}');"),
        ),
        (2, V2.to_string()),
        (3, V3.to_string()),
        (4, V4.to_string()),
        (5, V5.to_string()),
        (6, V6.to_string()),
        (7, V7.to_string()),
        (8, V8.to_string()),
        (9, V9.to_string()),
    ]
}

/// The SQLSTATE of a write refused by fencing.
pub const FENCED_SQLSTATE: &str = "CS409";

async fn version(c: &Conn) -> Result<Option<i64>, StoreError> {
    // A scan of the catalog under this statement's snapshot (not a name
    // lookup through caches): a host that waited for the migration lock
    // sees the table the migrating host just committed.
    let has = c
        .query_one(
            "SELECT EXISTS (SELECT 1 FROM pg_catalog.pg_tables WHERE schemaname = current_schema() AND tablename = 'capsaga_schema')",
            &[],
        )
        .await?;
    if !has.get::<_, bool>(0) {
        return Ok(None);
    }
    let v = c
        .query_one("SELECT COALESCE(MAX(version), 0) FROM capsaga_schema", &[])
        .await?;
    Ok(Some(v.get::<_, i64>(0)))
}

/// The versions recorded in `capsaga_schema` (the table exists).
async fn applied(c: &Conn) -> Result<std::collections::BTreeSet<i64>, StoreError> {
    let rows = c.query("SELECT version FROM capsaga_schema", &[]).await?;
    Ok(rows.iter().map(|r| r.get::<_, i64>(0)).collect())
}

/// Check the database is ours and migrate it to [`PG_SCHEMA_VERSION`].
///
/// # Errors
/// [`StoreError::Foreign`], [`StoreError::TooNew`] or the server's error.
pub(super) async fn bring_up_to_date(c: &Conn, shown: &str) -> Result<(), StoreError> {
    let too_new = |found| StoreError::TooNew {
        path: PathBuf::from(shown),
        found,
    };
    // Fast path, no lock: already current.
    if let Some(v) = version(c).await? {
        if v > PG_SCHEMA_VERSION {
            return Err(too_new(v));
        }
        if v == PG_SCHEMA_VERSION {
            let applied = applied(c).await?;
            if migrations().iter().all(|(m, _)| applied.contains(m)) {
                return Ok(());
            }
        }
    }
    c.batch_execute("BEGIN").await?;
    let r = migrate_locked(c, shown).await;
    match r {
        Ok(()) => Ok(c.batch_execute("COMMIT").await?),
        Err(e) => {
            let _ = c.batch_execute("ROLLBACK").await;
            Err(e)
        }
    }
}

async fn migrate_locked(c: &Conn, shown: &str) -> Result<(), StoreError> {
    c.execute("SELECT pg_advisory_xact_lock($1)", &[&MIGRATION_LOCK])
        .await?;
    // Read again under the lock: another host may have migrated meanwhile.
    let current = match version(c).await? {
        Some(v) => v,
        None => {
            let tables = c
                .query_one(
                    "SELECT count(*) FROM information_schema.tables WHERE table_schema = current_schema()",
                    &[],
                )
                .await?
                .get::<_, i64>(0);
            if tables > 0 {
                return Err(StoreError::Foreign {
                    path: PathBuf::from(shown),
                    found: 0,
                });
            }
            c.batch_execute(
                "CREATE TABLE capsaga_schema (version BIGINT PRIMARY KEY, applied_at TIMESTAMPTZ NOT NULL DEFAULT clock_timestamp())",
            )
            .await?;
            0
        }
    };
    if current > PG_SCHEMA_VERSION {
        return Err(StoreError::TooNew {
            path: PathBuf::from(shown),
            found: current,
        });
    }
    let applied = applied(c).await?;
    for (v, sql) in migrations() {
        if applied.contains(&v) {
            continue;
        }
        c.batch_execute(&sql).await?;
        c.execute("INSERT INTO capsaga_schema (version) VALUES ($1)", &[&v])
            .await?;
    }
    Ok(())
}
