//! Crash recovery at start-up (DESIGN §5; SPEC phase 1: "kill -9 in the
//! middle of a saga → at restart the pending saga is found and its rollback
//! completed").
//!
//! Every command that acts on sagas calls [`Dispatcher::recover_dead`]
//! first. It finds the sagas that are not terminal and whose owner process
//! is dead (`ownership::recoverable`), takes each over (compare-and-set on
//! its owner, logged), and finishes it: an in-doubt step (BEGIN, no outcome)
//! is compensated with its dry-run pre-image (compensation tolerates "never
//! applied"), then the committed steps in reverse, ending FailedRolledBack or
//! FailedRollbackPartial. A saga that was already Compensating resumes its
//! rollback where it stopped. A saga released between two requests (a saga
//! handle, `dispatch::handles`) has nothing in doubt and is left alone.
//!
//! Idempotent: every compensation is logged as it completes and compensation
//! itself is idempotent, so a recovery killed half-way leaves a saga that the
//! next start-up recovers again (its owner, the killed recovering process, is
//! dead too), skipping what is already COMPENSATED.

use super::{DispatchError, Dispatcher};
use crate::ownership;
use crate::saga::RollbackReport;
use capsaga_core::fsm::State;
use serde::Serialize;

/// What recovery did to one saga.
#[derive(Debug, Clone, Serialize)]
pub struct Recovered {
    /// The saga.
    pub saga_id: String,
    /// Its state when found.
    pub state_before: State,
    /// The rollback.
    pub report: RollbackReport,
}

impl Dispatcher {
    /// Finish every saga left by a dead process. Returns what was done,
    /// oldest saga first; a saga that another process took over meanwhile
    /// is skipped.
    ///
    /// # Errors
    /// [`DispatchError`] when the store fails (a saga already recovered stays
    /// recovered; the rest is retried at the next start-up).
    pub async fn recover_dead(&self) -> Result<Vec<Recovered>, DispatchError> {
        let host = &self.host;
        let me = host.owner.id();
        let mut done = Vec::new();
        // One look per owner per pass (many sagas share a few owners).
        let mut alive_owners = std::collections::HashMap::new();
        for row in host.store.unfinished_sagas().await? {
            let alive = match row.owner.as_deref() {
                Some(o) if o != me => match alive_owners.get(o) {
                    Some(a) => *a,
                    None => {
                        let a = host.store.owner_alive(o).await?;
                        alive_owners.insert(o.to_string(), a);
                        a
                    }
                },
                _ => false,
            };
            let released = row.released_at.is_some();
            if !ownership::recoverable(
                me,
                row.owner.as_deref(),
                alive,
                released,
                row.state,
                row.scope,
                &row.origin,
            ) {
                continue;
            }
            let why = "recovery: the owner process is gone";
            let Some(fence) = host
                .store
                .take_over(&row.saga_id, row.owner.as_deref(), me, why)
                .await?
            else {
                continue;
            };
            let mut saga = self.resume_taken(&row.saga_id, fence).await?;
            let state_before = saga.state();
            let report = self.recover(&mut saga).await?;
            tracing::info!(
                saga = %row.saga_id,
                "recovered a saga left {state_before} by a dead process: now {}",
                report.final_state
            );
            done.push(Recovered {
                saga_id: row.saga_id,
                state_before,
                report,
            });
        }
        Ok(done)
    }
}
