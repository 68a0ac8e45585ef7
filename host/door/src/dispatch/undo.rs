//! The operator's undo of a finished saga (`capsaga undo --saga`): a Done
//! saga's committed side-effecting steps are compensated in reverse, exactly
//! as a rollback does (stage 10, `compensate.rs`), after the operator-only
//! transition `Done --OperatorUndo--> Compensating`, logged with
//! `actor: operator`. The saga ends FailedRolledBack, or
//! FailedRollbackPartial when a compensation fails (e.g. `unrevertible`
//! because someone else changed the file since).

use super::{DispatchError, Dispatcher, compensate};
use crate::saga::{RollbackReport, Saga};
use capsaga_core::fsm::OperatorEvent;

impl Dispatcher {
    /// Undo `saga` (Done, taken over with [`Dispatcher::resume`]).
    ///
    /// # Errors
    /// [`DispatchError::Transition`] when the saga is not Done (a saga that
    /// did not finish is rolled back with [`Dispatcher::recover`]);
    /// [`DispatchError::Store`].
    pub async fn undo(&self, saga: &mut Saga) -> Result<RollbackReport, DispatchError> {
        let host = &self.host;
        let event = OperatorEvent::Undo;
        let next = host.guardrail.apply_operator(saga.state, event)?;
        host.store
            .set_state(
                &saga.id,
                saga.fence,
                next,
                event.name(),
                Some(&serde_json::json!({"actor": "operator"})),
            )
            .await?;
        saga.state = next;
        compensate::finish_rollback(host, saga).await
    }
}
