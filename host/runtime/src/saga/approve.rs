//! Steps that need a human (seed 003; DESIGN §7): finding an approval a step
//! may claim, or parking the saga with a new pending one.
//!
//! For a call that the policy says needs approval, in order:
//! 1. the approval this very step requested earlier (same saga, same step
//!    position): it must be bound to the same tool, component hash and
//!    argument hash; approved → claim it, pending → still waiting, denied or
//!    already claimed → refused;
//! 2. else the oldest approved, unclaimed approval with exactly this binding,
//!    from any saga (an operator approved with `capsaga approve` what an
//!    earlier, ended turn asked for);
//! 3. else the saga is parked: the tool's dry-run runs in a read-only
//!    sandbox for the summary the human will read, and a pending approval is
//!    written in the same transaction as the move to AwaitingApproval.
//!
//! The claim itself happens in the transaction of the step's BEGIN row
//! (`Wal::begin_step`), so an approval is consumed exactly when its step
//! starts, at most once, whatever crashes in between.

use super::{Saga, SagaError};
use crate::registry::LoadedTool;
use crate::wal::Wal;
use crate::wal::approvals::{ApprovalRow, NewApproval};
use capsaga_core::approval::{ApprovalStatus, Binding};
use capsaga_core::capability::Capability;
use capsaga_core::error::{ErrorKind, ToolError};
use capsaga_core::fsm::{Event, State};
use capsaga_core::json::canonical;
use capsaga_core::tool::CallContext;
use serde_json::Value;
use std::sync::Arc;

/// What [`approval_for`] found.
#[derive(Debug)]
pub enum Found {
    /// Claim this approved approval with the BEGIN row.
    Use(String),
    /// The saga is parked (now or already) on this pending approval.
    Wait(Box<ApprovalRow>),
    /// The call cannot run: denied, claimed, or bound to another call.
    Refused(ToolError),
}

fn refusal(message: String) -> Found {
    Found::Refused(ToolError::with_hint(
        ErrorKind::PermissionDenied,
        message,
        "This call needs a human's approval; explain what you wanted to do in your final answer.",
    ))
}

/// Find an approval step `seq` (call `t` with `args`) may claim, or park the
/// saga. See the module documentation for the order.
///
/// # Errors
/// [`SagaError`] when the database fails.
pub async fn approval_for(
    saga: &mut Saga<'_>,
    t: &Arc<LoadedTool>,
    grants: &[Capability],
    seq: u64,
    key: &str,
    args: &Value,
    reason: &str,
) -> Result<Found, SagaError> {
    let host = saga.host;
    let wal = Wal::new(&host.db);
    let binding = Binding::new(&t.meta.name, &t.hash, args);
    if let Some(row) = wal.approval_for_step(&saga.id, seq)? {
        if let Err(e) = row.binding.check(&binding) {
            return Ok(refusal(format!(
                "step {seq} of saga {} waits for approval {} of another call ({e})",
                saga.id, row.approval_id
            )));
        }
        return Ok(match row.status {
            ApprovalStatus::Approved => Found::Use(row.approval_id),
            ApprovalStatus::Pending => Found::Wait(Box::new(row)),
            ApprovalStatus::Denied => refusal(format!(
                "a human denied this call (approval {}{})",
                row.approval_id,
                row.decided_by
                    .as_deref()
                    .map(|b| format!(", by {b}"))
                    .unwrap_or_default()
            )),
            ApprovalStatus::Claimed => refusal(format!(
                "approval {} was already used by step {} of saga {}: an approved action runs once",
                row.approval_id,
                row.claimed_step.map(|s| s.to_string()).unwrap_or_default(),
                row.claimed_saga.as_deref().unwrap_or("?")
            )),
        });
    }
    if let Some(row) = wal.find_approved(&binding)? {
        return Ok(Found::Use(row.approval_id));
    }

    // Park. The pending ToolSucceeded (if any) is settled first, as for any
    // next step with side effects.
    saga.settle_success(false)?;
    if let Err(denied) = host.guardrail.apply(saga.state, Event::ApprovalRequested) {
        return Ok(Found::Refused(ToolError::with_hint(
            ErrorKind::PermissionDenied,
            format!("guardrail: {denied}"),
            "This saga cannot run tools any more; finish with a final answer.",
        )));
    }
    let args_text = canonical(args);
    let ctx = CallContext {
        saga_id: saga.id.clone(),
        step_seq: seq,
        idempotency_key: key.to_string(),
        deadline_ms: super::deadline_from_now(t.limits.deadline_ms),
        dry_run: true,
    };
    let (summary, preview) = if t.meta.supports_dry_run {
        match saga.dry_run(t, grants, &ctx, &args_text).await {
            Ok(out) => {
                let mut s = if out.summary.is_empty() {
                    out.effects.join("; ")
                } else {
                    out.summary.clone()
                };
                if s.is_empty() {
                    s = format!("{} (dry-run gave no summary)", t.meta.name);
                }
                (s, Some(out))
            }
            Err(e) => (
                format!(
                    "{} with these arguments (its dry-run failed: {e})",
                    t.meta.name
                ),
                None,
            ),
        }
    } else {
        (
            format!(
                "{} with these arguments (the tool has no dry-run: no preview)",
                t.meta.name
            ),
            None,
        )
    };
    let row = wal.request_approval(&NewApproval {
        saga_id: &saga.id,
        step_seq: seq,
        binding: &binding,
        args,
        reason,
        summary: &summary,
        preview: preview.as_ref(),
    })?;
    saga.state = State::AwaitingApproval;
    Ok(Found::Wait(Box::new(row)))
}

/// Who decides, as recorded: `<channel>:<login>` (login from `$USER`, or
/// `unknown`), e.g. `cli:alice`, `tty:alice`.
pub fn decider(channel: &str) -> String {
    let user = std::env::var("USER")
        .ok()
        .filter(|u| !u.is_empty() && u.len() <= 64 && !u.contains(char::is_control))
        .unwrap_or_else(|| "unknown".into());
    format!("{channel}:{user}")
}

impl Saga<'_> {
    /// Record a human's decision on the approval this parked saga waits for
    /// (`by` says who, e.g. `tty:alice`). Approve: call [`Saga::step`] again
    /// with the same call to run it. Deny: the saga rolls back
    /// (ApprovalDenied) and the report is returned.
    ///
    /// # Errors
    /// [`SagaError`]; a decision already taken elsewhere (another process
    /// decided first) is returned as `Ok(None)` for an approval, and the saga
    /// still rolls back for a denial.
    pub async fn decide_parked(
        &mut self,
        approval_id: &str,
        approve: bool,
        by: &str,
    ) -> Result<Option<super::RollbackReport>, SagaError> {
        let wal = Wal::new(&self.host.db);
        match wal.decide_approval(approval_id, approve, by, None) {
            Ok(_) => {}
            Err(crate::wal::approvals::ApprovalOpError::Db(e)) => return Err(e.into()),
            Err(e) => tracing::warn!("approval {approval_id}: {e}"),
        }
        if approve {
            return Ok(None);
        }
        Ok(Some(self.abort().await?))
    }
}
