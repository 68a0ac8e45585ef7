//! What the agent loop makes of one model exchange: every answer (or
//! failure) becomes a Thought step in the trace, with provider, model,
//! finish reason, tokens and cost (the tokens of failed tries the provider
//! billed included), and is classified into what happens next:
//!
//! | answer | next |
//! |---|---|
//! | tool calls, complete | [`Next::Calls`]: validate and run them |
//! | text, complete | [`Next::Answer`]: the turn succeeds |
//! | cut off (`length`, `max_tokens`, a full context window) | [`Next::End`] `truncated`: no tool call of it runs, even a complete-looking one |
//! | refused (`refusal`, `content_filter`) | [`Next::End`] `refused` |
//! | paused by the provider (`pause_turn`) without calls | [`Next::Continue`]: the answer is sent back and the model goes on |
//!
//! A failed exchange ends the turn: `malformed_answer` when every try
//! answered something unusable in the wire format (the router has retried
//! and failed over already), else `provider_error`; the Thought names the
//! provider and model of the last try and what went wrong.

use super::meter::Charge;
use super::provider::{
    Attempt, ChatRequest, ChatResponse, FailureKind, FinishReason, Provider, ProviderError,
};
use super::trace::{ExecutionTrace, Outcome, TraceStep};
use std::time::Instant;

/// What the loop does after an answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Next {
    /// Validate and run the answer's tool calls.
    Calls,
    /// The answer is final: the turn succeeds with its text.
    Answer,
    /// Send the history back for the model to go on (paused turn).
    Continue,
    /// The turn ends; the trace's outcome and final response are set.
    End,
}

/// The classification of an answer: what comes next, and for an end, the
/// outcome and what was wrong.
pub fn classify(resp: &ChatResponse, max_tokens: u32) -> (Next, Option<(Outcome, String)>) {
    let calls = resp.tool_calls.len();
    let raw = if resp.finish_raw.is_empty() {
        resp.finish_reason.as_str()
    } else {
        resp.finish_raw.as_str()
    };
    let text = resp.text.trim();
    let quoted = |t: &str| -> String {
        if t.is_empty() {
            String::new()
        } else {
            format!(": {:?}", t.chars().take(300).collect::<String>())
        }
    };
    match resp.finish_reason {
        FinishReason::Length => {
            let dropped = if calls > 0 {
                format!("; its {calls} tool call(s) were not executed")
            } else {
                String::new()
            };
            (
                Next::End,
                Some((
                    Outcome::Truncated,
                    format!(
                        "truncated: the answer was cut off at the output-token limit (max_tokens {max_tokens}; the provider said `{raw}`){dropped}"
                    ),
                )),
            )
        }
        FinishReason::ContentFilter => (
            Next::End,
            Some((
                Outcome::Refused,
                format!(
                    "refused: the provider's content filter withheld the answer (`{raw}`){}",
                    quoted(text)
                ),
            )),
        ),
        FinishReason::Refusal => (
            Next::End,
            Some((
                Outcome::Refused,
                format!("refused: the model declined (`{raw}`){}", quoted(text)),
            )),
        ),
        FinishReason::PauseTurn if calls == 0 => (Next::Continue, None),
        _ if calls > 0 => (Next::Calls, None),
        _ => (Next::Answer, None),
    }
}

/// Add the settled `charges` of one exchange (every try, see
/// [`super::meter`]) to the turn's cost and tokens; returns their total
/// (USD, input tokens, output tokens).
pub(super) fn add(tr: &mut ExecutionTrace, charges: &[Charge]) -> (f64, u64, u64) {
    let mut total = (0.0, 0, 0);
    for c in charges {
        total.0 += c.usd;
        total.1 += c.usage.input_tokens;
        total.2 += c.usage.output_tokens;
    }
    tr.cost_usd += total.0;
    tr.prompt_tokens += total.1;
    tr.response_tokens += total.2;
    total
}

