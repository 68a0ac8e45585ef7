//! The operator's commands on who may do what (issue 24): `capsaga tokens
//! create|list|revoke`, `capsaga keys add|list|remove` (provider keys
//! sealed under `CAPSAGA_KEK`), `capsaga pause [--read-only]` and
//! `capsaga unpause` (the kill switch). They need only the policy and the
//! state database (no engine), and act as the local operator
//! (`cli:<os user>`): whoever can run `capsaga` on the state is its
//! operator.

use super::render::Out;
use super::{Failure, exit};
use base64::Engine;
use capsaga_agent::keys::{self, KeyError};
use capsaga_core::pause::Mode;
use capsaga_core::principal::{Role, valid_token_name};
use capsaga_door::config::Config;
use capsaga_door::dispatch::decider;
use capsaga_store::sqlite::GroupCommit;
use capsaga_store::{Store, TokenOpError};
use clap::Subcommand;
use serde_json::json;
use std::io::BufRead;
use std::path::Path;
use std::sync::Arc;
use zeroize::Zeroizing;

/// `capsaga tokens ...`
#[derive(Debug, Subcommand)]
pub enum TokensCmd {
    /// Create a named token and print its secret once (only its SHA-256 is
    /// stored): give it to the client or operator as `Authorization:
    /// Bearer <secret>`.
    Create {
        /// Its name (letters, digits, `_`, `-`, `.`; never reused).
        name: String,
        /// `client` (sessions, tool calls, turns, its own sagas) or
        /// `operator` (also approvals, pause, keys, every saga).
        #[arg(long)]
        role: String,
    },
    /// List tokens (never their secrets).
    List,
    /// Revoke a token: it authenticates nothing from the next request on.
    Revoke {
        /// Its name.
        name: String,
    },
}

/// `capsaga keys ...`
#[derive(Debug, Subcommand)]
pub enum KeysCmd {
    /// Seal a provider key under CAPSAGA_KEK and store it (the key is read
    /// from the first line of stdin, or from --from-env; never from the
    /// command line). A `[providers.*]` section uses it with
    /// `api_key_sealed = "NAME"`.
    Add {
        /// Its name (lower-case letters, digits, `_`, `-`).
        name: String,
        /// Read the key from this environment variable instead of stdin.
        #[arg(long, value_name = "VAR")]
        from_env: Option<String>,
    },
    /// List sealed keys: name, last four characters, KEK id.
    List,
    /// Remove a sealed key.
    Remove {
        /// Its name.
        name: String,
    },
}

/// `capsaga pause`.
#[derive(Debug, Clone, clap::Args)]
pub struct PauseArgs {
    /// Read-only mode instead: only calls without side effects run (and
    /// turns made of them); running side-effecting calls are aborted.
    #[arg(long)]
    pub read_only: bool,
    /// Why (kept in the log; the refusal the model reads quotes it).
    #[arg(long)]
    pub note: Option<String>,
    /// Only show the switch, change nothing.
    #[arg(long, conflicts_with_all = ["read_only", "note"])]
    pub status: bool,
}

/// The store the configuration names (the state directory's SQLite file,
/// or the shared PostgreSQL database of several hosts: a token, a key or a
/// pause made here then reaches every host).
async fn open_store(config_path: &Path) -> Result<Arc<dyn Store>, Failure> {
    let config = Config::load(config_path).map_err(|e| Failure {
        code: exit::CONFIG,
        message: e.to_string(),
    })?;
    Ok(capsaga_door::host::open_store(&config, GroupCommit::On).await?)
}

fn usage(message: String) -> Failure {
    Failure {
        code: exit::USAGE,
        message,
    }
}

impl From<TokenOpError> for Failure {
    fn from(e: TokenOpError) -> Self {
        let code = match &e {
            TokenOpError::Store(s) => super::store_code(s),
            TokenOpError::NotFound(_) => exit::NOT_FOUND,
            TokenOpError::NameTaken(_) | TokenOpError::AlreadyRevoked(_) => exit::NOT_SUCCESS,
        };
        Failure {
            code,
            message: e.to_string(),
        }
    }
}

/// A new token's secret: `csg_` and 32 random bytes, base64url.
fn new_secret() -> Result<Zeroizing<String>, Failure> {
    let mut b = Zeroizing::new([0u8; 32]);
    getrandom::fill(&mut b[..]).map_err(|e| Failure {
        code: exit::INTERNAL,
        message: format!("cannot draw random bytes: {e}"),
    })?;
    Ok(Zeroizing::new(format!(
        "csg_{}",
        base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(&b[..])
    )))
}

