//! Sagas continued across requests (MCP 2026-07-28 saga handles, issue 26):
//! released by the host that served a request, claimed by whichever host
//! serves the next one, ended when abandoned.
//!
//! - [`Dispatcher::release`]: at the end of a request that leaves its saga
//!   open (its handle kept, or parked for an approval), the serving host
//!   gives the saga up (`store::SagaStore::release_saga`: no owner, a
//!   `released_at` time, the fencing token moved, an `OWNER` record).
//!   Nothing is in doubt then: every step of the request has its outcome.
//! - The next request with the handle, on any host sharing the store,
//!   claims it ([`Dispatcher::reopen`] with `Via::Handle`: only a saga
//!   opened as a handle, of the request's principal; then compare and set
//!   from "released" to itself, a new token); of two hosts claiming it at
//!   once, one does and the other gets [`super::DispatchError::Busy`]; of
//!   two requests on one host, the second finds it held
//!   ([`super::DispatchError::Held`]).
//! - Crash recovery leaves a released saga alone
//!   (`ownership::recoverable`): its host may die while idle between
//!   requests without its client's work being rolled back. A saga whose
//!   host died during a request was never released, and is recovered as
//!   before.
//! - [`Dispatcher::expire_released`]: a released saga not continued within
//!   the server's idle time is abandoned; whichever host's sweep finds it
//!   first claims it (the claim is a compare and set on its release time,
//!   by the database's clock for PostgreSQL) and ends it by the server's
//!   rule for abandoned handles (rollback by default: the client asked to
//!   keep the saga open and never said commit, so what it left is
//!   unfinished work, undone as crash recovery undoes a dead host's). A
//!   saga parked in AwaitingApproval is not swept: it waits for its
//!   approval as a parked plan saga does (its approval expires on its own,
//!   a denial rolls it back).
//! - [`Dispatcher::settle_interrupted`]: a request that stopped mid-way
//!   (its client cancelled it or went away) leaves its saga this host's,
//!   unreleased, perhaps with a step in doubt. What the log shows decides:
//!   a step the request logged (in doubt, or committed but never answered)
//!   is a call the client aborted, so the saga is recovered (rolled back,
//!   the normal rule of a failed step); a request that logged nothing
//!   leaves a handle's saga as it was, released for the next request, and
//!   ends a saga of its own (nothing to undo).
//!   [`Dispatcher::settle_interrupted_held`] is the same for an MCP
//!   session's saga, which the session goes on holding: untouched, it is
//!   given back to the session as it was.

use super::{DispatchError, Dispatcher};
use crate::saga::Saga;
use capsaga_core::fsm::State;
use serde::Serialize;

/// The `why` of the `OWNER` record of a claim by the next request.
pub(super) const CLAIMED: &str = "claimed by the next request of its handle";

/// What an abandoned handle's saga becomes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum AbandonedEnd {
    /// Roll back what it committed (the default).
    #[default]
    Rollback,
    /// Finish it (Done): what it committed stays.
    Commit,
}

/// What [`Dispatcher::settle_interrupted`] did with a saga.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Settled {
    /// Recovered from its log: what it had begun (the interrupted request's
    /// step and those before it) compensated; its final state.
    RolledBack(State),
    /// Nothing of the request was logged: the handle's saga released as it
    /// was before the request.
    Released,
    /// Not this host's any more (released, taken over, or gone) or already
    /// ended: left alone.
    LeftAlone,
}

/// One abandoned saga ended by [`Dispatcher::expire_released`].
#[derive(Debug, Clone, Serialize)]
pub struct Expired {
    /// The saga.
    pub saga_id: String,
    /// Its state when claimed.
    pub state_before: State,
    /// Its state now.
    pub final_state: State,
}

impl Dispatcher {
    /// Release `saga` between two requests (see the module doc): `Ok(true)`
    /// when released, `Ok(false)` when it was not this host's to release
    /// any more (its token moved: it was taken over) or has ended. The saga
    /// is consumed: this host must not write to it again without claiming
    /// it.
    ///
    /// # Errors
    /// The store.
    pub async fn release(&self, saga: Saga) -> Result<bool, DispatchError> {
        if saga.state().is_terminal() {
            return Ok(false);
        }
        let host = &self.host;
        let released = host
            .store
            .release_saga(saga.id(), host.owner.id(), saga.fence())
            .await?;
        Ok(released.is_some())
    }

