//! A real OTLP/HTTP receiver on 127.0.0.1 for the telemetry tests:
//! `POST /v1/traces` with an `ExportTraceServiceRequest` and `POST
//! /v1/metrics` with an `ExportMetricsServiceRequest`, protobuf
//! (`application/x-protobuf`, decoded with the `opentelemetry-proto`
//! message types) or JSON (`application/json`, the OTLP JSON encoding).
//! Keeps every raw body (to search for secrets) and every decoded request.

use axum::Router;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use opentelemetry_proto::tonic::collector::metrics::v1::ExportMetricsServiceRequest;
use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use opentelemetry_proto::tonic::common::v1::any_value::Value as Any;
use opentelemetry_proto::tonic::metrics::v1::Metric;
use opentelemetry_proto::tonic::metrics::v1::metric::Data;
use opentelemetry_proto::tonic::metrics::v1::number_data_point::Value as Number;
use opentelemetry_proto::tonic::trace::v1::Span;
use prost::Message;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

#[derive(Default)]
struct Seen {
    raw: Vec<Vec<u8>>,
    requests: Vec<ExportTraceServiceRequest>,
    metric_requests: Vec<ExportMetricsServiceRequest>,
    json: usize,
}

/// The receiver; stopped when dropped.
pub struct OtlpReceiver {
    addr: SocketAddr,
    seen: Arc<Mutex<Seen>>,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
}

/// Decode `body` as a `T`, JSON or protobuf by its content type, keep it
/// with `keep`, and answer as a collector does.
fn receive<T>(
    seen: &Mutex<Seen>,
    headers: &HeaderMap,
    body: &Bytes,
    keep: impl FnOnce(&mut Seen, T),
) -> Response
where
    T: Message + Default + serde::de::DeserializeOwned,
{
    let json = headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("application/json"));
    let decoded = if json {
        serde_json::from_slice::<T>(body).map_err(|e| e.to_string())
    } else {
        T::decode(body.as_ref()).map_err(|e| e.to_string())
    };
    let mut s = seen.lock().unwrap();
    s.raw.push(body.to_vec());
    match decoded {
        Ok(r) => {
            keep(&mut s, r);
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

async fn traces(State(seen): State<Arc<Mutex<Seen>>>, headers: HeaderMap, body: Bytes) -> Response {
    receive(&seen, &headers, &body, |s, r: ExportTraceServiceRequest| {
        s.requests.push(r);
    })
}

async fn metrics(
    State(seen): State<Arc<Mutex<Seen>>>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    receive(
        &seen,
        &headers,
        &body,
        |s, r: ExportMetricsServiceRequest| {
            s.metric_requests.push(r);
        },
    )
}

impl OtlpReceiver {
    /// Listen on a free port of 127.0.0.1.
    pub async fn start() -> OtlpReceiver {
        let seen = Arc::new(Mutex::new(Seen::default()));
        let app = Router::new()
            .route("/v1/traces", post(traces))
            .route("/v1/metrics", post(metrics))
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

    /// Every metric of every metrics request received so far, oldest
    /// first.
    pub fn metrics(&self) -> Vec<Metric> {
        let s = self.seen.lock().unwrap();
        s.metric_requests
            .iter()
            .flat_map(|r| &r.resource_metrics)
            .flat_map(|rm| &rm.scope_metrics)
            .flat_map(|sm| sm.metrics.clone())
            .collect()
    }

    /// How many metrics requests came.
    pub fn metric_requests(&self) -> usize {
        self.seen.lock().unwrap().metric_requests.len()
    }

    /// The newest value of the sum (counter) `name` whose data point has
    /// every attribute of `with` (summed over the points that match; the
    /// pushes are cumulative, so the newest push holds the total).
    pub fn sum(&self, name: &str, with: &[(&str, &str)]) -> Option<f64> {
        let newest = self.metrics().into_iter().rev().find(|m| m.name == name)?;
        let Some(Data::Sum(sum)) = newest.data else {
            return None;
        };
        let points: Vec<f64> = sum
            .data_points
            .iter()
            .filter(|p| {
                with.iter().all(|(k, v)| {
                    p.attributes.iter().any(|a| {
                        a.key == *k
                            && a.value
                                .as_ref()
                                .and_then(|v| v.value.as_ref())
                                .map(text)
                                .as_deref()
                                == Some(*v)
                    })
                })
            })
            .map(|p| match p.value {
                Some(Number::AsInt(i)) => i as f64,
                Some(Number::AsDouble(d)) => d,
                None => 0.0,
            })
            .collect();
        (!points.is_empty()).then(|| points.iter().sum())
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
