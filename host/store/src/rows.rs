//! The records the store reads and writes, as the rest of the host sees
//! them (no backend types).

use capsaga_core::approval::{ApprovalError, ApprovalStatus, Binding};
use capsaga_core::fsm::State;
use capsaga_core::tool::ToolOutput;
use serde::Serialize;
use serde_json::Value;

/// One row of the write-ahead log (`wal_log`), decoded (the decoding and the
/// hash chain are pure logic in `capsaga_core::wal_row`).
pub use capsaga_core::wal_row::LogRow;

/// Status of a step (`saga_steps.status`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum StepStatus {
    /// Logged before execute started; no outcome yet (in doubt after a crash).
    Begin,
    /// Execute succeeded; output logged.
    Commit,
    /// Execute failed; error logged.
    Fail,
    /// Compensate succeeded.
    Compensated,
    /// Compensate failed; the operator must act.
    CompensationFailed,
}

impl StepStatus {
    /// The stored name.
    pub fn as_str(self) -> &'static str {
        match self {
            StepStatus::Begin => "BEGIN",
            StepStatus::Commit => "COMMIT",
            StepStatus::Fail => "FAIL",
            StepStatus::Compensated => "COMPENSATED",
            StepStatus::CompensationFailed => "COMPENSATION_FAILED",
        }
    }

    /// Parse a stored name.
    pub fn parse(s: &str) -> Option<StepStatus> {
        Some(match s {
            "BEGIN" => StepStatus::Begin,
            "COMMIT" => StepStatus::Commit,
            "FAIL" => StepStatus::Fail,
            "COMPENSATED" => StepStatus::Compensated,
            "COMPENSATION_FAILED" => StepStatus::CompensationFailed,
            _ => return None,
        })
    }

    /// True for statuses that still hold an effect that may need undoing:
    /// COMMIT, BEGIN (in doubt) and COMPENSATION_FAILED.
    pub fn needs_compensation(self) -> bool {
        matches!(
            self,
            StepStatus::Commit | StepStatus::Begin | StepStatus::CompensationFailed
        )
    }
}

impl std::fmt::Display for StepStatus {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The scope that opened a saga (`capsaga_core::scope`): a session, a
/// saga handle, a task, a turn, a plan, a call. Its coarser origin
/// ([`Scope::origin`]: `mcp`, `agent`, `plan`, `call`) is stored beside it.
pub use capsaga_core::scope::Scope;

/// Sagas as a store without scopes recorded them, and the scope each one
/// gets from the migration that adds them (SQLite 11, PostgreSQL 5): the
/// tests of both back ends' migrations.
#[cfg(any(test, feature = "test-support"))]
pub mod scopeless {
    use crate::SagaStore;
    use capsaga_core::scope::Scope;

    /// The rows, as SQL both back ends take.
    pub const ROWS: &str = "INSERT INTO saga_state (saga_id, state, origin, created_at, updated_at, released_at) VALUES
        ('p', 'AwaitingApproval', 'plan', 't', 't', NULL),
        ('c', 'Done', 'call', 't', 't', NULL),
        ('h', 'Acting', 'mcp', 't', 't', 't'),
        ('s', 'Acting', 'mcp', 't', 't', NULL),
        ('a', 'Done', 'agent', 't', 't', NULL);";

    /// Check the scopes `store` reads back for [`ROWS`].
    pub async fn check(store: &dyn SagaStore) {
        for (id, scope) in [
            ("p", Some(Scope::Plan)),
            ("c", Some(Scope::Call)),
            ("h", Some(Scope::Handle)),
            ("s", None),
            ("a", None),
        ] {
            let row = store.saga(id).await.expect("the saga reads back");
            assert_eq!(row.expect("the saga").scope, scope, "{id}");
        }
    }
}

/// A saga to create.
#[derive(Debug, Clone, Copy)]
pub struct NewSaga<'a> {
    /// Its id (UUID v4).
    pub saga_id: &'a str,
    /// The scope that opens it (stored with its origin, `Scope::origin`):
    /// only that scope continues, commits or rolls it back.
    pub scope: Scope,
    /// The task or plan description.
    pub label: &'a str,
    /// Its first state (Planning, after StartSaga).
    pub state: State,
    /// The owner id of the process that drives it.
    pub owner: &'a str,
    /// The plan it runs (canonical JSON), when a plan drives it, so that it
    /// can be resumed.
    pub plan: Option<&'a str>,
    /// The principal that started it (`capsaga_core::principal`), recorded
    /// with the saga and in its first `STATE` record: a client sees only
    /// its own sagas.
    pub principal: Option<&'a str>,
}