/// `capsaga tokens ...`.
pub(crate) async fn tokens(config: &Path, out: &Out, cmd: TokensCmd) -> Result<u8, Failure> {
    let store = open_store(config).await?;
    let store: &dyn Store = &*store;
    let me = decider("cli").to_string();
    match cmd {
        TokensCmd::Create { name, role } => {
            if !valid_token_name(&name) {
                return Err(usage(format!(
                    "`{}` is not a valid token name (1 to 64 letters, digits, `_`, `-`, `.`)",
                    super::render::clip(&name, 64)
                )));
            }
            let role: Role = role.parse().map_err(usage)?;
            let secret = new_secret()?;
            // Printed once on stdout, and never on stderr or in a log.
            capsaga_telemetry::secrets::remember(secret.as_str());
            let digest = capsaga_server::auth::digest(secret.as_bytes());
            let row = store.create_token(&name, role, &digest, &me).await?;
            if out.json {
                out.json(&json!({"token": row, "secret": secret.as_str()}));
            } else {
                outln!("created token `{}` ({})", row.name, row.role);
                outln!("secret (shown once, only its SHA-256 is stored):");
                outln!("{}", secret.as_str());
            }
            Ok(exit::OK)
        }
        TokensCmd::List => {
            let rows = store.tokens().await?;
            if out.json {
                out.json(&json!({ "tokens": rows }));
            } else if rows.is_empty() {
                outln!("no tokens (capsaga serve then needs CAPSAGA_TOKEN beyond loopback)");
            }
            for t in rows.iter().filter(|_| !out.json) {
                let state = match &t.revoked_at {
                    Some(at) => {
                        format!("revoked {at} by {}", t.revoked_by.as_deref().unwrap_or("?"))
                    }
                    None => "active".into(),
                };
                outln!(
                    "{:<24} {:<9} created {} by {}  {state}",
                    t.name,
                    t.role,
                    t.created_at,
                    t.created_by
                );
            }
            Ok(exit::OK)
        }
        TokensCmd::Revoke { name } => {
            let row = store.revoke_token(&name, &me).await?;
            if out.json {
                out.json(&json!({ "token": row }));
            } else {
                outln!(
                    "revoked token `{}`: it authenticates nothing from now on",
                    row.name
                );
            }
            Ok(exit::OK)
        }
    }
}

fn key_failure(e: KeyError) -> Failure {
    let code = match &e {
        KeyError::Store(s) => super::store_code(s),
        KeyError::NotFound(_) => exit::NOT_FOUND,
        KeyError::Seal(_) => exit::CONFIG,
        KeyError::Random(_) => exit::INTERNAL,
    };
    Failure {
        code,
        message: e.to_string(),
    }
}

/// `capsaga keys ...`.
pub(crate) async fn keys_cmd(config: &Path, out: &Out, cmd: KeysCmd) -> Result<u8, Failure> {
    let store = open_store(config).await?;
    let store: &dyn Store = &*store;
    match cmd {
        KeysCmd::Add { name, from_env } => {
            let kek = keys::kek_from_env().map_err(|e| key_failure(e.into()))?;
            let secret: Zeroizing<String> = match from_env {
                Some(var) => Zeroizing::new(std::env::var(&var).map_err(|_| {
                    usage(format!(
                        "--from-env: {} is not set",
                        super::render::clip(&var, 64)
                    ))
                })?),
                None => {
                    let mut line = Zeroizing::new(String::new());
                    std::io::stdin()
                        .lock()
                        .read_line(&mut line)
                        .map_err(|e| usage(format!("cannot read the key from stdin: {e}")))?;
                    Zeroizing::new(line.trim_end_matches(['\r', '\n']).to_string())
                }
            };
            let row = keys::seal_and_store(store, &kek, &name, &secret, &decider("cli"))
                .await
                .map_err(key_failure)?;
            if out.json {
                out.json(&json!({ "key": row }));
            } else {
                outln!(
                    "sealed key `{}` (…{}) under KEK {}",
                    row.name,
                    row.last4,
                    row.kek_id
                );
            }
            Ok(exit::OK)
        }
        KeysCmd::List => {
            let rows = store.keys().await?;
            if out.json {
                out.json(&json!({ "keys": rows }));
            } else if rows.is_empty() {
                outln!("no sealed keys");
            }
            for k in rows.iter().filter(|_| !out.json) {
                outln!(
                    "{:<24} …{}  KEK {}  added {} by {}",
                    k.name,
                    k.last4,
                    k.kek_id,
                    k.created_at,
                    k.created_by
                );
            }
            Ok(exit::OK)
        }
        KeysCmd::Remove { name } => {
            if !store.remove_key(&name, &decider("cli").to_string()).await? {
                return Err(Failure {
                    code: exit::NOT_FOUND,
                    message: format!("no sealed key `{}`", super::render::clip(&name, 64)),
                });
            }
            if out.json {
                out.json(&json!({ "removed": name }));
            } else {
                outln!("removed sealed key `{name}`");
            }
            Ok(exit::OK)
        }
    }
}

/// `capsaga pause [--read-only] [--note ..] [--status]` and `capsaga
/// unpause` (`resume = true`).
pub(crate) async fn pause(
    config: &Path,
    out: &Out,
    a: &PauseArgs,
    resume: bool,
) -> Result<u8, Failure> {
    let store = open_store(config).await?;
    let sw = if a.status {
        store.switch().await?
    } else {
        let mode = match (resume, a.read_only) {
            (true, _) => Mode::Running,
            (false, true) => Mode::ReadOnly,
            (false, false) => Mode::Paused,
        };
        let note: Option<String> = a
            .note
            .as_ref()
            .map(|n| n.chars().filter(|c| !c.is_control()).take(500).collect());
        store
            .set_switch(mode, &decider("cli").to_string(), note.as_deref())
            .await?
    };
    if out.json {
        out.json(&sw);
    } else {
        let what = match sw.mode {
            Mode::Running => "running: everything the policy allows runs",
            Mode::ReadOnly => {
                "read-only: calls with side effects are refused and running ones aborted (rolled back)"
            }
            Mode::Paused => {
                "paused: no new turn or tool call, running ones aborted (rolled back or parked)"
            }
        };
        outln!("capsaga is {what}");
        if let Some(by) = &sw.by {
            outln!(
                "  set by {by} at {}{}",
                sw.at.as_deref().unwrap_or("?"),
                sw.note
                    .as_deref()
                    .map(|n| format!(": {n}"))
                    .unwrap_or_default()
            );
        }
    }
    Ok(exit::OK)
}
