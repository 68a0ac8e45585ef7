//! A task's record as the store keeps it (`capsaga_store::TaskRow`): its
//! status and detail written from the extension's payload, and read back
//! as the extension's task and payload.

use super::{POLL_MS, TTL};
use capsaga_store::TaskRow;
use rmcp::ErrorData as McpError;
use rmcp::model::{InputRequests, JsonObject, Task, TaskPayload, TaskStatus};

/// The stored status and detail of `payload`.
pub(super) fn stored(payload: &TaskPayload) -> (&'static str, Option<String>) {
    match payload {
        TaskPayload::InputRequired { input_requests } => {
            ("input_required", serde_json::to_string(input_requests).ok())
        }
        TaskPayload::Completed { result } => ("completed", serde_json::to_string(result).ok()),
        TaskPayload::Failed { error } => ("failed", serde_json::to_string(error).ok()),
        TaskPayload::Cancelled => ("cancelled", None),
        _ => ("working", None),
    }
}

/// The extension's payload of a stored row.
pub(super) fn payload_of(row: &TaskRow) -> Result<TaskPayload, McpError> {
    fn parse<T: serde::de::DeserializeOwned>(row: &TaskRow) -> Result<T, McpError> {
        row.detail
            .as_deref()
            .and_then(|d| serde_json::from_str(d).ok())
            .ok_or_else(|| {
                McpError::internal_error(format!("task {}: a damaged record", row.task_id), None)
            })
    }
    Ok(match row.status.as_str() {
        "working" => TaskPayload::Working,
        "input_required" => TaskPayload::InputRequired {
            input_requests: parse::<InputRequests>(row)?,
        },
        "completed" => TaskPayload::Completed {
            result: parse::<JsonObject>(row)?,
        },
        "failed" => TaskPayload::Failed {
            error: parse::<JsonObject>(row)?,
        },
        "cancelled" => TaskPayload::Cancelled,
        other => {
            return Err(McpError::internal_error(
                format!("task {}: unknown status {other:?}", row.task_id),
                None,
            ));
        }
    })
}

/// The extension's task of a stored row.
pub(super) fn task_of(row: &TaskRow, status: TaskStatus) -> Task {
    let t = Task::new(&row.task_id, status, &row.created_at, &row.updated_at)
        .with_ttl_ms(TTL.as_millis() as u64)
        .with_poll_interval_ms(POLL_MS);
    match (&row.saga_id, row.cancel_requested && !status.is_terminal()) {
        (Some(s), false) => t.with_status_message(format!("saga {s}")),
        (Some(s), true) => t.with_status_message(format!("saga {s}; cancel requested")),
        (None, true) => t.with_status_message("cancel requested"),
        (None, false) => t,
    }
}
