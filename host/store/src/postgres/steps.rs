//! `saga_steps`: the BEGIN record of a step (with the approval claim), its
//! outcome, retries and compensation. Every insert and update carries the
//! writer's fencing token; the trigger of the schema refuses a stale one
//! (SQLSTATE `CS409`, [`StoreError::Fenced`]).

use super::super::{BeginOutcome, NewStep, StepKey, StepRow, StepStatus, StepStore, StoreError};
use super::log::log_record;
use super::schema::FENCED_SQLSTATE;
use super::{Conn, PgStore, get, get_u64, i64_of, query, query_opt, to_json};
use crate::clock::now_rfc3339;
use crate::decode::{self, STEP_COLUMNS};
use crate::owned::OwnedStep;
use crate::records;
use crate::transitions::{self, HOLDING_AN_EFFECT};
use async_trait::async_trait;
use capsaga_core::error::ToolError;
use capsaga_core::tool::ToolOutput;
use tokio_postgres::types::ToSql;

/// The steps of a saga, by position (shared with `needs_operator`).
pub(super) async fn steps_of(c: &Conn, saga_id: &str) -> Result<Vec<StepRow>, StoreError> {
    let rows = query(
        c,
        &format!("SELECT {STEP_COLUMNS} FROM saga_steps WHERE saga_id = $1 ORDER BY step_seq"),
        &[&saga_id],
    )
    .await?;
    rows.iter().map(decode::step).collect()
}

/// The first step of `saga_id` that has no outcome (BEGIN), if any: a saga
/// holding one cannot end Done (`SagaStore::set_state`).
pub(super) async fn first_in_doubt(c: &Conn, saga_id: &str) -> Result<Option<u64>, StoreError> {
    let row = query_opt(
        c,
        "SELECT step_seq FROM saga_steps WHERE saga_id = $1 AND status = 'BEGIN' ORDER BY step_seq LIMIT 1",
        &[&saga_id],
    )
    .await?;
    row.map(|r| get_u64(&r, 0)).transpose()
}

/// A write refused by the fencing trigger becomes [`StoreError::Fenced`].
async fn fenced_exec(
    c: &Conn,
    sql: &str,
    params: &[&(dyn ToSql + Sync)],
    saga_id: &str,
    fence: u64,
) -> Result<u64, StoreError> {
    let st = c.prepare_cached(sql).await?;
    match c.execute(&st, params).await {
        Ok(n) => Ok(n),
        Err(e) if e.code().is_some_and(|s| s.code() == FENCED_SQLSTATE) => {
            Err(StoreError::fenced(saga_id, fence))
        }
        Err(e) => Err(e.into()),
    }
}

/// The existing row of this idempotency key, as `begin_step` reports it.
async fn existing(c: &Conn, key: &str) -> Result<Option<BeginOutcome>, StoreError> {
    let Some(row) = query_opt(
        c,
        "SELECT status, output FROM saga_steps WHERE idempotency_key = $1",
        &[&key],
    )
    .await?
    else {
        return Ok(None);
    };
    let status = decode::step_status(&get::<String>(&row, 0)?)?;
    if status != StepStatus::Commit {
        return Ok(Some(BeginOutcome::Exists(status)));
    }
    let out: Option<String> = get(&row, 1)?;
    let out = out.ok_or_else(|| StoreError::Decode("COMMIT row without output".into()))?;
    let out: ToolOutput =
        serde_json::from_str(&out).map_err(|e| StoreError::Decode(format!("output: {e}")))?;
    Ok(Some(BeginOutcome::AlreadyCommitted(out)))
}

/// Claim `approval_id` for this step (see the SQLite store's `claim`): one
/// conditional update, so of two hosts claiming at once one changes the
/// row and the other finds it claimed.
async fn claim(c: &Conn, s: &NewStep<'_>, approval_id: &str, at: &str) -> Result<bool, StoreError> {
    let args_hash = capsaga_core::idempotency::args_hash(s.args);
    let claimed = super::execute(
        c,
        &format!("UPDATE approvals SET status = 'claimed', claimed_saga = $2, claimed_step = $3, claimed_at = $4
         WHERE approval_id = $1 AND status = 'approved' AND tool_id = $5 AND tool_hash = $6 AND args_hash = $7
           AND (expires_at IS NULL OR expires_at > $4)
           AND {}", crate::claim::may_claim("approvals", "$2")),
        &[&approval_id, &s.saga_id, &i64_of(s.step_seq), &at, &s.tool_id, &s.tool_hash, &args_hash],
    )
    .await?;
    if claimed != 1 {
        return Ok(false);
    }
    log_record(
        c,
        &records::approval_claimed(s.saga_id, s.step_seq, approval_id),
        at,
    )
    .await?;
    Ok(true)
}

/// Insert the BEGIN row and its log record; with `unless_key_exists`, not
/// when the idempotency key exists (`Ok(false)`, nothing written).
async fn insert_begin(
    c: &Conn,
    s: &NewStep<'_>,
    at: &str,
    unless_key_exists: bool,
) -> Result<bool, StoreError> {
    let sql = if unless_key_exists {
        "INSERT INTO saga_steps (saga_id, step_seq, tool_id, tool_hash, grants, has_side_effects, idempotency_key, args, preimage, status, created_at, updated_at, fence)
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, 'BEGIN', $10, $10, $11) ON CONFLICT DO NOTHING"
    } else {
        "INSERT INTO saga_steps (saga_id, step_seq, tool_id, tool_hash, grants, has_side_effects, idempotency_key, args, preimage, status, created_at, updated_at, fence)
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, 'BEGIN', $10, $10, $11)"
    };
    let n = fenced_exec(
        c,
        sql,
        &[
            &s.saga_id,
            &i64_of(s.step_seq),
            &s.tool_id,
            &s.tool_hash,
            &to_json(&s.grants),
            &s.has_side_effects,
            &s.idempotency_key,
            &to_json(s.args),
            &s.preimage.map(to_json),
            &at,
            &i64_of(s.fence),
        ],
        s.saga_id,
        s.fence,
    )
    .await?;
    if n == 0 {
        return Ok(false);
    }
    log_record(c, &records::begin(s), at).await?;
    Ok(true)
}

