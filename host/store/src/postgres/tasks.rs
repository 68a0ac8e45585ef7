//! `mcp_tasks`: tasks of the MCP tasks extension ([`crate::TaskStore`]),
//! shared by every host on the database. Every change is one statement:
//! an insert, or a compare-and-set on the row's version (two hosts writing
//! one task at once: one wins, the other reads the row again).

use super::super::StoreError;
use super::super::tasks::{TaskRow, TaskStore};
use super::{PgStore, execute, i64_of, query, query_opt};
use crate::decode::{self, TASK_COLUMNS as COLUMNS};
use async_trait::async_trait;

#[async_trait]
impl TaskStore for PgStore {
    async fn create_task(&self, t: &TaskRow) -> Result<(), StoreError> {
        let t = t.clone();
        self.write(move |c| {
            Box::pin(async move {
                execute(
                    c,
                    "INSERT INTO mcp_tasks (task_id, principal, saga_id, owner, status, detail, answers, cancel_requested, created_at, updated_at, version)
                     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, 1)",
                    &[
                        &t.task_id,
                        &t.principal,
                        &t.saga_id,
                        &t.owner,
                        &t.status,
                        &t.detail,
                        &t.answers,
                        &t.cancel_requested,
                        &t.created_at,
                        &t.updated_at,
                    ],
                )
                .await?;
                Ok(())
            })
        })
        .await
    }

    async fn task(&self, task_id: &str) -> Result<Option<TaskRow>, StoreError> {
        let c = self.conn().await?;
        let sql = format!("SELECT {COLUMNS} FROM mcp_tasks WHERE task_id = $1");
        query_opt(&c, &sql, &[&task_id])
            .await?
            .as_ref()
            .map(decode::task)
            .transpose()
    }

    async fn task_of(&self, task_id: &str, principal: &str) -> Result<Option<TaskRow>, StoreError> {
        let c = self.conn().await?;
        let sql = format!("SELECT {COLUMNS} FROM mcp_tasks WHERE task_id = $1 AND principal = $2");
        query_opt(&c, &sql, &[&task_id, &principal])
            .await?
            .as_ref()
            .map(decode::task)
            .transpose()
    }

    async fn put_task(&self, t: &TaskRow) -> Result<bool, StoreError> {
        let t = t.clone();
        let version = i64_of(t.version);
        self.write(move |c| {
            Box::pin(async move {
                let n = execute(
                    c,
                    "UPDATE mcp_tasks SET status = $1, detail = $2, answers = $3, cancel_requested = $4,
                       updated_at = $5, version = version + 1
                     WHERE task_id = $6 AND version = $7",
                    &[
                        &t.status,
                        &t.detail,
                        &t.answers,
                        &t.cancel_requested,
                        &t.updated_at,
                        &t.task_id,
                        &version,
                    ],
                )
                .await?;
                Ok(n == 1)
            })
        })
        .await
    }

    async fn open_tasks(&self, owner: Option<&str>) -> Result<Vec<TaskRow>, StoreError> {
        let c = self.conn().await?;
        let open = "status IN ('working', 'input_required')";
        let found = match owner {
            Some(o) => {
                let sql = format!("SELECT {COLUMNS} FROM mcp_tasks WHERE {open} AND owner = $1");
                query(&c, &sql, &[&o]).await?
            }
            None => {
                let sql = format!("SELECT {COLUMNS} FROM mcp_tasks WHERE {open}");
                query(&c, &sql, &[]).await?
            }
        };
        found.iter().map(decode::task).collect()
    }

    async fn forget_tasks(&self, before: &str) -> Result<u64, StoreError> {
        let before = before.to_owned();
        self.write(move |c| {
            Box::pin(async move {
                execute(
                    c,
                    "DELETE FROM mcp_tasks WHERE status IN ('completed', 'failed', 'cancelled') AND updated_at < $1",
                    &[&before],
                )
                .await
            })
        })
        .await
    }
}
