//! `approvals`: human approvals of steps (see `capsaga_core::approval` for
//! their life and binding).
//!
//! Every change is one `IMMEDIATE` transaction that also appends the matching
//! `wal_log` row (APPROVAL_REQUESTED, APPROVAL_APPROVED, APPROVAL_DENIED;
//! APPROVAL_CLAIMED is written with the step's BEGIN row, in [`super::steps`]).
//! Requesting an approval parks the saga (AwaitingApproval) in the same
//! transaction, so a crash cannot leave a pending approval without a parked
//! saga or the reverse.

use super::super::{
    ApprovalOpError, ApprovalRow, ApprovalStore, MIN_ID_PREFIX, NewApproval, StoreError,
};
use super::log::append;
use super::{SqliteStore, to_json};
use crate::clock::now_rfc3339;
use async_trait::async_trait;
use capsaga_core::approval::{ApprovalError, ApprovalStatus, Binding};
use capsaga_core::fsm::State;
use rusqlite::{OptionalExtension, Row, params};
use serde_json::{Value, json};

const COLUMNS: &str = "approval_id, saga_id, step_seq, tool_id, tool_hash, args_hash, args, reason, summary, preview, status, decided_by, decided_at, claimed_saga, claimed_step, claimed_at, created_at";

type Raw = (
    (String, String, i64, String, String, String, String),
    (String, String, Option<String>, String),
    (
        Option<String>,
        Option<String>,
        Option<String>,
        Option<i64>,
        Option<String>,
        String,
    ),
);

fn from_row(r: &Row<'_>) -> rusqlite::Result<Raw> {
    Ok((
        (
            r.get(0)?,
            r.get(1)?,
            r.get(2)?,
            r.get(3)?,
            r.get(4)?,
            r.get(5)?,
            r.get(6)?,
        ),
        (r.get(7)?, r.get(8)?, r.get(9)?, r.get(10)?),
        (
            r.get(11)?,
            r.get(12)?,
            r.get(13)?,
            r.get(14)?,
            r.get(15)?,
            r.get(16)?,
        ),
    ))
}

fn decode(raw: Raw) -> Result<ApprovalRow, StoreError> {
    let ((approval_id, saga_id, step_seq, tool_id, tool_hash, args_hash, args), rest, claim) = raw;
    let (reason, summary, preview, status) = rest;
    let (decided_by, decided_at, claimed_saga, claimed_step, claimed_at, created_at) = claim;
    let json = |t: &str, what: &str| -> Result<Value, StoreError> {
        serde_json::from_str(t).map_err(|e| StoreError::Decode(format!("approval {what}: {e}")))
    };
    Ok(ApprovalRow {
        step_seq: u64::try_from(step_seq)
            .map_err(|_| StoreError::Decode(format!("negative approval step {step_seq}")))?,
        binding: Binding {
            tool_id,
            tool_hash,
            args_hash,
        },
        args: json(&args, "args")?,
        preview: preview.map(|p| json(&p, "preview")).transpose()?,
        status: ApprovalStatus::parse(&status)
            .ok_or_else(|| StoreError::Decode(format!("unknown approval status `{status}`")))?,
        claimed_step: claimed_step.map(|s| s.max(0) as u64),
        approval_id,
        saga_id,
        reason,
        summary,
        decided_by,
        decided_at,
        claimed_saga,
        claimed_at,
        created_at,
    })
}

#[async_trait]
impl ApprovalStore for SqliteStore {
    async fn request_approval(&self, a: &NewApproval<'_>) -> Result<ApprovalRow, StoreError> {
        let id = uuid::Uuid::new_v4().to_string();
        let at = now_rfc3339();
        self.write(|tx| {
            tx.execute(
                &format!("INSERT INTO approvals ({COLUMNS}) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, 'pending', NULL, NULL, NULL, NULL, NULL, ?11)"),
                params![
                    id,
                    a.saga_id,
                    a.step_seq as i64,
                    a.binding.tool_id,
                    a.binding.tool_hash,
                    a.binding.args_hash,
                    to_json(a.args),
                    a.reason,
                    a.summary,
                    a.preview.map(to_json),
                    at
                ],
            )?;
            append(
                tx,
                a.saga_id,
                Some(a.step_seq),
                "APPROVAL_REQUESTED",
                &json!({
                    "approval_id": id,
                    "tool": a.binding.tool_id,
                    "tool_hash": a.binding.tool_hash,
                    "args_hash": a.binding.args_hash,
                    "reason": a.reason,
                    "summary": a.summary,
                }),
                &at,
            )?;
            let n = tx.execute(
                "UPDATE saga_state SET state = ?2, updated_at = ?3 WHERE saga_id = ?1",
                params![a.saga_id, State::AwaitingApproval.as_str(), at],
            )?;
            if n == 0 {
                return Err(StoreError::Decode(format!("no saga `{}`", a.saga_id)));
            }
            append(
                tx,
                a.saga_id,
                None,
                "STATE",
                &json!({"state": State::AwaitingApproval.as_str(), "event": "ApprovalRequested"}),
                &at,
            )?;
            let row = tx.query_row(
                &format!("SELECT {COLUMNS} FROM approvals WHERE approval_id = ?1"),
                params![id],
                from_row,
            )?;
            decode(row)
        })
    }

