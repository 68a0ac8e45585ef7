//! A local HTTP server on 127.0.0.1 that stands in for a remote model
//! provider: it records every request (path, headers, JSON body) and answers
//! with scripted replies in order, written in the provider's documented wire
//! format by the test (or as raw text, for bodies `serde_json` cannot build:
//! duplicate keys, a byte-order mark, a stream, HTML), optionally after a
//! delay (to pass a client's deadline), optionally reporting a usage
//! computed from the request (an over-reporting provider). After the last
//! reply it answers 500, or, for a server started with
//! [`LlmServer::answering`], what its function makes of each request (many
//! concurrent callers, each answered from its own request).

use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use serde_json::Value;
use std::collections::{BTreeMap, VecDeque};
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

/// One recorded request.
#[derive(Debug, Clone)]
pub struct Recorded {
    /// Request path, e.g. `/v1/chat/completions`.
    pub path: String,
    /// Headers, names lower case.
    pub headers: BTreeMap<String, String>,
    /// The JSON body (`Value::Null` when it was not JSON).
    pub body: Value,
}

/// One reply.
#[derive(Debug, Clone)]
pub struct Reply {
    /// HTTP status.
    pub status: u16,
    /// Extra headers.
    pub headers: Vec<(String, String)>,
    /// JSON body.
    pub body: Value,
    /// A raw body sent instead of `body`, as `application/json`.
    pub raw: Option<String>,
    /// Wait this long before answering, milliseconds.
    pub delay_ms: u64,
    /// Report `usage` as this many times what the request could be
    /// estimated at (see [`Reply::over_reporting`]).
    pub usage_times: Option<u64>,
}

/// An OpenAI-compatible final answer from `model` saying "hello" and
/// reporting `usage` (prompt, completion tokens).
pub fn chat_completion(model: &str, usage: (u64, u64)) -> Value {
    serde_json::json!({
        "id": "chatcmpl-1", "object": "chat.completion", "created": 1_760_000_000,
        "model": model,
        "choices": [{"index": 0,
            "message": {"role": "assistant", "content": "hello", "refusal": null},
            "finish_reason": "stop"}],
        "usage": {"prompt_tokens": usage.0, "completion_tokens": usage.1,
            "total_tokens": usage.0 + usage.1}
    })
}

impl Reply {
    /// A 200 with `body`.
    pub fn ok(body: Value) -> Reply {
        Reply::status(200, body)
    }

    /// A reply with `status` and `body`.
    pub fn status(status: u16, body: Value) -> Reply {
        Reply {
            status,
            headers: Vec::new(),
            body,
            raw: None,
            delay_ms: 0,
            usage_times: None,
        }
    }

    /// The same reply, its `usage` replaced by `times` times what the
    /// request it answers could be estimated at from its own bytes: prompt
    /// tokens `times` × (the JSON body's bytes / 3, rounded up, + 4 per
    /// message; the body holds at least what a host estimates a prompt
    /// from), completion tokens `times` × the request's `max_tokens` (or
    /// `max_completion_tokens`). A provider, or a proxy in front of one,
    /// reporting much more than was sent.
    pub fn over_reporting(mut self, times: u64) -> Reply {
        self.usage_times = Some(times);
        self
    }

    /// A 200 whose body is `text` as it is.
    pub fn raw(text: impl Into<String>) -> Reply {
        Reply {
            raw: Some(text.into()),
            ..Reply::status(200, Value::Null)
        }
    }

    /// The same reply, sent `ms` milliseconds late.
    pub fn delayed(mut self, ms: u64) -> Reply {
        self.delay_ms = ms;
        self
    }

    /// Add a header.
    pub fn header(mut self, name: &str, value: &str) -> Reply {
        self.headers.push((name.into(), value.into()));
        self
    }
}

/// A function answering a request from its JSON body.
pub type Answer = Arc<dyn Fn(&Value) -> Reply + Send + Sync>;

#[derive(Default)]
struct Inner {
    replies: VecDeque<Reply>,
    seen: Vec<Recorded>,
    answer: Option<Answer>,
}

