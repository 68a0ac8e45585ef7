//! What the door tells the telemetry about a call (issue 30): the outcome
//! and error kind of its `execute_tool` span and of its `saga.step` span
//! (`capsaga_telemetry::spans`). Names, kinds and positions only; the
//! arguments and output only when the operator opted in to content capture
//! (`capsaga_telemetry::content`: redacted and capped).

use super::{Outcome, Refusal, Submitted};
use crate::registry::ToolSource;
use capsaga_core::error::ToolError;
use capsaga_telemetry::{content, spans};
use tracing::Span;

/// The outcome's name and, when it failed or was refused, its error kind.
fn outcome(o: &Outcome) -> (&'static str, Option<String>) {
    let kind = |e: &ToolError| Some(e.kind.to_string());
    match o {
        Outcome::Committed { replayed: true, .. } => ("replayed", None),
        Outcome::Committed { .. } => ("committed", None),
        Outcome::ReadFailed { error, .. } => ("failed", kind(error)),
        Outcome::Failed { error, .. } => ("rolled_back", kind(error)),
        Outcome::Refused { refusal, .. } => ("refused", Some(refusal_kind(refusal).to_string())),
        Outcome::AwaitingApproval { .. } => ("awaiting_approval", None),
        Outcome::Previewed { result: Ok(_), .. } => ("previewed", None),
        Outcome::Previewed { result: Err(e), .. } => ("previewed", kind(e)),
    }
}

/// The stage that refused, as an `error.type`.
fn refusal_kind(r: &Refusal) -> &'static str {
    match r {
        Refusal::UnknownTool(_) => "unknown_tool",
        Refusal::NotCallable(_) => "not_callable",
        Refusal::InvalidArgs(_) => "invalid_args",
        Refusal::Denied { .. } => "policy_denied",
        Refusal::Approval => "approval",
        Refusal::Guardrail => "guardrail",
        Refusal::Logged => "logged",
        Refusal::Paused => "paused",
        Refusal::Flow { .. } => "information_flow",
    }
}

/// Record what the door answered on the call's `execute_tool` span.
pub(super) fn submitted(span: &Span, s: &Submitted) {
    if let Some(tool) = &s.tool {
        let source = match tool.source {
            ToolSource::Component(_) => "component",
            ToolSource::Builtin(_) => "builtin",
            ToolSource::Neuron(_) => "neuron",
        };
        span.record("capsaga.tool.source", source);
    }
    if let Outcome::Committed { seq, .. }
    | Outcome::ReadFailed { seq, .. }
    | Outcome::Failed { seq, .. }
    | Outcome::AwaitingApproval { seq, .. } = &s.outcome
    {
        span.record("capsaga.step.seq", *seq);
    }
    settled(span, &s.outcome);
    if let Some(capture) = content::capture() {
        if let Some(args) = &s.args {
            span.record("gen_ai.tool.call.arguments", capture.render(args));
        }
        if let Outcome::Committed { output, .. } = &s.outcome {
            span.record("gen_ai.tool.call.result", capture.render(&output.data));
        }
    }
}

/// Record the outcome (and error kind) of `o` on `span`.
pub(super) fn settled(span: &Span, o: &Outcome) {
    let (name, kind) = outcome(o);
    spans::outcome(span, name);
    if let Some(k) = kind {
        spans::fail(span, &k);
    }
}
