//! How the agent loop answers each call to the model and records it in the
//! trace, from what the dispatch door did with it: an invalid call gets a
//! `tool_error` (two in a row end the turn), a denied one ends the turn
//! `policy_denied`, a result is truncated and, from a `returns-untrusted`
//! tool, wrapped in `<untrusted>` markers (from any other tool, its
//! marker-like sequences and chat-template tokens neutralised); a tool's
//! error message is wrapped too (it may quote a planted file name or a
//! redirect URL); a failed side effect or an approval not given ends the
//! turn.

use super::provider::{Message, ToolCall};
use super::runner::{MAX_CONSECUTIVE_INVALID, Turn, truncate_result_at};
use super::trace::{ExecutionTrace, Outcome, PolicyDecision, TraceStep, Validation};
use capsaga_core::error::{ErrorKind, ToolError};
use capsaga_core::validate::{CallError, unknown_tool};
use capsaga_door::dispatch::{Outcome as Step, Refusal, Submitted, Verdict};
use capsaga_store::clock::now_rfc3339;
use serde_json::Value;
use std::time::Instant;

impl Turn<'_> {
    /// Record one call's outcome and answer the model. False when the turn
    /// ends here.
    pub(super) fn answer(&mut self, call: &ToolCall, submitted: Submitted, t1: Instant) -> bool {
        let invalid = match &submitted.outcome {
            Step::Refused {
                refusal: Refusal::UnknownTool(_) | Refusal::NotCallable(_),
                ..
            } => {
                let names: Vec<&str> = self.callable.iter().map(String::as_str).collect();
                Some((Validation::UnknownTool, unknown_tool(&call.name, &names)))
            }
            Step::Refused {
                refusal: Refusal::InvalidArgs(e),
                ..
            } => Some((Validation::SchemaError, e.clone())),
            _ => None,
        };
        if let Some((validation, err)) = invalid {
            return self.invalid(call, validation, &err, t1);
        }
        self.invalid_in_a_row = 0;
        if let Step::Refused {
            refusal: Refusal::Denied { reason },
            ..
        } = &submitted.outcome
        {
            self.denied(call, &submitted, reason, t1);
            return false;
        }
        let paused = match &submitted.outcome {
            Step::Refused {
                refusal: Refusal::Paused,
                error,
            } => Some(error.message.clone()),
            _ => None,
        };
        let go_on = self.acted(call, submitted, t1);
        if let Some(why) = paused {
            // The operator's kill switch: the turn ends; its saga is rolled
            // back by the end of the turn.
            self.tr.outcome = Outcome::UserAborted;
            self.tr.final_response = Some(format!("paused: {why}"));
            return false;
        }
        go_on
    }

    /// An invalid call: answered with a `tool_error`; the second in a row
    /// ends the turn.
    fn invalid(
        &mut self,
        call: &ToolCall,
        validation: Validation,
        err: &CallError,
        t1: Instant,
    ) -> bool {
        self.invalid_in_a_row += 1;
        record_invalid(&mut self.tr, call, validation, err, t1);
        self.request
            .messages
            .push(Message::tool(&call.id, err.to_model_message(), true));
        if self.invalid_in_a_row >= MAX_CONSECUTIVE_INVALID {
            self.tr.outcome = Outcome::ToolHallucination;
            return false;
        }
        true
    }

    /// A call past the turn's limit of tool calls: not submitted, answered
    /// with an error that asks for the final answer; the turn goes on.
    pub(super) fn over_limit(&mut self, call: &ToolCall, limit: u32, t1: Instant) {
        let error = ToolError::with_hint(
            ErrorKind::PermissionDenied,
            format!("this turn's limit of {limit} tool call(s) is reached; the call did not run"),
            "Give your final answer now, from the results you have.",
        );
        let args = serde_json::from_str(&call.arguments).unwrap_or_default();
        self.refused_unrun(call, args, error, t1);
    }

    /// Answer the model with `error` for a call that did not run, and
    /// record it as a denied action with `args`.
    fn refused_unrun(&mut self, call: &ToolCall, args: Value, error: ToolError, t1: Instant) {
        self.request
            .messages
            .push(Message::tool(&call.id, error.to_model_text(), true));
        self.tr.steps.push(TraceStep::Action {
            tool_name: call.name.clone(),
            call_id: call.id.clone(),
            args,
            validation: Validation::Ok,
            policy_decision: PolicyDecision::Deny,
            step_seq: None,
            exec_result: None,
            error: Some(error),
            untrusted: false,
            flow: None,
            wall_ms: t1.elapsed().as_millis() as u64,
        });
    }

    /// A call the policy denies: the turn ends `policy_denied`.
    fn denied(&mut self, call: &ToolCall, submitted: &Submitted, reason: &str, t1: Instant) {
        let error = ToolError::with_hint(
            ErrorKind::PermissionDenied,
            format!("policy: {reason}"),
            "The operator does not allow this call; the turn ends here.",
        );
        self.refused_unrun(call, submitted.args.clone().unwrap_or_default(), error, t1);
        self.tr.outcome = Outcome::PolicyDenied;
        let name = submitted
            .tool
            .as_ref()
            .map_or(call.name.as_str(), |t| t.meta.name.as_str());
        self.tr.final_response = Some(format!("policy_denied: `{name}` is not allowed ({reason})"));
    }

    /// A call that reached the saga: its result (untrusted-wrapped and
    /// truncated) or error goes back to the model. False when the turn ends
    /// here (a failed side effect rolled back, an approval not given).
    fn acted(&mut self, call: &ToolCall, submitted: Submitted, t1: Instant) -> bool {
        // The door decides (its grants, not only the tool's claim).
        let returns_untrusted = submitted.untrusted_output();
        let mut safety = None;
        let (content, is_error, step_seq, exec_result, error) = match &submitted.outcome {
            Step::Committed { seq, output, .. } => {
                let text = truncate_result_at(&output.data.to_string(), self.result_cap);
                let (text, critic) = if returns_untrusted {
                    wrap_untrusted(&call.name, &text)
                } else {
                    // Not declared untrusted, still no chat-template token
                    // or marker reaches the model from a tool.
                    let (text, n) = capsaga_untrusted::neutralize_counted(&text);
                    (text, critic(format!("tool:{}", call.name), n))
                };
                safety = critic;
                (text, false, Some(*seq), Some(output.data.clone()), None)
            }
            Step::ReadFailed { seq, error, .. } | Step::Failed { seq, error, .. } => {
                // A tool's message may quote what an attacker chose (a
                // planted file name, a redirect URL): it goes as data.
                let source = format!("tool:{}", call.name);
                let (text, n) = capsaga_untrusted::error_text(
                    &source,
                    &now_rfc3339(),
                    &error.kind.to_string(),
                    &truncate_result_at(&error.message, self.result_cap),
                    &error.llm_hint,
                );
                safety = critic(source, n);
                (text, true, Some(*seq), None, Some(error.clone()))
            }
            Step::Refused { error, .. } => {
                (error.to_model_text(), true, None, None, Some(error.clone()))
            }
            Step::AwaitingApproval {
                seq,
                approval,
                denied_by,
            } => {
                let error = ToolError::with_hint(
                    ErrorKind::PermissionDenied,
                    super::approval::ended_message(approval, denied_by.as_deref()),
                    "This call was not approved; end the turn.",
                );
                (error.to_model_text(), true, Some(*seq), None, Some(error))
            }
            Step::Previewed { .. } => (String::new(), false, None, None, None),
        };
        self.tr.steps.push(TraceStep::Action {
            tool_name: call.name.clone(),
            call_id: call.id.clone(),
            args: submitted.args.clone().unwrap_or_default(),
            validation: Validation::Ok,
            policy_decision: match submitted.verdict {
                Some(Verdict::ApproveRequired) => PolicyDecision::ApproveRequired,
                _ => PolicyDecision::Allow,
            },
            step_seq,
            untrusted: returns_untrusted && exec_result.is_some(),
            exec_result,
            error,
            flow: submitted
                .flow
                .as_ref()
                .and_then(|n| serde_json::to_value(n).ok()),
            wall_ms: t1.elapsed().as_millis() as u64,
        });
        self.tr.steps.extend(safety);
        self.request
            .messages
            .push(Message::tool(&call.id, content, is_error));
        match &submitted.outcome {
            Step::Failed { rollback, .. } => {
                self.tr.outcome = Outcome::RolledBack;
                self.rollback_state = Some(rollback.final_state);
                false
            }
            Step::AwaitingApproval {
                approval,
                denied_by,
                ..
            } => {
                // Nobody approved: nothing of the call ran; the end of the
                // turn rolls the parked saga back.
                self.tr.outcome = Outcome::UserAborted;
                self.tr.final_response = Some(super::approval::ended_message(
                    approval,
                    denied_by.as_deref(),
                ));
                false
            }
            _ => true,
        }
    }
}

