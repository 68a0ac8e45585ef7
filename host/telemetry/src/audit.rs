//! `capsaga audit export --otel FILE` (seed 001 §5.2): one saga's audit
//! rows (its write-ahead log records) as an OTLP JSON document
//! (`{"resourceSpans": [...]}`, the OTLP/HTTP JSON encoding of an
//! `ExportTraceServiceRequest`) that a collector's OTLP receiver, or a file
//! receiver, ingests.
//!
//! The document is one trace per saga: a root span `saga` from its first to
//! its last record, and one child span `saga.step {tool}` per step, from
//! its BEGIN to its last record, whose `capsaga.outcome` is its last
//! record but `LABEL` (`COMMIT`, `FAIL`, `COMPENSATED`,
//! `COMPENSATION_FAILED`, ...), with status ERROR when the step failed or
//! its compensation did. Every record is an event of its span (`BEGIN`,
//! `RETRY`, `COMMIT`, `LABEL`, ...; the saga's `STATE`, `OWNER` and approval
//! records on the root) carrying its position and chain hash in the log
//! (`capsaga.wal.seq`, `capsaga.wal.hash`), so the export can be checked
//! against `capsaga audit verify`. A step's `LABEL` record (information
//! flow: whether what the step brought into its saga is trusted) gives its
//! event and its span `capsaga.flow.integrity` (`trusted`, `untrusted`).
//!
//! Ids are derived, not random: the trace id is the first 16 bytes of
//! SHA-256(`capsaga saga ` + saga id), a span id the first 8 of
//! SHA-256(trace id + `step ` + position): exporting twice gives the same
//! document. What is exported is the host's bookkeeping only: record names,
//! times, tool names, error kinds. Arguments, outputs, pre-images, error
//! messages and the saga's task text are not; and every text of the
//! document is scrubbed of secrets ([`crate::secrets::scrub`]).

use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use opentelemetry_proto::tonic::common::v1::{
    AnyValue, InstrumentationScope, KeyValue, any_value::Value as Any,
};
use opentelemetry_proto::tonic::resource::v1::Resource;
use opentelemetry_proto::tonic::trace::v1::{
    ResourceSpans, ScopeSpans, Span, Status, span::Event, span::SpanKind, status::StatusCode,
};
use sha2::{Digest, Sha256};
use std::collections::BTreeMap;

/// One write-ahead log record of the saga, as the runtime read it.
#[derive(Debug, Clone, PartialEq)]
pub struct AuditRecord {
    /// Position in the whole log.
    pub log_seq: i64,
    /// The step, for step records.
    pub step_seq: Option<u64>,
    /// The record (`BEGIN`, `COMMIT`, `FAIL`, `STATE`, ...).
    pub record: String,
    /// When it was written, ns since the Unix epoch.
    pub at_unix_nano: u64,
    /// The tool (BEGIN records).
    pub tool: Option<String>,
    /// The error's kind (FAIL, RETRY, COMPENSATION_FAILED records).
    pub error_kind: Option<String>,
    /// The label's integrity (`trusted`, `untrusted`: LABEL records).
    pub integrity: Option<String>,
    /// The record's hash in the chain.
    pub hash: String,
}

/// The saga being exported.
#[derive(Debug, Clone, PartialEq)]
pub struct AuditSaga {
    /// Its id.
    pub saga_id: String,
    /// Its guardrail state now.
    pub state: String,
    /// `agent`, `plan` or `call`.
    pub origin: String,
    /// Its records, in log order.
    pub records: Vec<AuditRecord>,
}

fn kv(key: &str, value: Any) -> KeyValue {
    KeyValue {
        key: key.to_string(),
        value: Some(AnyValue { value: Some(value) }),
        ..KeyValue::default()
    }
}

/// A string attribute, scrubbed of secrets ([`crate::secrets::scrub`]):
/// every text of the document passes here or through [`text`].
fn s(v: &str) -> Any {
    Any::StringValue(text(v))
}

fn text(v: &str) -> String {
    crate::secrets::scrub(v).into_owned()
}

fn id(bytes: &[u8], len: usize) -> Vec<u8> {
    Sha256::digest(bytes)[..len].to_vec()
}

fn event(r: &AuditRecord) -> Event {
    let mut attributes = vec![
        kv("capsaga.wal.seq", Any::IntValue(r.log_seq)),
        kv("capsaga.wal.hash", s(&r.hash)),
    ];
    if let Some(k) = &r.error_kind {
        attributes.push(kv("error.type", s(k)));
    }
    if let Some(i) = &r.integrity {
        attributes.push(kv(INTEGRITY, s(i)));
    }
    Event {
        time_unix_nano: r.at_unix_nano,
        name: text(&r.record),
        attributes,
        dropped_attributes_count: 0,
    }
}

/// The attribute naming a label's integrity.
const INTEGRITY: &str = "capsaga.flow.integrity";

/// A step's label: an annotation of the step, not its outcome.
const LABEL: &str = "LABEL";

