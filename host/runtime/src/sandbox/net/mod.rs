//! Outgoing HTTP for guests: `wasi:http/outgoing-handler` with a send-request
//! hook that applies the net guard of `capsaga_core::net_guard` (DESIGN §3).
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
//! diagnostics.

mod body;
mod send;

use capsaga_core::capability::Capability;
use capsaga_core::error::ToolError;
use capsaga_core::net_guard::forbidden_header;
use capsaga_core::policy::{NetSettings, Policy, SecretSource, SecretString};
use capsaga_core::redact::Redactor;
use std::collections::BTreeMap;
use std::net::IpAddr;
use std::path::Path;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::time::Instant;
use wasmtime_wasi_http::{ForbiddenHeaderFilter, WasiBody, WasiHttpHooks};

/// Why the operator's outgoing-HTTP settings could not be loaded. Messages
/// name the secret and the variable, never a value.
#[derive(Debug, thiserror::Error)]
pub enum OutboundError {
    /// `[secrets.<name>] env = "VAR"` and `VAR` is not set (or not UTF-8).
    #[error("secret `{name}`: environment variable `{var}` is not set or not UTF-8")]
    SecretEnv {
        /// The secret.
        name: String,
        /// The variable.
        var: String,
    },
    /// The secret's value cannot be sent as a header value.
    #[error(
        "secret `{name}`: the value is not a valid header value (visible ASCII only; the value is not shown)"
    )]
    SecretValue {
        /// The secret.
        name: String,
    },
    /// A `ca_files` entry cannot be read or holds no certificate.
    #[error("[net] ca_files: {path}: {error}")]
    CaFile {
        /// The file.
        path: String,
        /// What went wrong.
        error: String,
    },
    /// rustls refused the configuration.
    #[error("TLS configuration: {0}")]
    Tls(String),
}

/// A secret ready to send.
struct ResolvedSecret {
    header: http::HeaderName,
    value: http::HeaderValue,
    raw: SecretString,
}

/// The operator's outgoing-HTTP settings, shared by every call: limits,
/// static hosts, TLS roots, secrets and `env:` values. Never comes from a
/// guest.
pub struct Outbound {
    settings: NetSettings,
    secrets: BTreeMap<String, ResolvedSecret>,
    env: BTreeMap<String, String>,
    tls: Arc<rustls::ClientConfig>,
}

impl std::fmt::Debug for Outbound {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Outbound")
            .field("settings", &self.settings)
            .field("secrets", &self.secrets.keys().collect::<Vec<_>>())
            .field("env", &self.env.keys().collect::<Vec<_>>())
            .finish()
    }
}

fn tls_config(ca_pems: &[(String, Vec<u8>)]) -> Result<rustls::ClientConfig, OutboundError> {
    use rustls::pki_types::CertificateDer;
    use rustls::pki_types::pem::PemObject;
    let mut roots = rustls::RootCertStore {
        roots: webpki_roots::TLS_SERVER_ROOTS.to_vec(),
    };
    for (path, pem) in ca_pems {
        let mut n = 0;
        for cert in CertificateDer::pem_slice_iter(pem) {
            let cert = cert.map_err(|e| OutboundError::CaFile {
                path: path.clone(),
                error: e.to_string(),
            })?;
            roots.add(cert).map_err(|e| OutboundError::CaFile {
                path: path.clone(),
                error: e.to_string(),
            })?;
            n += 1;
        }
        if n == 0 {
            return Err(OutboundError::CaFile {
                path: path.clone(),
                error: "no PEM certificate found".into(),
            });
        }
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| OutboundError::Tls(e.to_string()))?
        .with_root_certificates(roots)
        .with_no_client_auth();
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(config)
}

impl Outbound {
    /// No secrets, no `env:` values, default limits, system resolver.
    pub fn none() -> Outbound {
        Outbound {
            settings: NetSettings::default(),
            secrets: BTreeMap::new(),
            env: BTreeMap::new(),
            // Not input-derived: the built-in roots with rustls's own ring
            // provider and default protocol versions always configure.
            tls: Arc::new(
                tls_config(&[])
                    .expect("rustls configures its ring provider with the web PKI roots"),
            ),
        }
    }

