//! One saga, one scope (issue 45 item 2): the one place where a surface
//! opens a saga for its scope, or re-opens an existing one to continue,
//! commit or roll it back. The saga scopes over it (`crate::scope`: a
//! session's, a stateless request's, a task's) hold a saga's life across
//! requests with open, call and close.
//!
//! - [`Dispatcher::open`]: a new saga for a [`Scope`] (an MCP session, a
//!   stateless request, a task, a REST or agent turn, a plan, a call),
//!   recorded with it (`saga_state.scope`, in its first `STATE` record), and
//!   held by the caller.
//! - [`Dispatcher::reopen`]: an existing saga, for a surface ([`Via`]) to
//!   [`Act`] on it, by a principal. In order: the saga's row (none:
//!   [`DispatchError::NotFound`]); the rule `capsaga_core::scope::check`:
//!   the principal first (another principal's saga, or one with none
//!   recorded, is [`ScopeError::NotYours`], which a surface answers as for
//!   a saga that does not exist), then which scope opened it (a stateless
//!   handle names only a saga opened as a handle; a session's, a task's, a
//!   turn's or a plan's saga is driven by that scope alone; the operator
//!   rolls back or undoes any, resumes only a plan's or a call's), then
//!   whether it ended; then this process's holds (another live scope of
//!   this process holds it: [`DispatchError::Held`]); then ownership
//!   ([`Dispatcher::resume`]'s: another live process drives it,
//!   [`DispatchError::Busy`]; released between two requests: claimed; a
//!   dead owner's: taken over).
//! - The caller keeps the [`Hold`] while it drives the saga, and drops it
//!   when the saga is ended or released (a hold outliving the request that
//!   took it keeps the other requests of a handle out until its saga is
//!   settled).
//!
//! Every surface comes here: MCP sessions, stateless requests and tasks
//! (through `crate::scope`), REST and agent turns (`agent/runner.rs`), plans and
//! `capsaga call|resume|rollback|undo` (`plan.rs`, `cli/run.rs`), the
//! console (`serve/console.rs`), the rollback of a saga parked on a
//! denied approval (`operator.rs`) and the sweep of abandoned handles
//! (`handles.rs`).

use super::{DispatchError, Dispatcher};
pub use crate::saga::Hold;
use crate::saga::Saga;
use capsaga_core::principal::Principal;
pub use capsaga_core::scope::{Act, Opened, Scope, ScopeError, Via};

impl Dispatcher {
    /// Start a new saga for `who`, opened by `scope` ([`Dispatcher::start_as`]),
    /// and hold it for the caller.
    ///
    /// # Errors
    /// [`DispatchError`].
    pub async fn open(
        &self,
        who: &Principal,
        scope: Scope,
        label: &str,
        plan: Option<&str>,
    ) -> Result<(Saga, Hold), DispatchError> {
        let saga = self.start_as(who, scope, label, plan).await?;
        let hold = self.hold(saga.id(), scope.describe())?;
        Ok((saga, hold))
    }

    /// Re-open saga `saga_id` for `who`, through `via`, to `act` on it (see
    /// the module documentation for the checks, in order), held for the
    /// caller. A session or a handle continues the saga after its logged
    /// steps ([`Dispatcher::continue_after_logged`]: its next call is a new
    /// step, never the replay of a logged one); a plan resumed or the
    /// operator number its steps from 0 again (a plan replays its logged
    /// steps).
    ///
    /// # Errors
    /// [`DispatchError::NotFound`], [`DispatchError::Scope`],
    /// [`DispatchError::Held`], [`DispatchError::Busy`] or the store.
    pub async fn reopen(
        &self,
        saga_id: &str,
        via: Via,
        act: Act,
        who: &Principal,
    ) -> Result<(Saga, Hold), DispatchError> {
        let row = self
            .host
            .store
            .saga(saga_id)
            .await?
            .ok_or_else(|| DispatchError::NotFound(saga_id.to_string()))?;
        let opened = Opened {
            scope: row.scope,
            principal: row.principal.as_deref(),
            state: row.state,
        };
        capsaga_core::scope::check(opened, via, act, who)?;
        let hold = self.hold(saga_id, via.describe())?;
        let mut saga = self.take(saga_id).await?;
        if matches!(via, Via::Session | Via::Handle) {
            self.continue_after_logged(&mut saga).await?;
        }
        Ok((saga, hold))
    }

    /// Hold saga `saga_id` for `by`, or [`DispatchError::Held`] naming what
    /// of this process holds it already.
    pub(super) fn hold(&self, saga_id: &str, by: &'static str) -> Result<Hold, DispatchError> {
        self.host
            .holds
            .hold(saga_id, by)
            .map_err(|holder| DispatchError::Held {
                saga: saga_id.to_string(),
                by: holder,
            })
    }

    /// What of this process holds saga `saga_id` now, if anything.
    pub fn held_by(&self, saga_id: &str) -> Option<&'static str> {
        self.host.holds.holder(saga_id)
    }
}