/// What a step's update records besides its status.
enum Change {
    Output(ToolOutput),
    Error(Option<ToolError>),
}

impl PgStore {
    /// Move a step to `to` if it is in one of `allowed_from`, recording the
    /// output or the error, with the matching log record.
    async fn transition(
        &self,
        key: StepKey<'_>,
        to: StepStatus,
        allowed_from: &'static [StepStatus],
        change: Change,
    ) -> Result<(), StoreError> {
        let at = now_rfc3339();
        let (saga_id, fence, step_seq) = (key.saga_id.to_owned(), key.fence, key.step_seq);
        let allowed: Vec<String> = allowed_from
            .iter()
            .map(|s| s.as_str().to_string())
            .collect();
        self.write(move |c| {
            Box::pin(async move {
                // One statement: the move, only from an allowed status; the
                // reason is read only when nothing moved.
                let (sql, value, moved) = match &change {
                    Change::Output(o) => (
                        "UPDATE saga_steps SET status = $3, output = $4, updated_at = $5, fence = $6 WHERE saga_id = $1 AND step_seq = $2 AND status = ANY($7)",
                        Some(to_json(o)),
                        records::step_moved::<_, ToolError>(&saga_id, step_seq, to.as_str(), Some(o), None),
                    ),
                    Change::Error(e) => (
                        "UPDATE saga_steps SET status = $3, error = $4, updated_at = $5, fence = $6 WHERE saga_id = $1 AND step_seq = $2 AND status = ANY($7)",
                        e.as_ref().map(to_json),
                        records::step_moved::<ToolOutput, _>(&saga_id, step_seq, to.as_str(), None, e.as_ref()),
                    ),
                };
                let n = fenced_exec(
                    c,
                    sql,
                    &[&saga_id, &i64_of(step_seq), &to.as_str(), &value, &at, &i64_of(fence), &allowed],
                    &saga_id,
                    fence,
                )
                .await?;
                if n == 0 {
                    let row = query_opt(
                        c,
                        "SELECT status FROM saga_steps WHERE saga_id = $1 AND step_seq = $2",
                        &[&saga_id, &i64_of(step_seq)],
                    )
                    .await?;
                    return Err(match row {
                        None => transitions::no_step(&saga_id, step_seq),
                        Some(r) => {
                            let from = decode::step_status(&get::<String>(&r, 0)?)?;
                            transitions::cannot_become(&saga_id, step_seq, from, to)
                        }
                    });
                }
                log_record(c, &moved, &at).await
            })
        })
        .await
    }

    /// Record an error on a step still in BEGIN (a retry, or in doubt),
    /// with the log record `record`.
    async fn note_on_begin(
        &self,
        key: StepKey<'_>,
        error: &ToolError,
        record: records::Record,
        what: &'static str,
    ) -> Result<(), StoreError> {
        let at = now_rfc3339();
        let (saga_id, fence, step_seq) = (key.saga_id.to_owned(), key.fence, key.step_seq);
        let error = to_json(error);
        self.write(move |c| {
            Box::pin(async move {
                let n = fenced_exec(
                    c,
                    "UPDATE saga_steps SET error = $3, updated_at = $4, fence = $5 WHERE saga_id = $1 AND step_seq = $2 AND status = 'BEGIN'",
                    &[&saga_id, &i64_of(step_seq), &error, &at, &i64_of(fence)],
                    &saga_id,
                    fence,
                )
                .await?;
                if n == 0 {
                    return Err(transitions::not_in_begin(&saga_id, step_seq, what));
                }
                log_record(c, &record, &at).await
            })
        })
        .await
    }

    async fn step_where(
        &self,
        condition: &str,
        params: &[&(dyn ToSql + Sync)],
    ) -> Result<Option<StepRow>, StoreError> {
        let c = self.conn().await?;
        query_opt(
            &c,
            &format!("SELECT {STEP_COLUMNS} FROM saga_steps WHERE {condition}"),
            params,
        )
        .await?
        .as_ref()
        .map(decode::step)
        .transpose()
    }
}

