//! The ReAct loop with native function calling (seed 000 §2-§5).
//!
//! One turn is one saga. Before each model call the budget is checked (a
//! hard cap ends the turn as `budget_hit` with no call; a soft cap moves the
//! call to the cheaper tier); each answer is a Thought, priced from the price
//! table and added to the day's counters. Each tool call in it is validated
//! (unknown tool, schema, duplicate keys) and an invalid one is answered with
//! a `tool_error` message the model can act on; two invalid calls in a row
//! end the turn as `tool_hallucination`. A valid call is decided by the
//! policy at the turn's autonomy level: denied ends the turn as
//! `policy_denied`; needing a human goes through [`super::approval`].
//! Allowed calls run as saga steps. Results of `returns-untrusted` tools are
//! wrapped in `<untrusted>` markers; results over [`MAX_RESULT_BYTES`] are
//! truncated by the host with a note. A final answer ends the saga (Done);
//! any other end rolls back what committed. Critic steps record the turn's
//! fitness and every neutralised marker-like sequence (safety).

use super::budget::{Budget, BudgetLoadError};
use super::prompt::{DEFAULT_IDENTITY, system_prompt};
use super::provider::{ChatRequest, Message, Provider, Tier, ToolSpec};
use super::reply::Next;
use super::trace::{self, ExecutionTrace, Outcome, PolicyDecision, TraceStep, Validation};
use crate::db::{DbError, now_rfc3339};
use crate::host::Host;
use crate::saga::{Saga, SagaError, StepOutcome};
use crate::wal::Origin;
use capsaga_core::budget::BudgetState;
use capsaga_core::error::{ErrorKind, ToolError};
use capsaga_core::fsm::State;
use capsaga_core::policy::{Autonomy, Decision, decide_at, offered};
use capsaga_core::untrusted;
use capsaga_core::validate::{CallError, unknown_tool};
use std::time::Instant;

/// Tool results longer than this many bytes are truncated for the model.
pub const MAX_RESULT_BYTES: usize = 2048;
/// Invalid calls in a row that end the turn as `tool_hallucination`.
pub const MAX_CONSECUTIVE_INVALID: u32 = 2;

/// Options of one turn.
#[derive(Debug, Clone)]
pub struct TurnOptions {
    /// Most model calls in the turn (then `timeout_steps`).
    pub max_steps: usize,
    /// Session id (stable across a conversation).
    pub session_id: String,
    /// Channel label, e.g. `cli`.
    pub channel: String,
    /// The autonomy level the request asks for; the operator's level is the
    /// ceiling (`None`: the operator's).
    pub autonomy: Option<Autonomy>,
    /// The role or call kind, selecting a provider order.
    pub role: Option<String>,
    /// How the provider was chosen (`scripted (...)`, `live (...)`), for the
    /// trace.
    pub provider_mode: String,
    /// Whether a human can be asked to approve a call (see
    /// [`super::approval`]); the default never asks.
    pub prompt: super::approval::TurnPrompt,
}

impl Default for TurnOptions {
    fn default() -> Self {
        TurnOptions {
            max_steps: 16,
            session_id: uuid::Uuid::new_v4().to_string(),
            channel: "cli".into(),
            autonomy: None,
            role: None,
            provider_mode: String::new(),
            prompt: super::approval::TurnPrompt::Never,
        }
    }
}

