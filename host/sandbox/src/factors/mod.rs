//! Capability kinds as factors (DESIGN §8c): one module per kind, each with
//! the same three phases, in the style of Spin's factors and of
//! wasmtime-wasi's per-interface contexts:
//!
//! 1. **validate at policy load** ([`validate_policy`], then
//!    [`Factors::load`] at host start): every grant of the operator's policy
//!    has a factor, and that factor accepts it (a `secret:` grant names a
//!    secret whose value can be read, ...);
//! 2. **configure per tool at registry load** ([`Factors::configure`]): the
//!    tool's effective grants become its [`Bindings`] (the preopens, the
//!    environment, the net and secret grants), computed once;
//! 3. **bind per call into the store** ([`Factors::bind`]): a fresh WASI
//!    context and `wasi:http` hooks holding exactly those bindings.
//!
//! The one match over capability kinds is [`factor_of`]: a kind the grammar
//! knows but no factor implements (`kv:` today) is refused at policy
//! load with an error naming the kind, never silently granted nothing.
//!
//! Adding a kind: write `<kind>.rs` with its `validate`, `configure` and
//! `bind` (or `load` when it has host-side state), give [`Kind`] a variant,
//! map it in [`factor_of`], and add its part to [`Bindings`].
//!
//! | kind | module | state loaded at start | per tool | per call |
//! |---|---|---|---|---|
//! | `fs` | [`fs`] | none | preopen map (dir → read/read-write) | preopened dirs in the WASI context; the step's file journal when it has one (issue 28) |
//! | `env` | [`env`] | `[env]` values | variables and values | environment of the WASI context |
//! | `net` | [`net`] | `[net]` settings, TLS roots | net grants | `wasi:http` hooks with the net guard |
//! | `secret` | [`secret`] | `[secrets.*]` values | secret grants | headers injected by the hooks, redaction |
//! | `llm` | [`llm`] | none (the model comes with each call) | granted tiers and token caps | the `llm` import's slot: tiers, dry-run flag, the entry point's model |
//! | `mem` | [`mem`] | none (the memory is the host's, `capsaga_door::memory`) | readable and writable namespaces | nothing in WASI: the memory built-ins read the bindings |

pub mod env;
pub mod fs;
pub mod llm;
pub mod mem;
pub mod net;
pub mod secret;

use super::stdio::CapturePipe;
use capsaga_core::capability::Capability;
use capsaga_core::policy::Policy;
use net::NetHooks;
use std::path::Path;
use std::sync::Arc;
use wasmtime_wasi::WasiCtx;

/// A capability kind a factor implements.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// `fs:read:<dir>/**`, `fs:write:<dir>/**`.
    Fs,
    /// `net:http[s]:<host>[:<port>]`.
    Net,
    /// `env:<NAME>`.
    Env,
    /// `secret:<name>@<host>`.
    Secret,
    /// `llm:<tier>[:<max-tokens>]`.
    Llm,
    /// `mem:<namespace>[:read|:write]`.
    Mem,
}

/// The kinds implemented, as written in capability strings.
pub const IMPLEMENTED: &str = "fs, net, env, secret, llm, mem";

/// The factor of a capability: the one exhaustive match over the kinds of
/// the grammar. `Err(kind)` for a kind no factor implements.
pub fn factor_of(cap: &Capability) -> Result<Kind, &'static str> {
    match cap {
        Capability::Fs { .. } => Ok(Kind::Fs),
        Capability::Net { .. } => Ok(Kind::Net),
        Capability::Env { .. } => Ok(Kind::Env),
        Capability::Secret { .. } => Ok(Kind::Secret),
        Capability::Llm { .. } => Ok(Kind::Llm),
        Capability::Mem { .. } => Ok(Kind::Mem),
        Capability::Kv { .. } => Err(cap.kind()),
    }
}

/// Why a factor refused the policy or could not load.
#[derive(Debug, thiserror::Error)]
pub enum FactorError {
    /// A grant of a kind no factor implements.
    #[error(
        "policy for tool `{tool}`: capability kind `{kind}` (grant `{grant}`) has no factor in this host: nothing could enforce it, so it is refused (implemented kinds: {IMPLEMENTED})"
    )]
    NoFactor {
        /// The tool.
        tool: String,
        /// The grant as written.
        grant: String,
        /// Its kind.
        kind: &'static str,
    },
    /// A grant its factor refuses.
    #[error("policy for tool `{tool}`: grant `{grant}`: {reason}")]
    Refused {
        /// The tool.
        tool: String,
        /// The grant.
        grant: String,
        /// Why.
        reason: String,
    },
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

