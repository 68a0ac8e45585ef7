//! Row decoding, written once for both dialects: each table's columns as
//! every read selects them, and the row type built from them. A dialect
//! only says how to read one column of its driver's row ([`Cells`]:
//! `rusqlite::Row` in `sqlite/mod.rs`, `tokio_postgres::Row` in
//! `postgres/mod.rs`).

use crate::access::{ActiveToken, KeyRow, TokenRow};
use crate::tasks::TaskRow;
use crate::{
    ApprovalRow, Approved, DayRow, GapRow, NeuronRow, SagaRow, StepRow, StepStatus, StoreError,
};
use capsaga_core::approval::{ApprovalStatus, Binding};
use capsaga_core::fsm::State;
use capsaga_core::neuron::Status;
use capsaga_core::pause::{Mode, Switch};
use capsaga_core::principal::Role;
use capsaga_core::scope::Scope;
use capsaga_secrets::sealed::Sealed;
use serde_json::Value;

/// A value both drivers can read from a column.
#[cfg(feature = "postgres")]
pub(crate) trait Column:
    rusqlite::types::FromSql + for<'a> tokio_postgres::types::FromSql<'a>
{
}
#[cfg(feature = "postgres")]
impl<T: rusqlite::types::FromSql + for<'a> tokio_postgres::types::FromSql<'a>> Column for T {}
/// A value the driver can read from a column.
#[cfg(not(feature = "postgres"))]
pub(crate) trait Column: rusqlite::types::FromSql {}
#[cfg(not(feature = "postgres"))]
impl<T: rusqlite::types::FromSql> Column for T {}

/// A row of a query, as the dialect's driver returns it.
pub(crate) trait Cells {
    /// Column `i` (from 0) as a `T`.
    ///
    /// # Errors
    /// The driver's, when the column is missing or of another type.
    fn cell<T: Column>(&self, i: usize) -> Result<T, StoreError>;

    /// Column `i`, a non-negative BIGINT, as a `u64`.
    ///
    /// # Errors
    /// [`StoreError::Decode`] for a negative value; the driver's.
    fn count(&self, i: usize) -> Result<u64, StoreError> {
        let v: i64 = self.cell(i)?;
        u64::try_from(v)
            .map_err(|_| StoreError::Decode(format!("negative value {v} in column {i}")))
    }

    /// Column `i`, JSON text, parsed (`what` names it in the error).
    ///
    /// # Errors
    /// [`StoreError::Decode`]; the driver's.
    fn json(&self, i: usize, what: &str) -> Result<Value, StoreError> {
        let t: String = self.cell(i)?;
        serde_json::from_str(&t).map_err(|e| StoreError::Decode(format!("{what}: {e}")))
    }

    /// Column `i`, JSON text or NULL, parsed.
    ///
    /// # Errors
    /// As [`Cells::json`].
    fn opt_json(&self, i: usize, what: &str) -> Result<Option<Value>, StoreError> {
        let t: Option<String> = self.cell(i)?;
        t.map(|t| serde_json::from_str(&t).map_err(|e| StoreError::Decode(format!("{what}: {e}"))))
            .transpose()
    }
}

/// The columns of `saga_state` every read of a [`SagaRow`] selects.
pub(crate) const SAGA_COLUMNS: &str = "saga_id, state, origin, label, created_at, updated_at, owner, fence, principal, released_at, scope";

/// A [`SagaRow`] from [`SAGA_COLUMNS`].
///
/// # Errors
/// [`StoreError::Decode`] for an unknown state or a negative token.
pub(crate) fn saga(r: &impl Cells) -> Result<SagaRow, StoreError> {
    let state: String = r.cell(1)?;
    Ok(SagaRow {
        saga_id: r.cell(0)?,
        state: state.parse::<State>().map_err(StoreError::Decode)?,
        origin: r.cell(2)?,
        label: r.cell(3)?,
        created_at: r.cell(4)?,
        updated_at: r.cell(5)?,
        owner: r.cell(6)?,
        fence: r.count(7)?,
        principal: r.cell(8)?,
        released_at: r.cell(9)?,
        scope: r
            .cell::<Option<String>>(10)?
            .as_deref()
            .and_then(Scope::parse),
    })
}

