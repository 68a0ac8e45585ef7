//! The ExecutionTrace (seed 000 §5): everything that happened in one agent
//! turn (thought, action and critic steps, tokens, cost, wall time, outcome),
//! persisted in the `traces` table of the state database.

use super::provider::{Attempt, Tier};
use capsaga_core::error::ToolError;
use capsaga_core::fsm::State;
use capsaga_core::policy::Autonomy;
use capsaga_store::{Store, StoreError, TraceRecord};
use serde::{Deserialize, Serialize};

/// How a turn ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Outcome {
    /// The model gave a final answer and every step committed.
    Success,
    /// Two invalid tool calls in a row.
    ToolHallucination,
    /// The policy refused a call.
    PolicyDenied,
    /// A human refused (or no human could be asked).
    UserAborted,
    /// A budget cap was hit.
    BudgetHit,
    /// The step limit was reached.
    TimeoutSteps,
    /// A side-effecting step failed and the saga was rolled back (capsaga's
    /// addition to the seed's list).
    RolledBack,
    /// The model provider failed (capsaga's addition).
    ProviderError,
    /// The model's answer was cut off at the output-token limit (or a full
    /// context window); none of its tool calls ran (capsaga's addition).
    Truncated,
    /// The model refused, or the provider's content filter withheld the
    /// answer (capsaga's addition).
    Refused,
    /// Every try answered with something that is not a usable answer in the
    /// wire format, e.g. tool calls announced but none sent (capsaga's
    /// addition).
    MalformedAnswer,
}

impl Outcome {
    /// The stored name.
    pub fn as_str(self) -> &'static str {
        match self {
            Outcome::Success => "success",
            Outcome::ToolHallucination => "tool_hallucination",
            Outcome::PolicyDenied => "policy_denied",
            Outcome::UserAborted => "user_aborted",
            Outcome::BudgetHit => "budget_hit",
            Outcome::TimeoutSteps => "timeout_steps",
            Outcome::RolledBack => "rolled_back",
            Outcome::ProviderError => "provider_error",
            Outcome::Truncated => "truncated",
            Outcome::Refused => "refused",
            Outcome::MalformedAnswer => "malformed_answer",
        }
    }
}

/// Result of validating a tool call.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Validation {
    /// Valid.
    Ok,
    /// The args did not match the schema (or were not JSON).
    SchemaError,
    /// No such tool.
    UnknownTool,
}

/// The policy's decision for a call.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PolicyDecision {
    /// Allowed.
    Allow,
    /// Denied.
    Deny,
    /// A human must approve.
    ApproveRequired,
    /// Not evaluated (the call was invalid).
    NotEvaluated,
}

/// One step of a trace.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum TraceStep {
    /// A model call.
    Thought {
        /// Provider name.
        provider: String,
        /// Model name.
        model: String,
        /// Input tokens (failed tries whose tokens were billed included).
        prompt_tokens: u64,
        /// Output tokens (same).
        response_tokens: u64,
        /// Why it stopped (`stop`, `tool_calls`, `length`, `content_filter`,
        /// `refusal`, `pause_turn`, `other`; `error` when no answer came).
        finish_reason: String,
        /// The provider's own word for it (`end_turn`, `max_tokens`, ...),
        /// when it gave one.
        #[serde(default, skip_serializing_if = "String::is_empty")]
        finish_raw: String,
        /// What was wrong: why the call failed or why its answer ended the
        /// turn (malformed, truncated, refused); `None` when nothing was.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        problem: Option<String>,
        /// Departures from the wire format that were tolerated, and how
        /// they were read (e.g. an empty-string `arguments` read as `{}`).
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        repairs: Vec<String>,
        /// Its text.
        text: String,
        /// Names of the tools it called.
        tool_calls: Vec<String>,
        /// Cost, USD (failed tries whose tokens were billed included).
        cost_usd: f64,
        /// Wall time, milliseconds.
        wall_ms: u64,
        /// Model tier (cheap past a soft budget cap).
        #[serde(default)]
        tier: Tier,
        /// The `tool_choice` sent (`required`, `none`, `tool:NAME`); absent
        /// when the model was left to decide (`auto`).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        tool_choice: Option<String>,
        /// Every provider tried for this thought, in order (failover and
        /// retries); empty for a provider called directly.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        attempts: Vec<Attempt>,
    },
    /// A tool call.
    Action {
        /// Tool name as the model wrote it.
        tool_name: String,
        /// Provider call id.
        call_id: String,
        /// Arguments (parsed when valid, else the raw text as a string).
        args: serde_json::Value,
        /// Validation result.
        validation: Validation,
        /// Policy decision.
        policy_decision: PolicyDecision,
        /// Saga step, when it ran as one.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        step_seq: Option<u64>,
        /// Output data when it succeeded.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        exec_result: Option<serde_json::Value>,
        /// Error when it failed or was refused.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        error: Option<ToolError>,
        /// Whether the result went back to the model wrapped in
        /// `<untrusted>` markers (the door's decision: the tool declares it,
        /// or a grant reaches outside data).
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        untrusted: bool,
        /// What the door's information-flow stage said (issue 47): the
        /// decision, the layer, the failing values and where they came
        /// from, the label of the output.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        flow: Option<serde_json::Value>,
        /// Wall time, milliseconds.
        wall_ms: u64,
    },
    /// A sub-question a tool asked the turn's model through the `llm`
    /// import (`agent::subcall`): charged to the turn like a Thought, sent
    /// with no tools.
    SubCall {
        /// The tool that asked.
        tool_name: String,
        /// Provider that answered (or was tried last); empty when nothing
        /// was sent.
        provider: String,
        /// Model that answered (or was tried last).
        model: String,
        /// Tier used.
        tier: Tier,
        /// Input tokens billed (failed tries included).
        prompt_tokens: u64,
        /// Output tokens billed (failed tries included).
        response_tokens: u64,
        /// Why the model stopped (`error` when no answer came, `refused`
        /// when the budget stopped it before anything was sent).
        finish_reason: String,
        /// What went wrong, if anything.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        problem: Option<String>,
        /// Cost, USD.
        cost_usd: f64,
        /// Wall time, milliseconds.
        wall_ms: u64,
        /// Every provider tried, in order (failover and retries).
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        attempts: Vec<Attempt>,
    },
    /// A judgement about the turn (fitness, safety, quality).
    Critic {
        /// `fitness`, `safety` or `quality`.
        purpose: String,
        /// What was judged.
        input: String,
        /// The verdict.
        verdict: String,
        /// Why.
        reason: String,
    },
}

