//! Reads of the saga tables (each through [`Db::read`]).

use super::store::{SAGA_COLUMNS, STEP_COLUMNS, decode_saga, saga_from_row, step_from_row};
use super::{LogRow, SagaRow, StepRow, StepStatus, Wal};
use crate::db::DbError;
use capsaga_core::wal_row::StoredLogRow;
use rusqlite::{OptionalExtension, params};

/// A step whose compensation failed, with why (`capsaga sagas --needs-operator`).
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct FailedCompensation {
    /// The step.
    pub step_seq: u64,
    /// The tool.
    pub tool_id: String,
    /// The step's arguments.
    pub args: serde_json::Value,
    /// The compensation's error (JSON tool error), as logged.
    pub error: Option<serde_json::Value>,
    /// When it was logged (RFC 3339).
    pub updated_at: String,
}

/// A FailedRollbackPartial saga and what the operator must look at.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct NeedsOperator {
    /// The saga.
    pub saga: SagaRow,
    /// Its failed compensations, newest step first.
    pub failed: Vec<FailedCompensation>,
}

impl Wal<'_> {
    /// The plan a saga was started with (canonical JSON), if any.
    ///
    /// # Errors
    /// [`DbError`].
    pub fn saga_plan(&self, saga_id: &str) -> Result<Option<String>, DbError> {
        self.db().read(|c| {
            Ok(c.query_row(
                "SELECT plan FROM saga_state WHERE saga_id = ?1",
                params![saga_id],
                |r| r.get::<_, Option<String>>(0),
            )
            .optional()?
            .flatten())
        })
    }

    /// The saga's row.
    ///
    /// # Errors
    /// [`DbError`].
    pub fn saga(&self, saga_id: &str) -> Result<Option<SagaRow>, DbError> {
        self.db().read(|c| {
            c.query_row(
                &format!("SELECT {SAGA_COLUMNS} FROM saga_state WHERE saga_id = ?1"),
                params![saga_id],
                saga_from_row,
            )
            .optional()?
            .map(decode_saga)
            .transpose()
        })
    }

    /// All sagas, newest first (at most `limit`).
    ///
    /// # Errors
    /// [`DbError`].
    pub fn sagas(&self, limit: usize) -> Result<Vec<SagaRow>, DbError> {
        self.db().read(|c| {
            let mut st = c.prepare(
                &format!("SELECT {SAGA_COLUMNS} FROM saga_state ORDER BY created_at DESC, rowid DESC LIMIT ?1"),
            )?;
            let rows = st.query_map(params![limit as i64], saga_from_row)?;
            rows.map(|r| decode_saga(r?)).collect()
        })
    }

    /// The steps of a saga, by `step_seq`.
    ///
    /// # Errors
    /// [`DbError`].
    pub fn steps(&self, saga_id: &str) -> Result<Vec<StepRow>, DbError> {
        self.db().read(|c| {
            let mut st = c.prepare(&format!(
                "SELECT {STEP_COLUMNS} FROM saga_steps WHERE saga_id = ?1 ORDER BY step_seq"
            ))?;
            let rows = st.query_map(params![saga_id], step_from_row)?;
            rows.map(|r| r?.0.decode()).collect()
        })
    }

    /// The step with this idempotency key.
    ///
    /// # Errors
    /// [`DbError`].
    pub fn step_by_key(&self, key: &str) -> Result<Option<StepRow>, DbError> {
        self.db().read(|c| {
            c.query_row(
                &format!("SELECT {STEP_COLUMNS} FROM saga_steps WHERE idempotency_key = ?1"),
                params![key],
                step_from_row,
            )
            .optional()?
            .map(|r| r.0.decode())
            .transpose()
        })
    }

    /// The `wal_log` rows of one saga (or all rows when `saga_id` is None), by `seq`.
    ///
    /// # Errors
    /// [`DbError`].
    pub fn log(&self, saga_id: Option<&str>) -> Result<Vec<LogRow>, DbError> {
        self.db().read(|c| {
            let sql = "SELECT seq, saga_id, step_seq, record, detail, at, prev_hash, hash FROM wal_log WHERE (?1 IS NULL OR saga_id = ?1) ORDER BY seq";
            let mut st = c.prepare(sql)?;
            let rows = st.query_map(params![saga_id], |r| {
                Ok(StoredLogRow {
                    seq: r.get(0)?,
                    saga_id: r.get(1)?,
                    step_seq: r.get(2)?,
                    record: r.get(3)?,
                    detail: r.get(4)?,
                    at: r.get(5)?,
                    prev_hash: r.get(6)?,
                    hash: r.get(7)?,
                })
            })?;
            rows.map(|r| r?.decode().map_err(|e| DbError::Decode(e.to_string())))
                .collect()
        })
    }

    /// Sagas not in a terminal state (crashed or still running), oldest first.
    ///
    /// # Errors
    /// [`DbError`].
    pub fn unfinished_sagas(&self) -> Result<Vec<SagaRow>, DbError> {
        self.db().read(|c| {
            let mut st = c.prepare(
                &format!("SELECT {SAGA_COLUMNS} FROM saga_state WHERE state NOT IN ('Done','FailedRolledBack','FailedRollbackPartial') ORDER BY created_at, rowid"),
            )?;
            let rows = st.query_map([], saga_from_row)?;
            rows.map(|r| decode_saga(r?)).collect()
        })
    }

    /// The step logged at position `step_seq` of a saga, if any.
    ///
    /// # Errors
    /// [`DbError`].
    pub fn step_at(&self, saga_id: &str, step_seq: u64) -> Result<Option<StepRow>, DbError> {
        self.db().read(|c| {
            c.query_row(
                &format!(
                    "SELECT {STEP_COLUMNS} FROM saga_steps WHERE saga_id = ?1 AND step_seq = ?2"
                ),
                params![saga_id, step_seq as i64],
                step_from_row,
            )
            .optional()?
            .map(|r| r.0.decode())
            .transpose()
        })
    }

    /// The anchored head of the log: (seq, hash) of the newest row written.
    ///
    /// # Errors
    /// [`DbError`].
    pub fn head(&self) -> Result<Option<(i64, String)>, DbError> {
        self.db().read(|c| {
            Ok(
                c.query_row("SELECT seq, hash FROM wal_head WHERE id = 1", [], |r| {
                    Ok((r.get(0)?, r.get(1)?))
                })
                .optional()?,
            )
        })
    }

    /// FailedRollbackPartial sagas, oldest first, each with its
    /// COMPENSATION_FAILED steps and their errors.
    ///
    /// # Errors
    /// [`DbError`].
    pub fn needs_operator(&self) -> Result<Vec<NeedsOperator>, DbError> {
        let sagas: Vec<SagaRow> = self.db().read(|c| {
            let mut st = c.prepare(&format!(
                "SELECT {SAGA_COLUMNS} FROM saga_state WHERE state = 'FailedRollbackPartial' ORDER BY created_at, rowid"
            ))?;
            let rows = st.query_map([], saga_from_row)?;
            rows.map(|r| decode_saga(r?)).collect()
        })?;
        let mut out = Vec::with_capacity(sagas.len());
        for saga in sagas {
            let mut failed: Vec<FailedCompensation> = self
                .steps(&saga.saga_id)?
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