/// Record an answer: add its charges (its own and its billed failed tries,
/// already settled in the ledger by the meter), push its Thought, and say
/// what comes next; for [`Next::End`] the trace's outcome and final
/// response are set.
pub fn record_answer(
    tr: &mut ExecutionTrace,
    charges: &[Charge],
    request: &ChatRequest,
    resp: &ChatResponse,
    started: Instant,
) -> Next {
    let (usd, input, output) = add(tr, charges);
    let (next, end) = classify(resp, request.max_tokens);
    tr.steps.push(TraceStep::Thought {
        provider: resp.provider.clone(),
        model: resp.model.clone(),
        prompt_tokens: input,
        response_tokens: output,
        finish_reason: resp.finish_reason.as_str().to_string(),
        finish_raw: if resp.finish_raw == resp.finish_reason.as_str() {
            String::new()
        } else {
            resp.finish_raw.clone()
        },
        problem: end.as_ref().map(|(_, why)| why.clone()),
        repairs: resp.repairs.clone(),
        text: resp.text.clone(),
        tool_calls: resp
            .tool_calls
            .iter()
            .map(|c| c.name.chars().take(200).collect())
            .collect(),
        cost_usd: usd,
        wall_ms: started.elapsed().as_millis() as u64,
        tier: request.tier,
        tool_choice: choice_sent(request),
        attempts: resp.attempts.clone(),
    });
    if let Some((outcome, why)) = end {
        tr.outcome = outcome;
        tr.final_response = Some(why);
    }
    next
}

/// Record a failed exchange: a Thought naming the provider and model of the
/// last try and what went wrong (none when nothing was sent), the billed
/// tokens of every try (`charges`, settled by the meter) added, and the
/// turn's outcome and final response. A try the budget refused is
/// `budget_hit`.
pub fn record_failure(
    tr: &mut ExecutionTrace,
    charges: &[Charge],
    provider: &dyn Provider,
    request: &ChatRequest,
    err: &ProviderError,
    started: Instant,
) {
    let attempts: Vec<Attempt> = match err {
        ProviderError::AllFailed(attempts) => attempts.clone(),
        ProviderError::Failed {
            provider: name,
            status,
            kind,
            usage,
            ..
        } => vec![Attempt {
            provider: name.clone(),
            model: provider.model_for(request.tier),
            status: *status,
            error: Some(err.to_string()),
            kind: Some(*kind),
            usage: *usage,
        }],
        // The failed tries before a refusal, as the meter settled them.
        ProviderError::Budget(_) => charges
            .iter()
            .map(|c| Attempt {
                provider: c.provider.clone(),
                model: c.model.clone(),
                status: None,
                error: Some("failed".into()),
                kind: None,
                usage: c.usage,
            })
            .collect(),
        // Nothing was sent.
        ProviderError::NoAllowedProvider(_) | ProviderError::ScriptExhausted(_) => Vec::new(),
    };
    let malformed = !attempts.is_empty()
        && attempts
            .iter()
            .all(|a| a.kind == Some(FailureKind::Malformed));
    tr.outcome = match err {
        ProviderError::Budget(_) => Outcome::BudgetHit,
        _ if malformed => Outcome::MalformedAnswer,
        _ => Outcome::ProviderError,
    };
    tr.final_response = Some(match err {
        ProviderError::Budget(reason) if attempts.is_empty() => {
            format!("budget_hit: {reason}; no model call was made")
        }
        ProviderError::Budget(reason) => format!(
            "budget_hit: {reason}; the next try was not sent ({} earlier tr{} failed)",
            attempts.len(),
            if attempts.len() == 1 { "y" } else { "ies" }
        ),
        _ if malformed => format!(
            "malformed_answer: no usable answer from the model: {}",
            attempts
                .last()
                .and_then(|a| a.error.as_deref())
                .unwrap_or_default()
        ),
        _ => format!("model provider failed: {err}"),
    });
    let (usd, input, output) = add(tr, charges);
    let Some(last) = attempts.last() else {
        return;
    };
    tr.steps.push(TraceStep::Thought {
        provider: last.provider.clone(),
        model: last.model.clone(),
        prompt_tokens: input,
        response_tokens: output,
        finish_reason: "error".into(),
        finish_raw: String::new(),
        problem: match err {
            ProviderError::Budget(reason) => Some(reason.clone()),
            _ => last.error.clone(),
        },
        repairs: Vec::new(),
        text: String::new(),
        tool_calls: Vec::new(),
        cost_usd: usd,
        wall_ms: started.elapsed().as_millis() as u64,
        tier: request.tier,
        tool_choice: choice_sent(request),
        attempts: if matches!(err, ProviderError::AllFailed(_)) {
            attempts.clone()
        } else {
            Vec::new()
        },
    });
}