/// The columns of `saga_steps` every read of a [`StepRow`] selects.
pub(crate) const STEP_COLUMNS: &str = "saga_id, step_seq, tool_id, tool_hash, grants, has_side_effects, idempotency_key, args, preimage, output, status, error, created_at, updated_at, label";

/// A step status as stored.
///
/// # Errors
/// [`StoreError::Decode`] for an unknown one.
pub(crate) fn step_status(s: &str) -> Result<StepStatus, StoreError> {
    StepStatus::parse(s).ok_or_else(|| StoreError::Decode(format!("unknown step status `{s}`")))
}

/// A [`StepRow`] from [`STEP_COLUMNS`].
///
/// # Errors
/// [`StoreError::Decode`] for a bad status, position or JSON column.
pub(crate) fn step(r: &impl Cells) -> Result<StepRow, StoreError> {
    Ok(StepRow {
        saga_id: r.cell(0)?,
        step_seq: r.count(1)?,
        tool_id: r.cell(2)?,
        tool_hash: r.cell(3)?,
        grants: serde_json::from_str(&r.cell::<String>(4)?)
            .map_err(|e| StoreError::Decode(format!("grants: {e}")))?,
        has_side_effects: r.cell(5)?,
        idempotency_key: r.cell(6)?,
        args: r.json(7, "args")?,
        preimage: r.opt_json(8, "preimage")?,
        output: r.opt_json(9, "output")?,
        status: step_status(&r.cell::<String>(10)?)?,
        error: r.opt_json(11, "error")?,
        created_at: r.cell(12)?,
        updated_at: r.cell(13)?,
        label: r.opt_json(14, "label")?,
    })
}

/// The columns of `approvals` every read of an [`ApprovalRow`] selects.
pub(crate) const APPROVAL_COLUMNS: &str = "approval_id, saga_id, step_seq, tool_id, tool_hash, args_hash, args, reason, summary, preview, status, decided_by, decided_at, claimed_saga, claimed_step, claimed_at, created_at, expires_at, replaces, note";

/// An [`ApprovalRow`] from [`APPROVAL_COLUMNS`].
///
/// # Errors
/// [`StoreError::Decode`] for a bad status, step or JSON column.
pub(crate) fn approval(r: &impl Cells) -> Result<ApprovalRow, StoreError> {
    let step_seq: i64 = r.cell(2)?;
    let status: String = r.cell(10)?;
    let claimed_step: Option<i64> = r.cell(14)?;
    Ok(ApprovalRow {
        approval_id: r.cell(0)?,
        saga_id: r.cell(1)?,
        step_seq: u64::try_from(step_seq)
            .map_err(|_| StoreError::Decode(format!("negative approval step {step_seq}")))?,
        binding: Binding {
            tool_id: r.cell(3)?,
            tool_hash: r.cell(4)?,
            args_hash: r.cell(5)?,
        },
        args: r.json(6, "approval args")?,
        reason: r.cell(7)?,
        summary: r.cell(8)?,
        preview: r.opt_json(9, "approval preview")?,
        status: ApprovalStatus::parse(&status)
            .ok_or_else(|| StoreError::Decode(format!("unknown approval status `{status}`")))?,
        decided_by: r.cell(11)?,
        decided_at: r.cell(12)?,
        claimed_saga: r.cell(13)?,
        claimed_step: claimed_step.map(|s| s.max(0) as u64),
        claimed_at: r.cell(15)?,
        created_at: r.cell(16)?,
        expires_at: r.cell(17)?,
        replaces: r.cell(18)?,
        note: r.cell(19)?,
    })
}

/// An [`Approved`] approval: [`APPROVAL_COLUMNS`], then whether its
/// requesting saga ended and that saga's principal.
///
/// # Errors
/// As [`approval`].
pub(crate) fn approved(r: &impl Cells) -> Result<Approved, StoreError> {
    Ok(Approved {
        approval: approval(r)?,
        requester_ended: r.cell(20)?,
        requester_principal: r.cell(21)?,
    })
}

