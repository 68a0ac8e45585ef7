//! `mcp_tasks` ([`crate::logic::tasks`]) on PostgreSQL, shared by every
//! host on the database.

use super::super::StoreError;
use super::super::tasks::{TaskRow, TaskStore};
use super::PgStore;
use super::seam::Pg;
use crate::logic::tasks;
use async_trait::async_trait;

#[async_trait]
impl TaskStore for PgStore {
    async fn create_task(&self, t: &TaskRow) -> Result<(), StoreError> {
        let t = t.clone();
        self.write(move |c| Box::pin(async move { tasks::create(&Pg(c), &t).await }))
            .await
    }

    async fn task(&self, task_id: &str) -> Result<Option<TaskRow>, StoreError> {
        tasks::get(&Pg(&*self.conn().await?), task_id, None).await
    }

    async fn task_of(&self, task_id: &str, principal: &str) -> Result<Option<TaskRow>, StoreError> {
        tasks::get(&Pg(&*self.conn().await?), task_id, Some(principal)).await
    }

    async fn put_task(&self, t: &TaskRow) -> Result<bool, StoreError> {
        let t = t.clone();
        self.write(move |c| Box::pin(async move { tasks::put(&Pg(c), &t).await }))
            .await
    }

    async fn open_tasks(&self, owner: Option<&str>) -> Result<Vec<TaskRow>, StoreError> {
        tasks::open(&Pg(&*self.conn().await?), owner).await
    }

    async fn forget_tasks(&self, before: &str) -> Result<u64, StoreError> {
        let before = before.to_owned();
        self.write(move |c| Box::pin(async move { tasks::forget(&Pg(c), &before).await }))
            .await
    }
}
