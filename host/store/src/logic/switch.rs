//! `host_switch`: the kill switch (`capsaga_core::pause`), one row (on
//! PostgreSQL shared by every host, so a pause set on one host stops all
//! of them). Each change appends a `SWITCH` record (saga id `host:switch`)
//! to the hash-chained log in the same transaction.

use crate::StoreError;
use crate::decode;
use crate::records;
use crate::seam::{Tx, first};
use capsaga_core::pause::{Mode, Switch};

/// The switch as stored (running when never set).
///
/// # Errors
/// The dialect's; [`StoreError::Decode`] for an unknown mode.
pub(crate) async fn get<X: Tx>(tx: &X) -> Result<Switch, StoreError> {
    let row = first(tx, decode::SWITCH_SELECT, &[]).await?;
    decode::switch(row.as_ref())
}

/// Set the switch to `mode` by `by` (with `note`) at `at`; logged. The
/// switch as stored after.
///
/// # Errors
/// The dialect's.
pub(crate) async fn set<X: Tx>(
    tx: &X,
    mode: Mode,
    by: &str,
    note: Option<&str>,
    at: &str,
) -> Result<Switch, StoreError> {
    tx.exec(
        "INSERT INTO host_switch (id, mode, set_by, set_at, note) VALUES (1, $1, $2, $3, $4)
         ON CONFLICT (id) DO UPDATE SET mode = excluded.mode, set_by = excluded.set_by, set_at = excluded.set_at, note = excluded.note",
        &[mode.as_str().into(), by.into(), at.into(), note.into()],
    )
    .await?;
    tx.log(&records::switch_set(mode, by, note), at).await?;
    get(tx).await
}