/// Why a turn could not run at all.
#[derive(Debug, thiserror::Error)]
pub enum AgentError {
    /// The saga engine failed.
    #[error(transparent)]
    Saga(#[from] SagaError),
    /// The trace could not be stored.
    #[error(transparent)]
    Db(#[from] DbError),
    /// The price table or the budget counters are unusable.
    #[error(transparent)]
    Budget(#[from] BudgetLoadError),
}

/// Truncate `text` to [`MAX_RESULT_BYTES`] on a character boundary, with a
/// note giving the full size.
pub fn truncate_result(text: &str) -> String {
    if text.len() <= MAX_RESULT_BYTES {
        return text.to_string();
    }
    let mut cut = MAX_RESULT_BYTES;
    while !text.is_char_boundary(cut) {
        cut -= 1;
    }
    format!(
        "{}\n[... truncated, {} bytes total]",
        &text[..cut],
        text.len()
    )
}

/// The catalog the model sees at the operator's autonomy level.
pub fn catalog(host: &Host) -> Vec<ToolSpec> {
    catalog_at(host, Autonomy::Autonomous)
}

/// The catalog the model sees at autonomy `requested` (narrowed by the
/// operator's): callable tools (grants satisfied) whose calls the policy
/// does not always deny. A tool offered only with a human's approval is
/// listed; a `read_only` turn sees no tool with side effects.
pub fn catalog_at(host: &Host, requested: Autonomy) -> Vec<ToolSpec> {
    host.registry
        .tools()
        .filter(|t| t.grants.is_ok())
        .filter(|t| {
            offered(
                t.meta.risk,
                t.meta.has_side_effects,
                host.config.policy.section(&t.meta.name),
                requested,
            )
        })
        .map(|t| ToolSpec {
            name: t.meta.name.clone(),
            description: t.meta.description.clone(),
            parameters: t.meta.args_schema.clone(),
            grants: t.grant_strings(),
        })
        .collect()
}

/// Run one agent turn for `task` with `provider`. The trace is stored before
/// it is returned.
///
/// # Errors
/// [`AgentError`] when the saga engine, the database or the price table
/// fails; everything the model or a tool does wrong ends up in the trace's
/// outcome instead.
pub async fn run_turn(
    host: &Host,
    provider: &dyn Provider,
    task: &str,
    opts: &TurnOptions,
) -> Result<ExecutionTrace, AgentError> {
    let started = Instant::now();
    let budget = Budget::open(&host.config, &host.db)?;
    let autonomy = host
        .config
        .policy
        .autonomy
        .narrow(opts.autonomy.unwrap_or(Autonomy::Autonomous));
    let mut saga = Saga::start(host, Origin::Agent, task)?;
    let mut tr = ExecutionTrace {
        trace_id: uuid::Uuid::new_v4().to_string(),
        session_id: opts.session_id.clone(),
        channel: opts.channel.clone(),
        saga_id: Some(saga.id().to_string()),
        saga_state: None,
        started_at: now_rfc3339(),
        finished_at: None,
        user_message: task.to_string(),
        steps: Vec::new(),
        final_response: None,
        cost_usd: 0.0,
        prompt_tokens: 0,
        response_tokens: 0,
        wall_time_ms: 0,
        outcome: Outcome::TimeoutSteps,
        provider_mode: if opts.provider_mode.is_empty() {
            provider.name().to_string()
        } else {
            opts.provider_mode.clone()
        },
        autonomy: Some(autonomy),
    };
    let tools = catalog_at(host, autonomy);
    let callable: Vec<&str> = tools.iter().map(|t| t.name.as_str()).collect();
    let mut request = ChatRequest::new(
        system_prompt(DEFAULT_IDENTITY, &tools, ""),
        vec![Message::user(task)],
        tools.clone(),
    );
    request.max_tokens = host
        .config
        .policy
        .agent
        .max_tokens
        .unwrap_or(capsaga_core::providers::DEFAULT_MAX_TOKENS);
    request.role = opts.role.clone();
    let mut invalid_in_a_row = 0u32;
    let mut rollback_state: Option<State> = None;

    'turn: for _ in 0..opts.max_steps {
        // Budget: a hard cap ends the turn before anything is sent.
        request.tier = match budget.state(tr.cost_usd)? {
            BudgetState::Normal => Tier::Normal,
            BudgetState::Soft { reason } => {
                if request.tier == Tier::Normal {
                    tracing::warn!("{reason}: using the cheaper tier");
                }
                Tier::Cheap
            }
            BudgetState::Hard { reason } => {
                tr.outcome = Outcome::BudgetHit;
                tr.final_response = Some(format!("budget_hit: {reason}; no model call was made"));
                break 'turn;
            }
        };
        let t0 = Instant::now();
        let resp = match provider.complete(&request).await {
            Ok(r) => r,
            Err(e) => {
                super::reply::record_failure(&mut tr, &budget, provider, &request, &e, t0)?;
                break 'turn;
            }
        };
        // Classified by `super::reply`: a truncated or refused answer ends
        // the turn with none of its calls run.
        let next = super::reply::record_answer(&mut tr, &budget, &request, &resp, t0)?;
        request.messages.push(Message::assistant(
            resp.text.clone(),
            resp.tool_calls.clone(),
        ));
        match next {
            Next::Calls => {}
            Next::Continue => continue 'turn,
            Next::End => break 'turn,
            Next::Answer => {
                tr.final_response = Some(resp.text.clone());
                tr.outcome = Outcome::Success;
                break 'turn;
            }
        }
        for call in &resp.tool_calls {
            let t1 = Instant::now();
            // Validation.
            let checked = match host.registry.get(&call.name).filter(|t| t.grants.is_ok()) {
                None => Err((Validation::UnknownTool, unknown_tool(&call.name, &callable))),
                Some(t) => t
                    .validator
                    .check_text(&call.arguments)
                    .map(|args| (t, args))
                    .map_err(|e| (Validation::SchemaError, e)),
            };
            let (tool, args) = match checked {
                Ok(ok) => ok,
                Err((validation, err)) => {
                    invalid_in_a_row += 1;
                    record_invalid(&mut tr, call, validation, &err, t1);
                    request
                        .messages
                        .push(Message::tool(&call.id, err.to_model_message(), true));
                    if invalid_in_a_row >= MAX_CONSECUTIVE_INVALID {
                        tr.outcome = Outcome::ToolHallucination;
                        break 'turn;
                    }
                    continue;
                }
            };
            invalid_in_a_row = 0;
            // Policy at the turn's autonomy level.
            let decision = decide_at(
                tool.meta.risk,
                tool.meta.has_side_effects,
                host.config.policy.section(&tool.meta.name),
                autonomy,
            );
            let policy_decision = match &decision {
                Decision::Allow => PolicyDecision::Allow,
                Decision::Deny { .. } => PolicyDecision::Deny,
                Decision::ApproveRequired { .. } => PolicyDecision::ApproveRequired,
            };
            if let Decision::Deny { reason } = &decision {
                let error = ToolError::new(
                    ErrorKind::PermissionDenied,
                    format!("policy: {reason}"),
                    "The operator does not allow this call; the turn ends here.",
                );
                request
                    .messages
                    .push(Message::tool(&call.id, error.to_model_text(), true));
                tr.steps.push(TraceStep::Action {
                    tool_name: call.name.clone(),
                    call_id: call.id.clone(),
                    args: args.clone(),
                    validation: Validation::Ok,
                    policy_decision,
                    step_seq: None,
                    exec_result: None,
                    error: Some(error),
                    wall_ms: t1.elapsed().as_millis() as u64,
                });
                tr.outcome = Outcome::PolicyDenied;
                tr.final_response = Some(format!(
                    "policy_denied: `{}` is not allowed ({reason})",
                    tool.meta.name
                ));
                break 'turn;
            }
            // Execution as a saga step at the turn's autonomy level (the saga
            // parks a call that needs a human; see `super::approval`).
            let mut safety: Option<TraceStep> = None;
            saga.set_autonomy(autonomy);
            let stepped =
                super::approval::step(&mut saga, &tool.meta.name, &args, opts.prompt).await?;
            let outcome = stepped.outcome;
            let (content, is_error, step_seq, exec_result, error) = match &outcome {
                StepOutcome::Committed { seq, output, .. } => {
                    let text = truncate_result(&output.data.to_string());
                    let text = if tool.meta.returns_untrusted {
                        let source = format!("tool:{}", tool.meta.name);
                        let (wrapped, neutralised) =
                            untrusted::wrap_counted(&source, &now_rfc3339(), &text);
                        if neutralised > 0 {
                            safety = Some(TraceStep::Critic {
                                purpose: "safety".into(),
                                input: source,
                                verdict: "neutralised".into(),
                                reason: format!(
                                    "{neutralised} marker-like sequence(s) in untrusted content were neutralised before the model saw them"
                                ),
                            });
                        }
                        wrapped
                    } else {
                        text
                    };
                    (text, false, Some(*seq), Some(output.data.clone()), None)
                }
                StepOutcome::ReadFailed { seq, error, .. }
                | StepOutcome::Failed { seq, error, .. } => (
                    error.to_model_text(),
                    true,
                    Some(*seq),
                    None,
                    Some(error.clone()),
                ),
                StepOutcome::Refused { error } => {
                    (error.to_model_text(), true, None, None, Some(error.clone()))
                }
                StepOutcome::AwaitingApproval { seq, approval } => {
                    let error = capsaga_core::error::ToolError::new(
                        capsaga_core::error::ErrorKind::PermissionDenied,
                        super::approval::ended_message(approval, stepped.denied_by.as_deref()),
                        "This call was not approved; end the turn.",
                    );
                    (error.to_model_text(), true, Some(*seq), None, Some(error))
                }
            };
            tr.steps.push(TraceStep::Action {
                tool_name: call.name.clone(),
                call_id: call.id.clone(),
                args: args.clone(),
                validation: Validation::Ok,
                policy_decision: stepped.policy_decision,
                step_seq,
                exec_result,
                error,
                wall_ms: t1.elapsed().as_millis() as u64,
            });
            tr.steps.extend(safety);
            request
                .messages
                .push(Message::tool(&call.id, content, is_error));
            if let StepOutcome::Failed { rollback, .. } = &outcome {
                tr.outcome = Outcome::RolledBack;
                rollback_state = Some(rollback.final_state);
                break 'turn;
            }
            if let StepOutcome::AwaitingApproval { approval, .. } = &outcome {
                // Nobody approved: nothing of the call ran; the end of the
                // turn rolls the parked saga back.
                tr.outcome = Outcome::UserAborted;
                tr.final_response = Some(super::approval::ended_message(
                    approval,
                    stepped.denied_by.as_deref(),
                ));
                break 'turn;
            }
        }
    }

    let final_state = match (tr.outcome, rollback_state) {
        (_, Some(state)) => state,
        (Outcome::Success, None) => saga.finish()?,
        (_, None) => saga.abort().await?.final_state,
    };
    tr.saga_state = Some(final_state);
    tr.steps
        .push(fitness(&tr, final_state, saga.side_effects()));
    tr.finished_at = Some(now_rfc3339());
    tr.wall_time_ms = started.elapsed().as_millis() as u64;
    trace::save(&host.db, &tr)?;
    Ok(tr)
}

/// The closing critic step: how the turn ended and why.
fn fitness(tr: &ExecutionTrace, state: State, side_effects: u64) -> TraceStep {
    let thoughts = tr
        .steps
        .iter()
        .filter(|s| matches!(s, TraceStep::Thought { .. }))
        .count();
    let actions = tr
        .steps
        .iter()
        .filter(|s| matches!(s, TraceStep::Action { .. }))
        .count();
    let invalid = tr
        .steps
        .iter()
        .filter(
            |s| matches!(s, TraceStep::Action { validation, .. } if *validation != Validation::Ok),
        )
        .count();
    TraceStep::Critic {
        purpose: "fitness".into(),
        input: format!(
            "{thoughts} model call(s), {actions} tool call(s) ({invalid} invalid), {side_effects} side effect(s) committed, ${:.6}",
            tr.cost_usd
        ),
        verdict: if tr.outcome == Outcome::Success {
            "pass".into()
        } else {
            "fail".into()
        },
        reason: format!("outcome {}, saga {state}", tr.outcome.as_str()),
    }
}

fn record_invalid(
    tr: &mut ExecutionTrace,
    call: &super::provider::ToolCall,
    validation: Validation,
    err: &CallError,
    t1: Instant,
) {
    let args =
        capsaga_core::json::parse_strict(&call.arguments, capsaga_core::validate::MAX_ARGS_LEN)
            .unwrap_or_else(|_| {
                serde_json::Value::String(call.arguments.chars().take(4096).collect())
            });
    tr.steps.push(TraceStep::Action {
        tool_name: call.name.chars().take(200).collect(),
        call_id: call.id.clone(),
        args,
        validation,
        policy_decision: PolicyDecision::NotEvaluated,
        step_seq: None,
        exec_result: None,
        error: Some(capsaga_core::error::ToolError::new(
            capsaga_core::error::ErrorKind::InvalidArgs,
            err.to_string(),
            err.to_model_message(),
        )),
        wall_ms: t1.elapsed().as_millis() as u64,
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn truncation_note_and_boundary() {
        assert_eq!(truncate_result("short"), "short");
        let long = "é".repeat(2000);
        let t = truncate_result(&long);
        assert!(t.ends_with("[... truncated, 4000 bytes total]"), "{t}");
        assert!(t.len() < 2100);
    }
}
