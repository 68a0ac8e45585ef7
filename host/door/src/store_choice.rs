//! Which state store a host opens: SQLite at `<state_dir>/state.db` (the
//! default, one machine), or a PostgreSQL database shared by several hosts
//! (`store = "postgres://..."` in `capsaga.toml`, or `CAPSAGA_STORE`, which
//! wins). The connection string is held so that it is never printed: its
//! `Debug` and [`StoreChoice::shown`] leave the password out.

use std::path::PathBuf;

/// The environment variable naming the store (wins over `store =`).
pub const STORE_ENV: &str = "CAPSAGA_STORE";

/// Default lease of a host on its sagas in a shared store, milliseconds.
pub const DEFAULT_LEASE_MS: u64 = 10_000;

/// The state store a configuration names.
#[derive(Clone, PartialEq, Eq)]
pub enum StoreChoice {
    /// SQLite: this file.
    Sqlite(PathBuf),
    /// PostgreSQL: the connection string (may hold a password, from the
    /// environment) and the lease, milliseconds.
    Postgres {
        /// The connection string.
        url: String,
        /// The host's lease on its sagas, milliseconds.
        lease_ms: u64,
    },
}

impl std::fmt::Debug for StoreChoice {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.shown())
    }
}

/// `s` with any password between `://user:` and `@`, and any
/// `password=...` pair, replaced by `***`.
pub fn redact(s: &str) -> String {
    let mut out = s.to_string();
    if let Some(scheme) = out.find("://") {
        let rest = scheme + 3;
        let auth_end = out[rest..]
            .find(['/', '?', '#'])
            .map_or(out.len(), |i| rest + i);
        if let Some(at) = out[rest..auth_end].rfind('@').map(|i| rest + i)
            && let Some(colon) = out[rest..at].find(':').map(|i| rest + i)
        {
            out.replace_range(colon + 1..at, "***");
        }
    }
    let lower = out.to_ascii_lowercase();
    if let Some(i) = lower.find("password=") {
        let start = i + "password=".len();
        let end = out[start..]
            .find([' ', '&'])
            .map_or(out.len(), |j| start + j);
        out.replace_range(start..end, "***");
    }
    out
}

impl StoreChoice {
    /// How it may be shown: the SQLite file, or the connection string
    /// without its password.
    pub fn shown(&self) -> String {
        match self {
            StoreChoice::Sqlite(p) => p.display().to_string(),
            StoreChoice::Postgres { url, .. } => redact(url),
        }
    }

    /// Whether several hosts share it.
    pub fn shared(&self) -> bool {
        matches!(self, StoreChoice::Postgres { .. })
    }

    /// The choice from `store =` of the policy file (`from_file`), the
    /// environment's `CAPSAGA_STORE` (`from_env`, wins), the SQLite file
    /// used by default, and `store_lease_ms`.
    ///
    /// # Errors
    /// What is wrong with the setting (never repeating a password).
    pub fn from_settings(
        from_file: Option<&str>,
        from_env: Option<&str>,
        sqlite: PathBuf,
        lease_ms: Option<u64>,
    ) -> Result<StoreChoice, String> {
        let lease_ms = match lease_ms {
            None => DEFAULT_LEASE_MS,
            Some(ms @ 500..=600_000) => ms,
            Some(ms) => {
                return Err(format!(
                    "store_lease_ms must be between 500 and 600000 (ms), got {ms}"
                ));
            }
        };
        let (value, in_file) = match (from_env.filter(|v| !v.trim().is_empty()), from_file) {
            (Some(v), _) => (v, false),
            (None, Some(v)) => (v, true),
            (None, None) => return Ok(StoreChoice::Sqlite(sqlite)),
        };
        let v = value.trim();
        if v.eq_ignore_ascii_case("sqlite") {
            return Ok(StoreChoice::Sqlite(sqlite));
        }
        let lower = v.to_ascii_lowercase();
        if !(lower.starts_with("postgres://") || lower.starts_with("postgresql://")) {
            return Err(format!(
                "store `{}`: expected `sqlite` or a postgres:// connection string",
                redact(v)
            ));
        }
        if in_file && redact(v) != v {
            return Err(format!(
                "store `{}` in the policy file holds a password: put it in PGPASSWORD, or the whole connection string in {STORE_ENV}, never in capsaga.toml",
                redact(v)
            ));
        }
        remember_password(v);
        Ok(StoreChoice::Postgres {
            url: v.to_string(),
            lease_ms,
        })
    }
}

