//! Prometheus metrics from the spans of [`crate::TARGET`]: a `tracing` layer
//! ([`MetricsLayer`]) measures each span from creation to close and counts
//! it when it closes, so the runtime instruments each operation once (the
//! span) and gets both the trace and the metrics. Rendered in the
//! OpenMetrics text format (which Prometheus scrapes) by
//! [`Metrics::encode`], for `GET /metrics` of `capsaga serve`.
//!
//! | metric | type | labels |
//! |---|---|---|
//! | `capsaga_tool_calls_total` | counter | `tool`, `outcome` |
//! | `capsaga_neuron_calls_total` | counter | |
//! | `capsaga_errors_total` | counter | `operation`, `kind` (the span's `error.type`) |
//! | `capsaga_operation_duration_seconds` | histogram | `operation` (`invoke_agent`, `chat`, `execute_tool`, `saga_step`, `compensation`, `mcp`), `name` (tool, model or MCP method) |
//! | `capsaga_model_tokens_total` | counter | `type` (`input`, `output`) |
//! | `capsaga_model_cost_usd_total` | counter | |
//! | `capsaga_approvals_pending` | gauge | (set by the server when scraped, and periodically while pushed over OTLP) |
//! | `capsaga_sessions` | gauge | (set by the server when scraped, and periodically while pushed over OTLP) |
//! | `capsaga_otel_spans_dropped_total` | counter | (the export queue was full) |
//! | `capsaga_otel_export_failures_total` | counter | (a batch the collector did not take) |
//!
//! The same counts are pushed over OTLP when configured
//! ([`crate::otlp_metrics`]).
//!
//! Label values come from names a client may choose (an MCP client names
//! the tool it calls): each label keeps at most [`MAX_LABEL_VALUES`]
//! distinct values, later ones are counted as `(other)`, so a client cannot
//! grow the exposition without bound. Every value is scrubbed of secrets
//! first ([`crate::secrets::scrub`]), for `/metrics` and the OTLP push
//! alike.

use crate::TARGET;
use crate::instruments::{Instruments, duration_bounds, kv};
use crate::spans::{Op, bounded};
use prometheus_client::encoding::text::encode;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::Registry;
use std::collections::HashSet;
use std::sync::atomic::AtomicU64;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Instant;
use tracing::Subscriber;
use tracing::field::{Field, Visit};
use tracing::span::{Attributes, Id, Record};
use tracing_subscriber::layer::{Context, Layer};
use tracing_subscriber::registry::LookupSpan;

/// Distinct values one label keeps before folding new ones into `(other)`.
pub const MAX_LABEL_VALUES: usize = 256;

/// The value of a label past [`MAX_LABEL_VALUES`].
pub const OTHER: &str = "(other)";

