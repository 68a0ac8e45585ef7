//! `approvals`: human approvals of steps, shared by every host. A decision
//! is a conditional update of a row locked for the transaction, so of two
//! hosts deciding one approval at once one decides and the other is told it
//! is no longer pending; a claim is written with its step's BEGIN
//! ([`super::steps`]), at most once.

use super::super::{
    ApprovalOpError, ApprovalRow, ApprovalStore, Approved, MIN_ID_PREFIX, NewApproval, StoreError,
};
use super::log::log_record;
use super::sagas::missing_or_fenced;
use super::{Conn, PgStore, execute, get, i64_of, query, query_opt, to_json};
use crate::claim::ENDED_STATES;
use crate::clock::now_rfc3339;
use crate::decode::{self, APPROVAL_COLUMNS as COLUMNS};
use crate::records;
use async_trait::async_trait;
use capsaga_core::approval::{ApprovalError, ApprovalStatus, Binding};
use capsaga_core::fsm::State;

/// `now` plus `ttl_s` seconds, in the format of `clock::now_rfc3339`.
fn expiry(ttl_s: u64) -> String {
    let ttl = jiff::SignedDuration::from_secs(i64::try_from(ttl_s).unwrap_or(i64::MAX));
    jiff::Timestamp::now()
        .checked_add(ttl)
        .unwrap_or(jiff::Timestamp::MAX)
        .strftime("%Y-%m-%dT%H:%M:%S%.3fZ")
        .to_string()
}

async fn one(c: &Conn, id: &str) -> Result<ApprovalRow, StoreError> {
    let row = query_opt(
        c,
        &format!("SELECT {COLUMNS} FROM approvals WHERE approval_id = $1"),
        &[&id],
    )
    .await?
    .ok_or_else(|| StoreError::Decode(format!("approval `{id}` vanished")))?;
    decode::approval(&row)
}

/// Retire approval `old` (pending or approved) as `status`, replaced by
/// `new`, with its log record; nothing when it is already final.
async fn retire(
    c: &Conn,
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
    let Some(found) = query_opt(
        c,
        "UPDATE approvals SET status = $2 WHERE approval_id = $1 AND status IN ('pending', 'approved') RETURNING saga_id, step_seq",
        &[&old, &status.as_str()],
    )
    .await?
    else {
        return Ok(());
    };
    let (saga, step): (String, i64) = (get(&found, 0)?, get(&found, 1)?);
    let replaced = records::approval_replaced(&saga, u64::try_from(step).ok(), record, old, new);
    log_record(c, &replaced, at).await
}

#[async_trait]
impl ApprovalStore for PgStore {
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
        self.write(move |c| {
            Box::pin(async move {
                // The saga is parked first: a stale token writes nothing.
                let n = execute(
                    c,
                    "UPDATE saga_state SET state = $2, updated_at = $3 WHERE saga_id = $1 AND fence = $4",
                    &[&saga_id, &State::AwaitingApproval.as_str(), &at, &i64_of(fence)],
                )
                .await?;
                if n == 0 {
                    return Err(missing_or_fenced(c, &saga_id, fence).await?);
                }
                if let Some((old, status)) = &replaces {
                    retire(c, old, *status, &id, &at).await?;
                }
                let replaced = replaces.as_ref().map(|(old, _)| old.clone());
                execute(
                    c,
                    &format!("INSERT INTO approvals ({COLUMNS}) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, 'pending', NULL, NULL, NULL, NULL, NULL, $11, $12, $13, NULL)"),
                    &[
                        &id,
                        &saga_id,
                        &i64_of(step_seq),
                        &binding.tool_id,
                        &binding.tool_hash,
                        &binding.args_hash,
                        &to_json(&args),
                        &reason,
                        &summary,
                        &preview.as_ref().map(to_json),
                        &at,
                        &expires_at,
                        &replaced,
                    ],
                )
                .await?;
                log_record(c, &requested, &at).await?;
                log_record(c, &records::awaiting_approval(&saga_id), &at).await?;
                one(c, &id).await
            })
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
        let result: Result<Result<ApprovalRow, ApprovalError>, StoreError> = self
            .write(move |c| {
                Box::pin(async move {
                    // Locked for the transaction: another host deciding at the
                    // same moment waits, then finds it decided.
                    let row = query_opt(
                        c,
                        "SELECT status FROM approvals WHERE approval_id = $1 FOR UPDATE",
                        &[&current.approval_id],
                    )
                    .await?
                    .ok_or_else(|| StoreError::Decode("approval vanished".into()))?;
                    let status: String = get(&row, 0)?;
                    let status = ApprovalStatus::parse(&status).ok_or_else(|| {
                        StoreError::Decode(format!("unknown approval status `{status}`"))
                    })?;
                    if status == ApprovalStatus::Pending && current.is_expired(&at) {
                        execute(
                            c,
                            "UPDATE approvals SET status = 'expired' WHERE approval_id = $1",
                            &[&current.approval_id],
                        )
                        .await?;
                        let expired = records::approval_expired(&current.saga_id, current.step_seq, &current.approval_id);
                log_record(c, &expired, &at).await?;
                        let when = current.expires_at.clone().unwrap_or_default();
                        return Ok(Err(ApprovalError::Expired(when)));
                    }
                    let next = match status.decide(approve) {
                        Ok(n) => n,
                        Err(e) => return Ok(Err(e)),
                    };
                    execute(
                        c,
                        "UPDATE approvals SET status = $2, decided_by = $3, decided_at = $4, note = $5 WHERE approval_id = $1 AND status = 'pending'",
                        &[&current.approval_id, &next.as_str(), &by, &at, &note],
                    )
                    .await?;
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
                &by,
                note.as_deref(),
            );
            log_record(c, &decided, &at).await?;
                    Ok(Ok(one(c, &current.approval_id).await?))
                })
            })
            .await;
        Ok(result??)
    }

