//! MCP tasks (the tasks extension, `io.modelcontextprotocol/tasks`, issue
//! 48): a task's record, status, result and pending questions, in the
//! store (`mcp_tasks`; SQLite schema 14, PostgreSQL migration 8), so that
//! a task outlives the process that started it and any host sharing the
//! store answers for it.
//!
//! A row is written by three parties, each through a compare-and-set on
//! the row's [`TaskRow::version`] ([`TaskStore::put_task`]), so two writers
//! never both win and a terminal status is written exactly once:
//! - the host running the task (its [`TaskRow::owner`]): status, result,
//!   questions, and the answers it consumed;
//! - any host serving the task's principal: `tasks/cancel` sets
//!   [`TaskRow::cancel_requested`], `tasks/update` adds answers;
//! - any host's sweep: a task whose owner is not alive any more is ended.
//!
//! Reads for a client are scoped to its principal in the statement itself
//! ([`TaskStore::task_of`]): another principal's task is not found, which
//! a surface answers exactly as an unknown id. Every creation, change and
//! deletion of a row appends a `TASK` record to the hash-chained log, which
//! pins the row (SQLite schema 15, PostgreSQL migration 9), so
//! `capsaga audit verify` finds a task row edited behind the log's back.

use super::StoreError;
use async_trait::async_trait;
use serde::Serialize;

/// The statuses a task row may hold (the extension's names).
pub const TASK_STATUSES: [&str; 5] = [
    "working",
    "input_required",
    "completed",
    "failed",
    "cancelled",
];

/// Whether `status` is terminal (`completed`, `failed`, `cancelled`).
pub fn task_status_is_terminal(status: &str) -> bool {
    matches!(status, "completed" | "failed" | "cancelled")
}

/// One task (`mcp_tasks`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct TaskRow {
    /// Its id (a UUID v4, the client's handle).
    pub task_id: String,
    /// The principal that created it (`token:bob`): the only one that
    /// reads, cancels or answers it.
    pub principal: String,
    /// The saga its call runs in (none for a task that runs no call, e.g.
    /// a conformance fixture's).
    pub saga_id: Option<String>,
    /// The owner id of the process running it ([`crate::OwnerStore`]).
    pub owner: Option<String>,
    /// One of [`TASK_STATUSES`].
    pub status: String,
    /// JSON text: the questions (`input_required`), the result
    /// (`completed`) or the error (`failed`); none otherwise.
    pub detail: Option<String>,
    /// JSON text: an object of the answers given to the pending questions
    /// and not yet taken by the running host.
    pub answers: Option<String>,
    /// Whether `tasks/cancel` was received (cooperative: the running host
    /// decides the terminal status).
    pub cancel_requested: bool,
    /// RFC 3339.
    pub created_at: String,
    /// RFC 3339, at every change.
    pub updated_at: String,
    /// The row's version: 1 at creation, one more at every
    /// [`TaskStore::put_task`].
    pub version: u64,
}

impl TaskRow {
    /// Whether the task ended.
    pub fn is_terminal(&self) -> bool {
        task_status_is_terminal(&self.status)
    }
}

/// Tasks of the tasks extension (`mcp_tasks`).
#[async_trait]
pub trait TaskStore: Send + Sync {
    /// Record a new task (its `version` is stored as 1).
    ///
    /// # Errors
    /// [`StoreError`], including a duplicate id or an unknown status.
    async fn create_task(&self, task: &TaskRow) -> Result<(), StoreError>;

    /// Task `task_id`, whoever it belongs to (the running host and the
    /// sweep; never for a client).
    ///
    /// # Errors
    /// [`StoreError`].
    async fn task(&self, task_id: &str) -> Result<Option<TaskRow>, StoreError>;

    /// Task `task_id` if `principal` created it: `None` for an unknown id
    /// and for another principal's task alike (the filter is in the
    /// statement).
    ///
    /// # Errors
    /// [`StoreError`].
    async fn task_of(&self, task_id: &str, principal: &str) -> Result<Option<TaskRow>, StoreError>;

    /// Write `task`'s status, detail, answers, cancel flag and
    /// `updated_at` if the stored row is still at `task.version` (compare
    /// and set); its principal, saga, owner and creation never change.
    /// `true`: written (the row is now at `task.version + 1`); `false`:
    /// someone wrote it first, or it is gone (read it again).
    ///
    /// # Errors
    /// [`StoreError`], including an unknown status.
    async fn put_task(&self, task: &TaskRow) -> Result<bool, StoreError>;

    /// The tasks not ended; of owner `owner` only when given.
    ///
    /// # Errors
    /// [`StoreError`].
    async fn open_tasks(&self, owner: Option<&str>) -> Result<Vec<TaskRow>, StoreError>;

    /// Delete the ended tasks last changed before `before` (RFC 3339, as
    /// [`crate::clock`] writes them); how many.
    ///
    /// # Errors
    /// [`StoreError`].
    async fn forget_tasks(&self, before: &str) -> Result<u64, StoreError>;
}
