//! The operator console at `/console` (issue 29): the runtime's side of
//! `capsaga_console::Backend`. Sign-in goes through the server's own
//! [`Auth`] (the same tokens as the API; a client token is refused), every
//! list comes from the store, and every action through the one dispatch
//! door under the signed-in operator's principal: an approval decided here
//! is `Dispatcher::decide` (then `plan::resume` for a parked plan), a
//! rollback is `recover`, an undo `undo`, exactly what `capsaga approve
//! --resume`, `rollback` and `undo` run. The pages, sessions and CSRF
//! checks are the console crate's.

use super::auth::Auth;
use super::rest::Rest;
use async_trait::async_trait;
use axum::http::{HeaderMap, HeaderValue, header};
use capsaga_console::{
    ApprovalView, Backend, BackendError, Decided, HealthView, HostView, LogView, NeuronAction,
    NeuronView, PageReq, Paged, ProposalView, SagaAction, SagaDetail, SagaFilter, SagaView, SignIn,
    StepView, TraceStepView, TraceView,
};
use capsaga_core::approval::ApprovalStatus;
use capsaga_core::neuron::Status;
use capsaga_core::principal::{Principal, Role};
use capsaga_door::dispatch::{Act, DispatchError, OperatorError, Via};
use capsaga_door::registry::Registry;
use capsaga_store::{ApprovalOpError, ApprovalRow, SagaQuery, SagaRow, StepRow};
use serde_json::Value;
use std::sync::Arc;

/// The console's data and actions over a running server.
pub struct ConsoleBackend {
    /// The REST state (the live host, `/healthz`'s inputs).
    pub rest: Arc<Rest>,
    /// The server's credentials.
    pub auth: Arc<Auth>,
}

/// The console's router over `rest` and `auth`, mounted at `/console`;
/// every answer scrubbed of the host's secrets (`super::scrubbed`).
pub fn router(rest: Arc<Rest>, auth: Arc<Auth>) -> axum::Router {
    capsaga_console::router(Arc::new(ConsoleBackend { rest, auth }))
        .layer(axum::middleware::from_fn(super::scrubbed::responses))
}

fn internal(e: impl std::fmt::Display) -> BackendError {
    BackendError::Internal(e.to_string())
}

fn pretty(v: &Value) -> String {
    serde_json::to_string_pretty(v).unwrap_or_else(|_| v.to_string())
}

/// Seconds from RFC 3339 `at` to now (0 when it does not parse).
fn age_s(at: &str) -> u64 {
    at.parse::<jiff::Timestamp>()
        .ok()
        .and_then(|t| u64::try_from(jiff::Timestamp::now().duration_since(t).as_secs()).ok())
        .unwrap_or(0)
}

/// Milliseconds from `a` to `b` (RFC 3339), when both parse.
fn between_ms(a: &str, b: &str) -> Option<u64> {
    let a = a.parse::<jiff::Timestamp>().ok()?;
    let b = b.parse::<jiff::Timestamp>().ok()?;
    u64::try_from(b.duration_since(a).as_millis()).ok()
}

/// The first string field named like a diff anywhere in a dry-run output.
fn find_diff(v: &Value) -> Option<String> {
    match v {
        Value::Object(m) => m.iter().find_map(|(k, v)| match v {
            Value::String(s) if k.contains("diff") => Some(s.clone()),
            other => find_diff(other),
        }),
        Value::Array(a) => a.iter().find_map(find_diff),
        _ => None,
    }
}

/// The page `page` of `rows` (in their order) as the console shows them.
/// A page of approvals as views; `registry` gives each tool's declared risk.
fn paged(mut rows: Vec<ApprovalRow>, page: PageReq, registry: &Registry) -> Paged<ApprovalView> {
    let total = rows.len() as u64;
    let start = usize::try_from(page.offset)
        .unwrap_or(usize::MAX)
        .min(rows.len());
    let end = start
        .saturating_add(usize::try_from(page.limit).unwrap_or(usize::MAX))
        .min(rows.len());
    let more = end < rows.len();
    let rows = rows
        .drain(start..end)
        .map(|a| {
            let risk = registry
                .get(&a.binding.tool_id)
                .filter(|t| t.hash == a.binding.tool_hash)
                .map(|t| t.meta.risk.as_str().to_string());
            approval_view(a, risk)
        })
        .collect();
    Paged { rows, total, more }
}

