//! A saga's life through the door: start (Idle → Planning, logged, owned by
//! this process), resume (take over a saga whose owner is gone), finish
//! (Done), abort (roll back what committed), recovery of an interrupted
//! saga, and the operator's retry of failed compensations.

use super::{DispatchError, Dispatcher, compensate, guardrail};
use crate::ownership;
use crate::saga::{RollbackReport, Saga};
use crate::store::{NewSaga, Origin};
use capsaga_core::fsm::{Event, State};
use capsaga_core::policy::Autonomy;
use capsaga_core::principal::Principal;

impl Dispatcher {
    /// [`Dispatcher::start_as`] by the local operator at the command line
    /// (`cli:<os user>`).
    ///
    /// # Errors
    /// [`DispatchError`].
    pub async fn start(
        &self,
        origin: Origin,
        label: &str,
        plan: Option<&str>,
    ) -> Result<Saga, DispatchError> {
        self.start_as(&super::decider("cli"), origin, label, plan)
            .await
    }

    /// Start a new saga (Idle → Planning) for `principal` (recorded with
    /// it: a client sees only its own sagas), logged, owned by this
    /// process, deciding at the operator's autonomy level. `plan`: the
    /// plan it runs (canonical JSON), stored so that the saga can be
    /// resumed with `capsaga resume`.
    ///
    /// # Errors
    /// [`DispatchError`].
    pub async fn start_as(
        &self,
        principal: &Principal,
        origin: Origin,
        label: &str,
        plan: Option<&str>,
    ) -> Result<Saga, DispatchError> {
        let host = &self.host;
        let id = uuid::Uuid::new_v4().to_string();
        let state = host.guardrail.apply(State::Idle, Event::StartSaga)?;
        host.store
            .create_saga(&NewSaga {
                saga_id: &id,
                origin,
                label,
                state,
                owner: host.owner.id(),
                plan,
                principal: Some(&principal.name),
            })
            .await?;
        Ok(Saga::new(id, state, host.config.policy.autonomy))
    }

    /// Re-open an existing saga and take it over (it must not be driven by
    /// another live process). Steps are numbered from 0 again, so a step
    /// with the same tool and arguments at the same position has the same
    /// idempotency key, and a committed one is not executed again.
    ///
    /// # Errors
    /// [`DispatchError::NotFound`], [`DispatchError::Busy`] or the store.
    pub async fn resume(&self, saga_id: &str) -> Result<Saga, DispatchError> {
        let host = &self.host;
        let row = host
            .store
            .saga(saga_id)
            .await?
            .ok_or_else(|| DispatchError::NotFound(saga_id.to_string()))?;
        let me = host.owner.id();
        if row.owner.as_deref() != Some(me) {
            if let Some(o) = &row.owner
                && ownership::is_alive(&host.config.state_dir, o)
            {
                return Err(DispatchError::Busy {
                    saga: row.saga_id,
                    owner: o.clone(),
                });
            }
            if !host
                .store
                .take_over(&row.saga_id, row.owner.as_deref(), me, "resume")
                .await?
            {
                return Err(DispatchError::Busy {
                    saga: row.saga_id,
                    owner: "another process that took it over just now".into(),
                });
            }
        }
        // Read the state again: it may have moved before we took it over.
        let state = host
            .store
            .saga(saga_id)
            .await?
            .map(|r| r.state)
            .ok_or_else(|| DispatchError::NotFound(saga_id.to_string()))?;
        Ok(Saga::new(row.saga_id, state, host.config.policy.autonomy))
    }

    /// Decide `saga`'s next calls at `requested`, never above the operator's
    /// level (`[agent] autonomy` in `capsaga.toml`).
    pub fn set_autonomy(&self, saga: &mut Saga, requested: Autonomy) {
        saga.autonomy = self.host.config.policy.autonomy.narrow(requested);
    }

    /// End `saga` normally: Done when every step committed. A saga that
    /// never reached Acting ends with `Finish`. A parked saga stays parked.
    ///
    /// # Errors
    /// [`DispatchError`].
    pub async fn finish(&self, saga: &mut Saga) -> Result<State, DispatchError> {
        let host = &self.host;
        match saga.state {
            State::Planning => guardrail::transition(host, saga, Event::Finish).await?,
            State::Acting => {
                saga.pending_success = true;
                guardrail::settle_success(host, saga, true).await?;
                let done = Event::ValidationPassed { complete: true };
                guardrail::transition(host, saga, done).await?;
            }
            State::Validating => {
                let done = Event::ValidationPassed { complete: true };
                guardrail::transition(host, saga, done).await?;
            }
            _ => {}
        }
        Ok(saga.state)
    }

    /// End `saga` in failure: roll back what committed (ValidationFailed,
    /// ToolFailed, or ApprovalDenied for a parked saga), or `Abort` when
    /// nothing side-effecting ran.
    ///
    /// # Errors
    /// [`DispatchError`].
    pub async fn abort(&self, saga: &mut Saga) -> Result<RollbackReport, DispatchError> {
        let host = &self.host;
        match saga.state {
            State::Planning => {
                guardrail::transition(host, saga, Event::Abort).await?;
                Ok(RollbackReport::empty(saga.state))
            }
            State::Acting => compensate::rollback(host, saga, Event::ToolFailed).await,
            State::Validating => compensate::rollback(host, saga, Event::ValidationFailed).await,
            State::AwaitingApproval => {
                compensate::rollback(host, saga, Event::ApprovalDenied).await
            }
            _ => Ok(RollbackReport::empty(saga.state)),
        }
    }

    /// Finish what an interrupted or partially compensated saga left:
    /// Planning aborts; Acting, Validating and AwaitingApproval roll back;
    /// Compensating resumes its rollback; FailedRollbackPartial retries its
    /// failed compensations (an operator's transition when all succeed).
    /// Done and FailedRolledBack have nothing to do.
    ///
    /// # Errors
    /// [`DispatchError`].
    pub async fn recover(&self, saga: &mut Saga) -> Result<RollbackReport, DispatchError> {
        match saga.state {
            State::Planning | State::Acting | State::Validating | State::AwaitingApproval => {
                self.abort(saga).await
            }
            State::Compensating => compensate::finish_rollback(&self.host, saga).await,
            State::FailedRollbackPartial => compensate::retry(&self.host, saga).await,
            State::Idle | State::Done | State::FailedRolledBack => {
                Ok(RollbackReport::empty(saga.state))
            }
        }
    }
}
