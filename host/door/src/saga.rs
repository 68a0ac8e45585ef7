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

use crate::store::StepStatus;
use capsaga_core::error::ToolError;
use capsaga_core::fsm::State;
use capsaga_core::policy::Autonomy;
use capsaga_core::scope::Scope;
use serde::Serialize;

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
    /// The principal recorded with the saga (the claim of an approval
    /// another saga asked for compares it).
    pub(crate) principal: Option<String>,
    /// The scope that opened it (`None` for a saga recorded before scopes).
    pub(crate) scope: Option<Scope>,
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
        }
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
