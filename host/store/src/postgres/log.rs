//! `wal_log` and `wal_head`: the one hash-chained log of every host,
//! appended to in the caller's transaction.
//!
//! The head row is locked (`FOR UPDATE`) by the batch's first statement
//! ([`super::writer`]) and held to commit: appends from all hosts form one
//! chain in commit order, with no gap and no fork, and `audit verify` checks
//! it exactly as it checks SQLite's.

use super::super::{LogRow, LogStore, StoreError};
use super::{Conn, PgStore, get, query, query_opt, to_json};
use async_trait::async_trait;
use capsaga_core::wal_row::{StoredLogRow, row_hash};
use serde_json::Value;

tokio::task_local! {
    /// The head as the writer's batch knows it: read (and locked) by the
    /// batch's first statement, moved by every append of the batch, put
    /// back when a write is rolled back to its savepoint
    /// ([`super::writer`]). Saves reading the head row at every append.
    pub(super) static HEAD: std::cell::RefCell<Option<(i64, String)>>;
}

/// Append one row to `wal_log`, chained to the anchored head, and move the
/// head to it, in the caller's transaction (which holds the head's lock).
/// The row and the head's move are sent together (pipelined: one round
/// trip).
pub(super) async fn append(
    c: &Conn,
    saga_id: &str,
    step_seq: Option<u64>,
    record: &str,
    detail: &Value,
    at: &str,
) -> Result<(), StoreError> {
    let known = HEAD.try_with(|h| h.borrow().clone()).ok().flatten();
    let (last_seq, prev): (i64, String) = match known {
        Some(h) => h,
        None => {
            let head = query_opt(
                c,
                "SELECT seq, hash FROM wal_head WHERE id = 1 FOR UPDATE",
                &[],
            )
            .await?
            .ok_or_else(|| StoreError::Decode("the log's head row is missing".into()))?;
            (get(&head, 0)?, get(&head, 1)?)
        }
    };
    let seq = last_seq + 1;
    let hash = row_hash(&prev, seq, saga_id, step_seq, record, detail, at);
    let step = step_seq.map(super::i64_of);
    let detail = to_json(detail);
    let insert = c
        .prepare_cached("INSERT INTO wal_log (seq, saga_id, step_seq, record, detail, at, prev_hash, hash) VALUES ($1, $2, $3, $4, $5, $6, $7, $8)")
        .await?;
    let head = c
        .prepare_cached("UPDATE wal_head SET seq = $1, hash = $2 WHERE id = 1")
        .await?;
    let row: [&(dyn tokio_postgres::types::ToSql + Sync); 8] =
        [&seq, &saga_id, &step, &record, &detail, &at, &prev, &hash];
    let moved: [&(dyn tokio_postgres::types::ToSql + Sync); 2] = [&seq, &hash];
    let (a, b) = tokio::join!(c.execute(&insert, &row), c.execute(&head, &moved));
    a?;
    b?;
    let _ = HEAD.try_with(|h| *h.borrow_mut() = Some((seq, hash)));
    Ok(())
}

#[async_trait]
impl LogStore for PgStore {
    async fn log(&self, saga_id: Option<&str>) -> Result<Vec<LogRow>, StoreError> {
        let c = self.conn().await?;
        let rows = query(
            &c,
            "SELECT seq, saga_id, step_seq, record, detail, at, prev_hash, hash FROM wal_log WHERE ($1::text IS NULL OR saga_id = $1) ORDER BY seq",
            &[&saga_id],
        )
        .await?;
        rows.iter()
            .map(|r| {
                StoredLogRow {
                    seq: get(r, 0)?,
                    saga_id: get(r, 1)?,
                    step_seq: get(r, 2)?,
                    record: get(r, 3)?,
                    detail: get(r, 4)?,
                    at: get(r, 5)?,
                    prev_hash: get(r, 6)?,
                    hash: get(r, 7)?,
                }
                .decode()
                .map_err(|e| StoreError::Decode(e.to_string()))
            })
            .collect()
    }

    async fn head(&self) -> Result<Option<(i64, String)>, StoreError> {
        let c = self.conn().await?;
        let row = query_opt(&c, "SELECT seq, hash FROM wal_head WHERE id = 1", &[]).await?;
        match row {
            // Seq 0 is the genesis the schema starts from: no row yet.
            Some(r) if get::<i64>(&r, 0)? > 0 => Ok(Some((get(&r, 0)?, get(&r, 1)?))),
            _ => Ok(None),
        }
    }
}
