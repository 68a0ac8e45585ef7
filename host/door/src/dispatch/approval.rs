//! Stage 5, approval: a call the policy says needs a human (seed 003;
//! DESIGN §7). In order:
//! 1. the approval this very step requested last (same saga, same step
//!    position): it must be bound to the same tool, identity hash and
//!    argument hash; approved → claim it, pending → still waiting, denied or
//!    already claimed → refused; past its time to live → expired, ask again;
//! 2. else the oldest approved, unexpired, unclaimed approval with exactly
//!    this binding requested by a saga that has ended and ran for the same
//!    principal as this one (an operator approved with `capsaga approve`
//!    what an earlier, ended turn of this principal asked for). An approval
//!    of a saga still parked is that saga's alone, and an approval never
//!    passes to another principal's call, however identical
//!    ([`capsaga_core::approval::may_claim`], checked again by the store
//!    in the claim);
//! 3. else the saga is parked: the tool's dry-run runs with the dry-run
//!    bindings for the summary the human will read, and a pending approval
//!    is written in the same transaction as the move to AwaitingApproval;
//!    then the caller's [`Approver`] is asked if its principal may decide
//!    (an operator at a terminal; an MCP client only for a tool the policy
//!    lists in `[approvals] client_confirm`, never `code_run`, high risk or
//!    irreversible), else only told the call waits for an operator: yes →
//!    the decision is recorded under the approver's principal and the step
//!    goes on in this same call, claiming it; no → the denial is recorded
//!    and the call ends parked (the driver aborts the saga); nobody, or
//!    told only → the call ends parked and the approval waits for an
//!    operator (`capsaga approve|deny`, `POST /v1/approvals/{id}/approve`).
//!
//! Before an approval found in 1 or 2 is claimed, the tool's dry-run runs
//! again: if its effect ([`Effect`]) differs from the one the human approved
//! (a file created, changed or deleted meanwhile), the approval is stale and
//! the step parks again with a new approval whose summary names the
//! difference.
//!
//! The claim itself is written by the BEGIN record (stage 7), so an approval
//! is consumed exactly when its step starts, at most once, whatever crashes
//! in between; the store checks there again that the approval is approved,
//! unexpired and claimable by this saga (the same rule, in SQL, in the
//! BEGIN's transaction: a claim racing from another host cannot pass it).

use super::{DispatchError, execute, guardrail};
use crate::clock::{deadline_from_now, now_rfc3339};
use crate::host::Host;
use crate::registry::LoadedTool;
use crate::saga::Saga;
use crate::store::{ApprovalRow, NewApproval};
use async_trait::async_trait;
use capsaga_core::approval::{ApprovalStatus, Binding, Effect, Party, may_claim};
use capsaga_core::confirm::client_may_confirm;
use capsaga_core::error::{ErrorKind, ToolError};
use capsaga_core::fsm::State;
use capsaga_core::idempotency::step_key;
use capsaga_core::json::canonical;
use capsaga_core::principal::{Action, Principal, Role};
use capsaga_core::tool::{CallContext, ToolOutput};
use serde_json::Value;

/// Who the door asks when a call needs a human: the caller's concern (a
/// terminal for `capsaga agent`, elicitation for an MCP client, nobody for a
/// plan). The approval is pending and the saga parked while it is asked.
///
/// The door, not the approver, decides whether the answer counts: it asks
/// only an approver whose principal ([`Approver::who`], authenticated by
/// the caller's channel, never named by the answer) is an operator, or a
/// client confirming a tool the policy lists in `[approvals]
/// client_confirm` (`capsaga_core::confirm::client_may_confirm`); any
/// other approver is only told the call waits for an operator
/// ([`Approver::tell`]). The decision is recorded under
/// `<principal name> (<role>)`.
#[async_trait]
pub trait Approver: Send + Sync {
    /// Who would answer, or `None` when nobody can be asked now (the
    /// approval stays pending).
    fn who(&self) -> Option<Principal>;

    /// Ask about `approval` (its summary comes from the tool's dry-run):
    /// yes or no, or `None` when no answer came (the approval stays
    /// pending).
    async fn ask(&self, approval: &ApprovalRow) -> Option<bool>;

    /// Tell the caller that `approval` waits for an operator (it may not
    /// decide it). Default: nothing.
    async fn tell(&self, _approval: &ApprovalRow) {}
}

/// Asks nobody: every call that needs a human parks its saga.
#[derive(Debug, Clone, Copy, Default)]
pub struct NoApprover;

#[async_trait]
impl Approver for NoApprover {
    fn who(&self) -> Option<Principal> {
        None
    }

