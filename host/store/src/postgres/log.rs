//! `wal_log` and `wal_chains`: the hash-chained log, one chain per writer
//! (a host's store opening), appended to in the caller's transaction.
//!
//! Every writer appends to a chain of its own (`wal_log.chain`, its head a
//! row of `wal_chains`), so hosts never wait for each other to append: the
//! head row a batch locks (`FOR UPDATE`, by the batch's first statement,
//! [`super::writer`]) is its own. All chains share one order: a row's
//! `seq` is the next value of the `wal_order` sequence, taken *after* the
//! write it records has read or locked what it depends on (a saga's row, an
//! approval's), so a record that depends on another host's committed record
//! has a greater `seq`, and replaying every chain's rows by `seq` gives each
//! saga's, step's and approval's last state (what `audit verify` compares
//! with the tables). The hash of a row covers its `seq`, and a chain's first
//! row is chained to the genesis of its name (`chain_genesis`), so a row moved to
//! another place of the order or to another chain breaks its chain.
//!
//! Anchors: at most every [`ANCHOR_EVERY`], a writer's batch appends an
//! `ANCHOR` record with the heads of the other chains that moved since its
//! last one; `audit verify` checks that each anchored row is still there,
//! in its chain, with its hash (see `audit.rs`).

use super::super::audit::ANCHOR;
use super::super::{LogChain, LogRow, LogStore, StoreError};
use super::{Conn, PgStore, get, query, query_opt, to_json};
use crate::records::Record;
use async_trait::async_trait;
use capsaga_core::wal_row::{StoredLogRow, row_hash, row_hash_parts};
use serde_json::{Value, json};
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

/// How often, at most, a writer anchors the other chains' heads in its own.
pub const ANCHOR_EVERY: Duration = Duration::from_secs(1);

/// A writer's chain head as its batch knows it.
#[derive(Debug, Clone)]
pub(super) struct BatchHead {
    /// The chain's name.
    pub chain: Arc<str>,
    /// Hash of its newest row (its genesis when none).
    pub hash: String,
}

tokio::task_local! {
    /// The head of the writer's chain as the batch knows it: read (and
    /// locked) by the batch's first statement, moved by every append of the
    /// batch, put back when a write is rolled back to its savepoint
    /// ([`super::writer`]). Saves reading the head row at every append.
    pub(super) static HEAD: std::cell::RefCell<Option<BatchHead>>;
}

/// Append one row to the writer's chain, after its head, and move the
/// head to it, in the caller's transaction (which holds the head's lock),
/// in one statement (one round trip): it takes the row's place in the
/// shared order from `wal_order`, hashes the row there from the parts the
/// host computed around that number ([`row_hash_parts`]), inserts it and
/// moves the head. The host checks the hash it gets back against its own.
///
/// # Errors
/// [`StoreError::Backend`] outside a writer's batch (a programming error:
/// every write goes through [`super::writer`]); [`StoreError::Decode`] when
/// the chain's head row is missing or the server's hash is not the host's;
/// the server's error.
pub(super) async fn append(
    c: &Conn,
    saga_id: &str,
    step_seq: Option<u64>,
    record: &str,
    detail: &Value,
    at: &str,
) -> Result<(), StoreError> {
    let head = HEAD
        .try_with(|h| h.borrow().clone())
        .ok()
        .flatten()
        .ok_or_else(|| {
            StoreError::Backend(
                "no head of this writer's chain of the log (an append outside the writer's batch, or its wal_chains row was deleted)".into(),
            )
        })?;
    let (prefix, suffix) = row_hash_parts(&head.hash, saga_id, step_seq, record, detail, at);
    let step = step_seq.map(super::i64_of);
    let detail_text = to_json(detail);
    let chain: &str = &head.chain;
    let row = query_opt(
        c,
        "WITH o AS (SELECT nextval('wal_order') AS n),
         r AS (INSERT INTO wal_log (seq, chain, saga_id, step_seq, record, detail, at, prev_hash, hash)
               SELECT n, $1, $2, $3, $4, $5, $6, $7, encode(sha256($8::bytea || convert_to(n::text, 'UTF8') || $9::bytea), 'hex') FROM o
               RETURNING seq, hash)
         UPDATE wal_chains SET seq = r.seq, hash = r.hash FROM r WHERE wal_chains.chain = $1
         RETURNING r.seq, r.hash",
        &[
            &chain,
            &saga_id,
            &step,
            &record,
            &detail_text,
            &at,
            &head.hash,
            &prefix,
            &suffix,
        ],
    )
    .await?
    .ok_or_else(|| StoreError::Decode(format!("the head row of chain {chain} is missing")))?;
    let (seq, hash): (i64, String) = (get(&row, 0)?, get(&row, 1)?);
    if hash != row_hash(&head.hash, seq, saga_id, step_seq, record, detail, at) {
        return Err(StoreError::Decode(format!(
            "the server hashed log row {seq} otherwise than this host: not appended"
        )));
    }
    let _ = HEAD.try_with(|h| {
        *h.borrow_mut() = Some(BatchHead {
            chain: head.chain.clone(),
            hash,
        })
    });
    Ok(())
}

