//! The tasks extension (`io.modelcontextprotocol/tasks`, SEP-2663) on the
//! stateless revision: a long tool call of a client that declared the
//! extension in its `_meta` becomes a task, a saga of one step run in the
//! background; the `tools/call` answers at once with the task
//! (`resultType: "task"`), and the client polls `tasks/get`.
//!
//! - Long: `code_run`, `shell_run`, a tool with a `net:` grant (a slow
//!   HTTP call) or a deadline above the default 10 s ([`is_long`]).
//! - **Durable, served by any host** (issue 48). A task's record, status,
//!   result, questions and cancel request are a row of the state store
//!   (`capsaga_store::TaskStore`), not this process's memory: `tasks/get`,
//!   `tasks/cancel` and `tasks/update` are answered by any host sharing
//!   the store, and after a restart of the host that ran it. Only the run
//!   itself (the call's future) lives in the process that started it,
//!   which is recorded as the task's owner.
//! - The task is the saga's step: it runs through the door like any call
//!   (policy, approvals) and survives the client disconnecting. A call that
//!   needs an approval the client may give (`[approvals] client_confirm`, a
//!   client that declared elicitation: the rule of `super::confirm`) parks
//!   the task in `input_required` with the question; the client answers
//!   with `tasks/update` (on any host: the answers go into the row, the
//!   running host takes them), and the call runs (accepted) or the saga
//!   rolls back (declined). Any other approval ends the task `completed`
//!   with the pending-approval result (an operator decides) and its saga
//!   rolled back (nothing ran): the same principal's identical call later
//!   claims the approval and runs once.
//! - The task's saga is the task's (`dispatch::scope`, `Scope::Task`).
//! - `tasks/cancel` (any host) records the request in the row; the running
//!   host sees it (at once when it is the host asked, else within
//!   [`WATCH`]) and, while the call has not returned, drops it (the tool's
//!   instance with it) and recovers the saga from its log as after a crash
//!   (the step fails, what it wrote is compensated): the task ends
//!   `cancelled`. A cancel that arrives once the call returned is
//!   acknowledged and the task completes (the extension's cooperative
//!   cancel: the operation decides its terminal status). Every terminal
//!   status is a compare-and-set on the row: written exactly once.
//! - A task whose host stopped (crash, SIGKILL, restart, a lease lost) is
//!   never left `working`: every host's sweep ([`sweep`]) ends the open
//!   tasks whose owner is not alive, once their saga was recovered (the
//!   saga's own recovery: rolled back, compensated from its log): its
//!   status follows the saga, `cancelled` when a cancel was requested,
//!   else `failed`; `completed` (naming the saga) when the saga had
//!   committed before the host stopped.
//! - A task belongs to the principal that created it: the store's read is
//!   scoped to it, and another principal's task id is answered like an
//!   unknown one (`-32602`).
//! - Ended tasks stay readable [`TTL`] after they ended, then are deleted.
//!
//! The task's saga (open, the call with its confirmation rounds, cancel,
//! close) is the door's (`capsaga_door::scope::run_task`); this module
//! keeps the protocol's record of the task. Against rmcp's own
//! `task_manager` (`TaskManager`: spawn, `tasks/get|update|cancel`, TTL,
//! in this process's memory), what capsaga adds and keeps here is what a
//! cluster needs: the record is a row of the shared store (any host
//! answers, a restart loses nothing), its owner is recorded and a sweep
//! ends the tasks of a host that stopped by their saga's state, and every
//! terminal status is a compare-and-set. What rmcp's manager would add
//! beside that (a second, in-memory copy of the status) is what capsaga
//! leaves out: this process keeps only each run's cancel signal and
//! answer bell ([`Tasks`]).

mod record;
mod run;
mod sweep;

pub use run::{Asker, complete};
pub use sweep::watch;

use record::{payload_of, stored, task_of};

use super::McpShared;
use capsaga_core::principal::Principal;
use capsaga_store::{Store, StoreError, TaskRow};
use rmcp::ErrorData as McpError;
use rmcp::model::{
    CreateTaskResult, DetailedTask, GetTaskResult, InputRequests, InputResponses, TaskPayload,
    TaskStatus,
};
use serde_json::Value;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::{Notify, watch};

/// Most tasks running in one process at once.
pub const MAX_TASKS: usize = 10_000;
/// How long an ended task stays readable.
pub const TTL: Duration = Duration::from_secs(3600);
/// The poll interval suggested to clients.
pub const POLL_MS: u64 = 500;
/// Most input rounds of one task's confirmation before it gives up (the
/// door's rule, `capsaga_door::scope::MAX_ROUNDS`).
pub use capsaga_door::scope::MAX_ROUNDS;
/// How often a running task's host reads its rows for a cancel requested
/// or answers given on another host.
pub const WATCH: Duration = Duration::from_millis(200);

