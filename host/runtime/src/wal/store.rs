//! Reads and writes of the saga tables. Each write is one `IMMEDIATE`
//! transaction that updates `saga_steps`/`saga_state` and appends the matching
//! `wal_log` row, so the two views never disagree.

use super::chain::{GENESIS, row_hash};
use super::{SagaRow, StepRow, StepStatus};
use crate::db::{Db, DbError, now_rfc3339};
use capsaga_core::error::ToolError;
use capsaga_core::fsm::State;
use capsaga_core::tool::ToolOutput;
use rusqlite::{OptionalExtension, Row, Transaction, params};
use serde_json::{Value, json};

/// A step about to begin.
#[derive(Debug, Clone)]
pub struct NewStep<'a> {
    /// The saga.
    pub saga_id: &'a str,
    /// Position in the saga.
    pub step_seq: u64,
    /// Tool name.
    pub tool_id: &'a str,
    /// Component content hash.
    pub tool_hash: &'a str,
    /// Effective grants, as capability strings.
    pub grants: &'a [String],
    /// Whether the tool has side effects.
    pub has_side_effects: bool,
    /// Idempotency key.
    pub idempotency_key: &'a str,
    /// Arguments.
    pub args: &'a Value,
    /// Dry-run output captured before execute, if any.
    pub preimage: Option<&'a ToolOutput>,
    /// An approved approval to claim in the same transaction as the BEGIN
    /// row (its binding must be this step's tool, tool hash and args hash).
    pub approval: Option<&'a str>,
}

/// What `begin_step` found.
#[derive(Debug, Clone, PartialEq)]
pub enum BeginOutcome {
    /// A new BEGIN row was written: go on and execute.
    Started,
    /// The idempotency key already committed: return the logged output
    /// without executing again.
    AlreadyCommitted(ToolOutput),
    /// The key exists in another status (the caller decides).
    Exists(StepStatus),
    /// The approval to claim is not approved any more (claimed by another
    /// step, or its binding does not match): nothing was written.
    ApprovalUnavailable,
}

/// Saga-table operations over a [`Db`].
#[derive(Debug, Clone, Copy)]
pub struct Wal<'a> {
    db: &'a Db,
}

pub(crate) fn to_json<T: serde::Serialize>(v: &T) -> String {
    serde_json::to_string(v).unwrap_or_else(|_| "null".into())
}

/// Append one row to `wal_log`, chained to the anchored head (`wal_head`),
/// and move the head to it, in the caller's transaction.
///
/// The previous row is the *anchored* head, not the last row found in the
/// table: if someone deleted the newest rows, the next row still follows the
/// deleted ones, and the gap stays visible to `audit verify`.
pub(crate) fn append(
    tx: &Transaction<'_>,
    saga_id: &str,
    step_seq: Option<u64>,
    record: &str,
    detail: &Value,
    at: &str,
) -> Result<(), DbError> {
    let head: Option<(i64, String)> = tx
        .query_row("SELECT seq, hash FROM wal_head WHERE id = 1", [], |r| {
            Ok((r.get(0)?, r.get(1)?))
        })
        .optional()?;
    let (last_seq, prev) = match head {
        Some(h) => h,
        None => tx
            .query_row(
                "SELECT seq, hash FROM wal_log ORDER BY seq DESC LIMIT 1",
                [],
                |r| Ok((r.get(0)?, r.get(1)?)),
            )
            .optional()?
            .unwrap_or((0, GENESIS.to_string())),
    };
    let seq = last_seq + 1;
    let hash = row_hash(&prev, seq, saga_id, step_seq, record, detail, at);
    tx.execute(
        "INSERT INTO wal_log (seq, saga_id, step_seq, record, detail, at, prev_hash, hash) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)",
        params![seq, saga_id, step_seq.map(|s| s as i64), record, to_json(detail), at, prev, hash],
    )?;
    tx.execute(
        "INSERT INTO wal_head (id, seq, hash) VALUES (1, ?1, ?2) ON CONFLICT(id) DO UPDATE SET seq = excluded.seq, hash = excluded.hash",
        params![seq, hash],
    )?;
    Ok(())
}

