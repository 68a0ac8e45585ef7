//! Crash recovery at start-up (DESIGN §5; SPEC phase 1: "kill -9 in the
//! middle of a saga → at restart the pending saga is found and its rollback
//! completed").
//!
//! Every command that acts on sagas calls [`recover_at_startup`] first. It
//! finds the sagas that are not terminal and whose owner process is dead
//! ([`super::owner::is_alive`]), takes each over (compare-and-set on its
//! owner, logged), and finishes it: an in-doubt step (BEGIN, no outcome) is
//! compensated with its dry-run pre-image (compensation tolerates "never
//! applied"), then the committed steps in reverse, ending FailedRolledBack or
//! FailedRollbackPartial. A saga that was already Compensating resumes its
//! rollback where it stopped.
//!
//! Idempotent: every compensation is logged as it completes and compensation
//! itself is idempotent, so a recovery killed half-way leaves a saga that the
//! next start-up recovers again (its owner, the killed recovering process, is
//! dead too), skipping what is already COMPENSATED.
//!
//! Not recovered: sagas of live processes, and plan or call sagas parked in
//! AwaitingApproval, which wait durably for `capsaga approve|deny` and
//! `capsaga resume`. An agent saga parked when its process died is rolled
//! back: a turn cannot be resumed without its model conversation.

use super::{RollbackReport, Saga, SagaError, owner};
use crate::host::Host;
use crate::wal::Wal;
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

/// Finish every saga left by a dead process. Returns what was done, oldest
/// saga first; a saga that another process took over meanwhile is skipped.
///
/// # Errors
/// [`SagaError`] when the database fails (a saga already recovered stays
/// recovered; the rest is retried at the next start-up).
pub async fn recover_at_startup(host: &Host) -> Result<Vec<Recovered>, SagaError> {
    let wal = Wal::new(&host.db);
    let mut done = Vec::new();
    for row in wal.unfinished_sagas()? {
        if row.state == State::AwaitingApproval && row.origin != "agent" {
            continue;
        }
        if row.owner.as_deref() == Some(host.owner.id()) {
            continue;
        }
        if let Some(o) = &row.owner
            && owner::is_alive(&host.config.state_dir, o)
        {
            continue;
        }
        if !wal.take_over(
            &row.saga_id,
            row.owner.as_deref(),
            host.owner.id(),
            "recovery: the owner process is gone",
        )? {
            continue;
        }
        let mut saga = Saga::resume(host, &row.saga_id)?;
        let state_before = saga.state();
        let report = saga.recover().await?;
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
