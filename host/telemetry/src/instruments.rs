//! The OpenTelemetry instruments the metrics are recorded into when they
//! are pushed over OTLP ([`crate::otlp_metrics`]): one per Prometheus
//! metric of [`crate::metrics`], named after it (see the table there).

use opentelemetry::KeyValue;
use opentelemetry::metrics::{Counter, Gauge, Histogram, Meter};

/// The duration histograms' bucket bounds, seconds: 1 ms to ~33 s (16
/// doublings), for the Prometheus histogram and the OTLP one alike.
pub(crate) fn duration_bounds() -> Vec<f64> {
    (0..16).map(|i| 0.001 * f64::from(1u32 << i)).collect()
}

/// The OpenTelemetry instruments [`crate::metrics::Metrics`] records into
/// while pushed.
#[derive(Debug)]
pub(crate) struct Instruments {
    pub(crate) tool_calls: Counter<u64>,
    pub(crate) neuron_calls: Counter<u64>,
    pub(crate) errors: Counter<u64>,
    pub(crate) durations: Histogram<f64>,
    pub(crate) tokens: Counter<u64>,
    pub(crate) cost: Counter<f64>,
    pub(crate) approvals_pending: Gauge<i64>,
    pub(crate) sessions: Gauge<i64>,
    pub(crate) spans_dropped: Counter<u64>,
    pub(crate) export_failures: Counter<u64>,
}

impl Instruments {
    /// The instruments of `meter`.
    pub(crate) fn new(meter: &Meter) -> Instruments {
        let counter = |name: &'static str, unit: &'static str, what: &'static str| {
            meter
                .u64_counter(name)
                .with_unit(unit)
                .with_description(what)
                .build()
        };
        let gauge = |name: &'static str, unit: &'static str, what: &'static str| {
            meter
                .i64_gauge(name)
                .with_unit(unit)
                .with_description(what)
                .build()
        };
        Instruments {
            tool_calls: counter(
                "capsaga.tool.calls",
                "{call}",
                "Tool calls submitted to the door, by tool and outcome",
            ),
            neuron_calls: counter(
                "capsaga.neuron.calls",
                "{call}",
                "Calls of neurons (tools the agent wrote)",
            ),
            errors: counter(
                "capsaga.errors",
                "{error}",
                "Failed operations by operation and error kind",
            ),
            durations: meter
                .f64_histogram("capsaga.operation.duration")
                .with_unit("s")
                .with_description(
                    "Duration of agent turns, model calls, tool calls, saga steps, compensations and MCP requests",
                )
                .with_boundaries(duration_bounds())
                .build(),
            tokens: counter(
                "capsaga.model.tokens",
                "{token}",
                "Model tokens used, by type (input, output)",
            ),
            cost: meter
                .f64_counter("capsaga.model.cost")
                .with_unit("USD")
                .with_description("Model spend in USD")
                .build(),
            approvals_pending: gauge(
                "capsaga.approvals.pending",
                "{approval}",
                "Approvals waiting for a human",
            ),
            sessions: gauge("capsaga.sessions", "{session}", "Open MCP sessions"),
            spans_dropped: counter(
                "capsaga.otel.spans.dropped",
                "{span}",
                "Spans dropped because the export queue was full",
            ),
            export_failures: counter(
                "capsaga.otel.export.failures",
                "{batch}",
                "Span batches the collector did not accept (refused, failed or timed out)",
            ),
        }
    }
}

/// `key = value` as an attribute.
pub(crate) fn kv(key: &'static str, value: &str) -> KeyValue {
    KeyValue::new(key, value.to_string())
}
