//! The connection string: parsed by the driver, the password taken from
//! the environment when the string has none, and shown only without it.

use super::super::StoreError;
use std::str::FromStr;
use std::time::Duration;

/// The `options` every session of the store runs with: a session left idle
/// inside a transaction (a host cut off while it holds the log's head lock)
/// is ended by the server after this long, releasing its locks; a statement
/// that waits longer than `statement_timeout` (the head lock included)
/// fails instead of hanging.
const SESSION_OPTIONS: &str =
    "-c idle_in_transaction_session_timeout=10000 -c statement_timeout=60000 -c lock_timeout=30000";

/// A connection string made usable: the driver's configuration and how to
/// show it.
pub(super) struct Target {
    /// The driver's configuration.
    pub config: tokio_postgres::Config,
    /// `user@host:port/db`, never the password.
    pub shown: String,
}

/// The connection string as the operator may see it: `user@host:port/db`.
fn show(c: &tokio_postgres::Config) -> String {
    let hosts: Vec<String> = c
        .get_hosts()
        .iter()
        .map(|h| match h {
            tokio_postgres::config::Host::Tcp(s) => s.clone(),
            tokio_postgres::config::Host::Unix(p) => p.display().to_string(),
        })
        .collect();
    let ports: Vec<String> = c.get_ports().iter().map(u16::to_string).collect();
    format!(
        "postgres://{}@{}:{}/{}",
        c.get_user().unwrap_or("?"),
        hosts.join(","),
        if ports.is_empty() {
            "5432".into()
        } else {
            ports.join(",")
        },
        c.get_dbname().unwrap_or("?")
    )
}

impl Target {
    /// Parse `s` (a `postgres://` URL or `key=value` pairs). A password
    /// comes from the string or else from `PGPASSWORD`. TLS is not
    /// supported yet: `sslmode=require` is refused (connect over loopback,
    /// a Unix socket or a private network).
    ///
    /// # Errors
    /// [`StoreError::BadUrl`], which never repeats the string (it may hold
    /// a password).
    pub fn parse(s: &str, connect_timeout: Duration) -> Result<Target, StoreError> {
        let mut config = tokio_postgres::Config::from_str(s).map_err(|e| StoreError::BadUrl {
            target: "(not shown: it may hold a password)".into(),
            detail: format!("the connection string does not parse: {e}"),
        })?;
        let shown = show(&config);
        let bad = |detail: String| StoreError::BadUrl {
            target: shown.clone(),
            detail,
        };
        if config.get_user().is_none() {
            return Err(bad(
                "no user: write it in the connection string (postgres://USER@HOST/DB)".into(),
            ));
        }
        if config.get_dbname().is_none() {
            return Err(bad(
                "no database name: write it in the connection string (postgres://USER@HOST/DB)"
                    .into(),
            ));
        }
        if config.get_hosts().is_empty() {
            return Err(bad("no host".into()));
        }
        if config.get_ssl_mode() == tokio_postgres::config::SslMode::Require {
            return Err(bad(
                "sslmode=require: this capsaga connects without TLS; use loopback, a Unix socket or a private network to the database".into(),
            ));
        }
        if config.get_password().is_none()
            && let Some(pw) = std::env::var_os("PGPASSWORD")
        {
            config.password(pw.as_encoded_bytes());
        }
        let options = match config.get_options() {
            Some(o) if !o.trim().is_empty() => format!("{o} {SESSION_OPTIONS}"),
            _ => SESSION_OPTIONS.to_string(),
        };
        config
            .options(options)
            .application_name("capsaga")
            .connect_timeout(connect_timeout)
            .keepalives(true)
            .keepalives_idle(Duration::from_secs(5))
            .keepalives_interval(Duration::from_secs(2))
            .keepalives_retries(3);
        #[cfg(target_os = "linux")]
        config.tcp_user_timeout(Duration::from_secs(10));
        Ok(Target { config, shown })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_password_is_never_shown() {
        let t = Target::parse(
            "postgres://alice:s3cr3t-pw@db.internal:6543/capsaga",
            Duration::from_secs(1),
        )
        .unwrap();
        assert_eq!(t.shown, "postgres://alice@db.internal:6543/capsaga");
        assert!(!format!("{:?}", t.config).contains("s3cr3t-pw"));
        for bad in [
            "postgres://alice:s3cr3t-pw@db.internal:notaport/x",
            "postgres://alice:s3cr3t-pw@db.internal/x?bogus=1",
            "host=x password=s3cr3t-pw port=nope",
        ] {
            let e = Target::parse(bad, Duration::from_secs(1))
                .err()
                .unwrap()
                .to_string();
            assert!(!e.contains("s3cr3t-pw"), "{e}");
            assert!(e.contains("bad state store"), "{e}");
        }
        let e = Target::parse("postgres://db.internal:5432", Duration::from_secs(1))
            .err()
            .unwrap()
            .to_string();
        assert!(e.contains("no user"), "{e}");
        let e = Target::parse(
            "postgres://a:s3cr3t-pw@h/db?sslmode=require",
            Duration::from_secs(1),
        )
        .err()
        .unwrap()
        .to_string();
        assert!(
            e.contains("sslmode=require") && !e.contains("s3cr3t-pw"),
            "{e}"
        );
    }
}
