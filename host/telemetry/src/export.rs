//! OTLP export of the spans of [`crate::TARGET`].
//!
//! Off unless an endpoint is configured: `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`
//! (the full URL spans are posted to) or `OTEL_EXPORTER_OTLP_ENDPOINT` (the
//! base URL; `/v1/traces` is appended), and not when `OTEL_SDK_DISABLED` is
//! `true` or `OTEL_TRACES_EXPORTER` is `none`. The other standard variables
//! are read by `opentelemetry-otlp`: `OTEL_EXPORTER_OTLP_[TRACES_]PROTOCOL`
//! (`http/protobuf`, the default, or `http/json`; `grpc` is refused:
//! not compiled in), `_HEADERS`, `_TIMEOUT` (ms, default 10 000),
//! `_COMPRESSION` (none is compiled in), and the resource from
//! `OTEL_SERVICE_NAME` (default `capsaga`) and `OTEL_RESOURCE_ATTRIBUTES`.
//!
//! The pipeline: `tracing-opentelemetry` turns each closed span into
//! OpenTelemetry span data; [`Bounded`] admits it only while fewer than
//! `CAPSAGA_OTEL_QUEUE` (default 2048) spans are waiting or being sent,
//! else drops it and counts it (`capsaga_otel_spans_dropped_total`); the
//! SDK's batch processor sends batches from its own thread; the HTTP
//! request runs on the process's tokio runtime ([`OnRuntime`]), bounded by
//! the export timeout. A span's end never waits for the network: an
//! unreachable or silent collector costs the calls nothing but the dropped
//! spans. At exit, [`Telemetry::shutdown`] waits at most
//! `CAPSAGA_OTEL_SHUTDOWN_MS` (default 1000) for the last batch.

use crate::metrics::{Metrics, MetricsLayer};
pub use crate::otlp::{DEFAULT_TIMEOUT_MS, TelemetryError};
use crate::otlp::{json_protocol, number, resource, signal_number, var};
use crate::{TARGET, content};
use opentelemetry::trace::{Status, TracerProvider as _};
use opentelemetry::{Array, KeyValue, Value};
use opentelemetry_otlp::{WithExportConfig, WithHttpConfig};
use opentelemetry_sdk::Resource;
use opentelemetry_sdk::error::OTelSdkResult;
use opentelemetry_sdk::trace::{
    BatchConfigBuilder, BatchSpanProcessor, SdkTracerProvider, SpanData, SpanExporter,
    SpanProcessor,
};
use std::borrow::Cow;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;
use tracing::{Level, Subscriber};
use tracing_subscriber::Layer;
use tracing_subscriber::filter::Targets;
use tracing_subscriber::registry::LookupSpan;

/// Default bound of the export queue, spans.
pub const DEFAULT_QUEUE: usize = 2048;
/// Default wait for the last batch at exit, ms.
pub const DEFAULT_SHUTDOWN_MS: u64 = 1_000;

/// What the environment asks for.
#[derive(Debug, Clone, PartialEq)]
pub struct Settings {
    /// Whether spans are exported at all.
    pub export: bool,
    /// The full URL spans are posted to; `None`: from the standard
    /// variables (read by `opentelemetry-otlp`).
    pub endpoint: Option<String>,
    /// The protocol (`http/protobuf` or `http/json`).
    pub json: bool,
    /// Bound of the export queue, spans.
    pub queue: usize,
    /// Timeout of one export request, including its retries.
    pub timeout: Duration,
    /// Wait for the last batch at exit.
    pub shutdown: Duration,
}

