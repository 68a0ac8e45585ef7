//! Sending one guest request through the net guard: check, resolve, vet,
//! connect to the vetted addresses only, TLS, one HTTP/1.1 exchange.

use super::body::GuardedBody;
use super::{CallNet, NetRecord, clip_url};
use capsaga_core::capability::Scheme;
use capsaga_net_guard::{
    DestHost, Destination, NetDenied, NetRequest, check_request, secrets_for, vet_addresses,
};
use http_body_util::BodyExt;
use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use tokio::net::TcpStream;
use tokio::time::{Instant, timeout_at};
use wasmtime_wasi_http::io::TokioIo;
use wasmtime_wasi_http::{Error, WasiBody};

type IoFuture = Box<dyn Future<Output = Result<(), Error>> + Send>;

trait Stream: tokio::io::AsyncRead + tokio::io::AsyncWrite + Send + Unpin + 'static {}
impl<T: tokio::io::AsyncRead + tokio::io::AsyncWrite + Send + Unpin + 'static> Stream for T {}

/// The `wasi:http` error code the guest sees for a refusal.
fn denied_code(e: &NetDenied) -> Error {
    match e {
        NetDenied::BadUrl { .. } | NetDenied::HostSpelling { .. } => Error::HttpRequestUriInvalid,
        NetDenied::Address { .. } | NetDenied::NotUnicast { .. } => Error::DestinationIpProhibited,
        NetDenied::NoAddress { .. } => Error::DnsError {
            rcode: Some("no address".into()),
            info_code: None,
        },
        NetDenied::Method { dry_run: false, .. } => Error::HttpRequestMethodInvalid,
        _ => Error::HttpRequestDenied,
    }
}

impl CallNet {
    fn record(
        &self,
        method: &str,
        url: &str,
        resolved: Option<Vec<IpAddr>>,
        outcome: &'static str,
        reason: Option<String>,
    ) -> usize {
        self.push(NetRecord {
            method: method.to_string(),
            url: clip_url(url),
            resolved,
            outcome,
            status: None,
            reason,
            body_bytes: 0,
        })
    }
}

/// Resolve `dest`'s name: the operator's static entry, or the system
/// resolver, before `deadline`.
async fn resolve(
    call: &CallNet,
    dest: &Destination,
    deadline: Instant,
) -> Result<Vec<IpAddr>, Error> {
    let DestHost::Domain(name) = &dest.host else {
        return Ok(Vec::new());
    };
    if let Some(ips) = call.net.settings().hosts.get(name) {
        return Ok(ips.clone());
    }
    match timeout_at(
        deadline,
        tokio::net::lookup_host((name.as_str(), dest.port)),
    )
    .await
    {
        Err(_) => Err(Error::DnsTimeout),
        Ok(Err(e)) => Err(Error::DnsError {
            rcode: Some(e.kind().to_string()),
            info_code: None,
        }),
        Ok(Ok(addrs)) => Ok(addrs.map(|a| a.ip()).collect()),
    }
}

/// Connect to the first vetted address that answers.
async fn connect(addrs: &[SocketAddr], deadline: Instant) -> Result<TcpStream, Error> {
    let mut last = Error::ConnectionRefused;
    for a in addrs {
        match timeout_at(deadline, TcpStream::connect(a)).await {
            Err(_) => return Err(Error::ConnectionTimeout),
            Ok(Ok(s)) => {
                let _ = s.set_nodelay(true);
                return Ok(s);
            }
            Ok(Err(e)) => last = Error::Connect(e),
        }
    }
    Err(last)
}