/// Append `r` ([`crate::records`]) in the caller's transaction ([`append`]).
pub(super) async fn log_record(c: &Conn, r: &Record, at: &str) -> Result<(), StoreError> {
    append(c, &r.saga_id, r.step_seq, r.kind, &r.detail, at).await
}

/// What a writer anchored last: each other chain's head seq.
pub(super) type Anchored = BTreeMap<String, i64>;

/// Append an `ANCHOR` record of the other chains' heads that moved since
/// `anchored` (all of them the first time), in the batch's transaction; no
/// record when none moved. `anchored` is updated by the caller once the
/// batch committed (it gets the new map back).
///
/// # Errors
/// The server's error (the caller rolls the anchor back alone).
pub(super) async fn anchor(c: &Conn, anchored: &Anchored) -> Result<Option<Anchored>, StoreError> {
    let Some(me) = HEAD
        .try_with(|h| h.borrow().as_ref().map(|h| h.chain.clone()))
        .ok()
        .flatten()
    else {
        return Ok(None);
    };
    let mine: &str = &me;
    let rows = query(
        c,
        "SELECT chain, seq, hash FROM wal_chains WHERE chain <> $1 AND seq > 0 ORDER BY chain",
        &[&mine],
    )
    .await?;
    let mut next = anchored.clone();
    let mut heads = Vec::new();
    for r in &rows {
        let (chain, seq, hash): (String, i64, String) = (get(r, 0)?, get(r, 1)?, get(r, 2)?);
        if anchored.get(&chain) == Some(&seq) {
            continue;
        }
        heads.push(json!({"chain": chain, "seq": seq, "hash": hash}));
        next.insert(chain, seq);
    }
    if heads.is_empty() {
        return Ok(None);
    }
    let at = crate::clock::now_rfc3339();
    append(
        c,
        &format!("chain:{mine}"),
        None,
        ANCHOR,
        &json!({ "heads": heads }),
        &at,
    )
    .await?;
    Ok(Some(next))
}

fn decode_row(r: &tokio_postgres::Row, from: usize) -> Result<LogRow, StoreError> {
    StoredLogRow {
        seq: get(r, from)?,
        saga_id: get(r, from + 1)?,
        step_seq: get(r, from + 2)?,
        record: get(r, from + 3)?,
        detail: get(r, from + 4)?,
        at: get(r, from + 5)?,
        prev_hash: get(r, from + 6)?,
        hash: get(r, from + 7)?,
    }
    .decode()
    .map_err(|e| StoreError::Decode(e.to_string()))
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
        rows.iter().map(|r| decode_row(r, 0)).collect()
    }

    async fn head(&self) -> Result<Option<(i64, String)>, StoreError> {
        let c = self.conn().await?;
        let row = query_opt(
            &c,
            "SELECT seq, hash FROM wal_chains WHERE seq > 0 ORDER BY seq DESC LIMIT 1",
            &[],
        )
        .await?;
        row.map(|r| Ok((get(&r, 0)?, get(&r, 1)?))).transpose()
    }

    /// Every chain with its rows and head, read in one snapshot (so
    /// writers appending meanwhile never make a head look ahead of its
    /// rows).
    async fn chains(&self) -> Result<Vec<LogChain>, StoreError> {
        let mut c = self.conn().await?;
        let tx = c
            .build_transaction()
            .isolation_level(tokio_postgres::IsolationLevel::RepeatableRead)
            .read_only(true)
            .start()
            .await?;
        let rows = tx
            .query(
                "SELECT chain, seq, saga_id, step_seq, record, detail, at, prev_hash, hash FROM wal_log ORDER BY seq",
                &[],
            )
            .await?;
        let heads = tx
            .query("SELECT chain, seq, hash FROM wal_chains", &[])
            .await?;
        tx.commit().await?;
        let mut chains: BTreeMap<String, LogChain> = BTreeMap::new();
        let empty = |name: &str| LogChain {
            name: name.to_string(),
            rows: Vec::new(),
            head: None,
        };
        for r in &rows {
            let name: String = get(r, 0)?;
            let row = decode_row(r, 1)?;
            chains
                .entry(name.clone())
                .or_insert_with(|| empty(&name))
                .rows
                .push(row);
        }
        for h in &heads {
            let (name, seq, hash): (String, i64, String) = (get(h, 0)?, get(h, 1)?, get(h, 2)?);
            let chain = chains.entry(name.clone()).or_insert_with(|| empty(&name));
            // Seq 0 is a chain opened with no row yet.
            if seq > 0 {
                chain.head = Some((seq, hash));
            }
        }
        // A chain opened whose writes all appended nothing is no chain.
        Ok(chains
            .into_values()
            .filter(|c| !c.rows.is_empty() || c.head.is_some())
            .collect())
    }
}