/// `columns` (`a, b`) each qualified by the table alias `alias` (`t.a, t.b`).
pub(crate) fn qualified(columns: &str, alias: &str) -> String {
    columns
        .split(',')
        .map(|c| format!("{alias}.{}", c.trim()))
        .collect::<Vec<_>>()
        .join(", ")
}

/// A [`NeuronRow`] from a dialect's neuron `SELECT` (the same eighteen
/// columns in both: the row, then the provenance through the turn's trace).
///
/// # Errors
/// [`StoreError::Decode`] naming the bad column and the row's status.
pub(crate) fn neuron(r: &impl Cells) -> Result<NeuronRow, StoreError> {
    let status: String = r.cell(4)?;
    let bad = |what: &str| StoreError::Decode(format!("neuron row: {what} (status `{status}`)"));
    let version: i64 = r.cell(1)?;
    let meta: String = r.cell(5)?;
    let examples: String = r.cell(7)?;
    let report: Option<String> = r.cell(8)?;
    let granted: String = r.cell(9)?;
    let step_seq: Option<i64> = r.cell(11)?;
    Ok(NeuronRow {
        name: r.cell(0)?,
        version: u32::try_from(version).map_err(|_| bad("version"))?,
        identity: r.cell(2)?,
        runner_hash: r.cell(3)?,
        status: Status::parse(&status).ok_or_else(|| bad("status"))?,
        meta: serde_json::from_str(&meta).map_err(|_| bad("meta"))?,
        source: r.cell(6)?,
        examples: serde_json::from_str(&examples).map_err(|_| bad("examples"))?,
        report: report.and_then(|t| serde_json::from_str(&t).ok()),
        granted: serde_json::from_str(&granted).map_err(|_| bad("granted"))?,
        saga_id: r.cell(10)?,
        step_seq: step_seq.map(|s| s as u64),
        decided_by: r.cell(12)?,
        note: r.cell(13)?,
        created_at: r.cell(14)?,
        updated_at: r.cell(15)?,
        trace_id: r.cell(16)?,
        model: r.cell(17)?,
    })
}

/// The columns of `tokens` every read of a [`TokenRow`] selects.
pub(crate) const TOKEN_COLUMNS: &str = "name, role, created_at, created_by, revoked_at, revoked_by";

/// A role as stored.
///
/// # Errors
/// [`StoreError::Decode`] for an unknown one.
pub(crate) fn role(s: &str) -> Result<Role, StoreError> {
    s.parse::<Role>()
        .map_err(|_| StoreError::Decode(format!("tokens: unknown role `{s}`")))
}

/// A [`TokenRow`] from [`TOKEN_COLUMNS`].
///
/// # Errors
/// [`StoreError::Decode`] for an unknown role.
pub(crate) fn token(r: &impl Cells) -> Result<TokenRow, StoreError> {
    Ok(TokenRow {
        name: r.cell(0)?,
        role: role(&r.cell::<String>(1)?)?,
        created_at: r.cell(2)?,
        created_by: r.cell(3)?,
        revoked_at: r.cell(4)?,
        revoked_by: r.cell(5)?,
    })
}

/// The active tokens' rows: name, role and the SHA-256 of the secret.
pub(crate) const ACTIVE_TOKENS: &str =
    "SELECT name, role, secret_sha256 FROM tokens WHERE revoked_at IS NULL ORDER BY name";

/// An [`ActiveToken`] from [`ACTIVE_TOKENS`]' row.
///
/// # Errors
/// [`StoreError::Decode`] for an unknown role or a hash that is not 32
/// bytes of hex.
pub(crate) fn active_token(r: &impl Cells) -> Result<ActiveToken, StoreError> {
    let name: String = r.cell(0)?;
    let role = role(&r.cell::<String>(1)?)?;
    let hash: String = r.cell(2)?;
    let mut secret_sha256 = [0u8; 32];
    hex::decode_to_slice(&hash, &mut secret_sha256)
        .map_err(|_| StoreError::Decode(format!("token `{name}`: stored hash")))?;
    Ok(ActiveToken {
        name,
        role,
        secret_sha256,
    })
}

/// The columns of `mcp_tasks` every read of a [`TaskRow`] selects.
pub(crate) const TASK_COLUMNS: &str = "task_id, principal, saga_id, owner, status, detail, answers, cancel_requested, created_at, updated_at, version";

