//! The spans the runtime opens, one constructor per operation, with the
//! OpenTelemetry GenAI / MCP semantic-convention names and attributes
//! (v1.39.0; see the crate documentation). Every span is on
//! [`crate::TARGET`] at level INFO; `otel.name` is the exported span name,
//! `otel.kind` its kind, and `otel.status_code` is set to `ERROR` by
//! [`fail`].
//!
//! Attribute values are names, counts, positions and outcomes the host
//! chose: never a tool's arguments or output, a prompt, a model's answer, a
//! header or a key. The only content that can be attached is through
//! [`crate::content`], when the operator opts in.
//!
//! The `tracing` span names (the metadata name, e.g. `execute_tool`) are
//! what [`crate::metrics`] classifies by; they are the constants of
//! [`Op`].

use crate::TARGET;
use tracing::field::Empty;
use tracing::{Span, info_span};

/// Longest name (tool, model, method) put in an attribute or a span name,
/// bytes; longer ones are cut at a character boundary. A hostile MCP client
/// chooses the tool names it calls.
pub const MAX_NAME_BYTES: usize = 128;

/// The name a span and its `gen_ai.tool.name` carry for a tool the host does
/// not know (an unknown or hallucinated name, a client's probe): the
/// OpenTelemetry semantic conventions' `_OTHER`, so a caller choosing names
/// cannot make span names (and the metrics keyed by them) unbounded in
/// number, nor put its text into the operator's telemetry.
pub const UNKNOWN_TOOL: &str = "_OTHER";

/// The operations measured, by their `tracing` span name.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Op {
    /// One agent turn (`invoke_agent`).
    InvokeAgent,
    /// One model call (`chat`).
    Chat,
    /// One tool call through the door (`execute_tool`).
    ExecuteTool,
    /// One saga step: BEGIN, execute, COMMIT or FAIL (`saga_step`).
    SagaStep,
    /// One compensation of a committed step (`compensation`).
    Compensation,
    /// One MCP request served (`mcp`).
    Mcp,
}

impl Op {
    /// The `tracing` span name of the operation.
    pub fn span_name(self) -> &'static str {
        match self {
            Op::InvokeAgent => "invoke_agent",
            Op::Chat => "chat",
            Op::ExecuteTool => "execute_tool",
            Op::SagaStep => "saga_step",
            Op::Compensation => "compensation",
            Op::Mcp => "mcp",
        }
    }

    /// The operation of a `tracing` span name, if it is one of ours.
    pub fn from_span_name(name: &str) -> Option<Op> {
        [
            Op::InvokeAgent,
            Op::Chat,
            Op::ExecuteTool,
            Op::SagaStep,
            Op::Compensation,
            Op::Mcp,
        ]
        .into_iter()
        .find(|o| o.span_name() == name)
    }
}

/// `name` cut to [`MAX_NAME_BYTES`] at a character boundary.
pub fn bounded(name: &str) -> &str {
    if name.len() <= MAX_NAME_BYTES {
        return name;
    }
    let mut end = MAX_NAME_BYTES;
    while !name.is_char_boundary(end) {
        end -= 1;
    }
    &name[..end]
}

/// One agent turn: `invoke_agent capsaga` (kind internal), with
/// `gen_ai.operation.name = invoke_agent`, `gen_ai.agent.name = capsaga`,
/// `gen_ai.provider.name`, and, recorded when the turn ends,
/// `gen_ai.usage.input_tokens` / `output_tokens`, `capsaga.cost_usd`,
/// `capsaga.outcome`, `capsaga.saga.id`.
pub fn invoke_agent(provider: &str) -> Span {
    info_span!(
        target: TARGET,
        "invoke_agent",
        "otel.name" = "invoke_agent capsaga",
        "otel.kind" = "internal",
        "otel.status_code" = Empty,
        "gen_ai.operation.name" = "invoke_agent",
        "gen_ai.agent.name" = "capsaga",
        "gen_ai.provider.name" = bounded(provider),
        "gen_ai.conversation.id" = Empty,
        "capsaga.saga.id" = Empty,
        "gen_ai.usage.input_tokens" = Empty,
        "gen_ai.usage.output_tokens" = Empty,
        "capsaga.cost_usd" = Empty,
        "capsaga.outcome" = Empty,
        "error.type" = Empty,
    )
}