    /// The settings of a checked policy: reads secrets held in environment
    /// variables the policy names (and nothing else from the environment)
    /// and the extra root certificates (`ca_files`, relative to `base_dir`).
    ///
    /// # Errors
    /// [`OutboundError`].
    pub fn from_policy(policy: &Policy, base_dir: &Path) -> Result<Outbound, OutboundError> {
        let mut secrets = BTreeMap::new();
        for (name, spec) in &policy.secrets {
            let raw = match &spec.source {
                SecretSource::Value(v) => v.clone(),
                SecretSource::Env(var) => {
                    std::env::var(var).map(SecretString::new).map_err(|_| {
                        OutboundError::SecretEnv {
                            name: name.clone(),
                            var: var.clone(),
                        }
                    })?
                }
            };
            let bad = || OutboundError::SecretValue { name: name.clone() };
            if raw.expose().is_empty() || !capsaga_core::policy::is_header_value(raw.expose()) {
                return Err(bad());
            }
            let mut value =
                http::HeaderValue::from_str(&format!("{}{}", spec.prefix, raw.expose()))
                    .map_err(|_| bad())?;
            value.set_sensitive(true);
            let header = http::HeaderName::from_bytes(spec.header.as_bytes()).map_err(|_| bad())?;
            secrets.insert(name.clone(), ResolvedSecret { header, value, raw });
        }
        let mut pems = Vec::new();
        for f in &policy.net.ca_files {
            let path = base_dir.join(f);
            let bytes = std::fs::read(&path).map_err(|e| OutboundError::CaFile {
                path: path.display().to_string(),
                error: e.to_string(),
            })?;
            pems.push((path.display().to_string(), bytes));
        }
        Ok(Outbound {
            settings: policy.net.clone(),
            secrets,
            env: policy.env.clone(),
            tls: Arc::new(tls_config(&pems)?),
        })
    }

    /// The `env:` values among `grants`, by name.
    pub fn env_for(&self, grants: &[Capability]) -> Vec<(String, String)> {
        grants
            .iter()
            .filter_map(|g| match g {
                Capability::Env { name } => self.env.get(name).map(|v| (name.clone(), v.clone())),
                _ => None,
            })
            .collect()
    }

    /// The outgoing-HTTP settings.
    pub fn settings(&self) -> &NetSettings {
        &self.settings
    }
}

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
    /// `denied`, `failed`, `sent` or `truncated`.
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
    outbound: Arc<Outbound>,
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
        Redactor::new(
            self.outbound
                .secrets
                .values()
                .map(|s| s.raw.expose().as_bytes()),
        )
    }
}

/// The `wasi:http` hooks of one call.
pub struct NetHooks {
    call: Arc<CallNet>,
}

impl NetHooks {
    /// Hooks for a call with `grants` (only `net:` and `secret:` grants are
    /// kept), a dry-run flag, and `deadline_ms` of wall time from now.
    pub fn new(
        grants: &[Capability],
        dry_run: bool,
        deadline_ms: u64,
        outbound: Arc<Outbound>,
    ) -> NetHooks {
        let grants = grants
            .iter()
            .filter(|g| matches!(g, Capability::Net { .. } | Capability::Secret { .. }))
            .cloned()
            .collect();
        NetHooks {
            call: Arc::new(CallNet {
                grants,
                dry_run,
                deadline: Instant::now() + Duration::from_millis(deadline_ms),
                outbound,
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
            if n >= call.outbound.settings.max_requests {
                call.push(NetRecord {
                    method: request.method().to_string(),
                    url: clip_url(&request.uri().to_string()),
                    resolved: None,
                    outcome: "denied",
                    status: None,
                    reason: Some(format!(
                        "more than {} requests in one call",
                        call.outbound.settings.max_requests
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
