//! The runtime HTTP API (seed 003), over the same door as every other
//! entry point:
//!
//! | route | what |
//! |---|---|
//! | `GET /healthz` | `status` ok/degraded, `mode` live/simulation, `provider`, `configured_providers`, `default_provider`, `reload` (`checks` of the policy and tools directory, `generation` now serving, reloads `refused`), `sessions` (live, busy, caps), `switch` (the kill switch's mode) (no token needed) |
//! | `POST /v1/turns` | one agent turn (`task`, `role`, `autonomy`, `allowed_providers`, `preferred_providers`, `max_steps`, `approval_wait_s`): its outcome, trace, whether its answer was written after untrusted data (`after_untrusted`) and its plan's tool scope |
//! | `GET /v1/sagas` | the newest sagas (`?limit=`) |
//! | `GET /v1/sagas/{id}` | one saga, its steps and its log records |
//! | `GET /v1/traces/{id}` | one execution trace |
//! | `GET /v1/approvals` | pending approvals (`?all=true`: every one); operator |
//! | `POST /v1/approvals/{id}/approve`, `/deny` | an operator's decision (`note`), recorded under the token's principal |
//! | `GET/POST /v1/pause`, `POST /v1/resume`, `/v1/keys` | the operator's routes ([`super::operator`]) |
//! | `/v1/memory/proposals...` | fact proposals and their decisions; operator (`rest_memory.rs`) |
//!
//! Every route but `/healthz` needs a token ([`super::auth`]); a client
//! token sees only the sagas and traces it started (another's is 404, as
//! if it did not exist) and gets 403 on the operator's routes.
//!
//! A turn's `session_id` continues a session: with `[memory] enabled` its
//! earlier turns are in the prompt. Its sender (the key of episodic memory
//! and of sessions) is the authenticated principal's name, never a name in
//! the body: a client reads and writes only its own memory.
//!
//! Errors are `{"detail": {"code": ..., "message": ...}}`; a turn no
//! allowed provider can answer is 422 with the seed's `no_allowed_provider`
//! detail (`providers_tried`, `allowed_providers`, `configured_providers`),
//! and nothing is sent to any provider.