fn failed(record: &str) -> bool {
    matches!(record, "FAIL" | "COMPENSATION_FAILED" | "IN_DOUBT")
}

/// The span of step `seq` of `saga` (its `records`, `first` and `last`
/// the saga's times), and whether the step failed.
fn step_span(
    saga: &AuditSaga,
    trace_id: &[u8],
    root_id: &[u8],
    seq: u64,
    records: &[&AuditRecord],
    (first, last): (u64, u64),
) -> (Span, bool) {
    let tool = records
        .iter()
        .find_map(|r| r.tool.as_deref())
        .unwrap_or("unknown");
    let outcome = records
        .iter()
        .rev()
        .find(|r| r.record != LABEL)
        .map_or("", |r| r.record.as_str());
    let integrity = records.iter().rev().find_map(|r| r.integrity.as_deref());
    let error_kind = records.iter().rev().find_map(|r| r.error_kind.as_deref());
    let is_error = records.iter().any(|r| failed(&r.record));
    let mut attributes = vec![
        kv("capsaga.saga.id", s(&saga.saga_id)),
        kv(
            "capsaga.step.seq",
            Any::IntValue(i64::try_from(seq).unwrap_or(i64::MAX)),
        ),
        kv("gen_ai.tool.name", s(tool)),
        kv("capsaga.outcome", s(outcome)),
    ];
    if let Some(k) = error_kind.filter(|_| is_error) {
        attributes.push(kv("error.type", s(k)));
    }
    if let Some(i) = integrity {
        attributes.push(kv(INTEGRITY, s(i)));
    }
    let span = Span {
        trace_id: trace_id.to_vec(),
        span_id: id(&[trace_id, format!("step {seq}").as_bytes()].concat(), 8),
        parent_span_id: root_id.to_vec(),
        name: text(&format!("saga.step {tool}")),
        kind: SpanKind::Internal as i32,
        start_time_unix_nano: records.first().map_or(first, |r| r.at_unix_nano),
        end_time_unix_nano: records.last().map_or(last, |r| r.at_unix_nano),
        attributes,
        events: records.iter().map(|r| event(r)).collect(),
        status: Some(Status {
            message: String::new(),
            code: if is_error {
                StatusCode::Error
            } else {
                StatusCode::Unset
            } as i32,
        }),
        ..Span::default()
    };
    (span, is_error)
}

/// The saga as an OTLP `ExportTraceServiceRequest`.
pub fn request(saga: &AuditSaga) -> ExportTraceServiceRequest {
    let trace_id = id(format!("capsaga saga {}", saga.saga_id).as_bytes(), 16);
    let root_id = id(&[trace_id.as_slice(), b"saga"].concat(), 8);
    let first = saga.records.first().map_or(0, |r| r.at_unix_nano);
    let last = saga.records.last().map_or(0, |r| r.at_unix_nano);
    let mut steps: BTreeMap<u64, Vec<&AuditRecord>> = BTreeMap::new();
    let mut root_events = Vec::new();
    for r in &saga.records {
        match r.step_seq {
            Some(seq) => steps.entry(seq).or_default().push(r),
            None => root_events.push(event(r)),
        }
    }
    let mut spans = Vec::with_capacity(steps.len() + 1);
    let mut saga_failed = false;
    for (seq, records) in &steps {
        let (span, is_error) = step_span(saga, &trace_id, &root_id, *seq, records, (first, last));
        saga_failed |= is_error;
        spans.push(span);
    }
    spans.insert(
        0,
        Span {
            trace_id: trace_id.clone(),
            span_id: root_id,
            name: "saga".to_string(),
            kind: SpanKind::Internal as i32,
            start_time_unix_nano: first,
            end_time_unix_nano: last,
            attributes: vec![
                kv("capsaga.saga.id", s(&saga.saga_id)),
                kv("capsaga.saga.state", s(&saga.state)),
                kv("capsaga.saga.origin", s(&saga.origin)),
                kv(
                    "capsaga.saga.steps",
                    Any::IntValue(i64::try_from(steps.len()).unwrap_or(i64::MAX)),
                ),
            ],
            events: root_events,
            status: Some(Status {
                message: String::new(),
                code: if saga_failed {
                    StatusCode::Error
                } else {
                    StatusCode::Unset
                } as i32,
            }),
            ..Span::default()
        },
    );
    ExportTraceServiceRequest {
        resource_spans: vec![ResourceSpans {
            resource: Some(Resource {
                attributes: vec![kv("service.name", s("capsaga"))],
                ..Resource::default()
            }),
            scope_spans: vec![ScopeSpans {
                scope: Some(InstrumentationScope {
                    name: "capsaga.audit".to_string(),
                    version: env!("CARGO_PKG_VERSION").to_string(),
                    ..InstrumentationScope::default()
                }),
                spans,
                schema_url: String::new(),
            }],
            schema_url: String::new(),
        }],
    }
}

