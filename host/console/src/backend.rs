//! What the console needs of the runtime ([`Backend`]), and the plain view
//! types it renders. The runtime implements the trait over its store and
//! its dispatch door (`capsaga_server::console`); the console never
//! reads the state or decides anything itself, so a decision made here is
//! the same decision `POST /v1/approvals/{id}/approve` or `capsaga approve`
//! makes, recorded under the signed-in operator.
//!
//! Every string in these views may hold attacker-controlled text (tool
//! arguments, file content, model answers, neuron sources): the pages
//! render them through maud, which escapes every interpolation.

use async_trait::async_trait;
use serde::Serialize;

/// Who a sign-in token is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SignIn {
    /// An operator: its principal name (`token:alice`, `env:CAPSAGA_TOKEN`,
    /// `loopback`).
    Operator(String),
    /// A client-role token: it cannot open the console.
    Client(String),
}

/// Why a backend call failed.
#[derive(Debug, thiserror::Error)]
pub enum BackendError {
    /// The token is not a valid token.
    #[error("not a valid token")]
    Unauthorized,
    /// No such approval, saga or trace.
    #[error("not found: {0}")]
    NotFound(String),
    /// The request cannot be carried out in the current state (an approval
    /// already decided or stale, a saga that cannot be undone...): the
    /// message says why.
    #[error("{0}")]
    Conflict(String),
    /// The signed-in principal may not do this.
    #[error("forbidden: {0}")]
    Forbidden(String),
    /// The store or the door failed.
    #[error("{0}")]
    Internal(String),
}

/// A page of a list: rows `offset .. offset + rows.len()` of `total`.
#[derive(Debug, Clone, Serialize)]
pub struct Paged<T> {
    /// The rows of this page.
    pub rows: Vec<T>,
    /// How many rows the list has in all (for sagas: at least this many
    /// when `more` is set).
    pub total: u64,
    /// Whether rows exist past this page.
    pub more: bool,
}

/// Which page: `offset` rows skipped, at most `limit` shown.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PageReq {
    /// Rows skipped.
    pub offset: u64,
    /// Most rows (the console asks for [`crate::PAGE_SIZE`]).
    pub limit: u64,
}

/// A pending (or decided) approval as the queue shows it.
#[derive(Debug, Clone, Serialize)]
pub struct ApprovalView {
    /// The approval id.
    pub id: String,
    /// The saga parked on it.
    pub saga_id: String,
    /// The step that asked.
    pub step_seq: u64,
    /// The tool.
    pub tool: String,
    /// The tool's pinned hash (hex).
    pub tool_hash: String,
    /// The tool's declared risk (`low`, `medium`, `high`, from its meta),
    /// when the component with the pinned hash is loaded; `None` when it is
    /// not (replaced or removed since the call was asked).
    pub risk: Option<String>,
    /// The arguments, pretty-printed JSON (untrusted).
    pub args: String,
    /// Why a human must decide (the policy's reason).
    pub reason: String,
    /// The tool's dry-run summary line (untrusted).
    pub summary: String,
    /// A unified diff of a file write, when the dry-run gave one
    /// (untrusted).
    pub diff: Option<String>,
    /// What to check first, for `http_request` (the request) and
    /// `code_run` (the code's and inputs' hashes): `(title, text)`
    /// (untrusted).
    pub essentials: Option<(String, String)>,
    /// The dry-run output, pretty-printed JSON (untrusted).
    pub preview: Option<String>,
    /// `pending`, `approved`, `denied`, `claimed`, `stale`, `expired`.
    pub status: String,
    /// RFC 3339.
    pub created_at: String,
    /// Age in seconds at render time.
    pub age_s: u64,
    /// RFC 3339, if it expires.
    pub expires_at: Option<String>,
    /// The approval this one replaced (the earlier preview went stale).
    pub replaces: Option<String>,
    /// Who approved or denied it (an operator, or a client allowed to
    /// confirm that tool), once decided.
    pub decided_by: Option<String>,
    /// RFC 3339, once decided.
    pub decided_at: Option<String>,
    /// The decider's note (untrusted: free text).
    pub note: Option<String>,
    /// What information flow found in the call (issue 47): each argument
    /// whose value came from untrusted data (or nowhere trusted), with the
    /// value and its source step. Empty when the approval was not asked
    /// for a value's provenance.
    pub flow: Vec<FlowFindingView>,
}

/// One argument of a call that information flow holds for a human.
#[derive(Debug, Clone, Serialize)]
pub struct FlowFindingView {
    /// A JSON Pointer into the arguments (`/path`), several joined by `+`
    /// for a value split across arguments.
    pub argument: String,
    /// The value (untrusted: at most 120 characters).
    pub value: String,
    /// The sink's level (`trusted`, `identifiers`, `verbatim`).
    pub level: String,
    /// Where it came from, in words (`fs_read (step 0)`, `nowhere in the
    /// user's or operator's text`): untrusted data may be quoted here.
    pub source: String,
    /// The steps of this saga it came from (links to the timeline).
    pub steps: Vec<u64>,
}

