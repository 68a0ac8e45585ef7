//! `traces` ([`crate::logic::traces`]) on SQLite.

use super::super::{StoreError, TraceRecord, TraceStore};
use super::SqliteStore;
use super::seam::Lite;
use crate::logic::traces;
use crate::owned::OwnedTrace;
use crate::seam::now;
use async_trait::async_trait;

#[async_trait]
impl TraceStore for SqliteStore {
    async fn save_trace(&self, t: &TraceRecord<'_>) -> Result<(), StoreError> {
        let o = OwnedTrace::of(t);
        self.write(move |tx| now(traces::save(&Lite::write(tx), &o.view())))
            .await
    }

    async fn load_trace(&self, id: &str) -> Result<Option<String>, StoreError> {
        self.read(|c| now(traces::load(&Lite::read(c), id)))
    }

    async fn trace_of_saga(&self, saga_id: &str) -> Result<Option<String>, StoreError> {
        self.read(|c| now(traces::of_saga(&Lite::read(c), saga_id)))
    }
}
