//! Stored rows of the saga write-ahead log (`capsaga_core::wal_row`): the
//! decoding the host applies to every `wal_log` row it reads, and the hash
//! chain `capsaga audit verify` checks.
//!
//! Properties:
//! 1. Decoding any stored row (any `step_seq`, any `detail` text) never
//!    panics.
//! 2. A row that decodes re-encodes to a stored row that decodes to the same
//!    value, and encoding is a fixed point; every column but `detail` is
//!    stored back exactly, and `detail` holds the same JSON value.
//! 3. A chain written the host's way (1 to 8 rows, arbitrary content)
//!    verifies, also after a store-and-decode round trip.
//! 4. One tampering of that chain is reported at the exact first bad row:
//!    an edited field of row k (not re-hashed) → k; a forged hash of row
//!    k → k; row k deleted → k; rows k and k+1 swapped → k; row k edited
//!    and re-hashed → k. Tamperings that leave nothing after them (the
//!    newest row deleted, or edited and re-hashed; every row from k on
//!    re-chained) verify, as documented: the anchored head covers those.
#![no_main]

use capsaga_core::wal_row::{GENESIS, LogRow, StoredLogRow, verify};
use libfuzzer_sys::arbitrary::{self, Arbitrary, Unstructured};
use libfuzzer_sys::fuzz_target;
use serde_json::{Value, json};

const RECORDS: &[&str] = &[
    "BEGIN",
    "COMMIT",
    "FAIL",
    "RETRY",
    "COMPENSATED",
    "COMPENSATION_FAILED",
    "STATE",
    "OWNER",
    "APPROVAL_REQUESTED",
    "APPROVAL_APPROVED",
    "APPROVAL_DENIED",
    "APPROVAL_CLAIMED",
];

#[derive(Debug, Arbitrary)]
struct Raw {
    seq: i64,
    saga_id: String,
    step_seq: Option<i64>,
    record: String,
    detail: String,
    at: String,
    prev_hash: String,
    hash: String,
}

#[derive(Debug, Arbitrary)]
struct Content {
    saga: u8,
    step: Option<u16>,
    record: u8,
    detail: Detail,
    at_ms: u32,
}

#[derive(Debug, Arbitrary)]
enum Detail {
    /// JSON text from the input (used when it parses).
    Text(String),
    Num(f64),
    Int(i64),
    Str(String),
    Obj(Vec<(String, i32)>),
}

#[derive(Debug, Arbitrary)]
enum Tamper {
    Edit(u8, Field),
    ForgeHash(u8),
    Delete(u8),
    Swap(u8),
    EditRehash(u8),
    Rechain(u8),
}

#[derive(Debug, Arbitrary)]
enum Field {
    SagaId,
    StepSeq,
    Record,
    Detail,
    At,
    Seq,
}

fn detail(d: &Detail) -> Value {
    match d {
        Detail::Text(t) => serde_json::from_str(t).unwrap_or(Value::Null),
        Detail::Num(f) => serde_json::Number::from_f64(*f).map_or(Value::Null, Value::Number),
        Detail::Int(i) => json!(i),
        Detail::Str(s) => json!(s),
        Detail::Obj(kv) => Value::Object(kv.iter().map(|(k, v)| (k.clone(), json!(v))).collect()),
    }
}

fn row(seq: i64, prev: &str, c: &Content) -> LogRow {
    let mut r = LogRow {
        seq,
        saga_id: format!("saga-{}", c.saga % 4),
        step_seq: c.step.map(u64::from),
        record: RECORDS[c.record as usize % RECORDS.len()].to_string(),
        detail: detail(&c.detail),
        at: format!(
            "2026-01-01T00:00:00.{:03}Z+{}",
            c.at_ms % 1000,
            c.at_ms / 1000
        ),
        prev_hash: prev.to_string(),
        hash: String::new(),
    };
    r.hash = r.content_hash();
    r
}

/// Re-chain rows from index `from`: each row's `prev_hash` is set to the
/// previous row's hash and its own hash recomputed.
fn rechain(rows: &mut [LogRow], from: usize) {
    for i in from..rows.len() {
        let prev = if i == 0 {
            GENESIS.to_string()
        } else {
            rows[i - 1].hash.clone()
        };
        rows[i].prev_hash = prev;
        rows[i].hash = rows[i].content_hash();
    }
}

