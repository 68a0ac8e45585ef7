//! Stage 5, approval: a call the policy says needs a human (seed 003;
//! DESIGN §7). In order:
//! 1. the approval this very step requested earlier (same saga, same step
//!    position): it must be bound to the same tool, identity hash and
//!    argument hash; approved → claim it, pending → still waiting, denied or
//!    already claimed → refused;
//! 2. else the oldest approved, unclaimed approval with exactly this
//!    binding, from any saga (an operator approved with `capsaga approve`
//!    what an earlier, ended turn asked for);
//! 3. else the saga is parked: the tool's dry-run runs with the dry-run
//!    bindings for the summary the human will read, and a pending approval
//!    is written in the same transaction as the move to AwaitingApproval;
//!    then the caller's [`Approver`] is asked (a terminal, an MCP client's
//!    elicitation, ...): yes → the decision is recorded and the step goes on
//!    in this same call, claiming it; no → the denial is recorded and the
//!    call ends parked (the driver aborts the saga); nobody → the call ends
//!    parked and the approval waits for `capsaga approve|deny`.
//!
//! The claim itself is written by the BEGIN record (stage 7), so an approval
//! is consumed exactly when its step starts, at most once, whatever crashes
//! in between. Rules on which approval a step may claim (bound to the
//! requesting saga, still describing what will run, not expired) belong in
//! [`claimable`].

use super::{DispatchError, execute, guardrail};
use crate::clock::deadline_from_now;
use crate::host::Host;
use crate::registry::LoadedTool;
use crate::saga::Saga;
use crate::store::{ApprovalRow, NewApproval};
use async_trait::async_trait;
use capsaga_core::approval::{ApprovalStatus, Binding};
use capsaga_core::error::{ErrorKind, ToolError};
use capsaga_core::fsm::State;
use capsaga_core::json::canonical;
use capsaga_core::tool::{CallContext, ToolOutput};
use serde_json::Value;

/// A human's answer to an approval.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HumanDecision {
    /// Yes or no.
    pub approve: bool,
    /// Who decided, as recorded: `<channel>:<login>` (see [`decider`]).
    pub by: String,
}

/// Who the door asks when a call needs a human: the caller's concern (a
/// terminal for `capsaga agent`, elicitation for an MCP client, nobody for a
/// plan). The approval is pending and the saga parked while it is asked.
#[async_trait]
pub trait Approver: Send + Sync {
    /// Ask about `approval` (its summary comes from the tool's dry-run).
    /// `None` when nobody can be asked now: the approval stays pending.
    async fn ask(&self, approval: &ApprovalRow) -> Option<HumanDecision>;
}

/// Asks nobody: every call that needs a human parks its saga.
#[derive(Debug, Clone, Copy, Default)]
pub struct NoApprover;

