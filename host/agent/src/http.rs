//! What the HTTP providers share: the reqwest client (rustls with the `ring`
//! provider, no redirects) and its deadline, the API key type that never
//! prints, and the mapping of an HTTP failure to a [`ProviderError`] (429 and
//! 5xx are retriable; `Retry-After` is read in seconds or as an HTTP date,
//! and the `retry-after-ms` extension in milliseconds; a request that has no
//! complete answer by its deadline is a [`FailureKind::Timeout`] naming the
//! deadline, whichever phase it was in).

use super::provider::{FailureKind, ProviderError};
use reqwest::header::{HeaderMap, HeaderValue};
use std::time::Duration;

/// Largest response body read from a provider, bytes.
pub const MAX_RESPONSE_BYTES: usize = 16 * 1024 * 1024;

/// An API key. `Debug` and `Display` print `***`; the only way to the value
/// is [`ApiKey::header_value`], which marks the header sensitive.
#[derive(Clone)]
pub struct ApiKey(String);

impl ApiKey {
    /// Wrap a key read from the operator's environment or opened from the
    /// store; from now on it is one of the host's secrets
    /// (`capsaga_telemetry::secrets`: scrubbed from every log, span, metric
    /// and console page).
    pub fn new(key: String) -> ApiKey {
        capsaga_telemetry::secrets::remember(&key);
        ApiKey(key)
    }

    /// The key as a sensitive header value, with `prefix` (`Bearer `).
    ///
    /// # Errors
    /// When the key holds characters a header cannot carry (the key is not
    /// echoed in the message).
    pub fn header_value(&self, prefix: &str, provider: &str) -> Result<HeaderValue, ProviderError> {
        let mut v = HeaderValue::from_str(&format!("{prefix}{}", self.0)).map_err(|_| {
            ProviderError::failed(
                provider,
                "the API key holds characters an HTTP header cannot carry",
                false,
            )
        })?;
        v.set_sensitive(true);
        Ok(v)
    }
}

impl std::fmt::Debug for ApiKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ApiKey(***)")
    }
}

impl std::fmt::Display for ApiKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("***")
    }
}

/// The HTTP client of the providers and the deadline of one request.
#[derive(Debug, Clone)]
pub struct Client {
    inner: reqwest::Client,
    /// Most time one request may take, headers and body, milliseconds
    /// (`[agent] timeout_ms`).
    pub timeout_ms: u64,
}

/// Build the HTTP client: request deadline `timeout_ms`, no redirects (a
/// redirect would resend the key elsewhere), no proxy from the environment
/// unless reqwest's system-proxy feature is on (it is not).
///
/// # Errors
/// When the TLS stack cannot start.
pub fn client(timeout_ms: u64) -> Result<Client, String> {
    // reqwest is built without a default crypto provider; install ring once
    // for the process (an error means one is installed already).
    let _ = rustls::crypto::ring::default_provider().install_default();
    let inner = reqwest::Client::builder()
        // A backstop: the deadline proper is enforced around the whole
        // exchange in `post_json`.
        .timeout(Duration::from_millis(timeout_ms.saturating_add(1000)))
        .connect_timeout(Duration::from_millis(timeout_ms.min(30_000)))
        .redirect(reqwest::redirect::Policy::none())
        .user_agent(concat!("capsaga/", env!("CARGO_PKG_VERSION")))
        .build()
        .map_err(|e| e.to_string())?;
    Ok(Client { inner, timeout_ms })
}

/// The error of a request that had no complete answer by its deadline.
pub fn timed_out(provider: &str, timeout_ms: u64, phase: &str) -> ProviderError {
    ProviderError::of_kind(
        provider,
        FailureKind::Timeout,
        format!(
            "timed out: no complete answer within {timeout_ms} ms ([agent] timeout_ms), {phase}"
        ),
        true,
    )
}

