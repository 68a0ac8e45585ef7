//! Extra transitions from the operator's explicit `fsm.toml` (SPEC §3.5
//! rule 5): the only way to add a row to the guardrail. Never from a prompt.
//!
//! ```toml
//! [[transition]]
//! from = "Validating"
//! event = "ToolFailed"
//! to = "Compensating"
//! ```
//!
//! Every row is checked at load ([`check`]); a file with one bad row is
//! refused whole. Extra rows can only add a (from, event) pair the table does
//! not have: they never override a row or its guard, never leave a terminal
//! state, never touch the approval states or events (only a human's decision
//! leaves AwaitingApproval), never interrupt a rollback, and never reach Done
//! or a failure state by a side door.

use super::{EVENT_NAMES, Guardrail, State};
use serde::{Deserialize, Serialize};

/// One extra transition row.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ExtraTransition {
    /// Source state.
    pub from: State,
    /// Event name (guards of extra rows are ignored).
    pub event: String,
    /// Target state.
    pub to: State,
}

/// The `fsm.toml` document.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FsmFile {
    /// The extra rows.
    #[serde(default, rename = "transition")]
    pub transitions: Vec<ExtraTransition>,
}

impl FsmFile {
    /// Parse `fsm.toml` text and build the guardrail it describes.
    ///
    /// # Errors
    /// A message for TOML errors, unknown keys or states, or the first row
    /// that [`check`] refuses.
    pub fn parse(text: &str) -> Result<Guardrail, String> {
        let file: FsmFile = toml::from_str(text).map_err(|e| e.to_string())?;
        let mut seen = std::collections::BTreeSet::new();
        for t in &file.transitions {
            if !seen.insert((t.from, t.event.clone())) {
                return Err(format!(
                    "{} --{}--> appears twice: the machine must stay deterministic",
                    t.from, t.event
                ));
            }
        }
        Guardrail::with_extra(file.transitions)
    }
}

const APPROVAL_EVENTS: [&str; 4] = [
    "ApprovalRequested",
    "ApprovalGranted",
    "ApprovalDenied",
    "CallDeclined",
];

/// Check one extra row.
///
/// # Errors
/// Why the row is refused: an unknown or approval event; a row leaving a
/// terminal state, AwaitingApproval or Compensating; a row entering Idle or
/// AwaitingApproval; Done entered from anywhere but Planning or Validating; a
/// failure state entered by anything but a compensation event; a (from,
/// event) pair the normative table already has.
pub fn check(t: &ExtraTransition) -> Result<(), String> {
    let event = t.event.as_str();
    if !EVENT_NAMES.contains(&event) {
        return Err(format!(
            "unknown event `{}`",
            event.chars().take(40).collect::<String>()
        ));
    }
    if APPROVAL_EVENTS.contains(&event)
        || t.from == State::AwaitingApproval
        || t.to == State::AwaitingApproval
    {
        return Err(
            "approvals are not configurable: only a human's decision leaves AwaitingApproval"
                .into(),
        );
    }
    if t.from.is_terminal() {
        return Err(format!(
            "{} is terminal: no transition may leave it",
            t.from
        ));
    }
    if t.from == State::Compensating {
        return Err("a rollback cannot be interrupted: nothing may leave Compensating".into());
    }
    if t.to == State::Idle {
        return Err("no transition may return to Idle".into());
    }
    if t.to == State::Done && !matches!(t.from, State::Planning | State::Validating) {
        return Err(format!(
            "Done can only be reached from Planning or Validating, not {}",
            t.from
        ));
    }
    if matches!(t.to, State::FailedRolledBack | State::FailedRollbackPartial)
        && !matches!(event, "CompensationDone" | "CompensationFailed")
    {
        return Err(format!(
            "{} can only be entered by a compensation event",
            t.to
        ));
    }
    if Guardrail::in_table(t.from, event) {
        return Err(
            "the normative table already has this (state, event): extra rows add, never override"
                .into(),
        );
    }
    Ok(())
}