type Labels = Vec<(&'static str, String)>;

/// The process's metrics.
#[derive(Debug)]
pub struct Metrics {
    registry: Registry,
    tool_calls: Family<Labels, Counter>,
    neuron_calls: Counter,
    errors: Family<Labels, Counter>,
    durations: Family<Labels, Histogram, fn() -> Histogram>,
    tokens: Family<Labels, Counter>,
    cost: Counter<f64, AtomicU64>,
    approvals_pending: Gauge,
    sessions: Gauge,
    spans_dropped: Counter,
    export_failures: Counter,
    seen: Mutex<HashSet<(&'static str, String)>>,
    /// The OTLP instruments, once the metrics are pushed.
    otlp: OnceLock<Instruments>,
}

fn duration_histogram() -> Histogram {
    Histogram::new(duration_bounds())
}

static GLOBAL: OnceLock<Arc<Metrics>> = OnceLock::new();

/// The process's metrics (created on first use).
pub fn global() -> &'static Arc<Metrics> {
    GLOBAL.get_or_init(|| Arc::new(Metrics::new()))
}

impl Default for Metrics {
    fn default() -> Self {
        Metrics::new()
    }
}

impl Metrics {
    /// Empty metrics, registered under their names.
    pub fn new() -> Metrics {
        let mut registry = Registry::default();
        let tool_calls = Family::<Labels, Counter>::default();
        let neuron_calls = Counter::default();
        let errors = Family::<Labels, Counter>::default();
        let durations = Family::<Labels, Histogram, fn() -> Histogram>::new_with_constructor(
            duration_histogram,
        );
        let tokens = Family::<Labels, Counter>::default();
        let cost = Counter::<f64, AtomicU64>::default();
        let approvals_pending = Gauge::default();
        let sessions = Gauge::default();
        let spans_dropped = Counter::default();
        let export_failures = Counter::default();
        registry.register(
            "capsaga_tool_calls",
            "Tool calls submitted to the door, by tool and outcome",
            tool_calls.clone(),
        );
        registry.register(
            "capsaga_neuron_calls",
            "Calls of neurons (tools the agent wrote)",
            neuron_calls.clone(),
        );
        registry.register(
            "capsaga_errors",
            "Failed operations by operation and error kind",
            errors.clone(),
        );
        registry.register(
            "capsaga_operation_duration_seconds",
            "Duration of agent turns, model calls, tool calls, saga steps, compensations and MCP requests",
            durations.clone(),
        );
        registry.register(
            "capsaga_model_tokens",
            "Model tokens used, by type (input, output)",
            tokens.clone(),
        );
        registry.register("capsaga_model_cost_usd", "Model spend in USD", cost.clone());
        registry.register(
            "capsaga_approvals_pending",
            "Approvals waiting for a human",
            approvals_pending.clone(),
        );
        registry.register("capsaga_sessions", "Open MCP sessions", sessions.clone());
        registry.register(
            "capsaga_otel_spans_dropped",
            "Spans dropped because the export queue was full",
            spans_dropped.clone(),
        );
        registry.register(
            "capsaga_otel_export_failures",
            "Span batches the collector did not accept (refused, failed or timed out)",
            export_failures.clone(),
        );
        Metrics {
            registry,
            tool_calls,
            neuron_calls,
            errors,
            durations,
            tokens,
            cost,
            approvals_pending,
            sessions,
            spans_dropped,
            export_failures,
            seen: Mutex::new(HashSet::new()),
            otlp: OnceLock::new(),
        }
    }

    /// The metrics in the OpenMetrics text format
    /// (`application/openmetrics-text; version=1.0.0`), ending in `# EOF`.
    pub fn encode(&self) -> String {
        let mut out = String::new();
        // Writing to a String cannot fail.
        let _ = encode(&mut out, &self.registry);
        out
    }

    /// Record into `instruments` too from now on (the OTLP push); a
    /// second call is ignored.
    pub(crate) fn push_into(&self, instruments: Instruments) {
        let _ = self.otlp.set(instruments);
    }

    /// Whether the metrics are pushed over OTLP (then a server sets the
    /// gauges periodically, not only when scraped).
    pub fn pushed(&self) -> bool {
        self.otlp.get().is_some()
    }

    /// Set the gauges a server reads from its store when scraped.
    pub fn set_gauges(&self, approvals_pending: i64, sessions: i64) {
        self.approvals_pending.set(approvals_pending);
        self.sessions.set(sessions);
        if let Some(o) = self.otlp.get() {
            o.approvals_pending.record(approvals_pending, &[]);
            o.sessions.record(sessions, &[]);
        }
    }

    /// Count `n` spans dropped by the export queue.
    pub fn spans_dropped(&self, n: u64) {
        self.spans_dropped.inc_by(n);
        if let Some(o) = self.otlp.get() {
            o.spans_dropped.add(n, &[]);
        }
    }

    /// Spans dropped so far.
    pub fn spans_dropped_total(&self) -> u64 {
        self.spans_dropped.get()
    }

    /// Count one batch the collector did not accept.
    pub fn export_failed(&self) {
        self.export_failures.inc();
        if let Some(o) = self.otlp.get() {
            o.export_failures.add(1, &[]);
        }
    }

    /// Batches the collector did not accept so far.
    pub fn export_failures_total(&self) -> u64 {
        self.export_failures.get()
    }

    /// `value` as the value of label `key` (scrubbed of secrets:
    /// [`crate::secrets::scrub`]), or [`OTHER`] once the label has
    /// [`MAX_LABEL_VALUES`] others.
    fn label(&self, key: &'static str, value: &str) -> String {
        let value = crate::secrets::scrub(value);
        let value = bounded(&value);
        let Ok(mut seen) = self.seen.lock() else {
            return OTHER.to_string();
        };
        let entry = (key, value.to_string());
        if seen.contains(&entry) {
            return entry.1;
        }
        if seen.iter().filter(|(k, _)| *k == key).count() >= MAX_LABEL_VALUES {
            return OTHER.to_string();
        }
        seen.insert(entry.clone());
        entry.1
    }

    fn closed(&self, op: Op, f: &Fields, seconds: f64) {
        let name = match op {
            Op::Mcp => f.method.as_deref(),
            Op::Chat => f.model.as_deref(),
            Op::InvokeAgent => None,
            _ => f.tool.as_deref(),
        };
        let name = match name {
            // A tool that did not resolve keeps its (client-chosen) name
            // out of the labels.
            Some(_) if op == Op::ExecuteTool && f.source.is_none() => "(unknown)".to_string(),
            Some(n) => self.label("name", n),
            None => String::new(),
        };
        let otlp = self.otlp.get();
        let operation = op.span_name();
        self.durations
            .get_or_create(&vec![
                ("operation", operation.to_string()),
                ("name", name.clone()),
            ])
            .observe(seconds);
        if let Some(o) = otlp {
            o.durations
                .record(seconds, &[kv("operation", operation), kv("name", &name)]);
        }
        if let Some(kind) = &f.error {
            let kind = self.label("kind", kind);
            if let Some(o) = otlp {
                o.errors
                    .add(1, &[kv("operation", operation), kv("kind", &kind)]);
            }
            self.errors
                .get_or_create(&vec![("operation", operation.to_string()), ("kind", kind)])
                .inc();
        }
        match op {
            Op::ExecuteTool => {
                let outcome = self.label("outcome", f.outcome.as_deref().unwrap_or("unknown"));
                let neuron = f.source.as_deref() == Some("neuron");
                if let Some(o) = otlp {
                    o.tool_calls
                        .add(1, &[kv("tool", &name), kv("outcome", &outcome)]);
                    if neuron {
                        o.neuron_calls.add(1, &[]);
                    }
                }
                self.tool_calls
                    .get_or_create(&vec![("tool", name), ("outcome", outcome)])
                    .inc();
                if neuron {
                    self.neuron_calls.inc();
                }
            }
            Op::Chat => {
                self.tokens
                    .get_or_create(&vec![("type", "input".to_string())])
                    .inc_by(f.input_tokens);
                self.tokens
                    .get_or_create(&vec![("type", "output".to_string())])
                    .inc_by(f.output_tokens);
                let cost = f.cost_usd.is_finite() && f.cost_usd > 0.0;
                if cost {
                    self.cost.inc_by(f.cost_usd);
                }
                if let Some(o) = otlp {
                    o.tokens.add(f.input_tokens, &[kv("type", "input")]);
                    o.tokens.add(f.output_tokens, &[kv("type", "output")]);
                    if cost {
                        o.cost.add(f.cost_usd, &[]);
                    }
                }
            }
            _ => {}
        }
    }
}

/// What the metrics need of a span's fields.
#[derive(Debug, Default)]
struct Fields {
    tool: Option<String>,
    method: Option<String>,
    model: Option<String>,
    source: Option<String>,
    outcome: Option<String>,
    error: Option<String>,
    input_tokens: u64,
    output_tokens: u64,
    cost_usd: f64,
}

impl Visit for Fields {
    fn record_str(&mut self, field: &Field, value: &str) {
        let v = Some(bounded(value).to_string());
        match field.name() {
            "gen_ai.tool.name" => self.tool = v,
            "mcp.method.name" => self.method = v,
            "gen_ai.request.model" => self.model = v,
            "capsaga.tool.source" => self.source = v,
            "capsaga.outcome" => self.outcome = v,
            "error.type" => self.error = v,
            _ => {}
        }
    }

    fn record_u64(&mut self, field: &Field, value: u64) {
        match field.name() {
            "gen_ai.usage.input_tokens" => self.input_tokens = value,
            "gen_ai.usage.output_tokens" => self.output_tokens = value,
            _ => {}
        }
    }

    fn record_i64(&mut self, field: &Field, value: i64) {
        self.record_u64(field, u64::try_from(value).unwrap_or(0));
    }

    fn record_f64(&mut self, field: &Field, value: f64) {
        if field.name() == "capsaga.cost_usd" {
            self.cost_usd = value;
        }
    }

    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        // `%value` fields arrive here; names are plain strings.
        self.record_str(field, &format!("{value:?}"));
    }
}