/// Remember the password of the connection string `url` (the userinfo's,
/// and a `password=` parameter's, as written and percent-decoded) as one of
/// the host's secrets (`capsaga_telemetry::secrets`): a driver's message or
/// a tool's output repeating it is scrubbed from every sink.
fn remember_password(url: &str) {
    let shown = redact(url);
    if shown == url {
        return;
    }
    // `redact` replaced each password by `***`: what it replaced is the
    // text between the parts it kept.
    let mut rest = url;
    for part in shown.split("***") {
        // An empty part is the end of the string (a password at the very
        // end): the whole rest is the password.
        let found = if part.is_empty() {
            Some(rest.len())
        } else {
            rest.find(part)
        };
        let Some(i) = found else {
            break;
        };
        let secret = &rest[..i];
        if !secret.is_empty() {
            capsaga_telemetry::secrets::remember(secret);
            capsaga_telemetry::secrets::remember(&percent_decoded(secret));
        }
        rest = &rest[i + part.len()..];
    }
}

/// `s` with its `%XX` escapes decoded (an invalid escape kept as it is).
fn percent_decoded(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        let hex = |c: u8| char::from(c).to_digit(16);
        match (
            b[i],
            b.get(i + 1).copied().and_then(hex),
            b.get(i + 2).copied().and_then(hex),
        ) {
            (b'%', Some(h), Some(l)) => {
                out.push(u8::try_from(h * 16 + l).unwrap_or(b'%'));
                i += 3;
            }
            (c, _, _) => {
                out.push(c);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn passwords_are_never_shown_nor_taken_from_the_file() {
        assert_eq!(
            redact("postgres://alice:pw@db:5432/x?sslmode=disable"),
            "postgres://alice:***@db:5432/x?sslmode=disable"
        );
        assert_eq!(redact("postgres://alice@db/x"), "postgres://alice@db/x");
        assert_eq!(
            redact("postgres://a@b/x?password=pw&x=1"),
            "postgres://a@b/x?password=***&x=1"
        );
        let s = PathBuf::from("s.db");
        let c = StoreChoice::from_settings(None, Some("postgres://a:pw@h/db"), s.clone(), None)
            .unwrap();
        assert!(!format!("{c:?}").contains("pw@"), "{c:?}");
        assert!(c.shared());
        let e = StoreChoice::from_settings(Some("postgres://a:pw@h/db"), None, s.clone(), None)
            .unwrap_err();
        assert!(e.contains("PGPASSWORD") && !e.contains(":pw@"), "{e}");
        let e = StoreChoice::from_settings(
            Some("postgres://a@h/db?password=pw"),
            None,
            s.clone(),
            None,
        )
        .unwrap_err();
        assert!(!e.contains("=pw"), "{e}");
        assert_eq!(
            StoreChoice::from_settings(None, None, s.clone(), None).unwrap(),
            StoreChoice::Sqlite(s.clone())
        );
        assert!(StoreChoice::from_settings(Some("mysql://x"), None, s.clone(), None).is_err());
        assert!(StoreChoice::from_settings(Some("sqlite"), None, s, Some(10)).is_err());
    }

    #[test]
    fn the_stores_password_is_one_of_the_hosts_secrets() {
        let s = PathBuf::from("s.db");
        let url = "postgres://capsaga:pg%40pass-0f9e8d@127.0.0.1:5432/db?password=second-pw-77a1";
        StoreChoice::from_settings(None, Some(url), s, None).unwrap();
        let said = "connect failed for pg@pass-0f9e8d / pg%40pass-0f9e8d / second-pw-77a1";
        let out = capsaga_telemetry::secrets::scrub(said);
        for pw in ["pg@pass-0f9e8d", "pg%40pass-0f9e8d", "second-pw-77a1"] {
            assert!(!out.contains(pw), "{out}");
        }
    }
}
