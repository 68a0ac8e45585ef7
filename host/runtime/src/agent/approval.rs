//! Approvals in the agent loop (seed 000 §8: `approve_required` → ask the
//! human, `user_aborted` when refused; seed 003: an approved action is
//! claimed at most once).
//!
//! The runner calls [`step`] instead of `Saga::step`. When the policy says a
//! call needs a human, the saga engine first looks for an approval it may
//! claim (one approved earlier with `capsaga approve` for the same tool hash
//! and argument hash); otherwise it parks the saga with a pending approval
//! whose summary comes from the tool's dry-run in a read-only sandbox. Then:
//! - with an interactive terminal ([`TurnPrompt::Terminal`]), the human is
//!   asked on it; yes → the approval is recorded (`tty:<user>`) and the step
//!   runs, claiming it; no → the turn ends `user_aborted`;
//! - without one, the turn ends `user_aborted` with nothing executed; the
//!   approval stays pending for `capsaga approve`, after which the same task
//!   run again claims it.
//!
//! Either way the parked saga is rolled back by the runner's end of turn
//! (ApprovalDenied → Compensating), so no other step of the turn survives a
//! call the human did not allow.

use super::trace::PolicyDecision;
use crate::saga::{Saga, SagaError, StepOutcome};
use crate::wal::approvals::ApprovalRow;
use serde_json::Value;
use std::io::{BufRead, IsTerminal, Write};

/// How the agent loop may ask a human.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum TurnPrompt {
    /// Nobody can be asked here (the library default: it never reads stdin).
    #[default]
    Never,
    /// Ask on the controlling terminal (stdin/stderr), as `capsaga agent`
    /// does when both are terminals.
    Terminal,
}

impl TurnPrompt {
    /// [`TurnPrompt::Terminal`] when stdin and stderr are terminals, else
    /// [`TurnPrompt::Never`].
    pub fn detect() -> TurnPrompt {
        if std::io::stdin().is_terminal() && std::io::stderr().is_terminal() {
            TurnPrompt::Terminal
        } else {
            TurnPrompt::Never
        }
    }
}

/// A step as the agent loop sees it.
#[derive(Debug)]
pub struct Stepped {
    /// What happened. `AwaitingApproval` means nobody approved: the turn
    /// must end (`user_aborted`).
    pub outcome: StepOutcome,
    /// The policy's decision, for the trace.
    pub policy_decision: PolicyDecision,
    /// Who refused, when a human said no at the prompt.
    pub denied_by: Option<String>,
}

/// Run one call of the turn's saga, asking a human if the policy requires it
/// and `prompt` allows.
///
/// # Errors
/// [`SagaError`] when the saga engine fails.
pub async fn step(
    saga: &mut Saga<'_>,
    tool: &str,
    args: &Value,
    prompt: TurnPrompt,
) -> Result<Stepped, SagaError> {
    let outcome = saga.step(tool, args).await?;
    let StepOutcome::AwaitingApproval { approval, .. } = &outcome else {
        let policy_decision = if was_approved(saga, &outcome)? {
            PolicyDecision::ApproveRequired
        } else {
            PolicyDecision::Allow
        };
        return Ok(Stepped {
            outcome,
            policy_decision,
            denied_by: None,
        });
    };
    let approval = (**approval).clone();
    let yes = match prompt {
        TurnPrompt::Never => None,
        TurnPrompt::Terminal => Some(ask_on_terminal(&approval).await),
    };
    let by = crate::saga::approve::decider("tty");
    match yes {
        Some(true) => {
            saga.decide_parked(&approval.approval_id, true, &by).await?;
            let outcome = saga.step(tool, args).await?;
            Ok(Stepped {
                outcome,
                policy_decision: PolicyDecision::ApproveRequired,
                denied_by: None,
            })
        }
        Some(false) => {
            // Record the refusal; the runner's end of turn rolls back.
            let wal = crate::wal::Wal::new(&saga.host().db);
            if let Err(e) = wal.decide_approval(&approval.approval_id, false, &by, None) {
                tracing::warn!("approval {}: {e}", approval.approval_id);
            }
            Ok(Stepped {
                outcome,
                policy_decision: PolicyDecision::ApproveRequired,
                denied_by: Some(by),
            })
        }
        None => Ok(Stepped {
            outcome,
            policy_decision: PolicyDecision::ApproveRequired,
            denied_by: None,
        }),
    }
}

/// Whether a committed step claimed an approval (for the trace).
fn was_approved(saga: &Saga<'_>, outcome: &StepOutcome) -> Result<bool, SagaError> {
    let StepOutcome::Committed {
        seq,
        replayed: false,
        ..
    } = outcome
    else {
        return Ok(false);
    };
    let log = crate::wal::Wal::new(&saga.host().db).log(Some(saga.id()))?;
    Ok(log
        .iter()
        .any(|r| r.record == "APPROVAL_CLAIMED" && r.step_seq == Some(*seq)))
}

/// The message that ends a turn whose call was not approved.
pub fn ended_message(approval: &ApprovalRow, denied_by: Option<&str>) -> String {
    match denied_by {
        Some(by) => format!(
            "Stopped: {by} refused `{}` ({}; {}). Nothing of this turn was kept.",
            approval.binding.tool_id, approval.reason, approval.summary
        ),
        None => format!(
            "Stopped: `{}` needs a human's approval ({}; {}). Nothing was executed. \
             Approve it with `capsaga approve {}` and run the task again.",
            approval.binding.tool_id, approval.reason, approval.summary, approval.approval_id
        ),
    }
}

/// Ask on the terminal; anything but `y`/`yes` (or an unreadable terminal)
/// is a no.
async fn ask_on_terminal(a: &ApprovalRow) -> bool {
    let text = format!(
        "\ncapsaga: approval needed ({})\n  tool:    {} (component {})\n  args:    {}\n  preview: {}\nRun it? [y/N] ",
        a.reason,
        a.binding.tool_id,
        &a.binding.tool_hash.chars().take(16).collect::<String>(),
        a.args,
        a.summary
    );
    tokio::task::spawn_blocking(move || {
        let mut err = std::io::stderr();
        let _ = err.write_all(text.as_bytes());
        let _ = err.flush();
        let mut line = String::new();
        match std::io::stdin().lock().read_line(&mut line) {
            Ok(_) => matches!(line.trim().to_ascii_lowercase().as_str(), "y" | "yes"),
            Err(_) => false,
        }
    })
    .await
    .unwrap_or(false)
}