    async fn ask(&self, _approval: &ApprovalRow) -> Option<bool> {
        None
    }
}

/// The local operator on `channel`: `<channel>:<login>` (login from
/// `$USER`, or `unknown`) with the operator role, e.g. `cli:alice`,
/// `tty:alice`: whoever can run `capsaga` on the state is its operator.
pub fn decider(channel: &str) -> Principal {
    let user = std::env::var("USER").ok();
    Principal::local(channel, user.as_deref(), Role::Operator)
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
    let retired = match find(host, p.saga, p.seq, &binding).await? {
        Some(Lookup::Found(found)) => return Ok(found),
        Some(Lookup::Claimable(row)) => match recheck(host, &p, &row).await {
            None => return Ok(Found::Claim(row.approval_id)),
            Some(difference) => Some(Retired {
                row,
                status: ApprovalStatus::Stale,
                why: difference,
            }),
        },
        Some(Lookup::Expired(row)) => Some(Retired {
            why: format!(
                "approval {} expired at {} before it was used",
                short(&row.approval_id),
                row.expires_at.as_deref().unwrap_or("?")
            ),
            row,
            status: ApprovalStatus::Expired,
        }),
        None => None,
    };
    let row = match park(host, &mut p, &binding, retired.as_ref()).await? {
        Ok(row) => row,
        Err(e) => return Ok(Found::Refused(e)),
    };
    let wait = |row: ApprovalRow| Found::Wait {
        row: Box::new(row),
        denied_by: None,
    };
    let Some(who) = approver.who() else {
        return Ok(wait(row));
    };
    if !may_decide(host, p.tool, &who) {
        approver.tell(&row).await;
        return Ok(wait(row));
    }
    let Some(approve) = approver.ask(&row).await else {
        return Ok(wait(row));
    };
    let by = who.to_string();
    let decided = host
        .store
        .decide_approval(&row.approval_id, approve, &by, None)
        .await;
    match decided {
        Ok(_) => {}
        Err(crate::store::ApprovalOpError::Store(e)) => return Err(e.into()),
        Err(e) => tracing::warn!("approval {}: {e}", row.approval_id),
    }
    Ok(if approve {
        Found::Claim(row.approval_id)
    } else {
        Found::Wait {
            row: Box::new(row),
            denied_by: Some(by),
        }
    })
}

/// Whether `who` may decide an approval of a call of `tool`: an operator
/// always; a client only for a tool the policy lists in `[approvals]
/// client_confirm` that is not `code_run`, high risk or irreversible
/// (checked again here: a tool may have changed since the policy loaded).
pub(super) fn may_decide(host: &Host, tool: &LoadedTool, who: &Principal) -> bool {
    if who.may(Action::DecideApproval) {
        return true;
    }
    let policy = &host.config.policy;
    let irreversible = tool.section(policy).is_some_and(|s| s.irreversible);
    who.may(Action::ConfirmListedTool)
        && client_may_confirm(
            &policy.client_confirm,
            &tool.meta.name,
            tool.meta.risk,
            irreversible,
        )
}

/// An approval the step will not use, and why: it is retired (stale or
/// expired) in the transaction that requests its replacement.
struct Retired {
    row: ApprovalRow,
    status: ApprovalStatus,
    why: String,
}

/// What steps 1 and 2 found.
enum Lookup {
    /// The outcome of the stage.
    Found(Found),
    /// An approved approval to claim once its effect is checked.
    Claimable(ApprovalRow),
    /// This step's approval, past its time to live.
    Expired(ApprovalRow),
}

fn short(id: &str) -> String {
    id.chars().take(8).collect()
}

/// Whether the call's dry-run still shows what the human approved: `None`
/// when it does (or there is nothing to compare: the tool has no dry-run,
/// or none was shown), else the difference.
async fn recheck(host: &Host, p: &Pending<'_>, row: &ApprovalRow) -> Option<String> {
    let approved = row.preview.as_ref()?;
    if !p.tool.meta.supports_dry_run {
        return None;
    }
    // Compared on what the call does, not on which saga asks (a dry-run
    // may echo its idempotency key).
    let asked_key = step_key(&row.saga_id, row.step_seq, &p.tool.meta.name, p.args);
    let was = Effect::of_call(approved, &[&asked_key, &row.saga_id]);
    match dry_run_of(host, p).await {
        Ok(now) => {
            let now = serde_json::to_value(&now).unwrap_or(Value::Null);
            was.difference(&Effect::of_call(&now, &[p.key, &p.saga.id]))
        }
        Err(e) => Some(format!(
            "approved: {:?}; now its dry-run fails: {e}",
            was.summary
        )),
    }
}

