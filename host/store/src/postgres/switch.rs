//! `host_switch`: the kill switch (`capsaga_core::pause`), one row shared by
//! every host, so a pause set on one host stops all of them (each reads it
//! at its door and its switch watcher). Each change appends a `SWITCH`
//! record (saga id `host:switch`) to the one hash-chained log in the same
//! transaction.

use super::super::StoreError;
use super::super::access::SwitchStore;
use super::log::log_record;
use super::{Conn, PgStore, execute, query_opt};
use crate::clock::now_rfc3339;
use crate::decode;
use crate::records;
use async_trait::async_trait;
use capsaga_core::pause::{Mode, Switch};

async fn read(c: &Conn) -> Result<Switch, StoreError> {
    let row = query_opt(c, decode::SWITCH_SELECT, &[]).await?;
    decode::switch(row.as_ref())
}

#[async_trait]
impl SwitchStore for PgStore {
    async fn switch(&self) -> Result<Switch, StoreError> {
        let c = self.conn().await?;
        read(&c).await
    }

    async fn set_switch(
        &self,
        mode: Mode,
        by: &str,
        note: Option<&str>,
    ) -> Result<Switch, StoreError> {
        let at = now_rfc3339();
        let (by, note) = (by.to_owned(), note.map(str::to_owned));
        self.write(move |c| {
            Box::pin(async move {
                execute(
                    c,
                    "INSERT INTO host_switch (id, mode, set_by, set_at, note) VALUES (1, $1, $2, $3, $4)
                     ON CONFLICT (id) DO UPDATE SET mode = excluded.mode, set_by = excluded.set_by, set_at = excluded.set_at, note = excluded.note",
                    &[&mode.as_str(), &by, &at, &note],
                )
                .await?;
                log_record(c, &records::switch_set(mode, &by, note.as_deref()), &at).await?;
                read(c).await
            })
        })
        .await
    }
}
