//! How a scope's saga ends: by its client (commit or rollback, the same in
//! every scope: [`end`]) or by the server's rule when the scope ends with
//! the saga still open ([`by_rule`]).

use crate::dispatch::{Act, DispatchError, Dispatcher};
use crate::saga::{RollbackReport, Saga};
use capsaga_core::fsm::State;

/// What happens to a scope's open saga when the scope ends (a session
/// ends, a stateless request without a handle returns).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum SessionEnd {
    /// Finish it (Done): what it committed stays (the default: a client
    /// that never commits keeps its work).
    #[default]
    Commit,
    /// Roll it back: what it committed is compensated.
    Rollback,
}

impl std::str::FromStr for SessionEnd {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "commit" => Ok(SessionEnd::Commit),
            "rollback" => Ok(SessionEnd::Rollback),
            other => Err(format!(
                "`{}`: expected commit or rollback",
                other.chars().take(40).collect::<String>()
            )),
        }
    }
}

/// What a client's commit or rollback made of its saga.
#[derive(Debug)]
pub enum Ended {
    /// Committed: its state now (Done).
    Committed(State),
    /// A commit of a saga parked for an approval: it stays parked (its
    /// state), waiting for its human.
    Parked(State),
    /// A commit refused because a step's outcome was never written (the
    /// store failed while it ran): rolled back instead. `error` says why,
    /// `report` how.
    NotCommitted {
        /// The door's error, for the client.
        error: String,
        /// The rollback.
        report: RollbackReport,
    },
    /// Rolled back on the client's request.
    RolledBack(RollbackReport),
    /// Nothing done now: the saga had already ended elsewhere (another
    /// host recovered it while this one was paused past its lease, or an
    /// operator ended it) before this request reached it.
    Elsewhere {
        /// Its state, as the store holds it.
        state: State,
        /// Whether it ended as the client asked (a commit of a Done saga, a
        /// rollback of a rolled-back one); anything else is an error for the
        /// client, never an acknowledgement.
        as_asked: bool,
    },
}

impl Ended {
    /// How a saga found ended elsewhere in `state` answers the client's
    /// `act`.
    pub(super) fn elsewhere(state: State, act: Act) -> Ended {
        let as_asked = if act == Act::Commit {
            state == State::Done
        } else {
            state == State::FailedRolledBack
        };
        Ended::Elsewhere { state, as_asked }
    }
}

/// Commit (`Act::Commit`) or roll back (any other act) `saga` for its
/// client.
///
/// # Errors
/// [`DispatchError`] when the door itself fails.
pub(super) async fn end(
    door: &Dispatcher,
    saga: &mut Saga,
    act: Act,
) -> Result<Ended, DispatchError> {
    if act != Act::Commit {
        return Ok(Ended::RolledBack(door.abort(saga).await?));
    }
    match door.finish(saga).await {
        Ok(State::AwaitingApproval) => Ok(Ended::Parked(State::AwaitingApproval)),
        Ok(state) => Ok(Ended::Committed(state)),
        Err(e) => {
            let error = e.to_string();
            match e {
                DispatchError::InDoubt { report, .. } => Ok(Ended::NotCommitted {
                    error,
                    report: *report,
                }),
                e => Err(e),
            }
        }
    }
}

/// End `saga` by `rule` (see [`super::Held::end_by`]).
pub(super) async fn by_rule(door: &Dispatcher, mut saga: Saga, rule: SessionEnd) {
    // Parked on an approval an operator denied: rolled back, whatever the
    // rule (nothing can continue it).
    match door.end_if_denied(&mut saga).await {
        Ok(true) => return,
        Ok(false) => {}
        Err(e) => tracing::warn!("scope end: saga {}: {e}", saga.id()),
    }
    let r = match rule {
        SessionEnd::Commit => door.finish(&mut saga).await.map(|_| ()),
        SessionEnd::Rollback => door.abort(&mut saga).await.map(|_| ()),
    };
    if let Err(e) = r {
        tracing::warn!("scope end: saga {}: {e}", saga.id());
    }
}
