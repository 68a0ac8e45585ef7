//! Observability of capsaga (issue 30, part 1): what the runtime does, as
//! OpenTelemetry spans exported over OTLP and as Prometheus metrics, and a
//! saga's audit rows as an OTLP JSON document.
//!
//! # Design
//!
//! The runtime knows nothing of OpenTelemetry. It opens ordinary `tracing`
//! spans on one target, [`TARGET`], through the constructors of [`spans`]
//! (one per operation: agent turn, model call, tool call, saga step,
//! compensation, MCP request), and records their outcome with the helpers
//! there. Everything else is here:
//!
//! - [`export`]: a `tracing-opentelemetry` layer that sees **only** spans of
//!   [`TARGET`] (no other span, no event: the runtime's logs never leave
//!   the process) and exports them with the OpenTelemetry SDK's batch
//!   processor and the OTLP HTTP exporter (protobuf or JSON), configured by
//!   the standard `OTEL_EXPORTER_OTLP_*` variables and off unless an
//!   endpoint is set. The queue is bounded; a span that finds it full is
//!   dropped and counted.
//! - [`metrics`]: a `tracing` layer that turns the same spans into
//!   Prometheus counters and histograms (`GET /metrics` of `capsaga serve`),
//!   with or without OTLP export.
//! - [`otlp_metrics`]: the same metrics pushed over OTLP (the SDK's
//!   periodic reader and the OTLP HTTP metrics exporter), when an endpoint
//!   is configured.
//! - [`propagation`]: a client's W3C trace context (an MCP request's
//!   `params._meta.traceparent`) as the parent of the request's span.
//! - [`content`]: the operator's opt-in to tool arguments and results as
//!   attributes (`CAPSAGA_OTEL_CAPTURE_CONTENT`), redacted and capped.
//! - [`audit`]: `capsaga audit export --otel`: audit rows as OTLP JSON.
//! - [`secrets`]: the host's own secrets and [`secrets::scrub`], the one
//!   function every sink passes its text through: the log output
//!   ([`logs`]), the exported spans, their events and links, the metric
//!   labels, the audit export, the captured content (and, in the runtime,
//!   the console's pages and the command line's messages).
//! - [`logs`]: the process's log layer (stderr), every event scrubbed.
//!
//! Names and attributes follow the OpenTelemetry semantic conventions for
//! generative AI and for MCP (semantic conventions v1.39.0, `gen-ai/` and
//! `gen-ai/mcp.md`, status Development; since moved to the
//! `semantic-conventions-genai` repository, v0.1.0): `invoke_agent`, `chat`
//! and `execute_tool` spans with `gen_ai.operation.name`,
//! `gen_ai.tool.name`, `gen_ai.usage.input_tokens`, ...; MCP server spans
//! named `{mcp.method.name} {target}` with `mcp.method.name`,
//! `jsonrpc.request.id`, `mcp.protocol.version`. capsaga's own attributes
//! (saga id, step position, outcome) are under `capsaga.`.

pub mod audit;
pub mod content;
pub mod export;
mod instruments;
pub mod logs;
pub mod metrics;
mod otlp;
pub mod otlp_metrics;
pub mod propagation;
pub mod secrets;
pub mod spans;

/// The `tracing` target of every span this crate exports or measures.
/// Spans and events of any other target are neither exported nor counted.
pub const TARGET: &str = "capsaga::otel";

pub use export::{Telemetry, TelemetryError};
pub use metrics::Metrics;
