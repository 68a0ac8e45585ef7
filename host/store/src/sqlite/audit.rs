//! The tables' current values ([`crate::logic::audit`]) on SQLite.

use super::super::{AuditStore, StoreError, TableStates};
use super::SqliteStore;
use super::seam::Lite;
use crate::logic::audit;
use crate::seam::now;
use async_trait::async_trait;

#[async_trait]
impl AuditStore for SqliteStore {
    async fn table_states(&self) -> Result<TableStates, StoreError> {
        self.read(|c| now(audit::table_states(&Lite::read(c))))
    }
}
