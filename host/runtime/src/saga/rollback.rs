//! Rollback: compensate the saga's steps in reverse order (DESIGN §5).
//!
//! Each side-effecting step that is COMMIT (or BEGIN: in doubt after a crash,
//! or COMPENSATION_FAILED: an operator retry) is compensated by a fresh
//! instance of exactly the component it ran with (by content hash), given
//! exactly the grants it ran with, the same arguments and the output it
//! returned (the dry-run pre-image for an in-doubt step). Success is logged
//! COMPENSATED, failure COMPENSATION_FAILED, and the rollback goes on with the
//! earlier steps either way: undo as much as can be undone. Read-only steps
//! have nothing to undo and keep their status.

use super::{SagaError, deadline_from_now, needs_compensation};
use crate::host::Host;
use crate::sandbox::{CallRequest, Op};
use crate::wal::{StepRow, StepStatus, Wal};
use capsaga_core::capability::Capability;
use capsaga_core::error::{ErrorKind, ToolError};
use capsaga_core::fsm::State;
use capsaga_core::json::canonical;
use capsaga_core::tool::{CallContext, ToolOutput};
use serde::Serialize;

/// What happened to one step during a rollback.
#[derive(Debug, Clone, Serialize)]
pub struct StepUndo {
    /// The step.
    pub seq: u64,
    /// The tool.
    pub tool: String,
    /// Status before the rollback touched it.
    pub was: StepStatus,
    /// Compensated, or the compensation's error.
    pub result: Result<(), ToolError>,
}

/// What a rollback did.
#[derive(Debug, Clone, Serialize)]
pub struct RollbackReport {
    /// Each compensation attempted, in the order run (reverse step order).
    pub undone: Vec<StepUndo>,
    /// The saga's state afterwards.
    pub final_state: State,
}

impl RollbackReport {
    /// A rollback with nothing to do.
    pub fn empty(state: State) -> Self {
        RollbackReport {
            undone: Vec::new(),
            final_state: state,
        }
    }

    /// True when no compensation failed.
    pub fn all_compensated(&self) -> bool {
        self.undone.iter().all(|u| u.result.is_ok())
    }
}

fn empty_output() -> ToolOutput {
    ToolOutput {
        data: serde_json::Value::Null,
        effects: Vec::new(),
        next_hint: None,
        summary: String::new(),
    }
}

/// Compensate every step of `saga_id` that needs it, newest first. Does not
/// change the saga's guardrail state (the caller does).
///
/// # Errors
/// [`SagaError::Db`] when the WAL cannot be read or written.
pub async fn compensate_all(host: &Host, saga_id: &str) -> Result<RollbackReport, SagaError> {
    let wal = Wal::new(&host.db);
    let mut steps = wal.steps(saga_id)?;
    steps.sort_by_key(|s| std::cmp::Reverse(s.step_seq));
    let mut undone = Vec::new();
    for step in steps {
        if !step.has_side_effects || !needs_compensation(step.status) {
            continue;
        }
        let result = compensate_one(host, &step).await;
        match &result {
            Ok(()) => wal.compensated(saga_id, step.step_seq)?,
            Err(e) => wal.compensation_failed(saga_id, step.step_seq, e)?,
        }
        undone.push(StepUndo {
            seq: step.step_seq,
            tool: step.tool_id.clone(),
            was: step.status,
            result,
        });
    }
    let final_state = wal
        .saga(saga_id)?
        .map(|s| s.state)
        .ok_or_else(|| SagaError::NotFound(saga_id.to_string()))?;
    Ok(RollbackReport {
        undone,
        final_state,
    })
}

async fn compensate_one(host: &Host, step: &StepRow) -> Result<(), ToolError> {
    // An in-doubt step of a tool that supports dry-run, logged without a
    // pre-image: the engine never executes such a step (its dry-run failed,
    // see `Saga::step`), so there is nothing to undo.
    if step.status == StepStatus::Begin
        && step.preimage.is_none()
        && host
            .registry
            .get(&step.tool_id)
            .is_some_and(|t| t.hash == step.tool_hash && t.meta.supports_dry_run)
    {
        return Ok(());
    }
    let prepared = host
        .registry
        .prepared_by_hash(&host.sandbox, &step.tool_hash)
        .map_err(|e| {
            ToolError::with_hint(
                ErrorKind::Unrevertible,
                format!(
                    "cannot load the component step {} ran with: {e}",
                    step.step_seq
                ),
                "The operator must restore the component or undo the step by hand.",
            )
        })?;
    let mut grants = Vec::with_capacity(step.grants.len());
    for g in &step.grants {
        grants.push(Capability::parse(g).map_err(|e| {
            ToolError::with_hint(
                ErrorKind::Unrevertible,
                format!(
                    "the logged grants of step {} do not parse: {e}",
                    step.step_seq
                ),
                "The WAL row was altered; the operator must act.",
            )
        })?);
    }
    let output_json = match step.status {
        StepStatus::Begin => step.preimage.clone(),
        _ => step.output.clone().or_else(|| step.preimage.clone()),
    };
    let output = match output_json {
        Some(v) => serde_json::from_value::<ToolOutput>(v).map_err(|e| {
            ToolError::with_hint(
                ErrorKind::Unrevertible,
                format!(
                    "the logged output of step {} does not decode: {e}",
                    step.step_seq
                ),
                "The WAL row was altered; the operator must act.",
            )
        })?,
        None => empty_output(),
    };
    let limits = host.config.policy.tool(&step.tool_id).limits;
    let ctx = CallContext {
        saga_id: step.saga_id.clone(),
        step_seq: step.step_seq,
        idempotency_key: step.idempotency_key.clone(),
        deadline_ms: deadline_from_now(limits.deadline_ms),
        dry_run: false,
    };
    let args_text = canonical(&step.args);
    let (res, _diag) = host
        .sandbox
        .call(CallRequest {
            tool: &step.tool_id,
            prepared: &prepared,
            grants: &grants,
            limits: &limits,
            ctx: &ctx,
            args_json: &args_text,
            op: &Op::Compensate(output),
        })
        .await;
    res.map(|_| ())
}