/// The label of what a step brought into its saga (information flow).
#[derive(Debug, Clone, Serialize)]
pub struct StepLabelView {
    /// `trusted` or `untrusted`.
    pub integrity: String,
    /// Its source in words (`fs_read (step 0)`).
    pub source: String,
    /// Fields of an untrusted output the tool and the operator vouch for.
    pub trusted_fields: Vec<String>,
    /// Fields the tool labels untrusted.
    pub untrusted_fields: Vec<String>,
}

/// A saga in the list.
#[derive(Debug, Clone, Serialize)]
pub struct SagaView {
    /// The saga id.
    pub id: String,
    /// Guardrail state (`Done`, `AwaitingApproval`, ...).
    pub state: String,
    /// `plan`, `agent`, `call`.
    pub origin: String,
    /// The task or plan (untrusted).
    pub label: String,
    /// Who started it.
    pub principal: Option<String>,
    /// RFC 3339.
    pub created_at: String,
    /// RFC 3339.
    pub updated_at: String,
}

/// The filters of the sagas page (every one optional; all must match).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SagaFilter {
    /// Exact guardrail state.
    pub state: Option<String>,
    /// Exact principal name.
    pub principal: Option<String>,
    /// Sagas with a step of this tool.
    pub tool: Option<String>,
    /// Created at or after this RFC 3339 time (string comparison).
    pub since: Option<String>,
}

/// One step of a saga's timeline.
#[derive(Debug, Clone, Serialize)]
pub struct StepView {
    /// Position in the saga.
    pub seq: u64,
    /// The tool.
    pub tool: String,
    /// The pinned tool hash.
    pub tool_hash: String,
    /// The grants it ran with.
    pub grants: Vec<String>,
    /// `committed`, `failed`, `compensated`, ...
    pub status: String,
    /// Arguments, pretty JSON (untrusted).
    pub args: String,
    /// Output or error, pretty JSON (untrusted).
    pub result: Option<String>,
    /// RFC 3339.
    pub created_at: String,
    /// RFC 3339.
    pub updated_at: String,
    /// Milliseconds from created to last update, when both parse.
    pub duration_ms: Option<u64>,
    /// The label of its output, once the door recorded one.
    pub label: Option<StepLabelView>,
}

/// One record of the saga's write-ahead log.
#[derive(Debug, Clone, Serialize)]
pub struct LogView {
    /// Log sequence number.
    pub seq: u64,
    /// `BEGIN`, `COMMIT`, `FAIL`, `COMPENSATED`, transitions...
    pub kind: String,
    /// The step it is about, if any.
    pub step_seq: Option<u64>,
    /// RFC 3339.
    pub at: String,
    /// Its payload, compact JSON (untrusted).
    pub detail: String,
}

/// A saga with its timeline.
#[derive(Debug, Clone, Serialize)]
pub struct SagaDetail {
    /// The saga.
    pub saga: SagaView,
    /// Its steps.
    pub steps: Vec<StepView>,
    /// Its log records.
    pub log: Vec<LogView>,
    /// The trace of the agent turn that ran it, if any.
    pub trace_id: Option<String>,
}

/// What an operator can do to a saga.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SagaAction {
    /// Roll an unfinished saga back (compensate what committed).
    Rollback,
    /// Undo a Done saga.
    Undo,
    /// Resume a parked plan.
    Resume,
}

impl SagaAction {
    /// From the form's `action` field.
    pub fn parse(s: &str) -> Option<SagaAction> {
        match s {
            "rollback" => Some(SagaAction::Rollback),
            "undo" => Some(SagaAction::Undo),
            "resume" => Some(SagaAction::Resume),
            _ => None,
        }
    }
}

/// One step of a trace.
#[derive(Debug, Clone, Serialize)]
pub struct TraceStepView {
    /// `thought`, `action`, `observation`, `critic`, ...
    pub kind: String,
    /// Its content, pretty JSON (untrusted: model text, tool output).
    pub content: String,
}

/// An agent turn's trace.
#[derive(Debug, Clone, Serialize)]
pub struct TraceView {
    /// The trace id.
    pub id: String,
    /// Its saga.
    pub saga_id: Option<String>,
    /// The task (untrusted).
    pub task: String,
    /// How the turn ended.
    pub outcome: String,
    /// The final answer (untrusted model text).
    pub final_response: Option<String>,
    /// Whether the answer was written after untrusted data entered the
    /// turn (it may repeat what that data said).
    pub after_untrusted: bool,
    /// Tokens in prompts.
    pub prompt_tokens: u64,
    /// Tokens in answers.
    pub response_tokens: u64,
    /// Cost, USD.
    pub cost_usd: f64,
    /// The steps.
    pub steps: Vec<TraceStepView>,
}

