//! Rows of the saga write-ahead log (`wal_log`) as stored and as read, and
//! the hash chain over them (DESIGN §5).
//!
//! Each row's hash is
//! `SHA-256(prev_hash ‖ canonical JSON of {seq, saga_id, step_seq, record, detail, at})`,
//! so editing, deleting or reordering any row breaks every hash after it.
//! The host (`capsaga-store`) reads and writes the SQLite table; the
//! decoding of a stored row and the chain check are here, free of I/O, so
//! that they can be fuzzed alone (`fuzz/fuzz_targets/wal_row.rs`).

use crate::json::{canonical, write_canonical, write_scalar};
use serde::Serialize;
use serde_json::json;
use sha2::{Digest, Sha256};

/// `prev_hash` of the first row: 64 zeros.
pub const GENESIS: &str = "0000000000000000000000000000000000000000000000000000000000000000";

/// One `wal_log` row as SQLite stores it (the columns, in order).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct StoredLogRow {
    /// `seq`: position in the whole log, from 1.
    pub seq: i64,
    /// `saga_id`.
    pub saga_id: String,
    /// `step_seq` (NULL for saga records).
    pub step_seq: Option<i64>,
    /// `record`: BEGIN, COMMIT, STATE, ...
    pub record: String,
    /// `detail`: JSON text.
    pub detail: String,
    /// `at`: RFC 3339.
    pub at: String,
    /// `prev_hash`: lowercase hex SHA-256.
    pub prev_hash: String,
    /// `hash`: lowercase hex SHA-256.
    pub hash: String,
}

/// One row of `wal_log`, decoded.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct LogRow {
    /// Position in the whole log, from 1.
    pub seq: i64,
    /// The saga.
    pub saga_id: String,
    /// The step, for step records.
    pub step_seq: Option<u64>,
    /// BEGIN, COMMIT, FAIL, RETRY, COMPENSATED, COMPENSATION_FAILED, STATE,
    /// OWNER, APPROVAL_REQUESTED, APPROVAL_APPROVED, APPROVAL_DENIED,
    /// APPROVAL_CLAIMED or LABEL (the label of what a step brought into its
    /// saga: information flow).
    pub record: String,
    /// Record details (JSON).
    pub detail: serde_json::Value,
    /// RFC 3339.
    pub at: String,
    /// Hash of the previous row ([`GENESIS`] for the first).
    pub prev_hash: String,
    /// Hash of this row.
    pub hash: String,
}

/// Why a stored row does not decode. Nothing is guessed: a row that does not
/// decode is reported, never read as another value.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RowError {
    /// `step_seq` is negative (the host only writes step positions ≥ 0).
    #[error("wal_log row {seq}: negative step_seq {value}")]
    NegativeStepSeq {
        /// The row.
        seq: i64,
        /// The stored value.
        value: i64,
    },
    /// `detail` is not JSON.
    #[error("wal_log row {seq}: detail is not JSON: {reason}")]
    Detail {
        /// The row.
        seq: i64,
        /// The parser's message.
        reason: String,
    },
}

impl StoredLogRow {
    /// Decode the stored columns.
    ///
    /// # Errors
    /// [`RowError`] when `step_seq` is negative or `detail` is not JSON.
    pub fn decode(&self) -> Result<LogRow, RowError> {
        let step_seq = self
            .step_seq
            .map(|v| {
                u64::try_from(v).map_err(|_| RowError::NegativeStepSeq {
                    seq: self.seq,
                    value: v,
                })
            })
            .transpose()?;
        let detail = serde_json::from_str(&self.detail).map_err(|e| RowError::Detail {
            seq: self.seq,
            reason: e.to_string(),
        })?;
        Ok(LogRow {
            seq: self.seq,
            saga_id: self.saga_id.clone(),
            step_seq,
            record: self.record.clone(),
            detail,
            at: self.at.clone(),
            prev_hash: self.prev_hash.clone(),
            hash: self.hash.clone(),
        })
    }
}