fn approval_view(a: ApprovalRow, risk: Option<String>) -> ApprovalView {
    ApprovalView {
        risk,
        age_s: age_s(&a.created_at),
        diff: super::console_data::fs_write_diff(&a.binding.tool_id, &a.args, a.preview.as_ref())
            .or_else(|| a.preview.as_ref().and_then(find_diff)),
        essentials: super::console_data::request_essentials(
            &a.binding.tool_id,
            &a.args,
            a.preview.as_ref(),
        ),
        preview: a.preview.as_ref().map(pretty),
        args: pretty(&a.args),
        id: a.approval_id,
        saga_id: a.saga_id,
        step_seq: a.step_seq,
        tool: a.binding.tool_id,
        tool_hash: a.binding.tool_hash,
        reason: a.reason,
        summary: a.summary,
        status: a.status.as_str().to_string(),
        created_at: a.created_at,
        expires_at: a.expires_at,
        replaces: a.replaces,
        decided_by: a.decided_by,
        decided_at: a.decided_at,
        note: a.note,
        flow: Vec::new(),
    }
}

/// `page` with what information flow found in each call asked about for
/// it (`approval information flow: ...`), through the door.
async fn with_findings(
    door: &capsaga_door::dispatch::Dispatcher,
    rows: &[ApprovalRow],
    mut page: Paged<ApprovalView>,
) -> Result<Paged<ApprovalView>, BackendError> {
    for v in &mut page.rows {
        if !v.reason.starts_with("information flow:") {
            continue;
        }
        let Some(row) = rows.iter().find(|r| r.approval_id == v.id) else {
            continue;
        };
        let found = door.approval_findings(row).await.map_err(internal)?;
        v.flow = found
            .iter()
            .map(|f| super::console_flow::finding(f, &v.saga_id))
            .collect();
    }
    Ok(page)
}

/// The store's kind, this host's policy hash, and the live hosts sharing
/// the store (this one first; listed even when the store cannot say).
async fn host_views(host: &capsaga_door::host::Host) -> (String, String, Vec<HostView>) {
    let me = host.owner.id().to_string();
    let mine = host.config.policy_sha256.clone();
    let mut hosts: Vec<HostView> = match host.store.live_owners().await {
        Ok(rows) => rows
            .into_iter()
            .map(|o| HostView {
                this: o.owner_id == me,
                id: o.owner_id,
                policy_sha256: o.policy_sha256,
                started_at: o.started_at,
            })
            .collect(),
        Err(e) => {
            tracing::warn!("the console cannot list the hosts: {e}");
            Vec::new()
        }
    };
    if !hosts.iter().any(|h| h.this) {
        hosts.push(HostView {
            id: me,
            policy_sha256: Some(mine.clone()),
            started_at: String::new(),
            this: true,
        });
    }
    hosts.sort_by_key(|h| (!h.this, h.started_at.clone()));
    let store = if host.config.store.shared() {
        "postgres"
    } else {
        "sqlite"
    };
    (store.to_string(), mine, hosts)
}

fn saga_view(r: SagaRow) -> SagaView {
    SagaView {
        id: r.saga_id,
        state: r.state.to_string(),
        origin: r.origin,
        label: r.label,
        principal: r.principal,
        created_at: r.created_at,
        updated_at: r.updated_at,
    }
}

fn step_view(s: StepRow) -> StepView {
    let result = s.output.as_ref().or(s.error.as_ref()).map(pretty);
    StepView {
        seq: s.step_seq,
        tool: s.tool_id,
        tool_hash: s.tool_hash,
        grants: s.grants,
        status: s.status.as_str().to_string(),
        args: pretty(&s.args),
        result,
        duration_ms: between_ms(&s.created_at, &s.updated_at),
        label: super::console_flow::step_label(s.label.as_ref()),
        created_at: s.created_at,
        updated_at: s.updated_at,
    }
}

fn operator(name: &str) -> Principal {
    Principal::new(name, Role::Operator)
}

fn dispatch_error(e: DispatchError) -> BackendError {
    match e {
        DispatchError::NotFound(id) => BackendError::NotFound(format!("saga {id}")),
        DispatchError::Transition(t) => BackendError::Conflict(t.to_string()),
        other => BackendError::Conflict(other.to_string()),
    }
}

impl ConsoleBackend {
    /// The operator `name`, refused unless still one.
    async fn acting(&self, name: &str) -> Result<Principal, BackendError> {
        if self.auth.is_operator(name).await {
            Ok(operator(name))
        } else {
            Err(BackendError::Forbidden(format!(
                "{name} is no longer an operator"
            )))
        }
    }
}

