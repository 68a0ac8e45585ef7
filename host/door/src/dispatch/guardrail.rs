//! Stage 6, guardrail: every change of a saga's state is a transition of the
//! guardrail FSM (pure: `capsaga_core::fsm`), logged in the store before the
//! saga is updated. Before a call runs, the saga is brought to a state where
//! it may run (DESIGN §6): the first side-effecting call makes the plan real
//! (PlanReady → Acting), a side-effecting call after validation continues
//! (ValidationPassed), a read-only call after writes moves to Validating, a
//! claimed approval resumes a parked saga (ApprovalGranted).

use super::DispatchError;
use crate::host::Host;
use crate::saga::Saga;
use capsaga_core::error::{ErrorKind, ToolError};
use capsaga_core::fsm::{Event, State};

/// Apply `event` to `saga`: checked by the guardrail, logged, then applied.
///
/// # Errors
/// [`DispatchError::Transition`] when the guardrail refuses it, or the store.
pub(super) async fn transition(
    host: &Host,
    saga: &mut Saga,
    event: Event,
) -> Result<(), DispatchError> {
    // The plan's tool scope rides on Planning → Acting (issue 47).
    let next = host
        .guardrail
        .apply_scoped(saga.state, event, saga.flow.scope())?;
    host.store
        .set_state(&saga.id, saga.fence, next, event.name(), None)
        .await?;
    saga.state = next;
    Ok(())
}

/// Apply the pending ToolSucceeded of the last side-effecting step, to
/// Validating when `validate`.
///
/// # Errors
/// As [`transition`].
pub(super) async fn settle_success(
    host: &Host,
    saga: &mut Saga,
    validate: bool,
) -> Result<(), DispatchError> {
    if saga.pending_success && saga.state == State::Acting {
        saga.pending_success = false;
        transition(host, saga, Event::ToolSucceeded { validate }).await?;
    }
    Ok(())
}

fn refused(reason: impl std::fmt::Display) -> ToolError {
    ToolError::with_hint(
        ErrorKind::PermissionDenied,
        format!("guardrail: {reason}"),
        "This saga cannot run tools any more; finish with a final answer.",
    )
}

/// Bring `saga` to a state where a call (with or without side effects) may
/// run, or refuse it. `approved`: the call claims an approval, which
/// resumes a parked saga first.
///
/// # Errors
/// [`DispatchError`] for the store; `Ok(Err(_))` when the guardrail refuses
/// the call.
pub(super) async fn before_step(
    host: &Host,
    saga: &mut Saga,
    approved: bool,
    has_side_effects: bool,
) -> Result<Result<(), ToolError>, DispatchError> {
    if approved && saga.state == State::AwaitingApproval {
        transition(host, saga, Event::ApprovalGranted).await?;
    }
    if has_side_effects {
        settle_success(host, saga, false).await?;
        match saga.state {
            State::Planning => transition(host, saga, Event::PlanReady { steps: 1 }).await?,
            State::Validating => {
                transition(host, saga, Event::ValidationPassed { complete: false }).await?
            }
            _ => {}
        }
    } else {
        settle_success(host, saga, true).await?;
    }
    Ok(host
        .guardrail
        .may_execute(saga.state, has_side_effects)
        .map_err(refused))
}

/// Whether `saga` may park for an approval (after settling a pending
/// success, as for any next step with side effects). The move itself is
/// written with the approval (`ApprovalStore::request_approval`).
///
/// # Errors
/// [`DispatchError`] for the store; `Ok(Err(_))` when the guardrail refuses.
pub(super) async fn before_parking(
    host: &Host,
    saga: &mut Saga,
) -> Result<Result<(), ToolError>, DispatchError> {
    settle_success(host, saga, false).await?;
    Ok(host
        .guardrail
        .apply(saga.state, Event::ApprovalRequested)
        .map(|_| ())
        .map_err(refused))
}
