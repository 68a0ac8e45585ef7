//! `host_switch`: the kill switch (`capsaga_core::pause`), one row. Each
//! change appends a `SWITCH` record (saga id `host:switch`) to the
//! hash-chained log in the same transaction.

use super::super::StoreError;
use super::super::access::SwitchStore;
use super::Cached;
use super::log::log_record;
use super::{SqliteStore, first};
use crate::clock::now_rfc3339;
use crate::decode;
use crate::records;
use async_trait::async_trait;
use capsaga_core::pause::{Mode, Switch};
use rusqlite::{Connection, params};

fn read(c: &Connection) -> Result<Switch, StoreError> {
    let row = first(c, decode::SWITCH_SELECT, [], |r| decode::switch(Some(r)))?;
    Ok(row.unwrap_or_default())
}

#[async_trait]
impl SwitchStore for SqliteStore {
    async fn switch(&self) -> Result<Switch, StoreError> {
        self.read(read)
    }

    async fn set_switch(
        &self,
        mode: Mode,
        by: &str,
        note: Option<&str>,
    ) -> Result<Switch, StoreError> {
        let at = now_rfc3339();
        let (by, note) = (by.to_owned(), note.map(str::to_owned));
        self.write(move |tx| {
            tx.exec(
                "INSERT INTO host_switch (id, mode, set_by, set_at, note) VALUES (1, ?1, ?2, ?3, ?4)
                 ON CONFLICT(id) DO UPDATE SET mode = excluded.mode, set_by = excluded.set_by, set_at = excluded.set_at, note = excluded.note",
                params![mode.as_str(), by, at, note],
            )?;
            log_record(tx, &records::switch_set(mode, &by, note.as_deref()), &at)?;
            read(tx)
        })
        .await
    }
}
