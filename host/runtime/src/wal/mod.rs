//! The saga write-ahead log in SQLite (DESIGN §5).
//!
//! Two views of the same history, written in one transaction each time:
//! - `saga_steps`: one row per step with its current status (the schema of the
//!   agent-kernel SPEC §2.6 plus the tool's content hash, its effective grants
//!   and the pre-image), what recovery and compensation read;
//! - `wal_log`: an append-only record of every transition (BEGIN, COMMIT,
//!   FAIL, RETRY, COMPENSATED, COMPENSATION_FAILED, STATE, OWNER and the
//!   APPROVAL_* records), each row carrying the SHA-256 of the previous row
//!   and of its own content ([`chain`]), what `capsaga log` shows and
//!   `capsaga audit verify` checks ([`audit`]);
//! - `wal_head`: the anchored head of the log (seq and hash of the newest
//!   row), moved in the same transaction as each append, so that deleting
//!   the newest rows is detected too.
//!
//! `saga_state` holds the guardrail state of each saga, its owner (the
//! process driving it, see `saga::owner`) and its plan; `approvals` holds
//! the approvals ([`approvals`]).

pub mod approvals;
pub mod audit;
pub mod chain;
mod read;
mod store;

/// One row of `wal_log`, decoded (the decoding and the chain are pure logic in `capsaga-core`).
pub use capsaga_core::wal_row::LogRow;
pub use read::{FailedCompensation, NeedsOperator};
pub use store::{BeginOutcome, NewStep, Wal};

use capsaga_core::fsm::State;
use serde::Serialize;

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
}

impl std::fmt::Display for StepStatus {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Where a saga came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Origin {
    /// `capsaga run --plan`.
    Plan,
    /// `capsaga agent`.
    Agent,
    /// `capsaga call`.
    Call,
}

impl Origin {
    /// The stored name.
    pub fn as_str(self) -> &'static str {
        match self {
            Origin::Plan => "plan",
            Origin::Agent => "agent",
            Origin::Call => "call",
        }
    }
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
    /// The id of the process that drives it (see `saga::owner`), if any.
    pub owner: Option<String>,
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
    /// SHA-256 of the component bytes.
    pub tool_hash: String,
    /// Effective grants the step ran with.
    pub grants: Vec<String>,
    /// Whether the tool declared side effects.
    pub has_side_effects: bool,
    /// The idempotency key.
    pub idempotency_key: String,
    /// Arguments (JSON).
    pub args: serde_json::Value,
    /// Dry-run output logged before execute (JSON tool output), if any.
    pub preimage: Option<serde_json::Value>,
    /// Execute output (JSON tool output) once committed.
    pub output: Option<serde_json::Value>,
    /// Current status.
    pub status: StepStatus,
    /// Last error (JSON tool error), if any.
    pub error: Option<serde_json::Value>,
    /// RFC 3339.
    pub created_at: String,
    /// RFC 3339.
    pub updated_at: String,
}