/// The saga as OTLP JSON text (`{"resourceSpans":[...]}`).
///
/// # Errors
/// Only if serialisation fails (it does not for these types).
pub fn otlp_json(saga: &AuditSaga) -> Result<String, serde_json::Error> {
    serde_json::to_string_pretty(&request(saga))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rec(log_seq: i64, step: Option<u64>, record: &str, t: u64) -> AuditRecord {
        AuditRecord {
            log_seq,
            step_seq: step,
            record: record.to_string(),
            at_unix_nano: t,
            tool: (record == "BEGIN").then(|| "fs_write".to_string()),
            error_kind: (record == "FAIL").then(|| "io".to_string()),
            integrity: (record == "LABEL").then(|| "untrusted".to_string()),
            hash: format!("h{log_seq}"),
        }
    }

    #[test]
    fn one_span_per_step_under_the_saga_with_the_otlp_json_encoding() {
        let saga = AuditSaga {
            saga_id: "s-1".into(),
            state: "RolledBack".into(),
            origin: "agent".into(),
            records: vec![
                rec(1, None, "STATE", 10),
                rec(2, Some(0), "BEGIN", 20),
                rec(3, Some(0), "COMMIT", 30),
                rec(4, Some(1), "BEGIN", 40),
                rec(5, Some(1), "FAIL", 50),
                rec(6, Some(0), "COMPENSATED", 60),
            ],
        };
        let text = otlp_json(&saga).unwrap();
        let v: serde_json::Value = serde_json::from_str(&text).unwrap();
        let spans = &v["resourceSpans"][0]["scopeSpans"][0]["spans"];
        assert_eq!(spans.as_array().unwrap().len(), 3);
        let root = &spans[0];
        // OTLP JSON: ids in hex, 64-bit integers as strings.
        assert_eq!(root["traceId"].as_str().unwrap().len(), 32);
        assert_eq!(root["spanId"].as_str().unwrap().len(), 16);
        assert_eq!(root["startTimeUnixNano"], "10");
        for step in [&spans[1], &spans[2]] {
            assert_eq!(step["parentSpanId"], root["spanId"]);
            assert_eq!(step["traceId"], root["traceId"]);
        }
        assert_eq!(spans[1]["name"], "saga.step fs_write");
        let outcome = |s: &serde_json::Value| {
            s["attributes"]
                .as_array()
                .unwrap()
                .iter()
                .find(|a| a["key"] == "capsaga.outcome")
                .unwrap()["value"]["stringValue"]
                .clone()
        };
        assert_eq!(outcome(&spans[1]), "COMPENSATED");
        assert_eq!(outcome(&spans[2]), "FAIL");
        assert_eq!(spans[2]["status"]["code"], 2);
        // Deterministic.
        assert_eq!(text, otlp_json(&saga).unwrap());
    }

    /// Information flow (issue 47): a step's LABEL record, written after
    /// its outcome, is one of its events and gives the span its integrity;
    /// the step's outcome stays the record before it.
    #[test]
    fn a_steps_label_is_shown_and_is_not_its_outcome() {
        let saga = AuditSaga {
            saga_id: "s-3".into(),
            state: "Done".into(),
            origin: "call".into(),
            records: vec![
                rec(1, Some(0), "BEGIN", 10),
                rec(2, Some(0), "COMMIT", 20),
                rec(3, Some(0), "LABEL", 30),
            ],
        };
        let req = request(&saga);
        let step = &req.resource_spans[0].scope_spans[0].spans[1];
        let attr = |k: &str| {
            step.attributes
                .iter()
                .find(|a| a.key == k)
                .and_then(|a| a.value.clone())
                .and_then(|v| v.value)
        };
        assert_eq!(
            attr("capsaga.outcome"),
            Some(Any::StringValue("COMMIT".into()))
        );
        assert_eq!(
            attr("capsaga.flow.integrity"),
            Some(Any::StringValue("untrusted".into()))
        );
        let events: Vec<&str> = step.events.iter().map(|e| e.name.as_str()).collect();
        assert_eq!(events, ["BEGIN", "COMMIT", "LABEL"]);
        assert!(
            step.events[2]
                .attributes
                .iter()
                .any(|a| a.key == "capsaga.flow.integrity"),
            "the LABEL event names its integrity"
        );
    }

    #[test]
    fn every_text_of_the_document_is_scrubbed() {
        let key = "sk-proj-AuditExport0123456789abcdef";
        crate::secrets::remember("known-audit-secret-9");
        let mut r = rec(2, Some(0), "BEGIN", 20);
        r.tool = Some(format!("tool {key}"));
        let mut f = rec(3, Some(0), "FAIL", 30);
        f.error_kind = Some("kind known-audit-secret-9".into());
        let saga = AuditSaga {
            saga_id: "s-2".into(),
            state: format!("Done {key}"),
            origin: "agent".into(),
            records: vec![r, f],
        };
        let text = otlp_json(&saga).unwrap();
        assert!(!text.contains(key), "{text}");
        assert!(!text.contains("known-audit-secret-9"), "{text}");
        assert!(text.contains("[redacted]"), "{text}");
    }
}