    async fn approval(&self, id: &str) -> Result<ApprovalRow, ApprovalOpError> {
        let shown: String = id.chars().take(80).collect();
        if !id.bytes().all(|b| b.is_ascii_hexdigit() || b == b'-') || id.is_empty() {
            return Err(ApprovalOpError::NotFound(shown));
        }
        let c = self.conn().await?;
        let rows = query(
            &c,
            &format!("SELECT {COLUMNS} FROM approvals WHERE approval_id = $1 OR (length($1) >= $2 AND left(approval_id, length($1)) = $1) LIMIT 2"),
            &[&id.to_ascii_lowercase(), &(MIN_ID_PREFIX as i32)],
        )
        .await?;
        let rows: Vec<ApprovalRow> = rows
            .iter()
            .map(decode::approval)
            .collect::<Result<_, _>>()?;
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
        let c = self.conn().await?;
        query_opt(
            &c,
            &format!("SELECT {COLUMNS} FROM approvals WHERE saga_id = $1 AND step_seq = $2 ORDER BY created_at DESC, ord DESC LIMIT 1"),
            &[&saga_id, &i64_of(step_seq)],
        )
        .await?
        .as_ref()
        .map(decode::approval)
        .transpose()
    }

    async fn find_approved(
        &self,
        binding: &Binding,
        now: &str,
        claimant: &str,
    ) -> Result<Vec<Approved>, StoreError> {
        let cols = decode::qualified(COLUMNS, "a");
        let ended = ENDED_STATES.as_str();
        let rule = crate::claim::may_claim("a", "$5");
        let c = self.conn().await?;
        let rows = query(
            &c,
            &format!(
                "SELECT {cols}, s.state IN {ended}, s.principal FROM approvals a JOIN saga_state s ON s.saga_id = a.saga_id
                 WHERE a.tool_id = $1 AND a.tool_hash = $2 AND a.args_hash = $3 AND a.status = 'approved'
                   AND (a.expires_at IS NULL OR a.expires_at > $4) AND {rule}
                 ORDER BY a.created_at, a.ord LIMIT 64"
            ),
            &[&binding.tool_id, &binding.tool_hash, &binding.args_hash, &now, &claimant],
        )
        .await?;
        rows.iter().map(decode::approved).collect()
    }

    async fn approvals(&self, all: bool) -> Result<Vec<ApprovalRow>, StoreError> {
        let c = self.conn().await?;
        let rows = query(
            &c,
            &format!(
                "SELECT {COLUMNS} FROM approvals WHERE $1 OR status = 'pending' ORDER BY created_at, ord"
            ),
            &[&all],
        )
        .await?;
        rows.iter().map(decode::approval).collect()
    }
}
