//! Outgoing HTTP for tools, over `wasi:http/outgoing-handler`.
//!
//! ```no_run
//! use capsaga_sdk::http::Request;
//! # fn f() -> Result<(), capsaga_sdk::ToolError> {
//! let resp = Request::get("https://api.example.com/items?limit=10")
//!     .header("accept", "application/json")
//!     .max_body_bytes(1 << 20)
//!     .send()?;
//! if resp.status == 200 {
//!     let items: serde_json::Value = resp.json()?;
//!     # let _ = items;
//! }
//! # Ok(()) }
//! ```
//!
//! The host checks every request against the tool's `net:` grants (declare
//! them in [`Meta::capability`](crate::Meta::capability), e.g.
//! `net:https:*`), resolves names itself, refuses private, loopback,
//! link-local and metadata addresses, and never follows redirects: a 3xx
//! comes back as a [`Response`], and [`Request::send_following`] sends a new
//! request (checked again by the host) for each hop. A refusal becomes a
//! `permission-denied` [`ToolError`]; the host adds its reason to the call's
//! error details. Credentials (`secret:<name>@<host>`) are added by the host
//! on its side: a tool never sees them and must not try to set them.
//!
//! Outside a component (native unit tests) [`Request::send`] returns an
//! `unsupported` error.

use crate::ToolError;

/// Most redirects [`Request::send_following`] follows.
pub const MAX_REDIRECTS: usize = 10;
/// Default cap on the bytes of a response body read by the tool.
pub const DEFAULT_MAX_BODY_BYTES: u64 = 4 * 1024 * 1024;

/// An HTTP method.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Method {
    /// GET.
    Get,
    /// HEAD.
    Head,
    /// POST.
    Post,
    /// PUT.
    Put,
    /// PATCH.
    Patch,
    /// DELETE.
    Delete,
    /// OPTIONS.
    Options,
}

impl Method {
    /// The method's name, e.g. `GET`.
    pub fn as_str(self) -> &'static str {
        match self {
            Method::Get => "GET",
            Method::Head => "HEAD",
            Method::Post => "POST",
            Method::Put => "PUT",
            Method::Patch => "PATCH",
            Method::Delete => "DELETE",
            Method::Options => "OPTIONS",
        }
    }

    /// Parse a method name (case-insensitive).
    pub fn parse(s: &str) -> Option<Method> {
        Some(match s.to_ascii_uppercase().as_str() {
            "GET" => Method::Get,
            "HEAD" => Method::Head,
            "POST" => Method::Post,
            "PUT" => Method::Put,
            "PATCH" => Method::Patch,
            "DELETE" => Method::Delete,
            "OPTIONS" => Method::Options,
            _ => return None,
        })
    }
}

/// An outgoing request, built with a method constructor and sent with
/// [`Request::send`].
#[derive(Clone, Debug)]
pub struct Request {
    /// The method.
    pub method: Method,
    /// The absolute URL (`http://` or `https://`).
    pub url: String,
    /// Header fields, in order.
    pub headers: Vec<(String, String)>,
    /// The body (empty for none).
    pub body: Vec<u8>,
    /// Cap on the response body the tool reads, bytes; past it the body is
    /// cut and [`Response::truncated`] is set.
    pub max_body_bytes: u64,
}

/// A response.
#[derive(Clone, Debug, Default)]
pub struct Response {
    /// The URL this response answers.
    pub url: String,
    /// Status code.
    pub status: u16,
    /// Header fields as received (names lowercase).
    pub headers: Vec<(String, String)>,
    /// The body, at most the request's `max_body_bytes`.
    pub body: Vec<u8>,
    /// True when the body was cut at `max_body_bytes`.
    pub truncated: bool,
}

