//! Owned copies of borrowed write requests, for the back ends' writers.

use crate::NewStep;
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
