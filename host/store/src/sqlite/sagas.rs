//! `saga_state`: sagas, their guardrail state, owner and plan.

use super::super::{
    FIRST_FENCE, FailedCompensation, NeedsOperator, NewSaga, SagaQuery, SagaRow, SagaStore,
    StepStatus, StoreError,
};
use super::Cached;
use super::log::log_record;
use super::{SqliteStore, all, first, steps};
use crate::claim::ENDED_STATES;
use crate::clock::now_rfc3339;
use crate::decode::{self, SAGA_COLUMNS};
use crate::records;
use async_trait::async_trait;
use capsaga_core::fsm::State;
use rusqlite::{OptionalExtension, params};
use serde_json::Value;

/// Why a fenced update of `saga_state` changed nothing: the saga does not
/// exist ([`StoreError::Decode`]) or `fence` is not its token
/// ([`StoreError::Fenced`]).
pub(super) fn missing_or_fenced(
    tx: &rusqlite::Transaction<'_>,
    saga_id: &str,
    fence: u64,
) -> Result<StoreError, StoreError> {
    let found: Option<i64> = tx
        .row(
            "SELECT fence FROM saga_state WHERE saga_id = ?1",
            params![saga_id],
            |r| r.get(0),
        )
        .optional()?;
    Ok(match found {
        None => StoreError::Decode(format!("no saga `{saga_id}`")),
        Some(_) => StoreError::fenced(saga_id, fence),
    })
}

impl SqliteStore {
    fn sagas_where(&self, condition: &str) -> Result<Vec<SagaRow>, StoreError> {
        self.read(|c| {
            all(
                c,
                &format!("SELECT {SAGA_COLUMNS} FROM saga_state WHERE {condition} ORDER BY created_at, rowid"),
                [],
                |r| decode::saga(r),
            )
        })
    }
}