/// A task this process runs: how to stop it, how to wake it when answers
/// arrive, its run.
struct Local {
    cancel: watch::Sender<bool>,
    answered: Arc<Notify>,
    run: Option<tokio::task::JoinHandle<()>>,
}

/// The tasks this process runs (the records are in the store).
#[derive(Default)]
pub struct Tasks {
    local: Mutex<HashMap<String, Local>>,
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

fn store_error(e: StoreError) -> McpError {
    McpError::internal_error(format!("task store: {e}"), None)
}

fn store_of(shared: &McpShared) -> Arc<dyn Store> {
    shared.live.host().store.clone()
}

fn owner_of(shared: &McpShared) -> String {
    shared.live.host().owner.id().to_string()
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

/// Wait until `rx` says cancelled; never when its sender is gone.
async fn cancelled(rx: &mut watch::Receiver<bool>) {
    if rx.wait_for(|v| *v).await.is_err() {
        std::future::pending::<()>().await;
    }
}

impl Tasks {
    /// Register a run of this process for task `id`: its cancel signal
    /// and answer bell.
    fn enter(&self, id: &str) -> Result<(watch::Receiver<bool>, Arc<Notify>), McpError> {
        let mut t = self
            .local
            .lock()
            .map_err(|_| McpError::internal_error("task table poisoned", None))?;
        if t.len() >= MAX_TASKS {
            return Err(McpError::internal_error(
                "too many running tasks: retry later",
                None,
            ));
        }
        let (cancel, rx) = watch::channel(false);
        let answered = Arc::new(Notify::new());
        t.insert(
            id.to_string(),
            Local {
                cancel,
                answered: answered.clone(),
                run: None,
            },
        );
        Ok((rx, answered))
    }

    fn leave(&self, id: &str) {
        if let Ok(mut t) = self.local.lock() {
            t.remove(id);
        }
    }

    /// Whether this process runs task `id`.
    fn runs(&self, id: &str) -> bool {
        self.local.lock().is_ok_and(|t| t.contains_key(id))
    }

    /// Tell this process's run of `id` (if any) to stop; its run, to wait
    /// for (`None` when another caller waits for it already).
    fn stop(&self, id: &str) -> Option<tokio::task::JoinHandle<()>> {
        let mut t = self.local.lock().ok()?;
        let l = t.get_mut(id)?;
        let _ = l.cancel.send(true);
        l.run.take()
    }

    /// Wake this process's run of `id` waiting for answers.
    fn ring(&self, id: &str) {
        if let Ok(t) = self.local.lock()
            && let Some(l) = t.get(id)
        {
            l.answered.notify_one();
        }
    }

    /// A new task of `owner` (principal) recorded in the store, run by this
    /// process: its row, its cancel signal and answer bell.
    async fn create(
        shared: &McpShared,
        owner: &str,
        saga_id: Option<String>,
    ) -> Result<(TaskRow, watch::Receiver<bool>, Arc<Notify>), McpError> {
        let id = uuid::Uuid::new_v4().to_string();
        // Entered before the row exists, so the sweep never takes the new
        // row for one whose run is gone.
        let (cancel, answered) = shared.tasks.enter(&id)?;
        let at = now();
        let row = TaskRow {
            task_id: id.clone(),
            principal: owner.to_string(),
            saga_id,
            owner: Some(owner_of(shared)),
            status: "working".into(),
            detail: None,
            answers: None,
            cancel_requested: false,
            created_at: at.clone(),
            updated_at: at,
            version: 1,
        };
        if let Err(e) = store_of(shared).create_task(&row).await {
            shared.tasks.leave(&id);
            return Err(store_error(e));
        }
        Ok((row, cancel, answered))
    }

    /// Start `work` as the run of task `row` in the background: its payload
    /// is recorded when it ends ([`Tasks::finish`]).
    fn launch<Fut>(shared: &Arc<McpShared>, row: &TaskRow, work: Fut) -> CreateTaskResult
    where
        Fut: std::future::Future<Output = TaskPayload> + Send + 'static,
    {
        let (s, id) = (shared.clone(), row.task_id.clone());
        let (go, ready) = tokio::sync::oneshot::channel::<()>();
        let handle = tokio::spawn(async move {
            // Run only once the handle is recorded.
            let _ = ready.await;
            let payload = work.await;
            Tasks::finish(&s, &id, &payload).await;
            s.tasks.leave(&id);
        });
        if let Ok(mut t) = shared.tasks.local.lock()
            && let Some(l) = t.get_mut(&row.task_id)
        {
            l.run = Some(handle);
        }
        let _ = go.send(());
        CreateTaskResult::new(task_of(row, TaskStatus::Working))
    }

    /// Record `payload` as the end of task `id`, unless it ended already
    /// (compare and set: written once). A store that fails is retried
    /// (until it answers or the row is gone); the sweep ends the task if
    /// this process stops first.
    async fn finish(shared: &McpShared, id: &str, payload: &TaskPayload) {
        let store = store_of(shared);
        let (status, detail) = stored(payload);
        let mut pause = Duration::from_millis(50);
        loop {
            let row = match store.task(id).await {
                Ok(Some(r)) => r,
                Ok(None) => return,
                Err(e) => {
                    tracing::warn!(task = %id, "recording the task's end: {e} (retried)");
                    tokio::time::sleep(pause).await;
                    pause = (pause * 2).min(Duration::from_secs(5));
                    continue;
                }
            };
            if row.is_terminal() {
                return;
            }
            let mut next = row;
            next.status = status.into();
            next.detail = detail.clone();
            next.answers = None;
            next.updated_at = now();
            match store.put_task(&next).await {
                Ok(true) => return,
                Ok(false) => continue,
                Err(e) => {
                    tracing::warn!(task = %id, "recording the task's end: {e} (retried)");
                    tokio::time::sleep(pause).await;
                    pause = (pause * 2).min(Duration::from_secs(5));
                }
            }
        }
    }

    /// Run `work` as a task of `owner` (a conformance fixture's: no saga);
    /// it gets the [`Asker`] of its task. A cancel drops it: the task ends
    /// `cancelled`.
    ///
    /// # Errors
    /// Too many running tasks; the store.
    pub async fn spawn<F, Fut>(
        shared: &Arc<McpShared>,
        owner: &str,
        work: F,
    ) -> Result<CreateTaskResult, McpError>
    where
        F: FnOnce(Asker) -> Fut + Send + 'static,
        Fut: std::future::Future<Output = TaskPayload> + Send + 'static,
    {
        let (row, mut cancel, answered) = Tasks::create(shared, owner, None).await?;
        let asker = Asker::new(shared.clone(), &row.task_id, answered);
        let work = async move {
            tokio::select! {
                p = work(asker) => p,
                () = cancelled(&mut cancel) => TaskPayload::Cancelled,
            }
        };
        Ok(Tasks::launch(shared, &row, work))
    }

    /// Start `tool` with `args` for `who` as a task: a new saga, its one
    /// step run in the background; `elicits`: the client declared
    /// elicitation (so it may be asked to confirm the call).
    ///
    /// # Errors
    /// The saga could not start; too many running tasks; the store.
    pub async fn start(
        shared: &Arc<McpShared>,
        who: &Principal,
        tool: &str,
        args: Value,
        elicits: bool,
    ) -> Result<CreateTaskResult, McpError> {
        let door = shared.door();
        let label = format!("mcp task ({tool})");
        let task = capsaga_door::dispatch::Scope::Task;
        let mut held = capsaga_door::scope::open(&door, who, task, &label, shared.autonomy())
            .await
            .map_err(|e| McpError::internal_error(e.to_string(), None))?;
        let saga_id = held.saga.id().to_string();
        let (row, cancel, answered) = match Tasks::create(shared, &who.name, Some(saga_id)).await {
            Ok(x) => x,
            Err(e) => {
                // Nothing ran: the saga ends with the task that never was.
                if let Err(a) = door.abort(&mut held.saga).await {
                    tracing::warn!("task not created: ending its saga: {a}");
                }
                return Err(e);
            }
        };
        let asker = Asker::new(shared.clone(), &row.task_id, answered);
        let call = run::Call {
            name: tool.to_string(),
            args,
            who: who.clone(),
            elicits,
        };
        let work = async move { run::run_call(&asker, cancel, held, &call).await };
        Ok(Tasks::launch(shared, &row, work))
    }

    /// `tasks/get` of `id` for `who` (any host).
    ///
    /// # Errors
    /// `-32602` for an unknown task or another principal's; the store.
    pub async fn get(
        shared: &McpShared,
        id: &str,
        who: &Principal,
    ) -> Result<GetTaskResult, McpError> {
        let row = store_of(shared)
            .task_of(id, &who.name)
            .await
            .map_err(store_error)?
            .ok_or_else(unknown)?;
        let payload = payload_of(&row)?;
        Ok(GetTaskResult::new(DetailedTask::new(
            task_of(&row, payload.status()),
            payload,
        )))
    }

    /// `tasks/cancel` of `id` for `who` (any host): the request recorded;
    /// when this process runs the task, its call is stopped and its saga
    /// recovered before the answer; a task whose host is gone is ended now.
    ///
    /// # Errors
    /// `-32602` for an unknown task or another principal's; the store.
    pub async fn cancel(shared: &McpShared, id: &str, who: &Principal) -> Result<(), McpError> {
        let store = store_of(shared);
        let row = loop {
            let row = store
                .task_of(id, &who.name)
                .await
                .map_err(store_error)?
                .ok_or_else(unknown)?;
            if row.is_terminal() {
                return Ok(());
            }
            if row.cancel_requested {
                break row;
            }
            let mut next = row.clone();
            next.cancel_requested = true;
            next.updated_at = now();
            if store.put_task(&next).await.map_err(store_error)? {
                next.version += 1;
                break next;
            }
        };
        if let Some(run) = shared.tasks.stop(id) {
            let _ = run.await;
        } else if !shared.tasks.runs(id) {
            sweep::settle_if_orphaned(shared, &row).await;
        }
        Ok(())
    }

    /// `tasks/update` of `id` for `who` (any host): record the answers to
    /// questions still pending (other keys are ignored); once none is
    /// pending, the task is `working` again and its run takes every
    /// answer.
    ///
    /// # Errors
    /// `-32602` for an unknown task or another principal's, a task not
    /// waiting for input, an answer that is not a JSON object; the store.
    pub async fn update(
        shared: &McpShared,
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
        let store = store_of(shared);
        loop {
            let row = store
                .task_of(id, &who.name)
                .await
                .map_err(store_error)?
                .ok_or_else(unknown)?;
            let TaskPayload::InputRequired {
                input_requests: mut pending,
            } = payload_of(&row)?
            else {
                return Err(McpError::invalid_params(
                    "the task is not waiting for input",
                    None,
                ));
            };
            let mut answers: InputResponses = row
                .answers
                .as_deref()
                .and_then(|a| serde_json::from_str(a).ok())
                .unwrap_or_default();
            for (k, v) in &responses {
                if pending.remove(k).is_some() {
                    answers.insert(k.clone(), v.clone());
                }
            }
            let mut next = row;
            if pending.is_empty() {
                next.status = "working".into();
                next.detail = None;
            } else {
                next.detail = serde_json::to_string(&pending).ok();
            }
            next.answers = serde_json::to_string(&answers).ok();
            next.updated_at = now();
            if store.put_task(&next).await.map_err(store_error)? {
                break;
            }
        }
        shared.tasks.ring(id);
        Ok(())
    }

    /// Park task `id` in `input_required` with `requests` until
    /// `tasks/update` (on any host) answered every one; the answers.
    /// `None` when the task is gone or ended; never once a cancel was
    /// asked (the run is stopped instead, [`Tasks::stop`]).
    async fn ask(
        shared: &McpShared,
        id: &str,
        answered: &Notify,
        requests: InputRequests,
    ) -> Option<InputResponses> {
        let store = store_of(shared);
        let detail = serde_json::to_string(&requests).ok()?;
        loop {
            let row = match store.task(id).await {
                Ok(Some(r)) => r,
                Ok(None) => return None,
                Err(_) => {
                    tokio::time::sleep(WATCH).await;
                    continue;
                }
            };
            if row.is_terminal() {
                return None;
            }
            if row.cancel_requested {
                // The run is told to stop (by the canceller or the watch):
                // no new question meanwhile.
                std::future::pending::<()>().await;
            }
            let mut next = row;
            next.status = "input_required".into();
            next.detail = Some(detail.clone());
            next.answers = None;
            next.updated_at = now();
            match store.put_task(&next).await {
                Ok(true) => break,
                Ok(false) => {}
                Err(_) => tokio::time::sleep(WATCH).await,
            }
        }
        loop {
            let _ = tokio::time::timeout(WATCH, answered.notified()).await;
            let row = match store.task(id).await {
                Ok(Some(r)) => r,
                Ok(None) => return None,
                Err(_) => continue,
            };
            if row.is_terminal() {
                return None;
            }
            if row.cancel_requested {
                std::future::pending::<()>().await;
            }
            let (true, Some(given)) = (row.status == "working", row.answers.clone()) else {
                continue;
            };
            let mut taken = row;
            taken.answers = None;
            taken.updated_at = now();
            if let Ok(true) = store.put_task(&taken).await {
                return serde_json::from_str::<InputResponses>(&given).ok();
            }
        }
    }
}