impl Request {
    /// A request with `method` to `url`.
    pub fn new(method: Method, url: impl Into<String>) -> Request {
        Request {
            method,
            url: url.into(),
            headers: Vec::new(),
            body: Vec::new(),
            max_body_bytes: DEFAULT_MAX_BODY_BYTES,
        }
    }
    /// GET `url`.
    pub fn get(url: impl Into<String>) -> Request {
        Request::new(Method::Get, url)
    }
    /// HEAD `url`.
    pub fn head(url: impl Into<String>) -> Request {
        Request::new(Method::Head, url)
    }
    /// POST to `url`.
    pub fn post(url: impl Into<String>) -> Request {
        Request::new(Method::Post, url)
    }
    /// PUT to `url`.
    pub fn put(url: impl Into<String>) -> Request {
        Request::new(Method::Put, url)
    }
    /// PATCH `url`.
    pub fn patch(url: impl Into<String>) -> Request {
        Request::new(Method::Patch, url)
    }
    /// DELETE `url`.
    pub fn delete(url: impl Into<String>) -> Request {
        Request::new(Method::Delete, url)
    }

    /// Add a header field.
    pub fn header(mut self, name: impl Into<String>, value: impl Into<String>) -> Request {
        self.headers.push((name.into(), value.into()));
        self
    }

    /// Set the body.
    pub fn body(mut self, body: impl Into<Vec<u8>>) -> Request {
        self.body = body.into();
        self
    }

    /// Set a JSON body and `content-type: application/json`.
    pub fn json(self, value: &serde_json::Value) -> Request {
        self.header("content-type", "application/json")
            .body(value.to_string())
    }

    /// Cap the response body read, bytes.
    pub fn max_body_bytes(mut self, n: u64) -> Request {
        self.max_body_bytes = n;
        self
    }

    /// Send the request and read the response (body up to the cap).
    ///
    /// # Errors
    /// `invalid-args` for a URL that is not absolute http(s), a header the
    /// host forbids is `permission-denied`, and the host's refusals and
    /// transport failures as described in [`error_from_code`].
    pub fn send(&self) -> Result<Response, ToolError> {
        imp::send(self)
    }

    /// Send, then follow redirects (301, 302, 303, 307, 308) up to
    /// `max_redirects` (at most [`MAX_REDIRECTS`]) with a new request for
    /// each hop, which the host checks again like any other. A 303, and a
    /// 301/302 after a POST, continue as GET without a body. Returns the last
    /// response and the URLs visited before it.
    ///
    /// # Errors
    /// As [`Request::send`]; `external-error` when there are more redirects
    /// than allowed.
    pub fn send_following(
        &self,
        max_redirects: usize,
    ) -> Result<(Response, Vec<String>), ToolError> {
        let max = max_redirects.min(MAX_REDIRECTS);
        let mut req = self.clone();
        let mut chain = Vec::new();
        loop {
            let resp = req.send()?;
            let Some(next) = resp.location() else {
                return Ok((resp, chain));
            };
            if chain.len() >= max {
                return Err(ToolError::external(format!(
                    "more than {max} redirects, the last from {} to {next}",
                    resp.url
                ))
                .hint("The URL redirects in a loop or too often; try the final URL directly."));
            }
            chain.push(req.url.clone());
            if resp.status == 303
                || (matches!(resp.status, 301 | 302) && req.method == Method::Post)
            {
                req.method = if req.method == Method::Head {
                    Method::Head
                } else {
                    Method::Get
                };
                req.body.clear();
            }
            req.url = next;
        }
    }
}

impl Response {
    /// The first value of header `name` (case-insensitive).
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    /// The body as text (invalid UTF-8 replaced).
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }

    /// The body parsed as JSON.
    ///
    /// # Errors
    /// `external-error` when it is not JSON of type `T`.
    pub fn json<T: serde::de::DeserializeOwned>(&self) -> Result<T, ToolError> {
        serde_json::from_slice(&self.body).map_err(|e| {
            ToolError::external(format!(
                "{} answered with a body that is not the expected JSON: {e}",
                self.url
            ))
        })
    }

    /// For a redirect status (301, 302, 303, 307, 308) with a `Location`,
    /// the absolute URL it points to.
    pub fn location(&self) -> Option<String> {
        if !matches!(self.status, 301 | 302 | 303 | 307 | 308) {
            return None;
        }
        self.header("location")
            .map(|l| resolve_reference(&self.url, l.trim()))
    }
}

