//! Every host's watch over the task rows ([`watch`]): the cancels asked on
//! another host for a task this process runs, the tasks whose host stopped
//! (ended by their saga's state), and the ended tasks past their time.

use super::{McpShared, TaskPayload, WATCH, now, owner_of, run, store_of};
use capsaga_core::fsm::State;
use capsaga_store::TaskRow;
use serde_json::json;
use std::sync::Weak;
use std::time::Duration;

/// How often the open tasks of every host are looked at for a dead owner.
const SWEEP: Duration = Duration::from_secs(2);
/// How often ended tasks past [`super::TTL`] are deleted.
const FORGET: Duration = Duration::from_secs(60);

/// Every [`WATCH`]: the rows of the tasks this process runs, each told to
/// stop when a cancel was recorded for it (by any host); every [`SWEEP`]
/// (and at once at start): the open tasks of owners that are not alive,
/// and those of this process whose run is gone, ended
/// ([`settle_if_orphaned`]); every [`FORGET`]: ended tasks past
/// [`super::TTL`] deleted. Ends with the server.
pub async fn watch(shared: Weak<McpShared>) {
    let sweep_every = (SWEEP.as_millis() / WATCH.as_millis()).max(1) as u64;
    let forget_every = (FORGET.as_millis() / WATCH.as_millis()).max(1) as u64;
    let mut tick: u64 = 0;
    loop {
        let Some(s) = shared.upgrade() else {
            return;
        };
        if tick.is_multiple_of(sweep_every) {
            sweep(&s).await;
        } else {
            stop_cancelled(&s).await;
        }
        if tick % forget_every == forget_every - 1 {
            let before = capsaga_store::clock::rfc3339_before(super::TTL.as_millis() as u64);
            if let Err(e) = store_of(&s).forget_tasks(&before).await {
                tracing::warn!("deleting ended tasks: {e} (retried)");
            }
        }
        drop(s);
        tick = tick.wrapping_add(1);
        tokio::time::sleep(WATCH).await;
    }
}

/// Tell this process's runs whose row records a cancel to stop.
async fn stop_cancelled(s: &McpShared) {
    let empty = s.tasks.local.lock().map(|t| t.is_empty()).unwrap_or(true);
    if empty {
        return;
    }
    match store_of(s).open_tasks(Some(&owner_of(s))).await {
        Ok(rows) => {
            for r in rows.iter().filter(|r| r.cancel_requested) {
                // The run itself waits for its end; nobody awaits it here.
                drop(s.tasks.stop(&r.task_id));
            }
        }
        Err(e) => tracing::warn!("reading this host's tasks: {e} (retried)"),
    }
}

/// The open tasks: cancels for this process's runs, and the tasks nobody
/// runs any more ended.
async fn sweep(s: &McpShared) {
    let rows = match store_of(s).open_tasks(None).await {
        Ok(r) => r,
        Err(e) => {
            tracing::warn!("reading the open tasks: {e} (retried)");
            return;
        }
    };
    let me = owner_of(s);
    for r in rows {
        if r.owner.as_deref() == Some(me.as_str()) && s.tasks.runs(&r.task_id) {
            if r.cancel_requested {
                drop(s.tasks.stop(&r.task_id));
            }
            continue;
        }
        settle_if_orphaned(s, &r).await;
    }
}

/// End task `row` if nobody runs it any more: its owner is not alive (or
/// is this process, which has no run of it). A task with a saga waits for
/// the saga's own recovery (every host recovers a dead owner's sagas) and
/// ends as the saga did: `completed` when it committed (the result names
/// the saga: its output is in the saga's log), else `cancelled` when a
/// cancel was asked, else `failed`. Compare and set: written once.
pub(super) async fn settle_if_orphaned(s: &McpShared, row: &TaskRow) {
    let store = store_of(s);
    let me = owner_of(s);
    let orphan = match row.owner.as_deref() {
        None => true,
        Some(o) if o == me => !s.tasks.runs(&row.task_id),
        Some(o) => match store.owner_alive(o).await {
            Ok(alive) => !alive,
            Err(e) => {
                tracing::warn!(task = %row.task_id, "is the task's host alive: {e} (retried)");
                false
            }
        },
    };
    if !orphan {
        return;
    }
    let payload = match &row.saga_id {
        None if row.cancel_requested => TaskPayload::Cancelled,
        None => run::failed_with(
            "the host running this task stopped before it ended (crash or restart)",
        ),
        Some(saga_id) => {
            let state = match store.saga(saga_id).await {
                Ok(Some(r)) => r.state,
                Ok(None) => State::FailedRolledBack,
                Err(e) => {
                    tracing::warn!(task = %row.task_id, "reading its saga: {e} (retried)");
                    return;
                }
            };
            if !state.is_terminal() {
                // Its recovery (this host's or another's) comes first.
                return;
            }
            ended_with(saga_id, state, row.cancel_requested)
        }
    };
    let (status, detail) = super::stored(&payload);
    let mut next = row.clone();
    next.status = status.into();
    next.detail = detail;
    next.answers = None;
    next.updated_at = now();
    match store.put_task(&next).await {
        Ok(true) => tracing::warn!(
            task = %row.task_id,
            "ended a task whose host stopped: {status}"
        ),
        Ok(false) => {}
        Err(e) => tracing::warn!(task = %row.task_id, "ending a task whose host stopped: {e}"),
    }
}

/// The payload of a task whose host stopped, its saga recovered to `state`.
fn ended_with(saga_id: &str, state: State, cancel_requested: bool) -> TaskPayload {
    if state == State::Done {
        return run::complete(crate::tools::result(
            format!(
                "the call committed in saga {saga_id}, but the host running the task stopped before recording its result: read it in the saga's log (capsaga://sagas/{saga_id})"
            ),
            false,
            Some(json!({"saga_id": saga_id, "saga_state": state.as_str()})),
        ));
    }
    if cancel_requested {
        return TaskPayload::Cancelled;
    }
    run::failed_with(&format!(
        "the host running this task stopped before it ended (crash or restart); its saga {saga_id} was recovered from its log: {}",
        state.as_str()
    ))
}
