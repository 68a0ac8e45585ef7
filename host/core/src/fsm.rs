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
//! capsaga adds two rows for sagas that never reached Acting (nothing with a
//! side effect ran, so there is nothing to validate or compensate):
//! `Planning --Finish--> Done` (a turn that only read ends normally) and
//! `Planning --Abort--> FailedRolledBack` (it ends in failure).
//!
//! Enforcement rules (SPEC §3.5): default deny (an event not in the table is
//! [`TransitionDenied`]); in Planning and Validating only read-only tools may
//! execute; nothing executes in Compensating or a terminal state; terminal
//! states are terminal. Extra rows can be added only through
//! [`Guardrail::with_extra`] (loaded from an explicit `fsm.toml` by the host),
//! never from a prompt, and an extra row may neither leave a terminal state nor
//! enter Done from anywhere but Validating or Planning.

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
    pub const ALL: [State; 8] = [
        State::Idle,
        State::Planning,
        State::Acting,
        State::Validating,
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

/// One extra transition row (from `fsm.toml`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ExtraTransition {
    /// Source state.
    pub from: State,
    /// Event name (guards of extra rows are ignored).
    pub event: String,
    /// Target state.
    pub to: State,
}

/// The guardrail: the normative table plus validated extra rows.
#[derive(Debug, Clone, Default)]
pub struct Guardrail {
    extra: Vec<ExtraTransition>,
}

/// Event names accepted in extra rows.
pub const EVENT_NAMES: [&str; 10] = [
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
];

impl Guardrail {
    /// The normative table only.
    pub fn new() -> Guardrail {
        Guardrail::default()
    }

    /// The table plus `extra` rows.
    ///
    /// # Errors
    /// A message when a row leaves a terminal state, enters Idle, enters Done
    /// from anywhere but Planning or Validating, enters a failure state without
    /// being a compensation event, or names an unknown event.
    pub fn with_extra(extra: Vec<ExtraTransition>) -> Result<Guardrail, String> {
        for t in &extra {
            if !EVENT_NAMES.contains(&t.event.as_str()) {
                return Err(format!("unknown event `{}`", t.event));
            }
            if t.from.is_terminal() {
                return Err(format!(
                    "{} is terminal: no transition may leave it",
                    t.from
                ));
            }
            if t.to == State::Idle {
                return Err("no transition may return to Idle".into());
            }
            if t.to == State::Done && !matches!(t.from, State::Planning | State::Validating) {
                return Err(format!(
                    "Done can only be reached from Planning or Validating, not {}",
                    t.from
                ));
            }
            if matches!(t.to, State::FailedRolledBack | State::FailedRollbackPartial)
                && !matches!(t.event.as_str(), "CompensationDone" | "CompensationFailed")
            {
                return Err(format!(
                    "{} can only be entered by a compensation event",
                    t.to
                ));
            }
        }
        Ok(Guardrail { extra })
    }

