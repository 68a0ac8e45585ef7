//! `traces` ([`crate::logic::traces`]) on PostgreSQL.

use super::super::{StoreError, TraceRecord, TraceStore};
use super::PgStore;
use super::seam::Pg;
use crate::logic::traces;
use crate::owned::OwnedTrace;
use async_trait::async_trait;

#[async_trait]
impl TraceStore for PgStore {
    async fn save_trace(&self, t: &TraceRecord<'_>) -> Result<(), StoreError> {
        let o = OwnedTrace::of(t);
        self.write(move |c| Box::pin(async move { traces::save(&Pg(c), &o.view()).await }))
            .await
    }

    async fn load_trace(&self, id: &str) -> Result<Option<String>, StoreError> {
        traces::load(&Pg(&*self.conn().await?), id).await
    }

    async fn trace_of_saga(&self, saga_id: &str) -> Result<Option<String>, StoreError> {
        traces::of_saga(&Pg(&*self.conn().await?), saga_id).await
    }
}