use axum::Json;
use axum::extract::{Extension, Path, Query, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use capsaga_agent::router::RequestRoute;
use capsaga_agent::runner::{TurnOptions, run_turn};
use capsaga_agent::select::{Selection, process_env, select};
use capsaga_core::policy::Autonomy;
use capsaga_core::principal::Principal;
use capsaga_door::dispatch::OperatorError;
use capsaga_store::ApprovalOpError;
use serde::Deserialize;
use serde_json::{Value, json};
use std::path::PathBuf;
use std::sync::Arc;

/// What the REST handlers share.
#[derive(Debug)]
pub struct Rest {
    /// The host served, reloaded while the server runs.
    pub live: Arc<super::live::Live>,
    /// The script of simulated turns (`--script`), if given.
    pub script: Option<PathBuf>,
    /// The MCP sessions (their count is in `/healthz`).
    pub sessions: Arc<super::sessions::Sessions>,
}

use super::auth::detail;

fn internal(e: impl std::fmt::Display) -> Response {
    detail(StatusCode::INTERNAL_SERVER_ERROR, "internal", e.to_string())
}

/// `GET /healthz`: also the live MCP sessions (`sessions.live`, the caps)
/// and the kill switch's mode (`switch`).
pub async fn healthz(State(r): State<Arc<Rest>>) -> Response {
    let host = r.live.host();
    let config = &host.config;
    let (live, busy) = r.sessions.counts();
    let caps = r.sessions.caps();
    let sessions = json!({
        "live": live,
        "busy": busy,
        "max": caps.max_total,
        "max_per_principal": caps.max_per_principal,
    });
    let switch = match host.switch.current().await {
        Ok(sw) => json!(sw.mode),
        Err(_) => json!("unknown"),
    };
    let sel = Selection {
        script: r.script.clone(),
        route: RequestRoute::default(),
        ..Selection::default()
    };
    let sel = match capsaga_agent::keys::with_sealed(&host, sel).await {
        Ok(s) => s,
        Err(e) => return internal(e),
    };
    let body = match select(config, &process_env(), &sel) {
        Ok(s) if s.scripted => json!({
            "status": "ok",
            "mode": "simulation",
            "provider": "scripted",
            "configured_providers": s.router.as_ref().map(|r| r.configured()).unwrap_or_default(),
            "default_provider": "scripted",
            "detail": s.mode,
        }),
        Ok(s) => {
            let configured = s
                .router
                .as_ref()
                .map(|r| r.configured())
                .unwrap_or_default();
            let first = s
                .router
                .as_ref()
                .and_then(|r| r.order(None).ok())
                .and_then(|o| o.into_iter().next());
            json!({
                "status": "ok",
                "mode": "live",
                "provider": first,
                "configured_providers": configured,
                "default_provider": first,
                "detail": s.mode,
            })
        }
        Err(e) => json!({
            "status": "degraded",
            "mode": "simulation",
            "provider": null,
            "configured_providers": [],
            "default_provider": null,
            "warning": e.to_string(),
        }),
    };
    let mut body = body;
    body["reload"] = json!(r.live.stats());
    body["sessions"] = sessions;
    body["switch"] = switch;
    let (cluster, degraded) = super::cluster::health(&r.live).await;
    if let (Some(b), Value::Object(c)) = (body.as_object_mut(), cluster) {
        b.extend(c);
        if degraded {
            b.insert("status".into(), json!("degraded"));
        }
    }
    Json(body).into_response()
}

/// The body of `POST /v1/turns`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TurnRequest {
    /// The task.
    pub task: String,
    /// The agent's role (selects a provider order).
    #[serde(default)]
    pub role: Option<String>,
    /// `read_only`, `supervised` or `autonomous` (never above the
    /// operator's).
    #[serde(default)]
    pub autonomy: Option<String>,
    /// The request's allowlist (`["none"]`: nothing allowed).
    #[serde(default)]
    pub allowed_providers: Option<Vec<String>>,
    /// Providers to try first.
    #[serde(default)]
    pub preferred_providers: Vec<String>,
    /// Most model calls.
    #[serde(default)]
    pub max_steps: Option<usize>,
    /// A session id kept in the trace.
    #[serde(default)]
    pub session_id: Option<String>,
    /// Whether the first model call must call a tool: `auto`, `required`,
    /// `none` or `tool:NAME` (default: the policy's).
    #[serde(default)]
    pub tool_choice: Option<capsaga_core::policy::tool_choice::ToolChoice>,
    /// Seconds the turn waits, when a call needs a human, for an operator
    /// to decide it (`POST /v1/approvals/{id}/approve|deny`), at most 600;
    /// only a caller that is an operator may wait (default 0: the turn ends
    /// and the approval stays pending).
    #[serde(default)]
    pub approval_wait_s: Option<u64>,
}

fn lower(v: &[String]) -> Vec<String> {
    v.iter().map(|p| p.trim().to_ascii_lowercase()).collect()
}

/// The turn request's task, autonomy and role checked: the autonomy
/// asked, or the 400 answer.
fn checked(req: &TurnRequest) -> Result<Option<Autonomy>, Box<Response>> {
    if req.task.trim().is_empty() || req.task.len() > 64 * 1024 {
        return Err(Box::new(detail(
            StatusCode::BAD_REQUEST,
            "invalid_task",
            "task must be 1 to 65536 bytes",
        )));
    }
    let autonomy = match req
        .autonomy
        .as_deref()
        .map(str::parse::<Autonomy>)
        .transpose()
    {
        Ok(a) => a,
        Err(e) => {
            return Err(Box::new(detail(
                StatusCode::BAD_REQUEST,
                "invalid_autonomy",
                e,
            )));
        }
    };
    if let Some(role) = &req.role
        && !capsaga_core::providers::is_role_name(role)
    {
        return Err(Box::new(detail(
            StatusCode::BAD_REQUEST,
            "invalid_role",
            "role: lower-case letters, digits and `_` only",
        )));
    }
    Ok(autonomy)
}

