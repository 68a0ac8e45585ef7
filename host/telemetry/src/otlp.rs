//! What the OTLP exports of spans ([`crate::export`]) and metrics
//! ([`crate::otlp_metrics`]) share: the standard variables read, the
//! process's resource, and the HTTP client whose requests run on the
//! process's tokio runtime.

use opentelemetry_http::{Bytes, HttpClient, HttpError, Request, Response};
use opentelemetry_sdk::Resource;
use std::time::Duration;

/// Default export timeout (OTLP exporter specification), ms.
pub const DEFAULT_TIMEOUT_MS: u64 = 10_000;

/// A telemetry configuration that cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum TelemetryError {
    /// A variable has a value capsaga cannot use.
    #[error("{var}={value:?}: {reason}")]
    Config {
        /// The variable.
        var: &'static str,
        /// Its value.
        value: String,
        /// Why.
        reason: &'static str,
    },
    /// The OTLP exporter could not be built (a malformed endpoint URL, ...).
    #[error("OTLP exporter: {0}")]
    Exporter(String),
}

/// The variable `name`, when set to something other than blanks.
pub(crate) fn var(name: &str) -> Option<String> {
    std::env::var(name).ok().filter(|v| !v.trim().is_empty())
}

/// The whole number in the variable `name`, else `default`.
pub(crate) fn number(name: &'static str, default: u64) -> Result<u64, TelemetryError> {
    match var(name) {
        None => Ok(default),
        Some(v) => v.trim().parse().map_err(|_| TelemetryError::Config {
            var: name,
            value: v,
            reason: "not a whole number",
        }),
    }
}

/// Whether the protocol of a signal (its own variable `signal_var`, else
/// `OTEL_EXPORTER_OTLP_PROTOCOL`) is `http/json` (else `http/protobuf`, the
/// default).
pub(crate) fn json_protocol(signal_var: &'static str) -> Result<bool, TelemetryError> {
    let (pvar, protocol) = match var(signal_var) {
        Some(p) => (signal_var, Some(p)),
        None => (
            "OTEL_EXPORTER_OTLP_PROTOCOL",
            var("OTEL_EXPORTER_OTLP_PROTOCOL"),
        ),
    };
    match protocol.as_deref().map(str::trim) {
        None | Some("http/protobuf") => Ok(false),
        Some("http/json") => Ok(true),
        Some(other) => Err(TelemetryError::Config {
            var: pvar,
            value: other.to_string(),
            reason: "capsaga exports over HTTP only: use http/protobuf or http/json",
        }),
    }
}

/// The export timeout of a signal (its own variable `signal_var`, else
/// `OTEL_EXPORTER_OTLP_TIMEOUT`), ms.
pub(crate) fn signal_number(signal_var: &'static str, default: u64) -> Result<u64, TelemetryError> {
    match var(signal_var) {
        Some(_) => number(signal_var, default),
        None => number("OTEL_EXPORTER_OTLP_TIMEOUT", default),
    }
}

/// The process's resource: `service.name` (`OTEL_SERVICE_NAME`, default
/// `capsaga`), `service.version`, and `OTEL_RESOURCE_ATTRIBUTES`.
pub(crate) fn resource() -> Resource {
    let mut resource = Resource::builder();
    if var("OTEL_SERVICE_NAME").is_none() {
        resource = resource.with_service_name("capsaga");
    }
    resource
        .with_attribute(opentelemetry::KeyValue::new(
            "service.version",
            env!("CARGO_PKG_VERSION"),
        ))
        .build()
}

/// The export's HTTP client: the request runs as a task of the process's
/// tokio runtime (the batch processor's own thread has no reactor), bounded
/// by the export timeout.
#[derive(Debug)]
pub(crate) struct OnRuntime {
    pub(crate) client: reqwest::Client,
    pub(crate) runtime: tokio::runtime::Handle,
    pub(crate) timeout: Duration,
}

#[async_trait::async_trait]
impl HttpClient for OnRuntime {
    async fn send_bytes(&self, request: Request<Bytes>) -> Result<Response<Bytes>, HttpError> {
        let client = self.client.clone();
        let timeout = self.timeout;
        let task = self
            .runtime
            .spawn(async move { tokio::time::timeout(timeout, client.send_bytes(request)).await });
        match task.await {
            Ok(Ok(r)) => r,
            Ok(Err(_)) => Err("the collector did not answer within the export timeout".into()),
            Err(e) => Err(Box::new(e)),
        }
    }
}

/// The OTLP/HTTP transport both exporters (spans, metrics) use: the wire
/// protocol (`json`: HTTP/JSON, else HTTP/protobuf) and a client on
/// `runtime` bounded by `timeout`. Installs the process's TLS provider
/// (ring, as the runtime's own clients; a second install is refused
/// harmlessly).
///
/// # Errors
/// [`crate::TelemetryError::Exporter`] when the HTTP client cannot be built.
pub(crate) fn transport(
    timeout: Duration,
    json: bool,
    runtime: tokio::runtime::Handle,
) -> Result<(opentelemetry_otlp::Protocol, OnRuntime), crate::TelemetryError> {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let client = reqwest::Client::builder()
        .timeout(timeout)
        .build()
        .map_err(|e| crate::TelemetryError::Exporter(e.to_string()))?;
    let protocol = if json {
        opentelemetry_otlp::Protocol::HttpJson
    } else {
        opentelemetry_otlp::Protocol::HttpBinary
    };
    Ok((
        protocol,
        OnRuntime {
            client,
            runtime,
            timeout,
        },
    ))
}
