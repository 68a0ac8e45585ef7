//! `mcp_tasks`: tasks of the MCP tasks extension ([`crate::TaskStore`]).
//! Every change is one statement: an insert, or a compare-and-set on the
//! row's version (two writers of one task at once: one wins, the other
//! reads the row again). Each one appends a `TASK` record to the
//! hash-chained log in the same transaction, pinning the row as written
//! ([`records::task_pin`]), so `audit verify` finds a row edited behind
//! the log's back (SQLite schema 15, PostgreSQL migration 9: `chained`).

use crate::StoreError;
use crate::clock::now_rfc3339;
use crate::decode::{self, Cells, TASK_COLUMNS as COLUMNS};
use crate::records;
use crate::seam::{Tx, first};
use crate::tasks::TaskRow;

/// Insert `t` at version 1.
///
/// # Errors
/// The dialect's (a duplicate id included).
pub(crate) async fn create<X: Tx>(tx: &X, t: &TaskRow) -> Result<(), StoreError> {
    tx.exec(
        "INSERT INTO mcp_tasks (task_id, principal, saga_id, owner, status, detail, answers, cancel_requested, created_at, updated_at, version, chained)
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, 1, $11)",
        &[
            (&t.task_id).into(),
            (&t.principal).into(),
            (&t.saga_id).into(),
            (&t.owner).into(),
            (&t.status).into(),
            (&t.detail).into(),
            (&t.answers).into(),
            t.cancel_requested.into(),
            (&t.created_at).into(),
            (&t.updated_at).into(),
            true.into(),
        ],
    )
    .await?;
    let stored = TaskRow {
        version: 1,
        ..t.clone()
    };
    tx.log(&records::task_written(&stored, "created"), &now_rfc3339())
        .await
}

/// The task `task_id`, of `principal` when given.
///
/// # Errors
/// The dialect's.
pub(crate) async fn get<X: Tx>(
    tx: &X,
    task_id: &str,
    principal: Option<&str>,
) -> Result<Option<TaskRow>, StoreError> {
    let row = match principal {
        None => {
            let sql = format!("SELECT {COLUMNS} FROM mcp_tasks WHERE task_id = $1");
            first(tx, &sql, &[task_id.into()]).await?
        }
        Some(p) => {
            let sql =
                format!("SELECT {COLUMNS} FROM mcp_tasks WHERE task_id = $1 AND principal = $2");
            first(tx, &sql, &[task_id.into(), p.into()]).await?
        }
    };
    row.as_ref().map(decode::task).transpose()
}

/// Write `t` over the stored row if that row is still at `t.version`;
/// whether it was.
///
/// # Errors
/// The dialect's.
pub(crate) async fn put<X: Tx>(tx: &X, t: &TaskRow) -> Result<bool, StoreError> {
    let n = tx
        .exec(
            "UPDATE mcp_tasks SET status = $1, detail = $2, answers = $3, cancel_requested = $4,
               updated_at = $5, version = version + 1, chained = $8
             WHERE task_id = $6 AND version = $7",
            &[
                (&t.status).into(),
                (&t.detail).into(),
                (&t.answers).into(),
                t.cancel_requested.into(),
                (&t.updated_at).into(),
                (&t.task_id).into(),
                t.version.into(),
                // A row from before the log pinned tasks joins it now.
                true.into(),
            ],
        )
        .await?;
    if n != 1 {
        return Ok(false);
    }
    if let Some(stored) = get(tx, &t.task_id, None).await? {
        tx.log(&records::task_written(&stored, "changed"), &now_rfc3339())
            .await?;
    }
    Ok(true)
}

/// The tasks still open (working or waiting for input), of `owner` when
/// given.
///
/// # Errors
/// The dialect's.
pub(crate) async fn open<X: Tx>(tx: &X, owner: Option<&str>) -> Result<Vec<TaskRow>, StoreError> {
    let open = "status IN ('working', 'input_required')";
    let rows = match owner {
        Some(o) => {
            let sql = format!("SELECT {COLUMNS} FROM mcp_tasks WHERE {open} AND owner = $1");
            tx.rows(&sql, &[o.into()]).await?
        }
        None => {
            let sql = format!("SELECT {COLUMNS} FROM mcp_tasks WHERE {open}");
            tx.rows(&sql, &[]).await?
        }
    };
    rows.iter().map(decode::task).collect()
}

/// Delete the ended tasks last changed before `before`; how many.
///
/// # Errors
/// The dialect's.
pub(crate) async fn forget<X: Tx>(tx: &X, before: &str) -> Result<u64, StoreError> {
    let ended = tx
        .rows(
            "SELECT task_id FROM mcp_tasks WHERE status IN ('completed', 'failed', 'cancelled') AND updated_at < $1",
            &[before.into()],
        )
        .await?;
    let at = now_rfc3339();
    let mut n = 0;
    for r in &ended {
        let id: String = r.cell(0)?;
        n += tx
            .exec(
                "DELETE FROM mcp_tasks WHERE task_id = $1",
                &[id.as_str().into()],
            )
            .await?;
        tx.log(&records::task_forgotten(&id), &at).await?;
    }
    Ok(n)
}
