//! `approvals`: human approvals of steps (see `capsaga_core::approval` for
//! their life and binding).
//!
//! Every change is one `IMMEDIATE` transaction that also appends the matching
//! `wal_log` row (APPROVAL_REQUESTED, APPROVAL_APPROVED, APPROVAL_DENIED,
//! APPROVAL_STALE and APPROVAL_EXPIRED; APPROVAL_CLAIMED is written with the
//! step's BEGIN row, in [`super::steps`]).
//! Requesting an approval parks the saga (AwaitingApproval) in the same
//! transaction, so a crash cannot leave a pending approval without a parked
//! saga or the reverse.

use super::super::{
    ApprovalOpError, ApprovalRow, ApprovalStore, Approved, MIN_ID_PREFIX, NewApproval, StoreError,
};
use super::Cached;
use super::log::log_record;
use super::{SqliteStore, all, first, one, to_json};
use crate::claim::ENDED_STATES;
use crate::clock::now_rfc3339;
use crate::decode::{self, APPROVAL_COLUMNS as COLUMNS};
use crate::records;
use async_trait::async_trait;
use capsaga_core::approval::{ApprovalError, ApprovalStatus, Binding};
use capsaga_core::fsm::State;
use rusqlite::{OptionalExtension, params};

/// `now` plus `ttl_s` seconds, RFC 3339 UTC with milliseconds (the format
/// of `clock::now_rfc3339`, so that text order is time order).
fn expiry(ttl_s: u64) -> String {
    let ttl = jiff::SignedDuration::from_secs(i64::try_from(ttl_s).unwrap_or(i64::MAX));
    jiff::Timestamp::now()
        .checked_add(ttl)
        .unwrap_or(jiff::Timestamp::MAX)
        .strftime("%Y-%m-%dT%H:%M:%S%.3fZ")
        .to_string()
}

/// Retire approval `old` (pending or approved) as `status`, replaced by
/// `new`, with its log record; nothing when it is already final.
fn retire(
    tx: &rusqlite::Transaction<'_>,
    old: &str,
    status: ApprovalStatus,
    new: &str,
    at: &str,
) -> Result<(), StoreError> {
    let record = match status {
        ApprovalStatus::Stale => "APPROVAL_STALE",
        ApprovalStatus::Expired => "APPROVAL_EXPIRED",
        other => {
            return Err(StoreError::Decode(format!(
                "an approval is replaced as stale or expired, not {other}"
            )));
        }
    };
    let found: Option<(String, i64)> = tx
        .row(
            "SELECT saga_id, step_seq FROM approvals WHERE approval_id = ?1 AND status IN ('pending', 'approved')",
            params![old],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )
        .optional()?;
    let Some((saga, step)) = found else {
        return Ok(());
    };
    tx.exec(
        "UPDATE approvals SET status = ?2 WHERE approval_id = ?1",
        params![old, status.as_str()],
    )?;
    let replaced = records::approval_replaced(&saga, u64::try_from(step).ok(), record, old, new);
    log_record(tx, &replaced, at)
}

