//! `host_switch` ([`crate::logic::switch`]) on SQLite.

use super::super::StoreError;
use super::super::access::SwitchStore;
use super::SqliteStore;
use super::seam::Lite;
use crate::clock::now_rfc3339;
use crate::logic::switch;
use crate::seam::now;
use async_trait::async_trait;
use capsaga_core::pause::{Mode, Switch};

#[async_trait]
impl SwitchStore for SqliteStore {
    async fn switch(&self) -> Result<Switch, StoreError> {
        self.read(|c| now(switch::get(&Lite::read(c))))
    }

    async fn set_switch(
        &self,
        mode: Mode,
        by: &str,
        note: Option<&str>,
    ) -> Result<Switch, StoreError> {
        let (by, note, at) = (by.to_owned(), note.map(str::to_owned), now_rfc3339());
        self.write(move |tx| {
            now(switch::set(
                &Lite::write(tx),
                mode,
                &by,
                note.as_deref(),
                &at,
            ))
        })
        .await
    }
}