/// One model call: `chat {model}` (kind client), with
/// `gen_ai.operation.name = chat`, `gen_ai.provider.name`,
/// `gen_ai.request.model`, and, recorded by [`chat_answered`],
/// `gen_ai.response.model`, the token counts and
/// `gen_ai.response.finish_reasons`.
pub fn chat(provider: &str, model: &str) -> Span {
    let model = bounded(model);
    let name = if model.is_empty() {
        "chat".to_string()
    } else {
        format!("chat {model}")
    };
    info_span!(
        target: TARGET,
        "chat",
        "otel.name" = name,
        "otel.kind" = "client",
        "otel.status_code" = Empty,
        "gen_ai.operation.name" = "chat",
        "gen_ai.provider.name" = bounded(provider),
        "gen_ai.request.model" = model,
        "gen_ai.response.model" = Empty,
        "gen_ai.usage.input_tokens" = Empty,
        "gen_ai.usage.output_tokens" = Empty,
        "gen_ai.response.finish_reasons" = Empty,
        "capsaga.cost_usd" = Empty,
        "error.type" = Empty,
    )
}

/// What a model call answered, recorded on its [`chat`] span (and counted
/// by the metrics): the model, tokens (count), why it stopped, its cost
/// (USD).
pub fn chat_answered(span: &Span, model: &str, input: u64, output: u64, finish: &str, cost: f64) {
    span.record("gen_ai.response.model", bounded(model));
    span.record("gen_ai.usage.input_tokens", input);
    span.record("gen_ai.usage.output_tokens", output);
    span.record("gen_ai.response.finish_reasons", bounded(finish));
    span.record("capsaga.cost_usd", cost);
}

/// One tool call submitted to the door: `execute_tool {tool}` (kind
/// internal), with `gen_ai.operation.name = execute_tool`,
/// `gen_ai.tool.name`, `gen_ai.tool.type = function`, and, recorded later,
/// `gen_ai.tool.call.id`, `capsaga.saga.id`, `capsaga.step.seq`,
/// `capsaga.tool.source` (`component`, `builtin`, `neuron`; set only once
/// the tool resolved), `capsaga.outcome`, `error.type`, and the opt-in
/// `gen_ai.tool.call.arguments` / `gen_ai.tool.call.result`.
pub fn execute_tool(tool: &str) -> Span {
    let tool = bounded(tool);
    info_span!(
        target: TARGET,
        "execute_tool",
        "otel.name" = format!("execute_tool {tool}"),
        "otel.kind" = "internal",
        "otel.status_code" = Empty,
        "gen_ai.operation.name" = "execute_tool",
        "gen_ai.tool.name" = tool,
        "gen_ai.tool.type" = "function",
        "gen_ai.tool.call.id" = Empty,
        "gen_ai.tool.call.arguments" = Empty,
        "gen_ai.tool.call.result" = Empty,
        "capsaga.saga.id" = Empty,
        "capsaga.step.seq" = Empty,
        "capsaga.tool.source" = Empty,
        "capsaga.outcome" = Empty,
        "error.type" = Empty,
    )
}

/// One saga step (stages 7-10: BEGIN, execute, COMMIT or FAIL):
/// `saga.step {tool}` (kind internal), with `capsaga.saga.id`,
/// `capsaga.step.seq`, `gen_ai.tool.name` and, recorded when it settles,
/// `capsaga.outcome` and `error.type`.
pub fn saga_step(saga: &str, seq: u64, tool: &str) -> Span {
    let tool = bounded(tool);
    info_span!(
        target: TARGET,
        "saga_step",
        "otel.name" = format!("saga.step {tool}"),
        "otel.kind" = "internal",
        "otel.status_code" = Empty,
        "capsaga.saga.id" = saga,
        "capsaga.step.seq" = seq,
        "gen_ai.tool.name" = tool,
        "capsaga.outcome" = Empty,
        "error.type" = Empty,
    )
}

/// One compensation (the undo of a committed step during a rollback):
/// `saga.compensate {tool}` (kind internal), with `capsaga.saga.id`,
/// `capsaga.step.seq`, `gen_ai.tool.name`, `capsaga.outcome`, `error.type`.
pub fn compensation(saga: &str, seq: u64, tool: &str) -> Span {
    let tool = bounded(tool);
    info_span!(
        target: TARGET,
        "compensation",
        "otel.name" = format!("saga.compensate {tool}"),
        "otel.kind" = "internal",
        "otel.status_code" = Empty,
        "capsaga.saga.id" = saga,
        "capsaga.step.seq" = seq,
        "gen_ai.tool.name" = tool,
        "capsaga.outcome" = Empty,
        "error.type" = Empty,
    )
}

