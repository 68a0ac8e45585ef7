//! The operator's decisions on approvals (`capsaga approve|deny`, later the
//! HTTP API's `/v1/approvals/{id}/approve|deny`), through the door: the
//! decision is recorded (with its log record) and a saga parked on a
//! denied approval is rolled back (`Via::Operator`), unless a live process
//! drives it or a live scope of this process holds it (an MCP session, a
//! request: it sees the denial itself).

use super::{DispatchError, Dispatcher};
use crate::saga::{RollbackReport, Saga};
use crate::store::{ApprovalOpError, ApprovalRow, SagaRow};
use capsaga_core::approval::ApprovalStatus;
use capsaga_core::fsm::State;
use capsaga_core::principal::{Action, Principal};

/// What an operator's decision did.
#[derive(Debug, Clone)]
pub struct Decided {
    /// The approval, as decided.
    pub approval: ApprovalRow,
    /// A plan or call saga is parked on it and can be resumed from its
    /// stored plan (`capsaga resume`).
    pub resumable: bool,
    /// The rollback of the saga parked on a denied approval, when this
    /// process did it.
    pub rollback: Option<RollbackReport>,
}

/// Why an operator's decision failed.
#[derive(Debug, thiserror::Error)]
pub enum OperatorError {
    /// The approval could not be decided (unknown id, already decided, ...).
    #[error(transparent)]
    Approval(#[from] ApprovalOpError),
    /// The door failed rolling back the parked saga.
    #[error(transparent)]
    Dispatch(#[from] DispatchError),
    /// The principal may not decide approvals (a client).
    #[error("{0} may not decide approvals: only an operator does")]
    Forbidden(String),
}

impl Dispatcher {
    /// Record the operator's decision on approval `id` (or a unique prefix):
    /// `approve` or deny, by the authenticated principal `by` (recorded as
    /// `token:alice (operator)`, `cli:alice (operator)`), with a note kept
    /// in the log.
    ///
    /// # Errors
    /// [`OperatorError::Forbidden`] unless `by` is an operator; else
    /// [`OperatorError`].
    pub async fn decide(
        &self,
        id: &str,
        approve: bool,
        by: &Principal,
        note: Option<&str>,
    ) -> Result<Decided, OperatorError> {
        if !by.may(Action::DecideApproval) {
            return Err(OperatorError::Forbidden(by.to_string()));
        }
        let host = &self.host;
        let approval = host
            .store
            .decide_approval(id, approve, &by.to_string(), note)
            .await?;
        let parked = self.parked_on(&approval).await?;
        let mut rollback = None;
        if !approve && let Some(saga) = &parked {
            let live = match saga.owner.as_deref() {
                Some(o) if o != host.owner.id() => host
                    .store
                    .owner_alive(o)
                    .await
                    .map_err(DispatchError::from)?,
                _ => self.held_by(&approval.saga_id).is_some(),
            };
            if !live {
                let via = super::Via::Operator;
                match self
                    .reopen(&approval.saga_id, via, super::Act::Rollback, by)
                    .await
                {
                    Ok((mut s, _hold)) => rollback = Some(self.abort(&mut s).await?),
                    // Taken meanwhile by its scope or another host: it sees
                    // the denial itself.
                    Err(DispatchError::Held { .. } | DispatchError::Busy { .. }) => {}
                    Err(e) => return Err(e.into()),
                }
            }
        }
        let resumable = approve
            && parked.is_some()
            && host
                .store
                .saga_plan(&approval.saga_id)
                .await
                .map_err(DispatchError::from)?
                .is_some();
        Ok(Decided {
            approval,
            resumable,
            rollback,
        })
    }

    /// Whether `who` may decide an approval of a call of `tool` (an
    /// operator always; a client only for a tool the policy lists in
    /// `[approvals] client_confirm` that is not `code_run`, high risk or
    /// irreversible): what a surface asks before offering its client to
    /// confirm a call. `false` for an unknown tool.
    pub fn may_confirm(&self, tool: &str, who: &Principal) -> bool {
        self.host
            .registry
            .get(tool)
            .is_some_and(|t| super::approval::may_decide(&self.host, &t, who))
    }

    /// Record `who`'s answer to approval `id` of a call in one of `who`'s
    /// own sagas, still parked on it, when the door lets `who` decide it
    /// ([`Dispatcher::may_confirm`]): a client confirming a tool the
    /// policy opted into client confirmation (MCP 2026-07-28 asks it
    /// through an input-required result instead of an elicitation
    /// request). The decision is recorded under `who` (`token:bob
    /// (client)`); the caller runs the call again to claim it.
    ///
    /// # Errors
    /// [`OperatorError::Forbidden`] when the approval is not of `who`'s
    /// saga, no longer parked, or for a tool `who` may not confirm; else
    /// [`OperatorError`].
    pub async fn confirm(
        &self,
        id: &str,
        approve: bool,
        who: &Principal,
    ) -> Result<ApprovalRow, OperatorError> {
        let store = &self.host.store;
        let forbidden = || OperatorError::Forbidden(who.to_string());
        let row = store.approval(id).await.map_err(|_| forbidden())?;
        let parked = self.parked_on(&row).await?.ok_or_else(forbidden)?;
        if parked.principal.as_deref() != Some(who.name.as_str())
            || !self.may_confirm(&row.binding.tool_id, who)
        {
            return Err(forbidden());
        }
        Ok(store
            .decide_approval(&row.approval_id, approve, &who.to_string(), None)
            .await?)
    }

    /// Roll back `saga`, held by its caller's scope, when it is parked on
    /// an approval an operator denied meanwhile (the denial could not roll
    /// it back: the scope held it, see [`Dispatcher::decide`]); whether it
    /// did. A session applies this before its next call and at its end.
    ///
    /// # Errors
    /// [`DispatchError`].
    pub async fn end_if_denied(&self, saga: &mut Saga) -> Result<bool, DispatchError> {
        if saga.state != State::AwaitingApproval {
            return Ok(false);
        }
        let parked = self
            .host
            .store
            .approval_for_step(&saga.id, saga.next_seq)
            .await?;
        if !parked.is_some_and(|a| a.status == ApprovalStatus::Denied) {
            return Ok(false);
        }
        self.abort(saga).await?;
        Ok(true)
    }

    /// The saga parked on `a`, if it still is: AwaitingApproval, and no step
    /// logged at the approval's position yet.
    async fn parked_on(&self, a: &ApprovalRow) -> Result<Option<SagaRow>, DispatchError> {
        let store = &self.host.store;
        let Some(saga) = store.saga(&a.saga_id).await? else {
            return Ok(None);
        };
        if saga.state != State::AwaitingApproval {
            return Ok(None);
        }
        let steps = store.steps(&a.saga_id).await?;
        if steps.iter().any(|s| s.step_seq >= a.step_seq) {
            return Ok(None);
        }
        Ok(Some(saga))
    }
}