struct Timed {
    op: Op,
    start: Instant,
    fields: Fields,
}

/// The layer that feeds [`Metrics`] from the spans of [`crate::TARGET`].
#[derive(Debug, Clone)]
pub struct MetricsLayer {
    metrics: Arc<Metrics>,
}

impl MetricsLayer {
    /// A layer counting into `metrics`.
    pub fn new(metrics: Arc<Metrics>) -> MetricsLayer {
        MetricsLayer { metrics }
    }
}

impl<S> Layer<S> for MetricsLayer
where
    S: Subscriber + for<'a> LookupSpan<'a>,
{
    fn on_new_span(&self, attrs: &Attributes<'_>, id: &Id, ctx: Context<'_, S>) {
        let meta = attrs.metadata();
        if meta.target() != TARGET {
            return;
        }
        let Some(op) = Op::from_span_name(meta.name()) else {
            return;
        };
        let mut fields = Fields::default();
        attrs.record(&mut fields);
        if let Some(span) = ctx.span(id) {
            span.extensions_mut().insert(Timed {
                op,
                start: Instant::now(),
                fields,
            });
        }
    }

    fn on_record(&self, id: &Id, values: &Record<'_>, ctx: Context<'_, S>) {
        if let Some(span) = ctx.span(id)
            && let Some(t) = span.extensions_mut().get_mut::<Timed>()
        {
            values.record(&mut t.fields);
        }
    }

    fn on_close(&self, id: Id, ctx: Context<'_, S>) {
        if let Some(span) = ctx.span(&id)
            && let Some(t) = span.extensions_mut().remove::<Timed>()
        {
            let secs = t.start.elapsed().as_secs_f64();
            self.metrics.closed(t.op, &t.fields, secs);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::spans;
    use tracing_subscriber::layer::SubscriberExt;

    #[test]
    fn spans_become_counters_and_histograms() {
        let metrics = Arc::new(Metrics::new());
        let sub = tracing_subscriber::registry().with(MetricsLayer::new(metrics.clone()));
        tracing::subscriber::with_default(sub, || {
            let s = spans::execute_tool("fs_write");
            s.record("capsaga.tool.source", "component");
            spans::outcome(&s, "failed");
            spans::fail(&s, "io");
            drop(s);
            let c = spans::chat("openai", "m1");
            spans::chat_answered(&c, "m1", 10, 5, "stop", 0.25);
            drop(c);
            // A hostile client's unknown tool names stay out of the labels.
            for i in 0..1000 {
                drop(spans::execute_tool(&format!("nope{i}")));
            }
        });
        let text = metrics.encode();
        assert!(
            text.contains(r#"capsaga_tool_calls_total{tool="fs_write",outcome="failed"} 1"#),
            "{text}"
        );
        assert!(text.contains(r#"capsaga_errors_total{operation="execute_tool",kind="io"} 1"#));
        assert!(text.contains(r#"capsaga_model_tokens_total{type="input"} 10"#));
        assert!(text.contains("capsaga_model_cost_usd_total 0.25"));
        assert!(!text.contains("nope1"));
        assert!(text.ends_with("# EOF\n"));
    }

    #[test]
    fn a_neuron_call_is_counted_once_and_other_calls_not() {
        let metrics = Arc::new(Metrics::new());
        let sub = tracing_subscriber::registry().with(MetricsLayer::new(metrics.clone()));
        tracing::subscriber::with_default(sub, || {
            let s = spans::execute_tool("double_it");
            s.record("capsaga.tool.source", "neuron");
            spans::outcome(&s, "committed");
            drop(s);
            for source in ["component", "builtin"] {
                let s = spans::execute_tool("fs_read");
                s.record("capsaga.tool.source", source);
                spans::outcome(&s, "committed");
                drop(s);
            }
            // A tool that did not resolve has no source: not a neuron.
            drop(spans::execute_tool("double_it_typo"));
        });
        let text = metrics.encode();
        assert!(text.contains("capsaga_neuron_calls_total 1\n"), "{text}");
        assert!(
            text.contains(r#"capsaga_tool_calls_total{tool="double_it",outcome="committed"} 1"#),
            "{text}"
        );
    }

    #[test]
    fn label_values_are_bounded() {
        let m = Metrics::new();
        for i in 0..MAX_LABEL_VALUES + 10 {
            m.label("name", &format!("t{i}"));
        }
        assert_eq!(m.label("name", "fresh"), OTHER);
        assert_eq!(m.label("name", "t0"), "t0");
    }

    #[test]
    fn label_values_are_scrubbed_of_secrets() {
        let m = Metrics::new();
        let key = "sk-proj-MetricLabel0123456789abcdef";
        crate::secrets::remember("known-label-secret-42");
        assert_eq!(
            m.label("name", &format!("gpt-4o {key}")),
            "gpt-4o [redacted]"
        );
        assert_eq!(m.label("kind", "x known-label-secret-42"), "x [redacted]");
        assert_eq!(m.label("name", "gpt-4o"), "gpt-4o");
    }
}