/// One row of `saga_state`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SagaRow {
    /// The saga id (UUID v4).
    pub saga_id: String,
    /// Guardrail state.
    pub state: State,
    /// `plan`, `agent` or `call`.
    pub origin: String,
    /// The task or plan it ran.
    pub label: String,
    /// RFC 3339.
    pub created_at: String,
    /// RFC 3339.
    pub updated_at: String,
    /// The id of the process that drives it ([`crate::OwnerStore`]), if any.
    pub owner: Option<String>,
    /// The principal that started it (`None` for sagas recorded before
    /// principals existed: only operators see those).
    pub principal: Option<String>,
    /// Its fencing token: [`FIRST_FENCE`] at creation, one more at every
    /// take-over, release and claim. A write carrying another token is
    /// refused.
    pub fence: u64,
    /// When its owner released it between two requests (RFC 3339 UTC, by
    /// the database's clock for PostgreSQL): it then has no owner, is not
    /// in doubt (crash recovery leaves it alone) and is continued by
    /// whichever host claims it ([`crate::SagaStore::claim_released`]).
    /// None while a process owns it.
    pub released_at: Option<String>,
    /// The scope that opened it (`None` for a saga recorded before scopes
    /// existed, or that the migration could not tell: only the operator
    /// acts on those).
    pub scope: Option<Scope>,
}

/// The filters of [`crate::SagaStore::saga_page`]; each one set must match.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SagaQuery {
    /// The guardrail state, as its name (`Done`, `AwaitingApproval`, ...).
    pub state: Option<String>,
    /// The principal that started it, exactly.
    pub principal: Option<String>,
    /// A tool one of its steps called.
    pub tool: Option<String>,
    /// Created at or after this RFC 3339 time (compared as text: the store
    /// writes UTC times of one format).
    pub since: Option<String>,
}

/// The fencing token of a new saga.
pub const FIRST_FENCE: u64 = 1;

/// The `why` of the `OWNER` record of a release
/// ([`crate::SagaStore::release_saga`]).
pub const RELEASED_WHY: &str = "released between requests";

/// Which step a write is about, and the fencing token its writer holds on
/// the saga (refused by the store when it is not the saga's current token).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StepKey<'a> {
    /// The saga.
    pub saga_id: &'a str,
    /// The writer's fencing token on it.
    pub fence: u64,
    /// The step's position.
    pub step_seq: u64,
}

/// One row of `saga_steps`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct StepRow {
    /// The saga.
    pub saga_id: String,
    /// Position in the saga.
    pub step_seq: u64,
    /// Tool name.
    pub tool_id: String,
    /// The tool's identity hash (for a component, SHA-256 of its bytes).
    pub tool_hash: String,
    /// Effective grants the step ran with.
    pub grants: Vec<String>,
    /// Whether the tool declared side effects.
    pub has_side_effects: bool,
    /// The idempotency key.
    pub idempotency_key: String,
    /// Arguments (JSON).
    pub args: Value,
    /// Dry-run output logged before execute (JSON tool output), if any.
    pub preimage: Option<Value>,
    /// Execute output (JSON tool output) once committed.
    pub output: Option<Value>,
    /// Current status.
    pub status: StepStatus,
    /// Last error (JSON tool error), if any.
    pub error: Option<Value>,
    /// RFC 3339.
    pub created_at: String,
    /// RFC 3339.
    pub updated_at: String,
    /// The label of what the step brought into its saga (information flow,
    /// issue 47: `capsaga_flow::Label` as JSON), once the door
    /// recorded it; also in the log as a `LABEL` record.
    pub label: Option<Value>,
}

