//! W3C trace context from a client (issue 30): the OpenTelemetry MCP
//! semantic conventions carry it in a request's `params._meta`
//! (`traceparent`, `tracestate`); an MCP request's span whose request has
//! a valid one is a child of the client's span, in the client's trace.
//!
//! Parsed by the OpenTelemetry SDK's [`TraceContextPropagator`]; a
//! malformed or absent `traceparent` is ignored (the span starts a new
//! trace, or stays the child of the current span): never an error, never
//! a refusal of the request.

use opentelemetry::propagation::{Extractor, TextMapPropagator};
use opentelemetry::trace::TraceContextExt;
use opentelemetry_sdk::propagation::TraceContextPropagator;
use tracing::Span;
use tracing_opentelemetry::OpenTelemetrySpanExt;

/// Longest `traceparent` / `tracestate` value read, bytes (a W3C
/// `traceparent` is 55; `tracestate` at most 32 members of ~256).
pub const MAX_HEADER_BYTES: usize = 8192;

struct Carrier<'a> {
    traceparent: Option<&'a str>,
    tracestate: Option<&'a str>,
}

impl Extractor for Carrier<'_> {
    fn get(&self, key: &str) -> Option<&str> {
        let v = match key {
            "traceparent" => self.traceparent,
            "tracestate" => self.tracestate,
            _ => None,
        };
        v.filter(|v| v.len() <= MAX_HEADER_BYTES)
    }

    fn keys(&self) -> Vec<&str> {
        let mut k = Vec::new();
        if self.traceparent.is_some() {
            k.push("traceparent");
        }
        if self.tracestate.is_some() {
            k.push("tracestate");
        }
        k
    }
}

/// Make the client's span (`traceparent`, with its `tracestate`) the
/// parent of `span`, which must not have been entered yet. Whether it did:
/// `false` for an absent or malformed `traceparent`, and when no OTLP
/// export is installed (then there is no trace to join).
pub fn remote_parent(span: &Span, traceparent: Option<&str>, tracestate: Option<&str>) -> bool {
    if traceparent.is_none() {
        return false;
    }
    let carrier = Carrier {
        traceparent,
        tracestate,
    };
    let cx = TraceContextPropagator::new().extract(&carrier);
    if !cx.span().span_context().is_valid() {
        return false;
    }
    span.set_parent(cx).is_ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use opentelemetry::trace::TracerProvider as _;
    use opentelemetry_sdk::error::OTelSdkResult;
    use opentelemetry_sdk::trace::{SdkTracerProvider, SpanData, SpanExporter};
    use std::sync::{Arc, Mutex};
    use tracing_subscriber::layer::SubscriberExt;

    /// Keeps what it is given.
    #[derive(Debug, Clone, Default)]
    struct Kept(Arc<Mutex<Vec<SpanData>>>);

    impl SpanExporter for Kept {
        async fn export(&self, batch: Vec<SpanData>) -> OTelSdkResult {
            self.0.lock().unwrap().extend(batch);
            Ok(())
        }
    }

    const PARENT: &str = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01";

    fn exported(traceparent: Option<&str>) -> (bool, opentelemetry_sdk::trace::SpanData) {
        let exporter = Kept::default();
        let provider = SdkTracerProvider::builder()
            .with_simple_exporter(exporter.clone())
            .build();
        let sub = tracing_subscriber::registry()
            .with(tracing_opentelemetry::layer().with_tracer(provider.tracer("t")));
        let joined = tracing::subscriber::with_default(sub, || {
            let s = crate::spans::mcp("ping", crate::spans::McpTarget::None, "1", "pipe");
            let joined = remote_parent(&s, traceparent, Some("k=v"));
            drop(s);
            joined
        });
        let mut spans = std::mem::take(&mut *exporter.0.lock().unwrap());
        assert_eq!(spans.len(), 1);
        (joined, spans.remove(0))
    }

    #[test]
    fn a_valid_traceparent_is_the_parent() {
        let (joined, s) = exported(Some(PARENT));
        assert!(joined);
        assert_eq!(
            s.span_context.trace_id().to_string(),
            "0af7651916cd43dd8448eb211c80319c"
        );
        assert_eq!(s.parent_span_id.to_string(), "b7ad6b7169203331");
        assert!(s.parent_span_is_remote);
    }

    #[test]
    fn a_malformed_traceparent_starts_a_new_trace() {
        for bad in [
            "garbage",
            "00-00000000000000000000000000000000-b7ad6b7169203331-01",
            "00-0af7651916cd43dd8448eb211c80319c-0000000000000000-01",
            "zz-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01",
            "",
        ] {
            let (joined, s) = exported(Some(bad));
            assert!(!joined, "{bad}");
            assert_ne!(
                s.span_context.trace_id().to_string(),
                "0af7651916cd43dd8448eb211c80319c"
            );
            assert_eq!(
                s.parent_span_id,
                opentelemetry::trace::SpanId::INVALID,
                "{bad}"
            );
        }
        let (joined, _) = exported(None);
        assert!(!joined);
    }
}