/// Phase 1, the part that needs no I/O: every grant of `policy` has a
/// factor, and the factor accepts it. Run when the policy is loaded
/// (`Config::load`), so a kind without a factor fails there.
///
/// # Errors
/// [`FactorError::NoFactor`] naming the kind, or [`FactorError::Refused`].
pub fn validate_policy(policy: &Policy) -> Result<(), FactorError> {
    for (tool, section) in &policy.tools {
        for grant in &section.grants {
            let refused = |reason: String| FactorError::Refused {
                tool: tool.clone(),
                grant: grant.to_string(),
                reason,
            };
            match factor_of(grant) {
                Err(kind) => {
                    return Err(FactorError::NoFactor {
                        tool: tool.clone(),
                        grant: grant.to_string(),
                        kind,
                    });
                }
                Ok(Kind::Fs) => fs::validate(grant).map_err(refused)?,
                Ok(Kind::Env) => env::validate(policy, grant).map_err(refused)?,
                Ok(Kind::Net) => net::validate(grant).map_err(refused)?,
                Ok(Kind::Secret) => secret::validate(policy, grant).map_err(refused)?,
                Ok(Kind::Llm) => llm::validate(grant).map_err(refused)?,
                Ok(Kind::Mem) => mem::validate(policy, grant).map_err(refused)?,
            }
        }
    }
    Ok(())
}

/// The factors' state, loaded from the operator's policy once, shared by
/// every call. Never comes from a guest.
#[derive(Debug)]
pub struct Factors {
    env: env::EnvFactor,
    net: Arc<net::NetFactor>,
    secret: Arc<secret::SecretFactor>,
}

/// What one tool's grants bind in each of its calls (phase 2's result).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Bindings {
    /// Preopened directories.
    pub fs: fs::FsBinding,
    /// Environment variables and their values.
    pub env: env::EnvBinding,
    /// Outgoing HTTP grants.
    pub net: Vec<Capability>,
    /// Secret grants (headers injected on requests to their hosts).
    pub secret: Vec<Capability>,
    /// Model tiers the tool may ask, with their token caps.
    pub llm: llm::LlmBinding,
    /// Memory namespaces the tool may read and write.
    pub mem: mem::MemBinding,
}

/// What phase 3 built for one call.
pub struct Bound {
    /// The WASI context.
    pub wasi: WasiCtx,
    /// The pipe capturing the guest's stdout and stderr.
    pub stdio: CapturePipe,
    /// The `wasi:http` hooks.
    pub net: NetHooks,
    /// What the `llm` import may ask (no model yet: see [`Bound::with_model`]).
    pub llm: llm::LlmSlot,
    /// The journal of the call's files (none for a dry run).
    #[cfg(unix)]
    pub fs_journal: Option<fs::journal::CallJournal>,
}

impl Bound {
    /// The same, with `tool`'s name and the model of the entry point that
    /// submitted the call (none: `capsaga call`, a plan, a dry run).
    pub fn with_model(mut self, tool: &str, model: Option<Arc<dyn llm::SubModel>>) -> Bound {
        self.llm.tool = tool.to_string();
        self.llm.model = model;
        self
    }
}

impl Factors {
    /// No secrets, no `env:` values, default outgoing-HTTP settings.
    pub fn none() -> Factors {
        Factors {
            env: env::EnvFactor::default(),
            net: Arc::new(net::NetFactor::none()),
            secret: Arc::new(secret::SecretFactor::default()),
        }
    }

    /// Phase 1 at host start: validate `policy` ([`validate_policy`]) and
    /// load each factor's state: the `[env]` values, the `[net]` settings
    /// and TLS roots (`ca_files` relative to `base_dir`), the secrets (read
    /// from the environment variables the policy names, and nothing else).
    ///
    /// # Errors
    /// [`FactorError`].
    pub fn load(policy: &Policy, base_dir: &Path) -> Result<Factors, FactorError> {
        validate_policy(policy)?;
        Ok(Factors {
            env: env::EnvFactor::load(policy),
            net: Arc::new(net::NetFactor::load(policy, base_dir)?),
            secret: Arc::new(secret::SecretFactor::load(policy)?),
        })
    }