/// The answer to `POST /v1/turns` for a turn's result (`scripted`: the
/// provider was the scripted one).
fn turn_response(
    res: Result<capsaga_agent::trace::ExecutionTrace, capsaga_agent::runner::AgentError>,
    scripted: bool,
) -> Response {
    match res {
        Ok(tr) => Json(json!({
            "trace_id": tr.trace_id,
            "saga_id": tr.saga_id,
            "outcome": tr.outcome.as_str(),
            "saga_state": tr.saga_state.map(|s| s.to_string()),
            "final_response": tr.final_response,
            "cost_usd": tr.cost_usd,
            "prompt_tokens": tr.prompt_tokens,
            "response_tokens": tr.response_tokens,
            "wall_time_ms": tr.wall_time_ms,
            "after_untrusted": tr.after_untrusted,
            "scope": tr.scope,
            "mode": if scripted { "simulation" } else { "live" },
            "trace": tr,
        }))
        .into_response(),
        Err(
            e @ capsaga_agent::runner::AgentError::Memory(capsaga_memory::MemoryError::Invalid(_)),
        ) => detail(StatusCode::CONFLICT, "session", e.to_string()),
        Err(e @ capsaga_agent::runner::AgentError::Memory(_)) => {
            detail(StatusCode::SERVICE_UNAVAILABLE, "memory", e.to_string())
        }
        Err(e @ capsaga_agent::runner::AgentError::ToolChoiceNotOffered { .. }) => (
            StatusCode::UNPROCESSABLE_ENTITY,
            Json(json!({"detail": {"code": "tool_choice_not_offered", "message": e.to_string()}})),
        )
            .into_response(),
        Err(e) => internal(e),
    }
}

/// `POST /v1/turns`: a turn of the caller's principal (its saga is
/// recorded under it); 503 `paused` while the kill switch is on.
pub async fn turns(
    State(r): State<Arc<Rest>>,
    Extension(who): Extension<Principal>,
    super::admit::StrictJson(req): super::admit::StrictJson<TurnRequest>,
) -> Response {
    let autonomy = match checked(&req) {
        Ok(a) => a,
        Err(refused) => return *refused,
    };
    let allowed = req.allowed_providers.as_ref().map(|a| {
        let a = lower(a);
        if a.iter().any(|p| p == "none") {
            Vec::new()
        } else {
            a
        }
    });
    let sel = Selection {
        script: r.script.clone(),
        route: RequestRoute {
            preferred: lower(&req.preferred_providers),
            allowed,
        },
        ..Selection::default()
    };
    let host = r.live.host();
    let host = &host;
    match host.switch.current().await {
        Ok(sw) if !sw.mode.allows_turns() => {
            return detail(
                StatusCode::SERVICE_UNAVAILABLE,
                "paused",
                format!(
                    "capsaga is paused by the operator{}: no turn starts until it is resumed",
                    sw.note.map(|n| format!(" ({n})")).unwrap_or_default()
                ),
            );
        }
        Ok(_) => {}
        Err(e) => return internal(e),
    }
    let sel = match capsaga_agent::keys::with_sealed(host, sel).await {
        Ok(s) => s,
        Err(e) => return internal(e),
    };
    let selected = match select(&host.config, &process_env(), &sel) {
        Ok(s) => s,
        Err(e) => return detail(StatusCode::BAD_REQUEST, "provider_selection", e.to_string()),
    };
    if let Some(router) = &selected.router
        && let Err(capsaga_agent::provider::ProviderError::NoAllowedProvider(e)) =
            router.order(req.role.as_deref())
    {
        return (
            StatusCode::UNPROCESSABLE_ENTITY,
            Json(json!({"detail": {
                "code": "no_allowed_provider",
                "message": "No allowed model provider is configured for this request; nothing was sent.",
                "providers_tried": e.providers_tried,
                "allowed_providers": e.allowed,
                "configured_providers": e.configured,
            }})),
        )
            .into_response();
    }
    let opts = TurnOptions {
        max_steps: req.max_steps.unwrap_or(16).clamp(1, 64),
        session_id: req
            .session_id
            .filter(|s| s.len() <= 128 && !s.contains(char::is_control))
            .unwrap_or_else(|| uuid::Uuid::new_v4().to_string()),
        channel: "http".into(),
        autonomy,
        role: req.role.clone(),
        provider_mode: selected.mode.clone(),
        tool_choice: req.tool_choice.clone(),
        approver: match req.approval_wait_s.filter(|s| *s > 0) {
            Some(s) => Arc::new(capsaga_agent::approval::WaitForOperator {
                store: host.store.clone(),
                caller: who.clone(),
                wait: std::time::Duration::from_secs(s.min(600)),
            }),
            None => Arc::new(capsaga_door::dispatch::NoApprover),
        },
        principal: who,
        scope: capsaga_door::dispatch::Scope::RestTurn,
        ..TurnOptions::default()
    };
    turn_response(
        run_turn(host, selected.provider.as_ref(), &req.task, &opts).await,
        selected.scripted,
    )
}