/// Wrap a `returns-untrusted` tool's result in `<untrusted>` markers; a
/// safety critic step when marker-like sequences were neutralised.
fn wrap_untrusted(tool: &str, text: &str) -> (String, Option<TraceStep>) {
    let source = format!("tool:{tool}");
    let (wrapped, neutralised) = capsaga_untrusted::wrap_counted(&source, &now_rfc3339(), text);
    (wrapped, critic(source, neutralised))
}

/// The trace's safety record of `neutralised` marker-like sequences taken
/// out of what `source` returned (none when there were none).
fn critic(source: String, neutralised: usize) -> Option<TraceStep> {
    (neutralised > 0).then(|| TraceStep::Critic {
        purpose: "safety".into(),
        input: source,
        verdict: "neutralised".into(),
        reason: format!(
            "{neutralised} marker-like sequence(s) in untrusted content were neutralised before the model saw them"
        ),
    })
}

fn record_invalid(
    tr: &mut ExecutionTrace,
    call: &ToolCall,
    validation: Validation,
    err: &CallError,
    t1: Instant,
) {
    let args = capsaga_core::validate::parse_args(&call.arguments)
        .unwrap_or_else(|_| serde_json::Value::String(call.arguments.chars().take(4096).collect()));
    tr.steps.push(TraceStep::Action {
        tool_name: call.name.chars().take(200).collect(),
        call_id: call.id.clone(),
        args,
        validation,
        policy_decision: PolicyDecision::NotEvaluated,
        step_seq: None,
        exec_result: None,
        error: Some(ToolError::with_hint(
            ErrorKind::InvalidArgs,
            err.to_string(),
            err.to_model_message(),
        )),
        untrusted: false,
        flow: None,
        wall_ms: t1.elapsed().as_millis() as u64,
    });
}