impl Settings {
    /// Read the standard `OTEL_*` variables and capsaga's own
    /// (`CAPSAGA_OTEL_QUEUE`, `CAPSAGA_OTEL_SHUTDOWN_MS`).
    ///
    /// # Errors
    /// [`TelemetryError::Config`] for a protocol other than `http/protobuf`
    /// or `http/json`, or a number that is not one.
    pub fn from_env() -> Result<Settings, TelemetryError> {
        let disabled = var("OTEL_SDK_DISABLED").is_some_and(|v| v.trim() == "true")
            || var("OTEL_TRACES_EXPORTER").is_some_and(|v| v.trim() == "none");
        let endpoint = var("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
            .or_else(|| var("OTEL_EXPORTER_OTLP_ENDPOINT"));
        let json = json_protocol("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL")?;
        let timeout = signal_number("OTEL_EXPORTER_OTLP_TRACES_TIMEOUT", DEFAULT_TIMEOUT_MS)?;
        let queue = number("CAPSAGA_OTEL_QUEUE", DEFAULT_QUEUE as u64)?.clamp(1, 1 << 20);
        Ok(Settings {
            export: endpoint.is_some() && !disabled,
            endpoint: None,
            json,
            queue: usize::try_from(queue).unwrap_or(DEFAULT_QUEUE),
            timeout: Duration::from_millis(timeout),
            shutdown: Duration::from_millis(number(
                "CAPSAGA_OTEL_SHUTDOWN_MS",
                DEFAULT_SHUTDOWN_MS,
            )?),
        })
    }
}

/// The process's telemetry: the metrics (always), the OTLP span pipeline
/// and the OTLP metrics push (each when configured). Build it once, install
/// [`Telemetry::layer`] in the process's subscriber, and call
/// [`Telemetry::shutdown`] before exit.
#[derive(Debug)]
pub struct Telemetry {
    provider: Option<SdkTracerProvider>,
    meters: Option<opentelemetry_sdk::metrics::SdkMeterProvider>,
    metrics: Arc<Metrics>,
    shutdown: Duration,
}

impl Telemetry {
    /// From the environment ([`Settings::from_env`]); exports run on
    /// `runtime`. Also installs the content-capture choice
    /// ([`content::Capture::from_env`]).
    ///
    /// # Errors
    /// [`TelemetryError`] for a configuration that cannot be used.
    pub fn from_env(runtime: tokio::runtime::Handle) -> Result<Telemetry, TelemetryError> {
        let settings = Settings::from_env()?;
        let pushed = crate::otlp_metrics::MetricsSettings::from_env()?;
        content::install(content::Capture::from_env());
        Telemetry::with(settings, runtime.clone(), crate::metrics::global().clone())?
            .with_metrics_push(&pushed, runtime)
    }

    /// With `settings`, counting into `metrics`.
    ///
    /// # Errors
    /// [`TelemetryError::Exporter`] when the exporter cannot be built.
    pub fn with(
        settings: Settings,
        runtime: tokio::runtime::Handle,
        metrics: Arc<Metrics>,
    ) -> Result<Telemetry, TelemetryError> {
        let provider = if settings.export {
            Some(pipeline(&settings, runtime, metrics.clone())?)
        } else {
            None
        };
        Ok(Telemetry {
            provider,
            meters: None,
            metrics,
            shutdown: settings.shutdown,
        })
    }

    /// Also push the metrics over OTLP as `settings` ask (nothing when
    /// they do not), exports running on `runtime`.
    ///
    /// # Errors
    /// [`TelemetryError::Exporter`] when the exporter cannot be built.
    pub fn with_metrics_push(
        mut self,
        settings: &crate::otlp_metrics::MetricsSettings,
        runtime: tokio::runtime::Handle,
    ) -> Result<Telemetry, TelemetryError> {
        if settings.export && self.meters.is_none() {
            self.meters = Some(crate::otlp_metrics::push(settings, runtime, &self.metrics)?);
        }
        Ok(self)
    }

    /// Whether spans are exported.
    pub fn exporting(&self) -> bool {
        self.provider.is_some()
    }

    /// Whether the metrics are pushed over OTLP.
    pub fn pushing_metrics(&self) -> bool {
        self.meters.is_some()
    }

    /// The metrics.
    pub fn metrics(&self) -> &Arc<Metrics> {
        &self.metrics
    }

    /// The layer to add to the process's subscriber: the OTLP layer (when
    /// exporting) and the metrics layer, both seeing only spans of
    /// [`TARGET`] at INFO or above.
    pub fn layer<S>(&self) -> Box<dyn Layer<S> + Send + Sync + 'static>
    where
        S: Subscriber + for<'a> LookupSpan<'a> + Send + Sync,
    {
        let otel = self.provider.as_ref().map(|p| {
            tracing_opentelemetry::layer()
                .with_tracer(p.tracer("capsaga"))
                .with_location(false)
                .with_threads(false)
                .with_tracked_inactivity(false)
        });
        let metrics = MetricsLayer::new(self.metrics.clone());
        Box::new(
            Layer::and_then(otel, metrics)
                .with_filter(Targets::new().with_target(TARGET, Level::INFO)),
        )
    }

