//! The tasks extension (`io.modelcontextprotocol/tasks`, SEP-2663) on the
//! stateless revision: a long tool call of a client that declared the
//! extension in its `_meta` becomes a task, a saga of one step run in the
//! background; the `tools/call` answers at once with the task
//! (`resultType: "task"`), and the client polls `tasks/get`.
//!
//! - Long: `code_run`, `shell_run`, a tool with a `net:` grant (a slow
//!   HTTP call) or a deadline above the default 10 s ([`is_long`]).
//! - The task is the saga's step: it runs through the door like any call
//!   (policy, approvals), and survives the client disconnecting (it is not
//!   the request's future). A call that needs an approval the client may
//!   give (the policy's `[approvals] client_confirm`, a client that
//!   declared elicitation: the rule of `super::confirm`) parks the task in
//!   `input_required` with the question; the client answers with
//!   `tasks/update`, its decision is recorded as the stateless revision's
//!   is, and the call runs (accepted) or the saga rolls back (declined).
//!   Any other approval ends the task `completed` with the
//!   pending-approval result (an operator decides), and the task's saga
//!   ends with its task (rolled back: nothing ran; one saga, one scope,
//!   and the task is gone): once an operator approved, the same
//!   principal's identical call (a new task, or any other of its calls)
//!   claims the approval and runs once.
//! - The task's saga is the task's (`dispatch::scope`, `Scope::Task`): held
//!   by its run while it runs, never continued, committed or rolled back
//!   through a saga handle or any other scope.
//! - `tasks/cancel` aborts the call (its future, the tool's instance with
//!   it, is dropped), then the saga is recovered from its log as after a
//!   crash: the step FAILs and what the saga committed is compensated; the
//!   task ends `cancelled`. Cancelling a finished task is acknowledged and
//!   changes nothing.
//! - A task belongs to the principal that created it: another principal's
//!   task id is answered like an unknown one (`-32602`).
//! - `tasks/update` delivers answers to a task in `input_required` (SEP-2663
//!   with SEP-2322's `inputResponses`): the keys it answers leave
//!   `inputRequests`; once none is left the task resumes (`working`). It
//!   is acknowledged with an empty result; a task not waiting for input,
//!   or an answer that is not an object, is refused (`-32602`).
//! - Tasks live in this server's memory ([`MAX_TASKS`], kept [`TTL`] after
//!   they end); the saga itself is in the store.

use super::McpShared;
use crate::tools;
use capsaga_core::principal::Principal;
use capsaga_door::dispatch::{Act, Args, Call, DispatchError, Hold, Scope, Via};
use rmcp::ErrorData as McpError;
use rmcp::model::{
    CreateTaskResult, DetailedTask, GetTaskResult, InputRequests, InputResponses, JsonObject, Task,
    TaskPayload, TaskStatus,
};
use serde_json::Value;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Most tasks held (finished ones are dropped first, oldest first).
pub const MAX_TASKS: usize = 10_000;
/// How long a task stays readable, from its creation.
pub const TTL: Duration = Duration::from_secs(3600);
/// The poll interval suggested to clients.
pub const POLL_MS: u64 = 500;
/// Most input rounds of one task's confirmation before it gives up
/// (rmcp's `DEFAULT_MRTR_MAX_ROUNDS`: answers that neither accept nor
/// decline keep asking).
pub const MAX_ROUNDS: usize = 10;

/// A task waiting for its client's input: the requests not answered yet,
/// the answers so far, and the work waiting for them.
struct Wait {
    pending: InputRequests,
    answers: InputResponses,
    resume: Option<tokio::sync::oneshot::Sender<InputResponses>>,
}

struct Entry {
    owner: String,
    /// The saga of a capsaga call (none for a conformance fixture's task).
    saga_id: Option<String>,
    created: Instant,
    created_at: String,
    updated_at: String,
    payload: TaskPayload,
    run: Option<tokio::task::JoinHandle<()>>,
    wait: Option<Wait>,
}

/// The tasks of one server.
#[derive(Default)]
pub struct Tasks {
    table: Mutex<HashMap<String, Entry>>,
}

impl std::fmt::Debug for Tasks {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Tasks").finish_non_exhaustive()
    }
}

fn now() -> String {
    capsaga_store::clock::now_rfc3339()
}

fn unknown() -> McpError {
    McpError::invalid_params("no such task", None)
}

fn task_of(id: &str, e: &Entry) -> Task {
    let t = Task::new(id, e.payload.status(), &e.created_at, &e.updated_at)
        .with_ttl_ms(TTL.as_millis() as u64)
        .with_poll_interval_ms(POLL_MS);
    match &e.saga_id {
        Some(s) => t.with_status_message(format!("saga {s}")),
        None => t,
    }
}

