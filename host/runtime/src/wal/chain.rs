//! The hash chain over `wal_log`: each row's hash is
//! `SHA-256(prev_hash ‖ canonical JSON of {seq, saga_id, step_seq, record, detail, at})`,
//! so editing, deleting or reordering any row breaks every hash after it.

use super::LogRow;
use capsaga_core::json::canonical;
use serde_json::json;
use sha2::{Digest, Sha256};

/// `prev_hash` of the first row.
pub const GENESIS: &str = "0000000000000000000000000000000000000000000000000000000000000000";

/// The hash of a row with these fields.
pub fn row_hash(
    prev_hash: &str,
    seq: i64,
    saga_id: &str,
    step_seq: Option<u64>,
    record: &str,
    detail: &serde_json::Value,
    at: &str,
) -> String {
    let body = canonical(&json!({
        "seq": seq,
        "saga_id": saga_id,
        "step_seq": step_seq,
        "record": record,
        "detail": detail,
        "at": at,
    }));
    let mut h = Sha256::new();
    h.update(prev_hash.as_bytes());
    h.update(body.as_bytes());
    hex::encode(h.finalize())
}

/// The first row that breaks the chain, and why.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct ChainBreak {
    /// `seq` of the first bad row: the edited or moved row, or the first
    /// missing row of a gap.
    pub seq: i64,
    /// What is wrong.
    pub reason: String,
}

/// Verify rows given in `seq` order. Returns the first break, if any.
pub fn verify(rows: &[LogRow]) -> Option<ChainBreak> {
    let mut prev = GENESIS.to_string();
    for (expected_seq, r) in (1i64..).zip(rows.iter()) {
        if r.seq != expected_seq {
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
            let own_ok = row_hash(
                &r.prev_hash,
                r.seq,
                &r.saga_id,
                r.step_seq,
                &r.record,
                &r.detail,
                &r.at,
            ) == r.hash;
            let points_elsewhere = rows.iter().any(|o| o.hash == r.prev_hash);
            return Some(if own_ok && !points_elsewhere && expected_seq > 1 {
                ChainBreak {
                    seq: expected_seq - 1,
                    reason: format!(
                        "row {} is not the row that row {} was chained to: it was edited and re-hashed",
                        expected_seq - 1,
                        r.seq
                    ),
                }
            } else {
                ChainBreak {
                    seq: r.seq,
                    reason: "prev_hash does not match the previous row: rows were reordered, inserted or deleted".into(),
                }
            });
        }
        let h = row_hash(
            &r.prev_hash,
            r.seq,
            &r.saga_id,
            r.step_seq,
            &r.record,
            &r.detail,
            &r.at,
        );
        if h != r.hash {
            return Some(ChainBreak {
                seq: r.seq,
                reason: "content does not match its hash: the row was edited".into(),
            });
        }
        prev = r.hash.clone();
    }
    None
}
