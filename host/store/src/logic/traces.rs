//! `traces`: execution traces of agent turns. SQLite replaces a trace's
//! row (`INSERT OR REPLACE`, a new `rowid`), PostgreSQL updates it in
//! place; each orders ties by its insertion order (`rowid`, `ord`).

use crate::seam::{Dialect, Tx, first};
use crate::{StoreError, TraceRecord};

/// Save (or replace) the trace `t`.
///
/// # Errors
/// The dialect's.
pub(crate) async fn save<X: Tx>(tx: &X, t: &TraceRecord<'_>) -> Result<(), StoreError> {
    let sql = match tx.dialect() {
        Dialect::Sqlite => {
            "INSERT OR REPLACE INTO traces (trace_id, saga_id, task, outcome, started_at, finished_at, wall_ms, trace)
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8)"
        }
        Dialect::Postgres => {
            "INSERT INTO traces (trace_id, saga_id, task, outcome, started_at, finished_at, wall_ms, trace)
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8)
             ON CONFLICT (trace_id) DO UPDATE SET saga_id = EXCLUDED.saga_id, task = EXCLUDED.task,
               outcome = EXCLUDED.outcome, started_at = EXCLUDED.started_at, finished_at = EXCLUDED.finished_at,
               wall_ms = EXCLUDED.wall_ms, trace = EXCLUDED.trace"
        }
    };
    tx.exec(
        sql,
        &[
            t.trace_id.into(),
            t.saga_id.into(),
            t.task.into(),
            t.outcome.into(),
            t.started_at.into(),
            t.finished_at.into(),
            t.wall_ms.into(),
            t.json.into(),
        ],
    )
    .await?;
    Ok(())
}

/// The trace `id` (`last`: the newest; at least four characters: a
/// unique-enough prefix), its JSON.
///
/// # Errors
/// The dialect's.
pub(crate) async fn load<X: Tx>(tx: &X, id: &str) -> Result<Option<String>, StoreError> {
    if id != "last" && !id.bytes().all(|b| b.is_ascii_hexdigit() || b == b'-') {
        return Ok(None);
    }
    let row = match (id == "last", tx.dialect()) {
        (true, Dialect::Sqlite) => {
            let sql = "SELECT trace FROM traces ORDER BY started_at DESC, rowid DESC LIMIT 1";
            first(tx, sql, &[]).await?
        }
        (true, Dialect::Postgres) => {
            let sql = "SELECT trace FROM traces ORDER BY started_at DESC, ord DESC LIMIT 1";
            first(tx, sql, &[]).await?
        }
        (false, Dialect::Sqlite) => {
            let sql = "SELECT trace FROM traces WHERE trace_id = $1 OR (length($1) >= 4 AND trace_id LIKE $1 || '%') ORDER BY started_at DESC LIMIT 1";
            first(tx, sql, &[id.into()]).await?
        }
        (false, Dialect::Postgres) => {
            let sql = "SELECT trace FROM traces WHERE trace_id = $1 OR (length($1) >= 4 AND left(trace_id, length($1)) = $1) ORDER BY started_at DESC LIMIT 1";
            first(tx, sql, &[id.into()]).await?
        }
    };
    row.map(|r| crate::decode::Cells::cell(&r, 0)).transpose()
}

/// The newest trace of the saga `saga_id`, its id.
///
/// # Errors
/// The dialect's.
pub(crate) async fn of_saga<X: Tx>(tx: &X, saga_id: &str) -> Result<Option<String>, StoreError> {
    let order = match tx.dialect() {
        Dialect::Sqlite => "rowid",
        Dialect::Postgres => "ord",
    };
    let sql = format!(
        "SELECT trace_id FROM traces WHERE saga_id = $1 ORDER BY started_at DESC, {order} DESC LIMIT 1"
    );
    let row = first(tx, &sql, &[saga_id.into()]).await?;
    row.map(|r| crate::decode::Cells::cell(&r, 0)).transpose()
}