/// `scheme`, `authority` and `path?query` of an absolute http(s) URL (the
/// fragment is dropped). The host parses the URL again with the WHATWG
/// parser and decides on that; this split only hands it over.
///
/// # Errors
/// `invalid-args` when the URL is not `http://...` or `https://...`.
pub fn split_url(url: &str) -> Result<(&str, &str, String), ToolError> {
    let bad = || {
        ToolError::invalid_args(format!("`{url}` is not an absolute http(s) URL"))
            .hint("Pass a full URL such as https://example.com/page.")
    };
    let (scheme, rest) = url.split_once("://").ok_or_else(bad)?;
    if !scheme.eq_ignore_ascii_case("http") && !scheme.eq_ignore_ascii_case("https") {
        return Err(bad());
    }
    let end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    let (authority, tail) = rest.split_at(end);
    if authority.is_empty() {
        return Err(bad());
    }
    let tail = tail.split('#').next().unwrap_or("");
    let path = if tail.is_empty() {
        "/".to_string()
    } else if tail.starts_with('?') {
        format!("/{tail}")
    } else {
        tail.to_string()
    };
    Ok((scheme, authority, path))
}

/// Resolve a `Location` value against the URL it came from (RFC 3986 §5,
/// enough for redirects: absolute, scheme-relative, absolute-path and
/// relative-path references).
pub fn resolve_reference(base: &str, reference: &str) -> String {
    if reference.contains("://") {
        return reference.to_string();
    }
    let Ok((scheme, authority, path)) = split_url(base) else {
        return reference.to_string();
    };
    if let Some(r) = reference.strip_prefix("//") {
        return format!("{scheme}://{r}");
    }
    if reference.starts_with('/') {
        return format!("{scheme}://{authority}{reference}");
    }
    let path = path.split('?').next().unwrap_or("/");
    let dir = &path[..path.rfind('/').map_or(0, |i| i + 1)];
    format!("{scheme}://{authority}{dir}{reference}")
}

