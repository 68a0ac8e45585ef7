//! A session's saga (MCP 2025-11-25 over Streamable HTTP, `capsaga mcp`
//! over stdio): one saga at a time, held by the session while it lives.
//!
//! - The saga opens at the session's first call ([`SessionSaga::call`]),
//!   for the session's principal, recorded as a session's
//!   (`Scope::Session`): no other scope continues, commits or rolls it
//!   back. Calls of one session run one after the other.
//! - A call that fails a side effect rolls the saga back (the door's
//!   rule); one denied by the human asked is rolled back here. Either
//!   way the next call starts a new saga.
//! - A saga parked on an approval an operator denied meanwhile (the
//!   denial leaves a saga a scope holds to that scope) is rolled back
//!   before the next call; one that ended elsewhere (an operator rolled it
//!   back while the session did not hold it, another host recovered it
//!   while this one was paused past its lease) is forgotten, and the
//!   request that found it so is told ([`SessionCall::EndedElsewhere`],
//!   [`Ended::Elsewhere`]): never acknowledged, never run in a new saga.
//! - [`SessionSaga::end_now`]: the client's commit or rollback. A commit
//!   of a parked saga leaves it parked, still the session's.
//! - A call the client cancels is dropped where it stands (the tool's
//!   instance with it) and its saga settled from its log
//!   (`Dispatcher::settle_interrupted_held`), the session's lock and hold
//!   kept meanwhile: a call that logged a step is a call the client
//!   aborted (the saga is recovered as after a crash); one that logged
//!   nothing leaves the saga as it was.
//! - When the session ends, its open saga ends by the server's rule
//!   ([`SessionSaga::close`], [`super::SessionEnd`]).

use super::{Ended, Held, SessionEnd, end};
use crate::dispatch::{Act, Call, DispatchError, Dispatcher, Outcome, Scope, Submitted};
use capsaga_core::fsm::State;
use capsaga_core::policy::Autonomy;
use capsaga_core::principal::Principal;

/// One session's saga (see the module documentation).
#[derive(Debug)]
pub struct SessionSaga {
    /// The principal that opened the session: its sagas are recorded
    /// under it.
    principal: Principal,
    /// The open saga, held by the session.
    slot: tokio::sync::Mutex<Option<Held>>,
}

/// What became of a session's call.
#[derive(Debug)]
pub enum SessionCall {
    /// The call went through the door: its outcome, whatever it was.
    Ran {
        /// The saga it ran in.
        saga_id: String,
        /// The door's answer.
        submitted: Box<Submitted>,
    },
    /// The client cancelled the call before it returned; the saga was
    /// settled from its log. `kept`: the call had logged nothing, and the
    /// session's saga goes on as it was (else it was recovered: whatever
    /// it had begun is compensated).
    Cancelled {
        /// The saga.
        saga_id: String,
        /// Whether the session still holds it.
        kept: bool,
    },
    /// Not run: the session's saga had ended elsewhere (another host
    /// recovered it while this one was paused past its lease, an operator
    /// rolled it back). The client is told, so it does not take the call
    /// for a step of the saga it knew; its next call starts a new saga.
    EndedElsewhere {
        /// The saga.
        saga_id: String,
        /// Its state, as the store holds it.
        state: State,
    },
}

impl SessionSaga {
    /// The saga scope of a session opened by `principal`.
    pub fn new(principal: Principal) -> SessionSaga {
        SessionSaga {
            principal,
            slot: tokio::sync::Mutex::new(None),
        }
    }

    /// The principal that opened the session.
    pub fn principal(&self) -> &Principal {
        &self.principal
    }

