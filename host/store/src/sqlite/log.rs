//! `wal_log` and `wal_head`: appending a hash-chained record in the caller's
//! transaction, and reading the log back.

use super::super::{LogRow, LogStore, StoreError};
use super::Cached;
use super::{SqliteStore, to_json};
use crate::records::Record;
use async_trait::async_trait;
use capsaga_core::wal_row::{GENESIS, StoredLogRow, row_hash};
use rusqlite::{Connection, OptionalExtension, params};
use serde_json::Value;

/// Append one row to `wal_log`, chained to the anchored head (`wal_head`),
/// and move the head to it, in the caller's transaction.
///
/// The previous row is the *anchored* head, not the last row found in the
/// table: if someone deleted the newest rows, the next row still follows the
/// deleted ones, and the gap stays visible to `audit verify`.
pub(super) fn append(
    tx: &Connection,
    saga_id: &str,
    step_seq: Option<u64>,
    record: &str,
    detail: &Value,
    at: &str,
) -> Result<(), StoreError> {
    let head: Option<(i64, String)> = tx
        .row("SELECT seq, hash FROM wal_head WHERE id = 1", [], |r| {
            Ok((r.get(0)?, r.get(1)?))
        })
        .optional()?;
    let (last_seq, prev) = match head {
        Some(h) => h,
        None => tx
            .row(
                "SELECT seq, hash FROM wal_log ORDER BY seq DESC LIMIT 1",
                [],
                |r| Ok((r.get(0)?, r.get(1)?)),
            )
            .optional()?
            .unwrap_or((0, GENESIS.to_string())),
    };
    let seq = last_seq + 1;
    let hash = row_hash(&prev, seq, saga_id, step_seq, record, detail, at);
    tx.exec(
        "INSERT INTO wal_log (seq, saga_id, step_seq, record, detail, at, prev_hash, hash) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)",
        params![seq, saga_id, step_seq.map(|s| s as i64), record, to_json(detail), at, prev, hash],
    )?;
    tx.exec(
        "INSERT INTO wal_head (id, seq, hash) VALUES (1, ?1, ?2) ON CONFLICT(id) DO UPDATE SET seq = excluded.seq, hash = excluded.hash",
        params![seq, hash],
    )?;
    Ok(())
}

/// Append `r` ([`crate::records`]) in the caller's transaction ([`append`]).
pub(super) fn log_record(tx: &Connection, r: &Record, at: &str) -> Result<(), StoreError> {
    append(tx, &r.saga_id, r.step_seq, r.kind, &r.detail, at)
}

#[async_trait]
impl LogStore for SqliteStore {
    async fn log(&self, saga_id: Option<&str>) -> Result<Vec<LogRow>, StoreError> {
        self.read(|c| {
            let sql = "SELECT seq, saga_id, step_seq, record, detail, at, prev_hash, hash FROM wal_log WHERE (?1 IS NULL OR saga_id = ?1) ORDER BY seq";
            let mut st = c.prepare_cached(sql)?;
            let rows = st.query_map(params![saga_id], |r| {
                Ok(StoredLogRow {
                    seq: r.get(0)?,
                    saga_id: r.get(1)?,
                    step_seq: r.get(2)?,
                    record: r.get(3)?,
                    detail: r.get(4)?,
                    at: r.get(5)?,
                    prev_hash: r.get(6)?,
                    hash: r.get(7)?,
                })
            })?;
            rows.map(|r| r?.decode().map_err(|e| StoreError::Decode(e.to_string())))
                .collect()
        })
    }

    async fn head(&self) -> Result<Option<(i64, String)>, StoreError> {
        self.read(|c| {
            Ok(
                c.row("SELECT seq, hash FROM wal_head WHERE id = 1", [], |r| {
                    Ok((r.get(0)?, r.get(1)?))
                })
                .optional()?,
            )
        })
    }
}
