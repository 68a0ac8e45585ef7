//! Stages 7 and 9, the write-ahead log of a step:
//! - BEGIN (7): written durably before execute starts, with the tool's
//!   identity hash, its effective grants, the arguments and the pre-image,
//!   and, in the same transaction, the approval's claim (used exactly when
//!   its step starts, never twice);
//! - COMMIT or FAIL (9), then the saga's bookkeeping; a failed side effect
//!   starts the rollback (stage 10, `compensate`). A side effect the host
//!   stopped after it ran (deadline, trap, output over the cap) is not FAIL
//!   but IN_DOUBT: it stays BEGIN and is compensated from its pre-image.

use super::{DispatchError, Outcome, Refusal, compensate, guardrail};
use crate::host::Host;
use crate::registry::LoadedTool;
use crate::saga::Saga;
use crate::sandbox::CallDiagnostics;
use crate::store::{BeginOutcome, NewStep, StoreError};
use capsaga_core::error::{ErrorKind, ToolError};
use capsaga_core::fsm::Event;
use capsaga_core::tool::ToolOutput;
use serde_json::Value;

pub(super) fn refused(refusal: Refusal, message: String, hint: &str) -> Outcome {
    Outcome::Refused {
        refusal,
        error: ToolError::with_hint(ErrorKind::Unsupported, message, hint),
    }
}

pub(super) const NOT_AGAIN: &str = "This step cannot be run again in this saga.";

/// Whether a write that failed with `e` certainly wrote nothing: the store
/// refused it (busy: the transaction never ran or was rolled back; fenced:
/// refused by the database). Any other failure (a connection lost during
/// the commit) may have written it.
pub(super) fn nothing_written(e: &DispatchError) -> bool {
    matches!(
        e,
        DispatchError::Store(StoreError::Busy(_) | StoreError::Fenced { .. })
    )
}

/// Stage 7: write the BEGIN record of step `seq` (claiming `approval`).
/// `None`: go on and execute; `Some(outcome)`: the key committed meanwhile
/// (replayed), or the step cannot begin.
///
/// # Errors
/// [`DispatchError`] when the store fails.
pub(super) async fn begin(
    host: &Host,
    saga: &mut Saga,
    tool: &LoadedTool,
    step: &NewStep<'_>,
) -> Result<Option<Outcome>, DispatchError> {
    let seq = step.step_seq;
    match host.store.begin_step(step).await? {
        BeginOutcome::Started => Ok(None),
        BeginOutcome::AlreadyCommitted(output) => {
            saga.next_seq += 1;
            if tool.meta.has_side_effects {
                saga.side_effects += 1;
                saga.pending_success = true;
            }
            Ok(Some(Outcome::Committed {
                seq,
                output,
                replayed: true,
                diagnostics: None,
            }))
        }
        BeginOutcome::Exists(status) => Ok(Some(refused(
            Refusal::Logged,
            format!(
                "step {seq} of saga {} is already logged as {status}",
                saga.id
            ),
            NOT_AGAIN,
        ))),
        BeginOutcome::ApprovalUnavailable => Ok(Some(Outcome::Refused {
            refusal: Refusal::Approval,
            error: ToolError::with_hint(
                ErrorKind::PermissionDenied,
                "the approval for this call was claimed by another step meanwhile: an approval runs once",
                "This call needs a new approval; explain what you wanted to do in your final answer.",
            ),
        })),
    }
}

/// Stage 9: log the outcome of step `seq` and do the saga's bookkeeping: a
/// committed side effect is counted and its success settled when the next
/// step is known (or now, when the tool hints `validate`); a failed side
/// effect rolls the saga back (stage 10).
///
/// # Errors
/// [`DispatchError`] when the store fails.
pub(super) async fn settle(
    host: &Host,
    saga: &mut Saga,
    tool: &LoadedTool,
    seq: u64,
    result: Result<ToolOutput, ToolError>,
    diagnostics: CallDiagnostics,
) -> Result<Outcome, DispatchError> {
    match result {
        Ok(output) => {
            host.store.commit_step(saga.step(seq), &output).await?;
            if tool.meta.has_side_effects {
                saga.side_effects += 1;
                saga.pending_success = true;
                if output.wants_validation() {
                    guardrail::settle_success(host, saga, true).await?;
                }
            }
            Ok(Outcome::Committed {
                seq,
                output,
                replayed: false,
                diagnostics: Some(diagnostics),
            })
        }
        Err(error) => {
            if !tool.meta.has_side_effects {
                host.store.fail_step(saga.step(seq), &error).await?;
                return Ok(Outcome::ReadFailed {
                    seq,
                    error,
                    diagnostics,
                });
            }
            // Stopped by the host after it ran (deadline, trap, output over
            // the cap): it may have changed things before that. The step
            // stays BEGIN, in doubt, and the rollback below compensates it
            // from its dry-run pre-image, as crash recovery would.
            if diagnostics.interrupted {
                host.store.in_doubt(saga.step(seq), &error).await?;
            } else {
                host.store.fail_step(saga.step(seq), &error).await?;
            }
            let rollback = compensate::rollback(host, saga, Event::ToolFailed).await?;
            Ok(Outcome::Failed {
                seq,
                error,
                rollback,
                diagnostics,
            })
        }
    }
}

/// The BEGIN record of step `seq` of saga `saga_id` calling `tool` with
/// `args`.
#[allow(clippy::too_many_arguments)]
pub(super) fn new_step<'a>(
    (saga_id, fence): (&'a str, u64),
    tool: &'a LoadedTool,
    seq: u64,
    key: &'a str,
    args: &'a Value,
    grants: &'a [String],
    preimage: Option<&'a ToolOutput>,
    approval: Option<&'a str>,
) -> NewStep<'a> {
    NewStep {
        saga_id,
        step_seq: seq,
        tool_id: &tool.meta.name,
        tool_hash: &tool.hash,
        grants,
        has_side_effects: tool.meta.has_side_effects,
        idempotency_key: key,
        args,
        preimage,
        approval,
        fence,
    }
}
