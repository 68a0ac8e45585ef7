//! `saga_steps`: the BEGIN record of a step (with the approval claim),
//! its outcome, retries and compensation.

use super::super::{BeginOutcome, NewStep, StepKey, StepRow, StepStatus, StepStore, StoreError};
use super::Cached;
use super::log::log_record;
use super::{SqliteStore, all, fenced_or, first, to_json};
use crate::clock::now_rfc3339;
use crate::decode::{self, STEP_COLUMNS};
use crate::owned::OwnedStep;
use crate::records;
use crate::transitions::{self, HOLDING_AN_EFFECT};
use async_trait::async_trait;
use capsaga_core::error::ToolError;
use capsaga_core::tool::ToolOutput;
use rusqlite::{Connection, OptionalExtension, Transaction, params};

/// The steps of a saga, by position (shared with `needs_operator`).
pub(super) fn steps_of(c: &Connection, saga_id: &str) -> Result<Vec<StepRow>, StoreError> {
    all(
        c,
        &format!("SELECT {STEP_COLUMNS} FROM saga_steps WHERE saga_id = ?1 ORDER BY step_seq"),
        params![saga_id],
        |r| decode::step(r),
    )
}

/// The first step of `saga_id` that has no outcome (BEGIN), if any: a saga
/// holding one cannot end Done (`SagaStore::set_state`).
pub(super) fn first_in_doubt(c: &Connection, saga_id: &str) -> Result<Option<u64>, StoreError> {
    let step: Option<i64> = c
        .row(
            "SELECT step_seq FROM saga_steps WHERE saga_id = ?1 AND status = 'BEGIN' ORDER BY step_seq LIMIT 1",
            params![saga_id],
            |r| r.get(0),
        )
        .optional()?;
    Ok(step.and_then(|s| u64::try_from(s).ok()))
}

/// The existing row of this idempotency key, as `begin_step` reports it.
fn existing(tx: &Transaction<'_>, key: &str) -> Result<Option<BeginOutcome>, StoreError> {
    let row: Option<(String, Option<String>)> = tx
        .row(
            "SELECT status, output FROM saga_steps WHERE idempotency_key = ?1",
            params![key],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )
        .optional()?;
    let Some((status, output)) = row else {
        return Ok(None);
    };
    let status = decode::step_status(&status)?;
    if status != StepStatus::Commit {
        return Ok(Some(BeginOutcome::Exists(status)));
    }
    let out = output.ok_or_else(|| StoreError::Decode("COMMIT row without output".into()))?;
    let out: ToolOutput =
        serde_json::from_str(&out).map_err(|e| StoreError::Decode(format!("output: {e}")))?;
    Ok(Some(BeginOutcome::AlreadyCommitted(out)))
}