/// What an MCP request is about, for its span's name and attributes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum McpTarget<'a> {
    /// Nothing the span is named after (`initialize`, `ping`, `tools/list`,
    /// ...).
    None,
    /// The tool of a `tools/call` (the host's name for it, or
    /// [`UNKNOWN_TOOL`]): in the span name and `gen_ai.tool.name`.
    Tool(&'a str),
    /// The prompt of a `prompts/get` (a name the host knows, or
    /// [`UNKNOWN_TOOL`]): in the span name and `gen_ai.prompt.name`.
    Prompt(&'a str),
}

/// One MCP request served: `{mcp.method.name} {target}` (kind server; the
/// target is the tool of `tools/call` or the prompt of `prompts/get`, else
/// none), with `mcp.method.name`, `gen_ai.tool.name` and
/// `gen_ai.operation.name = execute_tool` (for `tools/call`),
/// `gen_ai.prompt.name` (for `prompts/get`), `jsonrpc.request.id`,
/// `network.transport` (`pipe` for stdio, `tcp` for Streamable HTTP), and,
/// recorded by the server, `mcp.protocol.version`, `mcp.session.id`,
/// `mcp.resource.uri` ([`mcp_resource`]) and, on failure,
/// `error.type` and `rpc.response.status_code`. Its parent is the current
/// span, or the client's, given by [`crate::propagation::remote_parent`].
pub fn mcp(method: &str, target: McpTarget<'_>, request_id: &str, transport: &str) -> Span {
    let method = bounded(method);
    let name = match target {
        McpTarget::Tool(t) | McpTarget::Prompt(t) => format!("{method} {}", bounded(t)),
        McpTarget::None => method.to_string(),
    };
    let span = info_span!(
        target: TARGET,
        "mcp",
        "otel.name" = name,
        "otel.kind" = "server",
        "otel.status_code" = Empty,
        "mcp.method.name" = method,
        "mcp.protocol.version" = Empty,
        "mcp.session.id" = Empty,
        "mcp.resource.uri" = Empty,
        "jsonrpc.request.id" = bounded(request_id),
        "network.transport" = transport,
        "gen_ai.tool.name" = Empty,
        "gen_ai.prompt.name" = Empty,
        "gen_ai.operation.name" = Empty,
        "rpc.response.status_code" = Empty,
        "error.type" = Empty,
    );
    match target {
        McpTarget::Tool(t) => {
            span.record("gen_ai.tool.name", bounded(t));
            span.record("gen_ai.operation.name", "execute_tool");
        }
        McpTarget::Prompt(p) => {
            span.record("gen_ai.prompt.name", bounded(p));
        }
        McpTarget::None => {}
    }
    span
}

/// Longest resource URI put in `mcp.resource.uri`, bytes.
pub const MAX_URI_BYTES: usize = 512;

/// Record `mcp.resource.uri` on an [`mcp`] span: the server calls it only
/// for a resource it served (a URI it does not know is a client's text,
/// and stays out of the telemetry). Cut to [`MAX_URI_BYTES`].
pub fn mcp_resource(span: &Span, uri: &str) {
    let mut end = uri.len().min(MAX_URI_BYTES);
    while !uri.is_char_boundary(end) {
        end -= 1;
    }
    span.record("mcp.resource.uri", &uri[..end]);
}

/// Mark `span` failed with `kind` (`error.type`, a low-cardinality kind
/// such as a tool error's kind or a refusal's stage; cut to
/// [`MAX_NAME_BYTES`]), status ERROR.
pub fn fail(span: &Span, kind: &str) {
    span.record("error.type", bounded(kind));
    span.record("otel.status_code", "ERROR");
}

/// Record `capsaga.outcome` (`committed`, `refused`, `failed`,
/// `rolled_back`, ...) on `span`.
pub fn outcome(span: &Span, outcome: &str) {
    span.record("capsaga.outcome", bounded(outcome));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_cut_at_a_character_boundary() {
        let long = "é".repeat(200);
        let cut = bounded(&long);
        assert!(cut.len() <= MAX_NAME_BYTES);
        assert!(cut.chars().all(|c| c == 'é'));
        assert_eq!(bounded("fs_read"), "fs_read");
    }

    #[test]
    fn every_op_round_trips_its_span_name() {
        for op in [
            Op::InvokeAgent,
            Op::Chat,
            Op::ExecuteTool,
            Op::SagaStep,
            Op::Compensation,
            Op::Mcp,
        ] {
            assert_eq!(Op::from_span_name(op.span_name()), Some(op));
        }
        assert_eq!(Op::from_span_name("other"), None);
    }
}