    /// The extra rows.
    pub fn extra(&self) -> &[ExtraTransition] {
        &self.extra
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
            (State::Compensating, Event::CompensationDone) => Ok(State::FailedRolledBack),
            (State::Compensating, Event::CompensationFailed) => Ok(State::FailedRollbackPartial),
            _ => Err(deny(None)),
        };
        table.or_else(|denied| {
            self.extra
                .iter()
                .find(|t| t.from == state && t.event == event.name())
                .map(|t| t.to)
                .ok_or(denied)
        })
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
            State::Compensating => deny("the saga is compensating: no execute is allowed".into()),
            State::Idle => deny("no saga is active".into()),
            s => deny(format!("the saga is {s}, a terminal state")),
        }
    }

    /// Every (from, event, to, guard) row, for display (`capsaga fsm --show`).
    pub fn rows(&self) -> Vec<(State, String, State, String)> {
        let mut rows = vec![
            (State::Idle, "StartSaga", State::Planning, ""),
            (
                State::Planning,
                "PlanReady",
                State::Acting,
                "plan not empty",
            ),
            (
                State::Planning,
                "Finish",
                State::Done,
                "nothing side-effecting ran (capsaga)",
            ),
            (
                State::Planning,
                "Abort",
                State::FailedRolledBack,
                "nothing side-effecting ran (capsaga)",
            ),
            (
                State::Acting,
                "ToolSucceeded",
                State::Acting,
                "next step has side effects",
            ),
            (
                State::Acting,
                "ToolSucceeded",
                State::Validating,
                "hint validate or next read-only",
            ),
            (State::Acting, "ToolFailed", State::Compensating, ""),
            (
                State::Validating,
                "ValidationPassed",
                State::Acting,
                "more steps",
            ),
            (
                State::Validating,
                "ValidationPassed",
                State::Done,
                "every step committed",
            ),
            (
                State::Validating,
                "ValidationFailed",
                State::Compensating,
                "",
            ),
            (
                State::Compensating,
                "CompensationDone",
                State::FailedRolledBack,
                "every COMMIT compensated",
            ),
            (
                State::Compensating,
                "CompensationFailed",
                State::FailedRollbackPartial,
                "a compensation failed",
            ),
        ]
        .into_iter()
        .map(|(a, e, b, g)| (a, e.to_string(), b, g.to_string()))
        .collect::<Vec<_>>();
        rows.extend(
            self.extra
                .iter()
                .map(|t| (t.from, t.event.clone(), t.to, "fsm.toml".to_string())),
        );
        rows
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn happy_path() {
        let g = Guardrail::new();
        let mut s = State::Idle;
        for e in [
            Event::StartSaga,
            Event::PlanReady { steps: 2 },
            Event::ToolSucceeded { validate: false },
            Event::ToolSucceeded { validate: true },
            Event::ValidationPassed { complete: true },
        ] {
            s = g.apply(s, e).unwrap();
        }
        assert_eq!(s, State::Done);
    }

    #[test]
    fn failure_path() {
        let g = Guardrail::new();
        let s = g.apply(State::Acting, Event::ToolFailed).unwrap();
        assert_eq!(s, State::Compensating);
        assert_eq!(
            g.apply(s, Event::CompensationDone).unwrap(),
            State::FailedRolledBack
        );
        assert_eq!(
            g.apply(s, Event::CompensationFailed).unwrap(),
            State::FailedRollbackPartial
        );
    }

    #[test]
    fn default_deny_and_terminal() {
        let g = Guardrail::new();
        assert!(g.apply(State::Idle, Event::ToolFailed).is_err());
        assert!(
            g.apply(State::Planning, Event::PlanReady { steps: 0 })
                .is_err()
        );
        for t in [
            State::Done,
            State::FailedRolledBack,
            State::FailedRollbackPartial,
        ] {
            for e in [
                Event::StartSaga,
                Event::ToolFailed,
                Event::CompensationDone,
                Event::Finish,
                Event::Abort,
            ] {
                assert!(g.apply(t, e).is_err());
            }
        }
    }

    #[test]
    fn execute_rules() {
        let g = Guardrail::new();
        assert!(g.may_execute(State::Planning, false).is_ok());
        assert!(g.may_execute(State::Planning, true).is_err());
        assert!(g.may_execute(State::Validating, true).is_err());
        assert!(g.may_execute(State::Acting, true).is_ok());
        assert!(g.may_execute(State::Compensating, false).is_err());
        assert!(g.may_execute(State::Done, false).is_err());
    }

    #[test]
    fn extra_rows_validated() {
        let row = |from, event: &str, to| ExtraTransition {
            from,
            event: event.into(),
            to,
        };
        assert!(
            Guardrail::with_extra(vec![row(State::Done, "StartSaga", State::Planning)]).is_err()
        );
        assert!(Guardrail::with_extra(vec![row(State::Acting, "Finish", State::Done)]).is_err());
        assert!(
            Guardrail::with_extra(vec![row(State::Acting, "Bogus", State::Validating)]).is_err()
        );
        assert!(
            Guardrail::with_extra(vec![row(
                State::Acting,
                "ToolFailed",
                State::FailedRolledBack
            )])
            .is_err()
        );
        let g = Guardrail::with_extra(vec![row(
            State::Validating,
            "ToolFailed",
            State::Compensating,
        )])
        .unwrap();
        assert_eq!(
            g.apply(State::Validating, Event::ToolFailed).unwrap(),
            State::Compensating
        );
    }

    #[test]
    fn states_round_trip_names() {
        for s in State::ALL {
            assert_eq!(s.as_str().parse::<State>().unwrap(), s);
        }
    }
}
