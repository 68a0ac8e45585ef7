//! `saga_state`: sagas, their guardrail state, owner, fencing token and
//! plan.

use super::super::{
    FIRST_FENCE, FailedCompensation, NeedsOperator, NewSaga, SagaQuery, SagaRow, SagaStore,
    StepStatus, StoreError,
};
use super::log::log_record;
use super::{Conn, PgStore, execute, get, get_u64, i64_of, query, query_opt, steps};
use crate::claim::ENDED_STATES;
use crate::clock::now_rfc3339;
use crate::decode::{self, SAGA_COLUMNS};
use crate::records;
use async_trait::async_trait;
use capsaga_core::fsm::State;
use serde_json::Value;

/// The database's clock now, as `clock::now_rfc3339` writes a time (text
/// order is time order).
const DB_NOW: &str =
    r#"to_char(clock_timestamp() AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"')"#;

/// The database's clock `$3` milliseconds ago, written as [`DB_NOW`].
const DB_AGO: &str = r#"to_char((clock_timestamp() - $3::bigint * interval '1 millisecond') AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"')"#;

/// Why a fenced update of `saga_state` changed nothing: the saga does not
/// exist ([`StoreError::Decode`]) or `fence` is not its token
/// ([`StoreError::Fenced`]).
pub(super) async fn missing_or_fenced(
    c: &Conn,
    saga_id: &str,
    fence: u64,
) -> Result<StoreError, StoreError> {
    let found = query_opt(
        c,
        "SELECT fence FROM saga_state WHERE saga_id = $1",
        &[&saga_id],
    )
    .await?;
    Ok(match found {
        None => StoreError::Decode(format!("no saga `{saga_id}`")),
        Some(_) => StoreError::fenced(saga_id, fence),
    })
}

impl PgStore {
    async fn sagas_where(&self, condition: &str) -> Result<Vec<SagaRow>, StoreError> {
        let c = self.conn().await?;
        let rows = query(
            &c,
            &format!(
                "SELECT {SAGA_COLUMNS} FROM saga_state WHERE {condition} ORDER BY created_at, ord"
            ),
            &[],
        )
        .await?;
        rows.iter().map(decode::saga).collect()
    }
}

#[async_trait]
impl SagaStore for PgStore {
    async fn create_saga(&self, s: &NewSaga<'_>) -> Result<(), StoreError> {
        let at = now_rfc3339();
        let record = records::saga_created(s);
        let (origin, scope) = (s.scope.origin(), s.scope.as_str());
        let (saga_id, label, owner, plan, state, principal) = (
            s.saga_id.to_owned(),
            s.label.to_owned(),
            s.owner.to_owned(),
            s.plan.map(str::to_owned),
            s.state,
            s.principal.map(str::to_owned),
        );
        self.write(move |c| {
            Box::pin(async move {
                execute(
                    c,
                    "INSERT INTO saga_state (saga_id, state, origin, label, created_at, updated_at, owner, plan, fence, principal, scope) VALUES ($1, $2, $3, $4, $5, $5, $6, $7, $8, $9, $10)",
                    &[&saga_id, &state.as_str(), &origin, &label, &at, &owner, &plan, &i64_of(FIRST_FENCE), &principal, &scope],
                )
                .await?;
                log_record(c, &record, &at).await
            })
        })
        .await
    }

    async fn take_over(
        &self,
        saga_id: &str,
        expected: Option<&str>,
        owner: &str,
        why: &str,
    ) -> Result<Option<u64>, StoreError> {
        let at = now_rfc3339();
        let (saga_id, expected, owner, why) = (
            saga_id.to_owned(),
            expected.map(str::to_owned),
            owner.to_owned(),
            why.to_owned(),
        );
        self.write(move |c| {
            Box::pin(async move {
                // Compare and set on the owner, and the database's own check
                // that the expected owner's lease has expired (by its clock):
                // a live owner keeps its sagas whatever the caller believes.
                let row = query_opt(
                    c,
                    "UPDATE saga_state SET owner = $3, fence = fence + 1
                     WHERE saga_id = $1 AND owner IS NOT DISTINCT FROM $2 AND released_at IS NULL
                       AND NOT EXISTS (SELECT 1 FROM hosts h WHERE h.owner_id = saga_state.owner AND h.expires_at > clock_timestamp())
                     RETURNING fence",
                    &[&saga_id, &expected, &owner],
                )
                .await?;
                let Some(row) = row else {
                    return Ok(None);
                };
                let fence = get_u64(&row, 0)?;
                let taken = records::owner_taken(&saga_id, &owner, expected.as_deref(), &why, fence);
                log_record(c, &taken, &at).await?;
                Ok(Some(fence))
            })
        })
        .await
    }

