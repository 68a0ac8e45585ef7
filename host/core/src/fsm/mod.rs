//! The guardrail: a finite-state machine over the life of one saga
//! (agent-kernel SPEC §3, DESIGN §6). Pure: `state × event → state`, no I/O.
//!
//! The normative table (SPEC §3.4):
//!
//! | from         | event              | to                    | guard                            |
//! |--------------|--------------------|-----------------------|----------------------------------|
//! | Idle         | StartSaga          | Planning              |                                  |
//! | Planning     | PlanReady          | Acting                | the plan is not empty            |
//! | Acting       | ToolSucceeded      | Acting                | next step has side effects       |
//! | Acting       | ToolSucceeded      | Validating            | hint `validate` or next read-only|
//! | Acting       | ToolFailed         | Compensating          |                                  |
//! | Validating   | ValidationPassed   | Acting                | more steps                       |
//! | Validating   | ValidationPassed   | Done                  | every step committed             |
//! | Validating   | ValidationFailed   | Compensating          |                                  |
//! | Compensating | CompensationDone   | FailedRolledBack      | every COMMIT is COMPENSATED      |
//! | Compensating | CompensationFailed | FailedRollbackPartial | a COMPENSATION_FAILED exists     |
//!
//! capsaga adds rows of its own:
//! - for sagas that never reached Acting (nothing with a side effect ran, so
//!   there is nothing to validate or compensate): `Planning --Finish--> Done`
//!   (a turn that only read ends normally) and `Planning --Abort-->
//!   FailedRolledBack` (it ends in failure);
//! - for steps a human must approve (seed 003: irreversible or high-risk
//!   actions always need a decision): `Planning | Acting | Validating
//!   --ApprovalRequested--> AwaitingApproval` parks the saga before the step
//!   runs; `AwaitingApproval --ApprovalGranted--> Acting` once an approval
//!   bound to the step's tool hash and argument hash has been claimed;
//!   `AwaitingApproval --ApprovalDenied--> Compensating` when it was refused
//!   (or the turn that asked ended without an answer): the parked step never
//!   runs and what committed before it is undone; `AwaitingApproval
//!   --CallDeclined--> Acting` when a human refused a step that needed
//!   approval only because an argument came from untrusted data (issue 47):
//!   that step never runs, the agent is told, and the saga goes on.
//!
//! Enforcement rules (SPEC §3.5): default deny (an event not in the table is
//! [`TransitionDenied`]); in Planning and Validating only read-only tools may
//! execute; nothing executes in AwaitingApproval, Compensating or a terminal
//! state; terminal states are terminal. Extra rows can be added only through
//! [`Guardrail::with_extra`] (loaded from an explicit `fsm.toml` by the host,
//! see [`extra`]), never from a prompt.
//!
//! The turn's tool scope (issue 47) rides on the Planning → Acting
//! transition: [`Guardrail::apply_scoped`] denies `PlanReady` when the
//! policy requires a scope and the plan declared none, and
//! [`Guardrail::may_execute_scoped`] refuses a tool outside the declared
//! scope; the scope only narrows once untrusted data was read (see
//! [`scope`]).
//!
//! One transition is not the agent's: an operator who repairs what a failed
//! compensation left and retries it (`capsaga rollback --saga`) may move a
//! FailedRollbackPartial saga to FailedRolledBack once every step is
//! compensated; and an operator (or a tool author testing a tool) may undo a
//! Done saga (`capsaga undo --saga`: Done → Compensating, then the usual
//! rollback). It is a separate, closed table ([`OperatorEvent`],
//! [`Guardrail::apply_operator`]) that no event of the saga engine and no
//! extra row can reach, so for the agent terminal states stay terminal.

pub mod extra;
pub mod scope;

pub use extra::{ExtraTransition, FsmFile};
pub use scope::{Scope, ScopeError, ToolScope};

use serde::{Deserialize, Serialize};
use std::fmt;
use std::str::FromStr;