#[async_trait]
impl Approver for NoApprover {
    async fn ask(&self, _approval: &ApprovalRow) -> Option<HumanDecision> {
        None
    }
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

/// What the stage found.
#[derive(Debug)]
pub(super) enum Found {
    /// Claim this approved approval with the BEGIN record.
    Claim(String),
    /// The saga is parked (now or already) on this approval.
    Wait {
        /// The approval.
        row: Box<ApprovalRow>,
        /// Who refused at the caller's prompt, if someone did.
        denied_by: Option<String>,
    },
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

/// The call of one step waiting on a human.
pub(super) struct Pending<'a> {
    pub saga: &'a mut Saga,
    pub tool: &'a LoadedTool,
    pub seq: u64,
    pub key: &'a str,
    pub args: &'a Value,
    /// The policy's reason.
    pub reason: &'a str,
}

/// Run the stage (see the module documentation for the order).
///
/// # Errors
/// [`DispatchError`] when the store fails.
pub(super) async fn stage(
    host: &Host,
    mut p: Pending<'_>,
    approver: &dyn Approver,
) -> Result<Found, DispatchError> {
    let binding = Binding::new(&p.tool.meta.name, &p.tool.hash, p.args);
    if let Some(found) = find(host, p.saga, p.seq, &binding).await? {
        return Ok(found);
    }
    let row = match park(host, &mut p, &binding).await? {
        Ok(row) => row,
        Err(e) => return Ok(Found::Refused(e)),
    };
    let Some(decision) = approver.ask(&row).await else {
        return Ok(Found::Wait {
            row: Box::new(row),
            denied_by: None,
        });
    };
    let decided = host
        .store
        .decide_approval(&row.approval_id, decision.approve, &decision.by, None)
        .await;
    match decided {
        Ok(_) => {}
        Err(crate::store::ApprovalOpError::Store(e)) => return Err(e.into()),
        Err(e) => tracing::warn!("approval {}: {e}", row.approval_id),
    }
    Ok(if decision.approve {
        Found::Claim(row.approval_id)
    } else {
        Found::Wait {
            row: Box::new(row),
            denied_by: Some(decision.by),
        }
    })
}

/// Steps 1 and 2: an approval this step may claim or waits on.
async fn find(
    host: &Host,
    saga: &Saga,
    seq: u64,
    binding: &Binding,
) -> Result<Option<Found>, DispatchError> {
    if let Some(row) = host.store.approval_for_step(&saga.id, seq).await? {
        if let Err(e) = claimable(&row, binding) {
            return Ok(Some(refusal(format!(
                "step {seq} of saga {} waits for approval {} of another call ({e})",
                saga.id, row.approval_id
            ))));
        }
        return Ok(Some(match row.status {
            ApprovalStatus::Approved => Found::Claim(row.approval_id),
            ApprovalStatus::Pending => Found::Wait {
                row: Box::new(row),
                denied_by: None,
            },
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
        }));
    }
    if let Some(row) = host.store.find_approved(binding).await?
        && claimable(&row, binding).is_ok()
    {
        return Ok(Some(Found::Claim(row.approval_id)));
    }
    Ok(None)
}

/// Whether `row` may be claimed by (or waited on by) the call bound to
/// `binding`: today, exactly the same tool, identity hash and arguments.
/// Where the further rules of claiming go.
fn claimable(row: &ApprovalRow, binding: &Binding) -> Result<(), String> {
    row.binding.check(binding).map_err(|e| e.to_string())
}

/// Step 3: park the saga with a pending approval whose summary comes from
/// the tool's dry-run.
async fn park(
    host: &Host,
    p: &mut Pending<'_>,
    binding: &Binding,
) -> Result<Result<ApprovalRow, ToolError>, DispatchError> {
    if let Err(e) = guardrail::before_parking(host, &mut *p.saga).await? {
        return Ok(Err(e));
    }
    let (summary, preview) = summary(host, p).await;
    let row = host
        .store
        .request_approval(&NewApproval {
            saga_id: &p.saga.id,
            step_seq: p.seq,
            binding,
            args: p.args,
            reason: p.reason,
            summary: &summary,
            preview: preview.as_ref(),
        })
        .await?;
    p.saga.state = State::AwaitingApproval;
    Ok(Ok(row))
}

/// The one line the human reads, from the tool's dry-run when it has one.
async fn summary(host: &Host, p: &Pending<'_>) -> (String, Option<ToolOutput>) {
    let name = &p.tool.meta.name;
    if !p.tool.meta.supports_dry_run {
        return (
            format!("{name} with these arguments (the tool has no dry-run: no preview)"),
            None,
        );
    }
    let ctx = CallContext {
        saga_id: p.saga.id.clone(),
        step_seq: p.seq,
        idempotency_key: p.key.to_string(),
        deadline_ms: deadline_from_now(p.tool.limits.deadline_ms),
        dry_run: true,
    };
    match execute::dry_run(host, p.tool, &ctx, &canonical(p.args), p.args)
        .await
        .0
    {
        Ok(out) => {
            let mut s = if out.summary.is_empty() {
                out.effects.join("; ")
            } else {
                out.summary.clone()
            };
            if s.is_empty() {
                s = format!("{name} (dry-run gave no summary)");
            }
            (s, Some(out))
        }
        Err(e) => (
            format!("{name} with these arguments (its dry-run failed: {e})"),
            None,
        ),
    }
}
