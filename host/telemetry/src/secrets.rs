//! The host's own secrets, and the one function every sink that leaves the
//! process passes its text through: [`scrub`] (issue 45 item 5).
//!
//! The process learns its secrets where they come from and tells this
//! module ([`remember`]): the values of its environment variables whose
//! names name a secret (read once, at the first use: `CAPSAGA_TOKEN`,
//! `CAPSAGA_KEK`, `OPENAI_API_KEY`, `PGPASSWORD`, ...), and, from the
//! runtime, every `secret:` grant's value, every provider key opened
//! (sealed or from the environment), the store's password, and each
//! named token that authenticated a request or was just created.
//! [`scrub`] replaces them, in their usual encodings, and every credential
//! shape (`capsaga_secrets::scrub`) with `[redacted]`.
//!
//! The sinks that apply it, each built in this crate or calling it at its
//! one exit: the log output ([`crate::logs`]), the exported spans, their
//! events and links ([`crate::export`]), the metric labels of `/metrics`
//! and of the OTLP push ([`crate::metrics`]), the audit export
//! ([`crate::audit`]), the captured content ([`crate::content`]); in the
//! runtime, the console's responses and the command line's messages on
//! stderr.

use capsaga_secrets::scrub::{MIN_KNOWN_LEN, Scrubber};
use std::borrow::Cow;
use std::collections::BTreeSet;
use std::sync::{Arc, LazyLock, Mutex, RwLock};

/// The known values and the scrubber built from them.
struct Known {
    values: Mutex<BTreeSet<String>>,
    current: RwLock<Arc<Scrubber>>,
}

static KNOWN: LazyLock<Known> = LazyLock::new(|| {
    let k = Known {
        values: Mutex::new(BTreeSet::new()),
        current: RwLock::new(Arc::new(Scrubber::default())),
    };
    let env: Vec<String> = std::env::vars_os()
        .filter_map(|(k, v)| Some((k.into_string().ok()?, v.into_string().ok()?)))
        .filter(|(k, _)| secret_key(k))
        .map(|(_, v)| v)
        .collect();
    add(&k, env.iter().map(String::as_str));
    k
});

fn add<'a>(k: &Known, secrets: impl IntoIterator<Item = &'a str>) {
    let Ok(mut values) = k.values.lock() else {
        return;
    };
    let mut changed = false;
    for s in secrets {
        let s = s.trim();
        if s.len() >= MIN_KNOWN_LEN && !values.contains(s) {
            values.insert(s.to_string());
            changed = true;
        }
    }
    if changed {
        let scrubber = Arc::new(Scrubber::new(values.iter().map(String::as_str)));
        if let Ok(mut current) = k.current.write() {
            *current = scrubber;
        }
    }
}

/// Remember `secret` (a value the host knows is secret); values shorter
/// than 8 bytes are left to the shapes.
pub fn remember(secret: &str) {
    add(&KNOWN, [secret]);
}

/// Remember every secret of `secrets`.
pub fn remember_all<'a>(secrets: impl IntoIterator<Item = &'a str>) {
    add(&KNOWN, secrets);
}

/// The scrubber of everything remembered so far.
pub fn scrubber() -> Arc<Scrubber> {
    KNOWN.current.read().map(|c| c.clone()).unwrap_or_default()
}

/// `text` without any secret the process knows nor any credential shape.
pub fn scrub(text: &str) -> Cow<'_, str> {
    let s = scrubber();
    match s.scrub(text) {
        Cow::Borrowed(_) => Cow::Borrowed(text),
        Cow::Owned(o) => Cow::Owned(o),
    }
}

/// [`scrub`] of bytes (a non-UTF-8 text is read lossily only when it held
/// something to replace).
pub fn scrub_bytes(bytes: &[u8]) -> Cow<'_, [u8]> {
    let s = scrubber();
    match s.scrub_bytes(bytes) {
        Cow::Borrowed(_) => Cow::Borrowed(bytes),
        Cow::Owned(o) => Cow::Owned(o),
    }
}

/// Whether a JSON key or an environment variable name names a secret
/// (case-insensitive, `-` and `_` ignored): contains `password`, `passwd`,
/// `secret`, `token`, `apikey`, `authorization`, `auth`, `cookie`,
/// `credential`, `privatekey`, `kek`, `session`, `bearer`, or ends in `key`.
pub fn secret_key(key: &str) -> bool {
    let k: String = key
        .chars()
        .filter(|c| *c != '_' && *c != '-')
        .flat_map(char::to_lowercase)
        .collect();
    const PARTS: [&str; 13] = [
        "password",
        "passwd",
        "secret",
        "token",
        "apikey",
        "authorization",
        "auth",
        "cookie",
        "credential",
        "privatekey",
        "kek",
        "session",
        "bearer",
    ];
    PARTS.iter().any(|p| k.contains(p)) || k.ends_with("key")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_remembered_value_is_scrubbed_from_then_on() {
        let v = "remembered-value-7f3a9c";
        assert_eq!(scrub(&format!("x {v} y")), format!("x {v} y"));
        remember(v);
        remember("short");
        assert_eq!(scrub(&format!("x {v} y")), "x [redacted] y");
        assert_eq!(scrub("a short one"), "a short one");
    }
}
