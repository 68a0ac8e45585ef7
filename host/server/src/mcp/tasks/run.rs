//! A task's run in the process that started it: the door's run of the
//! task's saga (`capsaga_door::scope::run_task`), the client's
//! confirmation asked through the task ([`Asker`] as the door's
//! `Confirmer`), and a cancel (asked on any host) that stops the call
//! while it has not returned.

use super::super::confirm;
use super::{McpShared, Tasks, cancelled};
use crate::tools;
use async_trait::async_trait;
use capsaga_core::principal::Principal;
use capsaga_door::scope::{Confirmer, Held, TaskCall, TaskEnd, run_task};
use capsaga_store::ApprovalRow;
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

#[async_trait]
impl Confirmer for Asker {
    /// The client asked through the task (its `input_required` status),
    /// its answer read from `tasks/update`.
    async fn confirm(&self, approval: &ApprovalRow) -> Result<Option<bool>, String> {
        let question =
            confirm::question(&approval.summary, &approval.reason, &approval.approval_id)
                .map_err(|e| e.message.to_string())?;
        let answers = self.ask(question).await;
        Ok(confirm::answer(answers.as_ref()))
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

/// The work of a capsaga task: the door's run of a task's saga
/// (`capsaga_door::scope::run_task`: the call, the confirmation rounds
/// through the task, the saga ended with the task or recovered when
/// cancelled), as the task's payload.
pub(super) async fn run_call(
    asker: &Asker,
    mut cancel: watch::Receiver<bool>,
    held: Held,
    call: &Call,
) -> TaskPayload {
    let door = asker.shared.door();
    let task = TaskCall {
        tool: &call.name,
        args: &call.args,
        who: &call.who,
        elicits: call.elicits,
    };
    let rule = asker.shared.session_end;
    // Boxed: the compiler proves the run `Send` here, once, instead of
    // through every future around it (its nesting is deep).
    let run: std::pin::Pin<Box<dyn Future<Output = TaskEnd> + Send + '_>> = Box::pin(run_task(
        &door,
        held,
        task,
        asker,
        cancelled(&mut cancel),
        rule,
    ));
    match run.await {
        TaskEnd::Ran { saga_id, submitted } => {
            complete(tools::outcome(&call.name, &saga_id, &submitted))
        }
        TaskEnd::Declined {
            saga_id,
            approval_id,
            final_state,
        } => complete(tools::declined_result(&approval_id, &saga_id, final_state)),
        TaskEnd::Failed(message) => failed_with(&message),
        TaskEnd::Cancelled => TaskPayload::Cancelled,
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

/// A failed task's payload: an internal error with `message`.
pub(super) fn failed_with(message: &str) -> TaskPayload {
    let mut error = JsonObject::new();
    error.insert("code".into(), (-32603).into());
    error.insert("message".into(), message.into());
    TaskPayload::Failed { error }
}