/// A step about to begin.
#[derive(Debug, Clone)]
pub struct NewStep<'a> {
    /// The saga.
    pub saga_id: &'a str,
    /// Position in the saga.
    pub step_seq: u64,
    /// Tool name.
    pub tool_id: &'a str,
    /// The tool's identity hash (pinned: compensation runs exactly it).
    pub tool_hash: &'a str,
    /// Effective grants, as capability strings.
    pub grants: &'a [String],
    /// Whether the tool has side effects.
    pub has_side_effects: bool,
    /// Idempotency key.
    pub idempotency_key: &'a str,
    /// Arguments.
    pub args: &'a Value,
    /// Dry-run output captured before execute, if any.
    pub preimage: Option<&'a ToolOutput>,
    /// An approved approval to claim in the same transaction as the BEGIN
    /// row (its binding must be this step's tool, tool hash and args hash).
    pub approval: Option<&'a str>,
    /// The writer's fencing token on the saga.
    pub fence: u64,
}

/// What `begin_step` found.
#[derive(Debug, Clone, PartialEq)]
pub enum BeginOutcome {
    /// A new BEGIN row was written: go on and execute.
    Started,
    /// The idempotency key already committed: return the logged output
    /// without executing again.
    AlreadyCommitted(ToolOutput),
    /// The key exists in another status (the caller decides).
    Exists(StepStatus),
    /// The approval to claim is not approved any more (claimed by another
    /// step, expired), its binding does not match, or it is not this
    /// saga's to claim (another saga's still open, or another principal's:
    /// `capsaga_core::approval::may_claim`): nothing was written.
    ApprovalUnavailable,
}

/// A step whose compensation failed, with why (`capsaga sagas --needs-operator`).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct FailedCompensation {
    /// The step.
    pub step_seq: u64,
    /// The tool.
    pub tool_id: String,
    /// The step's arguments.
    pub args: Value,
    /// The compensation's error (JSON tool error), as logged.
    pub error: Option<Value>,
    /// When it was logged (RFC 3339).
    pub updated_at: String,
}

/// A FailedRollbackPartial saga and what the operator must look at.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct NeedsOperator {
    /// The saga.
    pub saga: SagaRow,
    /// Its failed compensations, newest step first.
    pub failed: Vec<FailedCompensation>,
}

/// Shortest id prefix accepted by `ApprovalStore::approval`.
pub const MIN_ID_PREFIX: usize = 6;

/// One row of `approvals`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ApprovalRow {
    /// The approval id (UUID v4, lowercase hex with dashes).
    pub approval_id: String,
    /// The saga whose step asked for it.
    pub saga_id: String,
    /// The step that asked for it.
    pub step_seq: u64,
    /// What exactly is approved.
    pub binding: Binding,
    /// The arguments (JSON), for the human.
    pub args: Value,
    /// Why a human must decide (the policy's reason).
    pub reason: String,
    /// One line from the tool's dry-run: what the call would do.
    pub summary: String,
    /// The dry-run output (JSON tool output), when the tool has one.
    pub preview: Option<Value>,
    /// Where it is in its life.
    pub status: ApprovalStatus,
    /// Who decided (`tty:<user>`, `cli:<user>`), once decided.
    pub decided_by: Option<String>,
    /// When (RFC 3339), once decided.
    pub decided_at: Option<String>,
    /// The saga that claimed it, once claimed.
    pub claimed_saga: Option<String>,
    /// The step that claimed it, once claimed.
    pub claimed_step: Option<u64>,
    /// When (RFC 3339), once claimed.
    pub claimed_at: Option<String>,
    /// When it was requested (RFC 3339).
    pub created_at: String,
    /// When it expires unless claimed (RFC 3339); `None` for approvals
    /// requested before expiry existed.
    pub expires_at: Option<String>,
    /// The approval this one replaces (stale or expired), if any.
    pub replaces: Option<String>,
    /// The note given with the decision (`approve|deny --note`), if any.
    pub note: Option<String>,
}