/// A state of the guardrail.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub enum State {
    /// No saga active.
    Idle,
    /// The agent plans; read-only tools only.
    Planning,
    /// Side-effecting tools run.
    Acting,
    /// The effect is checked; read-only tools only.
    Validating,
    /// A step needs a human's decision; nothing executes until it is given.
    AwaitingApproval,
    /// Rollback in progress; no execute at all.
    Compensating,
    /// Terminal: committed.
    Done,
    /// Terminal: failed and fully compensated.
    FailedRolledBack,
    /// Terminal: a compensation failed; the operator must act.
    FailedRollbackPartial,
}

impl State {
    /// All states, in table order.
    pub const ALL: [State; 9] = [
        State::Idle,
        State::Planning,
        State::Acting,
        State::Validating,
        State::AwaitingApproval,
        State::Compensating,
        State::Done,
        State::FailedRolledBack,
        State::FailedRollbackPartial,
    ];

    /// Done, FailedRolledBack and FailedRollbackPartial.
    pub fn is_terminal(self) -> bool {
        matches!(
            self,
            State::Done | State::FailedRolledBack | State::FailedRollbackPartial
        )
    }

    /// The state's name, as stored in `saga_state`.
    pub fn as_str(self) -> &'static str {
        match self {
            State::Idle => "Idle",
            State::Planning => "Planning",
            State::Acting => "Acting",
            State::Validating => "Validating",
            State::AwaitingApproval => "AwaitingApproval",
            State::Compensating => "Compensating",
            State::Done => "Done",
            State::FailedRolledBack => "FailedRolledBack",
            State::FailedRollbackPartial => "FailedRollbackPartial",
        }
    }
}

impl fmt::Display for State {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for State {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        State::ALL
            .into_iter()
            .find(|st| st.as_str() == s)
            .ok_or_else(|| {
                format!(
                    "unknown guardrail state `{}`",
                    s.chars().take(40).collect::<String>()
                )
            })
    }
}

/// An event, with the guard condition it carries.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Event {
    /// A saga starts.
    StartSaga,
    /// The plan becomes real: the first side-effecting step is about to run.
    PlanReady {
        /// Number of steps planned (the guard requires at least one).
        steps: usize,
    },
    /// A step committed.
    ToolSucceeded {
        /// Move to Validating (hint `validate`, or the next call is read-only).
        validate: bool,
    },
    /// A side-effecting step failed.
    ToolFailed,
    /// Validation passed.
    ValidationPassed {
        /// Every step committed and the saga is complete.
        complete: bool,
    },
    /// Validation failed.
    ValidationFailed,
    /// Every committed step was compensated.
    CompensationDone,
    /// At least one compensation failed.
    CompensationFailed,
    /// A turn that only read ends (capsaga's addition).
    Finish,
    /// A saga fails before anything with a side effect ran (capsaga's addition).
    Abort,
    /// The next step needs a human's approval: park the saga (capsaga's addition).
    ApprovalRequested,
    /// An approval bound to the parked step was claimed (capsaga's addition).
    ApprovalGranted,
    /// The parked step will not run: refused, or nobody could answer
    /// (capsaga's addition).
    ApprovalDenied,
    /// A human refused the parked step, which needed approval only because
    /// an argument came from untrusted data (information flow, issue 47):
    /// nothing of it ran and the agent is told so; the saga goes on
    /// (capsaga's addition).
    CallDeclined,
}

impl Event {
    /// The event's name without its guard data.
    pub fn name(&self) -> &'static str {
        match self {
            Event::StartSaga => "StartSaga",
            Event::PlanReady { .. } => "PlanReady",
            Event::ToolSucceeded { .. } => "ToolSucceeded",
            Event::ToolFailed => "ToolFailed",
            Event::ValidationPassed { .. } => "ValidationPassed",
            Event::ValidationFailed => "ValidationFailed",
            Event::CompensationDone => "CompensationDone",
            Event::CompensationFailed => "CompensationFailed",
            Event::Finish => "Finish",
            Event::Abort => "Abort",
            Event::ApprovalRequested => "ApprovalRequested",
            Event::ApprovalGranted => "ApprovalGranted",
            Event::ApprovalDenied => "ApprovalDenied",
            Event::CallDeclined => "CallDeclined",
        }
    }
}