/// Whether a reqwest error is (or wraps) a timeout.
fn is_timeout(e: &reqwest::Error) -> bool {
    if e.is_timeout() {
        return true;
    }
    let mut src: Option<&(dyn std::error::Error + 'static)> = std::error::Error::source(e);
    while let Some(s) = src {
        if s.downcast_ref::<std::io::Error>()
            .is_some_and(|io| io.kind() == std::io::ErrorKind::TimedOut)
        {
            return true;
        }
        src = s.source();
    }
    false
}

/// The delay a response asks for before a retry, milliseconds.
pub fn retry_after_ms(headers: &HeaderMap) -> Option<u64> {
    if let Some(ms) = headers
        .get("retry-after-ms")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.trim().parse::<f64>().ok())
        .filter(|v| v.is_finite() && *v >= 0.0)
    {
        return Some(ms as u64);
    }
    let v = headers.get("retry-after")?.to_str().ok()?.trim();
    if let Ok(secs) = v.parse::<f64>() {
        return (secs.is_finite() && secs >= 0.0).then_some((secs * 1000.0) as u64);
    }
    let when = httpdate::parse_http_date(v).ok()?;
    Some(
        when.duration_since(std::time::SystemTime::now())
            .map(|d| d.as_millis() as u64)
            .unwrap_or(0),
    )
}

/// Whether an HTTP status is worth a retry: 408, 409 (Anthropic lock
/// conflicts), 429, 5xx (529 is Anthropic's "overloaded").
pub fn retriable_status(status: u16) -> bool {
    matches!(status, 408 | 409 | 429) || (500..=599).contains(&status)
}

/// POST `body` as JSON to `url` with `headers`; the response body on a 2xx,
/// else a [`ProviderError::Failed`] with the provider's error message. The
/// whole exchange (connect, headers, body) must end within the client's
/// deadline.
///
/// # Errors
/// [`ProviderError::Failed`]: transport errors (retriable), timeouts
/// (retriable, naming the deadline and the phase), non-2xx statuses
/// (retriable per [`retriable_status`]), oversized bodies.
pub async fn post_json(
    client: &Client,
    provider: &str,
    url: &str,
    headers: HeaderMap,
    body: &serde_json::Value,
) -> Result<String, ProviderError> {
    let payload = serde_json::to_vec(body)
        .map_err(|e| ProviderError::failed(provider, format!("request encoding: {e}"), false))?;
    let deadline = Duration::from_millis(client.timeout_ms);
    let mut phase = "waiting for the response headers";
    let exchange = async {
        let resp = client
            .inner
            .post(url)
            .headers(headers)
            .header(reqwest::header::CONTENT_TYPE, "application/json")
            .body(payload)
            .send()
            .await
            .map_err(|e| {
                // reqwest's messages name the URL, never headers: no key leaks.
                if is_timeout(&e) {
                    return timed_out(
                        provider,
                        client.timeout_ms,
                        "waiting for the response headers",
                    );
                }
                let what = if e.is_connect() {
                    "cannot connect"
                } else {
                    "request failed"
                };
                ProviderError::of_kind(
                    provider,
                    FailureKind::Transport,
                    format!("{what}: {}", error_chain(&e.without_url())),
                    true,
                )
            })?;
        let status = resp.status().as_u16();
        let retry_after = retry_after_ms(resp.headers());
        phase = "reading the response body";
        let text = read_limited(resp, provider, client.timeout_ms).await?;
        Ok::<_, ProviderError>((status, retry_after, text))
    };
    let (status, retry_after, text) = match tokio::time::timeout(deadline, exchange).await {
        Ok(r) => r?,
        Err(_) => return Err(timed_out(provider, client.timeout_ms, phase)),
    };
    if (200..300).contains(&status) {
        return Ok(text);
    }
    Err(ProviderError::Failed {
        provider: provider.to_string(),
        message: format!("HTTP {status}: {}", error_message(&text)),
        retriable: retriable_status(status),
        status: Some(status),
        retry_after_ms: retry_after,
        kind: FailureKind::Http,
        usage: Default::default(),
    })
}

/// An error and its sources, `: `-separated (reqwest's own message is often
/// just "error sending request").
fn error_chain(e: &dyn std::error::Error) -> String {
    let mut out = e.to_string();
    let mut src = e.source();
    while let Some(s) = src {
        let m = s.to_string();
        if !out.contains(&m) {
            out.push_str(": ");
            out.push_str(&m);
        }
        src = s.source();
    }
    out
}

