//! Outgoing HTTP for guests: `wasi:http/outgoing-handler` with a send-request
//! hook that applies the net guard of `capsaga_net_guard` (DESIGN §3).
//!
//! For each request the hook:
//! 1. refuses everything when the call has no `net:` grant, and caps the
//!    number of requests per call;
//! 2. checks method, headers, URL and grant ([`check_request`]);
//! 3. resolves the name itself (the operator's static `[net] hosts` entries
//!    first, otherwise the system resolver), within the request's time;
//! 4. vets every address ([`vet_addresses`]) and connects only to those
//!    (no second resolution), over TLS (rustls, web PKI roots plus the
//!    operator's `ca_files`) with the original host name for SNI and the
//!    certificate check;
//! 5. writes the request line and `Host` from the checked destination,
//!    injects the operator's secrets for that host (HTTPS only), and never
//!    follows a redirect: a 3xx goes back to the guest, whose next request
//!    is checked again;
//! 6. caps the response body, redacts secret values from the response, and
//!    stops at the request timeout or the call's deadline, whichever is
//!    first.
//!
//! Guests have no sockets and no name lookup (`wasi:sockets` stays denied in
//! the WASI context). Every request leaves a [`NetRecord`] in the call's
//! diagnostics. The operator's settings, TLS roots and secrets come from the
//! `net` and `secret` factors (`sandbox::factors`): the net factor
//! (the parent module) builds these hooks for each call.

mod body;
mod send;

use super::NetFactor;
use crate::factors::secret::SecretFactor;
use capsaga_core::capability::Capability;
use capsaga_core::error::ToolError;
use capsaga_core::policy::forbidden_header;
use capsaga_secrets::redact::Redactor;
use std::net::IpAddr;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::time::Instant;
use wasmtime_wasi_http::{ForbiddenHeaderFilter, WasiBody, WasiHttpHooks};

/// What happened to one outgoing request, for the call's diagnostics. Holds
/// the URL the guest asked for, never a header value.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct NetRecord {
    /// Method.
    pub method: String,
    /// The URL as the guest gave it (clipped to 300 characters).
    pub url: String,
    /// What the host resolved the name to (`None`: no lookup happened).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub resolved: Option<Vec<IpAddr>>,
    /// `denied` (by the guard), `unsent` (the name did not resolve or no
    /// connection was made: nothing left the host), `failed` (a connection
    /// was made; the request may have reached the server), `sent` or
    /// `truncated`.
    pub outcome: &'static str,
    /// Status code of the response, when one came back.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub status: Option<u16>,
    /// Why it was denied or failed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// Response body bytes received.
    pub body_bytes: u64,
}

/// Per-call outgoing-HTTP state, shared with the request futures.
pub(crate) struct CallNet {
    grants: Vec<Capability>,
    dry_run: bool,
    deadline: Instant,
    net: Arc<NetFactor>,
    secrets: Arc<SecretFactor>,
    requests: AtomicU32,
    log: Mutex<Vec<NetRecord>>,
}

impl CallNet {
    fn remaining(&self) -> Duration {
        self.deadline.saturating_duration_since(Instant::now())
    }

    fn push(&self, rec: NetRecord) -> usize {
        match self.log.lock() {
            Ok(mut l) => {
                l.push(rec);
                l.len() - 1
            }
            Err(_) => usize::MAX,
        }
    }

    fn update(&self, idx: usize, f: impl FnOnce(&mut NetRecord)) {
        if let Ok(mut l) = self.log.lock()
            && let Some(r) = l.get_mut(idx)
        {
            f(r);
        }
    }

    fn redactor(&self) -> Redactor {
        self.secrets.redactor()
    }
}

/// The `wasi:http` hooks of one call.
pub struct NetHooks {
    call: Arc<CallNet>,
}

impl NetHooks {
    /// Hooks for a call with `grants` (its `net:` and `secret:` grants), a
    /// dry-run flag, and `deadline_ms` of wall time from now (built by the
    /// `net` factor: `factors::net::bind`).
    pub fn new(
        grants: Vec<Capability>,
        dry_run: bool,
        deadline_ms: u64,
        net: Arc<NetFactor>,
        secrets: Arc<SecretFactor>,
    ) -> NetHooks {
        NetHooks {
            call: Arc::new(CallNet {
                grants,
                dry_run,
                deadline: Instant::now() + Duration::from_millis(deadline_ms),
                net,
                secrets,
                requests: AtomicU32::new(0),
                log: Mutex::new(Vec::new()),
            }),
        }
    }

    /// The records of the requests made so far.
    pub fn records(&self) -> Vec<NetRecord> {
        self.call.log.lock().map(|l| l.clone()).unwrap_or_default()
    }
}

impl WasiHttpHooks for NetHooks {
    fn forbidden_header_filter(&mut self) -> ForbiddenHeaderFilter {
        let dry_run = self.call.dry_run;
        Arc::new(move |name| forbidden_header(name.as_str(), dry_run).is_some())
    }

    fn set_host_header(&mut self) -> bool {
        false
    }

    fn send_request(
        &mut self,
        request: http::Request<WasiBody>,
        _options: Option<wasmtime_wasi_http::RequestOptions>,
        fut: Box<dyn Future<Output = Result<(), wasmtime_wasi_http::Error>> + Send>,
    ) -> Box<
        dyn Future<
                Output = Result<
                    (
                        http::Response<WasiBody>,
                        Box<dyn Future<Output = Result<(), wasmtime_wasi_http::Error>> + Send>,
                    ),
                    wasmtime_wasi_http::Error,
                >,
            > + Send,
    > {
        drop(fut);
        let call = self.call.clone();
        let n = call.requests.fetch_add(1, Ordering::Relaxed);
        Box::new(async move {
            if n >= call.net.settings().max_requests {
                call.push(NetRecord {
                    method: request.method().to_string(),
                    url: clip_url(&request.uri().to_string()),
                    resolved: None,
                    outcome: "denied",
                    status: None,
                    reason: Some(format!(
                        "more than {} requests in one call",
                        call.net.settings().max_requests
                    )),
                    body_bytes: 0,
                });
                return Err(wasmtime_wasi_http::Error::HttpRequestDenied);
            }
            send::send(call, request).await
        })
    }
}

fn clip_url(u: &str) -> String {
    u.chars().take(300).collect()
}

/// Add the host's reasons for refused or failed requests to a failed call's
/// error (`details.net`), so the model and the operator see why, whatever
/// the guest made of the `wasi:http` error code.
pub fn annotate_error(err: &mut ToolError, records: &[NetRecord]) {
    let notes: Vec<serde_json::Value> = records
        .iter()
        .filter(|r| r.outcome != "sent")
        .map(|r| {
            serde_json::json!({
                "method": r.method, "url": r.url, "outcome": r.outcome,
                "reason": r.reason,
            })
        })
        .collect();
    if notes.is_empty() {
        return;
    }
    let mut details = err
        .details
        .take()
        .map(|b| *b)
        .unwrap_or_else(|| serde_json::json!({}));
    if !details.is_object() {
        details = serde_json::json!({ "tool_details": details });
    }
    if let Some(obj) = details.as_object_mut() {
        obj.insert("net".into(), serde_json::Value::Array(notes));
    }
    err.details = Some(Box::new(details));
}
