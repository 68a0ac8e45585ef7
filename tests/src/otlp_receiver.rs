//! A real OTLP/HTTP trace receiver on 127.0.0.1 for the telemetry tests:
//! `POST /v1/traces` with an `ExportTraceServiceRequest`, protobuf
//! (`application/x-protobuf`, decoded with the `opentelemetry-proto`
//! message types) or JSON (`application/json`, the OTLP JSON encoding).
//! Keeps every raw body (to search for secrets) and every decoded request.

use axum::Router;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use opentelemetry_proto::tonic::common::v1::any_value::Value as Any;
use opentelemetry_proto::tonic::trace::v1::Span;
use prost::Message;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

#[derive(Default)]
struct Seen {
    raw: Vec<Vec<u8>>,
    requests: Vec<ExportTraceServiceRequest>,
    json: usize,
}

/// The receiver; stopped when dropped.
pub struct OtlpReceiver {
    addr: SocketAddr,
    seen: Arc<Mutex<Seen>>,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
}

async fn traces(State(seen): State<Arc<Mutex<Seen>>>, headers: HeaderMap, body: Bytes) -> Response {
    let json = headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("application/json"));
    let decoded = if json {
        serde_json::from_slice::<ExportTraceServiceRequest>(&body).map_err(|e| e.to_string())
    } else {
        ExportTraceServiceRequest::decode(body.as_ref()).map_err(|e| e.to_string())
    };
    let mut s = seen.lock().unwrap();
    s.raw.push(body.to_vec());
    match decoded {
        Ok(r) => {
            s.requests.push(r);
            s.json += usize::from(json);
            if json {
                ([(header::CONTENT_TYPE, "application/json")], "{}").into_response()
            } else {
                (
                    [(header::CONTENT_TYPE, "application/x-protobuf")],
                    Vec::new(),
                )
                    .into_response()
            }
        }
        Err(e) => (StatusCode::BAD_REQUEST, e).into_response(),
    }
}

impl OtlpReceiver {
    /// Listen on a free port of 127.0.0.1.
    pub async fn start() -> OtlpReceiver {
        let seen = Arc::new(Mutex::new(Seen::default()));
        let app = Router::new()
            .route("/v1/traces", post(traces))
            .with_state(seen.clone());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let (tx, rx) = tokio::sync::oneshot::channel::<()>();
        tokio::spawn(async move {
            let _ = axum::serve(listener, app)
                .with_graceful_shutdown(async {
                    let _ = rx.await;
                })
                .await;
        });
        OtlpReceiver {
            addr,
            seen,
            stop: Some(tx),
        }
    }

    /// The base URL, for `OTEL_EXPORTER_OTLP_ENDPOINT`.
    pub fn endpoint(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// Every span received so far.
    pub fn spans(&self) -> Vec<Span> {
        let s = self.seen.lock().unwrap();
        s.requests
            .iter()
            .flat_map(|r| &r.resource_spans)
            .flat_map(|rs| &rs.scope_spans)
            .flat_map(|ss| ss.spans.clone())
            .collect()
    }

    /// Every raw body received so far, concatenated.
    pub fn raw(&self) -> Vec<u8> {
        self.seen.lock().unwrap().raw.concat()
    }

    /// How many requests came as JSON.
    pub fn json_requests(&self) -> usize {
        self.seen.lock().unwrap().json
    }

    /// The resource attribute `key` of the first request, as a string.
    pub fn resource_attr(&self, key: &str) -> Option<String> {
        let s = self.seen.lock().unwrap();
        let r = s
            .requests
            .first()?
            .resource_spans
            .first()?
            .resource
            .as_ref()?;
        r.attributes
            .iter()
            .find(|a| a.key == key)
            .and_then(|a| a.value.as_ref()?.value.as_ref().map(text))
    }
}

impl Drop for OtlpReceiver {
    fn drop(&mut self) {
        if let Some(tx) = self.stop.take() {
            let _ = tx.send(());
        }
    }
}

/// An attribute value as text (strings as they are, numbers in decimal).
pub fn text(v: &Any) -> String {
    match v {
        Any::StringValue(s) => s.clone(),
        Any::IntValue(i) => i.to_string(),
        Any::DoubleValue(d) => d.to_string(),
        Any::BoolValue(b) => b.to_string(),
        other => format!("{other:?}"),
    }
}

/// The attribute `key` of `span`, as text.
pub fn attr(span: &Span, key: &str) -> Option<String> {
    span.attributes
        .iter()
        .find(|a| a.key == key)
        .and_then(|a| a.value.as_ref()?.value.as_ref().map(text))
}