    async fn release_saga(
        &self,
        saga_id: &str,
        owner: &str,
        fence: u64,
    ) -> Result<Option<u64>, StoreError> {
        let at = now_rfc3339();
        let (saga_id, owner) = (saga_id.to_owned(), owner.to_owned());
        self.write(move |c| {
            Box::pin(async move {
                // `released_at` by the database's clock: every host measures
                // an abandoned handle's idle time by the same clock.
                let row = query_opt(
                    c,
                    &format!(
                        "UPDATE saga_state SET owner = NULL, released_at = {DB_NOW}, fence = fence + 1
                         WHERE saga_id = $1 AND owner = $2 AND fence = $3
                         RETURNING fence"
                    ),
                    &[&saga_id, &owner, &i64_of(fence)],
                )
                .await?;
                let Some(row) = row else {
                    return Ok(None);
                };
                let next = get_u64(&row, 0)?;
                log_record(c, &records::released(&saga_id, &owner, next), &at).await?;
                Ok(Some(next))
            })
        })
        .await
    }

    async fn claim_released(
        &self,
        saga_id: &str,
        owner: &str,
        why: &str,
        idle_ms: Option<u64>,
    ) -> Result<Option<u64>, StoreError> {
        let at = now_rfc3339();
        let (saga_id, owner, why) = (saga_id.to_owned(), owner.to_owned(), why.to_owned());
        let idle = idle_ms.map(i64_of);
        self.write(move |c| {
            Box::pin(async move {
                let row = query_opt(
                    c,
                    &format!(
                        "UPDATE saga_state SET owner = $2, released_at = NULL, fence = fence + 1
                         WHERE saga_id = $1 AND owner IS NULL AND released_at IS NOT NULL
                           AND ($3::bigint IS NULL OR released_at COLLATE \"C\" <= {DB_AGO})
                         RETURNING fence"
                    ),
                    &[&saga_id, &owner, &idle],
                )
                .await?;
                let Some(row) = row else {
                    return Ok(None);
                };
                let fence = get_u64(&row, 0)?;
                let taken = records::owner_taken(&saga_id, &owner, None, &why, fence);
                log_record(c, &taken, &at).await?;
                Ok(Some(fence))
            })
        })
        .await
    }

    async fn set_state(
        &self,
        saga_id: &str,
        fence: u64,
        state: State,
        event: &str,
        extra: Option<&Value>,
    ) -> Result<(), StoreError> {
        let at = now_rfc3339();
        let record = records::state_set(saga_id, state, event, extra);
        let saga_id = saga_id.to_owned();
        self.write(move |c| {
            Box::pin(async move {
                let n = execute(
                    c,
                    "UPDATE saga_state SET state = $2, updated_at = $3 WHERE saga_id = $1 AND fence = $4",
                    &[&saga_id, &state.as_str(), &at, &i64_of(fence)],
                )
                .await?;
                if n == 0 {
                    return Err(missing_or_fenced(c, &saga_id, fence).await?);
                }
                if state == State::Done
                    && let Some(step) = steps::first_in_doubt(c, &saga_id).await?
                {
                    // The write's savepoint is rolled back with the update.
                    return Err(StoreError::InDoubt {
                        saga: saga_id.clone(),
                        step,
                    });
                }
                log_record(c, &record, &at).await
            })
        })
        .await
    }

    async fn saga(&self, saga_id: &str) -> Result<Option<SagaRow>, StoreError> {
        let c = self.conn().await?;
        query_opt(
            &c,
            &format!("SELECT {SAGA_COLUMNS} FROM saga_state WHERE saga_id = $1"),
            &[&saga_id],
        )
        .await?
        .as_ref()
        .map(decode::saga)
        .transpose()
    }

    async fn saga_ids_starting(
        &self,
        prefix: &str,
        limit: usize,
    ) -> Result<Vec<String>, StoreError> {
        let c = self.conn().await?;
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        let rows = query(
            &c,
            "SELECT saga_id FROM saga_state WHERE left(saga_id, length($1)) = $1 ORDER BY saga_id LIMIT $2",
            &[&prefix, &limit],
        )
        .await?;
        rows.iter().map(|r| get(r, 0)).collect()
    }

    async fn saga_plan(&self, saga_id: &str) -> Result<Option<String>, StoreError> {
        let c = self.conn().await?;
        let row = query_opt(
            &c,
            "SELECT plan FROM saga_state WHERE saga_id = $1",
            &[&saga_id],
        )
        .await?;
        Ok(match row {
            Some(r) => get::<Option<String>>(&r, 0)?,
            None => None,
        })
    }

    async fn sagas(&self, limit: usize) -> Result<Vec<SagaRow>, StoreError> {
        let c = self.conn().await?;
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        let rows = query(
            &c,
            &format!(
                "SELECT {SAGA_COLUMNS} FROM saga_state ORDER BY created_at DESC, ord DESC LIMIT $1"
            ),
            &[&limit],
        )
        .await?;
        rows.iter().map(decode::saga).collect()
    }

    async fn sagas_of(&self, principal: &str, limit: usize) -> Result<Vec<SagaRow>, StoreError> {
        let c = self.conn().await?;
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        let rows = query(
            &c,
            &format!(
                "SELECT {SAGA_COLUMNS} FROM saga_state WHERE principal = $1 ORDER BY created_at DESC, ord DESC LIMIT $2"
            ),
            &[&principal, &limit],
        )
        .await?;
        rows.iter().map(decode::saga).collect()
    }

    async fn saga_page(
        &self,
        q: &SagaQuery,
        offset: usize,
        limit: usize,
    ) -> Result<(Vec<SagaRow>, bool), StoreError> {
        let c = self.conn().await?;
        let columns = decode::qualified(SAGA_COLUMNS, "s");
        let take = i64::try_from(limit.saturating_add(1)).unwrap_or(i64::MAX);
        let skip = i64::try_from(offset).unwrap_or(i64::MAX);
        let rows = query(
            &c,
            &format!(
                "SELECT {columns} FROM saga_state s \
                 WHERE ($1::text IS NULL OR s.state = $1) \
                 AND ($2::text IS NULL OR s.principal = $2) \
                 AND ($3::text IS NULL OR s.created_at >= $3) \
                 AND ($4::text IS NULL OR EXISTS (SELECT 1 FROM saga_steps t WHERE t.saga_id = s.saga_id AND t.tool_id = $4)) \
                 ORDER BY s.created_at DESC, s.ord DESC LIMIT $5 OFFSET $6"
            ),
            &[&q.state, &q.principal, &q.since, &q.tool, &take, &skip],
        )
        .await?;
        let mut out = rows
            .iter()
            .map(decode::saga)
            .collect::<Result<Vec<_>, _>>()?;
        let more = out.len() > limit;
        out.truncate(limit);
        Ok((out, more))
    }

    async fn unfinished_sagas(&self) -> Result<Vec<SagaRow>, StoreError> {
        self.sagas_where(&format!("state NOT IN {}", *ENDED_STATES))
            .await
    }

    async fn needs_operator(&self) -> Result<Vec<NeedsOperator>, StoreError> {
        let sagas = self.sagas_where("state = 'FailedRollbackPartial'").await?;
        let c = self.conn().await?;
        let mut out = Vec::with_capacity(sagas.len());
        for saga in sagas {
            let mut failed: Vec<FailedCompensation> = steps::steps_of(&c, &saga.saga_id)
                .await?
                .into_iter()
                .filter(|s| s.status == StepStatus::CompensationFailed)
                .map(|s| FailedCompensation {
                    step_seq: s.step_seq,
                    tool_id: s.tool_id,
                    args: s.args,
                    error: s.error,
                    updated_at: s.updated_at,
                })
                .collect();
            failed.reverse();
            out.push(NeedsOperator { saga, failed });
        }
        Ok(out)
    }
}