    /// Send what is queued (the last spans, the metrics' last values),
    /// waiting at most the shutdown bound; never fails (a collector that
    /// does not answer loses the last batch).
    pub fn shutdown(self) {
        let start = std::time::Instant::now();
        // The metrics' last push runs on a thread of its own (the SDK's
        // reader waits up to 5 s, whatever it is told), at the same time
        // as the spans' last batch.
        let pushed = self.meters.map(|m| {
            let (tx, rx) = std::sync::mpsc::channel();
            let spawned = std::thread::Builder::new()
                .name("capsaga-otel-metrics-shutdown".into())
                .spawn(move || {
                    let _ = m.shutdown();
                    let _ = tx.send(());
                });
            (spawned.is_ok(), rx)
        });
        if let Some(p) = self.provider {
            let _ = p.shutdown_with_timeout(self.shutdown);
        }
        if let Some((true, rx)) = pushed {
            let _ = rx.recv_timeout(self.shutdown.saturating_sub(start.elapsed()));
        }
    }
}

fn pipeline(
    settings: &Settings,
    runtime: tokio::runtime::Handle,
    metrics: Arc<Metrics>,
) -> Result<SdkTracerProvider, TelemetryError> {
    let (protocol, http) = crate::otlp::transport(settings.timeout, settings.json, runtime)?;
    let mut builder = opentelemetry_otlp::SpanExporter::builder()
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
    let pending = Arc::new(AtomicUsize::new(0));
    let exporter = Counted {
        inner: exporter,
        pending: pending.clone(),
        metrics: metrics.clone(),
    };
    let batch = BatchSpanProcessor::builder(exporter)
        .with_batch_config(
            BatchConfigBuilder::default()
                .with_max_queue_size(settings.queue)
                .with_max_export_batch_size(settings.queue.min(512))
                .with_scheduled_delay(Duration::from_millis(500))
                .build(),
        )
        .build();
    let processor = Bounded {
        inner: batch,
        pending,
        cap: settings.queue,
        metrics,
    };
    Ok(SdkTracerProvider::builder()
        .with_span_processor(processor)
        .with_resource(resource())
        .build())
}

/// The exporter, releasing queue places as batches leave and counting the
/// batches the collector did not take.
#[derive(Debug)]
struct Counted<E> {
    inner: E,
    pending: Arc<AtomicUsize>,
    metrics: Arc<Metrics>,
}

impl<E: SpanExporter> SpanExporter for Counted<E> {
    async fn export(&self, batch: Vec<SpanData>) -> OTelSdkResult {
        let n = batch.len();
        // Every span leaves scrubbed, whatever recorded what on it.
        let batch = batch.into_iter().map(scrubbed).collect();
        let r = self.inner.export(batch).await;
        self.pending.fetch_sub(n, Ordering::SeqCst);
        if r.is_err() {
            self.metrics.export_failed();
        }
        r
    }

    fn shutdown_with_timeout(&self, timeout: Duration) -> OTelSdkResult {
        self.inner.shutdown_with_timeout(timeout)
    }

    fn force_flush(&self) -> OTelSdkResult {
        self.inner.force_flush()
    }

