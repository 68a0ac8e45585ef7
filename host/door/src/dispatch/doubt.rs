//! A store outage in the middle of a step (issue 45, item 6): when the
//! outcome of a step (COMMIT, FAIL, IN_DOUBT) or the rollback a failure
//! starts cannot be written (PostgreSQL restarted or unreachable, SQLite
//! busy, full or unwritable), the step stays BEGIN in the log: in doubt,
//! as after a crash. Such a saga can never be committed:
//!
//! - the door marks the [`Saga`] in doubt (`pipeline.rs`); its next call,
//!   its commit ([`Dispatcher::finish`]) or its abort rolls it back first
//!   ([`Dispatcher::roll_back_in_doubt`]: the step compensated from its
//!   dry-run pre-image, the committed steps in reverse), and the commit
//!   answers [`DispatchError::InDoubt`];
//! - the store refuses Done for a saga holding a BEGIN step
//!   (`SagaStore::set_state`, both back ends: [`crate::store::StoreError::InDoubt`]),
//!   so a saga resumed from the log (a saga handle, another process) is
//!   rolled back the same way when it is committed;
//! - a saga in doubt is on the host's [`crate::saga::InDoubt`] list, and a
//!   server rolls it back once the store answers again
//!   ([`Dispatcher::settle_left_in_doubt`], `serve::cluster::doubt_loop`),
//!   whether its driver let go of it (the request, turn or session ended
//!   on the store's error) or keeps it (an idle session); whoever rolls it
//!   back takes it from the list first; a process that exits first leaves
//!   it to the next start's crash recovery (its owner is then dead);
//! - `capsaga audit verify` reports a Done saga holding a BEGIN-only step
//!   (written by an older capsaga, or by hand).

use super::{DispatchError, Dispatcher, Outcome, Submitted, compensate};
use crate::saga::{RollbackReport, Saga};
use crate::sandbox::CallDiagnostics;
use crate::store::StoreError;
use capsaga_core::error::{ErrorKind, ToolError};
use capsaga_core::fsm::State;

use super::recover::Recovered;

impl Dispatcher {
    /// Roll back `saga`, which is in doubt (or holds a step in doubt),
    /// driven by its own driver: taken from the host's list first (after
    /// the host's loop, if that is rolling it back now: the saga is then
    /// found rolled back), then [`Dispatcher::roll_back_taken`].
    ///
    /// # Errors
    /// As [`Dispatcher::roll_back_taken`].
    pub(super) async fn roll_back_in_doubt(
        &self,
        saga: &mut Saga,
    ) -> Result<RollbackReport, DispatchError> {
        self.host.in_doubt.claim(&saga.id).await;
        self.roll_back_taken(saga).await
    }

    /// Roll back `saga` in doubt, its state read again from the store (a
    /// transition whose answer was lost may have been written, and the
    /// host's loop may have rolled it back already): Acting, Validating,
    /// AwaitingApproval and Planning roll back, Compensating resumes its
    /// rollback, the other states have nothing to do. On success the saga
    /// is no longer in doubt.
    ///
    /// # Errors
    /// [`DispatchError`] when the store still fails: the saga stays in
    /// doubt, listed again.
    async fn roll_back_taken(&self, saga: &mut Saga) -> Result<RollbackReport, DispatchError> {
        let host = &*self.host;
        let done = async {
            let row = host
                .store
                .saga(&saga.id)
                .await?
                .ok_or_else(|| DispatchError::NotFound(saga.id.clone()))?;
            saga.state = row.state;
            saga.pending_success = false;
            match saga.state {
                State::Planning | State::Acting | State::Validating | State::AwaitingApproval => {
                    self.abort(saga).await
                }
                State::Compensating => compensate::finish_rollback(host, saga).await,
                State::Idle
                | State::Done
                | State::FailedRolledBack
                | State::FailedRollbackPartial => Ok(RollbackReport::empty(saga.state)),
            }
        }
        .await;
        match done {
            Ok(report) => {
                saga.doubt = None;
                Ok(report)
            }
            Err(e) => {
                if let DispatchError::Store(s) = &e {
                    saga.store_failed(s, &host.in_doubt);
                }
                Err(e)
            }
        }
    }