    /// Settle the saga of a request that stopped mid-way (see the module
    /// doc): `first_seq` is the sequence number the request's first step
    /// would have had (the saga's next step when the request began), `keep`
    /// whether the saga outlives the request (a handle's). This host must
    /// have stopped driving the saga (the request's future dropped) and
    /// must keep any other request of it out until this returns.
    ///
    /// # Errors
    /// The store, or a failed compensation (then the saga is in
    /// `FailedRollbackPartial` or `Compensating`, as after any rollback,
    /// and recovery or the operator finishes it).
    pub async fn settle_interrupted(
        &self,
        saga_id: &str,
        first_seq: u64,
        keep: bool,
    ) -> Result<Settled, DispatchError> {
        let Some((mut saga, untouched)) = self.interrupted(saga_id, first_seq).await? else {
            return Ok(Settled::LeftAlone);
        };
        if keep && untouched {
            return Ok(if self.release(saga).await? {
                Settled::Released
            } else {
                Settled::LeftAlone
            });
        }
        let report = self.recover(&mut saga).await?;
        Ok(Settled::RolledBack(report.final_state))
    }

    /// [`Dispatcher::settle_interrupted`] for a saga its caller goes on
    /// holding (an MCP session's, 2025-11-25): a request that logged
    /// nothing gives the saga back re-opened, still this host's and
    /// numbered after its logged steps (`Ok(Some)`, at the operator's
    /// autonomy level: the caller narrows it again if it had). Otherwise
    /// `Ok(None)`: the saga was recovered, or it was not this host's to
    /// settle (ended, or owned elsewhere) and is left alone.
    ///
    /// # Errors
    /// As [`Dispatcher::settle_interrupted`].
    pub async fn settle_interrupted_held(
        &self,
        saga_id: &str,
        first_seq: u64,
    ) -> Result<Option<Saga>, DispatchError> {
        let Some((mut saga, untouched)) = self.interrupted(saga_id, first_seq).await? else {
            return Ok(None);
        };
        if untouched {
            // Numbered after its logged steps, as the saga stood in memory:
            // the session's next call is a new step, never a replay.
            self.continue_after_logged(&mut saga).await?;
            return Ok(Some(saga));
        }
        self.recover(&mut saga).await?;
        Ok(None)
    }

    /// The saga of an interrupted request re-opened, when it is still this
    /// host's and not ended, and whether the request left it untouched
    /// (logged no step from `first_seq` on, and no rollback is under way).
    async fn interrupted(
        &self,
        saga_id: &str,
        first_seq: u64,
    ) -> Result<Option<(Saga, bool)>, DispatchError> {
        let host = &self.host;
        let Some(row) = host.store.saga(saga_id).await? else {
            return Ok(None);
        };
        if row.state.is_terminal() || row.owner.as_deref() != Some(host.owner.id()) {
            return Ok(None);
        }
        let saga = self.resume_taken(saga_id, row.fence).await?;
        let logged = host
            .store
            .steps(saga_id)
            .await?
            .iter()
            .any(|s| s.step_seq >= first_seq);
        // A rollback the request was running is finished, never left.
        let rolling_back = matches!(
            saga.state(),
            State::Compensating | State::FailedRollbackPartial
        );
        Ok(Some((saga, !logged && !rolling_back)))
    }

    /// End every saga released more than `idle_ms` ago and not parked for
    /// an approval (abandoned handles), by `end`; returns what was ended.
    /// A saga another host claims meanwhile (its client came back, or
    /// another host's sweep) is skipped.
    ///
    /// # Errors
    /// The store (what was already ended stays ended; the rest is retried
    /// at the next sweep).
    pub async fn expire_released(
        &self,
        idle_ms: u64,
        end: AbandonedEnd,
    ) -> Result<Vec<Expired>, DispatchError> {
        let host = &self.host;
        let me = host.owner.id();
        let cutoff = crate::store::clock::rfc3339_before(idle_ms);
        let why = format!("expired: its handle was not used for {idle_ms} ms");
        let mut out = Vec::new();
        for row in host.store.unfinished_sagas().await? {
            let Some(at) = &row.released_at else {
                continue;
            };
            // This host's clock first (cheap); the claim's compare and set
            // decides by the store's clock.
            if row.state == State::AwaitingApproval || *at > cutoff {
                continue;
            }
            // A request of this process that claims it now holds it first.
            let Ok(_hold) = self.hold(&row.saga_id, "the sweep of abandoned handles") else {
                continue;
            };
            let Some(fence) = host
                .store
                .claim_released(&row.saga_id, me, &why, Some(idle_ms))
                .await?
            else {
                continue;
            };
            let mut saga = self.resume_taken(&row.saga_id, fence).await?;
            self.continue_after_logged(&mut saga).await?;
            let state_before = saga.state();
            let final_state = match end {
                AbandonedEnd::Rollback => self.abort(&mut saga).await?.final_state,
                AbandonedEnd::Commit => match self.finish(&mut saga).await {
                    // Not committed: a step in doubt, rolled back instead.
                    Err(DispatchError::InDoubt { report, .. }) => report.final_state,
                    other => other?,
                },
            };
            out.push(Expired {
                saga_id: row.saga_id,
                state_before,
                final_state,
            });
        }
        Ok(out)
    }
}
