//! A saga as its driver holds it between calls: an agent turn, a plan run,
//! a single `capsaga call`, later an MCP session. One agent turn or one plan
//! is one saga (DESIGN §6).
//!
//! A [`Saga`] is plain data, owned by its driver (`Send`, no borrowed host:
//! it can live in a session map across requests). Only the dispatch door
//! (`crate::dispatch`) changes it, and only together with the store: every
//! guardrail transition is logged before it is applied here. The results of
//! a rollback ([`RollbackReport`]) are defined here because every driver
//! reports them.

use crate::store::StepStatus;
use capsaga_core::error::ToolError;
use capsaga_core::flow::{FlowState, Surface};
use capsaga_core::fsm::State;
use capsaga_core::policy::Autonomy;
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
    /// Information flow (issue 47): what entered the saga, with labels,
    /// and the plan's tool scope (`crate::dispatch::flow`).
    pub(crate) flow: FlowState,
    /// What the flow stage said about the last call submitted.
    pub(crate) flow_note: Option<capsaga_core::flow::FlowNote>,
}

impl Saga {
    pub(crate) fn new(id: String, fence: u64, state: State, autonomy: Autonomy) -> Saga {
        Saga {
            id,
            fence,
            state,
            next_seq: 0,
            pending_success: false,
            side_effects: 0,
            autonomy,
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