/// Names of every [`Event`], in declaration order.
pub const EVENT_NAMES: [&str; 14] = [
    "StartSaga",
    "PlanReady",
    "ToolSucceeded",
    "ToolFailed",
    "ValidationPassed",
    "ValidationFailed",
    "CompensationDone",
    "CompensationFailed",
    "Finish",
    "Abort",
    "ApprovalRequested",
    "ApprovalGranted",
    "ApprovalDenied",
    "CallDeclined",
];

/// An operator's action on a saga the agent can no longer touch.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum OperatorEvent {
    /// The operator retried the failed compensations of a
    /// FailedRollbackPartial saga (`capsaga rollback --saga`).
    CompensationRetried {
        /// Every step that needed undoing is now COMPENSATED.
        all_compensated: bool,
    },
    /// The operator undoes a Done saga: its committed steps are compensated
    /// in reverse (`capsaga undo --saga`).
    Undo,
}

impl OperatorEvent {
    /// The event's name without its guard data.
    pub fn name(&self) -> &'static str {
        match self {
            OperatorEvent::CompensationRetried { .. } => "OperatorCompensationRetried",
            OperatorEvent::Undo => "OperatorUndo",
        }
    }
}

/// A transition the table does not allow.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("transition denied: {event} in state {from}{}", .reason.as_deref().map(|r| format!(" ({r})")).unwrap_or_default())]
pub struct TransitionDenied {
    /// The state the saga was in.
    pub from: State,
    /// The event's name.
    pub event: &'static str,
    /// A guard that failed, if the row exists but its guard does not hold.
    pub reason: Option<String>,
}

/// An execute that the current state does not allow.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{reason}")]
pub struct ExecuteDenied {
    /// The state the saga was in.
    pub state: State,
    /// Why.
    pub reason: String,
}

/// One row of the transition table, for display and for checks.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Row {
    /// Source state.
    pub from: State,
    /// Event name.
    pub event: String,
    /// Target state.
    pub to: State,
    /// The guard, in words (empty when none).
    pub guard: String,
    /// Where the row comes from: `spec` (SPEC §3.4), `capsaga` (capsaga's
    /// additions), `fsm.toml` (the operator's extra rows) or `operator`
    /// (the operator-only table).
    pub source: &'static str,
}

/// The normative rows: (from, event, to, guard, source).
const TABLE: [(State, &str, State, &str, &str); 18] = [
    (State::Idle, "StartSaga", State::Planning, "", "spec"),
    (
        State::Planning,
        "PlanReady",
        State::Acting,
        "plan not empty",
        "spec",
    ),
    (
        State::Planning,
        "Finish",
        State::Done,
        "nothing side-effecting ran",
        "capsaga",
    ),
    (
        State::Planning,
        "Abort",
        State::FailedRolledBack,
        "nothing side-effecting ran",
        "capsaga",
    ),
    (
        State::Planning,
        "ApprovalRequested",
        State::AwaitingApproval,
        "the next step needs a human",
        "capsaga",
    ),
    (
        State::Acting,
        "ToolSucceeded",
        State::Acting,
        "next step has side effects",
        "spec",
    ),
    (
        State::Acting,
        "ToolSucceeded",
        State::Validating,
        "hint validate or next read-only",
        "spec",
    ),
    (State::Acting, "ToolFailed", State::Compensating, "", "spec"),
    (
        State::Acting,
        "ApprovalRequested",
        State::AwaitingApproval,
        "the next step needs a human",
        "capsaga",
    ),
    (
        State::Validating,
        "ValidationPassed",
        State::Acting,
        "more steps",
        "spec",
    ),
    (
        State::Validating,
        "ValidationPassed",
        State::Done,
        "every step committed",
        "spec",
    ),
    (
        State::Validating,
        "ValidationFailed",
        State::Compensating,
        "",
        "spec",
    ),
    (
        State::Validating,
        "ApprovalRequested",
        State::AwaitingApproval,
        "the next step needs a human",
        "capsaga",
    ),
    (
        State::AwaitingApproval,
        "ApprovalGranted",
        State::Acting,
        "approval bound to tool hash + args hash claimed",
        "capsaga",
    ),
    (
        State::AwaitingApproval,
        "ApprovalDenied",
        State::Compensating,
        "refused, or nobody could answer",
        "capsaga",
    ),
    (
        State::AwaitingApproval,
        "CallDeclined",
        State::Acting,
        "a human refused a step parked only for information flow",
        "capsaga",
    ),
    (
        State::Compensating,
        "CompensationDone",
        State::FailedRolledBack,
        "every COMMIT compensated",
        "spec",
    ),
    (
        State::Compensating,
        "CompensationFailed",
        State::FailedRollbackPartial,
        "a compensation failed",
        "spec",
    ),
];