/// Whether a call of `tool` is long enough to run as a task.
pub fn is_long(shared: &McpShared, tool: &str) -> bool {
    if matches!(tool, "code_run" | "shell_run") {
        return true;
    }
    let host = shared.live.host();
    let Some(t) = host.registry.get(tool) else {
        return false;
    };
    t.section(&host.config.policy).is_some_and(|s| {
        s.limits.deadline_ms > 10_000 || s.grants.iter().any(|g| g.kind() == "net")
    })
}

impl Tasks {
    fn set(&self, id: &str, payload: TaskPayload) {
        if let Ok(mut t) = self.table.lock()
            && let Some(e) = t.get_mut(id)
            && !e.payload.status().is_terminal()
        {
            e.payload = payload;
            e.updated_at = now();
            e.wait = None;
        }
    }

    /// Park task `id` in `input_required` with `requests` until
    /// `tasks/update` answered every one; the answers. `None` when the
    /// task is gone or ended (cancelled: its work is dropped anyway).
    pub async fn ask(&self, id: &str, requests: InputRequests) -> Option<InputResponses> {
        let rx = {
            let mut t = self.table.lock().ok()?;
            let e = t.get_mut(id)?;
            if e.payload.status().is_terminal() {
                return None;
            }
            let (tx, rx) = tokio::sync::oneshot::channel();
            e.payload = TaskPayload::InputRequired {
                input_requests: requests.clone(),
            };
            e.updated_at = now();
            e.wait = Some(Wait {
                pending: requests,
                answers: InputResponses::new(),
                resume: Some(tx),
            });
            rx
        };
        rx.await.ok()
    }

    /// `tasks/update` of `id` for `who`: record the answers to requests
    /// still pending (other keys are ignored); once none is pending, the
    /// task resumes with every answer.
    ///
    /// # Errors
    /// `-32602` for an unknown task or another principal's, a task not
    /// waiting for input, an answer that is not a JSON object.
    pub fn update(
        &self,
        id: &str,
        who: &Principal,
        responses: InputResponses,
    ) -> Result<(), McpError> {
        if let Some((k, _)) = responses.iter().find(|(_, v)| !v.is_object()) {
            return Err(McpError::invalid_params(
                format!("inputResponses[{k:?}] is not an object"),
                None,
            ));
        }
        let mut t = self.table.lock().map_err(|_| unknown())?;
        let e = t
            .get_mut(id)
            .filter(|e| e.owner == who.name)
            .ok_or_else(unknown)?;
        let waiting = e.payload.status() == TaskStatus::InputRequired;
        let Some(w) = e.wait.as_mut().filter(|_| waiting) else {
            return Err(McpError::invalid_params(
                "the task is not waiting for input",
                None,
            ));
        };
        for (k, v) in responses {
            if w.pending.remove(&k).is_some() {
                w.answers.insert(k, v);
            }
        }
        if w.pending.is_empty() {
            let answers = std::mem::take(&mut w.answers);
            if let Some(tx) = w.resume.take() {
                let _ = tx.send(answers);
            }
            e.wait = None;
            e.payload = TaskPayload::Working;
        } else {
            e.payload = TaskPayload::InputRequired {
                input_requests: w.pending.clone(),
            };
        }
        e.updated_at = now();
        Ok(())
    }

    fn make_room(t: &mut HashMap<String, Entry>) -> bool {
        t.retain(|_, e| e.created.elapsed() < TTL || !e.payload.status().is_terminal());
        if t.len() < MAX_TASKS {
            return true;
        }
        let oldest = t
            .iter()
            .filter(|(_, e)| e.payload.status().is_terminal())
            .min_by_key(|(_, e)| e.created)
            .map(|(k, _)| k.clone());
        match oldest {
            Some(k) => {
                t.remove(&k);
                true
            }
            None => false,
        }
    }

    /// A new entry for `owner`, working; its id.
    fn insert(&self, owner: &str, saga_id: Option<String>) -> Result<(String, String), McpError> {
        let id = uuid::Uuid::new_v4().to_string();
        let at = now();
        let mut t = self
            .table
            .lock()
            .map_err(|_| McpError::internal_error("task table poisoned", None))?;
        if !Tasks::make_room(&mut t) {
            return Err(McpError::internal_error(
                "too many running tasks: retry later",
                None,
            ));
        }
        t.insert(
            id.clone(),
            Entry {
                owner: owner.to_string(),
                saga_id,
                created: Instant::now(),
                created_at: at.clone(),
                updated_at: at.clone(),
                payload: TaskPayload::Working,
                run: None,
                wait: None,
            },
        );
        Ok((id, at))
    }