/// Claim `approval_id` for this step; false when it is not approved (any
/// more), bound to another call, expired, or requested by another saga that
/// has not ended or was not recorded with this saga's principal
/// (`capsaga_core::approval::may_claim`, [`crate::claim::may_claim`]).
fn claim(
    tx: &Transaction<'_>,
    s: &NewStep<'_>,
    approval_id: &str,
    at: &str,
) -> Result<bool, StoreError> {
    let claimed = tx.exec(
        &format!("UPDATE approvals SET status = 'claimed', claimed_saga = ?2, claimed_step = ?3, claimed_at = ?4
         WHERE approval_id = ?1 AND status = 'approved' AND tool_id = ?5 AND tool_hash = ?6 AND args_hash = ?7
           AND (expires_at IS NULL OR expires_at > ?4)
           AND {}", crate::claim::may_claim("approvals", "?2")),
        params![
            approval_id,
            s.saga_id,
            s.step_seq as i64,
            at,
            s.tool_id,
            s.tool_hash,
            capsaga_core::idempotency::args_hash(s.args)
        ],
    )?;
    if claimed != 1 {
        return Ok(false);
    }
    log_record(
        tx,
        &records::approval_claimed(s.saga_id, s.step_seq, approval_id),
        at,
    )?;
    Ok(true)
}

fn insert_begin(tx: &Transaction<'_>, s: &NewStep<'_>, at: &str) -> Result<(), StoreError> {
    tx.exec(
        "INSERT INTO saga_steps (saga_id, step_seq, tool_id, tool_hash, grants, has_side_effects, idempotency_key, args, preimage, status, created_at, updated_at, fence)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, 'BEGIN', ?10, ?10, ?11)",
        params![
            s.saga_id,
            s.step_seq as i64,
            s.tool_id,
            s.tool_hash,
            to_json(&s.grants),
            s.has_side_effects,
            s.idempotency_key,
            to_json(s.args),
            s.preimage.map(to_json),
            at,
            s.fence as i64
        ],
    )
    .map_err(|e| fenced_or(e, s.saga_id, s.fence))?;
    log_record(tx, &records::begin(s), at)
}

impl SqliteStore {
    /// Move a step to `to` if it is in one of `allowed_from`, recording the
    /// output or the error, with the matching log record.
    async fn transition(
        &self,
        key: StepKey<'_>,
        to: StepStatus,
        allowed_from: &'static [StepStatus],
        output: Option<&ToolOutput>,
        error: Option<&ToolError>,
    ) -> Result<(), StoreError> {
        let at = now_rfc3339();
        let (saga_id, fence, step_seq) = (key.saga_id.to_owned(), key.fence, key.step_seq);
        let output = output.cloned();
        let error = error.cloned();
        self.write(move |tx| {
            let (saga_id, output, error) = (saga_id.as_str(), output.as_ref(), error.as_ref());
            let fenced = |e| fenced_or(e, saga_id, fence);
            let status: String = tx
                .row(
                    "SELECT status FROM saga_steps WHERE saga_id = ?1 AND step_seq = ?2",
                    params![saga_id, step_seq as i64],
                    |r| r.get(0),
                )
                .optional()?
                .ok_or_else(|| {
                    transitions::no_step(saga_id, step_seq)
                })?;
            let from = decode::step_status(&status)?;
            if !allowed_from.contains(&from) {
                return Err(transitions::cannot_become(saga_id, step_seq, from, to));
            }
            if let Some(o) = output {
                tx.exec(
                    "UPDATE saga_steps SET status = ?3, output = ?4, updated_at = ?5, fence = ?6 WHERE saga_id = ?1 AND step_seq = ?2",
                    params![saga_id, step_seq as i64, to.as_str(), to_json(o), at, fence as i64],
                )
                .map_err(fenced)?;
            } else {
                tx.exec(
                    "UPDATE saga_steps SET status = ?3, error = ?4, updated_at = ?5, fence = ?6 WHERE saga_id = ?1 AND step_seq = ?2",
                    params![saga_id, step_seq as i64, to.as_str(), error.map(to_json), at, fence as i64],
                )
                .map_err(fenced)?;
            }
            let moved = records::step_moved(saga_id, step_seq, to.as_str(), output, error);
            log_record(tx, &moved, &at)
        })
        .await
    }

    fn step_where(
        &self,
        condition: &str,
        params: impl rusqlite::Params,
    ) -> Result<Option<StepRow>, StoreError> {
        self.read(|c| {
            first(
                c,
                &format!("SELECT {STEP_COLUMNS} FROM saga_steps WHERE {condition}"),
                params,
                |r| decode::step(r),
            )
        })
    }
}

#[async_trait]
impl StepStore for SqliteStore {
    async fn begin_step(&self, s: &NewStep<'_>) -> Result<BeginOutcome, StoreError> {
        let at = now_rfc3339();
        let owned = OwnedStep::of(s);
        self.write(move |tx| {
            let s = &owned.view();
            if let Some(found) = existing(tx, s.idempotency_key)? {
                return Ok(found);
            }
            if let Some(approval_id) = s.approval
                && !claim(tx, s, approval_id, &at)?
            {
                return Ok(BeginOutcome::ApprovalUnavailable);
            }
            insert_begin(tx, s, &at)?;
            Ok(BeginOutcome::Started)
        })
        .await
    }

    async fn commit_step(&self, key: StepKey<'_>, output: &ToolOutput) -> Result<(), StoreError> {
        self.transition(
            key,
            StepStatus::Commit,
            &[StepStatus::Begin],
            Some(output),
            None,
        )
        .await
    }

    async fn label_step(
        &self,
        key: StepKey<'_>,
        label: &serde_json::Value,
    ) -> Result<(), StoreError> {
        let at = now_rfc3339();
        let (saga_id, fence, step_seq) = (key.saga_id.to_owned(), key.fence, key.step_seq);
        let label = label.clone();
        self.write(move |tx| {
            let saga_id = saga_id.as_str();
            let n = tx
                .exec(
                    "UPDATE saga_steps SET label = ?3, fence = ?4 WHERE saga_id = ?1 AND step_seq = ?2",
                    params![saga_id, step_seq as i64, to_json(&label), fence as i64],
                )
                .map_err(|e| fenced_or(e, saga_id, fence))?;
            if n == 0 {
                return Err(transitions::no_step(saga_id, step_seq));
            }
            log_record(tx, &records::label(saga_id, step_seq, &label), &at)
        })
        .await
    }

    async fn fail_step(&self, key: StepKey<'_>, error: &ToolError) -> Result<(), StoreError> {
        self.transition(
            key,
            StepStatus::Fail,
            &[StepStatus::Begin],
            None,
            Some(error),
        )
        .await
    }

    async fn retry_attempt(
        &self,
        key: StepKey<'_>,
        attempt: u32,
        delay_ms: u64,
        error: &ToolError,
    ) -> Result<(), StoreError> {
        let at = now_rfc3339();
        let (saga_id, fence, step_seq) = (key.saga_id.to_owned(), key.fence, key.step_seq);
        let error = error.clone();
        self.write(move |tx| {
            let (saga_id, error) = (saga_id.as_str(), &error);
            let n = tx.exec(
                "UPDATE saga_steps SET error = ?3, updated_at = ?4, fence = ?5 WHERE saga_id = ?1 AND step_seq = ?2 AND status = 'BEGIN'",
                params![saga_id, step_seq as i64, to_json(error), at, fence as i64],
            )
            .map_err(|e| fenced_or(e, saga_id, fence))?;
            if n == 0 {
                return Err(transitions::not_in_begin(saga_id, step_seq, "retry it"));
            }
            let retry = records::retry(saga_id, step_seq, attempt, delay_ms, error);
            log_record(tx, &retry, &at)
        })
        .await
    }

    async fn in_doubt(&self, key: StepKey<'_>, error: &ToolError) -> Result<(), StoreError> {
        let at = now_rfc3339();
        let (saga_id, fence, step_seq) = (key.saga_id.to_owned(), key.fence, key.step_seq);
        let error = error.clone();
        self.write(move |tx| {
            let (saga_id, error) = (saga_id.as_str(), &error);
            let n = tx.exec(
                "UPDATE saga_steps SET error = ?3, updated_at = ?4, fence = ?5 WHERE saga_id = ?1 AND step_seq = ?2 AND status = 'BEGIN'",
                params![saga_id, step_seq as i64, to_json(error), at, fence as i64],
            )
            .map_err(|e| fenced_or(e, saga_id, fence))?;
            if n == 0 {
                return Err(transitions::not_in_begin(saga_id, step_seq, "mark it in doubt"));
            }
            log_record(tx, &records::in_doubt(saga_id, step_seq, error), &at)
        })
        .await
    }

    async fn compensated(&self, key: StepKey<'_>) -> Result<(), StoreError> {
        self.transition(key, StepStatus::Compensated, &HOLDING_AN_EFFECT, None, None)
            .await
    }

    async fn fs_restored(
        &self,
        key: StepKey<'_>,
        report: &serde_json::Value,
    ) -> Result<(), StoreError> {
        let at = now_rfc3339();
        let (saga_id, fence, step_seq) = (key.saga_id.to_owned(), key.fence, key.step_seq);
        let report = report.clone();
        self.write(move |tx| {
            let saga_id = saga_id.as_str();
            // No step row changes (the trigger does not see this write):
            // the token is checked here, in the write's own transaction.
            let current: Option<i64> = tx
                .row(
                    "SELECT fence FROM saga_state WHERE saga_id = ?1",
                    params![saga_id],
                    |r| r.get(0),
                )
                .optional()?;
            match current {
                None => return Err(StoreError::Decode(format!("no saga `{saga_id}`"))),
                Some(f) if u64::try_from(f).ok() != Some(fence) => {
                    return Err(StoreError::fenced(saga_id, fence));
                }
                Some(_) => {}
            }
            let n: i64 = tx.row(
                "SELECT count(*) FROM saga_steps WHERE saga_id = ?1 AND step_seq = ?2",
                params![saga_id, step_seq as i64],
                |r| r.get(0),
            )?;
            if n == 0 {
                return Err(transitions::no_step(saga_id, step_seq));
            }
            log_record(tx, &records::fs_restore(saga_id, step_seq, report), &at)
        })
        .await
    }

    async fn compensation_failed(
        &self,
        key: StepKey<'_>,
        error: &ToolError,
    ) -> Result<(), StoreError> {
        self.transition(
            key,
            StepStatus::CompensationFailed,
            &HOLDING_AN_EFFECT,
            None,
            Some(error),
        )
        .await
    }

    async fn steps(&self, saga_id: &str) -> Result<Vec<StepRow>, StoreError> {
        self.read(|c| steps_of(c, saga_id))
    }

    async fn step_by_key(&self, key: &str) -> Result<Option<StepRow>, StoreError> {
        self.step_where("idempotency_key = ?1", params![key])
    }

    async fn step_at(&self, saga_id: &str, step_seq: u64) -> Result<Option<StepRow>, StoreError> {
        self.step_where(
            "saga_id = ?1 AND step_seq = ?2",
            params![saga_id, step_seq as i64],
        )
    }
}