impl ApprovalRow {
    /// Whether it is past its time to live at `now` (RFC 3339 UTC, as
    /// `clock::now_rfc3339` writes it).
    pub fn is_expired(&self, now: &str) -> bool {
        self.expires_at.as_deref().is_some_and(|e| e <= now)
    }
}

/// An approved, unexpired, unclaimed approval with the binding a step asks
/// for ([`crate::ApprovalStore::find_approved`]), with what the claim rule
/// (`capsaga_core::approval::may_claim`) needs of the saga that requested
/// it.
#[derive(Debug, Clone, PartialEq)]
pub struct Approved {
    /// The approval.
    pub approval: ApprovalRow,
    /// Whether the saga that requested it has ended.
    pub requester_ended: bool,
    /// The principal recorded with the saga that requested it.
    pub requester_principal: Option<String>,
}

/// An approval to request.
#[derive(Debug, Clone)]
pub struct NewApproval<'a> {
    /// The saga to park.
    pub saga_id: &'a str,
    /// The step that needs it.
    pub step_seq: u64,
    /// The exact call.
    pub binding: &'a Binding,
    /// The arguments.
    pub args: &'a Value,
    /// The policy's reason.
    pub reason: &'a str,
    /// What the call would do (dry-run summary, or a description).
    pub summary: &'a str,
    /// The dry-run output, if any.
    pub preview: Option<&'a ToolOutput>,
    /// Time to live from now, seconds.
    pub ttl_s: u64,
    /// An approval of the same step this one replaces, and the final status
    /// it gets (`stale` or `expired`), in the same transaction.
    pub replaces: Option<(&'a str, ApprovalStatus)>,
    /// The writer's fencing token on the saga (it parks the saga).
    pub fence: u64,
}

/// Why an approval operation failed.
#[derive(Debug, thiserror::Error)]
pub enum ApprovalOpError {
    /// The store failed.
    #[error(transparent)]
    Store(#[from] super::StoreError),
    /// No approval with this id (or prefix).
    #[error("no approval `{0}`")]
    NotFound(String),
    /// The prefix matches several approvals, or is too short.
    #[error(
        "approval id `{0}` is ambiguous or shorter than {MIN_ID_PREFIX} characters: give more of it"
    )]
    Ambiguous(String),
    /// The operation is not allowed in the approval's state.
    #[error(transparent)]
    Refused(#[from] ApprovalError),
}

/// An execution trace as stored: the columns the store indexes and the
/// whole trace as JSON text (its shape belongs to the agent, not the store).
#[derive(Debug, Clone)]
pub struct TraceRecord<'a> {
    /// UUID v4.
    pub trace_id: &'a str,
    /// The saga of the turn.
    pub saga_id: Option<&'a str>,
    /// The task.
    pub task: &'a str,
    /// How it ended (`success`, ...).
    pub outcome: &'a str,
    /// RFC 3339.
    pub started_at: &'a str,
    /// RFC 3339.
    pub finished_at: Option<&'a str>,
    /// Wall time, milliseconds.
    pub wall_ms: u64,
    /// The whole trace, JSON text.
    pub json: &'a str,
}

/// One UTC day of model spend (`budget_days`).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct DayRow {
    /// `YYYY-MM-DD`, UTC.
    pub day: String,
    /// USD.
    pub spent_usd: f64,
    /// Model calls.
    pub calls: u64,
    /// Input tokens.
    pub input_tokens: u64,
    /// Output tokens.
    pub output_tokens: u64,
    /// Held by reservations of calls in flight (not settled, not
    /// expired), USD.
    pub reserved_usd: f64,
}

/// A model call's maximum estimate to reserve under the day's hard cap
/// ([`crate::BudgetStore::reserve_spend`]).
#[derive(Debug, Clone, PartialEq)]
pub struct NewReservation<'a> {
    /// Its id (unique; chosen by the caller, e.g. a UUID).
    pub id: &'a str,
    /// The UTC day it is charged to, `YYYY-MM-DD`.
    pub day: &'a str,
    /// The call's maximum estimate, USD.
    pub usd: f64,
    /// The day's hard cap, USD (`None`: no cap, always reserved).
    pub day_hard_usd: Option<f64>,
    /// How long it is held if never settled, ms (a process that died
    /// does not block the budget past it).
    pub ttl_ms: u64,
    /// Who holds it, for the operator (`<provider>/<model>`, the process).
    pub holder: &'a str,
}

