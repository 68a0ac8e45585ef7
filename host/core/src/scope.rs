//! One saga, one scope (issue 45 item 2): which scope opened a saga, and
//! which surface may continue, commit or roll it back.
//!
//! Every saga is opened by one **scope** ([`Scope`], recorded with the
//! saga, `saga_state.scope`): an MCP 2025-11-25 session, a 2026-07-28
//! stateless request (whose saga a handle continues), a task of the tasks
//! extension, a REST turn, an agent turn, a plan or a `capsaga call`. Only
//! that scope drives the saga through its life; the others never name it:
//!
//! | surface that tries ([`Via`]) | sagas it may act on | acts ([`Act`]) |
//! |---|---|---|
//! | an MCP session | the one it opened, its principal's | continue, commit, roll back |
//! | a stateless request with a saga handle | one opened as a handle, its principal's | continue, commit, roll back |
//! | the tasks extension | a task's, its principal's | continue, roll back (cancel) |
//! | resuming a stored plan (`capsaga resume`, the console) | a plan's or a call's; an operator | continue |
//! | the operator (`capsaga rollback\|undo`, the console, a denial) | any; an operator | roll back, undo |
//!
//! A turn (REST or agent) never reopens its saga: it lives within one
//! request or command, and only the operator acts on it afterwards.
//!
//! The principal check comes first: a saga that is not the caller's (or has
//! no principal recorded) is [`ScopeError::NotYours`], which a surface
//! answers exactly as for a saga that does not exist. A saga of the
//! caller's own opened by another scope is [`ScopeError::OtherScope`]; one
//! that has ended cannot be continued, committed or rolled back by a scope
//! ([`ScopeError::Ended`]; the operator may still roll back or undo).
//!
//! Pure: the door (`dispatch::scope` in the runtime) reads the saga's row,
//! applies [`check`], and holds the saga for the caller while it acts, so
//! that two scopes of one process never drive one saga at once (across
//! processes, ownership already does).

use crate::fsm::State;
use crate::principal::{Action, Principal};
use serde::{Deserialize, Serialize};

/// The scope that opened a saga (stored as [`Scope::as_str`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Scope {
    /// An MCP session of the 2025-11-25 revision (HTTP or stdio): one saga
    /// at a time, held in the session, ended by `capsaga_commit`,
    /// `capsaga_rollback` or the session's end.
    Session,
    /// A request of the 2026-07-28 revision without a session: its own
    /// saga, or one kept open and continued across requests by its saga
    /// handle (`_meta["dev.capsaga/saga"]`).
    Handle,
    /// A task of the tasks extension (a long call run in the background).
    Task,
    /// An agent turn of `POST /v1/turns`.
    RestTurn,
    /// An agent turn run by `capsaga agent` (or a library caller).
    AgentTurn,
    /// A plan (`capsaga run --plan`), resumable from its stored plan.
    Plan,
    /// A one-step plan of `capsaga call` (and of library callers),
    /// resumable from its stored plan.
    Call,
}

impl Scope {
    /// Every scope, in a fixed order (tests iterate over them).
    pub const ALL: [Scope; 7] = [
        Scope::Session,
        Scope::Handle,
        Scope::Task,
        Scope::RestTurn,
        Scope::AgentTurn,
        Scope::Plan,
        Scope::Call,
    ];

    /// The stored name.
    pub fn as_str(self) -> &'static str {
        match self {
            Scope::Session => "session",
            Scope::Handle => "handle",
            Scope::Task => "task",
            Scope::RestTurn => "rest_turn",
            Scope::AgentTurn => "agent_turn",
            Scope::Plan => "plan",
            Scope::Call => "call",
        }
    }

    /// Parse a stored name (`None` for anything else).
    pub fn parse(s: &str) -> Option<Scope> {
        Scope::ALL.into_iter().find(|k| k.as_str() == s)
    }

    /// The saga's coarser origin as stored before scopes existed (`mcp`,
    /// `agent`, `plan`, `call`).
    pub fn origin(self) -> &'static str {
        match self {
            Scope::Session | Scope::Handle | Scope::Task => "mcp",
            Scope::RestTurn | Scope::AgentTurn => "agent",
            Scope::Plan => "plan",
            Scope::Call => "call",
        }
    }

    /// Whether a saga of this scope, parked for an approval when the
    /// process driving it died, waits for its approval (it can still be
    /// continued: a plan or a call from its stored plan, a handle by its
    /// next request) rather than being rolled back by recovery (a session,
    /// a task or a turn ended with its process: nothing can continue it).
    pub fn parked_saga_waits(self) -> bool {
        matches!(self, Scope::Plan | Scope::Call | Scope::Handle)
    }

    /// What it is, for a person (`an MCP session`, `a REST turn`, ...).
    pub fn describe(self) -> &'static str {
        match self {
            Scope::Session => "an MCP session",
            Scope::Handle => "a stateless MCP request (saga handle)",
            Scope::Task => "an MCP task",
            Scope::RestTurn => "a REST turn",
            Scope::AgentTurn => "an agent turn",
            Scope::Plan => "a plan",
            Scope::Call => "a `capsaga call`",
        }
    }
}