#[async_trait]
impl SagaStore for SqliteStore {
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
        self.write(move |tx| {
            tx.exec(
                "INSERT INTO saga_state (saga_id, state, origin, label, created_at, updated_at, owner, plan, principal, fence, scope) VALUES (?1, ?2, ?3, ?4, ?5, ?5, ?6, ?7, ?8, ?9, ?10)",
                params![saga_id, state.as_str(), origin, label, at, owner, plan, principal, FIRST_FENCE as i64, scope],
            )?;
            log_record(tx, &record, &at)
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
        // Lock files: a dead owner stays dead (ids are never reused), so the
        // check may come before the compare and set.
        if let Some(e) = expected
            && super::owners::is_alive(self.state_dir(), e)
        {
            return Ok(None);
        }
        let at = now_rfc3339();
        let (saga_id, expected, owner, why) = (
            saga_id.to_owned(),
            expected.map(str::to_owned),
            owner.to_owned(),
            why.to_owned(),
        );
        self.write(move |tx| {
            let (saga_id, expected, owner, why) = (
                saga_id.as_str(),
                expected.as_deref(),
                owner.as_str(),
                why.as_str(),
            );
            let n = tx.exec(
                "UPDATE saga_state SET owner = ?3, fence = fence + 1 WHERE saga_id = ?1 AND owner IS ?2 AND released_at IS NULL",
                params![saga_id, expected, owner],
            )?;
            if n == 0 {
                return Ok(None);
            }
            let fence: i64 = tx.row(
                "SELECT fence FROM saga_state WHERE saga_id = ?1",
                params![saga_id],
                |r| r.get(0),
            )?;
            let fence = u64::try_from(fence).ok();
            let taken = records::owner_taken(saga_id, owner, expected, why, fence.unwrap_or(0));
            log_record(tx, &taken, &at)?;
            Ok(fence)
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
        let fence = i64::try_from(fence)
            .map_err(|_| StoreError::Decode(format!("fence {fence} out of range")))?;
        self.write(move |tx| {
            let n = tx.exec(
                "UPDATE saga_state SET owner = NULL, released_at = ?4, fence = fence + 1
                 WHERE saga_id = ?1 AND owner = ?2 AND fence = ?3",
                params![saga_id, owner, fence, at],
            )?;
            if n == 0 {
                return Ok(None);
            }
            let next = u64::try_from(fence + 1).ok();
            let released = records::released(&saga_id, &owner, next.unwrap_or(0));
            log_record(tx, &released, &at)?;
            Ok(next)
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
        // One machine, one clock: "released at least `idle_ms` ago" is a
        // comparison of timestamps written by the same clock.
        let before = idle_ms.map(crate::clock::rfc3339_before);
        let (saga_id, owner, why) = (saga_id.to_owned(), owner.to_owned(), why.to_owned());
        self.write(move |tx| {
            let n = tx.exec(
                "UPDATE saga_state SET owner = ?2, released_at = NULL, fence = fence + 1
                 WHERE saga_id = ?1 AND owner IS NULL AND released_at IS NOT NULL
                   AND (?3 IS NULL OR released_at <= ?3)",
                params![saga_id, owner, before],
            )?;
            if n == 0 {
                return Ok(None);
            }
            let fence: i64 = tx.row(
                "SELECT fence FROM saga_state WHERE saga_id = ?1",
                params![saga_id],
                |r| r.get(0),
            )?;
            let fence = u64::try_from(fence).ok();
            let taken = records::owner_taken(&saga_id, &owner, None, &why, fence.unwrap_or(0));
            log_record(tx, &taken, &at)?;
            Ok(fence)
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
        self.write(move |tx| {
            let saga_id = saga_id.as_str();
            let n = tx.exec(
                "UPDATE saga_state SET state = ?2, updated_at = ?3 WHERE saga_id = ?1 AND fence = ?4",
                params![saga_id, state.as_str(), at, fence as i64],
            )?;
            if n == 0 {
                return Err(missing_or_fenced(tx, saga_id, fence)?);
            }
            if state == State::Done
                && let Some(step) = steps::first_in_doubt(tx, saga_id)?
            {
                // The write's savepoint is rolled back with the update.
                return Err(StoreError::InDoubt {
                    saga: saga_id.to_string(),
                    step,
                });
            }
            log_record(tx, &record, &at)
        })
        .await
    }

    async fn saga(&self, saga_id: &str) -> Result<Option<SagaRow>, StoreError> {
        self.read(|c| {
            first(
                c,
                &format!("SELECT {SAGA_COLUMNS} FROM saga_state WHERE saga_id = ?1"),
                params![saga_id],
                |r| decode::saga(r),
            )
        })
    }

    async fn saga_ids_starting(
        &self,
        prefix: &str,
        limit: usize,
    ) -> Result<Vec<String>, StoreError> {
        self.read(|c| {
            let mut st = c.prepare_cached(
                "SELECT saga_id FROM saga_state WHERE substr(saga_id, 1, length(?1)) = ?1 ORDER BY saga_id LIMIT ?2",
            )?;
            let rows = st.query_map(
                params![prefix, i64::try_from(limit).unwrap_or(i64::MAX)],
                |r| r.get::<_, String>(0),
            )?;
            Ok(rows.collect::<Result<Vec<_>, _>>()?)
        })
    }

    async fn saga_plan(&self, saga_id: &str) -> Result<Option<String>, StoreError> {
        self.read(|c| {
            Ok(c.row(
                "SELECT plan FROM saga_state WHERE saga_id = ?1",
                params![saga_id],
                |r| r.get::<_, Option<String>>(0),
            )
            .optional()?
            .flatten())
        })
    }

    async fn sagas(&self, limit: usize) -> Result<Vec<SagaRow>, StoreError> {
        self.read(|c| {
            all(
                c,
                &format!("SELECT {SAGA_COLUMNS} FROM saga_state ORDER BY created_at DESC, rowid DESC LIMIT ?1"),
                params![limit as i64],
                |r| decode::saga(r),
            )
        })
    }

    async fn sagas_of(&self, principal: &str, limit: usize) -> Result<Vec<SagaRow>, StoreError> {
        self.read(|c| {
            all(
                c,
                &format!("SELECT {SAGA_COLUMNS} FROM saga_state WHERE principal = ?1 ORDER BY created_at DESC, rowid DESC LIMIT ?2"),
                params![principal, i64::try_from(limit).unwrap_or(i64::MAX)],
                |r| decode::saga(r),
            )
        })
    }

    async fn saga_page(
        &self,
        q: &SagaQuery,
        offset: usize,
        limit: usize,
    ) -> Result<(Vec<SagaRow>, bool), StoreError> {
        // Every value is bound (?n), never written into the SQL.
        let mut conds: Vec<&str> = Vec::new();
        let mut args: Vec<rusqlite::types::Value> = Vec::new();
        let text = |v: &str| rusqlite::types::Value::Text(v.to_string());
        if let Some(v) = &q.state {
            conds.push("s.state = ?");
            args.push(text(v));
        }
        if let Some(v) = &q.principal {
            conds.push("s.principal = ?");
            args.push(text(v));
        }
        if let Some(v) = &q.since {
            conds.push("s.created_at >= ?");
            args.push(text(v));
        }
        if let Some(v) = &q.tool {
            conds.push(
                "EXISTS (SELECT 1 FROM saga_steps t WHERE t.saga_id = s.saga_id AND t.tool_id = ?)",
            );
            args.push(text(v));
        }
        let filter = if conds.is_empty() {
            String::new()
        } else {
            format!("WHERE {}", conds.join(" AND "))
        };
        let columns = decode::qualified(SAGA_COLUMNS, "s");
        args.push(rusqlite::types::Value::Integer(
            i64::try_from(limit.saturating_add(1)).unwrap_or(i64::MAX),
        ));
        args.push(rusqlite::types::Value::Integer(
            i64::try_from(offset).unwrap_or(i64::MAX),
        ));
        self.read(|c| {
            let mut out = all(
                c,
                &format!("SELECT {columns} FROM saga_state s {filter} ORDER BY s.created_at DESC, s.rowid DESC LIMIT ? OFFSET ?"),
                rusqlite::params_from_iter(args),
                |r| decode::saga(r),
            )?;
            let more = out.len() > limit;
            out.truncate(limit);
            Ok((out, more))
        })
    }

    async fn unfinished_sagas(&self) -> Result<Vec<SagaRow>, StoreError> {
        self.sagas_where(&format!("state NOT IN {}", *ENDED_STATES))
    }

    async fn needs_operator(&self) -> Result<Vec<NeedsOperator>, StoreError> {
        let sagas = self.sagas_where("state = 'FailedRollbackPartial'")?;
        let mut out = Vec::with_capacity(sagas.len());
        for saga in sagas {
            let mut failed: Vec<FailedCompensation> = self
                .read(|c| steps::steps_of(c, &saga.saga_id))?
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
