//! `capsaga audit export --otel FILE SAGA` (issue 30, seed 001 §5.2): the
//! saga's write-ahead log records as an OTLP JSON `resourceSpans` document
//! (`capsaga_telemetry::audit`): one span per step with its outcome, under
//! one span for the saga. Only the host's bookkeeping leaves: record
//! names, times, tool names, error kinds, chain hashes, the integrity of
//! each step's label (information flow); never arguments,
//! outputs, pre-images, error messages or the task.

use super::render::{Out, clip};
use super::{Failure, exit};
use capsaga_core::wal_row::LogRow;
use capsaga_door::host::Host;
use capsaga_telemetry::audit::{self, AuditRecord, AuditSaga};
use serde_json::json;
use std::path::Path;

/// A log row's time, ns since the Unix epoch (0 when it does not parse:
/// `audit verify` reports such a row; the export keeps its place).
fn nanos(at: &str) -> u64 {
    at.parse::<jiff::Timestamp>()
        .ok()
        .and_then(|t| u64::try_from(t.as_nanosecond()).ok())
        .unwrap_or(0)
}

fn record(r: &LogRow) -> AuditRecord {
    let text = |v: &serde_json::Value| v.as_str().map(|s| clip(s, 128));
    AuditRecord {
        log_seq: r.seq,
        step_seq: r.step_seq,
        record: clip(&r.record, 64),
        at_unix_nano: nanos(&r.at),
        tool: (r.record == "BEGIN")
            .then(|| text(&r.detail["tool"]))
            .flatten(),
        error_kind: text(&r.detail["error"]["kind"]),
        integrity: (r.record == "LABEL")
            .then(|| text(&r.detail["label"]["integrity"]))
            .flatten(),
        hash: r.hash.clone(),
    }
}

/// Write `saga`'s export to `file`.
pub(crate) async fn export(
    host: &Host,
    out: &Out,
    saga_id: &str,
    file: &Path,
) -> Result<u8, Failure> {
    let Some(saga) = host.store.saga(saga_id).await? else {
        return Err(Failure {
            code: exit::NOT_FOUND,
            message: format!("no saga `{}`", clip(saga_id, 80)),
        });
    };
    let rows = host.store.log(Some(saga_id)).await?;
    let doc = AuditSaga {
        saga_id: saga.saga_id.clone(),
        state: saga.state.to_string(),
        origin: saga.origin.clone(),
        records: rows.iter().map(record).collect(),
    };
    let text = audit::otlp_json(&doc).map_err(|e| Failure {
        code: exit::INTERNAL,
        message: format!("cannot encode the export: {e}"),
    })?;
    std::fs::write(file, text).map_err(|e| Failure {
        code: exit::USAGE,
        message: format!("cannot write {}: {e}", file.display()),
    })?;
    let steps = doc
        .records
        .iter()
        .filter_map(|r| r.step_seq)
        .collect::<std::collections::BTreeSet<_>>()
        .len();
    if out.json {
        out.json(&json!({
            "saga": saga.saga_id,
            "file": file.display().to_string(),
            "records": doc.records.len(),
            "steps": steps,
        }));
    } else {
        outln!(
            "saga {}: {} records, {} steps written to {} (OTLP JSON)",
            saga.saga_id,
            doc.records.len(),
            steps,
            file.display()
        );
    }
    Ok(exit::OK)
}
