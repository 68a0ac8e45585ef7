//! Saga ownership: which sagas crash recovery may take over.
//!
//! Crash recovery must finish the sagas of a process that died, and must
//! never touch the sagas of a process that is still running. Each host
//! registers as an owner with the store (`store::OwnerStore`: a lock file on
//! one machine, a lease with a fencing token in a shared PostgreSQL store)
//! and holds its [`OwnerLease`] for its life; `saga_state.owner` names the
//! owner of each saga. Which sagas recovery may take over is
//! [`recoverable`] (pure); taking them over and finishing them is the
//! dispatch door's (`dispatch::recover`).

pub use crate::store::OwnerLease;

/// What recovery knows of a saga it found unfinished ([`recoverable`]).
#[derive(Debug, Clone, Copy)]
pub struct Found<'a> {
    /// Its owner (`None`: no owner recorded).
    pub owner: Option<&'a str>,
    /// What the store says of that owner.
    pub owner_alive: bool,
    /// Released by its owner between two requests (a saga handle).
    pub released: bool,
    /// A step of it has no outcome (BEGIN only): looked at only for a saga
    /// without an owner.
    pub in_doubt: bool,
    /// Its state.
    pub state: capsaga_core::fsm::State,
    /// The scope that opened it (`None` for a saga recorded before scopes:
    /// then its `origin` decides).
    pub scope: Option<capsaga_core::scope::Scope>,
    /// Its origin.
    pub origin: &'a str,
}

/// Whether recovery may take over saga `f`, for the process `me`: not its
/// own, not a live process's, not one its owner released between two
/// requests (`released`: an MCP 2026-07-28 saga handle waiting for its next
/// request, nothing in doubt: any host claims it, and abandoned ones are
/// swept by `Dispatcher::expire_released`), not one without an owner
/// unless a step of it is in doubt (nothing died holding it: only a saga
/// something was doing when it stopped is recovery's), and not a saga
/// parked in AwaitingApproval that something can still continue (a plan or
/// a call waits durably for `capsaga approve|deny` and `capsaga resume`, a
/// handle's for its next request: `Scope::parked_saga_waits`). A session's,
/// a task's or a turn's saga parked when its process died is rolled back:
/// only its scope could continue it (one saga, one scope), and it is gone.
pub fn recoverable(me: &str, f: &Found<'_>) -> bool {
    if f.released {
        return false;
    }
    let waits = f.scope.map_or(
        f.origin != "agent",
        capsaga_core::scope::Scope::parked_saga_waits,
    );
    if f.state == capsaga_core::fsm::State::AwaitingApproval && waits {
        return false;
    }
    match f.owner {
        Some(o) if o == me => false,
        Some(_) => !f.owner_alive,
        None => f.in_doubt,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use capsaga_core::fsm::State;
    use capsaga_core::scope::Scope;

    #[test]
    fn only_dead_owners_sagas_are_taken() {
        let r = |owner, alive, state, origin| {
            recoverable("me", &found(owner, alive, false, state, None, origin))
        };
        assert!(!r(Some("me"), true, State::Acting, "mcp"));
        assert!(!r(Some("b"), true, State::Acting, "mcp"));
        assert!(r(Some("b"), false, State::Acting, "mcp"));
        assert!(!r(Some("b"), false, State::AwaitingApproval, "plan"));
        assert!(r(Some("b"), false, State::AwaitingApproval, "agent"));
    }

    fn found<'a>(
        owner: Option<&'a str>,
        owner_alive: bool,
        released: bool,
        state: State,
        scope: Option<Scope>,
        origin: &'a str,
    ) -> Found<'a> {
        Found {
            owner,
            owner_alive,
            released,
            in_doubt: false,
            state,
            scope,
            origin,
        }
    }

    #[test]
    fn a_released_saga_is_never_recovered() {
        for state in [State::Planning, State::Acting, State::AwaitingApproval] {
            for origin in ["mcp", "agent"] {
                let mut f = found(None, false, true, state, None, origin);
                assert!(!recoverable("me", &f));
                f.in_doubt = true;
                assert!(!recoverable("me", &f));
            }
            for scope in Scope::ALL {
                let f = found(None, false, true, state, Some(scope), scope.origin());
                assert!(!recoverable("me", &f));
            }
        }
    }

    /// A saga nobody owns (not released: an old row, or one whose owner
    /// was cleared) is recovery's only when a step of it is in doubt:
    /// nothing died holding it, so nothing else is recovery's to finish.
    #[test]
    fn an_unowned_saga_is_recovered_only_in_doubt() {
        for state in [State::Planning, State::Acting, State::Validating] {
            for scope in Scope::ALL {
                let mut f = found(None, false, false, state, Some(scope), scope.origin());
                assert!(!recoverable("me", &f), "{state:?} {scope:?}");
                f.in_doubt = true;
                assert!(recoverable("me", &f), "{state:?} {scope:?}");
            }
        }
    }

    /// A saga parked for an approval when its process died waits only when
    /// something can still continue it: a plan or a call from its stored
    /// plan, a handle by its next request. A session's, a task's or a
    /// turn's is rolled back (only its scope continued it, and it is gone).
    #[test]
    fn a_parked_saga_waits_only_when_its_scope_can_continue_it() {
        for scope in Scope::ALL {
            let r = recoverable(
                "me",
                &found(
                    Some("dead"),
                    false,
                    false,
                    State::AwaitingApproval,
                    Some(scope),
                    scope.origin(),
                ),
            );
            assert_eq!(
                r,
                !matches!(scope, Scope::Plan | Scope::Call | Scope::Handle),
                "{scope:?}"
            );
        }
    }
}