macro_rules! cfg_component {
    ($($item:item)*) => {
        $(#[cfg(all(target_arch = "wasm32", target_os = "wasi", target_env = "p2"))] $item)*
    };
}
macro_rules! cfg_native {
    ($($item:item)*) => {
        $(#[cfg(not(all(target_arch = "wasm32", target_os = "wasi", target_env = "p2")))] $item)*
    };
}

cfg_component! {
    pub use imp::error_from_code;

    mod imp {
        use super::{Request, Response, split_url};
        use crate::ToolError;
        use serde_json::json;
        use wasip2::http::outgoing_handler;
        use wasip2::http::types::{
            ErrorCode, Fields, HeaderError, IncomingBody, Method as WMethod, OutgoingBody,
            OutgoingRequest, Scheme,
        };
        use wasip2::io::streams::StreamError;

        /// A tool error for a `wasi:http` error code about a request to `url`.
        pub fn error_from_code(code: &ErrorCode, url: &str) -> ToolError {
            let details = json!({"url": url, "wasi_http_error": format!("{code:?}")});
            let e = match code {
                ErrorCode::HttpRequestDenied => ToolError::permission_denied(format!(
                    "the host refused the request to {url}: not granted to this tool, or a header or method it does not allow"
                ))
                .hint("Only hosts the operator granted are reachable; see the error details for the host's reason."),
                ErrorCode::DestinationIpProhibited => ToolError::permission_denied(format!(
                    "the host refused {url}: it resolves to an address tools may not reach (private, loopback, link-local, metadata or reserved)"
                ))
                .hint("Use a public host the operator granted."),
                ErrorCode::HttpRequestUriInvalid | ErrorCode::HttpRequestUriTooLong => {
                    ToolError::invalid_args(format!("invalid URL {url}"))
                }
                ErrorCode::HttpRequestMethodInvalid => {
                    ToolError::invalid_args(format!("method not allowed for {url}"))
                }
                ErrorCode::HttpResponseBodySize(cap) => ToolError::quota_exceeded(format!(
                    "the response from {url} is larger than the host's cap{}",
                    cap.map(|c| format!(" of {c} bytes")).unwrap_or_default()
                ))
                .hint("Ask for less data (a range, a page, a smaller resource)."),
                ErrorCode::DnsTimeout
                | ErrorCode::ConnectionTimeout
                | ErrorCode::ConnectionReadTimeout
                | ErrorCode::ConnectionWriteTimeout
                | ErrorCode::HttpResponseTimeout => {
                    ToolError::timeout(format!("the request to {url} timed out")).retriable(true)
                }
                ErrorCode::DnsError(_) | ErrorCode::DestinationNotFound => {
                    ToolError::network(format!("{url}: the host name did not resolve"))
                }
                ErrorCode::TlsCertificateError => {
                    ToolError::network(format!("{url}: the server's TLS certificate is not valid for it"))
                }
                _ => ToolError::network(format!("the request to {url} failed")).retriable(true),
            };
            e.details(details)
        }

        fn header_error(name: &str, e: HeaderError) -> ToolError {
            match e {
                HeaderError::Forbidden => ToolError::permission_denied(format!(
                    "header `{name}` may not be set by a tool"
                ))
                .hint("The host sets Host and routing headers itself; credentials come from the operator's secrets."),
                _ => ToolError::invalid_args(format!("header `{name}` is not valid")),
            }
        }

        pub(super) fn send(req: &Request) -> Result<Response, ToolError> {
            let (scheme, authority, path) = split_url(&req.url)?;
            let headers = Fields::new();
            for (k, v) in &req.headers {
                headers
                    .append(&k.to_ascii_lowercase(), v.as_bytes())
                    .map_err(|e| header_error(k, e))?;
            }
            let out = OutgoingRequest::new(headers);
            let method = match req.method {
                super::Method::Get => WMethod::Get,
                super::Method::Head => WMethod::Head,
                super::Method::Post => WMethod::Post,
                super::Method::Put => WMethod::Put,
                super::Method::Patch => WMethod::Patch,
                super::Method::Delete => WMethod::Delete,
                super::Method::Options => WMethod::Options,
            };
            let invalid = |what: &str| ToolError::invalid_args(format!("{what} of `{}` is not valid", req.url));
            out.set_method(&method).map_err(|()| invalid("the method"))?;
            let scheme = if scheme.eq_ignore_ascii_case("https") { Scheme::Https } else { Scheme::Http };
            out.set_scheme(Some(&scheme)).map_err(|()| invalid("the scheme"))?;
            out.set_authority(Some(authority)).map_err(|()| invalid("the authority"))?;
            out.set_path_with_query(Some(&path)).map_err(|()| invalid("the path"))?;
            let body = out.body().map_err(|()| ToolError::unknown("request body unavailable"))?;
            let future = outgoing_handler::handle(out, None).map_err(|c| error_from_code(&c, &req.url))?;
            // Write the body after handing the request over, so a large body
            // streams instead of filling a buffer nobody drains. A write error
            // here is secondary: the response future holds the real cause.
            if let Ok(stream) = body.write() {
                for chunk in req.body.chunks(4096) {
                    if stream.blocking_write_and_flush(chunk).is_err() {
                        break;
                    }
                }
                drop(stream);
            }
            let _ = OutgoingBody::finish(body, None);
            future.subscribe().block();
            let resp = match future.get() {
                Some(Ok(Ok(r))) => r,
                Some(Ok(Err(code))) => return Err(error_from_code(&code, &req.url)),
                _ => return Err(ToolError::unknown(format!("no response for {}", req.url))),
            };
            let status = resp.status();
            let headers = resp
                .headers()
                .entries()
                .into_iter()
                .map(|(k, v)| (k, String::from_utf8_lossy(&v).into_owned()))
                .collect();
            let incoming = resp.consume().map_err(|()| ToolError::unknown("response body unavailable"))?;
            let (body, truncated) = read_body(&incoming, req.max_body_bytes, &req.url)?;
            drop(incoming);
            Ok(Response { url: req.url.clone(), status, headers, body, truncated })
        }

        /// A body-read error the host did not type: Wasmtime 48 hands body
        /// errors to the guest as text only (`http-error-code` answers
        /// `none`), so classify its first line (the rest is a host backtrace,
        /// never shown).
        fn body_error(debug: &str, url: &str) -> ToolError {
            let first = debug.lines().next().unwrap_or("").chars().take(200).collect::<String>();
            let lower = first.to_ascii_lowercase();
            let e = if lower.contains("body size exceeds limit") {
                ToolError::quota_exceeded(format!("the response from {url} is larger than the host's cap ({first})"))
                    .hint("Ask for less data (a range, a page, a smaller resource).")
            } else if lower.contains("timeout") || lower.contains("timed out") {
                ToolError::timeout(format!("reading the response from {url} timed out")).retriable(true)
            } else {
                ToolError::network(format!("reading the response from {url} failed: {first}")).retriable(true)
            };
            e.details(json!({"url": url, "wasi_http_error": first}))
        }

        fn read_body(incoming: &IncomingBody, cap: u64, url: &str) -> Result<(Vec<u8>, bool), ToolError> {
            let stream = incoming.stream().map_err(|()| ToolError::unknown("response body stream unavailable"))?;
            let mut out = Vec::new();
            let mut truncated = false;
            loop {
                let want = (cap.saturating_sub(out.len() as u64)).min(64 * 1024);
                if want == 0 {
                    truncated = true;
                    break;
                }
                match stream.blocking_read(want) {
                    Ok(chunk) => out.extend_from_slice(&chunk),
                    Err(StreamError::Closed) => break,
                    Err(StreamError::LastOperationFailed(e)) => {
                        let err = match wasip2::http::types::http_error_code(&e) {
                            Some(code) => error_from_code(&code, url),
                            None => body_error(&e.to_debug_string(), url),
                        };
                        return Err(err);
                    }
                }
            }
            drop(stream);
            Ok((out, truncated))
        }
    }
}

cfg_native! {
    mod imp {
        use super::{Request, Response};
        use crate::ToolError;

        pub(super) fn send(req: &Request) -> Result<Response, ToolError> {
            Err(ToolError::unsupported(format!(
                "HTTP is only available inside a capsaga component (request to {})",
                req.url
            )))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn split_and_resolve() {
        assert_eq!(
            split_url("https://a.example:8443/x/y?q=1#f").unwrap(),
            ("https", "a.example:8443", "/x/y?q=1".to_string())
        );
        assert_eq!(
            split_url("http://h").unwrap(),
            ("http", "h", "/".to_string())
        );
        assert_eq!(
            split_url("http://h?x").unwrap(),
            ("http", "h", "/?x".to_string())
        );
        assert!(split_url("ftp://h/").is_err());
        assert!(split_url("/relative").is_err());
        assert!(split_url("http:///x").is_err());
        let b = "https://a.example/dir/page?q";
        assert_eq!(resolve_reference(b, "http://o/x"), "http://o/x");
        assert_eq!(resolve_reference(b, "//o/x"), "https://o/x");
        assert_eq!(resolve_reference(b, "/top"), "https://a.example/top");
        assert_eq!(resolve_reference(b, "next"), "https://a.example/dir/next");
    }

    #[test]
    fn location_only_for_redirects() {
        let mut r = Response {
            url: "https://a.example/x".into(),
            status: 302,
            headers: vec![("location".into(), "/y".into())],
            ..Default::default()
        };
        assert_eq!(r.location().as_deref(), Some("https://a.example/y"));
        r.status = 200;
        assert_eq!(r.location(), None);
    }

    #[test]
    fn native_send_is_unsupported() {
        let e = Request::get("https://a.example/").send().unwrap_err();
        assert_eq!(e.kind, crate::ErrorKind::Unsupported);
    }
}