/// What one settled call taught about its provider's reports
/// ([`crate::BudgetStore::settle_spend_learnt`]; the ratios are
/// `capsaga_core::budget::learn::observed`).
#[derive(Debug, Clone, PartialEq)]
pub struct Learnt<'a> {
    /// The provider asked.
    pub provider: &'a str,
    /// The model asked (what the reservation was estimated for).
    pub model: &'a str,
    /// What the call's reservation held, USD.
    pub reserved_usd: f64,
    /// Charged over estimated, per side (`0.0`: nothing learnt there).
    pub ratios: capsaga_core::budget::learn::Ratios,
}

/// A cost as the ledger records it: not a positive finite number, `0.0`.
pub(crate) fn ledger_usd(usd: f64) -> f64 {
    if usd.is_finite() && usd > 0.0 {
        usd
    } else {
        0.0
    }
}

/// [`Learnt`] as the store records it: names of at most 200 characters,
/// the reservation through [`ledger_usd`].
pub(crate) struct StoredLearnt {
    pub provider: String,
    pub model: String,
    pub reserved_usd: f64,
    pub ratios: capsaga_core::budget::learn::Ratios,
}

impl Learnt<'_> {
    /// What the store records of it.
    pub(crate) fn stored(&self) -> StoredLearnt {
        StoredLearnt {
            provider: self.provider.chars().take(200).collect(),
            model: self.model.chars().take(200).collect(),
            reserved_usd: ledger_usd(self.reserved_usd),
            ratios: self.ratios,
        }
    }
}

/// What a provider's reports cost beyond the host's estimates, for one
/// provider and model asked on one UTC day (`capsaga budget`).
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct GapRow {
    /// `YYYY-MM-DD`, UTC.
    pub day: String,
    /// The provider asked.
    pub provider: String,
    /// The model asked.
    pub model: String,
    /// Settled calls.
    pub calls: u64,
    /// What their reservations held, USD.
    pub reserved_usd: f64,
    /// What they were charged, USD.
    pub charged_usd: f64,
    /// What they were charged beyond their reservations, USD (the spend
    /// the day's hard cap could not see coming).
    pub over_usd: f64,
    /// The largest charged-over-estimated ratio, input side (`0`: none).
    pub input_ratio: f64,
    /// The largest charged-over-estimated ratio, output side (`0`: none).
    pub output_ratio: f64,
}

/// What a reservation attempt did.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Reserved {
    /// Reserved; settle or release it with its id.
    Made,
    /// Refused by the day's hard cap (`capsaga_core::budget::reserve::admits`):
    /// nothing was reserved.
    Refused {
        /// What the day has spent, USD.
        spent_usd: f64,
        /// What reservations in flight (not expired) hold, USD.
        reserved_usd: f64,
    },
}

/// The current value of every row the write-ahead log describes, by key, as
/// the tables hold it (what `audit verify` replays the log against): saga id
/// → state, `<saga>#<step>` → step status, approval id → approval status.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TableStates {
    /// Saga id → state name.
    pub sagas: std::collections::BTreeMap<String, String>,
    /// `<saga id>#<step seq>` → status name.
    pub steps: std::collections::BTreeMap<String, String>,
    /// Approval id → status name.
    pub approvals: std::collections::BTreeMap<String, String>,
    /// MCP task id → its row's pin (`<status> v<version> <sha256>`, as its
    /// `TASK` records name it), or [`UNCHAINED_TASK`] for a row written
    /// before the tasks joined the log (SQLite schema 15, PostgreSQL
    /// migration 9).
    pub tasks: std::collections::BTreeMap<String, String>,
}

/// [`TableStates::tasks`] of a task row from before the tasks joined the
/// hash-chained log: not checked unless the log names it.
pub const UNCHAINED_TASK: &str = "unchained";