pub(super) fn decode_json(s: Option<String>, what: &str) -> Result<Option<Value>, DbError> {
    s.map(|t| serde_json::from_str(&t).map_err(|e| DbError::Decode(format!("{what}: {e}"))))
        .transpose()
}

pub(super) fn step_from_row(r: &Row<'_>) -> rusqlite::Result<(StepRowRaw,)> {
    Ok((StepRowRaw {
        saga_id: r.get(0)?,
        step_seq: r.get(1)?,
        tool_id: r.get(2)?,
        tool_hash: r.get(3)?,
        grants: r.get(4)?,
        has_side_effects: r.get(5)?,
        idempotency_key: r.get(6)?,
        args: r.get(7)?,
        preimage: r.get(8)?,
        output: r.get(9)?,
        status: r.get(10)?,
        error: r.get(11)?,
        created_at: r.get(12)?,
        updated_at: r.get(13)?,
    },))
}

pub(super) struct StepRowRaw {
    saga_id: String,
    step_seq: i64,
    tool_id: String,
    tool_hash: String,
    grants: String,
    has_side_effects: bool,
    idempotency_key: String,
    args: String,
    preimage: Option<String>,
    output: Option<String>,
    status: String,
    error: Option<String>,
    created_at: String,
    updated_at: String,
}

impl StepRowRaw {
    pub(super) fn decode(self) -> Result<StepRow, DbError> {
        Ok(StepRow {
            status: StepStatus::parse(&self.status)
                .ok_or_else(|| DbError::Decode(format!("unknown step status `{}`", self.status)))?,
            step_seq: u64::try_from(self.step_seq)
                .map_err(|_| DbError::Decode(format!("negative step_seq {}", self.step_seq)))?,
            grants: serde_json::from_str(&self.grants)
                .map_err(|e| DbError::Decode(format!("grants: {e}")))?,
            args: serde_json::from_str(&self.args)
                .map_err(|e| DbError::Decode(format!("args: {e}")))?,
            preimage: decode_json(self.preimage, "preimage")?,
            output: decode_json(self.output, "output")?,
            error: decode_json(self.error, "error")?,
            saga_id: self.saga_id,
            tool_id: self.tool_id,
            tool_hash: self.tool_hash,
            has_side_effects: self.has_side_effects,
            idempotency_key: self.idempotency_key,
            created_at: self.created_at,
            updated_at: self.updated_at,
        })
    }
}

pub(super) const STEP_COLUMNS: &str = "saga_id, step_seq, tool_id, tool_hash, grants, has_side_effects, idempotency_key, args, preimage, output, status, error, created_at, updated_at";

pub(super) const SAGA_COLUMNS: &str =
    "saga_id, state, origin, label, created_at, updated_at, owner";

pub(super) type SagaRaw = (
    String,
    String,
    String,
    String,
    String,
    String,
    Option<String>,
);

pub(super) fn saga_from_row(r: &Row<'_>) -> rusqlite::Result<SagaRaw> {
    Ok((
        r.get(0)?,
        r.get(1)?,
        r.get(2)?,
        r.get(3)?,
        r.get(4)?,
        r.get(5)?,
        r.get(6)?,
    ))
}

pub(super) fn decode_saga(t: SagaRaw) -> Result<SagaRow, DbError> {
    Ok(SagaRow {
        state: t.1.parse::<State>().map_err(DbError::Decode)?,
        saga_id: t.0,
        origin: t.2,
        label: t.3,
        created_at: t.4,
        updated_at: t.5,
        owner: t.6,
    })
}

impl<'a> Wal<'a> {
    /// Saga-table operations on `db`.
    pub fn new(db: &'a Db) -> Self {
        Wal { db }
    }

