//! Stage 3, replay: a step whose idempotency key already committed returns
//! its logged output and nothing executes, so neither the policy nor the
//! guardrail has anything to allow (the call was allowed when it ran); a
//! position of the saga already logged (as another call, or in another
//! status) is refused.

use super::wal::{NOT_AGAIN, refused};
use super::{DispatchError, Outcome, Refusal};
use crate::host::Host;
use crate::registry::LoadedTool;
use crate::saga::Saga;
use crate::store::{StepStatus, StoreError};
use capsaga_core::tool::ToolOutput;

/// Stage 3: the logged outcome of step `seq` with idempotency key `key`,
/// if it is already logged.
///
/// # Errors
/// [`DispatchError`] when the store fails or a logged output does not
/// decode.
pub(super) async fn replay(
    host: &Host,
    saga: &mut Saga,
    tool: &LoadedTool,
    seq: u64,
    key: &str,
) -> Result<Option<Outcome>, DispatchError> {
    if let Some(row) = host.store.step_by_key(key).await?
        && row.status == StepStatus::Commit
        && let Some(out) = row.output
    {
        let output: ToolOutput = serde_json::from_value(out)
            .map_err(|e| StoreError::Decode(format!("logged output of step {seq}: {e}")))?;
        saga.next_seq += 1;
        if tool.meta.has_side_effects {
            saga.side_effects += 1;
        }
        return Ok(Some(Outcome::Committed {
            seq,
            output,
            replayed: true,
            diagnostics: None,
        }));
    }
    let Some(row) = host.store.step_at(&saga.id, seq).await? else {
        return Ok(None);
    };
    let what = if row.idempotency_key == key {
        format!("is already logged as {}", row.status)
    } else {
        format!(
            "is logged as another call (`{}` with other arguments): this is not the same plan",
            row.tool_id
        )
    };
    Ok(Some(refused(
        Refusal::Logged,
        format!("step {seq} of saga {} {what}", saga.id),
        NOT_AGAIN,
    )))
}
