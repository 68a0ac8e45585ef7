//! Stage 4, policy: allow, deny, or a human must approve, at the saga's
//! autonomy level (the pure rules are `capsaga_core::policy::decide_at`).

use super::{Refusal, Rejection};
use crate::host::Host;
use crate::registry::LoadedTool;
use capsaga_core::error::{ErrorKind, ToolError};
use capsaga_core::policy::{Autonomy, Decision, decide_at};

/// A call the policy did not deny.
pub(super) enum Allowed {
    /// Runs without a human.
    Freely,
    /// A human must approve first, for this reason.
    WithApproval(String),
}

/// Decide a call of `tool` at `autonomy`.
///
/// # Errors
/// [`Refusal::Denied`] with the policy's reason.
pub(super) fn decide(
    host: &Host,
    tool: &LoadedTool,
    autonomy: Autonomy,
) -> Result<Allowed, Box<Rejection>> {
    match decide_at(
        tool.meta.risk,
        tool.meta.has_side_effects,
        tool.section(&host.config.policy),
        autonomy,
    ) {
        Decision::Allow => Ok(Allowed::Freely),
        Decision::ApproveRequired { reason } => Ok(Allowed::WithApproval(reason)),
        Decision::Deny { reason } => {
            let error = ToolError::with_hint(
                ErrorKind::PermissionDenied,
                format!("policy: {reason}"),
                "The operator does not allow this tool; use another tool or finish.",
            );
            Err(Rejection::boxed(Refusal::Denied { reason }, error))
        }
    }
}