impl LogRow {
    /// The stored form of this row (`detail` as compact JSON text).
    ///
    /// `step_seq` values above `i64::MAX` are stored as `i64::MAX`: the host
    /// numbers steps from 0 in a saga, far below it.
    pub fn encode(&self) -> StoredLogRow {
        StoredLogRow {
            seq: self.seq,
            saga_id: self.saga_id.clone(),
            step_seq: self.step_seq.map(|s| i64::try_from(s).unwrap_or(i64::MAX)),
            record: self.record.clone(),
            detail: self.detail.to_string(),
            at: self.at.clone(),
            prev_hash: self.prev_hash.clone(),
            hash: self.hash.clone(),
        }
    }

    /// The hash this row's content chains to, given its `prev_hash`.
    pub fn content_hash(&self) -> String {
        row_hash(
            &self.prev_hash,
            self.seq,
            &self.saga_id,
            self.step_seq,
            &self.record,
            &self.detail,
            &self.at,
        )
    }
}

/// The hash of a row with these fields (lowercase hex SHA-256).
pub fn row_hash(
    prev_hash: &str,
    seq: i64,
    saga_id: &str,
    step_seq: Option<u64>,
    record: &str,
    detail: &serde_json::Value,
    at: &str,
) -> String {
    // The canonical JSON of {seq, saga_id, step_seq, record, detail, at},
    // written in its keys' order without building (and copying the detail
    // into) that object first; `canonical_row_body` in the tests is the
    // reference it must equal byte for byte.
    let mut body = Vec::with_capacity(256);
    body.extend_from_slice(b"{\"at\":");
    write_scalar(at, &mut body);
    body.extend_from_slice(b",\"detail\":");
    write_canonical(detail, &mut body);
    body.extend_from_slice(b",\"record\":");
    write_scalar(record, &mut body);
    body.extend_from_slice(b",\"saga_id\":");
    write_scalar(saga_id, &mut body);
    body.extend_from_slice(b",\"seq\":");
    write_scalar(&seq, &mut body);
    body.extend_from_slice(b",\"step_seq\":");
    write_scalar(&step_seq, &mut body);
    body.push(b'}');
    let mut h = Sha256::new();
    h.update(prev_hash.as_bytes());
    h.update(&body);
    hex::encode(h.finalize())
}

/// The bytes hashed for a row around its `seq`: [`row_hash`] is the
/// SHA-256 of `prefix ‖ seq in decimal ‖ suffix`. For a writer that learns
/// `seq` only where the row is stored (the PostgreSQL store takes it from a
/// sequence in the statement that inserts the row, and hashes there).
///
/// The canonical body's keys are sorted (`at`, `detail`, `record`,
/// `saga_id`, `seq`, `step_seq`), so `seq` is the only value between the
/// two parts and nothing after it is a string.
pub fn row_hash_parts(
    prev_hash: &str,
    saga_id: &str,
    step_seq: Option<u64>,
    record: &str,
    detail: &serde_json::Value,
    at: &str,
) -> (Vec<u8>, Vec<u8>) {
    let body = canonical(&json!({
        "saga_id": saga_id,
        "record": record,
        "detail": detail,
        "at": at,
    }));
    // body is `{...,"saga_id":"..."}`: drop its closing brace.
    let head = &body[..body.len().saturating_sub(1)];
    let mut prefix = Vec::with_capacity(prev_hash.len() + head.len() + 8);
    prefix.extend_from_slice(prev_hash.as_bytes());
    prefix.extend_from_slice(head.as_bytes());
    prefix.extend_from_slice(b",\"seq\":");
    let step = canonical(&json!(step_seq));
    let suffix = format!(",\"step_seq\":{step}}}").into_bytes();
    (prefix, suffix)
}

/// The first row that breaks the chain, and why.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ChainBreak {
    /// `seq` of the first bad row: the edited or moved row, or the first
    /// missing row of a gap.
    pub seq: i64,
    /// What is wrong.
    pub reason: String,
}

/// The name of the one chain of a log kept by one writer at a time: the
/// SQLite store's log, and the PostgreSQL store's before its per-host
/// chains (migration 3). Its rows are numbered 1, 2, 3... without a gap.
pub const SHARED_CHAIN: &str = "";