/// A [`TaskRow`] from [`TASK_COLUMNS`].
///
/// # Errors
/// [`StoreError::Decode`] for a negative version.
pub(crate) fn task(r: &impl Cells) -> Result<TaskRow, StoreError> {
    Ok(TaskRow {
        task_id: r.cell(0)?,
        principal: r.cell(1)?,
        saga_id: r.cell(2)?,
        owner: r.cell(3)?,
        status: r.cell(4)?,
        detail: r.cell(5)?,
        answers: r.cell(6)?,
        cancel_requested: r.cell(7)?,
        created_at: r.cell(8)?,
        updated_at: r.cell(9)?,
        version: r.count(10)?,
    })
}

/// The columns of `provider_keys` a [`Sealed`] key is read from.
pub(crate) const SEALED_COLUMNS: &str = "format, kek_id, wrapped_dek, ciphertext, last4";

/// A [`Sealed`] key from [`SEALED_COLUMNS`].
///
/// # Errors
/// The driver's.
pub(crate) fn sealed(r: &impl Cells) -> Result<Sealed, StoreError> {
    Ok(Sealed {
        format: r.cell(0)?,
        kek_id: r.cell(1)?,
        wrapped_dek: r.cell(2)?,
        ciphertext: r.cell(3)?,
        last4: r.cell(4)?,
    })
}

/// The columns of `provider_keys` a [`KeyRow`] is read from.
pub(crate) const KEY_COLUMNS: &str = "name, last4, kek_id, created_at, created_by";

/// A [`KeyRow`] from [`KEY_COLUMNS`].
///
/// # Errors
/// The driver's.
pub(crate) fn key(r: &impl Cells) -> Result<KeyRow, StoreError> {
    Ok(KeyRow {
        name: r.cell(0)?,
        last4: r.cell(1)?,
        kek_id: r.cell(2)?,
        created_at: r.cell(3)?,
        created_by: r.cell(4)?,
    })
}

/// The kill switch's row, `SELECT mode, set_by, set_at, note`.
pub(crate) const SWITCH_SELECT: &str =
    "SELECT mode, set_by, set_at, note FROM host_switch WHERE id = 1";

/// The kill switch from [`SWITCH_SELECT`]'s row (none: running).
///
/// # Errors
/// [`StoreError::Decode`] for an unknown mode.
pub(crate) fn switch(r: Option<&impl Cells>) -> Result<Switch, StoreError> {
    let Some(r) = r else {
        return Ok(Switch::default());
    };
    Ok(Switch {
        mode: r
            .cell::<String>(0)?
            .parse::<Mode>()
            .map_err(|e| StoreError::Decode(format!("host_switch: {e}")))?,
        by: r.cell(1)?,
        at: r.cell(2)?,
        note: r.cell(3)?,
    })
}

/// A [`GapRow`] from `budget_ratios`' day, provider, model, calls,
/// reserved_usd, charged_usd, over_usd, input_ratio, output_ratio.
///
/// # Errors
/// [`StoreError::Decode`] for a negative count; the driver's.
pub(crate) fn gap(r: &impl Cells) -> Result<GapRow, StoreError> {
    Ok(GapRow {
        day: r.cell(0)?,
        provider: r.cell(1)?,
        model: r.cell(2)?,
        calls: r.count(3)?,
        reserved_usd: r.cell(4)?,
        charged_usd: r.cell(5)?,
        over_usd: r.cell(6)?,
        input_ratio: r.cell(7)?,
        output_ratio: r.cell(8)?,
    })
}

/// A [`DayRow`] from `budget_days`' day, spent_usd, calls, input_tokens,
/// output_tokens and the day's live reservations (USD).
///
/// # Errors
/// [`StoreError::Decode`] for a negative count; the driver's.
pub(crate) fn day(r: &impl Cells) -> Result<DayRow, StoreError> {
    Ok(DayRow {
        day: r.cell(0)?,
        spent_usd: r.cell(1)?,
        calls: r.count(2)?,
        input_tokens: r.count(3)?,
        output_tokens: r.count(4)?,
        reserved_usd: r.cell(5)?,
    })
}