async fn tls(
    call: &CallNet,
    dest: &Destination,
    tcp: TcpStream,
    deadline: Instant,
) -> Result<Box<dyn Stream>, Error> {
    use rustls::pki_types::{DnsName, ServerName};
    let name = match &dest.host {
        DestHost::Domain(d) => {
            ServerName::DnsName(DnsName::try_from(d.clone()).map_err(|_| Error::TlsProtocolError)?)
        }
        DestHost::Ip(ip) => ServerName::IpAddress((*ip).into()),
    };
    let connector = tokio_rustls::TlsConnector::from(call.net.tls().clone());
    match timeout_at(deadline, connector.connect(name, tcp)).await {
        Err(_) => Err(Error::ConnectionTimeout),
        Ok(Ok(s)) => Ok(Box::new(s)),
        Ok(Err(e)) => {
            let cert = e
                .get_ref()
                .and_then(|inner| inner.downcast_ref::<rustls::Error>())
                .is_some_and(|r| matches!(r, rustls::Error::InvalidCertificate(_)));
            Err(if cert {
                Error::TlsCertificateError
            } else {
                Error::Tls(e)
            })
        }
    }
}

/// The connection task of one exchange: hyper drives the connection in it,
/// and it is aborted when the guest drops the response (or the call ends).
type ConnTask = wasmtime_wasi::runtime::AbortOnDropJoinHandle<Result<(), hyper::Error>>;

/// A request the guard let through: where it goes, the vetted addresses to
/// connect to, its deadline, and the index of its record.
struct Vetted {
    dest: Destination,
    addrs: Vec<SocketAddr>,
    deadline: Instant,
    idx: usize,
}

/// Check, resolve, vet, connect and send one request.
pub(super) async fn send(
    call: Arc<CallNet>,
    req: http::Request<WasiBody>,
) -> Result<(http::Response<WasiBody>, IoFuture), Error> {
    // What the guard reads, owned: the request itself is not `Sync` and
    // must not be held across the name lookup.
    let method = req.method().as_str().to_string();
    let url = req.uri().to_string();
    let names: Vec<String> = req
        .headers()
        .keys()
        .map(|h| h.as_str().to_string())
        .collect();
    let v = vet(&call, &method, &url, &names).await?;
    let out = outgoing(&call, &v.dest, req)?;
    let (resp, conn_task) = match timeout_at(v.deadline, exchange(&call, &v, out)).await {
        Err(_) => {
            call.update(v.idx, |r| r.reason = Some("timed out".into()));
            return Err(Error::ConnectionReadTimeout);
        }
        Ok(Err(e)) => {
            call.update(v.idx, |r| r.reason = Some(e.to_string()));
            return Err(e);
        }
        Ok(Ok(x)) => x,
    };
    Ok(guarded_response(&call, &v, resp, conn_task))
}

/// The guard's part: method, headers, URL and grant checked, the name
/// resolved (within the request's time), every address vetted. Each refusal
/// or failure is recorded; a request let through is recorded as `failed`
/// until a response comes back.
async fn vet(call: &CallNet, method: &str, url: &str, headers: &[String]) -> Result<Vetted, Error> {
    let names: Vec<&str> = headers.iter().map(String::as_str).collect();
    let nreq = NetRequest {
        method,
        url,
        headers: &names,
        dry_run: call.dry_run,
    };
    let dest = match check_request(&nreq, &call.grants) {
        Ok(d) => d,
        Err(e) => {
            call.record(method, url, None, "denied", Some(e.to_string()));
            return Err(denied_code(&e));
        }
    };
    let budget = call.remaining().min(std::time::Duration::from_millis(
        call.net.settings().request_timeout_ms,
    ));
    let deadline = Instant::now() + budget;
    let resolved = match resolve(call, &dest, deadline).await {
        Ok(r) => r,
        Err(e) => {
            call.record(method, url, Some(Vec::new()), "unsent", Some(e.to_string()));
            return Err(e);
        }
    };
    let looked_up = matches!(dest.host, DestHost::Domain(_)).then(|| resolved.clone());
    let addrs = match vet_addresses(&dest, &resolved) {
        Ok(a) => a,
        Err(e) => {
            call.record(method, url, looked_up, "denied", Some(e.to_string()));
            return Err(denied_code(&e));
        }
    };
    let idx = call.record(method, url, looked_up, "failed", Some("no response".into()));
    Ok(Vetted {
        dest,
        addrs,
        deadline,
        idx,
    })
}