fn check_stored(raw: &StoredLogRow) {
    let Ok(decoded) = raw.decode() else { return };
    let again = decoded.encode();
    assert_eq!(
        (
            again.seq,
            &again.saga_id,
            again.step_seq,
            &again.record,
            &again.at,
            &again.prev_hash,
            &again.hash
        ),
        (
            raw.seq,
            &raw.saga_id,
            raw.step_seq,
            &raw.record,
            &raw.at,
            &raw.prev_hash,
            &raw.hash
        ),
        "a column changed in a decode/encode round trip"
    );
    let back = again
        .decode()
        .unwrap_or_else(|e| panic!("{raw:?} decodes, its re-encoding {again:?} does not: {e}"));
    assert_eq!(back, decoded, "re-encoding changed the value of {raw:?}");
    assert_eq!(back.encode(), again, "encoding is not a fixed point");
}

fuzz_target!(|data: &[u8]| {
    let mut u = Unstructured::new(data);
    let Ok(raw) = Raw::arbitrary(&mut u) else {
        return;
    };
    check_stored(&StoredLogRow {
        seq: raw.seq,
        saga_id: raw.saga_id,
        step_seq: raw.step_seq,
        record: raw.record,
        detail: raw.detail,
        at: raw.at,
        prev_hash: raw.prev_hash,
        hash: raw.hash,
    });

    let Ok(contents) = Vec::<Content>::arbitrary(&mut u) else {
        return;
    };
    let contents: Vec<Content> = contents.into_iter().take(8).collect();
    if contents.is_empty() {
        return;
    }
    let mut rows: Vec<LogRow> = Vec::new();
    for (i, c) in contents.iter().enumerate() {
        let prev = rows
            .last()
            .map_or(GENESIS.to_string(), |r: &LogRow| r.hash.clone());
        rows.push(row(i as i64 + 1, &prev, c));
    }
    assert_eq!(
        verify(&rows),
        None,
        "a chain written the host's way does not verify"
    );
    let stored: Vec<LogRow> = rows
        .iter()
        .map(|r| {
            check_stored(&r.encode());
            r.encode().decode().expect("a written row decodes")
        })
        .collect();
    assert_eq!(
        verify(&stored),
        None,
        "the chain does not verify after a store round trip"
    );

    let Ok(tamper) = Tamper::arbitrary(&mut u) else {
        return;
    };
    let n = rows.len();
    let pick = |k: u8| k as usize % n;
    let last = |k: usize| k + 1 == n;
    // The expected first bad row (seq), or None when only the head can see it.
    let expected: Option<i64> = match &tamper {
        Tamper::Edit(k, field) => {
            let k = pick(*k);
            let r = &mut rows[k];
            match field {
                Field::SagaId => r.saga_id.push('x'),
                Field::StepSeq => r.step_seq = Some(r.step_seq.map_or(0, |s| s + 1)),
                Field::Record => r.record.push('x'),
                Field::Detail => r.detail = json!({ "was": r.detail.take() }),
                Field::At => r.at.push('Z'),
                Field::Seq => r.seq += n as i64,
            }
            Some(k as i64 + 1)
        }
        Tamper::ForgeHash(k) => {
            let k = pick(*k);
            rows[k].hash = rows[k].hash.chars().rev().collect();
            if rows[k].hash == rows[k].content_hash() {
                return;
            }
            Some(k as i64 + 1)
        }
        Tamper::Delete(k) => {
            let k = pick(*k);
            rows.remove(k);
            (!last(k)).then_some(k as i64 + 1)
        }
        Tamper::Swap(k) => {
            if n < 2 {
                return;
            }
            let k = *k as usize % (n - 1);
            rows.swap(k, k + 1);
            Some(k as i64 + 1)
        }
        Tamper::EditRehash(k) => {
            let k = pick(*k);
            rows[k].record.push('x');
            rows[k].hash = rows[k].content_hash();
            (!last(k)).then_some(k as i64 + 1)
        }
        Tamper::Rechain(k) => {
            let k = pick(*k);
            rows[k].record.push('x');
            rechain(&mut rows, k);
            None
        }
    };
    let got = verify(&rows);
    assert_eq!(
        got.as_ref().map(|b| b.seq),
        expected,
        "{tamper:?} on {n} rows: verify says {got:?}"
    );
});
