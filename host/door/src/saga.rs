//! A saga as its driver holds it between calls: an agent turn, a plan run,
//! a single `capsaga call`, an MCP session, a saga handle's request, a
//! task. One agent turn or one plan is one saga (DESIGN §6).
//!
//! [`Holds`] is the table of the sagas a live scope of this process holds
//! now, and [`Hold`] one entry of it (the door's `dispatch::scope` takes
//! them): while a scope holds a saga, no other scope of the process
//! continues, commits or rolls it back (across processes, the saga's owner
//! does the same).
//!
//! A [`Saga`] is plain data, owned by its driver (`Send`, no borrowed host:
//! it can live in a session map across requests). Only the dispatch door
//! (`crate::dispatch`) changes it, and only together with the store: every
//! guardrail transition is logged before it is applied here. The results of
//! a rollback ([`RollbackReport`]) are defined here because every driver
//! reports them.

use crate::store::{StepStatus, StoreError};
use capsaga_core::error::ToolError;
use capsaga_core::fsm::State;
use capsaga_core::policy::Autonomy;
use capsaga_core::scope::Scope;
use capsaga_flow::{FlowState, Surface};
use serde::Serialize;
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

/// A saga being driven. Create one with `Dispatcher::start` or
/// `Dispatcher::resume`.
#[derive(Debug)]
pub struct Saga {
    pub(crate) id: String,
    /// The fencing token this process holds on the saga (every write about
    /// it carries it; the store refuses a stale one).
    pub(crate) fence: u64,
    pub(crate) state: State,
    /// Position of the next step. A resumed saga numbers from 0 again, so a
    /// step with the same tool and arguments at the same position has the
    /// same idempotency key (and a committed one is not executed again).
    pub(crate) next_seq: u64,
    /// A side-effecting step committed and its ToolSucceeded event is
    /// pending until we know what comes next (SPEC §3.4: Validating when the
    /// next step is read-only or the tool hinted `validate`).
    pub(crate) pending_success: bool,
    pub(crate) side_effects: u64,
    /// The autonomy level the policy decides at (default: the operator's;
    /// a request lowers it, never raises it).
    pub(crate) autonomy: Autonomy,
    /// Information flow (issue 47): what entered the saga, with labels,
    /// and the plan's tool scope (`crate::dispatch::flow`).
    pub(crate) flow: FlowState,
    /// What the flow stage said about the last call submitted.
    pub(crate) flow_note: Option<capsaga_flow::FlowNote>,
    /// The principal recorded with the saga (the claim of an approval
    /// another saga asked for compares it).
    pub(crate) principal: Option<String>,
    /// The scope that opened it (`None` for a saga recorded before scopes).
    pub(crate) scope: Option<Scope>,
    /// Set when the store failed while a step's outcome (or the saga's
    /// rollback) was being written: the saga may hold a step in doubt. It
    /// can then only be rolled back, by its driver or by the host's loop
    /// ([`InDoubt`]).
    pub(crate) doubt: Option<Doubt>,
}

/// What a [`Saga`] is made of when it is opened or re-opened.
pub(crate) struct SagaParts {
    pub id: String,
    pub fence: u64,
    pub state: State,
    pub autonomy: Autonomy,
    pub principal: Option<String>,
    pub scope: Option<Scope>,
}

/// Why a [`Saga`] is in doubt, and the list it is on until rolled back.
#[derive(Debug)]
pub(crate) struct Doubt {
    /// The step whose outcome could not be written, if the doubt is a
    /// step's (else the saga's rollback failed half-way).
    pub(crate) step: Option<u64>,
    /// The host's list of sagas left in doubt.
    pub(crate) left: Arc<InDoubt>,
}

/// The sagas of this process that are in doubt (the store failed while a
/// step's outcome or the rollback was being written), by id, with the
/// fencing token their driver holds: listed when the door marks a saga in
/// doubt, whether its driver keeps it (a session) or lets go of it (a
/// request, a turn, a session that ended on the store's error). A server's
/// loop (`serve::cluster::doubt_loop`) rolls each back once the store
/// answers again (`Dispatcher::settle_left_in_doubt`), as crash recovery
/// would (an in-doubt step compensated from its pre-image); a driver that
/// acts on its saga first rolls it back itself. Whoever rolls a saga back
/// takes it from the list first, so the two never do it at once. Shared
/// by the generations of a reloaded host.
#[derive(Debug, Default)]
pub struct InDoubt {
    sagas: Mutex<BTreeMap<String, Listed>>,
    /// Wakes the loop: a saga was listed.
    notify: tokio::sync::Notify,
    /// Wakes the drivers waiting for the loop: a pass is done with a saga.
    passed: tokio::sync::Notify,
}

