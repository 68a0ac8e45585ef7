//! A saga's life across requests (issue 46): the one place where a surface
//! that serves sagas over several requests opens them, runs a call in
//! them, and closes them, with the owner and principal checks, the busy
//! marks (holds and ownership) and cancellation. The MCP handlers of
//! `capsaga-server` are adapters around it: they map the protocol's
//! requests in and the outcomes here out, and decide nothing of a saga.
//!
//! Three scopes, one file each:
//!
//! | scope | type | opened | ends |
//! |---|---|---|---|
//! | a session (MCP 2025-11-25, stdio): one saga at a time, held by the session | [`SessionSaga`] | at the session's first call | `capsaga_commit` / `capsaga_rollback`, a failed side effect, a denial, or the session's end ([`SessionEnd`]) |
//! | a stateless request (MCP 2026-07-28): a saga of its own, or one its handle names | [`serve_request`] | per request, or by handle on any host sharing the store | with the request ([`SessionEnd`]), or by handle; an abandoned handle by the sweep (`dispatch::handles`) |
//! | a task (the tasks extension): a saga of one call run in the background | [`run_task`] | when the task starts | with its call |
//!
//! Each opens and re-opens its sagas through `dispatch::scope`
//! ([`Dispatcher::open`], [`Dispatcher::reopen`]: one saga, one scope,
//! its principal's), keeps the [`Hold`] while it drives the saga, and
//! settles a call cancelled mid-way from the saga's log
//! (`dispatch::handles`: `settle_interrupted` and `_held`). Commit and
//! rollback by the client end a saga the same way in every scope
//! ([`Ended`]).

mod end;
mod handle;
mod session;
mod task;

pub use end::{Ended, SessionEnd};
pub use handle::{
    Confirming, HandleError, HandleOutcome, HandleRequest, NEW_SAGA, Requested, serve_request,
};
pub use session::{SessionCall, SessionSaga};
pub use task::{Confirmer, MAX_ROUNDS, TaskCall, TaskEnd, run_task};

use crate::dispatch::{DispatchError, Dispatcher, Hold, Scope};
use crate::saga::Saga;
use capsaga_core::policy::Autonomy;
use capsaga_core::principal::Principal;

/// A saga and this process's hold on it (`dispatch::scope`): the saga of a
/// session, a request or a task while it drives it.
#[derive(Debug)]
pub struct Held {
    /// The saga.
    pub saga: Saga,
    /// This process's hold on it; let go when dropped.
    pub hold: Hold,
}

impl Held {
    /// End the saga by `rule` (a session or a request that leaves it
    /// open at its end), then let go of the hold. A saga parked on an
    /// approval an operator denied is rolled back whatever the rule
    /// (nothing can continue it). Failures are logged: recovery finishes
    /// what is left.
    pub async fn end_by(self, door: &Dispatcher, rule: SessionEnd) {
        end::by_rule(door, self.saga, rule).await;
    }
}

/// Open a new saga for `who` by `scope`, deciding at `autonomy` (never
/// above the operator's level), held for the caller.
///
/// # Errors
/// [`DispatchError`].
pub async fn open(
    door: &Dispatcher,
    who: &Principal,
    scope: Scope,
    label: &str,
    autonomy: Autonomy,
) -> Result<Held, DispatchError> {
    let (mut saga, hold) = door.open(who, scope, label, None).await?;
    door.set_autonomy(&mut saga, autonomy);
    Ok(Held { saga, hold })
}
