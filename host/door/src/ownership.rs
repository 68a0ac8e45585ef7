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
/// owner recorded; `owner_alive`: what the store says of it) in `state`
/// from a saga of `origin`, for the process `me`: not its own, not a live
/// process's, not one its owner released between two requests (`released`:
/// an MCP 2026-07-28 saga handle waiting for its next request, nothing in
/// doubt: any host claims it, and abandoned ones are swept by
/// `Dispatcher::expire_released`), and not a plan or call saga parked in
/// AwaitingApproval (those wait durably for `capsaga approve|deny` and
/// `capsaga resume`; an agent saga parked when its process died is rolled
/// back: a turn cannot be resumed without its conversation).
pub fn recoverable(
    me: &str,
    owner: Option<&str>,
    owner_alive: bool,
    released: bool,
    state: capsaga_core::fsm::State,
    origin: &str,
) -> bool {
    if released {
        return false;
    }
    if state == capsaga_core::fsm::State::AwaitingApproval && origin != "agent" {
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

    #[test]
    fn only_dead_owners_sagas_are_taken() {
        let r = |owner, alive, state, origin| recoverable("me", owner, alive, false, state, origin);
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
            assert!(!recoverable("me", None, false, true, state, "mcp"));
            assert!(!recoverable("me", None, false, true, state, "agent"));
        }
        // The same ownerless saga, not released (an old row): recovered.
        assert!(recoverable("me", None, false, false, State::Acting, "mcp"));
    }
}
