//! A stateless request's saga (MCP 2026-07-28, SEP-2575; saga handles,
//! issue 26): [`serve_request`], the one entry a request without a session
//! makes into the door.
//!
//! - Without a handle, the call is a saga of its own: opened for the
//!   request and ended when it returns by the server's rule
//!   ([`SessionEnd`]), unless it waits for an approval (then it stays
//!   parked, released, and its handle is returned).
//! - The handle [`NEW_SAGA`] opens a saga that stays open: the outcome
//!   names it as the handle to return. A later request passing the handle
//!   continues that saga; commit or rollback with the handle end it.
//! - A handle is the saga's id (a UUID v4) looked up in the store through
//!   `Dispatcher::reopen` with `Via::Handle`: any host sharing the store
//!   finds it; only its principal's, only a saga opened as a handle. A
//!   handle of another principal's saga, one naming no saga and a
//!   malformed one get the same refusal ([`HandleError::Unknown`]); a saga
//!   that ended is refused as ended; another scope's is refused naming it.
//! - At the end of a request that leaves its saga open, the saga is
//!   released (`Dispatcher::release`): the next request, on whichever
//!   host, claims it. Two requests of one handle never run at once: the
//!   second is refused as busy ([`HandleError::Busy`]), on one host (the
//!   hold) or two (the claim).
//! - A call that needs a client's confirmation (`Dispatcher::may_confirm`,
//!   a client that may be asked) parks the saga, releases it and asks
//!   ([`HandleOutcome::Ask`]); the retry ([`Confirming`]) records the
//!   answer (`Dispatcher::confirm`) and runs the call, or rolls the saga
//!   back when declined, or asks again when not answered.
//! - A request the client cancels stops where it stands, and its saga is
//!   settled from its log (`Dispatcher::settle_interrupted`) before any
//!   other request of its handle may run here.

use super::{Ended, SessionEnd, end};
use crate::dispatch::{
    Act, Call, DispatchError, Dispatcher, Hold, OperatorError, Outcome, Scope, ScopeError, Settled,
    Submitted, Via,
};
use crate::saga::Saga;
use crate::store::ApprovalRow;
use capsaga_core::fsm::State;
use capsaga_core::policy::Autonomy;
use capsaga_core::principal::{Principal, Role};

/// The handle value that opens a saga that stays open.
pub const NEW_SAGA: &str = "new";

/// What a request asks of its saga.
#[derive(Debug, Clone, Copy)]
pub enum Requested<'a> {
    /// Run a call (the approver of the call is the surface's).
    Call(Call<'a>),
    /// Commit (`Act::Commit`) or roll back (`Act::Rollback`) the saga the
    /// handle names.
    End(Act),
}

/// A retry answering a confirmation the server asked for: the saga and
/// the approval its (sealed, verified) request state names, and the
/// client's answer (`None`: not answered).
#[derive(Debug, Clone, Copy)]
pub struct Confirming<'a> {
    /// The saga parked on the approval.
    pub saga: &'a str,
    /// The approval.
    pub approval: &'a str,
    /// Yes, no, or no answer.
    pub answer: Option<bool>,
}

/// One stateless request.
#[derive(Debug, Clone, Copy)]
pub struct HandleRequest<'a> {
    /// The request's principal.
    pub who: &'a Principal,
    /// The saga handle it names, if any ([`NEW_SAGA`]: open one that
    /// stays open).
    pub handle: Option<&'a str>,
    /// The confirmation it answers, if any.
    pub confirming: Option<Confirming<'a>>,
    /// What it asks.
    pub requested: Requested<'a>,
    /// The label of a saga it opens.
    pub label: &'a str,
    /// The autonomy level its saga decides at (never above the
    /// operator's).
    pub autonomy: Autonomy,
    /// The rule for a saga of its own when it returns.
    pub end: SessionEnd,
    /// The client may be asked to confirm a call (it declared
    /// elicitation).
    pub may_ask: bool,
}

