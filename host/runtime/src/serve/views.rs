//! What the REST API and the MCP resources show of the state store, in one
//! place: a saga with its steps and log records, and an execution trace.

use crate::store::{Store, StoreError};
use serde_json::{Value, json};

/// Whether `id` can be a saga or trace id (a UUID or a prefix of one:
/// hexadecimal digits and dashes, at most 64 bytes). Anything else is
/// refused before the store is asked.
pub fn valid_id(id: &str) -> bool {
    !id.is_empty() && id.len() <= 64 && id.bytes().all(|b| b.is_ascii_hexdigit() || b == b'-')
}

/// `{"saga": row, "steps": [...], "log": [...]}` for the saga `id`, or
/// `None` when there is none (or `id` is not an id).
///
/// # Errors
/// The store's.
pub async fn saga(store: &dyn Store, id: &str) -> Result<Option<Value>, StoreError> {
    if !valid_id(id) {
        return Ok(None);
    }
    let Some(row) = store.saga(id).await? else {
        return Ok(None);
    };
    let steps = store.steps(id).await?;
    let log = store.log(Some(id)).await?;
    Ok(Some(json!({ "saga": row, "steps": steps, "log": log })))
}

/// The execution trace `id` as JSON, or `None`.
///
/// # Errors
/// The store's.
pub async fn trace(store: &dyn Store, id: &str) -> Result<Option<Value>, StoreError> {
    if !valid_id(id) {
        return Ok(None);
    }
    Ok(crate::agent::trace::load(store, id)
        .await?
        .map(|t| json!(t)))
}
