//! `mcp_tasks` ([`crate::logic::tasks`]) on SQLite.

use super::super::StoreError;
use super::super::tasks::{TaskRow, TaskStore};
use super::SqliteStore;
use super::seam::Lite;
use crate::logic::tasks;
use crate::seam::now;
use async_trait::async_trait;

#[async_trait]
impl TaskStore for SqliteStore {
    async fn create_task(&self, t: &TaskRow) -> Result<(), StoreError> {
        let t = t.clone();
        self.write(move |tx| now(tasks::create(&Lite::write(tx), &t)))
            .await
    }

    async fn task(&self, task_id: &str) -> Result<Option<TaskRow>, StoreError> {
        self.read(|c| now(tasks::get(&Lite::read(c), task_id, None)))
    }

    async fn task_of(&self, task_id: &str, principal: &str) -> Result<Option<TaskRow>, StoreError> {
        self.read(|c| now(tasks::get(&Lite::read(c), task_id, Some(principal))))
    }

    async fn put_task(&self, t: &TaskRow) -> Result<bool, StoreError> {
        let t = t.clone();
        self.write(move |tx| now(tasks::put(&Lite::write(tx), &t)))
            .await
    }

    async fn open_tasks(&self, owner: Option<&str>) -> Result<Vec<TaskRow>, StoreError> {
        self.read(|c| now(tasks::open(&Lite::read(c), owner)))
    }

    async fn forget_tasks(&self, before: &str) -> Result<u64, StoreError> {
        let before = before.to_owned();
        self.write(move |tx| now(tasks::forget(&Lite::write(tx), &before)))
            .await
    }
}
