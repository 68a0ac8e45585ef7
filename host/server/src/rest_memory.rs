//! The memory's REST routes (seed 004, reflection under operator approval):
//!
//! | route | what |
//! |---|---|
//! | `GET /v1/memory/proposals` | fact proposals waiting for the operator (`?all=true`: every one) |
//! | `POST /v1/memory/proposals/{id}/approve`, `/discard` | the operator's decision |
//! | `POST /v1/memory/import` | past conversations imported (`capsaga memory import`'s sessions as a JSON array) |
//!
//! Both are operator routes (`serve/mod.rs` mounts them behind
//! `auth::require_operator`: a client token gets 403): a proposal's text
//! may come from any principal's episodes, and a decision changes what
//! every turn retrieves. The decision is recorded for the principal the
//! server authenticated (`token:alice (operator)`), never a name from the
//! request; a body, when sent, is admitted by the door's strict JSON rule
//! and must be `{}`.
//!
//! A proposal's text is untrusted until approved: it is served as data
//! (JSON), and it enters semantic memory only through `approve`.

use super::rest::Rest;
use axum::Json;
use axum::extract::{Extension, Path, Query, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use capsaga_core::principal::Principal;
use capsaga_memory::{Memory, MemoryError, Proposal};
use serde::Deserialize;
use serde_json::json;
use std::sync::Arc;

fn detail(status: StatusCode, code: &str, message: impl Into<String>) -> Response {
    (
        status,
        Json(json!({"detail": {"code": code, "message": message.into()}})),
    )
        .into_response()
}

fn memory_error(e: MemoryError) -> Response {
    match e {
        MemoryError::NotFound { .. } => detail(StatusCode::NOT_FOUND, "not_found", e.to_string()),
        MemoryError::Invalid(_) => detail(StatusCode::BAD_REQUEST, "invalid", e.to_string()),
        e => detail(StatusCode::INTERNAL_SERVER_ERROR, "memory", e.to_string()),
    }
}

fn off() -> Response {
    detail(
        StatusCode::NOT_FOUND,
        "memory_off",
        "memory is off on this server ([memory] enabled = false)",
    )
}

/// `?all=`.
#[derive(Debug, Deserialize)]
pub struct All {
    /// Every proposal, not only pending ones.
    #[serde(default)]
    pub all: bool,
}

/// The proposals of `memory`: pending ones, or every one when `all`
/// (what `GET /v1/memory/proposals` and the console list). Blocking.
///
/// # Errors
/// The memory store's.
pub fn list(memory: &Memory, all: bool) -> Result<Vec<Proposal>, MemoryError> {
    memory
        .store()
        .proposals(if all { None } else { Some("pending") })
}

/// The operator's decision on proposal `id`, recorded for `by` (what
/// `POST /v1/memory/proposals/{id}/approve|discard` and the console's
/// memory page run): `Ok(Ok(answer))` when it was pending and is now
/// approved (its fact in `answer`) or discarded, `Ok(Err(status))` when it
/// was already decided (nothing changes). Blocking.
///
/// # Errors
/// [`MemoryError::NotFound`] and the memory store's.
pub fn decide_one(
    memory: &Memory,
    id: &str,
    approve: bool,
    by: &str,
) -> Result<Result<serde_json::Value, String>, MemoryError> {
    let p = memory.store().proposal(id)?;
    if p.status != "pending" {
        return Ok(Err(p.status));
    }
    let ids = [id.to_string()];
    if approve {
        let facts = memory.approve(&ids, by)?;
        Ok(Ok(
            json!({"proposal": id, "status": "approved", "facts": facts}),
        ))
    } else {
        memory.discard(&ids, by)?;
        Ok(Ok(json!({"proposal": id, "status": "discarded"})))
    }
}

/// `GET /v1/memory/proposals`.
pub async fn proposals(State(r): State<Arc<Rest>>, Query(q): Query<All>) -> Response {
    let Some(hm) = r.live.host().memory.clone() else {
        return off();
    };
    match tokio::task::spawn_blocking(move || list(&hm.memory, q.all)).await {
        Ok(Ok(rows)) => Json(json!({ "proposals": rows })).into_response(),
        Ok(Err(e)) => memory_error(e),
        Err(e) => detail(StatusCode::INTERNAL_SERVER_ERROR, "internal", e.to_string()),
    }
}

/// The body of a decision, when one is sent: `{}` (no field is read; an
/// unknown one is refused).
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DecideBody {}

/// `POST /v1/memory/proposals/{id}/approve` or `/discard` (operator; no
/// body, or `{}`): recorded under the authenticated principal.
pub async fn decide(
    State(r): State<Arc<Rest>>,
    Extension(who): Extension<Principal>,
    Path((id, verb)): Path<(String, String)>,
    super::admit::StrictJsonOrEmpty(_body): super::admit::StrictJsonOrEmpty<DecideBody>,
) -> Response {
    // The router already refused a principal that may not decide; this is
    // the same check where the decision is made, so a route mounted
    // elsewhere by mistake cannot skip it.
    if !who.may(capsaga_core::principal::Action::DecideApproval) {
        return detail(
            StatusCode::FORBIDDEN,
            "forbidden",
            "deciding a memory proposal needs an operator token",
        );
    }
    let by = who.to_string();
    let approve = match verb.as_str() {
        "approve" => true,
        "discard" => false,
        _ => {
            return detail(
                StatusCode::NOT_FOUND,
                "not_found",
                "POST .../approve or .../discard",
            );
        }
    };
    let Some(hm) = r.live.host().memory.clone() else {
        return off();
    };
    let r = tokio::task::spawn_blocking(move || decide_one(&hm.memory, &id, approve, &by)).await;
    match r {
        Ok(Ok(Ok(v))) => Json(v).into_response(),
        Ok(Ok(Err(status))) => detail(
            StatusCode::CONFLICT,
            "already_decided",
            format!("the proposal is {status}: decided once"),
        ),
        Ok(Err(e)) => memory_error(e),
        Err(e) => detail(StatusCode::INTERNAL_SERVER_ERROR, "internal", e.to_string()),
    }
}

/// The body of `POST /v1/memory/import`: the sessions (each what one line
/// of `capsaga memory import`'s file holds), the namespace (default: the
/// memory's) and what a bad session does: `skip` (default; reported with
/// its position, from 1) or `refuse` (nothing imported).
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ImportBody {
    /// The sessions.
    pub sessions: Vec<serde_json::Value>,
    /// The namespace.
    #[serde(default)]
    pub namespace: Option<String>,
    /// `skip` or `refuse`.
    #[serde(default)]
    pub on_error: Option<String>,
}

/// `POST /v1/memory/import` (operator): the sessions of the body imported
/// as `capsaga memory import` does (idempotent; each session at its
/// position as its line number). 200 with the report; 422 with the bad
/// sessions when `on_error` is `refuse` and one is bad (nothing imported).
pub async fn import(
    State(r): State<Arc<Rest>>,
    Extension(who): Extension<Principal>,
    super::admit::StrictJson(body): super::admit::StrictJson<ImportBody>,
) -> Response {
    // The router refused a client already; checked again where it acts.
    if !who.may(capsaga_core::principal::Action::DecideApproval) {
        return detail(
            StatusCode::FORBIDDEN,
            "forbidden",
            "importing memory needs an operator token",
        );
    }
    let refuse = match body.on_error.as_deref() {
        None | Some("skip") => false,
        Some("refuse") => true,
        Some(o) => {
            return detail(
                StatusCode::BAD_REQUEST,
                "invalid",
                format!("on_error `{o}`: skip or refuse"),
            );
        }
    };
    let Some(hm) = r.live.host().memory.clone() else {
        return off();
    };
    let ns = body
        .namespace
        .unwrap_or_else(|| hm.memory.config().namespace.clone());
    let lines: String = body.sessions.iter().map(|v| format!("{v}\n")).collect();
    let done = tokio::task::spawn_blocking(move || {
        use capsaga_memory::transfer;
        if refuse {
            let checked = transfer::check(&mut lines.as_bytes())?;
            if checked.bad_lines > 0 {
                return Ok(Err(checked));
            }
        }
        hm.memory
            .import(&mut lines.as_bytes(), &ns, &mut |_| {})
            .map(Ok)
    })
    .await;
    match done {
        Ok(Ok(Ok(report))) => Json(json!({ "report": report })).into_response(),
        Ok(Ok(Err(checked))) => (
            StatusCode::UNPROCESSABLE_ENTITY,
            Json(json!({"detail": {"code": "bad_sessions", "message": format!("{} bad session(s): nothing was imported", checked.bad_lines)}, "bad": checked.bad})),
        )
            .into_response(),
        Ok(Err(e)) => memory_error(e),
        Err(e) => detail(StatusCode::INTERNAL_SERVER_ERROR, "internal", e.to_string()),
    }
}

/// The reflection schedule of `capsaga serve` (`[memory] reflect_every_s`):
/// every period, retention then a reflection over the memory's namespace
/// with the server's model (the scripted one under `--script`), its
/// proposals queued for the operator. Stops when the server is dropped.
pub async fn reflect_every(rest: std::sync::Weak<Rest>, every: std::time::Duration) {
    let mut tick = tokio::time::interval(every);
    tick.tick().await;
    loop {
        tick.tick().await;
        let Some(r) = rest.upgrade() else { return };
        let host = r.live.host();
        let Some(hm) = host.memory.clone() else {
            return;
        };
        let sel = capsaga_agent::select::Selection {
            script: r.script.clone(),
            ..Default::default()
        };
        let sel = match capsaga_agent::keys::with_sealed(&host, sel).await {
            Ok(s) => s,
            Err(e) => {
                tracing::warn!("memory reflection skipped: {e}");
                continue;
            }
        };
        let selected = match capsaga_agent::select::select(
            &host.config,
            &capsaga_agent::select::process_env(),
            &sel,
        ) {
            Ok(s) => s,
            Err(e) => {
                tracing::warn!("memory reflection skipped: {e}");
                continue;
            }
        };
        let h = hm.clone();
        match tokio::task::spawn_blocking(move || h.memory.retention(jiff::Timestamp::now())).await
        {
            Ok(Ok(ids)) if !ids.is_empty() => {
                tracing::info!("memory retention archived {} episode(s)", ids.len())
            }
            Ok(Err(e)) => tracing::warn!("memory retention failed: {e}"),
            _ => {}
        }
        let ns = hm.memory.config().namespace.clone();
        let budget = match capsaga_agent::budget::Budget::open(&host.config, host.store.clone()) {
            Ok(b) => b,
            Err(e) => {
                tracing::warn!("memory reflection skipped: {e}");
                continue;
            }
        };
        let meter = capsaga_agent::meter::Meter::new(&budget);
        match capsaga_agent::reflect::reflect(&hm, selected.provider.as_ref(), &meter, &ns, 2).await
        {
            Ok(r) => tracing::info!(
                "memory reflection: {} group(s), {} proposal(s) queued",
                r.clusters,
                r.proposals.len()
            ),
            Err(e) => tracing::warn!("memory reflection failed: {e}"),
        }
    }
}