/// What became of a stateless request.
#[derive(Debug)]
pub enum HandleOutcome {
    /// The call went through the door. `handle`: the saga stays open
    /// (kept by its handle, or parked for an approval), released, and
    /// this is the handle to give the client.
    Ran {
        /// The saga.
        saga_id: String,
        /// The door's answer.
        submitted: Box<Submitted>,
        /// The handle of a saga that stays open.
        handle: Option<String>,
    },
    /// The call waits for the client's confirmation of `approval` (asked
    /// for the first time, or again when the retry did not answer); the
    /// saga is parked and released.
    Ask {
        /// The saga.
        saga_id: String,
        /// The pending approval (its summary and reason are the question).
        approval: Box<ApprovalRow>,
    },
    /// The client declined the call: its approval denied, the saga rolled
    /// back to `final_state`.
    Declined {
        /// The saga.
        saga_id: String,
        /// The approval denied.
        approval_id: String,
        /// The saga's state after the rollback.
        final_state: State,
    },
    /// Commit or rollback by handle.
    Ended {
        /// The saga.
        saga_id: String,
        /// How it ended.
        ended: Ended,
    },
    /// Commit or rollback naming no handle: nothing to do.
    NoHandle,
    /// The client cancelled the request; its saga was settled from its
    /// log (or settling failed, and recovery finishes it).
    Cancelled {
        /// The saga.
        saga_id: String,
        /// What the settling did.
        settled: Result<Settled, DispatchError>,
    },
}

/// Why a stateless request was refused.
#[derive(Debug, thiserror::Error)]
pub enum HandleError {
    /// The handle names no saga of the request's principal (forged,
    /// unknown, malformed or another principal's: the same refusal).
    #[error(
        "unknown saga handle: it names no saga of yours (start one with _meta \"dev.capsaga/saga\": \"new\")"
    )]
    Unknown,
    /// The saga the handle names has ended.
    #[error("saga {handle} has ended ({state}): start a new one")]
    Ended {
        /// The handle.
        handle: String,
        /// Its final state.
        state: State,
    },
    /// The saga is not a handle's (another scope opened it), or the act
    /// is not allowed on it.
    #[error("saga {handle}: {error}")]
    Scope {
        /// The handle.
        handle: String,
        /// The scope rule's refusal.
        error: ScopeError,
    },
    /// Another request of the handle runs now (here or on another host).
    #[error("saga {0} is busy with another request: retry when it returns")]
    Busy(String),
    /// The request state and the handle name different sagas.
    #[error("the requestState and the saga handle name different sagas")]
    Mismatch,
    /// The client's answer could not be recorded (the approval is not its
    /// own saga's, no longer parked, or not one it may confirm).
    #[error(transparent)]
    Confirm(#[from] OperatorError),
    /// The request was cancelled before it opened a saga.
    #[error("the request was cancelled before it opened a saga")]
    CancelledBeforeOpen,
    /// The door refused to re-open the saga for another reason.
    #[error(transparent)]
    Refused(DispatchError),
    /// The approval asked about again could not be read.
    #[error(transparent)]
    Approval(crate::store::ApprovalOpError),
    /// The door itself failed (the store).
    #[error(transparent)]
    Door(DispatchError),
}

/// What a request holds of its saga, for settling it if the request stops
/// mid-way (`Dispatcher::settle_interrupted`): filled in as it opens the
/// saga, read when the client cancels.
#[derive(Default)]
struct Flight {
    /// The saga, once opened. A request cancelled after it handed the saga
    /// on (released or ended it) leaves it to the settling, which finds it
    /// no longer this host's, or ended, and leaves it alone.
    saga: Option<String>,
    /// The saga's next step when the request began.
    first_seq: u64,
    /// Whether the saga outlives the request (a handle's).
    keep: bool,
    /// This host's hold on the saga, kept until the saga is settled.
    hold: Option<Hold>,
}

impl Flight {
    fn open(&mut self, saga: &Saga, keep: bool, hold: Hold) {
        self.saga = Some(saga.id().to_string());
        self.first_seq = saga.next_seq();
        self.keep = keep;
        self.hold = Some(hold);
    }
}

