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

/// Whether recovery may take over a saga owned by `owner` (`None`: no
/// owner recorded; `owner_alive`: what the store says of it) in `state`,
/// opened by `scope` (`None` for a saga recorded before scopes: then its
/// `origin` decides), for the process `me`: not its own, not a live
/// process's, not one its owner released between two requests (`released`:
/// an MCP 2026-07-28 saga handle waiting for its next request, nothing in
/// doubt: any host claims it, and abandoned ones are swept by
/// `Dispatcher::expire_released`), and not a saga parked in
/// AwaitingApproval that something can still continue (a plan or a call
/// waits durably for `capsaga approve|deny` and `capsaga resume`, a handle's
/// for its next request: `Scope::parked_saga_waits`). A session's, a task's
/// or a turn's saga parked when its process died is rolled back: only its
/// scope could continue it (one saga, one scope), and it is gone.
pub fn recoverable(
    me: &str,
    owner: Option<&str>,
    owner_alive: bool,
    released: bool,
    state: capsaga_core::fsm::State,
    scope: Option<capsaga_core::scope::Scope>,
    origin: &str,
) -> bool {
    if released {
        return false;
    }
    let waits = scope.map_or(
        origin != "agent",
        capsaga_core::scope::Scope::parked_saga_waits,
    );
    if state == capsaga_core::fsm::State::AwaitingApproval && waits {
        return false;
    }
    match owner {
        Some(o) if o == me => false,
        Some(_) => !owner_alive,
        None => true,
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
            recoverable("me", owner, alive, false, state, None, origin)
        };
        assert!(!r(Some("me"), true, State::Acting, "mcp"));
        assert!(!r(Some("b"), true, State::Acting, "mcp"));
        assert!(r(Some("b"), false, State::Acting, "mcp"));
        assert!(r(None, false, State::Acting, "plan"));
        assert!(!r(Some("b"), false, State::AwaitingApproval, "plan"));
        assert!(r(Some("b"), false, State::AwaitingApproval, "agent"));
    }

    #[test]
    fn a_released_saga_is_never_recovered() {
        for state in [State::Planning, State::Acting, State::AwaitingApproval] {
            assert!(!recoverable("me", None, false, true, state, None, "mcp"));
            assert!(!recoverable("me", None, false, true, state, None, "agent"));
            for scope in Scope::ALL {
                assert!(!recoverable(
                    "me",
                    None,
                    false,
                    true,
                    state,
                    Some(scope),
                    scope.origin()
                ));
            }
        }
        // The same ownerless saga, not released (an old row): recovered.
        assert!(recoverable(
            "me",
            None,
            false,
            false,
            State::Acting,
            None,
            "mcp"
        ));
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
                Some("dead"),
                false,
                false,
                State::AwaitingApproval,
                Some(scope),
                scope.origin(),
            );
            assert_eq!(
                r,
                !matches!(scope, Scope::Plan | Scope::Call | Scope::Handle),
                "{scope:?}"
            );
        }
    }
}
