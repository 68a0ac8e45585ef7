//! Approvals in the agent loop (seed 000 §8: `approve_required` → ask the
//! human, `user_aborted` when refused; seed 003: an approved action is
//! claimed at most once).
//!
//! The dispatch door owns the approval stage: it claims an approval given
//! earlier with `capsaga approve` for the same tool hash and argument hash,
//! or parks the saga with a pending approval whose summary comes from the
//! tool's dry-run, then asks the turn's [`Approver`]:
//! - with an interactive terminal ([`TerminalApprover`], what `capsaga
//!   agent` uses when stdin and stderr are terminals), the human is asked on
//!   it; yes → the step runs in the same call, claiming the approval; no →
//!   the turn ends `user_aborted`;
//! - without one ([`NoApprover`], the library default), the turn ends
//!   `user_aborted` with nothing executed; the approval stays pending for
//!   `capsaga approve`, after which the same task run again claims it.
//!
//! Either way the parked saga is rolled back by the runner's end of turn
//! (ApprovalDenied → Compensating), so no other step of the turn survives a
//! call the human did not allow. This module is only the terminal and the
//! message: it never writes to the store.

use async_trait::async_trait;
use capsaga_core::principal::Principal;
use capsaga_door::dispatch::{Approver, NoApprover, decider};
use capsaga_store::ApprovalRow;
use std::io::{BufRead, IsTerminal, Write};
use std::sync::Arc;

/// Asks on the controlling terminal (stdin/stderr); anything but `y`/`yes`
/// (or an unreadable terminal) is a no, recorded as `tty:<user>`.
#[derive(Debug, Clone, Copy, Default)]
pub struct TerminalApprover;

#[async_trait]
impl Approver for TerminalApprover {
    /// The operator at the terminal (`tty:<user>`).
    fn who(&self) -> Option<Principal> {
        Some(decider("tty"))
    }

    async fn ask(&self, a: &ApprovalRow) -> Option<bool> {
        let text = format!(
            "\ncapsaga: approval needed ({})\n  tool:    {} (component {})\n  args:    {}\n  preview: {}\nRun it? [y/N] ",
            a.reason,
            a.binding.tool_id,
            &a.binding.tool_hash.chars().take(16).collect::<String>(),
            a.args,
            a.summary
        );
        let approve = tokio::task::spawn_blocking(move || {
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
        .unwrap_or(false);
        Some(approve)
    }
}

/// Waits while an operator decides elsewhere (`capsaga approve|deny`, `POST
/// /v1/approvals/{id}/approve|deny`, the console), for a turn whose caller
/// asked to wait (`POST /v1/turns` with `approval_wait_s`). It decides
/// nothing itself: it reads the approval's status from the store until an
/// operator decided it or the wait is over (the approval then stays
/// pending and the turn ends as with [`NoApprover`]). Only a caller that is
/// an operator may wait ([`Approver::who`] is `None` otherwise).
pub struct WaitForOperator {
    /// The store the decision is read from.
    pub store: Arc<dyn capsaga_store::Store>,
    /// The turn's caller.
    pub caller: Principal,
    /// How long to wait for a decision.
    pub wait: std::time::Duration,
}

impl std::fmt::Debug for WaitForOperator {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WaitForOperator")
            .field("caller", &self.caller)
            .field("wait", &self.wait)
            .finish_non_exhaustive()
    }
}

#[async_trait]
impl Approver for WaitForOperator {
    fn who(&self) -> Option<Principal> {
        self.caller
            .may(capsaga_core::principal::Action::DecideApproval)
            .then(|| self.caller.clone())
    }

    async fn ask(&self, a: &ApprovalRow) -> Option<bool> {
        use capsaga_core::approval::ApprovalStatus;
        let until = tokio::time::Instant::now() + self.wait;
        loop {
            match self.store.approval(&a.approval_id).await {
                Ok(row) => match row.status {
                    ApprovalStatus::Pending => {}
                    ApprovalStatus::Approved => return Some(true),
                    _ => return Some(false),
                },
                Err(e) => {
                    tracing::warn!("approval {}: {e}", a.approval_id);
                    return None;
                }
            }
            if tokio::time::Instant::now() >= until {
                return None;
            }
            tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        }
    }
}

/// [`TerminalApprover`] when stdin and stderr are terminals, else
/// [`NoApprover`].
pub fn detect() -> Arc<dyn Approver> {
    if std::io::stdin().is_terminal() && std::io::stderr().is_terminal() {
        Arc::new(TerminalApprover)
    } else {
        Arc::new(NoApprover)
    }
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