/// The guardrail: the normative table plus validated extra rows.
#[derive(Debug, Clone, Default)]
pub struct Guardrail {
    extra: Vec<ExtraTransition>,
}

impl Guardrail {
    /// The normative table only.
    pub fn new() -> Guardrail {
        Guardrail::default()
    }

    /// The table plus `extra` rows, each checked by [`extra::check`].
    ///
    /// # Errors
    /// The first row's problem, as a message naming the row.
    pub fn with_extra(extra: Vec<ExtraTransition>) -> Result<Guardrail, String> {
        for t in &extra {
            extra::check(t).map_err(|e| format!("{} --{}--> {}: {e}", t.from, t.event, t.to))?;
        }
        Ok(Guardrail { extra })
    }

    /// The extra rows.
    pub fn extra(&self) -> &[ExtraTransition] {
        &self.extra
    }

    /// True when the normative table has a row for (`from`, `event`).
    pub fn in_table(from: State, event: &str) -> bool {
        TABLE.iter().any(|(f, e, ..)| *f == from && *e == event)
    }

    /// Apply `event` in `state`.
    ///
    /// # Errors
    /// [`TransitionDenied`] when no row (or no row whose guard holds) matches.
    pub fn apply(&self, state: State, event: Event) -> Result<State, TransitionDenied> {
        let deny = |reason: Option<&str>| TransitionDenied {
            from: state,
            event: event.name(),
            reason: reason.map(str::to_string),
        };
        let table = match (state, event) {
            (State::Idle, Event::StartSaga) => Ok(State::Planning),
            (State::Planning, Event::PlanReady { steps }) => {
                if steps > 0 {
                    Ok(State::Acting)
                } else {
                    Err(deny(Some("the plan is empty")))
                }
            }
            (State::Planning, Event::Finish) => Ok(State::Done),
            (State::Planning, Event::Abort) => Ok(State::FailedRolledBack),
            (State::Planning | State::Acting | State::Validating, Event::ApprovalRequested) => {
                Ok(State::AwaitingApproval)
            }
            (State::Acting, Event::ToolSucceeded { validate }) => Ok(if validate {
                State::Validating
            } else {
                State::Acting
            }),
            (State::Acting, Event::ToolFailed) => Ok(State::Compensating),
            (State::Validating, Event::ValidationPassed { complete }) => {
                Ok(if complete { State::Done } else { State::Acting })
            }
            (State::Validating, Event::ValidationFailed) => Ok(State::Compensating),
            (State::AwaitingApproval, Event::ApprovalGranted) => Ok(State::Acting),
            (State::AwaitingApproval, Event::ApprovalDenied) => Ok(State::Compensating),
            (State::AwaitingApproval, Event::CallDeclined) => Ok(State::Acting),
            (State::Compensating, Event::CompensationDone) => Ok(State::FailedRolledBack),
            (State::Compensating, Event::CompensationFailed) => Ok(State::FailedRollbackPartial),
            _ => Err(deny(None)),
        };
        // A row of the table whose guard failed stays denied: extra rows can
        // only add (from, event) pairs the table does not have (see
        // `extra::check`), never override a guard.
        match table {
            Ok(to) => Ok(to),
            Err(denied) if denied.reason.is_some() => Err(denied),
            Err(denied) => self
                .extra
                .iter()
                .find(|t| t.from == state && t.event == event.name())
                .map(|t| t.to)
                .ok_or(denied),
        }
    }

