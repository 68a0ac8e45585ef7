//! `mcp_tasks`: tasks of the MCP tasks extension ([`crate::TaskStore`]).
//! Every change is one statement: an insert, or a compare-and-set on the
//! row's version.

use super::super::StoreError;
use super::super::tasks::{TaskRow, TaskStore};
use super::Cached;
use super::SqliteStore;
use super::{all, first};
use crate::decode::{self, TASK_COLUMNS as COLUMNS};
use async_trait::async_trait;
use rusqlite::params;

fn rows(
    c: &rusqlite::Connection,
    sql: &str,
    p: impl rusqlite::Params,
) -> Result<Vec<TaskRow>, StoreError> {
    all(c, sql, p, |r| decode::task(r))
}

#[async_trait]
impl TaskStore for SqliteStore {
    async fn create_task(&self, t: &TaskRow) -> Result<(), StoreError> {
        let t = t.clone();
        self.write(move |tx| {
            tx.exec(
                "INSERT INTO mcp_tasks (task_id, principal, saga_id, owner, status, detail, answers, cancel_requested, created_at, updated_at, version)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, 1)",
                params![
                    t.task_id,
                    t.principal,
                    t.saga_id,
                    t.owner,
                    t.status,
                    t.detail,
                    t.answers,
                    i64::from(t.cancel_requested),
                    t.created_at,
                    t.updated_at
                ],
            )?;
            Ok(())
        })
        .await
    }

    async fn task(&self, task_id: &str) -> Result<Option<TaskRow>, StoreError> {
        self.read(|c| {
            first(
                c,
                &format!("SELECT {COLUMNS} FROM mcp_tasks WHERE task_id = ?1"),
                params![task_id],
                |r| decode::task(r),
            )
        })
    }

    async fn task_of(&self, task_id: &str, principal: &str) -> Result<Option<TaskRow>, StoreError> {
        self.read(|c| {
            first(
                c,
                &format!("SELECT {COLUMNS} FROM mcp_tasks WHERE task_id = ?1 AND principal = ?2"),
                params![task_id, principal],
                |r| decode::task(r),
            )
        })
    }

    async fn put_task(&self, t: &TaskRow) -> Result<bool, StoreError> {
        let t = t.clone();
        let version = i64::try_from(t.version).unwrap_or(i64::MAX);
        self.write(move |tx| {
            let n = tx.exec(
                "UPDATE mcp_tasks SET status = ?1, detail = ?2, answers = ?3, cancel_requested = ?4,
                   updated_at = ?5, version = version + 1
                 WHERE task_id = ?6 AND version = ?7",
                params![
                    t.status,
                    t.detail,
                    t.answers,
                    i64::from(t.cancel_requested),
                    t.updated_at,
                    t.task_id,
                    version
                ],
            )?;
            Ok(n == 1)
        })
        .await
    }

    async fn open_tasks(&self, owner: Option<&str>) -> Result<Vec<TaskRow>, StoreError> {
        self.read(|c| match owner {
            Some(o) => rows(
                c,
                &format!(
                    "SELECT {COLUMNS} FROM mcp_tasks WHERE status IN ('working', 'input_required') AND owner = ?1"
                ),
                params![o],
            ),
            None => rows(
                c,
                &format!(
                    "SELECT {COLUMNS} FROM mcp_tasks WHERE status IN ('working', 'input_required')"
                ),
                [],
            ),
        })
    }

    async fn forget_tasks(&self, before: &str) -> Result<u64, StoreError> {
        let before = before.to_owned();
        self.write(move |tx| {
            let n = tx.exec(
                "DELETE FROM mcp_tasks WHERE status IN ('completed', 'failed', 'cancelled') AND updated_at < ?1",
                params![before],
            )?;
            Ok(n as u64)
        })
        .await
    }
}