    /// The database.
    pub fn db(&self) -> &'a Db {
        self.db
    }

    /// Create a saga in `state` (normally Planning, after StartSaga), owned
    /// by the process `owner`, with the plan it runs (canonical JSON) when it
    /// is driven by one (`run --plan`, `call`), so it can be resumed.
    ///
    /// # Errors
    /// [`DbError`], including a duplicate saga id.
    pub fn create_saga(
        &self,
        saga_id: &str,
        origin: &str,
        label: &str,
        state: State,
        owner: &str,
        plan: Option<&str>,
    ) -> Result<(), DbError> {
        let at = now_rfc3339();
        let plan_hash = plan.map(|p| capsaga_core::idempotency::sha256_hex(p.as_bytes()));
        self.db.write(|tx| {
            tx.execute(
                "INSERT INTO saga_state (saga_id, state, origin, label, created_at, updated_at, owner, plan) VALUES (?1, ?2, ?3, ?4, ?5, ?5, ?6, ?7)",
                params![saga_id, state.as_str(), origin, label, at, owner, plan],
            )?;
            append(tx, saga_id, None, "STATE", &json!({"state": state.as_str(), "origin": origin, "label": label, "plan_sha256": plan_hash}), &at)
        })
    }

    /// Make `owner` the owner of a saga whose owner is `expected` (compare
    /// and set, so two processes recovering at once cannot both take it),
    /// logged as an `OWNER` row saying why.
    ///
    /// # Errors
    /// [`DbError`]. `Ok(false)` when the owner was not `expected`.
    pub fn take_over(
        &self,
        saga_id: &str,
        expected: Option<&str>,
        owner: &str,
        why: &str,
    ) -> Result<bool, DbError> {
        let at = now_rfc3339();
        self.db.write(|tx| {
            let n = tx.execute(
                "UPDATE saga_state SET owner = ?3 WHERE saga_id = ?1 AND owner IS ?2",
                params![saga_id, expected, owner],
            )?;
            if n == 0 {
                return Ok(false);
            }
            append(
                tx,
                saga_id,
                None,
                "OWNER",
                &json!({"owner": owner, "previous": expected, "why": why}),
                &at,
            )?;
            Ok(true)
        })
    }

    /// Record a guardrail transition.
    ///
    /// # Errors
    /// [`DbError`]; [`DbError::Decode`] when the saga does not exist.
    pub fn set_state(&self, saga_id: &str, state: State, event: &str) -> Result<(), DbError> {
        self.set_state_with(saga_id, state, event, None)
    }

    /// Record a guardrail transition with extra details in its log row
    /// (for example who made an operator's transition).
    ///
    /// # Errors
    /// [`DbError`]; [`DbError::Decode`] when the saga does not exist.
    pub fn set_state_with(
        &self,
        saga_id: &str,
        state: State,
        event: &str,
        extra: Option<&Value>,
    ) -> Result<(), DbError> {
        let at = now_rfc3339();
        let mut detail = json!({"state": state.as_str(), "event": event});
        if let (Some(Value::Object(m)), Some(d)) = (extra, detail.as_object_mut()) {
            for (k, v) in m {
                d.entry(k.clone()).or_insert_with(|| v.clone());
            }
        }
        self.db.write(|tx| {
            let n = tx.execute(
                "UPDATE saga_state SET state = ?2, updated_at = ?3 WHERE saga_id = ?1",
                params![saga_id, state.as_str(), at],
            )?;
            if n == 0 {
                return Err(DbError::Decode(format!("no saga `{saga_id}`")));
            }
            append(tx, saga_id, None, "STATE", &detail, &at)
        })
    }

    /// Write the BEGIN row of a step, unless its idempotency key exists.
    ///
    /// # Errors
    /// [`DbError`].
    pub fn begin_step(&self, s: &NewStep<'_>) -> Result<BeginOutcome, DbError> {
        let at = now_rfc3339();
        self.db.write(|tx| {
            let existing: Option<(String, Option<String>)> = tx
                .query_row(
                    "SELECT status, output FROM saga_steps WHERE idempotency_key = ?1",
                    params![s.idempotency_key],
                    |r| Ok((r.get(0)?, r.get(1)?)),
                )
                .optional()?;
            if let Some((status, output)) = existing {
                let status = StepStatus::parse(&status)
                    .ok_or_else(|| DbError::Decode(format!("unknown step status `{status}`")))?;
                if status == StepStatus::Commit {
                    let out = output.ok_or_else(|| DbError::Decode("COMMIT row without output".into()))?;
                    let out: ToolOutput =
                        serde_json::from_str(&out).map_err(|e| DbError::Decode(format!("output: {e}")))?;
                    return Ok(BeginOutcome::AlreadyCommitted(out));
                }
                return Ok(BeginOutcome::Exists(status));
            }
            if let Some(approval_id) = s.approval {
                let claimed = tx.execute(
                    "UPDATE approvals SET status = 'claimed', claimed_saga = ?2, claimed_step = ?3, claimed_at = ?4
                     WHERE approval_id = ?1 AND status = 'approved' AND tool_id = ?5 AND tool_hash = ?6 AND args_hash = ?7",
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
                    return Ok(BeginOutcome::ApprovalUnavailable);
                }
                append(
                    tx,
                    s.saga_id,
                    Some(s.step_seq),
                    "APPROVAL_CLAIMED",
                    &json!({"approval_id": approval_id}),
                    &at,
                )?;
            }
            tx.execute(
                "INSERT INTO saga_steps (saga_id, step_seq, tool_id, tool_hash, grants, has_side_effects, idempotency_key, args, preimage, status, created_at, updated_at)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, 'BEGIN', ?10, ?10)",
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
                    at
                ],
            )?;
            append(
                tx,
                s.saga_id,
                Some(s.step_seq),
                "BEGIN",
                &json!({
                    "tool": s.tool_id,
                    "tool_hash": s.tool_hash,
                    "grants": s.grants,
                    "idempotency_key": s.idempotency_key,
                    "args": s.args,
                    "preimage": s.preimage,
                    "approval_id": s.approval,
                }),
                &at,
            )?;
            Ok(BeginOutcome::Started)
        })
    }

    fn transition(
        &self,
        saga_id: &str,
        step_seq: u64,
        to: StepStatus,
        allowed_from: &[StepStatus],
        output: Option<&ToolOutput>,
        error: Option<&ToolError>,
    ) -> Result<(), DbError> {
        let at = now_rfc3339();
        self.db.write(|tx| {
            let status: String = tx
                .query_row(
                    "SELECT status FROM saga_steps WHERE saga_id = ?1 AND step_seq = ?2",
                    params![saga_id, step_seq as i64],
                    |r| r.get(0),
                )
                .optional()?
                .ok_or_else(|| DbError::Decode(format!("no step {step_seq} in saga `{saga_id}`")))?;
            let from = StepStatus::parse(&status)
                .ok_or_else(|| DbError::Decode(format!("unknown step status `{status}`")))?;
            if !allowed_from.contains(&from) {
                return Err(DbError::Decode(format!(
                    "step {step_seq} of saga `{saga_id}` is {from}, cannot become {to}"
                )));
            }
            if let Some(o) = output {
                tx.execute(
                    "UPDATE saga_steps SET status = ?3, output = ?4, updated_at = ?5 WHERE saga_id = ?1 AND step_seq = ?2",
                    params![saga_id, step_seq as i64, to.as_str(), to_json(o), at],
                )?;
            } else {
                tx.execute(
                    "UPDATE saga_steps SET status = ?3, error = ?4, updated_at = ?5 WHERE saga_id = ?1 AND step_seq = ?2",
                    params![saga_id, step_seq as i64, to.as_str(), error.map(to_json), at],
                )?;
            }
            let detail = match (output, error) {
                (Some(o), _) => json!({"output": o}),
                (None, Some(e)) => json!({"error": e}),
                (None, None) => json!({}),
            };
            append(tx, saga_id, Some(step_seq), to.as_str(), &detail, &at)
        })
    }

    /// BEGIN → COMMIT with the output.
    ///
    /// # Errors
    /// [`DbError`], including a step not in BEGIN.
    pub fn commit_step(
        &self,
        saga_id: &str,
        step_seq: u64,
        output: &ToolOutput,
    ) -> Result<(), DbError> {
        self.transition(
            saga_id,
            step_seq,
            StepStatus::Commit,
            &[StepStatus::Begin],
            Some(output),
            None,
        )
    }

    /// BEGIN → FAIL with the error.
    ///
    /// # Errors
    /// [`DbError`], including a step not in BEGIN.
    pub fn fail_step(
        &self,
        saga_id: &str,
        step_seq: u64,
        error: &ToolError,
    ) -> Result<(), DbError> {
        self.transition(
            saga_id,
            step_seq,
            StepStatus::Fail,
            &[StepStatus::Begin],
            None,
            Some(error),
        )
    }

    /// Log a failed attempt of a step that will be retried: a `RETRY` row
    /// with the attempt number (from 1) and the error; the step stays BEGIN
    /// (with the error kept as its last error).
    ///
    /// # Errors
    /// [`DbError`], including a step not in BEGIN.
    pub fn retry_attempt(
        &self,
        saga_id: &str,
        step_seq: u64,
        attempt: u32,
        delay_ms: u64,
        error: &ToolError,
    ) -> Result<(), DbError> {
        let at = now_rfc3339();
        self.db.write(|tx| {
            let n = tx.execute(
                "UPDATE saga_steps SET error = ?3, updated_at = ?4 WHERE saga_id = ?1 AND step_seq = ?2 AND status = 'BEGIN'",
                params![saga_id, step_seq as i64, to_json(error), at],
            )?;
            if n == 0 {
                return Err(DbError::Decode(format!(
                    "step {step_seq} of saga `{saga_id}` is not in BEGIN: cannot retry it"
                )));
            }
            append(
                tx,
                saga_id,
                Some(step_seq),
                "RETRY",
                &json!({"attempt": attempt, "delay_ms": delay_ms, "error": error}),
                &at,
            )
        })
    }

    /// COMMIT, BEGIN (in doubt) or COMPENSATION_FAILED (operator retry) →
    /// COMPENSATED.
    ///
    /// # Errors
    /// [`DbError`].
    pub fn compensated(&self, saga_id: &str, step_seq: u64) -> Result<(), DbError> {
        self.transition(
            saga_id,
            step_seq,
            StepStatus::Compensated,
            &[
                StepStatus::Commit,
                StepStatus::Begin,
                StepStatus::CompensationFailed,
            ],
            None,
            None,
        )
    }

    /// COMMIT, BEGIN or COMPENSATION_FAILED → COMPENSATION_FAILED with the error.
    ///
    /// # Errors
    /// [`DbError`].
    pub fn compensation_failed(
        &self,
        saga_id: &str,
        step_seq: u64,
        error: &ToolError,
    ) -> Result<(), DbError> {
        self.transition(
            saga_id,
            step_seq,
            StepStatus::CompensationFailed,
            &[
                StepStatus::Commit,
                StepStatus::Begin,
                StepStatus::CompensationFailed,
            ],
            None,
            Some(error),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn out(v: Value) -> ToolOutput {
        ToolOutput {
            data: v,
            effects: vec![],
            next_hint: None,
            summary: String::new(),
        }
    }

    #[test]
    fn begin_commit_and_replay() {
        let dir = tempfile::tempdir().unwrap();
        let db = Db::open(&dir.path().join("s.db")).unwrap();
        let wal = Wal::new(&db);
        wal.create_saga("s1", "plan", "test", State::Planning, "me", None)
            .unwrap();
        let args = json!({"a": 1});
        let grants = vec!["fs:write:/x/**".to_string()];
        let step = NewStep {
            saga_id: "s1",
            step_seq: 0,
            tool_id: "t",
            tool_hash: "h",
            grants: &grants,
            has_side_effects: true,
            idempotency_key: "k0",
            args: &args,
            preimage: None,
            approval: None,
        };
        assert_eq!(wal.begin_step(&step).unwrap(), BeginOutcome::Started);
        assert_eq!(
            wal.begin_step(&step).unwrap(),
            BeginOutcome::Exists(StepStatus::Begin)
        );
        wal.commit_step("s1", 0, &out(json!({"ok": true}))).unwrap();
        assert_eq!(
            wal.begin_step(&step).unwrap(),
            BeginOutcome::AlreadyCommitted(out(json!({"ok": true})))
        );
        // A committed step cannot fail afterwards.
        assert!(
            wal.fail_step(
                "s1",
                0,
                &ToolError::with_hint(capsaga_core::error::ErrorKind::Unknown, "x", "y")
            )
            .is_err()
        );
        wal.compensated("s1", 0).unwrap();
        let steps = wal.steps("s1").unwrap();
        assert_eq!(steps[0].status, StepStatus::Compensated);
        let log = wal.log(Some("s1")).unwrap();
        let records: Vec<&str> = log.iter().map(|l| l.record.as_str()).collect();
        assert_eq!(records, ["STATE", "BEGIN", "COMMIT", "COMPENSATED"]);
        assert!(super::super::chain::verify(&log).is_none());
    }
}