    /// Run `work` as a task of `owner` (a conformance fixture's: no saga);
    /// it gets the [`Asker`] of its task.
    ///
    /// # Errors
    /// The table is full of running tasks.
    pub fn spawn<F, Fut>(
        shared: &Arc<McpShared>,
        owner: &str,
        work: F,
    ) -> Result<CreateTaskResult, McpError>
    where
        F: FnOnce(Asker) -> Fut + Send + 'static,
        Fut: std::future::Future<Output = TaskPayload> + Send + 'static,
    {
        let (id, at) = shared.tasks.insert(owner, None)?;
        let (s, task_id) = (shared.clone(), id.clone());
        let (go, ready) = tokio::sync::oneshot::channel::<()>();
        let handle = tokio::spawn(async move {
            let _ = ready.await;
            let asker = Asker {
                shared: s.clone(),
                id: task_id.clone(),
            };
            let payload = work(asker).await;
            s.tasks.set(&task_id, payload);
        });
        if let Ok(mut t) = shared.tasks.table.lock()
            && let Some(e) = t.get_mut(&id)
        {
            e.run = Some(handle);
        }
        let _ = go.send(());
        Ok(CreateTaskResult::new(
            Task::new(&id, TaskStatus::Working, &at, &at)
                .with_ttl_ms(TTL.as_millis() as u64)
                .with_poll_interval_ms(POLL_MS),
        ))
    }

    /// Start `tool` with `args` for `who` as a task: a new saga, its one
    /// step run in the background; `elicits`: the client declared
    /// elicitation (so it may be asked to confirm the call).
    ///
    /// # Errors
    /// The saga could not start; the table is full of running tasks.
    pub async fn start(
        shared: &Arc<McpShared>,
        who: &Principal,
        tool: &str,
        args: Value,
        elicits: bool,
    ) -> Result<CreateTaskResult, McpError> {
        let door = shared.door();
        let label = format!("mcp task ({tool})");
        let (mut saga, hold) = door
            .open(who, Scope::Task, &label, None)
            .await
            .map_err(|e| McpError::internal_error(e.to_string(), None))?;
        door.set_autonomy(&mut saga, shared.autonomy());
        let saga_id = saga.id().to_string();
        let (id, at) = shared.tasks.insert(&who.name, Some(saga_id.clone()))?;
        let (s, task_id, name) = (shared.clone(), id.clone(), tool.to_string());
        let who = who.clone();
        let (go, ready) = tokio::sync::oneshot::channel::<()>();
        let handle = tokio::spawn(async move {
            // Run only once the abort handle is recorded.
            let _ = ready.await;
            let asker = Asker {
                shared: s.clone(),
                id: task_id.clone(),
            };
            let payload = run_call(&asker, (saga, hold), &name, &args, &who, elicits).await;
            s.tasks.set(&task_id, payload);
        });
        if let Ok(mut t) = shared.tasks.table.lock()
            && let Some(e) = t.get_mut(&id)
        {
            e.run = Some(handle);
        }
        let _ = go.send(());
        let task = Task::new(&id, TaskStatus::Working, &at, &at)
            .with_ttl_ms(TTL.as_millis() as u64)
            .with_poll_interval_ms(POLL_MS);
        Ok(CreateTaskResult::new(task))
    }

    /// `tasks/get` of `id` for `who`.
    ///
    /// # Errors
    /// `-32602` for an unknown task or another principal's.
    pub fn get(&self, id: &str, who: &Principal) -> Result<GetTaskResult, McpError> {
        let t = self.table.lock().map_err(|_| unknown())?;
        let e = t
            .get(id)
            .filter(|e| e.owner == who.name)
            .ok_or_else(unknown)?;
        Ok(GetTaskResult::new(DetailedTask::new(
            task_of(id, e),
            e.payload.clone(),
        )))
    }