/// Serve one stateless request (see the module documentation): its
/// saga opened or re-opened, the call run or the saga ended, the saga
/// released, ended or kept. When `interrupted` resolves first (the client
/// cancelled), the request stops where it stands and its saga is settled
/// from its log before this returns ([`HandleOutcome::Cancelled`]).
///
/// # Errors
/// [`HandleError`].
pub async fn serve_request(
    door: &Dispatcher,
    req: HandleRequest<'_>,
    interrupted: impl Future<Output = ()>,
) -> Result<HandleOutcome, HandleError> {
    let mut flight = Flight::default();
    let finished = {
        let run = drive(door, req, &mut flight);
        tokio::select! {
            r = run => Some(r),
            () = interrupted => None,
        }
    };
    if let Some(r) = finished {
        return r;
    }
    let Some(saga_id) = flight.saga.take() else {
        return Err(HandleError::CancelledBeforeOpen);
    };
    let settled = door
        .settle_interrupted(&saga_id, flight.first_seq, flight.keep)
        .await;
    // Only now may another request of the handle run here.
    drop(flight);
    if let Err(e) = &settled {
        tracing::warn!(saga = %saga_id, "settling a cancelled request's saga: {e}");
    }
    Ok(HandleOutcome::Cancelled { saga_id, settled })
}

/// The body of [`serve_request`]; `flight` learns the saga as soon as it is
/// opened.
async fn drive(
    door: &Dispatcher,
    req: HandleRequest<'_>,
    flight: &mut Flight,
) -> Result<HandleOutcome, HandleError> {
    let mut handle = req.handle;
    // A retry answering a confirmation names its saga in the state.
    if let Some(c) = &req.confirming {
        if handle.is_some_and(|h| h != c.saga) {
            return Err(HandleError::Mismatch);
        }
        handle = Some(c.saga);
    }
    let call = match req.requested {
        Requested::End(act) => return end_by_handle(door, &req, act, handle, flight).await,
        Requested::Call(call) => call,
    };
    let (mut saga, keep) = match handle {
        Some(h) if h != NEW_SAGA => {
            let (s, hold) = open_handle(door, req.who, h, Act::Continue, req.autonomy).await?;
            flight.open(&s, true, hold);
            (s, true)
        }
        other => {
            let held = super::open(door, req.who, Scope::Handle, req.label, req.autonomy)
                .await
                .map_err(HandleError::Door)?;
            let keep = other == Some(NEW_SAGA);
            flight.open(&held.saga, keep, held.hold);
            (held.saga, keep)
        }
    };
    let saga_id = saga.id().to_string();
    let client = Principal::new(&req.who.name, Role::Client);
    if let Some(c) = &req.confirming {
        saga = match answered(door, c, saga, &client).await {
            Ok(saga) => saga,
            Err(answer) => return answer,
        };
    }
    // A failure of the door itself (the store) leaves the saga this
    // host's, unreleased: a step may be in doubt. Dropped in doubt, it is
    // rolled back by this host once the store answers (the server's doubt
    // loop), or by recovery if this host goes first; a request of the
    // handle meanwhile rolls it back itself.
    let submitted = door
        .submit(&mut saga, call)
        .await
        .map_err(HandleError::Door)?;
    if let Outcome::AwaitingApproval {
        approval,
        denied_by: None,
        ..
    } = &submitted.outcome
        && req.may_ask
        && door.may_confirm(call.tool, &client)
    {
        let approval = approval.clone();
        release(door, saga).await;
        return Ok(HandleOutcome::Ask { saga_id, approval });
    }
    let failed = matches!(submitted.outcome, Outcome::Failed { .. });
    let parked = saga.state() == State::AwaitingApproval;
    if failed || saga.state().is_terminal() {
        return Ok(ran(saga_id, submitted, false));
    }
    if keep || parked {
        // Released before this host's hold goes (`flight` keeps it): the
        // next request of the handle, here or on another host, claims it.
        release(door, saga).await;
        return Ok(ran(saga_id, submitted, true));
    }
    let hold = flight.hold.take();
    end::by_rule(door, saga, req.end).await;
    drop(hold);
    Ok(ran(saga_id, submitted, false))
}

fn ran(saga_id: String, submitted: Submitted, open: bool) -> HandleOutcome {
    let handle = open.then(|| saga_id.clone());
    HandleOutcome::Ran {
        saga_id,
        submitted: Box::new(submitted),
        handle,
    }
}