impl std::fmt::Display for Scope {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The surface that tries to act on an existing saga.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Via {
    /// An MCP 2025-11-25 session.
    Session,
    /// A 2026-07-28 stateless request naming a saga handle.
    Handle,
    /// The tasks extension (`tasks/cancel`, a task's confirmation).
    Task,
    /// Resuming a saga from its stored plan (`capsaga resume`, `capsaga
    /// approve --resume`, the console's resume).
    PlanResume,
    /// The operator's rollback or undo (`capsaga rollback|undo`, the
    /// console, the rollback of a saga parked on a denied approval).
    Operator,
}

impl Via {
    /// The scope whose sagas this surface drives, for the surfaces that
    /// drive their own scope's sagas only.
    fn own_scope(self) -> Option<Scope> {
        match self {
            Via::Session => Some(Scope::Session),
            Via::Handle => Some(Scope::Handle),
            Via::Task => Some(Scope::Task),
            Via::PlanResume | Via::Operator => None,
        }
    }

    /// What it is, for a person.
    pub fn describe(self) -> &'static str {
        match self {
            Via::Session => "an MCP session",
            Via::Handle => "a saga handle",
            Via::Task => "the tasks extension",
            Via::PlanResume => "resuming a stored plan",
            Via::Operator => "the operator",
        }
    }
}

/// What the surface wants to do with the saga.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Act {
    /// Run its next step.
    Continue,
    /// End it, keeping what it committed (`capsaga_commit`).
    Commit,
    /// Compensate what it committed (`capsaga_rollback`, a cancel,
    /// `capsaga rollback`).
    Rollback,
    /// Compensate a Done saga (`capsaga undo`).
    Undo,
}

/// A saga as recorded: the scope that opened it (`None` for a saga
/// recorded before scopes existed), its principal (`None` likewise), its
/// state.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Opened<'a> {
    /// The scope that opened it.
    pub scope: Option<Scope>,
    /// The principal recorded with it.
    pub principal: Option<&'a str>,
    /// Its guardrail state now.
    pub state: State,
}

/// Why a surface may not act on a saga.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ScopeError {
    /// Not the caller's saga (another principal's, or none recorded): a
    /// surface answers as for a saga that does not exist.
    #[error("no saga of yours has this id")]
    NotYours,
    /// The caller's saga, opened by another scope: only that scope drives
    /// it.
    #[error(
        "this saga was opened by {}: only that scope continues, commits or rolls it back, not {}",
        .opened.map_or("an older capsaga (no scope recorded)", Scope::describe),
        .via.describe()
    )]
    OtherScope {
        /// The scope that opened it.
        opened: Option<Scope>,
        /// The surface that tried.
        via: Via,
    },
    /// It has ended.
    #[error("the saga has ended ({0}): start a new one")]
    Ended(State),
    /// The surface does not do this (e.g. a session undoing a saga).
    #[error("{} cannot {act:?} a saga", .via.describe())]
    NotThisAct {
        /// The surface.
        via: Via,
        /// What it tried.
        act: Act,
    },
    /// The principal's role may not (resuming another's plan, rolling back
    /// or undoing a saga: an operator's actions).
    #[error("{0} may not do this: only an operator does")]
    Forbidden(String),
}

