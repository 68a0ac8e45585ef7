//! What the REST API and the MCP resources show of the state store, in one
//! place: a saga with its steps and log records, and an execution trace.

use capsaga_core::principal::Principal;
use capsaga_store::{Store, StoreError};
use serde_json::{Value, json};

/// Whether `id` can be a saga or trace id (a UUID or a prefix of one:
/// hexadecimal digits and dashes, at most 64 bytes). Anything else is
/// refused before the store is asked.
pub fn valid_id(id: &str) -> bool {
    !id.is_empty() && id.len() <= 64 && id.bytes().all(|b| b.is_ascii_hexdigit() || b == b'-')
}

/// `{"saga": row, "steps": [...], "log": [...]}` for the saga `id` as
/// `who` may see it, or `None` when there is none, `id` is not an id, or
/// `who` is a client and the saga is not its own (the same answer: a
/// client cannot tell another principal's saga from no saga).
///
/// # Errors
/// The store's.
pub async fn saga(
    store: &dyn Store,
    id: &str,
    who: &Principal,
) -> Result<Option<Value>, StoreError> {
    if !valid_id(id) {
        return Ok(None);
    }
    let Some(row) = store.saga(id).await? else {
        return Ok(None);
    };
    if !who.sees(row.principal.as_deref()) {
        return Ok(None);
    }
    let steps = store.steps(id).await?;
    let log = store.log(Some(id)).await?;
    Ok(Some(json!({ "saga": row, "steps": steps, "log": log })))
}

/// The execution trace `id` as JSON, or `None` (also when `who` is a
/// client and the trace's saga is not its own).
///
/// # Errors
/// The store's.
pub async fn trace(
    store: &dyn Store,
    id: &str,
    who: &Principal,
) -> Result<Option<Value>, StoreError> {
    if !valid_id(id) {
        return Ok(None);
    }
    let Some(t) = capsaga_agent::trace::load(store, id).await? else {
        return Ok(None);
    };
    if !who.sees(None) {
        let owner = match &t.saga_id {
            Some(s) => store.saga(s).await?.and_then(|r| r.principal),
            None => None,
        };
        if !who.sees(owner.as_deref()) {
            return Ok(None);
        }
    }
    Ok(Some(json!(t)))
}

/// The newest sagas `who` may see (every saga for an operator, its own for
/// a client), at most `limit`.
///
/// # Errors
/// The store's.
pub async fn sagas(
    store: &dyn Store,
    who: &Principal,
    limit: usize,
) -> Result<Vec<capsaga_store::SagaRow>, StoreError> {
    match who.saga_filter() {
        None => store.sagas(limit).await,
        Some(me) => store.sagas_of(me, limit).await,
    }
}