#[async_trait]
impl ApprovalStore for SqliteStore {
    async fn request_approval(&self, a: &NewApproval<'_>) -> Result<ApprovalRow, StoreError> {
        let id = uuid::Uuid::new_v4().to_string();
        let at = now_rfc3339();
        let expires_at = expiry(a.ttl_s);
        let requested = records::approval_requested(&records::Requested {
            id: &id,
            a,
            expires_at: &expires_at,
        });
        let (saga_id, binding, args, reason, summary, preview, replaces) = (
            a.saga_id.to_owned(),
            a.binding.clone(),
            a.args.clone(),
            a.reason.to_owned(),
            a.summary.to_owned(),
            a.preview.cloned(),
            a.replaces.map(|(old, st)| (old.to_owned(), st)),
        );
        let (step_seq, fence) = (a.step_seq, a.fence);
        self.write(move |tx| {
            let a = NewApproval {
                saga_id: &saga_id,
                step_seq,
                binding: &binding,
                args: &args,
                reason: &reason,
                summary: &summary,
                preview: preview.as_ref(),
                ttl_s: 0,
                replaces: replaces.as_ref().map(|(old, st)| (old.as_str(), *st)),
                fence,
            };
            if let Some((old, status)) = a.replaces {
                retire(tx, old, status, &id, &at)?;
            }
            tx.exec(
                &format!("INSERT INTO approvals ({COLUMNS}) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, 'pending', NULL, NULL, NULL, NULL, NULL, ?11, ?12, ?13, NULL)"),
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
                    at,
                    expires_at,
                    a.replaces.map(|(old, _)| old)
                ],
            )?;
            log_record(tx, &requested, &at)?;
            let n = tx.exec(
                "UPDATE saga_state SET state = ?2, updated_at = ?3 WHERE saga_id = ?1 AND fence = ?4",
                params![a.saga_id, State::AwaitingApproval.as_str(), at, a.fence as i64],
            )?;
            if n == 0 {
                return Err(super::sagas::missing_or_fenced(tx, a.saga_id, a.fence)?);
            }
            log_record(tx, &records::awaiting_approval(&saga_id), &at)?;
            one(
                tx,
                &format!("SELECT {COLUMNS} FROM approvals WHERE approval_id = ?1"),
                params![id],
                |r| decode::approval(r),
            )
        })
        .await
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
        let (by, note) = (by.to_owned(), note.map(str::to_owned));
        let result: Result<Result<ApprovalRow, ApprovalError>, StoreError> = self.write(move |tx| {
            let (by, note) = (by.as_str(), note.as_deref());
            // Read again under the write lock: someone may have decided since.
            let status: String = tx.row(
                "SELECT status FROM approvals WHERE approval_id = ?1",
                params![current.approval_id],
                |r| r.get(0),
            )?;
            let status = ApprovalStatus::parse(&status)
                .ok_or_else(|| StoreError::Decode(format!("unknown approval status `{status}`")))?;
            if status == ApprovalStatus::Pending && current.is_expired(&at) {
                // Too late to decide: recorded as expired, the step asks
                // again when its saga is resumed.
                tx.exec(
                    "UPDATE approvals SET status = 'expired' WHERE approval_id = ?1",
                    params![current.approval_id],
                )?;
                let expired = records::approval_expired(&current.saga_id, current.step_seq, &current.approval_id);
                log_record(tx, &expired, &at)?;
                let when = current.expires_at.clone().unwrap_or_default();
                return Ok(Err(ApprovalError::Expired(when)));
            }
            let next = match status.decide(approve) {
                Ok(n) => n,
                Err(e) => return Ok(Err(e)),
            };
            tx.exec(
                "UPDATE approvals SET status = ?2, decided_by = ?3, decided_at = ?4, note = ?5 WHERE approval_id = ?1 AND status = 'pending'",
                params![current.approval_id, next.as_str(), by, at, note],
            )?;
            let record = if approve {
                "APPROVAL_APPROVED"
            } else {
                "APPROVAL_DENIED"
            };
            let decided = records::approval_decided(
                &current.saga_id,
                current.step_seq,
                record,
                &current.approval_id,
                by,
                note,
            );
            log_record(tx, &decided, &at)?;
            Ok(Ok(one(
                tx,
                &format!("SELECT {COLUMNS} FROM approvals WHERE approval_id = ?1"),
                params![current.approval_id],
                |r| decode::approval(r),
            )?))
        })
        .await;
        Ok(result??)
    }

    async fn approval(&self, id: &str) -> Result<ApprovalRow, ApprovalOpError> {
        let shown: String = id.chars().take(80).collect();
        if !id.bytes().all(|b| b.is_ascii_hexdigit() || b == b'-') || id.is_empty() {
            return Err(ApprovalOpError::NotFound(shown));
        }
        let rows: Vec<ApprovalRow> = self.read(|c| {
            all(
                c,
                &format!("SELECT {COLUMNS} FROM approvals WHERE approval_id = ?1 OR (length(?1) >= ?2 AND substr(approval_id, 1, length(?1)) = ?1) LIMIT 2"),
                params![id.to_ascii_lowercase(), MIN_ID_PREFIX as i64],
                |r| decode::approval(r),
            )
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
            first(
                c,
                &format!("SELECT {COLUMNS} FROM approvals WHERE saga_id = ?1 AND step_seq = ?2 ORDER BY created_at DESC, rowid DESC LIMIT 1"),
                params![saga_id, step_seq as i64],
                |r| decode::approval(r),
            )
        })
    }

    async fn find_approved(
        &self,
        binding: &Binding,
        now: &str,
        claimant: &str,
    ) -> Result<Vec<Approved>, StoreError> {
        let cols = decode::qualified(COLUMNS, "a");
        let ended = ENDED_STATES.as_str();
        let rule = crate::claim::may_claim("a", "?5");
        self.read(|c| {
            all(
                c,
                &format!(
                    "SELECT {cols}, s.state IN {ended}, s.principal FROM approvals a JOIN saga_state s ON s.saga_id = a.saga_id
                     WHERE a.tool_id = ?1 AND a.tool_hash = ?2 AND a.args_hash = ?3 AND a.status = 'approved'
                       AND (a.expires_at IS NULL OR a.expires_at > ?4) AND {rule}
                     ORDER BY a.created_at, a.rowid LIMIT 64"
                ),
                params![binding.tool_id, binding.tool_hash, binding.args_hash, now, claimant],
                |r| decode::approved(r),
            )
        })
    }

    async fn approvals(&self, all: bool) -> Result<Vec<ApprovalRow>, StoreError> {
        self.read(|c| {
            super::all(
                c,
                &format!("SELECT {COLUMNS} FROM approvals WHERE ?1 OR status = 'pending' ORDER BY created_at, rowid"),
                params![all],
                |r| decode::approval(r),
            )
        })
    }
}