/// The trace's record of `request.tool_choice`: what was sent, `None` for
/// `auto` or when no tools were offered (nothing is sent then).
fn choice_sent(request: &ChatRequest) -> Option<String> {
    (request.tool_choice != super::provider::ToolChoice::Auto && !request.tools.is_empty())
        .then(|| request.tool_choice.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::provider::{ToolCall, Usage};

    fn resp(finish: FinishReason, raw: &str, calls: usize, text: &str) -> ChatResponse {
        ChatResponse {
            provider: "p".into(),
            model: "m".into(),
            text: text.into(),
            tool_calls: (0..calls)
                .map(|i| ToolCall {
                    id: format!("c{i}"),
                    name: "fs_write".into(),
                    arguments: "{}".into(),
                })
                .collect(),
            finish_reason: finish,
            finish_raw: raw.into(),
            usage: Usage::default(),
            attempts: Vec::new(),
            repairs: Vec::new(),
        }
    }

    #[test]
    fn truncated_calls_never_run() {
        for raw in ["length", "max_tokens", "model_context_window_exceeded"] {
            let (next, end) = classify(&resp(FinishReason::Length, raw, 2, ""), 64);
            assert_eq!(next, Next::End);
            let (outcome, why) = end.unwrap();
            assert_eq!(outcome, Outcome::Truncated);
            assert!(why.contains("2 tool call(s) were not executed"), "{why}");
            assert!(why.contains(raw) && why.contains("max_tokens 64"), "{why}");
        }
        let (next, end) = classify(&resp(FinishReason::Length, "", 0, "Once upon"), 8);
        assert_eq!((next, end.unwrap().0), (Next::End, Outcome::Truncated));
    }

    #[test]
    fn refusals_and_filters_are_not_success() {
        let (next, end) = classify(
            &resp(FinishReason::Refusal, "refusal", 0, "I can't help"),
            9,
        );
        assert_eq!(next, Next::End);
        let (o, why) = end.unwrap();
        assert_eq!(o, Outcome::Refused);
        assert!(why.contains("I can't help"));
        let (_, end) = classify(
            &resp(FinishReason::ContentFilter, "content_filter", 1, ""),
            9,
        );
        assert_eq!(end.unwrap().0, Outcome::Refused);
    }

    #[test]
    fn other_endings() {
        assert_eq!(
            classify(&resp(FinishReason::PauseTurn, "pause_turn", 0, "x"), 9).0,
            Next::Continue
        );
        assert_eq!(
            classify(&resp(FinishReason::PauseTurn, "pause_turn", 1, ""), 9).0,
            Next::Calls
        );
        assert_eq!(
            classify(&resp(FinishReason::Stop, "stop", 1, ""), 9).0,
            Next::Calls
        );
        assert_eq!(
            classify(&resp(FinishReason::Other, "", 0, "hi"), 9).0,
            Next::Answer
        );
        assert_eq!(
            classify(&resp(FinishReason::Stop, "end_turn", 0, ""), 9).0,
            Next::Answer
        );
    }
}