    /// Run `call` as the next step of the session's saga, opened first
    /// (labelled `label`, deciding at `autonomy`) when none is. The call
    /// stops where it stands when the future `interrupted` makes of the
    /// saga's id resolves (the client cancelled it).
    ///
    /// # Errors
    /// [`DispatchError`] when the door itself fails (the saga stays the
    /// session's).
    pub async fn call<F: Future<Output = ()>>(
        &self,
        door: &Dispatcher,
        (label, autonomy): (&str, Autonomy),
        call: Call<'_>,
        interrupted: impl FnOnce(&str) -> F,
    ) -> Result<SessionCall, DispatchError> {
        let mut slot = self.slot.lock().await;
        if let Some((saga_id, state)) = forget_if_ended(door, &mut slot).await {
            return Ok(SessionCall::EndedElsewhere { saga_id, state });
        }
        if slot.is_none() {
            let held = super::open(door, &self.principal, Scope::Session, label, autonomy).await?;
            *slot = Some(held);
        }
        let Some(held) = slot.as_mut() else {
            return Err(DispatchError::NotFound("the session's saga".into()));
        };
        let saga_id = held.saga.id().to_string();
        let first_seq = held.saga.next_seq();
        let submitted = {
            let interrupted = interrupted(&saga_id);
            let run = door.submit(&mut held.saga, call);
            tokio::select! {
                r = run => Some(r),
                () = interrupted => None,
            }
        };
        let Some(submitted) = submitted else {
            // The call's future (the tool's instance with it) is dropped;
            // the saga is settled from its log, the session's lock and its
            // hold kept meanwhile: nothing else runs behind it.
            let hold = slot.take().map(|h| h.hold);
            let kept = settle_cancelled(door, &saga_id, first_seq, autonomy).await;
            let still = kept.is_some();
            *slot = kept.zip(hold).map(|(saga, hold)| Held { saga, hold });
            return Ok(SessionCall::Cancelled {
                saga_id,
                kept: still,
            });
        };
        let submitted = submitted?;
        let ended = matches!(
            submitted.outcome,
            Outcome::Failed { .. }
                | Outcome::AwaitingApproval {
                    denied_by: Some(_),
                    ..
                }
        );
        if ended {
            // Rolled back (a failed side effect), or denied by the human:
            // the saga is over; a denied one is rolled back now.
            if let Some(mut held) = slot.take()
                && held.saga.state() == State::AwaitingApproval
                && let Err(e) = door.abort(&mut held.saga).await
            {
                tracing::warn!("saga {saga_id}: rollback after a denial: {e}");
            }
        }
        Ok(SessionCall::Ran {
            saga_id,
            submitted: Box::new(submitted),
        })
    }

    /// The client's commit (`Act::Commit`) or rollback of the session's
    /// saga: its id and how it ended (`Ended::Elsewhere` when it had ended
    /// elsewhere meanwhile), `None` when no saga is open. A saga
    /// still parked after a commit stays the session's (it waits for its
    /// human).
    ///
    /// # Errors
    /// [`DispatchError`] when the door itself fails.
    pub async fn end_now(
        &self,
        door: &Dispatcher,
        act: Act,
    ) -> Result<Option<(String, Ended)>, DispatchError> {
        let (taken, elsewhere) = {
            let mut slot = self.slot.lock().await;
            let elsewhere = forget_if_ended(door, &mut slot).await;
            (slot.take(), elsewhere)
        };
        let Some(mut held) = taken else {
            return Ok(elsewhere.map(|(id, state)| (id, Ended::elsewhere(state, act))));
        };
        let id = held.saga.id().to_string();
        let ended = end::end(door, &mut held.saga, act).await?;
        if held.saga.state() == State::AwaitingApproval {
            *self.slot.lock().await = Some(held);
        }
        Ok(Some((id, ended)))
    }

    /// End the session's open saga, if any, by `rule` (stdio: the client
    /// hung up).
    pub async fn close(&self, door: &Dispatcher, rule: SessionEnd) {
        let held = self.slot.lock().await.take();
        if let Some(h) = held {
            h.end_by(door, rule).await;
        }
    }

    /// The open saga taken out of a session being dropped (its owner ends
    /// it with [`Held::end_by`]).
    pub fn take_on_drop(&mut self) -> Option<Held> {
        self.slot.get_mut().take()
    }
}

/// Forget the session's saga when it ended elsewhere (the operator rolled
/// it back once the session no longer held it), or roll it back here when
/// it is parked on an approval an operator denied
/// (`Dispatcher::end_if_denied`): the next call starts a new one.
/// Returns the saga's id and state when it ended elsewhere (e.g. a host
/// that recovered it while this one was paused past its lease): the request
/// that finds it so must say so, not carry on as if the saga were still the
/// session's.
async fn forget_if_ended(door: &Dispatcher, slot: &mut Option<Held>) -> Option<(String, State)> {
    let saga = slot.as_mut().map(|s| &mut s.saga)?;
    match door.end_if_denied(saga).await {
        Ok(true) => {
            *slot = None;
            return None;
        }
        Ok(false) => {}
        Err(e) => tracing::warn!("saga {}: rollback after a denial: {e}", saga.id()),
    }
    if let Ok(Some(row)) = door.host().store.saga(saga.id()).await
        && row.state != saga.state()
        && row.state.is_terminal()
    {
        *slot = None;
        return Some((row.saga_id, row.state));
    }
    None
}

/// The session's saga gone from memory mid-call (the call was cancelled),
/// settled from its log (`Dispatcher::settle_interrupted_held`): given back
/// at `autonomy` when the call logged nothing, else `None` (recovered).
async fn settle_cancelled(
    door: &Dispatcher,
    saga_id: &str,
    first_seq: u64,
    autonomy: Autonomy,
) -> Option<crate::saga::Saga> {
    match door.settle_interrupted_held(saga_id, first_seq).await {
        Ok(Some(mut saga)) => {
            door.set_autonomy(&mut saga, autonomy);
            Some(saga)
        }
        Ok(None) => None,
        Err(e) => {
            tracing::warn!("cancelled call: settling saga {saga_id}: {e}");
            None
        }
    }
}