/// Steps 1 and 2: an approval this step may claim or waits on.
async fn find(
    host: &Host,
    saga: &Saga,
    seq: u64,
    binding: &Binding,
) -> Result<Option<Lookup>, DispatchError> {
    let now = now_rfc3339();
    if let Some(row) = host.store.approval_for_step(&saga.id, seq).await? {
        if let Err(e) = claimable(&row, binding) {
            return Ok(Some(Lookup::Found(refusal(format!(
                "step {seq} of saga {} waits for approval {} of another call ({e})",
                saga.id, row.approval_id
            )))));
        }
        if matches!(
            row.status,
            ApprovalStatus::Pending | ApprovalStatus::Approved
        ) && row.is_expired(&now)
        {
            return Ok(Some(Lookup::Expired(row)));
        }
        return Ok(Some(match row.status {
            ApprovalStatus::Approved => Lookup::Claimable(row),
            ApprovalStatus::Pending => Lookup::Found(Found::Wait {
                row: Box::new(row),
                denied_by: None,
            }),
            // Already replaced: this step asks again.
            ApprovalStatus::Stale | ApprovalStatus::Expired => return Ok(None),
            ApprovalStatus::Denied => Lookup::Found(refusal(format!(
                "a human denied this call (approval {}{})",
                row.approval_id,
                row.decided_by
                    .as_deref()
                    .map(|b| format!(", by {b}"))
                    .unwrap_or_default()
            ))),
            ApprovalStatus::Claimed => Lookup::Found(refusal(format!(
                "approval {} was already used by step {} of saga {}: an approved action runs once",
                row.approval_id,
                row.claimed_step.map(|s| s.to_string()).unwrap_or_default(),
                row.claimed_saga.as_deref().unwrap_or("?")
            ))),
        }));
    }
    let claimant = Party {
        saga: &saga.id,
        principal: saga.principal.as_deref(),
        ended: saga.state.is_terminal(),
    };
    for found in host.store.find_approved(binding, &now, &saga.id).await? {
        let row = found.approval;
        let requester = Party {
            saga: &row.saga_id,
            principal: found.requester_principal.as_deref(),
            ended: found.requester_ended,
        };
        if may_claim(requester, claimant) && claimable(&row, binding).is_ok() {
            return Ok(Some(Lookup::Claimable(row)));
        }
    }
    Ok(None)
}

/// Whether `row` may be claimed by (or waited on by) the call bound to
/// `binding`: exactly the same tool, identity hash and arguments. (Which
/// saga may claim it is [`may_claim`]; whether it still describes the call,
/// [`recheck`]; its expiry, `ApprovalRow::is_expired`.)
fn claimable(row: &ApprovalRow, binding: &Binding) -> Result<(), String> {
    row.binding.check(binding).map_err(|e| e.to_string())
}

/// Step 3: park the saga with a pending approval whose summary comes from
/// the tool's dry-run (retiring `retired` in the same transaction, its
/// reason prefixed to the summary).
async fn park(
    host: &Host,
    p: &mut Pending<'_>,
    binding: &Binding,
    retired: Option<&Retired>,
) -> Result<Result<ApprovalRow, ToolError>, DispatchError> {
    // A saga resumed while parked (its approval went stale or expired)
    // stays parked: the new approval replaces the old one.
    if p.saga.state != State::AwaitingApproval
        && let Err(e) = guardrail::before_parking(host, &mut *p.saga).await?
    {
        return Ok(Err(e));
    }
    let (mut summary, preview) = summary(host, p).await;
    if let Some(r) = retired {
        summary = format!(
            "{summary} [asked again: approval {} is {}: {}]",
            short(&r.row.approval_id),
            r.status,
            r.why
        );
    }
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
            ttl_s: host.config.policy.approval_ttl_s,
            replaces: retired.map(|r| (r.row.approval_id.as_str(), r.status)),
            fence: p.saga.fence,
        })
        .await?;
    p.saga.state = State::AwaitingApproval;
    Ok(Ok(row))
}

/// The tool's dry-run for this step (dry-run bindings, nothing logged).
async fn dry_run_of(host: &Host, p: &Pending<'_>) -> Result<ToolOutput, ToolError> {
    let ctx = CallContext {
        saga_id: p.saga.id.clone(),
        step_seq: p.seq,
        idempotency_key: p.key.to_string(),
        deadline_ms: deadline_from_now(p.tool.limits.deadline_ms),
        dry_run: true,
    };
    execute::dry_run(host, p.tool, &ctx, &canonical(p.args), p.args)
        .await
        .0
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
    match dry_run_of(host, p).await {
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
