//! A saga's life through the door: start (Idle → Planning, logged, owned by
//! this process), resume (take over a saga whose owner is gone), finish
//! (Done), abort (roll back what committed), recovery of an interrupted
//! saga, and the operator's retry of failed compensations.

use super::{DispatchError, Dispatcher, compensate, guardrail};
use crate::saga::{RollbackReport, Saga, SagaParts};
use crate::store::{NewSaga, Scope, StoreError};
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
        scope: Scope,
        label: &str,
        plan: Option<&str>,
    ) -> Result<Saga, DispatchError> {
        self.start_as(&super::decider("cli"), scope, label, plan)
            .await
    }

    /// Start a new saga (Idle → Planning) for `principal` (recorded with
    /// it: a client sees only its own sagas), opened by `scope` (recorded
    /// with it: only that scope drives it, see `dispatch::scope`), logged,
    /// owned by this process, deciding at the operator's autonomy level.
    /// `plan`: the plan it runs (canonical JSON), stored so that the saga
    /// can be resumed with `capsaga resume`. A surface that serves several
    /// scopes in one process opens its sagas with [`Dispatcher::open`]
    /// instead, which also holds them.
    ///
    /// # Errors
    /// [`DispatchError`].
    pub async fn start_as(
        &self,
        principal: &Principal,
        scope: Scope,
        label: &str,
        plan: Option<&str>,
    ) -> Result<Saga, DispatchError> {
        let host = &self.host;
        let id = uuid::Uuid::new_v4().to_string();
        let fence = crate::store::FIRST_FENCE;
        let state = host.guardrail.apply(State::Idle, Event::StartSaga)?;
        host.store
            .create_saga(&NewSaga {
                saga_id: &id,
                scope,
                label,
                state,
                owner: host.owner.id(),
                plan,
                principal: Some(&principal.name),
            })
            .await?;
        let mut saga = Saga::new(SagaParts {
            id,
            fence,
            state,
            autonomy: host.config.policy.autonomy,
            principal: Some(principal.name.clone()),
            scope: Some(scope),
        });
        saga.flow = super::flow::fresh(host, scope);
        // A plan is written before anything runs: its values are its
        // author's, not data read along the way.
        if let Some(plan) = plan {
            saga.flow.user_message(&principal.name, plan);
        }
        Ok(saga)
    }

    /// Re-open an existing saga and take it over (it must not be driven by
    /// another live process, nor held by a live scope of this one; a saga
    /// released between two requests is claimed). Steps are numbered from
    /// 0 again, so a step with the same tool and arguments at the same
    /// position has the same idempotency key, and a committed one is not
    /// executed again. Which scope may do this, for whom, is
    /// [`Dispatcher::reopen`]'s check: every server surface goes through
    /// it.
    ///
    /// # Errors
    /// [`DispatchError::NotFound`], [`DispatchError::Busy`],
    /// [`DispatchError::Held`] or the store.
    pub async fn resume(&self, saga_id: &str) -> Result<Saga, DispatchError> {
        if let Some(by) = self.host.holds.holder(saga_id) {
            return Err(DispatchError::Held {
                saga: saga_id.to_string(),
                by,
            });
        }
        self.take(saga_id).await
    }

    /// [`Dispatcher::resume`] without looking at this process's holds (the
    /// caller holds the saga, or it is the door's own recovery).
    pub(super) async fn take(&self, saga_id: &str) -> Result<Saga, DispatchError> {
        let host = &self.host;
        let row = host
            .store
            .saga(saga_id)
            .await?
            .ok_or_else(|| DispatchError::NotFound(saga_id.to_string()))?;
        let me = host.owner.id();
        if row.owner.as_deref() == Some(me) {
            // A saga of this process in doubt (a store failure while a
            // step's outcome was written) comes back in doubt: its next call
            // or commit rolls it back (after the host's loop, if that is
            // rolling it back now).
            let mut saga = self.resume_taken(saga_id, row.fence).await?;
            if host.in_doubt.listed(saga_id) {
                saga.mark_in_doubt(None, &host.in_doubt);
            }
            return Ok(saga);
        }
        if row.released_at.is_some() {
            // Released between two requests (a saga handle): whoever serves
            // the next one claims it; of two at once, one does.
            let Some(fence) = host
                .store
                .claim_released(&row.saga_id, me, super::handles::CLAIMED, None)
                .await?
            else {
                return Err(DispatchError::Busy {
                    saga: row.saga_id,
                    owner: "another process that claimed it just now".into(),
                });
            };
            return self.resume_taken(saga_id, fence).await;
        }
        if let Some(o) = &row.owner
            && host.store.owner_alive(o).await?
        {
            return Err(DispatchError::Busy {
                saga: row.saga_id,
                owner: o.clone(),
            });
        }
        let Some(fence) = host
            .store
            .take_over(&row.saga_id, row.owner.as_deref(), me, "resume")
            .await?
        else {
            return Err(DispatchError::Busy {
                saga: row.saga_id,
                owner: "another process that took it over just now".into(),
            });
        };
        self.resume_taken(saga_id, fence).await
    }

    /// Number `saga`'s next step after its logged ones and count what they
    /// committed, and leave the success of a last step that committed a
    /// side effect to be settled by the next step (as if the saga had never
    /// left memory): for a saga continued across requests (MCP 2026-07-28
    /// saga handles), where a new call must never be taken for the replay
    /// of a logged one.
    ///
    /// # Errors
    /// The store.
    pub(super) async fn continue_after_logged(&self, saga: &mut Saga) -> Result<(), DispatchError> {
        let steps = self.host.store.steps(saga.id()).await?;
        saga.next_seq = steps.iter().map(|s| s.step_seq + 1).max().unwrap_or(0);
        saga.side_effects = steps
            .iter()
            .filter(|s| s.has_side_effects && s.status == crate::store::StepStatus::Commit)
            .count() as u64;
        saga.pending_success = saga.state == State::Acting
            && steps.iter().max_by_key(|s| s.step_seq).is_some_and(|s| {
                s.has_side_effects && s.status == crate::store::StepStatus::Commit
            });
        Ok(())
    }

    /// A saga this process owns with fencing token `fence`, as it is now in
    /// the store (its state may have moved before it was taken over).
    ///
    /// # Errors
    /// [`DispatchError::NotFound`] or the store.
    pub(super) async fn resume_taken(
        &self,
        saga_id: &str,
        fence: u64,
    ) -> Result<Saga, DispatchError> {
        let host = &self.host;
        let row = host
            .store
            .saga(saga_id)
            .await?
            .ok_or_else(|| DispatchError::NotFound(saga_id.to_string()))?;
        let mut saga = Saga::new(SagaParts {
            id: saga_id.to_string(),
            fence,
            state: row.state,
            autonomy: host.config.policy.autonomy,
            principal: row.principal.clone(),
            scope: row.scope,
        });
        // What entered the saga before, read back from its log: a resumed
        // saga (a saga handle's next request, `capsaga resume`, a saga
        // reopened through its scope) keeps its labels.
        super::flow::rebuild(host, &mut saga, &row).await?;
        Ok(saga)
    }

    /// Decide `saga`'s next calls at `requested`, never above the operator's
    /// level (`[agent] autonomy` in `capsaga.toml`).
    pub fn set_autonomy(&self, saga: &mut Saga, requested: Autonomy) {
        saga.autonomy = self.host.config.policy.autonomy.narrow(requested);
    }

    /// End `saga` normally: Done when every step committed. A saga that
    /// never reached Acting ends with `Finish`. A parked saga stays parked.
    /// A saga in doubt (the store failed while a step's outcome was
    /// written), or one the store refuses Done because a step has no
    /// outcome, is never committed: it is rolled back instead (`doubt.rs`).
    ///
    /// # Errors
    /// [`DispatchError::InDoubt`] (rolled back instead), or
    /// [`DispatchError`].
    pub async fn finish(&self, saga: &mut Saga) -> Result<State, DispatchError> {
        if let Some(d) = &saga.doubt {
            let step = d.step;
            return self.refuse_commit(saga, step).await;
        }
        match self.finish_stages(saga).await {
            Err(DispatchError::Store(StoreError::InDoubt { step, .. })) => {
                self.refuse_commit(saga, Some(step)).await
            }
            other => other,
        }
    }

    /// [`Dispatcher::finish`]'s transitions.
    async fn finish_stages(&self, saga: &mut Saga) -> Result<State, DispatchError> {
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