/// A version of a neuron (an agent-written tool).
#[derive(Debug, Clone, Serialize)]
pub struct NeuronView {
    /// Its tool name.
    pub name: String,
    /// Its version.
    pub version: u32,
    /// `proposed`, `tested`, `awaiting_operator`, `active`, `retired`,
    /// `rejected`.
    pub status: String,
    /// Its description (untrusted: the model wrote it).
    pub description: String,
    /// Its source (untrusted).
    pub source: String,
    /// Its examples, pretty JSON (untrusted).
    pub examples: String,
    /// The runner's test report, pretty JSON, if tested.
    pub report: Option<String>,
    /// The capabilities it requests.
    pub requested: Vec<String>,
    /// The grants the operator gave it, once active.
    pub granted: Vec<String>,
    /// What it requested and the operator withheld (approved with a
    /// subset), once active.
    pub withheld: Vec<String>,
    /// Who decided, once decided.
    pub decided_by: Option<String>,
    /// RFC 3339.
    pub created_at: String,
    /// Its fitness per UTC day with calls, oldest first (the chart).
    pub fitness: Vec<FitnessDay>,
}

/// What an operator can do to a neuron version.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NeuronAction {
    /// Activate it with exactly these grants: what it requested or less
    /// (the rest withheld), never more (the runtime's check).
    Approve(Vec<String>),
    /// Reject it.
    Reject,
    /// Retire it.
    Retire,
}

/// Budget and health.
#[derive(Debug, Clone, Serialize)]
pub struct HealthView {
    /// The UTC day of `spent_today_usd` (`YYYY-MM-DD`).
    pub day: String,
    /// Spend today, USD.
    pub spent_today_usd: f64,
    /// The soft cap, USD, if any.
    pub soft_cap_usd: Option<f64>,
    /// The hard cap, USD, if any.
    pub hard_cap_usd: Option<f64>,
    /// The kill switch's mode.
    pub switch: String,
    /// The audit of the write-ahead log's hash chain and anchored head:
    /// `ok`, or its findings.
    pub audit: String,
    /// `GET /healthz`'s answer, pretty JSON (providers, hosts, reloads).
    pub healthz: String,
    /// The model providers configured for this host, in the router's
    /// order (the first is the default); `["scripted"]` in simulation.
    pub providers: Vec<String>,
    /// The default provider, if any.
    pub default_provider: Option<String>,
    /// `simulation` (the scripted model) or `live`.
    pub mode: String,
    /// The store: `sqlite` or `postgres`.
    pub store: String,
    /// This host's policy hash (SHA-256, hex).
    pub policy_sha256: String,
    /// The live hosts sharing the store, this one included.
    pub hosts: Vec<HostView>,
    /// Spend per UTC day over the chart's days, oldest first, one entry
    /// per day (days without spend at 0).
    pub history: Vec<SpendDay>,
}

/// A host sharing the store (a live owner of sagas).
#[derive(Debug, Clone, Serialize)]
pub struct HostView {
    /// Its owner id.
    pub id: String,
    /// The SHA-256 of its policy (hex), when it published one.
    pub policy_sha256: Option<String>,
    /// When it started, RFC 3339.
    pub started_at: String,
    /// True for the host serving this page.
    pub this: bool,
}

/// An episode a memory proposal was distilled from.
#[derive(Debug, Clone, Serialize)]
pub struct EpisodeView {
    /// `e-…`.
    pub id: String,
    /// When the turn started, RFC 3339.
    pub started_at: String,
    /// Who asked.
    pub sender: String,
    /// What the user wrote (untrusted).
    pub user_message: String,
    /// The agent's answer (untrusted model text).
    pub final_response: Option<String>,
    /// The turn's outcome.
    pub outcome: String,
}

/// A fact proposal of the memory's reflection, waiting for the operator.
#[derive(Debug, Clone, Serialize)]
pub struct ProposalView {
    /// `p-…`.
    pub id: String,
    /// The namespace it would enter.
    pub namespace: String,
    /// The proposed fact (untrusted until approved: model text distilled
    /// from turns any principal may have written).
    pub text: String,
    /// `reflection` or `agent:<saga id>`.
    pub origin: String,
    /// When it was proposed, RFC 3339.
    pub created_at: String,
    /// `pending`, `approved`, `discarded`, `withdrawn`.
    pub status: String,
    /// Who decided, once decided.
    pub decided_by: Option<String>,
    /// The episodes it was distilled from (those still stored).
    pub episodes: Vec<EpisodeView>,
    /// Ids of source episodes no longer stored (forgotten).
    pub missing_episodes: Vec<String>,
}

