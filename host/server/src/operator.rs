//! The operator's REST routes (an operator token: a client gets 403 from
//! `super::auth::require_operator` before these run):
//!
//! | route | what |
//! |---|---|
//! | `GET /v1/pause` | the kill switch: `{"mode", "by", "at", "note"}` |
//! | `POST /v1/pause` | `{"mode": "paused" \| "read_only", "note"?}` (default `paused`): stops new turns and calls (read-only: those with side effects) and aborts the running ones, in every process on the state |
//! | `POST /v1/resume` | back to `running` (`{"note"?}`) |
//! | `GET /v1/keys` | sealed provider keys: name, last four characters, KEK id, who added it when |
//! | `PUT /v1/keys/{name}` | `{"key": "..."}`: seal it under the server's `CAPSAGA_KEK` and store it; the answer shows only its last four characters |
//! | `DELETE /v1/keys/{name}` | remove it |
//!
//! Every change is recorded under the token's principal and appended to
//! the hash-chained log; no answer and no log line ever holds a key.

use super::auth::detail;
use super::rest::Rest;
use axum::Json;
use axum::extract::{Extension, Path, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use capsaga_agent::keys::{self, KeyError};
use capsaga_core::pause::Mode;
use capsaga_core::principal::Principal;
use capsaga_secrets::sealed::SealError;
use serde::Deserialize;
use serde_json::json;
use std::sync::Arc;
use zeroize::Zeroizing;

fn internal(e: impl std::fmt::Display) -> Response {
    detail(StatusCode::INTERNAL_SERVER_ERROR, "internal", e.to_string())
}

/// `GET /v1/pause`.
pub async fn switch(State(r): State<Arc<Rest>>) -> Response {
    match r.live.host().switch.current().await {
        Ok(sw) => Json(sw).into_response(),
        Err(e) => internal(e),
    }
}

/// The body of `POST /v1/pause`.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PauseBody {
    /// `paused` (default) or `read_only`.
    #[serde(default)]
    pub mode: Option<Mode>,
    /// Why (kept in the log, shown to the model in the refusal).
    #[serde(default)]
    pub note: Option<String>,
}

fn note(n: Option<String>) -> Option<String> {
    n.map(|n| n.chars().filter(|c| !c.is_control()).take(500).collect())
}

/// `POST /v1/pause`.
pub async fn pause(
    State(r): State<Arc<Rest>>,
    Extension(who): Extension<Principal>,
    super::admit::StrictJsonOrEmpty(body): super::admit::StrictJsonOrEmpty<PauseBody>,
) -> Response {
    let body = body.unwrap_or_default();
    let mode = body.mode.unwrap_or(Mode::Paused);
    if mode == Mode::Running {
        return detail(
            StatusCode::BAD_REQUEST,
            "invalid_mode",
            "POST /v1/pause takes `paused` or `read_only`; use POST /v1/resume to run again",
        );
    }
    set(&r, mode, &who, note(body.note)).await
}

/// The body of `POST /v1/resume`.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ResumeBody {
    /// Why.
    #[serde(default)]
    pub note: Option<String>,
}

/// `POST /v1/resume`.
pub async fn resume(
    State(r): State<Arc<Rest>>,
    Extension(who): Extension<Principal>,
    super::admit::StrictJsonOrEmpty(body): super::admit::StrictJsonOrEmpty<ResumeBody>,
) -> Response {
    let body = body.unwrap_or_default();
    set(&r, Mode::Running, &who, note(body.note)).await
}

async fn set(r: &Rest, mode: Mode, who: &Principal, note: Option<String>) -> Response {
    match r.live.host().switch.set(mode, who, note.as_deref()).await {
        Ok(sw) => Json(sw).into_response(),
        Err(e) => internal(e),
    }
}

/// `GET /v1/keys`.
pub async fn keys(State(r): State<Arc<Rest>>) -> Response {
    match r.live.host().store.keys().await {
        Ok(rows) => Json(json!({ "keys": rows })).into_response(),
        Err(e) => internal(e),
    }
}

/// The body of `PUT /v1/keys/{name}`. Its `Debug` hides the key.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct KeyBody {
    /// The provider key, in clear over this request only.
    pub key: Zeroizing<String>,
}

impl std::fmt::Debug for KeyBody {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("KeyBody(***)")
    }
}

/// `PUT /v1/keys/{name}`.
pub async fn put_key(
    State(r): State<Arc<Rest>>,
    Extension(who): Extension<Principal>,
    Path(name): Path<String>,
    super::admit::StrictJson(body): super::admit::StrictJson<KeyBody>,
) -> Response {
    let kek = match keys::kek_from_env() {
        Ok(k) => k,
        Err(e) => return detail(StatusCode::SERVICE_UNAVAILABLE, "no_kek", e.to_string()),
    };
    let host = r.live.host();
    match keys::seal_and_store(&*host.store, &kek, &name, &body.key, &who).await {
        Ok(row) => Json(json!({ "key": row })).into_response(),
        Err(KeyError::Seal(e @ (SealError::BadName(_) | SealError::BadSecret(_)))) => {
            detail(StatusCode::BAD_REQUEST, "invalid_key", e.to_string())
        }
        Err(e) => internal(e),
    }
}

/// `DELETE /v1/keys/{name}`.
pub async fn remove_key(
    State(r): State<Arc<Rest>>,
    Extension(who): Extension<Principal>,
    Path(name): Path<String>,
) -> Response {
    match r
        .live
        .host()
        .store
        .remove_key(&name, &who.to_string())
        .await
    {
        Ok(true) => Json(json!({ "removed": name })).into_response(),
        Ok(false) => detail(StatusCode::NOT_FOUND, "not_found", "no such key"),
        Err(e) => internal(e),
    }
}

/// `GET /metrics` (issue 30; operator token): the process's metrics in the
/// OpenMetrics text format Prometheus scrapes
/// (`capsaga_telemetry::metrics`), the approvals gauge read from the
/// store and the sessions gauge from the session table at each scrape.
pub async fn metrics(State(r): State<Arc<Rest>>) -> Response {
    if let Err(e) = set_gauges(&r).await {
        return internal(e);
    }
    let m = capsaga_telemetry::metrics::global();
    (
        [(
            axum::http::header::CONTENT_TYPE,
            "application/openmetrics-text; version=1.0.0; charset=utf-8",
        )],
        m.encode(),
    )
        .into_response()
}

/// Read the approvals pending (from the store) and the open sessions into
/// the metrics' gauges.
async fn set_gauges(r: &Rest) -> Result<(), capsaga_store::StoreError> {
    let pending = r.live.host().store.approvals(false).await?;
    let (sessions, _) = r.sessions.counts();
    capsaga_telemetry::metrics::global().set_gauges(
        i64::try_from(pending.len()).unwrap_or(i64::MAX),
        i64::try_from(sessions).unwrap_or(i64::MAX),
    );
    Ok(())
}

/// While the metrics are pushed over OTLP, set the gauges every `every`
/// (nobody may scrape `GET /metrics`), until the server is gone.
pub async fn gauges_every(rest: std::sync::Weak<Rest>, every: std::time::Duration) {
    let mut tick = tokio::time::interval(every);
    loop {
        tick.tick().await;
        let Some(r) = rest.upgrade() else { return };
        if let Err(e) = set_gauges(&r).await {
            tracing::warn!("metrics gauges: {e}");
        }
    }
}
