//! The metrics of [`crate::metrics`] pushed over OTLP (issue 30): the same
//! counts, recorded at the same moments into OpenTelemetry instruments,
//! collected by the SDK's periodic reader and posted by the OTLP HTTP
//! metrics exporter (protobuf or JSON), from the reader's own thread, the
//! request running on the process's tokio runtime like the spans'.
//!
//! Off unless an endpoint is configured: `OTEL_EXPORTER_OTLP_METRICS_ENDPOINT`
//! (the full URL) or `OTEL_EXPORTER_OTLP_ENDPOINT` (`/v1/metrics` appended),
//! and not when `OTEL_SDK_DISABLED` is `true` or `OTEL_METRICS_EXPORTER` is
//! `none`. The interval is `OTEL_METRIC_EXPORT_INTERVAL` (ms, default
//! 60 000); the protocol, headers and timeout are the standard
//! `OTEL_EXPORTER_OTLP_[METRICS_]*` variables; the last values are pushed
//! at exit ([`crate::Telemetry::shutdown`]).
//!
//! | OTLP metric | unit | Prometheus (`GET /metrics`) | attributes |
//! |---|---|---|---|
//! | `capsaga.tool.calls` | `{call}` | `capsaga_tool_calls_total` | `tool`, `outcome` |
//! | `capsaga.neuron.calls` | `{call}` | `capsaga_neuron_calls_total` | |
//! | `capsaga.errors` | `{error}` | `capsaga_errors_total` | `operation`, `kind` |
//! | `capsaga.operation.duration` | `s` | `capsaga_operation_duration_seconds` | `operation`, `name` |
//! | `capsaga.model.tokens` | `{token}` | `capsaga_model_tokens_total` | `type` |
//! | `capsaga.model.cost` | `USD` | `capsaga_model_cost_usd_total` | |
//! | `capsaga.approvals.pending` | `{approval}` | `capsaga_approvals_pending` | |
//! | `capsaga.sessions` | `{session}` | `capsaga_sessions` | |
//! | `capsaga.otel.spans.dropped` | `{span}` | `capsaga_otel_spans_dropped_total` | |
//! | `capsaga.otel.export.failures` | `{batch}` | `capsaga_otel_export_failures_total` | |
//!
//! Counters are cumulative (unless
//! `OTEL_EXPORTER_OTLP_METRICS_TEMPORALITY_PREFERENCE` says otherwise);
//! attribute values are the Prometheus labels' (bounded the same way). The
//! two gauges are set when the server reads them (a scrape of `GET
//! /metrics`, and every push interval while `capsaga serve` pushes).

use crate::instruments::Instruments;
use crate::metrics::Metrics;
use crate::otlp::{
    DEFAULT_TIMEOUT_MS, TelemetryError, json_protocol, number, resource, signal_number, var,
};
use opentelemetry::metrics::MeterProvider as _;
use opentelemetry_otlp::{WithExportConfig, WithHttpConfig};
use opentelemetry_sdk::metrics::{PeriodicReader, SdkMeterProvider};
use std::sync::Arc;
use std::time::Duration;

/// Default push interval (the SDK's), ms.
pub const DEFAULT_INTERVAL_MS: u64 = 60_000;

/// What the environment asks of the metrics push.
#[derive(Debug, Clone, PartialEq)]
pub struct MetricsSettings {
    /// Whether the metrics are pushed at all.
    pub export: bool,
    /// The full URL metrics are posted to; `None`: from the standard
    /// variables (read by `opentelemetry-otlp`).
    pub endpoint: Option<String>,
    /// The protocol (`http/protobuf` or `http/json`).
    pub json: bool,
    /// Time between two pushes.
    pub interval: Duration,
    /// Timeout of one push request.
    pub timeout: Duration,
}

impl MetricsSettings {
    /// Read the standard `OTEL_*` variables (see the module documentation).
    ///
    /// # Errors
    /// [`TelemetryError::Config`] for a protocol other than `http/protobuf`
    /// or `http/json`, or a number that is not one.
    pub fn from_env() -> Result<MetricsSettings, TelemetryError> {
        let disabled = var("OTEL_SDK_DISABLED").is_some_and(|v| v.trim() == "true")
            || var("OTEL_METRICS_EXPORTER").is_some_and(|v| v.trim() == "none");
        let endpoint = var("OTEL_EXPORTER_OTLP_METRICS_ENDPOINT")
            .or_else(|| var("OTEL_EXPORTER_OTLP_ENDPOINT"));
        let json = json_protocol("OTEL_EXPORTER_OTLP_METRICS_PROTOCOL")?;
        let timeout = signal_number("OTEL_EXPORTER_OTLP_METRICS_TIMEOUT", DEFAULT_TIMEOUT_MS)?;
        let interval = number("OTEL_METRIC_EXPORT_INTERVAL", DEFAULT_INTERVAL_MS)?.max(1);
        Ok(MetricsSettings {
            export: endpoint.is_some() && !disabled,
            endpoint: None,
            json,
            interval: Duration::from_millis(interval),
            timeout: Duration::from_millis(timeout),
        })
    }
}

/// The meter provider pushing `metrics` as `settings` ask; from now on
/// `metrics` records into its instruments too.
///
/// # Errors
/// [`TelemetryError::Exporter`] when the exporter cannot be built.
pub(crate) fn push(
    settings: &MetricsSettings,
    runtime: tokio::runtime::Handle,
    metrics: &Arc<Metrics>,
) -> Result<SdkMeterProvider, TelemetryError> {
    let (protocol, http) = crate::otlp::transport(settings.timeout, settings.json, runtime)?;
    let mut builder = opentelemetry_otlp::MetricExporter::builder()
        .with_http()
        .with_protocol(protocol);
    if let Some(url) = &settings.endpoint {
        builder = builder.with_endpoint(url.clone());
    }
    let exporter = builder
        .with_timeout(settings.timeout)
        .with_http_client(http)
        .build()
        .map_err(|e| TelemetryError::Exporter(e.to_string()))?;
    let reader = PeriodicReader::builder(exporter)
        .with_interval(settings.interval)
        .build();
    let provider = SdkMeterProvider::builder()
        .with_reader(reader)
        .with_resource(resource())
        .build();
    metrics.push_into(Instruments::new(&provider.meter("capsaga")));
    Ok(provider)
}