    /// The door's answer to a call submitted to a saga in doubt: the saga
    /// rolled back ([`Dispatcher::roll_back_in_doubt`]) and the call not
    /// run, as [`Outcome::Failed`] of the step in doubt.
    ///
    /// # Errors
    /// [`DispatchError`] when the store still fails.
    pub(super) async fn submitted_in_doubt(
        &self,
        saga: &mut Saga,
    ) -> Result<Submitted, DispatchError> {
        let step = saga.doubt.as_ref().and_then(|d| d.step);
        // Boxed: the rollback's future inside the door's would nest too deep.
        let rollback = Box::pin(self.roll_back_in_doubt(saga)).await?;
        let error = ToolError::with_hint(
            ErrorKind::Unknown,
            format!(
                "saga {} was rolled back: {}; this call did not run",
                saga.id,
                in_doubt_because(step)
            ),
            "The saga's work was undone; start again in a new saga, or tell the user what failed.",
        );
        Ok(Submitted {
            outcome: Outcome::Failed {
                seq: step.unwrap_or(saga.next_seq),
                error,
                rollback,
                diagnostics: CallDiagnostics::default(),
            },
            verdict: None,
            tool: None,
            args: None,
            flow: None,
        })
    }

    /// [`Dispatcher::finish`] of a saga that cannot be committed (in doubt,
    /// or the store refused Done for a step in doubt): rolled back, and
    /// refused as [`DispatchError::InDoubt`].
    ///
    /// # Errors
    /// Always: [`DispatchError::InDoubt`], or the store's error when the
    /// rollback cannot be written either (the saga stays in doubt).
    pub(super) async fn refuse_commit(
        &self,
        saga: &mut Saga,
        step: Option<u64>,
    ) -> Result<State, DispatchError> {
        saga.mark_in_doubt(step, &self.host.in_doubt);
        let step = saga.doubt.as_ref().and_then(|d| d.step).or(step);
        let report = Box::pin(self.roll_back_in_doubt(saga)).await?;
        tracing::warn!(
            saga = %saga.id,
            "commit refused: {}; rolled back: now {}",
            in_doubt_because(step),
            report.final_state
        );
        Err(DispatchError::InDoubt {
            saga: saga.id.clone(),
            step,
            report: Box::new(report),
        })
    }

    /// Roll back every saga this process let go of in doubt
    /// ([`crate::saga::InDoubt`]) with the token its driver held, through
    /// this door. Returns what was done; a saga the store still cannot
    /// write stays listed for the next pass, one taken over by another
    /// process (fenced) or gone is forgotten.
    ///
    /// A failure is per saga, logged, and the saga kept for the next pass
    /// (`crate::saga::InDoubt::is_empty` says whether one is left).
    pub async fn settle_left_in_doubt(&self) -> Vec<Recovered> {
        let host = &self.host;
        let mut done = Vec::new();
        for (id, fence) in host.in_doubt.take_for_settling() {
            let mut saga = match self.resume_taken(&id, fence).await {
                Ok(s) => s,
                Err(DispatchError::NotFound(_)) => {
                    host.in_doubt.settled(&id);
                    continue;
                }
                Err(e) => {
                    host.in_doubt.retry(&id);
                    tracing::warn!(saga = %id, "a saga left in doubt is not rolled back yet (retried): {e}");
                    continue;
                }
            };
            let state_before = saga.state;
            match Box::pin(self.roll_back_taken(&mut saga)).await {
                Ok(report) => {
                    host.in_doubt.settled(&id);
                    tracing::warn!(
                        saga = %id,
                        "rolled back a saga left in doubt by a store failure: now {}",
                        report.final_state
                    );
                    done.push(Recovered {
                        saga_id: id,
                        state_before,
                        report,
                    });
                }
                Err(
                    DispatchError::Store(StoreError::Fenced { .. }) | DispatchError::NotFound(_),
                ) => {
                    // Another process took it over (and recovers it).
                    host.in_doubt.settled(&id);
                }
                Err(e) => {
                    host.in_doubt.retry(&id);
                    tracing::warn!(saga = %id, "a saga left in doubt is not rolled back yet (retried): {e}");
                }
            }
            // Whatever happened, this pass is done with it: the list, not
            // the saga's drop, keeps it.
            saga.doubt = None;
        }
        done
    }
}

/// [`in_doubt_because`] of a field (for [`DispatchError::InDoubt`]'s
/// message).
pub(super) fn because(step: &Option<u64>) -> String {
    in_doubt_because(*step)
}

/// Why a saga is in doubt, for messages.
pub(super) fn in_doubt_because(step: Option<u64>) -> String {
    match step {
        Some(s) => format!(
            "the outcome of its step {s} was never written (the state store failed while it ran), so the step is in doubt"
        ),
        None => "the state store failed while its rollback was written".to_string(),
    }
}