/// The request as it goes out: origin-form target and Host from the
/// checked destination, the guest's other headers, the secrets for this
/// host (replacing any header of the same name).
fn outgoing(
    call: &CallNet,
    dest: &Destination,
    req: http::Request<WasiBody>,
) -> Result<http::Request<WasiBody>, Error> {
    let (parts, body) = req.into_parts();
    let mut headers = parts.headers;
    headers.remove(http::header::HOST);
    let host_value =
        http::HeaderValue::from_str(&dest.host_header).map_err(|_| Error::HttpRequestUriInvalid)?;
    headers.insert(http::header::HOST, host_value);
    for name in secrets_for(dest, &call.grants) {
        if let Some(s) = call.secrets.get(name) {
            headers.remove(&s.header);
            headers.insert(s.header.clone(), s.value.clone());
        }
    }
    let mut out = http::Request::builder()
        .method(parts.method)
        .uri(dest.path_and_query.as_str())
        .version(http::Version::HTTP_11)
        .body(body)
        .map_err(|_| Error::HttpRequestUriInvalid)?;
    *out.headers_mut() = headers;
    Ok(out)
}

/// Connect to a vetted address (TLS for HTTPS) and send the request over
/// HTTP/1.1; the caller bounds it by the request's deadline.
async fn exchange(
    call: &CallNet,
    v: &Vetted,
    out: http::Request<WasiBody>,
) -> Result<(http::Response<hyper::body::Incoming>, ConnTask), Error> {
    let opened = async {
        let tcp = connect(&v.addrs, v.deadline).await?;
        Ok::<Box<dyn Stream>, Error>(match v.dest.scheme {
            Scheme::Https => tls(call, &v.dest, tcp, v.deadline).await?,
            Scheme::Http => Box::new(tcp),
        })
    };
    let stream = match opened.await {
        Ok(s) => s,
        Err(e) => {
            // No connection, so not a byte of the request left the host.
            call.update(v.idx, |r| r.outcome = "unsent");
            return Err(e);
        }
    };
    let (mut sender, conn) = hyper::client::conn::http1::Builder::new()
        .handshake::<_, WasiBody>(TokioIo::new(stream))
        .await
        .map_err(Error::from)?;
    let conn_task = wasmtime_wasi::runtime::spawn(conn);
    let resp = sender.send_request(out).await.map_err(Error::from)?;
    Ok((resp, conn_task))
}

/// The response as the guest gets it: recorded as sent, secret values in
/// headers replaced, the body capped, redacted and bounded by the deadline.
fn guarded_response(
    call: &Arc<CallNet>,
    v: &Vetted,
    resp: http::Response<hyper::body::Incoming>,
    conn_task: ConnTask,
) -> (http::Response<WasiBody>, IoFuture) {
    let status = resp.status().as_u16();
    call.update(v.idx, |r| {
        r.outcome = "sent";
        r.status = Some(status);
        r.reason = None;
    });
    let redactor = call.redactor();
    let (mut parts, incoming) = resp.into_parts();
    if !redactor.is_empty() {
        for value in parts.headers.values_mut() {
            if redactor.contains_secret(value.as_bytes()) {
                *value = http::HeaderValue::from_static("[redacted]");
            }
        }
    }
    let body = GuardedBody::new(
        incoming,
        call.net.settings().max_response_bytes,
        redactor,
        v.deadline,
        call.clone(),
        v.idx,
    );
    let io: IoFuture = Box::new(async move {
        match conn_task.await {
            Ok(()) => Ok(()),
            Err(e) if e.is_timeout() => Err(Error::HttpResponseTimeout),
            Err(e) => Err(Error::from(e)),
        }
    });
    (http::Response::from_parts(parts, body.boxed_unsync()), io)
}
