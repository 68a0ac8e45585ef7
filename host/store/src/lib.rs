//! # capsaga-store
//!
//! The state store: every SQL statement of capsaga lives in this crate, in
//! [`sqlite`], behind the traits here (DESIGN §8d). Nothing else in the
//! host names a table or a backend type; the door (`capsaga-door`) and the
//! layers above use this crate as it is.
//!
//! The traits are the seam a second store (PostgreSQL shared by several
//! hosts) implements: no backend types in their signatures, `Send + Sync`,
//! async (a write returns once its record is durable, which is where group
//! commit fits: several callers' records made durable by one sync, each
//! released only once its own is).
//!
//! | trait | tables | what |
//! |---|---|---|
//! | [`SagaStore`] | `saga_state` | sagas, their guardrail state, owner and plan |
//! | [`StepStore`] | `saga_steps` | steps: BEGIN (+ approval claim), COMMIT, FAIL, RETRY, compensation, the host's file restores (`FS_RESTORE`) |
//! | [`LogStore`] | `wal_log`, `wal_head` | the hash-chained log every write appends to, and its anchored head |
//! | [`ApprovalStore`] | `approvals` | human approvals: request (parks the saga), decide |
//! | [`TraceStore`] | `traces` | execution traces of agent turns |
//! | [`BudgetStore`] | `budget_days`, `budget_reservations`, `budget_ratios` | model spend per UTC day, reservations of calls in flight, what providers' reports cost beyond the estimates |
//! | [`NeuronStore`] | `neurons` | agent-written tools: versions, life, provenance |
//! | [`TokenStore`] | `tokens` | named tokens and roles (the SHA-256 of each secret) |
//! | [`KeyStore`] | `provider_keys` | provider keys sealed under `CAPSAGA_KEK` |
//! | [`SwitchStore`] | `host_switch` | the kill switch: running, read-only, paused |
//! | [`TaskStore`] | `mcp_tasks` | tasks of the MCP tasks extension: status, result, questions, cancel requests |
//! | [`AuditStore`] | all of the above | the tables' current values, for `audit verify` ([`audit`]) |
//! | [`OwnerStore`] | `hosts` (PostgreSQL), lock files (SQLite) | which processes own sagas and whether they are alive |
//!
//! One store, two dialects: what both back ends do is written once, in
//! dialect-neutral modules (the log's records in `records`, row decoding in
//! `decode`, step moves in `transitions`, and the store's logic in `logic`
//! over the backend seam `seam`), and each dialect is an adapter (its SQL
//! where it differs, its parameters, its connections and writer). Their
//! migrations are numbered SQL files (`sqlite/migrations`,
//! `postgres/migrations`).
//!
//! Invariants every implementation keeps (the SQLite one documents how):
//! each write changes its table and appends the matching `wal_log` row in one
//! transaction, so the two views never disagree; a BEGIN is durable before
//! the write returns; an approval is claimed in the transaction of its step's
//! BEGIN, at most once.
//!
//! Saga ownership and fencing: every saga has an owner (the id of the
//! process driving it, [`OwnerStore`]) and a fencing token ([`SagaRow::fence`],
//! 1 at creation, one more at every [`SagaStore::take_over`],
//! [`SagaStore::release_saga`] and [`SagaStore::claim_released`]). Every write
//! that changes a saga or its steps carries the token its writer holds
//! ([`StepKey`], [`NewStep::fence`], [`NewApproval::fence`]); the database
//! refuses one whose token is not the saga's current token
//! ([`StoreError::Fenced`]), in the write's own transaction (a trigger on
//! `saga_steps`, a conditional update of `saga_state`). So a host whose saga
//! was taken over while it was cut off cannot write to it any more, whatever
//! it believes.

pub mod access;
pub mod audit;
mod claim;
pub mod clock;
mod decode;
mod error;
mod logic;
mod neurons;
mod owned;
mod owners;
#[cfg(feature = "postgres")]
pub mod postgres;
mod records;
mod rows;
mod seam;
pub mod sqlite;
pub mod tasks;
#[cfg(any(test, feature = "test-support"))]
pub mod test_support;
mod transitions;
#[cfg(any(test, feature = "test-support"))]
mod upgrade_fixture;

