//! `host_switch` ([`crate::logic::switch`]) on PostgreSQL: one row shared
//! by every host (each reads it at its door and its switch watcher).

use super::super::StoreError;
use super::super::access::SwitchStore;
use super::PgStore;
use super::seam::Pg;
use crate::clock::now_rfc3339;
use crate::logic::switch;
use async_trait::async_trait;
use capsaga_core::pause::{Mode, Switch};

#[async_trait]
impl SwitchStore for PgStore {
    async fn switch(&self) -> Result<Switch, StoreError> {
        switch::get(&Pg(&*self.conn().await?)).await
    }

    async fn set_switch(
        &self,
        mode: Mode,
        by: &str,
        note: Option<&str>,
    ) -> Result<Switch, StoreError> {
        let (by, note, at) = (by.to_owned(), note.map(str::to_owned), now_rfc3339());
        self.write(move |c| {
            Box::pin(async move { switch::set(&Pg(c), mode, &by, note.as_deref(), &at).await })
        })
        .await
    }
}