async fn read_limited(
    mut resp: reqwest::Response,
    provider: &str,
    timeout_ms: u64,
) -> Result<String, ProviderError> {
    let mut buf: Vec<u8> = Vec::new();
    loop {
        match resp.chunk().await {
            Ok(Some(c)) => {
                if buf.len() + c.len() > MAX_RESPONSE_BYTES {
                    return Err(ProviderError::failed(
                        provider,
                        format!("response larger than {MAX_RESPONSE_BYTES} bytes"),
                        false,
                    ));
                }
                buf.extend_from_slice(&c);
            }
            Ok(None) => break,
            Err(e) if is_timeout(&e) => {
                return Err(timed_out(provider, timeout_ms, "reading the response body"));
            }
            Err(e) => {
                return Err(ProviderError::of_kind(
                    provider,
                    FailureKind::Transport,
                    format!("reading the response: {}", error_chain(&e.without_url())),
                    true,
                ));
            }
        }
    }
    String::from_utf8(buf)
        .map_err(|_| ProviderError::failed(provider, "response is not UTF-8", false))
}

/// The message of a provider error body: OpenAI `{"error":{"message"}}`,
/// Anthropic `{"type":"error","error":{"type","message"}}`, else the text
/// clipped. Scrubbed of the host's secrets first
/// (`capsaga_telemetry::secrets::scrub`): a provider or a proxy that echoes
/// the request's `Authorization` header in its error body does not put the
/// key into the turn's trace, its answer or a log line, even cut short.
pub fn error_message(body: &str) -> String {
    let body = capsaga_telemetry::secrets::scrub(body);
    let body = body.as_ref();
    let clipped = |s: &str| s.chars().take(300).collect::<String>();
    let Ok(v) = serde_json::from_str::<serde_json::Value>(body) else {
        return clipped(body.trim());
    };
    let err = v.get("error");
    let msg = err
        .and_then(|e| e.get("message"))
        .and_then(|m| m.as_str())
        .or_else(|| err.and_then(|e| e.as_str()));
    let kind = err
        .and_then(|e| e.get("type").or_else(|| e.get("code")))
        .and_then(|t| t.as_str());
    match (kind, msg) {
        (Some(k), Some(m)) => clipped(&format!("{k}: {m}")),
        (None, Some(m)) => clipped(m),
        _ => clipped(body.trim()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_never_print() {
        let k = ApiKey::new("sk-secret-123".into());
        assert_eq!(format!("{k:?} {k}"), "ApiKey(***) ***");
        let v = k.header_value("Bearer ", "p").unwrap();
        assert!(v.is_sensitive());
        let e = ApiKey::new("bad\nkey-secret".into())
            .header_value("", "p")
            .unwrap_err();
        assert!(!e.to_string().contains("secret"));
    }

    #[test]
    fn retry_after_forms() {
        let mut h = HeaderMap::new();
        h.insert("retry-after", HeaderValue::from_static("2"));
        assert_eq!(retry_after_ms(&h), Some(2000));
        h.insert("retry-after-ms", HeaderValue::from_static("150"));
        assert_eq!(retry_after_ms(&h), Some(150));
        let mut h = HeaderMap::new();
        h.insert(
            "retry-after",
            HeaderValue::from_static("Wed, 21 Oct 2015 07:28:00 GMT"),
        );
        assert_eq!(retry_after_ms(&h), Some(0));
        h.insert("retry-after", HeaderValue::from_static("soon"));
        assert_eq!(retry_after_ms(&h), None);
    }

    #[test]
    fn error_bodies() {
        assert_eq!(
            error_message(
                r#"{"error":{"message":"Rate limit reached","type":"requests","param":null,"code":"rate_limit_exceeded"}}"#
            ),
            "requests: Rate limit reached"
        );
        assert_eq!(
            error_message(
                r#"{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}"#
            ),
            "overloaded_error: Overloaded"
        );
        assert_eq!(
            error_message("<html>bad gateway</html>"),
            "<html>bad gateway</html>"
        );
        assert!(retriable_status(429) && retriable_status(529) && retriable_status(500));
        assert!(!retriable_status(400) && !retriable_status(401));
    }
}