#[async_trait]
impl StepStore for PgStore {
    async fn begin_step(&self, s: &NewStep<'_>) -> Result<BeginOutcome, StoreError> {
        let at = now_rfc3339();
        let owned = OwnedStep::of(s);
        self.write(move |c| {
            Box::pin(async move {
                let s = &owned.view();
                // Without an approval to claim: insert unless the key
                // exists (one statement), else report what is there.
                // Any conflict, not only the key's: two hosts beginning one
                // step at once conflict on the key *and* on (saga, position),
                // and the second index to see it would otherwise fail the
                // write instead of waiting for the first and finding it.
                if s.approval.is_none() {
                    if insert_begin(c, s, &at, true).await? {
                        return Ok(BeginOutcome::Started);
                    }
                    return existing(c, s.idempotency_key).await?.ok_or_else(|| {
                        StoreError::Backend(format!(
                            "step {} of saga `{}` exists under another idempotency key",
                            s.step_seq, s.saga_id
                        ))
                    });
                }
                if let Some(found) = existing(c, s.idempotency_key).await? {
                    return Ok(found);
                }
                if let Some(approval_id) = s.approval
                    && !claim(c, s, approval_id, &at).await?
                {
                    return Ok(BeginOutcome::ApprovalUnavailable);
                }
                insert_begin(c, s, &at, false).await?;
                Ok(BeginOutcome::Started)
            })
        })
        .await
    }

    async fn commit_step(&self, key: StepKey<'_>, output: &ToolOutput) -> Result<(), StoreError> {
        self.transition(
            key,
            StepStatus::Commit,
            &[StepStatus::Begin],
            Change::Output(output.clone()),
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
        self.write(move |c| {
            Box::pin(async move {
                let text = to_json(&label);
                let n = fenced_exec(
                    c,
                    "UPDATE saga_steps SET label = $3, fence = $4 WHERE saga_id = $1 AND step_seq = $2",
                    &[&saga_id, &i64_of(step_seq), &text, &i64_of(fence)],
                    &saga_id,
                    fence,
                )
                .await?;
                if n == 0 {
                    return Err(transitions::no_step(&saga_id, step_seq));
                }
                log_record(c, &records::label(&saga_id, step_seq, &label), &at).await
            })
        })
        .await
    }

    async fn fail_step(&self, key: StepKey<'_>, error: &ToolError) -> Result<(), StoreError> {
        self.transition(
            key,
            StepStatus::Fail,
            &[StepStatus::Begin],
            Change::Error(Some(error.clone())),
        )
        .await
    }

    async fn in_doubt(&self, key: StepKey<'_>, error: &ToolError) -> Result<(), StoreError> {
        let record = records::in_doubt(key.saga_id, key.step_seq, error);
        self.note_on_begin(key, error, record, "mark it in doubt")
            .await
    }

    async fn retry_attempt(
        &self,
        key: StepKey<'_>,
        attempt: u32,
        delay_ms: u64,
        error: &ToolError,
    ) -> Result<(), StoreError> {
        let record = records::retry(key.saga_id, key.step_seq, attempt, delay_ms, error);
        self.note_on_begin(key, error, record, "retry it").await
    }

    async fn compensated(&self, key: StepKey<'_>) -> Result<(), StoreError> {
        self.transition(
            key,
            StepStatus::Compensated,
            &HOLDING_AN_EFFECT,
            Change::Error(None),
        )
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
        self.write(move |c| {
            Box::pin(async move {
                // No step row changes (the trigger does not see this write):
                // the token is checked here, the saga's row share-locked to
                // commit so a take-over cannot pass it meanwhile.
                let row = query_opt(
                    c,
                    "SELECT s.fence, EXISTS (SELECT 1 FROM saga_steps t WHERE t.saga_id = s.saga_id AND t.step_seq = $2)
                     FROM saga_state s WHERE s.saga_id = $1 FOR SHARE OF s",
                    &[&saga_id, &i64_of(step_seq)],
                )
                .await?;
                let Some(row) = row else {
                    return Err(StoreError::Decode(format!("no saga `{saga_id}`")));
                };
                if get_u64(&row, 0)? != fence {
                    return Err(StoreError::fenced(&saga_id, fence));
                }
                if !get::<bool>(&row, 1)? {
                    return Err(transitions::no_step(&saga_id, step_seq));
                }
                log_record(c, &records::fs_restore(&saga_id, step_seq, report), &at).await
            })
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
            Change::Error(Some(error.clone())),
        )
        .await
    }

    async fn steps(&self, saga_id: &str) -> Result<Vec<StepRow>, StoreError> {
        let c = self.conn().await?;
        steps_of(&c, saga_id).await
    }

    async fn step_by_key(&self, key: &str) -> Result<Option<StepRow>, StoreError> {
        self.step_where("idempotency_key = $1", &[&key]).await
    }

    async fn step_at(&self, saga_id: &str, step_seq: u64) -> Result<Option<StepRow>, StoreError> {
        self.step_where(
            "saga_id = $1 AND step_seq = $2",
            &[&saga_id, &i64_of(step_seq)],
        )
        .await
    }
}
