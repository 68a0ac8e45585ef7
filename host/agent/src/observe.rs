//! What the agent loop tells the telemetry (issue 30): the `invoke_agent`
//! span of a turn and the `chat` span of each model call
//! (`capsaga_telemetry::spans`), with token counts, cost and outcome. Never
//! the prompt, the task or the model's answer.

use super::meter::Charge;
use super::provider::{ChatResponse, ProviderError};
use super::trace::ExecutionTrace;
use capsaga_telemetry::spans;
use tracing::Span;

/// The serde name of a value (`snake_case` enums), or `unknown`.
fn name_of(v: &impl serde::Serialize) -> String {
    match serde_json::to_value(v) {
        Ok(serde_json::Value::String(s)) => s,
        _ => "unknown".to_string(),
    }
}

/// Record how the turn ended on its `invoke_agent` span.
pub(super) fn turn_ended<E>(span: &Span, result: &Result<ExecutionTrace, E>) {
    match result {
        Ok(tr) => {
            if let Some(saga) = &tr.saga_id {
                span.record("capsaga.saga.id", saga.as_str());
                span.record("gen_ai.conversation.id", saga.as_str());
            }
            span.record("gen_ai.usage.input_tokens", tr.prompt_tokens);
            span.record("gen_ai.usage.output_tokens", tr.response_tokens);
            span.record("capsaga.cost_usd", tr.cost_usd);
            let outcome = name_of(&tr.outcome);
            spans::outcome(span, &outcome);
            if outcome != "success" {
                spans::fail(span, &outcome);
            }
        }
        Err(_) => spans::fail(span, "agent_error"),
    }
}

/// Record what a model call answered (or why it failed) on its `chat`
/// span, with what it was charged (USD).
pub(super) fn chat_done(
    span: &Span,
    result: &Result<ChatResponse, ProviderError>,
    charges: &[Charge],
) {
    let cost: f64 = charges.iter().map(|c| c.usd).sum();
    match result {
        Ok(r) => {
            let finish = if r.finish_raw.is_empty() {
                name_of(&r.finish_reason)
            } else {
                r.finish_raw.clone()
            };
            spans::chat_answered(
                span,
                &r.model,
                r.usage.input_tokens,
                r.usage.output_tokens,
                &finish,
                cost,
            );
        }
        Err(e) => {
            span.record("capsaga.cost_usd", cost);
            let kind = e
                .kind()
                .map_or_else(|| "provider_error".to_string(), |k| name_of(&k));
            spans::fail(span, &kind);
        }
    }
}