/// `?limit=`.
#[derive(Debug, Deserialize)]
pub struct Limit {
    /// Most rows.
    #[serde(default)]
    pub limit: Option<usize>,
}

/// `GET /v1/sagas`: the newest sagas the caller may see (its own for a
/// client).
pub async fn sagas(
    State(r): State<Arc<Rest>>,
    Extension(who): Extension<Principal>,
    Query(q): Query<Limit>,
) -> Response {
    let host = r.live.host();
    let limit = q.limit.unwrap_or(50).clamp(1, 1000);
    match super::views::sagas(&*host.store, &who, limit).await {
        Ok(rows) => Json(json!({ "sagas": rows })).into_response(),
        Err(e) => internal(e),
    }
}

/// `GET /v1/sagas/{id}` (404 for a client when not its own).
pub async fn saga(
    State(r): State<Arc<Rest>>,
    Extension(who): Extension<Principal>,
    Path(id): Path<String>,
) -> Response {
    match super::views::saga(&*r.live.host().store, &id, &who).await {
        Ok(Some(v)) => Json(v).into_response(),
        Ok(None) => detail(StatusCode::NOT_FOUND, "not_found", "no such saga"),
        Err(e) => internal(e),
    }
}

/// `GET /v1/traces/{id}` (404 for a client when its saga is not its own).
pub async fn trace(
    State(r): State<Arc<Rest>>,
    Extension(who): Extension<Principal>,
    Path(id): Path<String>,
) -> Response {
    match super::views::trace(&*r.live.host().store, &id, &who).await {
        Ok(Some(v)) => Json(v).into_response(),
        Ok(None) => detail(StatusCode::NOT_FOUND, "not_found", "no such trace"),
        Err(e) => internal(e),
    }
}

/// `?all=`.
#[derive(Debug, Deserialize)]
pub struct All {
    /// Every approval, not only pending ones.
    #[serde(default)]
    pub all: bool,
}

/// `GET /v1/approvals`.
pub async fn approvals(State(r): State<Arc<Rest>>, Query(q): Query<All>) -> Response {
    match r.live.host().store.approvals(q.all).await {
        Ok(rows) => Json(json!({ "approvals": rows })).into_response(),
        Err(e) => internal(e),
    }
}

/// The body of a decision (optional).
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DecisionBody {
    /// Accepted for compatibility and ignored: the decision is recorded
    /// under the authenticated principal, never a name from the request.
    #[serde(default)]
    pub by: Option<String>,
    /// A note kept in the log.
    #[serde(default)]
    pub note: Option<String>,
}

/// `POST /v1/approvals/{id}/{approve|deny}` (operator): recorded under the
/// token's principal, e.g. `token:alice (operator)`.
pub async fn decide(
    State(r): State<Arc<Rest>>,
    Extension(who): Extension<Principal>,
    Path((id, verb)): Path<(String, String)>,
    super::admit::StrictJsonOrEmpty(body): super::admit::StrictJsonOrEmpty<DecisionBody>,
) -> Response {
    let approve = match verb.as_str() {
        "approve" => true,
        "deny" => false,
        _ => {
            return detail(
                StatusCode::NOT_FOUND,
                "not_found",
                "POST .../approve or .../deny",
            );
        }
    };
    let body = body.unwrap_or_default();
    let note: Option<String> = body.note.map(|n| n.chars().take(1000).collect());
    match r
        .live
        .door()
        .decide(&id, approve, &who, note.as_deref())
        .await
    {
        Ok(d) => Json(json!({
            "approval": d.approval,
            "resumable": d.resumable,
            "rolled_back": d.rollback.as_ref().map(|r| r.final_state.to_string()),
        }))
        .into_response(),
        Err(OperatorError::Approval(ApprovalOpError::NotFound(_))) => {
            detail(StatusCode::NOT_FOUND, "not_found", "no such approval")
        }
        Err(OperatorError::Approval(ApprovalOpError::Store(e))) => internal(e),
        Err(OperatorError::Approval(e)) => {
            detail(StatusCode::CONFLICT, "not_decidable", e.to_string())
        }
        Err(OperatorError::Forbidden(e)) => detail(StatusCode::FORBIDDEN, "forbidden", e),
        Err(e) => internal(e),
    }
}