/// Whether `who`, through `via`, may `act` on the saga `opened` (see the
/// module documentation for the table).
///
/// # Errors
/// [`ScopeError`] naming why not.
pub fn check(opened: Opened<'_>, via: Via, act: Act, who: &Principal) -> Result<(), ScopeError> {
    if let Some(own) = via.own_scope() {
        if opened.principal != Some(who.name.as_str()) {
            return Err(ScopeError::NotYours);
        }
        if opened.scope != Some(own) {
            return Err(ScopeError::OtherScope {
                opened: opened.scope,
                via,
            });
        }
        if act == Act::Undo || (via == Via::Task && act == Act::Commit) {
            return Err(ScopeError::NotThisAct { via, act });
        }
        if opened.state.is_terminal() {
            return Err(ScopeError::Ended(opened.state));
        }
        return Ok(());
    }
    if !who.may(Action::OperateSagas) {
        return Err(ScopeError::Forbidden(who.to_string()));
    }
    match via {
        Via::PlanResume => {
            if act != Act::Continue {
                return Err(ScopeError::NotThisAct { via, act });
            }
            if !matches!(opened.scope, Some(Scope::Plan | Scope::Call)) {
                return Err(ScopeError::OtherScope {
                    opened: opened.scope,
                    via,
                });
            }
            Ok(())
        }
        _ => match act {
            Act::Rollback | Act::Undo => Ok(()),
            Act::Continue | Act::Commit => Err(ScopeError::NotThisAct { via, act }),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::principal::Role;

    fn opened(scope: Option<Scope>, principal: Option<&str>) -> Opened<'_> {
        Opened {
            scope,
            principal,
            state: State::Acting,
        }
    }

    #[test]
    fn names_round_trip_and_map_to_the_old_origins() {
        for s in Scope::ALL {
            assert_eq!(Scope::parse(s.as_str()), Some(s));
        }
        assert_eq!(Scope::parse("Session"), None);
        assert_eq!(Scope::parse(""), None);
        assert_eq!(Scope::Session.origin(), "mcp");
        assert_eq!(Scope::Task.origin(), "mcp");
        assert_eq!(Scope::RestTurn.origin(), "agent");
        assert_eq!(Scope::Call.origin(), "call");
    }

    /// Every pair (the scope that opened a saga, the surface that tries):
    /// only the surface of that scope, for the same principal, or the
    /// operator's actions pass.
    #[test]
    fn only_the_opening_scope_drives_a_saga() {
        let bob = Principal::token("bob", Role::Client);
        let acts = [Act::Continue, Act::Commit, Act::Rollback];
        for scope in Scope::ALL {
            for via in [Via::Session, Via::Handle, Via::Task] {
                for act in acts {
                    let r = check(opened(Some(scope), Some("token:bob")), via, act, &bob);
                    let own =
                        via.own_scope() == Some(scope) && !(via == Via::Task && act == Act::Commit);
                    assert_eq!(r.is_ok(), own, "{scope:?} via {via:?} {act:?}: {r:?}");
                }
            }
            // A client never resumes a plan, rolls back or undoes another
            // scope's saga.
            for via in [Via::PlanResume, Via::Operator] {
                for act in [Act::Continue, Act::Rollback, Act::Undo] {
                    let r = check(opened(Some(scope), Some("token:bob")), via, act, &bob);
                    assert!(matches!(r, Err(ScopeError::Forbidden(_))), "{r:?}");
                }
            }
        }
    }

    #[test]
    fn another_principals_saga_is_not_yours_whatever_its_scope() {
        let mallory = Principal::token("mallory", Role::Client);
        let alice = Principal::token("alice", Role::Operator);
        for scope in Scope::ALL {
            for who in [&mallory, &alice] {
                for via in [Via::Session, Via::Handle, Via::Task] {
                    for owner in [Some("token:bob"), None, Some("token:mallory "), Some("")] {
                        let r = check(opened(Some(scope), owner), via, Act::Continue, who);
                        assert_eq!(r, Err(ScopeError::NotYours), "{scope:?} {owner:?}");
                    }
                }
            }
        }
        // Unscoped (older) sagas are nobody's scope.
        let bob = Principal::token("bob", Role::Client);
        let r = check(
            opened(None, Some("token:bob")),
            Via::Handle,
            Act::Commit,
            &bob,
        );
        assert!(matches!(
            r,
            Err(ScopeError::OtherScope { opened: None, .. })
        ));
    }

    #[test]
    fn the_operator_rolls_back_and_undoes_any_saga_and_resumes_only_plans() {
        let alice = Principal::token("alice", Role::Operator);
        for scope in Scope::ALL.map(Some).into_iter().chain([None]) {
            for act in [Act::Rollback, Act::Undo] {
                assert_eq!(
                    check(opened(scope, Some("token:bob")), Via::Operator, act, &alice),
                    Ok(())
                );
            }
            for act in [Act::Continue, Act::Commit] {
                assert!(check(opened(scope, None), Via::Operator, act, &alice).is_err());
            }
            let resume = check(opened(scope, None), Via::PlanResume, Act::Continue, &alice);
            assert_eq!(
                resume.is_ok(),
                matches!(scope, Some(Scope::Plan | Scope::Call)),
                "{scope:?}"
            );
            assert!(check(opened(scope, None), Via::PlanResume, Act::Rollback, &alice).is_err());
        }
    }

    #[test]
    fn an_ended_saga_is_ended_for_its_scope_but_not_for_the_operator() {
        let bob = Principal::token("bob", Role::Client);
        let alice = Principal::token("alice", Role::Operator);
        for state in [
            State::Done,
            State::FailedRolledBack,
            State::FailedRollbackPartial,
        ] {
            let o = Opened {
                scope: Some(Scope::Handle),
                principal: Some("token:bob"),
                state,
            };
            assert_eq!(
                check(o, Via::Handle, Act::Continue, &bob),
                Err(ScopeError::Ended(state))
            );
            assert_eq!(check(o, Via::Operator, Act::Rollback, &alice), Ok(()));
        }
    }

    #[test]
    fn parked_sagas_wait_only_where_something_can_continue_them() {
        let waits: Vec<Scope> = Scope::ALL
            .into_iter()
            .filter(|s| s.parked_saga_waits())
            .collect();
        assert_eq!(waits, [Scope::Handle, Scope::Plan, Scope::Call]);
    }
}
