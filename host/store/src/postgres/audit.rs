//! The tables' current values ([`crate::logic::audit`]) on PostgreSQL.

use super::super::{AuditStore, StoreError, TableStates};
use super::PgStore;
use super::seam::Pg;
use crate::logic::audit;
use async_trait::async_trait;

#[async_trait]
impl AuditStore for PgStore {
    async fn table_states(&self) -> Result<TableStates, StoreError> {
        audit::table_states(&Pg(&*self.conn().await?)).await
    }
}