#[async_trait]
impl Backend for ConsoleBackend {
    async fn sign_in(&self, token: &str) -> Result<SignIn, BackendError> {
        let mut h = HeaderMap::new();
        if !token.is_empty() {
            let v = HeaderValue::from_str(&format!("Bearer {token}"))
                .map_err(|_| BackendError::Unauthorized)?;
            h.insert(header::AUTHORIZATION, v);
        }
        match self.auth.authenticate(&h).await {
            Ok(p) if p.role == Role::Operator => Ok(SignIn::Operator(p.name)),
            Ok(p) => Ok(SignIn::Client(p.name)),
            Err(super::auth::Refused::Unauthorized) => Err(BackendError::Unauthorized),
            Err(super::auth::Refused::Store(e)) => Err(BackendError::Internal(e)),
        }
    }

    async fn still_operator(&self, operator: &str) -> bool {
        self.auth.is_operator(operator).await
    }

    async fn approvals(&self, page: PageReq) -> Result<Paged<ApprovalView>, BackendError> {
        let host = self.rest.live.host();
        let mut rows = host.store.approvals(false).await.map_err(internal)?;
        rows.sort_by(|a, b| a.created_at.cmp(&b.created_at));
        let view = paged(rows.clone(), page, &host.registry);
        with_findings(&self.rest.live.door(), &rows, view).await
    }

    async fn decided_approvals(&self, page: PageReq) -> Result<Paged<ApprovalView>, BackendError> {
        let host = self.rest.live.host();
        let mut rows = host.store.approvals(true).await.map_err(internal)?;
        rows.retain(|a| a.status != ApprovalStatus::Pending);
        let when = |a: &ApprovalRow| a.decided_at.clone().unwrap_or_else(|| a.created_at.clone());
        rows.sort_by_key(|a| std::cmp::Reverse(when(a)));
        Ok(paged(rows, page, &host.registry))
    }

    async fn pending_count(&self) -> Result<u64, BackendError> {
        let host = self.rest.live.host();
        let rows = host.store.approvals(false).await.map_err(internal)?;
        Ok(rows.len() as u64)
    }

    async fn decide(
        &self,
        operator: &str,
        id: &str,
        approve: bool,
        note: Option<&str>,
    ) -> Result<Decided, BackendError> {
        let who = self.acting(operator).await?;
        let door = self.rest.live.door();
        let d = match door.decide(id, approve, &who, note).await {
            Ok(d) => d,
            Err(OperatorError::Approval(ApprovalOpError::NotFound(_))) => {
                return Err(BackendError::NotFound(format!("approval {id}")));
            }
            Err(OperatorError::Approval(ApprovalOpError::Store(e))) => return Err(internal(e)),
            Err(OperatorError::Approval(e)) => return Err(BackendError::Conflict(e.to_string())),
            Err(OperatorError::Forbidden(e)) => return Err(BackendError::Forbidden(e)),
            Err(e) => return Err(internal(e)),
        };
        let saga = d.approval.saga_id.clone();
        let message = if approve && d.resumable {
            match capsaga_door::plan::resume_as(&door, &saga, &who).await {
                Ok(r) => format!(
                    "Approved by {operator}; saga {saga} resumed: {}",
                    r.final_state
                ),
                Err(e) => format!("Approved by {operator}; resuming saga {saga} failed: {e}"),
            }
        } else if approve {
            format!("Approved by {operator}; the turn that asked claims it when it runs the call")
        } else {
            match &d.rollback {
                Some(r) => format!(
                    "Denied by {operator}; saga {saga} rolled back: {}",
                    r.final_state
                ),
                None => format!("Denied by {operator}"),
            }
        };
        Ok(Decided { message })
    }

    async fn sagas(
        &self,
        filter: &SagaFilter,
        page: PageReq,
    ) -> Result<Paged<SagaView>, BackendError> {
        let q = SagaQuery {
            state: filter.state.clone(),
            principal: filter.principal.clone(),
            tool: filter.tool.clone(),
            since: filter.since.clone(),
        };
        let host = self.rest.live.host();
        let offset = usize::try_from(page.offset).unwrap_or(usize::MAX);
        let limit = usize::try_from(page.limit).unwrap_or(50);
        let (rows, more) = host
            .store
            .saga_page(&q, offset, limit)
            .await
            .map_err(internal)?;
        Ok(Paged {
            total: page.offset + rows.len() as u64,
            rows: rows.into_iter().map(saga_view).collect(),
            more,
        })
    }