/// `prev_hash` of the first row of chain `chain`: [`GENESIS`] for the
/// [`SHARED_CHAIN`], else the hex SHA-256 of `capsaga-chain\0` followed by
/// the chain's name. So a row is bound to the chain it was written to:
/// moved to another chain (or a chain renamed), its link breaks.
pub fn chain_genesis(chain: &str) -> String {
    if chain == SHARED_CHAIN {
        return GENESIS.to_string();
    }
    let mut h = Sha256::new();
    h.update(b"capsaga-chain\0");
    h.update(chain.as_bytes());
    hex::encode(h.finalize())
}

/// Verify rows given in `seq` order. Returns the first break, if any.
///
/// The chain alone cannot see the newest rows deleted, or the newest row
/// edited and re-hashed (nothing follows them): the anchored head
/// (`wal_head`, checked by `capsaga audit verify`) covers those.
pub fn verify(rows: &[LogRow]) -> Option<ChainBreak> {
    verify_chain(rows, SHARED_CHAIN)
}

/// Verify the rows of chain `chain`, given in `seq` order; the first
/// break, if any.
///
/// The [`SHARED_CHAIN`] numbers its rows 1, 2, 3...: a missing number is a
/// deleted row. Any other chain is one of several sharing one order
/// (`seq` from one sequence over all chains, so a chain's own numbers have
/// gaps where other chains' rows, or rolled-back appends, took numbers):
/// its rows must have strictly increasing `seq`, the first chained to
/// [`chain_genesis`], each next one to the one before; a deleted row breaks
/// the link of the row after it.
pub fn verify_chain(rows: &[LogRow], chain: &str) -> Option<ChainBreak> {
    let contiguous = chain == SHARED_CHAIN;
    let mut prev = chain_genesis(chain);
    let mut last_seq = 0i64;
    for (expected_seq, r) in (1i64..).zip(rows.iter()) {
        if !contiguous {
            if r.seq <= last_seq {
                return Some(ChainBreak {
                    seq: r.seq,
                    reason: format!(
                        "row {} appears after row {last_seq} of its chain: rows were reordered",
                        r.seq
                    ),
                });
            }
            last_seq = r.seq;
        } else if r.seq != expected_seq {
            return Some(ChainBreak {
                seq: expected_seq,
                reason: if r.seq > expected_seq {
                    format!(
                        "row {expected_seq} is missing: the log goes from row {} to row {}; rows were deleted",
                        expected_seq - 1,
                        r.seq
                    )
                } else {
                    format!(
                        "row {} appears after row {}: rows were reordered",
                        r.seq,
                        expected_seq - 1
                    )
                },
            });
        }
        if r.prev_hash != prev {
            // Row r follows a row whose hash is not the one it recorded. If
            // r points at another row of the log, r was moved (reordered);
            // if it points at no row, the row before it was changed and
            // re-hashed (its own hash then verifies), so that one is the
            // first bad row.
            let own_ok = r.content_hash() == r.hash;
            let points_elsewhere = rows.iter().any(|o| o.hash == r.prev_hash);
            let before = usize::try_from(expected_seq - 2)
                .ok()
                .and_then(|i| rows.get(i));
            return Some(
                if let (true, false, Some(b)) = (own_ok, points_elsewhere, before) {
                    ChainBreak {
                        seq: b.seq,
                        reason: format!(
                            "row {} is not the row that row {} was chained to: it was edited and re-hashed, or rows between them were deleted",
                            b.seq, r.seq
                        ),
                    }
                } else {
                    ChainBreak {
                    seq: r.seq,
                    reason: "prev_hash does not match the previous row: rows were reordered, inserted or deleted".into(),
                }
                },
            );
        }
        if r.content_hash() != r.hash {
            return Some(ChainBreak {
                seq: r.seq,
                reason: "content does not match its hash: the row was edited".into(),
            });
        }
        prev = r.hash.clone();
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn chain(n: i64) -> Vec<LogRow> {
        let mut prev = GENESIS.to_string();
        (1..=n)
            .map(|seq| {
                let mut r = LogRow {
                    seq,
                    saga_id: "s1".into(),
                    step_seq: Some(seq as u64 - 1),
                    record: "COMMIT".into(),
                    detail: json!({"n": seq, "cost_usd": 0.1 * seq as f64}),
                    at: "2026-01-01T00:00:00.000Z".into(),
                    prev_hash: prev.clone(),
                    hash: String::new(),
                };
                r.hash = r.content_hash();
                prev = r.hash.clone();
                r
            })
            .collect()
    }

    #[test]
    fn the_hash_parts_around_seq_give_the_row_hash() {
        let details = [
            json!({"seq": 5, "x": "\"seq\":"}),
            json!(null),
            json!({"a": [1, 2.5, "é\n"], "z": {"step_seq": 1}}),
        ];
        for detail in &details {
            for step in [None, Some(0), Some(u64::MAX)] {
                for seq in [1i64, 42, 9_007_199_254_740_993, i64::MAX] {
                    let (p, s) = row_hash_parts(GENESIS, "s\"1", step, "COMMIT", detail, "t");
                    let mut h = Sha256::new();
                    h.update(&p);
                    h.update(seq.to_string().as_bytes());
                    h.update(&s);
                    assert_eq!(
                        hex::encode(h.finalize()),
                        row_hash(GENESIS, seq, "s\"1", step, "COMMIT", detail, "t")
                    );
                }
            }
        }
    }

    /// The reference of [`row_hash`]: the SHA-256 of the previous hash and
    /// the canonical JSON of the row's object, built as a `Value`.
    fn reference_hash(
        prev: &str,
        seq: i64,
        saga_id: &str,
        step_seq: Option<u64>,
        record: &str,
        detail: &serde_json::Value,
        at: &str,
    ) -> String {
        let body = canonical(&json!({
            "seq": seq, "saga_id": saga_id, "step_seq": step_seq,
            "record": record, "detail": detail, "at": at,
        }));
        let mut h = Sha256::new();
        h.update(prev.as_bytes());
        h.update(body.as_bytes());
        hex::encode(h.finalize())
    }

    #[test]
    fn the_row_hash_is_the_canonical_objects() {
        let details = [
            json!(null),
            json!({"z": 1, "a": {"é": "\u{1}\n\"", "": [1.5, -0.0, 1e300, true]}}),
            json!({"args": {"path": "/srv/ws/a b.txt"}, "grants": ["fs:write:/srv/ws/**"], "preimage": null}),
            json!([{"b": 2, "a": 1}, "😀", u64::MAX, i64::MIN]),
            json!("tail \u{2028} \\ /"),
        ];
        for detail in &details {
            for step in [None, Some(0), Some(u64::MAX)] {
                for (seq, saga, record, at) in [
                    (1i64, "s1", "BEGIN", "2026-01-01T00:00:00.000Z"),
                    (i64::MAX, "s\"1\\\u{0}é", "COMMIT", "t"),
                    (-5, "", "", ""),
                ] {
                    assert_eq!(
                        row_hash(GENESIS, seq, saga, step, record, detail, at),
                        reference_hash(GENESIS, seq, saga, step, record, detail, at),
                        "{detail} {step:?} {seq} {saga:?}"
                    );
                }
            }
        }
    }

    #[test]
    fn stored_rows_round_trip_and_verify() {
        let rows = chain(4);
        let back: Vec<LogRow> = rows.iter().map(|r| r.encode().decode().unwrap()).collect();
        assert_eq!(back, rows);
        assert_eq!(verify(&back), None);
    }

    /// The host used to read a negative stored `step_seq` as step 0, so a
    /// row written for step 0 and edited to -1 still verified, and the
    /// decoded row did not re-encode to what was stored (the `wal_row` fuzz
    /// target's round-trip property fails on that decoder within a minute).
    #[test]
    fn negative_step_seq_is_refused_not_clamped() {
        let rows = chain(2);
        let mut stored = rows[0].encode();
        assert_eq!(stored.step_seq, Some(0));
        stored.step_seq = Some(-1);
        assert_eq!(
            stored.decode(),
            Err(RowError::NegativeStepSeq { seq: 1, value: -1 })
        );
    }

    #[test]
    fn detail_that_is_not_json_is_refused() {
        let mut stored = chain(1)[0].encode();
        stored.detail = "{\"n\": 1".into();
        assert!(matches!(
            stored.decode(),
            Err(RowError::Detail { seq: 1, .. })
        ));
    }

    #[test]
    fn edited_row_is_the_first_bad_row() {
        for k in 0..4 {
            let mut rows = chain(4);
            rows[k].record.push('X');
            assert_eq!(verify(&rows).map(|b| b.seq), Some(k as i64 + 1));
        }
    }

    #[test]
    fn edited_and_rehashed_row_is_named_by_its_successor() {
        let mut rows = chain(4);
        rows[1].detail = json!({"n": 99});
        rows[1].hash = rows[1].content_hash();
        assert_eq!(verify(&rows).map(|b| b.seq), Some(2));
    }

    /// Rows of a per-host chain `name` at these positions of the shared
    /// order.
    fn host_chain(name: &str, seqs: &[i64]) -> Vec<LogRow> {
        let mut prev = chain_genesis(name);
        seqs.iter()
            .map(|&seq| {
                let mut r = LogRow {
                    seq,
                    saga_id: "s1".into(),
                    step_seq: Some(0),
                    record: "COMMIT".into(),
                    detail: json!({"n": seq}),
                    at: "2026-01-01T00:00:00.000Z".into(),
                    prev_hash: prev.clone(),
                    hash: String::new(),
                };
                r.hash = r.content_hash();
                prev = r.hash.clone();
                r
            })
            .collect()
    }

    #[test]
    fn a_host_chain_with_gaps_in_the_shared_order_verifies() {
        assert_eq!(
            verify_chain(&host_chain("h-a", &[2, 5, 6, 11]), "h-a"),
            None
        );
        // The shared chain's numbering rule does not apply to it...
        assert!(verify(&host_chain("h-a", &[2, 5])).is_some());
        // ...and its genesis is its own.
        assert_ne!(chain_genesis("h-a"), chain_genesis("h-b"));
        assert_eq!(chain_genesis(SHARED_CHAIN), GENESIS);
    }

    #[test]
    fn a_host_chain_finds_deleted_moved_and_reordered_rows() {
        // A row deleted in the middle: the row after it names its
        // predecessor as the first bad row.
        let mut rows = host_chain("h-a", &[2, 5, 6, 11]);
        rows.remove(2);
        assert_eq!(verify_chain(&rows, "h-a").map(|b| b.seq), Some(5));
        // The first row deleted: the second is not chained to the genesis.
        let mut rows = host_chain("h-a", &[2, 5, 6]);
        rows.remove(0);
        assert_eq!(verify_chain(&rows, "h-a").map(|b| b.seq), Some(5));
        // A whole chain presented as another's.
        let rows = host_chain("h-a", &[2, 5]);
        assert_eq!(verify_chain(&rows, "h-b").map(|b| b.seq), Some(2));
        // Two rows' places in the shared order swapped: their hashes
        // cover their place.
        let mut rows = host_chain("h-a", &[2, 5, 6]);
        rows[1].seq = 6;
        rows[2].seq = 5;
        rows.swap(1, 2);
        assert!(verify_chain(&rows, "h-a").is_some());
        // A row given a later place (the order rewritten without a swap).
        let mut rows = host_chain("h-a", &[2, 5, 6]);
        rows[1].seq = 4;
        assert_eq!(verify_chain(&rows, "h-a").map(|b| b.seq), Some(4));
    }

    #[test]
    fn deleted_and_swapped_rows_are_found() {
        let mut rows = chain(4);
        rows.remove(1);
        assert_eq!(verify(&rows).map(|b| b.seq), Some(2));
        let mut rows = chain(4);
        rows.swap(2, 3);
        assert_eq!(verify(&rows).map(|b| b.seq), Some(3));
    }
}