/// One saga listed in doubt.
#[derive(Debug, Clone, Copy)]
struct Listed {
    fence: u64,
    /// Being rolled back by the loop now.
    settling: bool,
}

impl InDoubt {
    fn lock(&self) -> std::sync::MutexGuard<'_, BTreeMap<String, Listed>> {
        // Every update is a single insert, change or remove.
        self.sagas.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// List saga `id` (its driver holds token `fence`), unless it is
    /// listed already, and wake the loop.
    pub(crate) fn list(&self, id: &str, fence: u64) {
        self.lock().entry(id.to_string()).or_insert(Listed {
            fence,
            settling: false,
        });
        self.notify.notify_one();
    }

    /// Take every saga listed and not being settled, marking them
    /// settling: (id, fence) pairs. Each is then [`InDoubt::settled`] or
    /// [`InDoubt::retry`].
    pub(crate) fn take_for_settling(&self) -> Vec<(String, u64)> {
        let mut sagas = self.lock();
        sagas
            .iter_mut()
            .filter(|(_, l)| !l.settling)
            .map(|(id, l)| {
                l.settling = true;
                (id.clone(), l.fence)
            })
            .collect()
    }

    /// Saga `id` is settled (or no longer this process's): forget it.
    pub(crate) fn settled(&self, id: &str) {
        self.lock().remove(id);
        self.passed.notify_waiters();
    }

    /// Saga `id` could not be settled yet: leave it for the next pass.
    pub(crate) fn retry(&self, id: &str) {
        if let Some(l) = self.lock().get_mut(id) {
            l.settling = false;
        }
        self.passed.notify_waiters();
    }

    /// Take saga `id` from the list unless the loop is rolling it back
    /// now (false).
    fn try_claim(&self, id: &str) -> bool {
        let mut sagas = self.lock();
        match sagas.get(id) {
            Some(l) if l.settling => false,
            _ => {
                sagas.remove(id);
                true
            }
        }
    }

    /// A driver of this process is about to roll saga `id` back itself:
    /// taken from the list, after waiting for the loop to be done with it
    /// if it is rolling it back now.
    pub(crate) async fn claim(&self, id: &str) {
        loop {
            let passed = self.passed.notified();
            tokio::pin!(passed);
            passed.as_mut().enable();
            if self.try_claim(id) {
                return;
            }
            passed.await;
        }
    }

    /// Whether saga `id` is listed.
    pub(crate) fn listed(&self, id: &str) -> bool {
        self.lock().contains_key(id)
    }

    /// How many sagas are listed.
    pub fn len(&self) -> usize {
        self.lock().len()
    }

    /// Whether none is.
    pub fn is_empty(&self) -> bool {
        self.lock().is_empty()
    }

    /// Wait until a saga is listed (returns at once if one was listed since
    /// the last wait).
    pub async fn wait(&self) {
        self.notify.notified().await;
    }
}

impl Drop for Saga {
    fn drop(&mut self) {
        if let Some(d) = self.doubt.take() {
            tracing::warn!(
                saga = %self.id,
                step = ?d.step,
                "a saga in doubt was let go: it is rolled back once the store answers"
            );
            d.left.list(&self.id, self.fence);
        }
    }
}

impl Saga {
    pub(crate) fn new(p: SagaParts) -> Saga {
        Saga {
            id: p.id,
            fence: p.fence,
            state: p.state,
            next_seq: 0,
            pending_success: false,
            side_effects: 0,
            autonomy: p.autonomy,
            principal: p.principal,
            scope: p.scope,
            doubt: None,
            flow: FlowState::new(Surface::Turn, false),
            flow_note: None,
        }
    }

    /// The saga's information flow: its ledger and plan scope.
    pub fn flow(&self) -> &FlowState {
        &self.flow
    }

    /// The saga's information flow, for its driver to add what the door
    /// cannot see: the user's message (trusted), the plan's tool scope.
    /// Tool outputs are recorded by the door only.
    pub fn flow_mut(&mut self) -> &mut FlowState {
        &mut self.flow
    }

    /// The principal recorded with the saga.
    pub fn principal(&self) -> Option<&str> {
        self.principal.as_deref()
    }

    /// The scope that opened it (`None` for a saga recorded before scopes
    /// existed).
    pub fn scope(&self) -> Option<Scope> {
        self.scope
    }

    /// Mark this saga in doubt (see [`Saga::doubt`]) and list it in
    /// `left`: `step` is the step whose outcome could not be written, if
    /// any. A first mark is kept.
    pub(crate) fn mark_in_doubt(&mut self, step: Option<u64>, left: &Arc<InDoubt>) {
        if self.doubt.is_none() {
            self.doubt = Some(Doubt {
                step,
                left: left.clone(),
            });
        }
        left.list(&self.id, self.fence);
    }