    async fn saga(&self, id: &str) -> Result<Option<SagaDetail>, BackendError> {
        if !super::views::valid_id(id) {
            return Ok(None);
        }
        let host = self.rest.live.host();
        let Some(row) = host.store.saga(id).await.map_err(internal)? else {
            return Ok(None);
        };
        let steps = host.store.steps(id).await.map_err(internal)?;
        let log = host.store.log(Some(id)).await.map_err(internal)?;
        let trace_id = host.store.trace_of_saga(id).await.map_err(internal)?;
        Ok(Some(SagaDetail {
            saga: saga_view(row),
            steps: steps.into_iter().map(step_view).collect(),
            log: log
                .into_iter()
                .map(|l| LogView {
                    seq: u64::try_from(l.seq).unwrap_or(0),
                    kind: l.record,
                    step_seq: l.step_seq,
                    at: l.at,
                    detail: l.detail.to_string(),
                })
                .collect(),
            trace_id,
        }))
    }

    async fn saga_action(
        &self,
        operator: &str,
        id: &str,
        action: SagaAction,
    ) -> Result<Decided, BackendError> {
        let who = self.acting(operator).await?;
        if !super::views::valid_id(id) {
            return Err(BackendError::NotFound(format!("saga {id}")));
        }
        let door = self.rest.live.door();
        // Through the door's one check (`dispatch::scope`): a saga a live
        // scope of this host holds (a session's, a request's, a task's, a
        // turn's) is refused as in use, as another host's is as busy.
        let message = match action {
            SagaAction::Resume => {
                let r = capsaga_door::plan::resume_as(&door, id, &who)
                    .await
                    .map_err(|e| BackendError::Conflict(e.to_string()))?;
                format!("Resumed by {operator}: {}", r.final_state)
            }
            SagaAction::Rollback => {
                let (mut s, _hold) = door
                    .reopen(id, Via::Operator, Act::Rollback, &who)
                    .await
                    .map_err(dispatch_error)?;
                let r = door.recover(&mut s).await.map_err(dispatch_error)?;
                format!("Rolled back by {operator}: {}", r.final_state)
            }
            SagaAction::Undo => {
                let (mut s, _hold) = door
                    .reopen(id, Via::Operator, Act::Undo, &who)
                    .await
                    .map_err(dispatch_error)?;
                let r = door.undo(&mut s).await.map_err(dispatch_error)?;
                format!("Undone by {operator}: {}", r.final_state)
            }
        };
        Ok(Decided { message })
    }

    async fn trace(&self, id: &str) -> Result<Option<TraceView>, BackendError> {
        if !super::views::valid_id(id) {
            return Ok(None);
        }
        let host = self.rest.live.host();
        let Some(t) = capsaga_agent::trace::load(&*host.store, id)
            .await
            .map_err(internal)?
        else {
            return Ok(None);
        };
        let steps = t
            .steps
            .iter()
            .map(|s| {
                let v = serde_json::to_value(s).unwrap_or(Value::Null);
                TraceStepView {
                    kind: v["type"].as_str().unwrap_or("step").to_string(),
                    content: pretty(&v),
                }
            })
            .collect();
        Ok(Some(TraceView {
            id: t.trace_id,
            saga_id: t.saga_id,
            task: t.user_message,
            outcome: t.outcome.as_str().to_string(),
            final_response: t.final_response,
            after_untrusted: t.after_untrusted,
            prompt_tokens: t.prompt_tokens,
            response_tokens: t.response_tokens,
            cost_usd: t.cost_usd,
            steps,
        }))
    }

    async fn health(&self, days: u32) -> Result<HealthView, BackendError> {
        let host = self.rest.live.host();
        let today = capsaga_store::clock::today();
        let history = super::console_data::spend_history(&*host.store, &today, days).await?;
        let spent = history
            .iter()
            .find(|d| d.day == today)
            .map_or(0.0, |d| d.spent_usd);
        let caps = host.config.policy.budget.caps();
        let switch = match host.switch.current().await {
            Ok(sw) => serde_json::to_value(sw.mode)
                .ok()
                .and_then(|v| v.as_str().map(String::from))
                .unwrap_or_else(|| "unknown".into()),
            Err(e) => format!("unknown ({e})"),
        };
        let audit = match capsaga_store::audit::verify(&*host.store, None).await {
            Ok(r) if r.findings.is_empty() => format!("ok ({} records)", r.rows),
            Ok(r) => r
                .findings
                .iter()
                .map(|f| format!("{}: {}", f.check, f.reason))
                .collect::<Vec<_>>()
                .join("; "),
            Err(e) => format!("cannot be read: {e}"),
        };
        let resp = super::rest::healthz(axum::extract::State(self.rest.clone())).await;
        let body = axum::body::to_bytes(resp.into_body(), 1 << 20)
            .await
            .map_err(internal)?;
        let parsed = serde_json::from_slice::<Value>(&body).ok();
        let healthz = parsed
            .as_ref()
            .map(pretty)
            .unwrap_or_else(|| String::from_utf8_lossy(&body).into_owned());
        let field = |k: &str| parsed.as_ref().and_then(|v| v.get(k));
        let mode = field("mode")
            .and_then(Value::as_str)
            .unwrap_or("unknown")
            .to_string();
        let default_provider = field("default_provider")
            .and_then(Value::as_str)
            .map(String::from);
        let mut providers: Vec<String> = field("configured_providers")
            .and_then(Value::as_array)
            .map(|a| {
                a.iter()
                    .filter_map(|p| p.as_str().map(String::from))
                    .collect()
            })
            .unwrap_or_default();
        if let Some(d) = &default_provider
            && !providers.contains(d)
        {
            providers.insert(0, d.clone());
        }
        let (store, policy_sha256, hosts) = host_views(&host).await;
        Ok(HealthView {
            providers,
            default_provider,
            mode,
            store,
            policy_sha256,
            hosts,
            day: today,
            spent_today_usd: spent,
            soft_cap_usd: caps.day_soft_usd,
            hard_cap_usd: caps.day_hard_usd,
            switch,
            audit,
            healthz,
            history,
        })
    }