    /// Apply an operator's event. The rows are
    /// `FailedRollbackPartial --OperatorCompensationRetried--> FailedRolledBack`,
    /// guarded by every step being compensated, and
    /// `Done --OperatorUndo--> Compensating`. Not extendable.
    ///
    /// # Errors
    /// [`TransitionDenied`] in any other state or when the guard fails.
    pub fn apply_operator(
        &self,
        state: State,
        event: OperatorEvent,
    ) -> Result<State, TransitionDenied> {
        match (state, event) {
            (
                State::FailedRollbackPartial,
                OperatorEvent::CompensationRetried {
                    all_compensated: true,
                },
            ) => Ok(State::FailedRolledBack),
            (State::Done, OperatorEvent::Undo) => Ok(State::Compensating),
            (State::FailedRollbackPartial, OperatorEvent::CompensationRetried { .. }) => {
                Err(TransitionDenied {
                    from: state,
                    event: event.name(),
                    reason: Some("a compensation still fails".into()),
                })
            }
            _ => Err(TransitionDenied {
                from: state,
                event: event.name(),
                reason: None,
            }),
        }
    }

    /// Whether `execute` of a tool may run in `state` (SPEC §3.5 rules 2-3).
    ///
    /// # Errors
    /// [`ExecuteDenied`] saying why.
    pub fn may_execute(&self, state: State, has_side_effects: bool) -> Result<(), ExecuteDenied> {
        let deny = |reason: String| Err(ExecuteDenied { state, reason });
        match state {
            State::Acting => Ok(()),
            State::Planning | State::Validating if !has_side_effects => Ok(()),
            State::Planning | State::Validating => deny(format!(
                "only read-only tools may run in {state}; a side-effecting call must first move the saga to Acting"
            )),
            State::AwaitingApproval => {
                deny("the saga waits for a human's approval: nothing may execute".into())
            }
            State::Compensating => deny("the saga is compensating: no execute is allowed".into()),
            State::Idle => deny("no saga is active".into()),
            s => deny(format!("the saga is {s}, a terminal state")),
        }
    }

    /// Every row: the normative table, the extra rows, then the operator's
    /// row (`capsaga fsm --show`).
    pub fn rows(&self) -> Vec<Row> {
        let mut rows: Vec<Row> = TABLE
            .iter()
            .map(|(from, event, to, guard, source)| Row {
                from: *from,
                event: (*event).to_string(),
                to: *to,
                guard: (*guard).to_string(),
                source,
            })
            .collect();
        rows.extend(self.extra.iter().map(|t| Row {
            from: t.from,
            event: t.event.clone(),
            to: t.to,
            guard: String::new(),
            source: "fsm.toml",
        }));
        rows.push(Row {
            from: State::FailedRollbackPartial,
            event: "OperatorCompensationRetried".into(),
            to: State::FailedRolledBack,
            guard: "operator only: every step compensated".into(),
            source: "operator",
        });
        rows.push(Row {
            from: State::Done,
            event: "OperatorUndo".into(),
            to: State::Compensating,
            guard: "operator only".into(),
            source: "operator",
        });
        rows
    }

    /// The machine as a Mermaid `stateDiagram-v2` (operator rows dashed in
    /// the label).
    pub fn mermaid(&self) -> String {
        let mut s = String::from("stateDiagram-v2\n    [*] --> Idle\n");
        for r in self.rows() {
            let label = match r.source {
                "operator" => format!("{} (operator)", r.event),
                "fsm.toml" => format!("{} (fsm.toml)", r.event),
                _ if r.guard.is_empty() => r.event.clone(),
                _ => format!("{} [{}]", r.event, r.guard),
            };
            s.push_str(&format!("    {} --> {}: {label}\n", r.from, r.to));
        }
        for t in State::ALL.iter().filter(|s| s.is_terminal()) {
            s.push_str(&format!("    {t} --> [*]\n"));
        }
        s
    }
}

#[cfg(test)]
mod tests;