/// The running server.
pub struct LlmServer {
    /// Its address.
    pub addr: SocketAddr,
    inner: Arc<Mutex<Inner>>,
    task: tokio::task::JoinHandle<()>,
}

impl LlmServer {
    /// Start a server answering `replies` in order.
    ///
    /// # Panics
    /// When it cannot bind 127.0.0.1.
    pub async fn start(replies: Vec<Reply>) -> LlmServer {
        LlmServer::serve(Inner {
            replies: replies.into(),
            ..Inner::default()
        })
        .await
    }

    /// Start a server answering each request with `answer(body)` (the
    /// request's JSON body, `Value::Null` when it is not JSON).
    ///
    /// # Panics
    /// When it cannot bind 127.0.0.1.
    pub async fn answering(answer: Answer) -> LlmServer {
        LlmServer::serve(Inner {
            answer: Some(answer),
            ..Inner::default()
        })
        .await
    }

    async fn serve(inner: Inner) -> LlmServer {
        let inner = Arc::new(Mutex::new(inner));
        let app = axum::Router::new()
            .fallback(handle)
            .with_state(inner.clone());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind 127.0.0.1");
        let addr = listener.local_addr().expect("local addr");
        let task = tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        LlmServer { addr, inner, task }
    }

    /// `http://127.0.0.1:PORT` + `path`.
    pub fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.addr)
    }

    /// Every request received so far.
    pub fn requests(&self) -> Vec<Recorded> {
        self.inner
            .lock()
            .map(|i| i.seen.clone())
            .unwrap_or_default()
    }
}

impl Drop for LlmServer {
    fn drop(&mut self) {
        self.task.abort();
    }
}

async fn handle(
    State(inner): State<Arc<Mutex<Inner>>>,
    uri: Uri,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let request_estimate = || -> (u64, u64) {
        let v: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
        let messages = v["messages"].as_array().map_or(0, Vec::len) as u64;
        let max = v["max_tokens"]
            .as_u64()
            .or_else(|| v["max_completion_tokens"].as_u64())
            .unwrap_or(0);
        ((body.len() as u64).div_ceil(3) + 4 * messages, max)
    };
    let reply = {
        let Ok(mut i) = inner.lock() else {
            return StatusCode::INTERNAL_SERVER_ERROR.into_response();
        };
        i.seen.push(Recorded {
            path: uri.path().to_string(),
            headers: headers
                .iter()
                .map(|(k, v)| {
                    (
                        k.as_str().to_ascii_lowercase(),
                        v.to_str().unwrap_or("").to_string(),
                    )
                })
                .collect(),
            body: serde_json::from_slice(&body).unwrap_or(Value::Null),
        });
        let next = i.replies.pop_front();
        let answer = i.answer.clone();
        next.or_else(|| {
            let body = i.seen.last().map_or(Value::Null, |r| r.body.clone());
            answer.map(|a| a(&body))
        })
    };
    let mut reply = reply.unwrap_or_else(|| {
        Reply::status(
            500,
            serde_json::json!({"error": {"message": "the test server has no more replies", "type": "server_error"}}),
        )
    });
    if let Some(k) = reply.usage_times {
        let (prompt, max) = request_estimate();
        let (p, c) = (k * prompt, k * max);
        reply.body["usage"] = serde_json::json!({
            "prompt_tokens": p, "completion_tokens": c, "total_tokens": p + c
        });
    }
    if reply.delay_ms > 0 {
        tokio::time::sleep(std::time::Duration::from_millis(reply.delay_ms)).await;
    }
    let status = StatusCode::from_u16(reply.status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    let mut resp = match reply.raw {
        Some(raw) => (
            status,
            [(axum::http::header::CONTENT_TYPE, "application/json")],
            raw,
        )
            .into_response(),
        None => (status, axum::Json(reply.body)).into_response(),
    };
    for (k, v) in reply.headers {
        if let (Ok(name), Ok(value)) = (
            axum::http::HeaderName::from_bytes(k.as_bytes()),
            axum::http::HeaderValue::from_str(&v),
        ) {
            resp.headers_mut().insert(name, value);
        }
    }
    resp
}
