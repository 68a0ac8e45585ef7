//! A step's status moves, written once for both dialects: which statuses a
//! move may leave, and the errors of a move the row refuses. The saga's
//! own states are the guardrail's (`capsaga_core::fsm`): the ended ones
//! are [`crate::claim::ENDED_STATES`], from `State::is_terminal`.

use crate::{StepStatus, StoreError};

/// The statuses of a step that may hold an effect to compensate (the
/// statuses `compensated` and `compensation_failed` move from).
pub(crate) const HOLDING_AN_EFFECT: [StepStatus; 4] = [
    StepStatus::Commit,
    StepStatus::Begin,
    StepStatus::CompensationFailed,
    // A failed step may have changed files before failing: the host's
    // journal restores them (issue 28).
    StepStatus::Fail,
];

/// No step `step_seq` in the saga.
pub(crate) fn no_step(saga_id: &str, step_seq: u64) -> StoreError {
    StoreError::Decode(format!("no step {step_seq} in saga `{saga_id}`"))
}

/// The step is `from`, which may not move to `to`.
pub(crate) fn cannot_become(
    saga_id: &str,
    step_seq: u64,
    from: StepStatus,
    to: StepStatus,
) -> StoreError {
    StoreError::Decode(format!(
        "step {step_seq} of saga `{saga_id}` is {from}, cannot become {to}"
    ))
}

/// The step is not in BEGIN any more, so it cannot `what` (retry it, mark
/// it in doubt).
pub(crate) fn not_in_begin(saga_id: &str, step_seq: u64, what: &str) -> StoreError {
    StoreError::Decode(format!(
        "step {step_seq} of saga `{saga_id}` is not in BEGIN: cannot {what}"
    ))
}