    /// Phase 2: the bindings of a tool with effective `grants` (for a
    /// dry-run, pass the dry-run grants). Grants of a kind without a factor
    /// bind nothing (the policy cannot contain them: see phase 1).
    pub fn configure(&self, grants: &[Capability]) -> Bindings {
        let mut b = Bindings {
            fs: fs::configure(grants),
            env: self.env.configure(grants),
            llm: llm::configure(grants),
            mem: mem::configure(grants),
            ..Bindings::default()
        };
        for g in grants {
            match factor_of(g) {
                Ok(Kind::Net) => b.net.push(g.clone()),
                Ok(Kind::Secret) => b.secret.push(g.clone()),
                Ok(Kind::Fs | Kind::Env | Kind::Llm | Kind::Mem) | Err(_) => {}
            }
        }
        b
    }

    /// Phase 3: a fresh WASI context and `wasi:http` hooks for one call with
    /// `bindings`, `dry_run` (HTTP limited to GET/HEAD) and `deadline_ms` of
    /// wall time from now.
    ///
    /// # Errors
    /// [`super::wasi::WasiSetupError`] when a granted directory cannot be
    /// opened.
    pub fn bind(
        &self,
        bindings: &Bindings,
        dry_run: bool,
        deadline_ms: u64,
    ) -> Result<Bound, super::wasi::WasiSetupError> {
        // The call's wall-clock deadline, the one the `llm` slot waits
        // until and the store's epoch callback checks.
        let deadline = std::time::Instant::now() + std::time::Duration::from_millis(deadline_ms);
        let mut builder = super::wasi::builder();
        env::bind(&bindings.env, &mut builder);
        fs::bind(&bindings.fs, &mut builder)?;
        let stdio = super::wasi::capture_stdio(&mut builder);
        let net = net::bind(
            &self.net,
            &self.secret,
            &bindings.net,
            &bindings.secret,
            dry_run,
            deadline_ms,
        );
        Ok(Bound {
            wasi: builder.build(),
            stdio,
            net,
            llm: llm::bind("", &bindings.llm, None, dry_run, deadline),
            #[cfg(unix)]
            fs_journal: bindings.fs.journal.clone().filter(|_| !dry_run),
        })
    }

    /// The outgoing-HTTP settings.
    pub fn net_settings(&self) -> &capsaga_core::policy::NetSettings {
        self.net.settings()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use capsaga_core::policy::PolicyFile;

    fn policy(text: &str) -> Policy {
        PolicyFile::parse(text)
            .and_then(|f| f.check("/srv/home"))
            .unwrap_or_else(|e| panic!("{e}"))
    }

    #[test]
    fn a_kind_without_a_factor_is_refused_naming_it() {
        for (grant, kind) in [("kv:notes", "kv"), ("kv:cache-2", "kv")] {
            let p = policy(&format!("[tools.t]\ngrants = [\"{grant}\"]\n"));
            let e = validate_policy(&p).unwrap_err().to_string();
            assert!(
                e.contains(&format!("capability kind `{kind}`")) && e.contains(grant),
                "{e}"
            );
            assert!(Factors::load(&p, Path::new("/")).is_err());
        }
    }

    #[test]
    fn every_implemented_kind_has_a_factor() {
        let p = policy(
            "[tools.t]\ngrants = [\"fs:read:/a/**\", \"net:https:example.com\", \"env:LANG\", \"secret:k@example.com\", \"llm:cheap:300\"]\n[env]\nLANG = \"C\"\n[secrets.k]\nvalue = \"v\"\n",
        );
        assert!(validate_policy(&p).is_ok());
        let f = Factors::load(&p, Path::new("/")).unwrap_or_else(|e| panic!("{e}"));
        let b = f.configure(&p.tools["t"].grants);
        assert_eq!(b.fs.preopens.len(), 1);
        assert_eq!(b.env.vars, vec![("LANG".to_string(), "C".to_string())]);
        assert_eq!(b.net.len(), 1);
        assert_eq!(b.secret.len(), 1);
        assert_eq!(b.llm.tiers, vec![("cheap", Some(300))]);
    }

    #[test]
    fn an_llm_grant_naming_no_tier_of_this_host_is_refused() {
        for grant in ["llm:frontier", "llm:*"] {
            let Ok(f) = PolicyFile::parse(&format!("[tools.t]\ngrants = [\"{grant}\"]\n")) else {
                continue;
            };
            let Ok(p) = f.check("/srv/home") else {
                continue;
            };
            let e = validate_policy(&p).unwrap_err().to_string();
            assert!(e.contains(grant) && e.contains("tier"), "{e}");
        }
    }
}