/// The outcome of a decision, in words for the operator.
#[derive(Debug, Clone)]
pub struct Decided {
    /// What happened (`approved; the plan resumed: Done`).
    pub message: String,
}

/// The runtime's side of the console. Every action takes the signed-in
/// operator's principal name, re-checked by the implementation (a token
/// revoked since sign-in acts no more).
#[async_trait]
pub trait Backend: Send + Sync + 'static {
    /// Who `token` is (empty: no token, which is an operator only on a
    /// loopback server that has none).
    ///
    /// # Errors
    /// [`BackendError::Unauthorized`], or the store's.
    async fn sign_in(&self, token: &str) -> Result<SignIn, BackendError>;

    /// Whether `operator` (a name [`Backend::sign_in`] returned) is still a
    /// live operator (its token not revoked).
    async fn still_operator(&self, operator: &str) -> bool;

    /// Pending approvals, oldest first.
    ///
    /// # Errors
    /// The store's.
    async fn approvals(&self, page: PageReq) -> Result<Paged<ApprovalView>, BackendError>;

    /// Approvals no longer pending (approved, denied, claimed, stale,
    /// expired), the newest first (by decision time, else creation).
    ///
    /// # Errors
    /// The store's.
    async fn decided_approvals(&self, page: PageReq) -> Result<Paged<ApprovalView>, BackendError>;

    /// How many approvals are pending (the live badge).
    ///
    /// # Errors
    /// The store's.
    async fn pending_count(&self) -> Result<u64, BackendError>;

    /// Approve or deny approval `id` as `operator`; an approved parked plan
    /// is resumed, a denied one rolled back.
    ///
    /// # Errors
    /// [`BackendError`].
    async fn decide(
        &self,
        operator: &str,
        id: &str,
        approve: bool,
        note: Option<&str>,
    ) -> Result<Decided, BackendError>;

    /// Sagas matching `filter`, newest first.
    ///
    /// # Errors
    /// The store's.
    async fn sagas(
        &self,
        filter: &SagaFilter,
        page: PageReq,
    ) -> Result<Paged<SagaView>, BackendError>;

    /// One saga's timeline.
    ///
    /// # Errors
    /// The store's.
    async fn saga(&self, id: &str) -> Result<Option<SagaDetail>, BackendError>;

    /// Roll back, undo or resume saga `id` as `operator`.
    ///
    /// # Errors
    /// [`BackendError`].
    async fn saga_action(
        &self,
        operator: &str,
        id: &str,
        action: SagaAction,
    ) -> Result<Decided, BackendError>;

    /// One trace.
    ///
    /// # Errors
    /// The store's.
    async fn trace(&self, id: &str) -> Result<Option<TraceView>, BackendError>;

    /// Budget and health, with the spend of the last `days` UTC days
    /// (today included).
    ///
    /// # Errors
    /// The store's.
    async fn health(&self, days: u32) -> Result<HealthView, BackendError>;

    /// Every neuron version, newest first.
    ///
    /// # Errors
    /// The store's.
    async fn neurons(&self) -> Result<Vec<NeuronView>, BackendError>;

    /// Approve, reject or retire neuron `name` version `version` as
    /// `operator`.
    ///
    /// # Errors
    /// [`BackendError`].
    async fn neuron_action(
        &self,
        operator: &str,
        name: &str,
        version: u32,
        action: NeuronAction,
        note: Option<&str>,
    ) -> Result<Decided, BackendError>;

    /// Memory fact proposals (pending only unless `all`), oldest first,
    /// each with its source episodes; `None` when the server runs without
    /// memory.
    ///
    /// # Errors
    /// The memory store's.
    async fn proposals(&self, all: bool) -> Result<Option<Vec<ProposalView>>, BackendError>;

    /// Approve (each becomes a fact) or discard the proposals `ids` as
    /// `operator`; one already decided is skipped and said so.
    ///
    /// # Errors
    /// [`BackendError`].
    async fn decide_proposals(
        &self,
        operator: &str,
        ids: &[String],
        approve: bool,
    ) -> Result<Decided, BackendError>;
}

/// One UTC day of model spend (the store's budget counters).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SpendDay {
    /// `YYYY-MM-DD`.
    pub day: String,
    /// Spent that day, USD.
    pub spent_usd: f64,
    /// Model calls that day.
    pub calls: u64,
}

/// One UTC day of a neuron version's fitness (its logged calls).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct FitnessDay {
    /// `YYYY-MM-DD`.
    pub day: String,
    /// Finished calls that day.
    pub calls: u64,
    /// Of which succeeded.
    pub ok: u64,
    /// `ok / calls` (0.0-1.0), when there were calls.
    pub success_rate: Option<f64>,
    /// Median latency, ms.
    pub p50_ms: Option<u64>,
    /// 95th percentile latency, ms.
    pub p95_ms: Option<u64>,
}
