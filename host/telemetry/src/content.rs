//! Tool arguments and results as span attributes: off unless the operator
//! opts in (`CAPSAGA_OTEL_CAPTURE_CONTENT=true`), and then redacted and
//! capped, so that the telemetry pipeline (a collector, its storage, whoever
//! reads the traces) never receives a secret the host knows.
//!
//! What is redacted, before the value is cut to [`MAX_CONTENT_BYTES`]:
//! 1. the value of every JSON member whose key names a secret (`password`,
//!    `token`, `api_key`, `authorization`, `cookie`, `secret`, `kek`, ...:
//!    [`secret_key`]), at any depth;
//! 2. every string that looks like a credential ([`looks_secret`]: a
//!    bearer/basic authorization value, a JWT, a known key prefix such as
//!    `sk-`, `ghp_`, `xoxb-`, `AKIA`, a PEM private key);
//! 3. everything [`crate::secrets::scrub`] replaces in the text: every
//!    secret value the process knows (its secret-named environment
//!    variables, `secret:` grant values, opened provider keys, the store's
//!    password, named tokens), in its usual encodings, and every credential
//!    shape anywhere inside a longer string.
//!
//! The exporter scrubs every attribute again ([`crate::export`]): this
//! module's own rules are the JSON-aware part.
//!
//! What it cannot catch: a secret the host does not know and whose shape
//! is not a credential's, or one transformed otherwise (reversed, hex) or
//! split over two values; that is why the capture is off by default
//! (THREAT_MODEL.md, telemetry rows).

use capsaga_secrets::scrub::Scrubber;
use serde_json::Value;
use std::sync::OnceLock;

/// Longest attribute value written, bytes (the cut is at a character
/// boundary and marked with `…[cut]`).
pub const MAX_CONTENT_BYTES: usize = 1024;

/// What replaces a redacted value.
pub const REDACTED: &str = "[redacted]";

/// The operator's choice and the process's known secrets.
#[derive(Debug, Clone)]
pub struct Capture {
    known: Scrubber,
}

static CAPTURE: OnceLock<Option<Capture>> = OnceLock::new();

impl Capture {
    /// A capture that redacts the exact values of `secrets` too (besides
    /// everything [`redact`] and [`crate::secrets::scrub`] redact).
    pub fn new<'a>(secrets: impl IntoIterator<Item = &'a str>) -> Capture {
        Capture {
            known: Scrubber::new(secrets),
        }
    }

    /// From the environment: `Some` when `CAPSAGA_OTEL_CAPTURE_CONTENT` is
    /// `true` or `1`. The known secrets are the process's
    /// ([`crate::secrets`]: its secret-named environment variables and what
    /// the runtime remembered).
    pub fn from_env() -> Option<Capture> {
        let on = std::env::var("CAPSAGA_OTEL_CAPTURE_CONTENT")
            .map(|v| matches!(v.trim(), "1" | "true" | "TRUE" | "True"))
            .unwrap_or(false);
        on.then(|| Capture::new([]))
    }

    /// `value` as the attribute text: secrets redacted, then capped.
    pub fn render(&self, value: &Value) -> String {
        let mut v = value.clone();
        redact(&mut v);
        let text = v.to_string();
        let text = self.known.scrub(&text);
        cap(&crate::secrets::scrub(&text))
    }
}

/// Install the process's capture choice (first call wins; later calls are
/// ignored). Without a call, nothing is captured.
pub fn install(capture: Option<Capture>) {
    let _ = CAPTURE.set(capture);
}

/// The installed capture, when the operator opted in.
pub fn capture() -> Option<&'static Capture> {
    CAPTURE.get().and_then(Option::as_ref)
}

pub use crate::secrets::secret_key;

/// Whether a string looks like a credential by its shape.
pub fn looks_secret(s: &str) -> bool {
    let t = s.trim();
    let lower = t.to_ascii_lowercase();
    if lower.starts_with("bearer ") || lower.starts_with("basic ") {
        return true;
    }
    if t.contains("-----BEGIN") && t.contains("PRIVATE KEY") {
        return true;
    }
    const PREFIXES: [&str; 9] = [
        "sk-",
        "sk_",
        "pk_",
        "ghp_",
        "gho_",
        "github_pat_",
        "xoxb-",
        "xoxp-",
        "AKIA",
    ];
    if t.len() >= 16 && PREFIXES.iter().any(|p| t.starts_with(p)) {
        return true;
    }
    // A JWT: three base64url parts, the first a JSON header (`eyJ`).
    let parts: Vec<&str> = t.split('.').collect();
    parts.len() == 3 && t.starts_with("eyJ") && parts.iter().all(|p| !p.is_empty())
}

/// Redact `value` in place: members whose key names a secret, and strings
/// that look like one.
pub fn redact(value: &mut Value) {
    match value {
        Value::Object(map) => {
            for (k, v) in map.iter_mut() {
                if secret_key(k) {
                    *v = Value::String(REDACTED.to_string());
                } else {
                    redact(v);
                }
            }
        }
        Value::Array(items) => items.iter_mut().for_each(redact),
        Value::String(s) if looks_secret(s) => *s = REDACTED.to_string(),
        _ => {}
    }
}

/// `text` cut to [`MAX_CONTENT_BYTES`] at a character boundary, marked.
pub fn cap(text: &str) -> String {
    if text.len() <= MAX_CONTENT_BYTES {
        return text.to_string();
    }
    let mut end = MAX_CONTENT_BYTES;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}…[cut]", &text[..end])
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn secret_members_and_shapes_are_redacted_at_any_depth() {
        let c = Capture::new([]);
        let v = json!({
            "path": "/tmp/a",
            "headers": {"Authorization": "Bearer abc", "X-Api-Key": "k1"},
            "list": [{"password": "hunter2"}, "sk-0123456789abcdefXYZ"],
            "note": "eyJhbGciOi.eyJzdWIiOi.c2lnbmF0dXJl",
            "db_session": 7
        });
        let out = c.render(&v);
        for leaked in ["abc", "k1", "hunter2", "sk-0123", "eyJhbGciOi"] {
            assert!(!out.contains(leaked), "{leaked} in {out}");
        }
        assert!(out.contains("/tmp/a"));
    }

    #[test]
    fn known_secret_values_are_redacted_anywhere_in_the_text() {
        let c = Capture::new(["correct-horse-battery", "short"]);
        let out = c.render(&json!({"q": "the word is correct-horse-battery!", "n": "short"}));
        assert!(!out.contains("correct-horse-battery"));
        // Values shorter than MIN_SECRET_LEN are not treated as secrets.
        assert!(out.contains("short"));
    }

    #[test]
    fn long_values_are_capped_at_a_character_boundary() {
        let c = Capture::new([]);
        let out = c.render(&json!({"text": "é".repeat(5000)}));
        assert!(out.len() <= MAX_CONTENT_BYTES + "…[cut]".len());
        assert!(out.ends_with("…[cut]"));
    }

    #[test]
    fn key_names() {
        for k in [
            "CAPSAGA_KEK",
            "OPENAI_API_KEY",
            "CAPSAGA_TOKEN",
            "client-secret",
            "Cookie",
        ] {
            assert!(secret_key(k), "{k}");
        }
        for k in ["path", "content", "url", "count"] {
            assert!(!secret_key(k), "{k}");
        }
    }
}