    /// After the store failed with `e` while this saga's step outcome or
    /// rollback was being written: in doubt (see
    /// [`Saga::mark_in_doubt`]), unless fencing refused the write (another
    /// process drives the saga now and recovers it).
    pub(crate) fn store_failed(&mut self, e: &StoreError, left: &Arc<InDoubt>) {
        if !matches!(e, StoreError::Fenced { .. }) {
            self.mark_in_doubt(None, left);
        }
    }

    /// Whether the store failed while this saga's step outcome or rollback
    /// was being written (it can then only be rolled back).
    pub fn in_doubt(&self) -> bool {
        self.doubt.is_some()
    }

    /// The saga id (UUID v4).
    pub fn id(&self) -> &str {
        &self.id
    }

    /// The fencing token this process holds on the saga.
    pub fn fence(&self) -> u64 {
        self.fence
    }

    /// The key of step `step_seq` of this saga, with this process's token.
    pub(crate) fn step(&self, step_seq: u64) -> crate::store::StepKey<'_> {
        crate::store::StepKey {
            saga_id: &self.id,
            fence: self.fence,
            step_seq,
        }
    }

    /// The guardrail state.
    pub fn state(&self) -> State {
        self.state
    }

    /// Number of side-effecting steps committed (or replayed) so far.
    pub fn side_effects(&self) -> u64 {
        self.side_effects
    }

    /// The autonomy level the policy decides this saga's calls at.
    pub fn autonomy(&self) -> Autonomy {
        self.autonomy
    }

    /// The position of the next step (a resumed saga numbers from 0 again).
    pub fn next_seq(&self) -> u64 {
        self.next_seq
    }
}

/// What happened to one step during a rollback.
#[derive(Debug, Clone, Serialize)]
pub struct StepUndo {
    /// The step.
    pub seq: u64,
    /// The tool.
    pub tool: String,
    /// Status before the rollback touched it.
    pub was: StepStatus,
    /// Compensated, or the compensation's error.
    pub result: Result<(), ToolError>,
    /// What the host restored of the step's files from its journal, per
    /// path (issue 28); none when the step had no journal.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub files: Option<capsaga_guest_fs::RestoreReport>,
}

/// What a rollback did.
#[derive(Debug, Clone, Serialize)]
pub struct RollbackReport {
    /// Each compensation attempted, in the order run (reverse step order).
    pub undone: Vec<StepUndo>,
    /// The saga's state afterwards.
    pub final_state: State,
}

impl RollbackReport {
    /// A rollback with nothing to do.
    pub fn empty(state: State) -> Self {
        RollbackReport {
            undone: Vec::new(),
            final_state: state,
        }
    }

    /// True when no compensation failed.
    pub fn all_compensated(&self) -> bool {
        self.undone.iter().all(|u| u.result.is_ok())
    }
}

/// The sagas a live scope of this process holds now, by id, with what
/// holds each (for the refusal of another). Shared by the generations of a
/// reloaded host, like its owner lock.
#[derive(Debug, Default)]
pub struct Holds {
    held: std::sync::Mutex<std::collections::HashMap<String, &'static str>>,
}

impl Holds {
    /// Hold saga `id` for `by` (what holds it, for a person: `an MCP
    /// session`, `the operator`...), or `Err(holder)` when something else
    /// of this process holds it.
    ///
    /// # Errors
    /// What holds it already.
    pub fn hold(
        self: &std::sync::Arc<Self>,
        id: &str,
        by: &'static str,
    ) -> Result<Hold, &'static str> {
        let mut held = self.held.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(holder) = held.get(id) {
            return Err(holder);
        }
        held.insert(id.to_string(), by);
        Ok(Hold {
            holds: self.clone(),
            id: id.to_string(),
        })
    }

    /// What holds saga `id` now, if anything.
    pub fn holder(&self, id: &str) -> Option<&'static str> {
        let held = self.held.lock().unwrap_or_else(|p| p.into_inner());
        held.get(id).copied()
    }
}

/// One saga held by a live scope of this process ([`Holds::hold`]); let go
/// when dropped.
#[derive(Debug)]
pub struct Hold {
    holds: std::sync::Arc<Holds>,
    id: String,
}

impl Hold {
    /// The saga held.
    pub fn saga_id(&self) -> &str {
        &self.id
    }
}

impl Drop for Hold {
    fn drop(&mut self) {
        let mut held = self.holds.held.lock().unwrap_or_else(|p| p.into_inner());
        held.remove(&self.id);
    }
}
