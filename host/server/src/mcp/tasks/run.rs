//! A task's run in the process that started it: the call through the door
//! in the task's saga, the client's confirmation asked through the task,
//! and a cancel (asked on any host) that stops the call while it has not
//! returned and recovers the saga.

use super::{McpShared, Tasks, cancelled};
use crate::tools;
use capsaga_core::principal::Principal;
use capsaga_door::dispatch::{Act, Args, Call as DoorCall, DispatchError, Hold, Submitted, Via};
use capsaga_door::saga::Saga;
use rmcp::model::{InputRequests, InputResponses, JsonObject, TaskPayload};
use serde_json::Value;
use std::sync::Arc;
use tokio::sync::{Notify, watch};

/// What a task's work uses to wait for its client's input.
pub struct Asker {
    shared: Arc<McpShared>,
    id: String,
    answered: Arc<Notify>,
}

impl Asker {
    pub(super) fn new(shared: Arc<McpShared>, id: &str, answered: Arc<Notify>) -> Asker {
        Asker {
            shared,
            id: id.to_string(),
            answered,
        }
    }

    /// Park the task with `requests` until the client answered them all
    /// (`tasks/update`, on any host); the answers, `None` when the task
    /// ended. Once a cancel was asked it never answers: the work is
    /// dropped and the task ends `cancelled`.
    pub async fn ask(&self, requests: InputRequests) -> Option<InputResponses> {
        Tasks::ask(&self.shared, &self.id, &self.answered, requests).await
    }
}

/// The call a task runs.
pub(super) struct Call {
    pub name: String,
    pub args: Value,
    pub who: Principal,
    /// The client declared elicitation (it may be asked to confirm).
    pub elicits: bool,
}

/// The work of a capsaga task: the call through the door in `saga` (held
/// by the task while it runs); a confirmation the client may give asked
/// through the task (see the module doc); the saga ended with the task
/// (rolled back when it waits for an operator: nothing ran, and nothing
/// but the task could continue it). A cancel before the call returned
/// drops the call and recovers the saga: `cancelled`.
pub(super) async fn run_call(
    asker: &Asker,
    mut cancel: watch::Receiver<bool>,
    held: (Saga, Hold),
    call: &Call,
) -> TaskPayload {
    let (mut saga, hold) = held;
    let saga_id = saga.id().to_string();
    let submitted = {
        let asked = submit_confirmed(asker, &mut saga, call);
        tokio::pin!(asked);
        tokio::select! {
            r = &mut asked => Some(r),
            () = cancelled(&mut cancel) => None,
        }
    };
    let Some(submitted) = submitted else {
        // The call's future is dropped (the tool's instance with it) before
        // the saga is recovered, so nothing runs behind the recovery.
        drop(saga);
        drop(hold);
        roll_back_cancelled(&asker.shared, &saga_id, &call.who).await;
        return TaskPayload::Cancelled;
    };
    let submitted = match submitted {
        Ok(s) => s,
        Err(payload) => return payload,
    };
    let s = &asker.shared;
    let door = s.door();
    let out = tools::outcome(&call.name, &saga_id, &submitted);
    if saga.state() == capsaga_core::fsm::State::AwaitingApproval {
        if let Err(e) = door.abort(&mut saga).await {
            tracing::warn!("task: ending saga {saga_id} parked for an operator: {e}");
        }
    } else if !saga.state().is_terminal() {
        super::super::end_saga(s, saga, Some(hold)).await;
    }
    complete(out)
}

/// The call submitted, with the client's confirmation rounds; `Err`: the
/// task's payload when it ends here (a door error, a declined call).
async fn submit_confirmed(
    asker: &Asker,
    saga: &mut Saga,
    call: &Call,
) -> Result<Submitted, TaskPayload> {
    use capsaga_door::dispatch::Outcome;
    let (name, args, who) = (call.name.as_str(), &call.args, &call.who);
    let door = asker.shared.door();
    let saga_id = saga.id().to_string();
    let mut rounds = 0;
    let mut submitted = door
        .submit(saga, DoorCall::new(name, Args::Value(args)))
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
        let question = super::super::confirm::question(
            &approval.summary,
            &approval.reason,
            &approval.approval_id,
        )
        .map_err(|e| failed_with(&e.message))?;
        let approval_id = approval.approval_id.clone();
        let answers = asker.ask(question).await;
        let Some(yes) = super::super::confirm::answer(answers.as_ref()) else {
            rounds += 1;
            if rounds < super::MAX_ROUNDS {
                continue;
            }
            return Err(failed_with(
                "no answer to the confirmation after the most rounds",
            ));
        };
        door.confirm(&approval_id, yes, who)
            .await
            .map_err(|e| failed_with(&e.to_string()))?;
        if !yes {
            return Err(match door.abort(saga).await {
                Ok(report) => complete(tools::result(
                    format!(
                        "you declined the call: approval {approval_id} denied, saga {saga_id} rolled back (state {})",
                        report.final_state
                    ),
                    true,
                    Some(serde_json::json!({"saga_id": saga_id, "approval_status": "denied"})),
                )),
                Err(e) => failed(&e),
            });
        }
        submitted = door
            .submit(saga, DoorCall::new(name, Args::Value(args)))
            .await
            .map_err(|e| failed(&e))?;
    }
    Ok(submitted)
}

/// Recover a cancelled task's saga from its log, as after a crash: the
/// step fails and what it wrote is compensated.
async fn roll_back_cancelled(shared: &McpShared, saga_id: &str, who: &Principal) {
    let door = shared.door();
    match door.reopen(saga_id, Via::Task, Act::Rollback, who).await {
        Ok((mut saga, _hold)) => {
            if let Err(e) = door.recover(&mut saga).await {
                tracing::warn!("cancelled task: recovering saga {saga_id}: {e}");
            }
        }
        // Ended with its run (nothing to undo).
        Err(DispatchError::Scope(capsaga_door::dispatch::ScopeError::Ended(_))) => {}
        Err(e) => tracing::warn!("cancelled task: re-opening saga {saga_id}: {e}"),
    }
}

/// A finished task's payload: the complete tool result `out`.
pub fn complete(out: Value) -> TaskPayload {
    let mut result: JsonObject = match out {
        Value::Object(m) => m,
        _ => JsonObject::new(),
    };
    result.insert("resultType".into(), "complete".into());
    TaskPayload::Completed { result }
}

fn failed(e: &DispatchError) -> TaskPayload {
    failed_with(&e.to_string())
}

/// A failed task's payload: an internal error with `message`.
pub(super) fn failed_with(message: &str) -> TaskPayload {
    let mut error = JsonObject::new();
    error.insert("code".into(), (-32603).into());
    error.insert("message".into(), message.into());
    TaskPayload::Failed { error }
}
