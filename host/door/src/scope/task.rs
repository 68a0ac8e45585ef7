//! A task's saga (the MCP tasks extension, SEP-2663): one call run in the
//! background in a saga of its own ([`run_task`]), opened when the task
//! starts (`Scope::Task`: only the task drives it) and ended with its call.
//!
//! - The call runs through the door like any call (policy, approvals). A
//!   call that needs an approval the client may give (`[approvals]
//!   client_confirm`, a client that declared elicitation) asks the client
//!   through the task ([`Confirmer`]), up to [`MAX_ROUNDS`] times when
//!   the answer is neither yes nor no: confirmed, the call runs; declined,
//!   the saga is rolled back. Any other approval ends the task with the
//!   pending-approval outcome and its saga rolled back (nothing ran, and
//!   nothing but the task could continue it): the same principal's
//!   identical call later claims the approval and runs once.
//! - A cancel before the call returned drops the call (the tool's instance
//!   with it) and recovers the saga from its log as after a crash
//!   ([`TaskEnd::Cancelled`]).
//! - Otherwise the saga ends with the call by the server's rule
//!   ([`SessionEnd`]).
//!
//! The task's record (status, result, questions, cancel requests, the
//! sweep of tasks whose host stopped) is the server's: it is the
//! protocol's state, kept in the store by `capsaga-server`.

use super::{Held, SessionEnd};
use crate::dispatch::{
    Act, Args, Call, DispatchError, Dispatcher, Outcome, ScopeError, Submitted, Via,
};
use crate::store::ApprovalRow;
use async_trait::async_trait;
use capsaga_core::fsm::State;
use capsaga_core::principal::Principal;
use serde_json::Value;

/// Most confirmation rounds of one task before it gives up (answers that
/// neither accept nor decline ask again; rmcp's
/// `DEFAULT_MRTR_MAX_ROUNDS`).
pub const MAX_ROUNDS: usize = 10;

/// How a task asks its client to confirm a call.
#[async_trait]
pub trait Confirmer: Send + Sync {
    /// Ask the client about `approval` (its summary and reason are the
    /// question) and wait for the answer: yes or no, `None` when the
    /// answer was neither (asked again), `Err(message)` when the question
    /// could not be asked (the task fails with `message`).
    async fn confirm(&self, approval: &ApprovalRow) -> Result<Option<bool>, String>;
}

/// The call a task runs.
#[derive(Debug, Clone, Copy)]
pub struct TaskCall<'a> {
    /// The tool.
    pub tool: &'a str,
    /// Its arguments.
    pub args: &'a Value,
    /// The task's principal.
    pub who: &'a Principal,
    /// The client may be asked to confirm (it declared elicitation).
    pub elicits: bool,
}

/// How a task's call ended.
#[derive(Debug)]
pub enum TaskEnd {
    /// The call went through the door (its saga ended with it).
    Ran {
        /// The saga.
        saga_id: String,
        /// The door's answer.
        submitted: Box<Submitted>,
    },
    /// The client declined the call: its approval denied, the saga rolled
    /// back.
    Declined {
        /// The saga.
        saga_id: String,
        /// The approval denied.
        approval_id: String,
        /// The saga's state after the rollback.
        final_state: State,
    },
    /// The door failed, the answer could not be recorded, or no answer
    /// came after [`MAX_ROUNDS`]: why.
    Failed(String),
    /// Cancelled before the call returned: the saga was recovered from its
    /// log.
    Cancelled,
}

/// Run `call` in the task's saga `held` (see the module documentation):
/// stopped when `cancelled` resolves first; the saga ended by `rule` when
/// the call leaves it open.
pub async fn run_task(
    door: &Dispatcher,
    held: Held,
    call: TaskCall<'_>,
    confirmer: &dyn Confirmer,
    cancelled: impl Future<Output = ()>,
    rule: SessionEnd,
) -> TaskEnd {
    let Held { mut saga, hold } = held;
    let saga_id = saga.id().to_string();
    let submitted = {
        let asked = submit_confirmed(door, &mut saga, call, confirmer);
        tokio::select! {
            r = asked => Some(r),
            () = cancelled => None,
        }
    };
    let Some(submitted) = submitted else {
        // The call's future is dropped (the tool's instance with it) before
        // the saga is recovered, so nothing runs behind the recovery.
        drop(saga);
        drop(hold);
        roll_back_cancelled(door, &saga_id, call.who).await;
        return TaskEnd::Cancelled;
    };
    let submitted = match submitted {
        Ok(s) => s,
        Err(end) => return end,
    };
    if saga.state() == State::AwaitingApproval {
        if let Err(e) = door.abort(&mut saga).await {
            tracing::warn!("task: ending saga {saga_id} parked for an operator: {e}");
        }
    } else if !saga.state().is_terminal() {
        super::end::by_rule(door, saga, rule).await;
    }
    drop(hold);
    TaskEnd::Ran {
        saga_id,
        submitted: Box::new(submitted),
    }
}

/// The call submitted, with the client's confirmation rounds; `Err`: how
/// the task ends here (a door error, a declined call).
async fn submit_confirmed(
    door: &Dispatcher,
    saga: &mut crate::saga::Saga,
    call: TaskCall<'_>,
    confirmer: &dyn Confirmer,
) -> Result<Submitted, TaskEnd> {
    let failed = |e: &dyn std::fmt::Display| TaskEnd::Failed(e.to_string());
    let (name, who) = (call.tool, call.who);
    let saga_id = saga.id().to_string();
    let mut rounds = 0;
    let mut submitted = door
        .submit(saga, Call::new(name, Args::Value(call.args)))
        .await
        .map_err(|e| failed(&e))?;
    while let Outcome::AwaitingApproval {
        approval,
        denied_by: None,
        ..
    } = &submitted.outcome
        && call.elicits
        && door.may_confirm(name, who)
    {
        let approval_id = approval.approval_id.clone();
        let answer = confirmer.confirm(approval).await.map_err(TaskEnd::Failed)?;
        let Some(yes) = answer else {
            rounds += 1;
            if rounds < MAX_ROUNDS {
                continue;
            }
            return Err(TaskEnd::Failed(
                "no answer to the confirmation after the most rounds".into(),
            ));
        };
        door.confirm(&approval_id, yes, who)
            .await
            .map_err(|e| failed(&e))?;
        if !yes {
            return Err(match door.abort(saga).await {
                Ok(report) => TaskEnd::Declined {
                    saga_id,
                    approval_id,
                    final_state: report.final_state,
                },
                Err(e) => failed(&e),
            });
        }
        submitted = door
            .submit(saga, Call::new(name, Args::Value(call.args)))
            .await
            .map_err(|e| failed(&e))?;
    }
    Ok(submitted)
}

/// Recover a cancelled task's saga from its log, as after a crash: the
/// step fails and what it wrote is compensated.
async fn roll_back_cancelled(door: &Dispatcher, saga_id: &str, who: &Principal) {
    match door.reopen(saga_id, Via::Task, Act::Rollback, who).await {
        Ok((mut saga, _hold)) => {
            if let Err(e) = door.recover(&mut saga).await {
                tracing::warn!("cancelled task: recovering saga {saga_id}: {e}");
            }
        }
        // Ended with its run (nothing to undo).
        Err(DispatchError::Scope(ScopeError::Ended(_))) => {}
        Err(e) => tracing::warn!("cancelled task: re-opening saga {saga_id}: {e}"),
    }
}