    async fn neurons(&self) -> Result<Vec<NeuronView>, BackendError> {
        let host = self.rest.live.host();
        let mut rows = host.store.neurons(None).await.map_err(internal)?;
        rows.sort_by(|a, b| b.created_at.cmp(&a.created_at));
        let mut fitness = Vec::with_capacity(rows.len());
        for n in &rows {
            fitness.push(super::console_data::fitness(&*host.store, &n.identity).await?);
        }
        Ok(rows
            .into_iter()
            .zip(fitness)
            .map(|(n, fitness)| NeuronView {
                fitness,
                withheld: if n.status == Status::Active {
                    capsaga_door::neurons::operator::withheld(&n)
                } else {
                    Vec::new()
                },
                status: n.status.as_str().to_string(),
                description: n.meta.description.clone(),
                requested: n.meta.capabilities.clone(),
                examples: pretty(&n.examples),
                report: n.report.as_ref().map(pretty),
                name: n.name,
                version: n.version,
                source: n.source,
                granted: n.granted,
                decided_by: n.decided_by,
                created_at: n.created_at,
            })
            .collect())
    }

    async fn neuron_action(
        &self,
        operator: &str,
        name: &str,
        version: u32,
        action: NeuronAction,
        note: Option<&str>,
    ) -> Result<Decided, BackendError> {
        use capsaga_door::neurons::operator as op;
        let who = self.acting(operator).await?.to_string();
        let host = self.rest.live.host();
        let store = &*host.store;
        let row = op::version_of(store, name, Some(version))
            .await
            .map_err(|e| BackendError::NotFound(e.to_string()))?;
        let home = host.config.home.to_string_lossy().into_owned();
        let done = match action {
            NeuronAction::Approve(grants) => {
                // The form lists every requested capability; a line the
                // operator removed is withheld.
                op::approve(
                    store,
                    &home,
                    &row,
                    &grants,
                    op::Coverage::Subset,
                    &who,
                    note,
                )
                .await
            }
            NeuronAction::Reject => op::decide(store, &row, Status::Rejected, &who, note).await,
            NeuronAction::Retire => op::decide(store, &row, Status::Retired, &who, note).await,
        }
        .map_err(|e| BackendError::Conflict(e.to_string()))?;
        let withheld = op::withheld(&done);
        Ok(Decided {
            message: format!(
                "{} v{} is {} (by {who}){}",
                done.name,
                done.version,
                done.status.as_str(),
                if withheld.is_empty() || done.status != Status::Active {
                    String::new()
                } else {
                    format!("; withheld: {}", withheld.join(", "))
                }
            ),
        })
    }

    async fn proposals(&self, all: bool) -> Result<Option<Vec<ProposalView>>, BackendError> {
        let Some(hm) = self.rest.live.host().memory.clone() else {
            return Ok(None);
        };
        super::console_data::proposals(hm, all).await.map(Some)
    }

    async fn decide_proposals(
        &self,
        operator: &str,
        ids: &[String],
        approve: bool,
    ) -> Result<Decided, BackendError> {
        let who = self.acting(operator).await?;
        if !who.may(capsaga_core::principal::Action::DecideApproval) {
            return Err(BackendError::Forbidden(
                "deciding a memory proposal needs an operator".into(),
            ));
        }
        let Some(hm) = self.rest.live.host().memory.clone() else {
            return Err(BackendError::Conflict(
                "memory is off on this server ([memory] enabled = false)".into(),
            ));
        };
        super::console_data::decide(hm, ids.to_vec(), approve, who.to_string()).await
    }
}