    /// `tasks/cancel` of `id` for `who`: abort the call and recover its
    /// saga from the log (the step fails, compensation follows).
    ///
    /// # Errors
    /// `-32602` for an unknown task or another principal's.
    pub async fn cancel(shared: &McpShared, id: &str, who: &Principal) -> Result<(), McpError> {
        let (abort, saga_id) = {
            let mut t = shared.tasks.table.lock().map_err(|_| unknown())?;
            let e = t
                .get_mut(id)
                .filter(|e| e.owner == who.name)
                .ok_or_else(unknown)?;
            if e.payload.status().is_terminal() {
                return Ok(());
            }
            e.payload = TaskPayload::Cancelled;
            e.updated_at = now();
            (e.run.take(), e.saga_id.clone())
        };
        // The call's future is dropped (and with it the tool's instance)
        // before the saga is recovered, so nothing runs behind the
        // recovery.
        if let Some(run) = abort {
            run.abort();
            let _ = run.await;
        }
        let Some(saga_id) = saga_id else {
            return Ok(());
        };
        let door = shared.door();
        match door.reopen(&saga_id, Via::Task, Act::Rollback, who).await {
            Ok((mut saga, _hold)) => {
                if let Err(e) = door.recover(&mut saga).await {
                    tracing::warn!("cancelled task: recovering saga {saga_id}: {e}");
                }
            }
            // Ended with its run (nothing to undo).
            Err(DispatchError::Scope(capsaga_door::dispatch::ScopeError::Ended(_))) => {}
            Err(e) => tracing::warn!("cancelled task: re-opening saga {saga_id}: {e}"),
        }
        Ok(())
    }
}

/// What a task's work uses to wait for its client's input.
pub struct Asker {
    shared: Arc<McpShared>,
    id: String,
}

impl Asker {
    /// Park the task with `requests` until the client answered them all
    /// (`tasks/update`); the answers, `None` when the task ended.
    pub async fn ask(&self, requests: InputRequests) -> Option<InputResponses> {
        self.shared.tasks.ask(&self.id, requests).await
    }
}

/// The work of a capsaga task: the call through the door in `saga` (held
/// by the task while it runs); a confirmation the client may give asked
/// through the task (see the module doc); the saga ended with the task
/// (rolled back when it waits for an operator: nothing ran, and nothing
/// but the task could continue it).
async fn run_call(
    asker: &Asker,
    held: (capsaga_door::saga::Saga, Hold),
    name: &str,
    args: &Value,
    who: &Principal,
    elicits: bool,
) -> TaskPayload {
    use capsaga_door::dispatch::Outcome;
    let (mut saga, hold) = held;
    let s = &asker.shared;
    let door = s.door();
    let saga_id = saga.id().to_string();
    let mut rounds = 0;
    let mut submitted = match door
        .submit(&mut saga, Call::new(name, Args::Value(args)))
        .await
    {
        Ok(x) => x,
        Err(e) => return failed(&e),
    };
    while let Outcome::AwaitingApproval {
        approval,
        denied_by: None,
        ..
    } = &submitted.outcome
        && elicits
        && door.may_confirm(name, who)
    {
        let question = match super::confirm::question(
            &approval.summary,
            &approval.reason,
            &approval.approval_id,
        ) {
            Ok(q) => q,
            Err(e) => return failed_with(&e.message),
        };
        let approval_id = approval.approval_id.clone();
        let answers = asker.ask(question).await;
        let Some(yes) = super::confirm::answer(answers.as_ref()) else {
            rounds += 1;
            if rounds < MAX_ROUNDS {
                continue;
            }
            return failed_with("no answer to the confirmation after the most rounds");
        };
        if let Err(e) = door.confirm(&approval_id, yes, who).await {
            return failed_with(&e.to_string());
        }
        if !yes {
            return match door.abort(&mut saga).await {
                Ok(report) => complete(tools::result(
                    format!(
                        "you declined the call: approval {approval_id} denied, saga {saga_id} rolled back (state {})",
                        report.final_state
                    ),
                    true,
                    Some(serde_json::json!({"saga_id": saga_id, "approval_status": "denied"})),
                )),
                Err(e) => failed(&e),
            };
        }
        submitted = match door
            .submit(&mut saga, Call::new(name, Args::Value(args)))
            .await
        {
            Ok(x) => x,
            Err(e) => return failed(&e),
        };
    }
    let out = tools::outcome(name, &saga_id, &submitted);
    if saga.state() == capsaga_core::fsm::State::AwaitingApproval {
        if let Err(e) = door.abort(&mut saga).await {
            tracing::warn!("task: ending saga {saga_id} parked for an operator: {e}");
        }
    } else if !saga.state().is_terminal() {
        super::end_saga(s, saga, Some(hold)).await;
    }
    complete(out)
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

fn failed_with(message: &str) -> TaskPayload {
    let mut error = JsonObject::new();
    error.insert("code".into(), (-32603).into());
    error.insert("message".into(), message.into());
    TaskPayload::Failed { error }
}
