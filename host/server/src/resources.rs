//! MCP resources of capsaga's own state: every saga (its steps and its
//! write-ahead log records) and every execution trace, read-only, as JSON.
//!
//! - `resources/list`: the newest sagas, `capsaga://sagas/<id>`;
//! - `resources/templates/list`: `capsaga://sagas/{id}` and
//!   `capsaga://traces/{id}`;
//! - `resources/read`: the same view as `GET /v1/sagas/{id}` and
//!   `GET /v1/traces/{id}` ([`super::views`]);
//! - `completion/complete` for a template's `id`: the saga ids starting
//!   with what was typed;
//! - `resources/subscribe`: a session subscribed to its saga's URI gets
//!   `notifications/resources/updated` after each of its calls. A URI is
//!   checked exactly as `resources/read` checks it (the handler's one
//!   lookup, `McpSession::resource`): what cannot be read cannot be
//!   subscribed to.

use super::views;
use capsaga_core::principal::Principal;
use capsaga_store::Store;
use serde_json::{Value, json};

/// URI prefix of a saga.
pub const SAGA_PREFIX: &str = "capsaga://sagas/";
/// URI prefix of a trace.
pub const TRACE_PREFIX: &str = "capsaga://traces/";
/// How many sagas `resources/list` names.
pub const LISTED_SAGAS: usize = 50;
/// Most completion values returned.
pub const MAX_COMPLETIONS: usize = 100;

/// The URI of saga `id`.
pub fn saga_uri(id: &str) -> String {
    format!("{SAGA_PREFIX}{id}")
}

/// `resources/list` entries: the newest sagas `who` may see.
///
/// # Errors
/// The store's, as text.
pub async fn list(store: &dyn Store, who: &Principal) -> Result<Vec<Value>, String> {
    let rows = views::sagas(store, who, LISTED_SAGAS)
        .await
        .map_err(|e| e.to_string())?;
    Ok(rows
        .iter()
        .map(|r| {
            json!({
                "uri": saga_uri(&r.saga_id),
                "name": format!("saga {}", r.saga_id),
                "title": format!("{} saga, {}", r.origin, r.state),
                "description": format!(
                    "{} saga ({}), updated {}: {}",
                    r.origin,
                    r.state,
                    r.updated_at,
                    r.label.chars().take(200).collect::<String>()
                ),
                "mimeType": "application/json",
            })
        })
        .collect())
}

/// `resources/templates/list` entries.
pub fn templates() -> Vec<Value> {
    vec![
        json!({
            "uriTemplate": format!("{SAGA_PREFIX}{{id}}"),
            "name": "saga",
            "title": "A saga",
            "description": "A saga of this capsaga host: its state, steps and write-ahead log records (JSON).",
            "mimeType": "application/json",
        }),
        json!({
            "uriTemplate": format!("{TRACE_PREFIX}{{id}}"),
            "name": "trace",
            "title": "An execution trace",
            "description": "An agent turn's execution trace: thoughts, actions, results, critic (JSON).",
            "mimeType": "application/json",
        }),
    ]
}

/// Whether `uri` is one of ours.
pub fn owns(uri: &str) -> bool {
    uri.starts_with(SAGA_PREFIX) || uri.starts_with(TRACE_PREFIX)
}

/// `resources/read` contents for `uri`: `Ok(None)` when there is no such
/// saga or trace `who` may see.
///
/// # Errors
/// The store's, as text.
pub async fn read(store: &dyn Store, uri: &str, who: &Principal) -> Result<Option<Value>, String> {
    let found = if let Some(id) = uri.strip_prefix(SAGA_PREFIX) {
        views::saga(store, id, who).await
    } else if let Some(id) = uri.strip_prefix(TRACE_PREFIX) {
        views::trace(store, id, who).await
    } else {
        return Ok(None);
    };
    let Some(v) = found.map_err(|e| e.to_string())? else {
        return Ok(None);
    };
    let text = serde_json::to_string_pretty(&v).map_err(|e| e.to_string())?;
    Ok(Some(json!({
        "contents": [{"uri": uri, "mimeType": "application/json", "text": text}]
    })))
}

/// Completion of a template's `id` argument: the ids of the sagas `who`
/// may see starting with `typed` (a trace id is the id of its turn's
/// saga's trace; only sagas are listed). `None` when `template` is not
/// ours.
///
/// # Errors
/// The store's, as text.
pub async fn complete(
    store: &dyn Store,
    template: &str,
    argument: &str,
    typed: &str,
    who: &Principal,
) -> Result<Option<Vec<String>>, String> {
    if argument != "id" || !template.starts_with(SAGA_PREFIX) {
        return Ok(if owns(template) {
            Some(Vec::new())
        } else {
            None
        });
    }
    if !typed.is_empty() && !views::valid_id(typed) {
        return Ok(Some(Vec::new()));
    }
    if let Some(me) = who.saga_filter() {
        // A client completes among its own sagas only.
        let own = store
            .sagas_of(me, 10_000)
            .await
            .map_err(|e| e.to_string())?;
        let mut ids: Vec<String> = own
            .into_iter()
            .map(|r| r.saga_id)
            .filter(|id| id.starts_with(typed))
            .collect();
        ids.sort();
        ids.truncate(MAX_COMPLETIONS);
        return Ok(Some(ids));
    }
    store
        .saga_ids_starting(typed, MAX_COMPLETIONS)
        .await
        .map(Some)
        .map_err(|e| e.to_string())
}