    fn set_resource(&mut self, resource: &Resource) {
        self.inner.set_resource(resource);
    }
}

/// `text` scrubbed ([`crate::secrets::scrub`]), as a span string.
fn clean(text: Cow<'static, str>) -> Cow<'static, str> {
    match crate::secrets::scrub(&text) {
        Cow::Borrowed(_) => text,
        Cow::Owned(o) => Cow::Owned(o),
    }
}

/// An attribute value scrubbed (strings and arrays of strings).
fn clean_value(v: Value) -> Value {
    match v {
        Value::String(s) => match crate::secrets::scrub(s.as_str()) {
            Cow::Borrowed(_) => Value::String(s),
            Cow::Owned(o) => Value::String(o.into()),
        },
        Value::Array(Array::String(items)) => Value::Array(Array::String(
            items
                .into_iter()
                .map(|s| match crate::secrets::scrub(s.as_str()) {
                    Cow::Borrowed(_) => s,
                    Cow::Owned(o) => o.into(),
                })
                .collect(),
        )),
        other => other,
    }
}

fn clean_attributes(attributes: Vec<KeyValue>) -> Vec<KeyValue> {
    attributes
        .into_iter()
        .map(|kv| KeyValue::new(kv.key, clean_value(kv.value)))
        .collect()
}

/// `span` with every text it carries scrubbed: its name, its attributes,
/// its events' names and attributes, its links' attributes, its status.
pub(crate) fn scrubbed(mut span: SpanData) -> SpanData {
    span.name = clean(span.name);
    span.attributes = clean_attributes(span.attributes);
    for e in &mut span.events.events {
        e.name = clean(std::mem::take(&mut e.name));
        e.attributes = clean_attributes(std::mem::take(&mut e.attributes));
    }
    for l in &mut span.links.links {
        l.attributes = clean_attributes(std::mem::take(&mut l.attributes));
    }
    if let Status::Error { description } = span.status {
        span.status = Status::Error {
            description: clean(description),
        };
    }
    span
}

/// The bounded queue: a span is handed to the batch processor only while
/// fewer than `cap` spans wait or are being sent; otherwise dropped and
/// counted. Never blocks.
#[derive(Debug)]
struct Bounded {
    inner: BatchSpanProcessor,
    pending: Arc<AtomicUsize>,
    cap: usize,
    metrics: Arc<Metrics>,
}

impl SpanProcessor for Bounded {
    fn on_start(&self, span: &mut opentelemetry_sdk::trace::Span, cx: &opentelemetry::Context) {
        self.inner.on_start(span, cx);
    }

    fn on_end(&self, span: SpanData) {
        if self.pending.fetch_add(1, Ordering::SeqCst) >= self.cap {
            self.pending.fetch_sub(1, Ordering::SeqCst);
            self.metrics.spans_dropped(1);
            return;
        }
        self.inner.on_end(span);
    }

    fn force_flush(&self) -> OTelSdkResult {
        self.inner.force_flush()
    }

    fn shutdown_with_timeout(&self, timeout: Duration) -> OTelSdkResult {
        self.inner.shutdown_with_timeout(timeout)
    }

    fn set_resource(&mut self, resource: &Resource) {
        self.inner.set_resource(resource);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use opentelemetry::InstrumentationScope;
    use opentelemetry::trace::{Event, Link, SpanContext, SpanId, SpanKind};
    use std::time::SystemTime;

    #[test]
    fn a_span_leaves_with_every_text_scrubbed() {
        let key = "sk-proj-SpanExport0123456789abcdefgh";
        crate::secrets::remember("known-span-secret-77");
        let mut events = opentelemetry_sdk::trace::SpanEvents::default();
        events.events.push(Event::new(
            format!("event {key}"),
            SystemTime::UNIX_EPOCH,
            vec![KeyValue::new("m", "Authorization: Bearer xyz-opaque-1")],
            0,
        ));
        let mut links = opentelemetry_sdk::trace::SpanLinks::default();
        links.links.push(Link::new(
            SpanContext::empty_context(),
            vec![KeyValue::new("l", "known-span-secret-77")],
            0,
        ));
        let span = SpanData {
            span_context: SpanContext::empty_context(),
            parent_span_id: SpanId::INVALID,
            parent_span_is_remote: false,
            span_kind: SpanKind::Client,
            name: format!("chat {key}").into(),
            start_time: SystemTime::UNIX_EPOCH,
            end_time: SystemTime::UNIX_EPOCH,
            attributes: vec![
                KeyValue::new("gen_ai.response.model", key),
                KeyValue::new(
                    "list",
                    Value::Array(Array::String(vec!["ok".into(), format!("x {key}").into()])),
                ),
                KeyValue::new("n", 7),
            ],
            dropped_attributes_count: 0,
            events,
            links,
            status: Status::error(format!("HTTP 401: known-span-secret-77 {key}")),
            instrumentation_scope: InstrumentationScope::builder("t").build(),
        };
        let out = format!("{:?}", scrubbed(span));
        for leaked in [key, "known-span-secret-77", "xyz-opaque-1"] {
            assert!(!out.contains(leaked), "{leaked} in {out}");
        }
        assert!(out.contains("chat [redacted]"), "{out}");
        assert!(out.contains("I64(7)"), "{out}");
    }
}
