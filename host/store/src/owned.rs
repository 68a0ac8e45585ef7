//! Owned copies of borrowed write requests, for the back ends' writers.

use crate::{NewStep, TraceRecord};
use capsaga_core::tool::ToolOutput;

/// A [`NewStep`] a writer owns (moved to the SQLite writer thread or the
/// PostgreSQL batching writer task).
pub(crate) struct OwnedStep {
    saga_id: String,
    step_seq: u64,
    tool_id: String,
    tool_hash: String,
    grants: Vec<String>,
    has_side_effects: bool,
    idempotency_key: String,
    args: serde_json::Value,
    preimage: Option<ToolOutput>,
    approval: Option<String>,
    fence: u64,
}

impl OwnedStep {
    pub(crate) fn of(s: &NewStep<'_>) -> OwnedStep {
        OwnedStep {
            saga_id: s.saga_id.to_owned(),
            step_seq: s.step_seq,
            tool_id: s.tool_id.to_owned(),
            tool_hash: s.tool_hash.to_owned(),
            grants: s.grants.to_vec(),
            has_side_effects: s.has_side_effects,
            idempotency_key: s.idempotency_key.to_owned(),
            args: s.args.clone(),
            preimage: s.preimage.cloned(),
            approval: s.approval.map(str::to_owned),
            fence: s.fence,
        }
    }

    pub(crate) fn view(&self) -> NewStep<'_> {
        NewStep {
            saga_id: &self.saga_id,
            step_seq: self.step_seq,
            tool_id: &self.tool_id,
            tool_hash: &self.tool_hash,
            grants: &self.grants,
            has_side_effects: self.has_side_effects,
            idempotency_key: &self.idempotency_key,
            args: &self.args,
            preimage: self.preimage.as_ref(),
            approval: self.approval.as_deref(),
            fence: self.fence,
        }
    }
}

/// A [`TraceRecord`] a writer owns.
pub(crate) struct OwnedTrace {
    trace_id: String,
    saga_id: Option<String>,
    task: String,
    outcome: String,
    started_at: String,
    finished_at: Option<String>,
    wall_ms: u64,
    json: String,
}

impl OwnedTrace {
    pub(crate) fn of(t: &TraceRecord<'_>) -> OwnedTrace {
        OwnedTrace {
            trace_id: t.trace_id.to_owned(),
            saga_id: t.saga_id.map(str::to_owned),
            task: t.task.to_owned(),
            outcome: t.outcome.to_owned(),
            started_at: t.started_at.to_owned(),
            finished_at: t.finished_at.map(str::to_owned),
            wall_ms: t.wall_ms,
            json: t.json.to_owned(),
        }
    }

    pub(crate) fn view(&self) -> TraceRecord<'_> {
        TraceRecord {
            trace_id: &self.trace_id,
            saga_id: self.saga_id.as_deref(),
            task: &self.task,
            outcome: &self.outcome,
            started_at: &self.started_at,
            finished_at: self.finished_at.as_deref(),
            wall_ms: self.wall_ms,
            json: &self.json,
        }
    }
}