/// Commit or roll back (`act`) the saga `handle` names.
async fn end_by_handle(
    door: &Dispatcher,
    req: &HandleRequest<'_>,
    act: Act,
    handle: Option<&str>,
    flight: &mut Flight,
) -> Result<HandleOutcome, HandleError> {
    let Some(h) = handle.filter(|h| *h != NEW_SAGA) else {
        return Ok(HandleOutcome::NoHandle);
    };
    let (mut saga, hold) = open_handle(door, req.who, h, act, req.autonomy).await?;
    flight.open(&saga, true, hold);
    // Still open after a commit that parked it: released. After a failure
    // of the door itself it stays this host's (recovery finishes it if
    // this host goes).
    let ended = end::end(door, &mut saga, act)
        .await
        .map_err(HandleError::Door)?;
    let saga_id = saga.id().to_string();
    if !saga.state().is_terminal() {
        release(door, saga).await;
    }
    Ok(HandleOutcome::Ended { saga_id, ended })
}

/// A well-formed saga id: a lower-case hyphenated UUID.
fn well_formed(handle: &str) -> bool {
    handle.len() == 36
        && handle
            .chars()
            .all(|c| c.is_ascii_digit() || ('a'..='f').contains(&c) || c == '-')
}

/// Re-open the saga `handle` names for `who`, to `act` on it: the door's
/// one check of principal, scope and ownership (`Dispatcher::reopen`
/// through `Via::Handle`).
async fn open_handle(
    door: &Dispatcher,
    who: &Principal,
    handle: &str,
    act: Act,
    autonomy: Autonomy,
) -> Result<(Saga, Hold), HandleError> {
    if !well_formed(handle) {
        return Err(HandleError::Unknown);
    }
    let (mut saga, hold) =
        door.reopen(handle, Via::Handle, act, who)
            .await
            .map_err(|e| match e {
                DispatchError::NotFound(_) | DispatchError::Scope(ScopeError::NotYours) => {
                    HandleError::Unknown
                }
                DispatchError::Scope(ScopeError::Ended(state)) => HandleError::Ended {
                    handle: handle.to_string(),
                    state,
                },
                DispatchError::Scope(error) => HandleError::Scope {
                    handle: handle.to_string(),
                    error,
                },
                // Another request of this handle runs now, here (it holds the
                // saga) or on another host (it owns the saga, or claimed it
                // first): the same refusal.
                DispatchError::Busy { .. } | DispatchError::Held { .. } => {
                    HandleError::Busy(handle.to_string())
                }
                e @ DispatchError::Store(_) => HandleError::Door(e),
                e => HandleError::Refused(e),
            })?;
    door.set_autonomy(&mut saga, autonomy);
    Ok((saga, hold))
}

/// Release `saga` at the end of a request that leaves it open, so that any
/// host sharing the store can serve the next request of its handle
/// (`Dispatcher::release`). A failed release is logged: the saga stays
/// this host's (the next request here continues it; another host's is
/// refused as busy until this host is gone and recovery ends it).
async fn release(door: &Dispatcher, saga: Saga) {
    let id = saga.id().to_string();
    match door.release(saga).await {
        Ok(true) => {}
        Ok(false) => tracing::warn!(saga = %id, "not released: its token moved or it ended"),
        Err(e) => tracing::warn!(saga = %id, "releasing the saga failed: {e}"),
    }
}

/// A retry answering the confirmation `c`: not answered, asked again;
/// declined, the saga rolled back; confirmed, the saga back to run the
/// call. `Err`: the request's answer.
async fn answered(
    door: &Dispatcher,
    c: &Confirming<'_>,
    mut saga: Saga,
    client: &Principal,
) -> Result<Saga, Result<HandleOutcome, HandleError>> {
    let saga_id = saga.id().to_string();
    let Some(yes) = c.answer else {
        // Not answered: ask again.
        let row = door.host().store.approval(c.approval).await;
        release(door, saga).await;
        return Err(match row {
            Ok(row) => Ok(HandleOutcome::Ask {
                saga_id,
                approval: Box::new(row),
            }),
            Err(e) => Err(HandleError::Approval(e)),
        });
    };
    if let Err(e) = door.confirm(c.approval, yes, client).await {
        // E.g. a state replayed after its approval was claimed: the saga
        // stays as it was, released for its next request.
        release(door, saga).await;
        return Err(Err(HandleError::Confirm(e)));
    }
    if !yes {
        return Err(match door.abort(&mut saga).await {
            Ok(report) => Ok(HandleOutcome::Declined {
                saga_id,
                approval_id: c.approval.to_string(),
                final_state: report.final_state,
            }),
            Err(e) => Err(HandleError::Door(e)),
        });
    }
    Ok(saga)
}