/// One agent turn.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ExecutionTrace {
    /// UUID v4.
    pub trace_id: String,
    /// Stable across a conversation.
    pub session_id: String,
    /// Where the request came from, e.g. `cli`.
    pub channel: String,
    /// The saga of the turn.
    pub saga_id: Option<String>,
    /// The saga's final guardrail state.
    pub saga_state: Option<State>,
    /// RFC 3339.
    pub started_at: String,
    /// RFC 3339.
    pub finished_at: Option<String>,
    /// The task.
    pub user_message: String,
    /// Steps in order.
    pub steps: Vec<TraceStep>,
    /// The model's final answer.
    pub final_response: Option<String>,
    /// Sum of thought and sub-call costs, USD.
    pub cost_usd: f64,
    /// Sum of prompt tokens.
    pub prompt_tokens: u64,
    /// Sum of response tokens.
    pub response_tokens: u64,
    /// Wall time of the turn, milliseconds.
    pub wall_time_ms: u64,
    /// How it ended.
    pub outcome: Outcome,
    /// How the model provider was chosen: `scripted (...)` or `live (...)`.
    #[serde(default)]
    pub provider_mode: String,
    /// The autonomy level the turn ran at.
    #[serde(default)]
    pub autonomy: Option<Autonomy>,
    /// Whether untrusted data had entered the turn when its final answer
    /// was written (the answer may repeat what that data said).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub after_untrusted: bool,
    /// The tool scope the plan declared, if it declared one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scope: Option<Vec<String>>,
}

/// Store `trace` (insert or replace).
///
/// # Errors
/// [`StoreError`].
pub async fn save(store: &dyn Store, trace: &ExecutionTrace) -> Result<(), StoreError> {
    let json = serde_json::to_string(trace).map_err(|e| StoreError::Decode(e.to_string()))?;
    store
        .save_trace(&TraceRecord {
            trace_id: &trace.trace_id,
            saga_id: trace.saga_id.as_deref(),
            task: &trace.user_message,
            outcome: trace.outcome.as_str(),
            started_at: &trace.started_at,
            finished_at: trace.finished_at.as_deref(),
            wall_ms: trace.wall_time_ms,
            json: &json,
        })
        .await
}

/// Load a trace by id, or by unique id prefix (at least 4 characters), or
/// the newest with `last`.
///
/// # Errors
/// [`StoreError`] (including a damaged row).
pub async fn load(store: &dyn Store, id: &str) -> Result<Option<ExecutionTrace>, StoreError> {
    store
        .load_trace(id)
        .await?
        .map(|j| serde_json::from_str(&j).map_err(|e| StoreError::Decode(format!("trace: {e}"))))
        .transpose()
}