pub use access::{ActiveToken, KeyRow, KeyStore, SwitchStore, TokenOpError, TokenRow, TokenStore};
pub use error::{SCHEMA_VERSION, StoreError};
pub use neurons::{NeuronOpError, NeuronRow, NeuronStore, NewNeuron, Removed, Transition};
pub use owners::{OwnerLease, OwnerRow, OwnerStore};
pub use rows::*;
pub use tasks::{TaskRow, TaskStore};

use async_trait::async_trait;
use capsaga_core::approval::Binding;
use capsaga_core::error::ToolError;
use capsaga_core::fsm::State;
use capsaga_core::tool::ToolOutput;
use serde_json::Value;

/// Sagas (`saga_state`): creation, guardrail state, ownership, plans.
#[async_trait]
pub trait SagaStore: Send + Sync {
    /// Create a saga (logged as a `STATE` record with its origin, label and
    /// the SHA-256 of its plan), owned by `saga.owner` with the fencing
    /// token [`FIRST_FENCE`].
    ///
    /// # Errors
    /// [`StoreError`], including a duplicate saga id.
    async fn create_saga(&self, saga: &NewSaga<'_>) -> Result<(), StoreError>;

    /// Make `owner` the owner of a saga whose owner is `expected` and is not
    /// alive ([`OwnerStore::owner_alive`]; `expected` None: no owner), and
    /// that is not released ([`SagaStore::claim_released`] takes those),
    /// compare and set, so two processes recovering at once cannot both
    /// take it; the saga's fencing token moves to the next value, so writes
    /// carrying the old one are refused from now on. Logged as an `OWNER`
    /// record saying why. `Ok(Some(token))`: the new token;
    /// `Ok(None)`: the owner was not `expected`, or is alive.
    ///
    /// # Errors
    /// [`StoreError`].
    async fn take_over(
        &self,
        saga_id: &str,
        expected: Option<&str>,
        owner: &str,
        why: &str,
    ) -> Result<Option<u64>, StoreError>;

    /// Release a saga between two requests (MCP 2026-07-28 saga handles):
    /// its owner `owner`, holding fencing token `fence`, gives it up with
    /// nothing in doubt; the saga then has no owner and a `released_at`
    /// time ([`SagaRow::released_at`]), crash recovery leaves it alone,
    /// and the next request of its handle, on any host sharing the store,
    /// claims it ([`SagaStore::claim_released`]). Compare and set on the
    /// owner and the token; the token moves to the next value, so a write
    /// of the releasing host is refused from now on. Logged as an `OWNER`
    /// record (`owner` null, `released` true). `Ok(Some(token))`: the new
    /// token; `Ok(None)`: `owner` or `fence` is not the saga's any more.
    ///
    /// # Errors
    /// [`StoreError`].
    async fn release_saga(
        &self,
        saga_id: &str,
        owner: &str,
        fence: u64,
    ) -> Result<Option<u64>, StoreError>;

    /// Make `owner` the owner of a released saga (compare and set: of two
    /// hosts claiming it at once, one gets it), clearing `released_at`;
    /// with `idle_ms`, only when it was released at least that long ago
    /// (by the database's clock for PostgreSQL): the sweep of abandoned
    /// handles. The token moves to the next value. Logged as an `OWNER`
    /// record saying why. `Ok(Some(token))`: the new token; `Ok(None)`: it
    /// is not released (any more), or not for that long.
    ///
    /// # Errors
    /// [`StoreError`].
    async fn claim_released(
        &self,
        saga_id: &str,
        owner: &str,
        why: &str,
        idle_ms: Option<u64>,
    ) -> Result<Option<u64>, StoreError>;

    /// Record a guardrail transition to `state` by `event`, with `extra`
    /// details (a JSON object, e.g. who made an operator's transition)
    /// merged into its `STATE` record, by the holder of fencing token
    /// `fence`.
    ///
    /// # Errors
    /// [`StoreError`]; [`StoreError::Decode`] when the saga does not exist;
    /// [`StoreError::Fenced`] when `fence` is not its current token.
    async fn set_state(
        &self,
        saga_id: &str,
        fence: u64,
        state: State,
        event: &str,
        extra: Option<&Value>,
    ) -> Result<(), StoreError>;

    /// The saga's row.
    ///
    /// # Errors
    /// [`StoreError`].
    async fn saga(&self, saga_id: &str) -> Result<Option<SagaRow>, StoreError>;

    /// The ids of the sagas whose id starts with `prefix` (an exact id
    /// included), at most `limit`, in id order (for ids given by a unique
    /// prefix).
    ///
    /// # Errors
    /// [`StoreError`].
    async fn saga_ids_starting(
        &self,
        prefix: &str,
        limit: usize,
    ) -> Result<Vec<String>, StoreError>;

    /// The plan a saga was started with (canonical JSON), if any.
    ///
    /// # Errors
    /// [`StoreError`].
    async fn saga_plan(&self, saga_id: &str) -> Result<Option<String>, StoreError>;

    /// Sagas, newest first (at most `limit`).
    ///
    /// # Errors
    /// [`StoreError`].
    async fn sagas(&self, limit: usize) -> Result<Vec<SagaRow>, StoreError>;

    /// The sagas started by `principal`, newest first (at most `limit`).
    ///
    /// # Errors
    /// [`StoreError`].
    async fn sagas_of(&self, principal: &str, limit: usize) -> Result<Vec<SagaRow>, StoreError>;

    /// One page of the sagas matching `q`, newest first: rows `offset ..
    /// offset + limit`, and whether more match past them (the operator
    /// console's list, issue 29).
    ///
    /// # Errors
    /// [`StoreError`].
    async fn saga_page(
        &self,
        q: &SagaQuery,
        offset: usize,
        limit: usize,
    ) -> Result<(Vec<SagaRow>, bool), StoreError>;

    /// Sagas not in a terminal state (crashed or still running), oldest
    /// first.
    ///
    /// # Errors
    /// [`StoreError`].
    async fn unfinished_sagas(&self) -> Result<Vec<SagaRow>, StoreError>;

    /// FailedRollbackPartial sagas, oldest first, each with its
    /// COMPENSATION_FAILED steps (newest first) and their errors.
    ///
    /// # Errors
    /// [`StoreError`].
    async fn needs_operator(&self) -> Result<Vec<NeedsOperator>, StoreError>;
}

/// Steps (`saga_steps`): the write-ahead records of each tool call.
#[async_trait]
pub trait StepStore: Send + Sync {
    /// Write the BEGIN record of a step (durable when this returns) and, in
    /// the same transaction, claim `s.approval` if given; unless its
    /// idempotency key exists (see [`BeginOutcome`]).
    ///
    /// # Errors
    /// [`StoreError`].
    async fn begin_step(&self, s: &NewStep<'_>) -> Result<BeginOutcome, StoreError>;

    /// BEGIN → COMMIT with the output.
    ///
    /// # Errors
    /// [`StoreError`], including a step not in BEGIN;
    /// [`StoreError::Fenced`] when `key.fence` is not the saga's token (as
    /// for every write of this trait but the reads).
    async fn commit_step(&self, key: StepKey<'_>, output: &ToolOutput) -> Result<(), StoreError>;

    /// BEGIN → FAIL with the error.
    ///
    /// # Errors
    /// [`StoreError`], including a step not in BEGIN.
    async fn fail_step(&self, key: StepKey<'_>, error: &ToolError) -> Result<(), StoreError>;

    /// Record the label of what a settled step brought into its saga
    /// (information flow, issue 47): kept with the step and appended to the
    /// log as a `LABEL` record (in its hash chain), fenced like every write
    /// about the saga.
    ///
    /// # Errors
    /// [`StoreError`]; a stale fence; no such step.
    async fn label_step(
        &self,
        key: StepKey<'_>,
        label: &serde_json::Value,
    ) -> Result<(), StoreError>;

    /// Log that step `step_seq` failed in a way that does not prove it did
    /// nothing (the host stopped it or refused its output after it ran): an
    /// `IN_DOUBT` record with the error; the step stays BEGIN, with the
    /// error as its last error, so that rollback (and crash recovery)
    /// compensates it from its dry-run pre-image.
    ///
    /// # Errors
    /// [`StoreError`], including a step not in BEGIN.
    async fn in_doubt(&self, key: StepKey<'_>, error: &ToolError) -> Result<(), StoreError>;

    /// Log a failed attempt of a step that will be retried: a `RETRY`
    /// record with the attempt number (from 1), the delay (ms) and the
    /// error; the step stays BEGIN, with the error as its last error.
    ///
    /// # Errors
    /// [`StoreError`], including a step not in BEGIN.
    async fn retry_attempt(
        &self,
        key: StepKey<'_>,
        attempt: u32,
        delay_ms: u64,
        error: &ToolError,
    ) -> Result<(), StoreError>;

    /// COMMIT, BEGIN (in doubt), COMPENSATION_FAILED (operator retry) or
    /// FAIL (a failed step whose file changes the host restored) →
    /// COMPENSATED.
    ///
    /// # Errors
    /// [`StoreError`].
    async fn compensated(&self, key: StepKey<'_>) -> Result<(), StoreError>;

    /// Log what the host restored of a step's files from its journal (issue
    /// 28): an `FS_RESTORE` record with `report` (each path and what was
    /// done to it); the step's status is unchanged. Fenced like every write
    /// of a step: refused when `key.fence` is not the saga's token.
    ///
    /// # Errors
    /// [`StoreError::Fenced`], [`StoreError`] (including a step that does
    /// not exist).
    async fn fs_restored(
        &self,
        key: StepKey<'_>,
        report: &serde_json::Value,
    ) -> Result<(), StoreError>;

    /// COMMIT, BEGIN, COMPENSATION_FAILED or FAIL → COMPENSATION_FAILED with
    /// the error.
    ///
    /// # Errors
    /// [`StoreError`].
    async fn compensation_failed(
        &self,
        key: StepKey<'_>,
        error: &ToolError,
    ) -> Result<(), StoreError>;

    /// The steps of a saga, by position.
    ///
    /// # Errors
    /// [`StoreError`].
    async fn steps(&self, saga_id: &str) -> Result<Vec<StepRow>, StoreError>;

    /// The step with this idempotency key.
    ///
    /// # Errors
    /// [`StoreError`].
    async fn step_by_key(&self, key: &str) -> Result<Option<StepRow>, StoreError>;

    /// The step logged at position `step_seq` of a saga, if any.
    ///
    /// # Errors
    /// [`StoreError`].
    async fn step_at(&self, saga_id: &str, step_seq: u64) -> Result<Option<StepRow>, StoreError>;
}

/// The write-ahead log (`wal_log`) and its anchored head (`wal_head`):
/// appended to by every write of the other traits, read here.
#[async_trait]
pub trait LogStore: Send + Sync {
    /// The records of one saga (or all records when `saga_id` is None), by
    /// position.
    ///
    /// # Errors
    /// [`StoreError`], including a row that does not decode.
    async fn log(&self, saga_id: Option<&str>) -> Result<Vec<LogRow>, StoreError>;

    /// The anchored head: (seq, hash) of the newest record written.
    ///
    /// # Errors
    /// [`StoreError`].
    async fn head(&self) -> Result<Option<(i64, String)>, StoreError>;

    /// The log as the hash chains it is made of, each with its anchored
    /// head, for `capsaga audit verify`. The default is one chain,
    /// [`capsaga_core::wal_row::SHARED_CHAIN`], of every row (the SQLite
    /// store); the PostgreSQL store has one chain per writer (see its
    /// `log.rs`).
    ///
    /// # Errors
    /// [`StoreError`], including a row that does not decode.
    async fn chains(&self) -> Result<Vec<LogChain>, StoreError> {
        Ok(vec![LogChain {
            name: capsaga_core::wal_row::SHARED_CHAIN.to_string(),
            rows: self.log(None).await?,
            head: self.head().await?,
        }])
    }
}

/// One hash chain of the log (see [`LogStore::chains`]).
#[derive(Debug, Clone, PartialEq)]
pub struct LogChain {
    /// Its name: [`capsaga_core::wal_row::SHARED_CHAIN`], or a writer's
    /// chain id (PostgreSQL).
    pub name: String,
    /// Its rows, by `seq`.
    pub rows: Vec<LogRow>,
    /// Its anchored head (seq, hash), None when it has no row (or the head
    /// row is missing).
    pub head: Option<(i64, String)>,
}

/// Human approvals (`approvals`; see `capsaga_core::approval` for their life
/// and binding). The claim is written by [`StepStore::begin_step`].
#[async_trait]
pub trait ApprovalStore: Send + Sync {
    /// Record a pending approval for a step and park its saga in
    /// AwaitingApproval (the caller has checked the transition with the
    /// guardrail), in one transaction.
    ///
    /// # Errors
    /// [`StoreError`], including an approval already requested for this
    /// step.
    async fn request_approval(&self, a: &NewApproval<'_>) -> Result<ApprovalRow, StoreError>;

    /// Record a human's decision on a pending approval: `approve` or deny,
    /// by `by` (e.g. `cli:alice`), with an optional note.
    ///
    /// # Errors
    /// [`ApprovalOpError::NotFound`]/[`ApprovalOpError::Ambiguous`] for a bad
    /// id, [`ApprovalOpError::Refused`] when it is not pending any more.
    async fn decide_approval(
        &self,
        id: &str,
        approve: bool,
        by: &str,
        note: Option<&str>,
    ) -> Result<ApprovalRow, ApprovalOpError>;

    /// The approval with id `id`, or the only one whose id starts with `id`
    /// (at least [`MIN_ID_PREFIX`] characters).
    ///
    /// # Errors
    /// [`ApprovalOpError::NotFound`], [`ApprovalOpError::Ambiguous`] or
    /// [`ApprovalOpError::Store`].
    async fn approval(&self, id: &str) -> Result<ApprovalRow, ApprovalOpError>;

    /// The approval requested last by step `step_seq` of a saga, if any.
    ///
    /// # Errors
    /// [`StoreError`].
    async fn approval_for_step(
        &self,
        saga_id: &str,
        step_seq: u64,
    ) -> Result<Option<ApprovalRow>, StoreError>;

    /// The approved, unclaimed approvals with exactly this binding that are
    /// not expired at `now` (RFC 3339) and that saga `claimant` may claim
    /// (`capsaga_core::approval::may_claim`: requested by `claimant`
    /// itself, or by a saga that has ended and was recorded with the same
    /// principal as `claimant`), oldest first, each with what that rule
    /// read of the saga that requested it. The claim in
    /// [`StepStore::begin_step`] checks the same rule again.
    ///
    /// # Errors
    /// [`StoreError`].
    async fn find_approved(
        &self,
        binding: &Binding,
        now: &str,
        claimant: &str,
    ) -> Result<Vec<Approved>, StoreError>;

    /// Approvals, oldest first: only pending ones, or all when `all`.
    ///
    /// # Errors
    /// [`StoreError`].
    async fn approvals(&self, all: bool) -> Result<Vec<ApprovalRow>, StoreError>;
}

/// Execution traces of agent turns (`traces`).
#[async_trait]
pub trait TraceStore: Send + Sync {
    /// Store a trace (insert or replace).
    ///
    /// # Errors
    /// [`StoreError`].
    async fn save_trace(&self, trace: &TraceRecord<'_>) -> Result<(), StoreError>;

    /// The JSON text of a trace: by id, by a unique id prefix of at least 4
    /// characters, or the newest with `last`. `None` when nothing matches
    /// (or `id` is not an id).
    ///
    /// # Errors
    /// [`StoreError`].
    async fn load_trace(&self, id: &str) -> Result<Option<String>, StoreError>;

    /// The id of the newest trace of the agent turn that ran as saga
    /// `saga_id` (a saga has at most one turn; `None` for a saga of another
    /// origin, or an id naming no saga).
    ///
    /// # Errors
    /// [`StoreError`].
    async fn trace_of_saga(&self, saga_id: &str) -> Result<Option<String>, StoreError>;
}

/// Model spend per UTC day (`budget_days`) and the reservations of calls in
/// flight (`budget_reservations`), shared by every process (and, for a
/// shared store, every host) on the workspace.
///
/// Reserve before spending, settle after (seed 003; the rules are
/// `capsaga_core::budget::reserve`): [`BudgetStore::reserve_spend`] checks
/// the day's spend plus the reservations not yet expired plus the new
/// estimate against the hard cap and records the reservation, in one write
/// transaction (so concurrent callers, in any process, are serialised);
/// [`BudgetStore::settle_spend`] replaces a reservation by what the call
/// cost. A reservation never settled (its process died) stops counting
/// once expired, and is deleted by a later reservation.
#[async_trait]
pub trait BudgetStore: Send + Sync {
    /// What `day` (`YYYY-MM-DD`) has spent, USD.
    ///
    /// # Errors
    /// [`StoreError`].
    async fn day_spent(&self, day: &str) -> Result<f64, StoreError>;

    /// What reservations of `day` not yet expired hold, USD.
    ///
    /// # Errors
    /// [`StoreError`].
    async fn day_reserved(&self, day: &str) -> Result<f64, StoreError>;

    /// Reserve `r.usd` for a call if the day's hard cap admits it (spent +
    /// reserved + this, `capsaga_core::budget::reserve::admits`), in one
    /// write transaction, durable when this returns; expired reservations
    /// are deleted first.
    ///
    /// # Errors
    /// [`StoreError`], including a duplicate id.
    async fn reserve_spend(&self, r: &NewReservation<'_>) -> Result<Reserved, StoreError>;

    /// Replace reservation `id` (of `day`) by the call's cost `usd` and its
    /// tokens, in one transaction: the reservation is deleted (whether or
    /// not it had expired) and the cost added to `day`'s counters (a call
    /// with no cost and no tokens is not counted: nothing was sent).
    ///
    /// # Errors
    /// [`StoreError`].
    async fn settle_spend(
        &self,
        id: &str,
        day: &str,
        usd: f64,
        input_tokens: u64,
        output_tokens: u64,
    ) -> Result<(), StoreError> {
        self.settle_spend_learnt(id, day, usd, (input_tokens, output_tokens), None)
            .await
    }

    /// [`BudgetStore::settle_spend`] (`tokens` are input, output), and,
    /// for a call that was charged, what it taught about its provider's
    /// reports recorded in the same transaction (`budget_ratios`: per
    /// provider, model asked and day, the calls, what they reserved and
    /// were charged, what passed the reservations, the largest ratios per
    /// side).
    ///
    /// # Errors
    /// [`StoreError`].
    async fn settle_spend_learnt(
        &self,
        id: &str,
        day: &str,
        usd: f64,
        tokens: (u64, u64),
        learnt: Option<&Learnt<'_>>,
    ) -> Result<(), StoreError>;

    /// The largest ratios `provider`'s reports for `model` showed on the
    /// days from `since_day` (`YYYY-MM-DD`) on; zero per side when none.
    ///
    /// # Errors
    /// [`StoreError`].
    async fn usage_ratios(
        &self,
        provider: &str,
        model: &str,
        since_day: &str,
    ) -> Result<capsaga_core::budget::learn::Ratios, StoreError>;

    /// What providers' reports cost beyond the estimates, per day,
    /// provider and model, from `since_day` on, newest day first.
    ///
    /// # Errors
    /// [`StoreError`].
    async fn budget_gaps(&self, since_day: &str) -> Result<Vec<GapRow>, StoreError>;

    /// Add one model call's cost (USD) and tokens to `day`'s counters.
    ///
    /// # Errors
    /// [`StoreError`].
    async fn record_spend(
        &self,
        day: &str,
        usd: f64,
        input_tokens: u64,
        output_tokens: u64,
    ) -> Result<(), StoreError>;

    /// The newest `limit` days of counters, newest first.
    ///
    /// # Errors
    /// [`StoreError`].
    async fn budget_days(&self, limit: usize) -> Result<Vec<DayRow>, StoreError>;
}

/// What `audit verify` compares the log with.
#[async_trait]
pub trait AuditStore: Send + Sync {
    /// The current value of every saga, step and approval row.
    ///
    /// # Errors
    /// [`StoreError`].
    async fn table_states(&self) -> Result<TableStates, StoreError>;
}

/// The whole store, as the host holds it (`Arc<dyn Store>`).
pub trait Store:
    SagaStore
    + StepStore
    + LogStore
    + ApprovalStore
    + TraceStore
    + BudgetStore
    + AuditStore
    + NeuronStore
    + OwnerStore
    + TokenStore
    + KeyStore
    + SwitchStore
    + TaskStore
    + std::fmt::Debug
{
}

impl<T> Store for T where
    T: SagaStore
        + StepStore
        + LogStore
        + ApprovalStore
        + TraceStore
        + BudgetStore
        + AuditStore
        + NeuronStore
        + OwnerStore
        + TokenStore
        + KeyStore
        + SwitchStore
        + TaskStore
        + std::fmt::Debug
{
}