    async fn decide_approval(
        &self,
        id: &str,
        approve: bool,
        by: &str,
        note: Option<&str>,
    ) -> Result<ApprovalRow, ApprovalOpError> {
        let current = self.approval(id).await?;
        let at = now_rfc3339();
        let result: Result<Result<ApprovalRow, ApprovalError>, StoreError> = self.write(|tx| {
            // Read again under the write lock: someone may have decided since.
            let status: String = tx.query_row(
                "SELECT status FROM approvals WHERE approval_id = ?1",
                params![current.approval_id],
                |r| r.get(0),
            )?;
            let status = ApprovalStatus::parse(&status)
                .ok_or_else(|| StoreError::Decode(format!("unknown approval status `{status}`")))?;
            let next = match status.decide(approve) {
                Ok(n) => n,
                Err(e) => return Ok(Err(e)),
            };
            tx.execute(
                "UPDATE approvals SET status = ?2, decided_by = ?3, decided_at = ?4 WHERE approval_id = ?1 AND status = 'pending'",
                params![current.approval_id, next.as_str(), by, at],
            )?;
            let record = if approve {
                "APPROVAL_APPROVED"
            } else {
                "APPROVAL_DENIED"
            };
            append(
                tx,
                &current.saga_id,
                Some(current.step_seq),
                record,
                &json!({"approval_id": current.approval_id, "by": by, "note": note}),
                &at,
            )?;
            let row = tx.query_row(
                &format!("SELECT {COLUMNS} FROM approvals WHERE approval_id = ?1"),
                params![current.approval_id],
                from_row,
            )?;
            Ok(Ok(decode(row)?))
        });
        Ok(result??)
    }

    async fn approval(&self, id: &str) -> Result<ApprovalRow, ApprovalOpError> {
        let shown: String = id.chars().take(80).collect();
        if !id.bytes().all(|b| b.is_ascii_hexdigit() || b == b'-') || id.is_empty() {
            return Err(ApprovalOpError::NotFound(shown));
        }
        let rows: Vec<ApprovalRow> = self.read(|c| {
            let mut st = c.prepare(&format!(
                "SELECT {COLUMNS} FROM approvals WHERE approval_id = ?1 OR (length(?1) >= ?2 AND substr(approval_id, 1, length(?1)) = ?1) LIMIT 2"
            ))?;
            let rows = st.query_map(params![id.to_ascii_lowercase(), MIN_ID_PREFIX as i64], from_row)?;
            rows.map(|r| decode(r?)).collect()
        })?;
        match rows.len() {
            1 => rows
                .into_iter()
                .next()
                .ok_or(ApprovalOpError::NotFound(shown)),
            0 if id.len() < MIN_ID_PREFIX => Err(ApprovalOpError::Ambiguous(shown)),
            0 => Err(ApprovalOpError::NotFound(shown)),
            _ => Err(ApprovalOpError::Ambiguous(shown)),
        }
    }

    async fn approval_for_step(
        &self,
        saga_id: &str,
        step_seq: u64,
    ) -> Result<Option<ApprovalRow>, StoreError> {
        self.read(|c| {
            c.query_row(
                &format!("SELECT {COLUMNS} FROM approvals WHERE saga_id = ?1 AND step_seq = ?2"),
                params![saga_id, step_seq as i64],
                from_row,
            )
            .optional()?
            .map(decode)
            .transpose()
        })
    }

    async fn find_approved(&self, binding: &Binding) -> Result<Option<ApprovalRow>, StoreError> {
        self.read(|c| {
            c.query_row(
                &format!("SELECT {COLUMNS} FROM approvals WHERE tool_id = ?1 AND tool_hash = ?2 AND args_hash = ?3 AND status = 'approved' ORDER BY created_at, rowid LIMIT 1"),
                params![binding.tool_id, binding.tool_hash, binding.args_hash],
                from_row,
            )
            .optional()?
            .map(decode)
            .transpose()
        })
    }

    async fn approvals(&self, all: bool) -> Result<Vec<ApprovalRow>, StoreError> {
        self.read(|c| {
            let mut st = c.prepare(&format!(
                "SELECT {COLUMNS} FROM approvals WHERE ?1 OR status = 'pending' ORDER BY created_at, rowid"
            ))?;
            let rows = st.query_map(params![all], from_row)?;
            rows.map(|r| decode(r?)).collect()
        })
    }
}
