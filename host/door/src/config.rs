//! Loading the operator's `capsaga.toml` from disk: the file is parsed and
//! checked by `capsaga_core::policy`; this module resolves its paths relative
//! to the file's directory.

use capsaga_core::fsm::{FsmFile, Guardrail};
use capsaga_core::policy::{Policy, PolicyError, PolicyFile};
use std::path::{Component, Path, PathBuf};

/// Default name of the policy file.
pub const DEFAULT_CONFIG: &str = "capsaga.toml";
/// Name of the optional file of extra guardrail transitions, next to the
/// policy file (SPEC §3.5 rule 5: explicit `fsm.toml` only).
pub const FSM_FILE: &str = "fsm.toml";

/// Why the configuration could not be loaded.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// The file could not be read.
    #[error("cannot read {path}: {error}")]
    Read {
        /// The file.
        path: PathBuf,
        /// The OS error.
        error: String,
    },
    /// The file is not a valid policy.
    #[error("{path}: {error}")]
    Policy {
        /// The file.
        path: PathBuf,
        /// What is wrong.
        error: PolicyError,
    },
    /// A grant no capability factor implements, or that its factor refuses.
    #[error("{path}: {error}")]
    Factor {
        /// The file.
        path: PathBuf,
        /// What is wrong.
        error: crate::sandbox::factors::FactorError,
    },
    /// `busy_timeout_ms` out of its range.
    #[error("{path}: busy_timeout_ms must be between 1 and 3600000 (ms), got {found}")]
    BusyTimeout {
        /// The file.
        path: PathBuf,
        /// The value written.
        found: u64,
    },
    /// `store` or `store_lease_ms` (or `CAPSAGA_STORE`) is unusable.
    #[error("{path}: {error}")]
    Store {
        /// The file.
        path: PathBuf,
        /// What is wrong (never repeating a password).
        error: String,
    },
    /// `fsm.toml` is unreadable or has a refused row.
    #[error("{path}: {error}")]
    Fsm {
        /// The file.
        path: PathBuf,
        /// What is wrong.
        error: String,
    },
    /// A directory named in the file does not exist.
    #[error("{path}: {what} `{dir}` cannot be resolved: {error}")]
    Dir {
        /// The file.
        path: PathBuf,
        /// Which setting.
        what: &'static str,
        /// The directory as written.
        dir: String,
        /// The OS error.
        error: String,
    },
}

/// The loaded configuration.
#[derive(Debug, Clone)]
pub struct Config {
    /// The policy file.
    pub path: PathBuf,
    /// What `~` means in grants (absolute, canonical).
    pub home: PathBuf,
    /// Where the tool components are.
    pub tools_dir: PathBuf,
    /// Where `state.db` lives.
    pub state_dir: PathBuf,
    /// Where compiled components are cached (`compiled_cache`, default
    /// `<state_dir>/compiled`).
    pub compiled_cache: PathBuf,
    /// What reads a component's meta when the cache has none (`meta_compiler`).
    pub meta_compiler: capsaga_core::policy::MetaCompiler,
    /// How long a write to the state database waits its turn while other
    /// processes write, milliseconds (`busy_timeout_ms`).
    pub busy_timeout_ms: u64,
    /// The state store (`store`, `CAPSAGA_STORE`): SQLite at
    /// [`Config::db_path`] by default.
    pub store: crate::store_choice::StoreChoice,
    /// The SHA-256 of the policy file's bytes (lowercase hex), which every
    /// host reports in `/healthz` so that hosts sharing a store can be seen
    /// to run the same policy.
    pub policy_sha256: String,
    /// The checked policy.
    pub policy: Policy,
    /// The directory of the policy file (canonical): relative paths in the
    /// file (scripts, the price table) are resolved against it.
    pub base: PathBuf,
    /// The guardrail: the normative table plus the rows of `fsm.toml`.
    pub guardrail: Guardrail,
    /// The `fsm.toml` that was loaded, if there is one.
    pub fsm_path: Option<PathBuf>,
}

impl Config {
    /// The state database file.
    pub fn db_path(&self) -> PathBuf {
        self.state_dir.join("state.db")
    }

    /// A path written in the policy file, resolved against its directory.
    pub fn resolve(&self, p: &str) -> PathBuf {
        normalize(&self.base.join(p))
    }

    /// Load and check the policy file at `path`.
    ///
    /// Relative paths in the file are resolved against its directory; `home`
    /// (default: the file's directory) must exist and is canonicalised, so
    /// grants name real directories without symlinks in their prefix.
    ///
    /// # Errors
    /// [`ConfigError`].
    pub fn load(path: &Path) -> Result<Config, ConfigError> {
        let text = std::fs::read_to_string(path).map_err(|e| ConfigError::Read {
            path: path.to_path_buf(),
            error: e.to_string(),
        })?;
        let file = PolicyFile::parse(&text).map_err(|error| ConfigError::Policy {
            path: path.to_path_buf(),
            error,
        })?;
        let base = path
            .parent()
            .filter(|p| !p.as_os_str().is_empty())
            .unwrap_or(Path::new("."));
        let base = base.canonicalize().map_err(|e| ConfigError::Dir {
            path: path.to_path_buf(),
            what: "the config directory",
            dir: base.display().to_string(),
            error: e.to_string(),
        })?;
        let home_raw = file.home.clone().unwrap_or_else(|| ".".into());
        let home = base
            .join(&home_raw)
            .canonicalize()
            .map_err(|e| ConfigError::Dir {
                path: path.to_path_buf(),
                what: "home",
                dir: home_raw.clone(),
                error: e.to_string(),
            })?;
        let home_str = home.to_str().ok_or_else(|| ConfigError::Dir {
            path: path.to_path_buf(),
            what: "home",
            dir: home_raw,
            error: "not valid UTF-8".into(),
        })?;
        let policy = file.check(home_str).map_err(|error| ConfigError::Policy {
            path: path.to_path_buf(),
            error,
        })?;
        // Phase 1 of the capability factors: every grant has one.
        crate::sandbox::factors::validate_policy(&policy).map_err(|error| ConfigError::Factor {
            path: path.to_path_buf(),
            error,
        })?;
        let (guardrail, fsm_path) = load_fsm(&base.join(FSM_FILE))?;
        let tools_dir = normalize(&base.join(file.tools_dir.as_deref().unwrap_or("tools")));
        let state_dir = normalize(&base.join(file.state_dir.as_deref().unwrap_or(".capsaga")));
        let compiled_cache = match file.compiled_cache.as_deref() {
            Some(dir) => normalize(&base.join(dir)),
            None => state_dir.join("compiled"),
        };
        let busy_timeout_ms = match file.busy_timeout_ms {
            None => crate::store::sqlite::BUSY_TIMEOUT_MS,
            Some(ms @ 1..=3_600_000) => ms,
            Some(found) => {
                return Err(ConfigError::BusyTimeout {
                    path: path.to_path_buf(),
                    found,
                });
            }
        };
        let store = crate::store_choice::StoreChoice::from_settings(
            file.store.as_deref(),
            std::env::var(crate::store_choice::STORE_ENV)
                .ok()
                .as_deref(),
            state_dir.join("state.db"),
            file.store_lease_ms,
        )
        .map_err(|error| ConfigError::Store {
            path: path.to_path_buf(),
            error,
        })?;
        let policy_sha256 = capsaga_core::idempotency::sha256_hex(text.as_bytes());
        Ok(Config {
            path: path.to_path_buf(),
            home,
            tools_dir,
            state_dir,
            compiled_cache,
            meta_compiler: file.meta_compiler.unwrap_or_default(),
            busy_timeout_ms,
            store,
            policy_sha256,
            policy,
            base,
            guardrail,
            fsm_path,
        })
    }
}

/// Load `fsm.toml` at `path` if it exists; every row is validated, and one
/// bad row refuses the whole file.
///
/// # Errors
/// [`ConfigError::Fsm`].
pub fn load_fsm(path: &Path) -> Result<(Guardrail, Option<PathBuf>), ConfigError> {
    let text = match std::fs::read_to_string(path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok((Guardrail::new(), None)),
        Err(e) => {
            return Err(ConfigError::Fsm {
                path: path.to_path_buf(),
                error: e.to_string(),
            });
        }
    };
    let g = FsmFile::parse(&text).map_err(|error| ConfigError::Fsm {
        path: path.to_path_buf(),
        error,
    })?;
    Ok((g, Some(path.to_path_buf())))
}

/// Replace every `${home}` in the string values of `v` by `home`.
///
/// Plans and scripts are operator documents that name files by absolute path
/// (a path means the same to the operator, the model and the guest); this lets
/// them be written without knowing where the workspace lives. Model output is
/// never expanded.
pub fn expand_home_vars(v: &mut serde_json::Value, home: &Path) {
    let home = home.to_string_lossy();
    match v {
        serde_json::Value::String(s) if s.contains("${home}") => *s = s.replace("${home}", &home),
        serde_json::Value::Array(a) => a
            .iter_mut()
            .for_each(|x| expand_home_vars(x, Path::new(home.as_ref()))),
        serde_json::Value::Object(m) => m
            .values_mut()
            .for_each(|x| expand_home_vars(x, Path::new(home.as_ref()))),
        _ => {}
    }
}

/// Lexically remove `.` and `..` (for display and for paths that may not
/// exist yet).
fn normalize(p: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for c in p.components() {
        match c {
            Component::CurDir => {}
            Component::ParentDir => {
                out.pop();
            }
            other => out.push(other.as_os_str()),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn resolves_relative_paths() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join("ws")).unwrap();
        let p = dir.path().join("capsaga.toml");
        std::fs::write(
            &p,
            "tools_dir = \"../components\"\n[tools.fs_read]\ngrants = [\"fs:read:~/ws/**\"]\n",
        )
        .unwrap();
        let c = Config::load(&p).unwrap();
        let home = dir.path().canonicalize().unwrap();
        assert_eq!(c.home, home);
        assert_eq!(c.state_dir, home.join(".capsaga"));
        assert_eq!(c.compiled_cache, home.join(".capsaga/compiled"));
        assert_eq!(c.tools_dir, home.parent().unwrap().join("components"));
        assert_eq!(
            c.policy.tool("fs_read").grants[0].to_string(),
            format!("fs:read:{}/ws/**", home.display())
        );

        std::fs::write(&p, "compiled_cache = \"../cache/x/..\"\n").unwrap();
        let c = Config::load(&p).unwrap();
        assert_eq!(c.compiled_cache, home.parent().unwrap().join("cache"));
    }

    #[test]
    fn home_vars_expand_in_strings_only() {
        let mut v = serde_json::json!({"path": "${home}/a.txt", "n": 1, "list": ["${home}", "x"]});
        expand_home_vars(&mut v, Path::new("/srv/h"));
        assert_eq!(
            v,
            serde_json::json!({"path": "/srv/h/a.txt", "n": 1, "list": ["/srv/h", "x"]})
        );
    }

    #[test]
    fn provider_example_loads() {
        let p = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/providers.toml");
        let c = Config::load(&p).unwrap();
        let names: Vec<&String> = c.policy.providers.keys().collect();
        assert_eq!(names, ["anthropic", "deepseek"]);
        assert_eq!(
            c.policy.autonomy,
            capsaga_core::policy::Autonomy::Supervised
        );
        assert!(c.resolve("demo/script.json").exists());
    }

    #[test]
    fn fsm_toml_next_to_the_policy_is_loaded_and_checked() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("capsaga.toml");
        std::fs::write(&p, "").unwrap();
        assert!(Config::load(&p).unwrap().fsm_path.is_none());
        std::fs::write(
            dir.path().join(FSM_FILE),
            "[[transition]]\nfrom = \"Validating\"\nevent = \"ToolFailed\"\nto = \"Compensating\"\n",
        )
        .unwrap();
        let c = Config::load(&p).unwrap();
        assert_eq!(c.guardrail.extra().len(), 1);
        std::fs::write(
            dir.path().join(FSM_FILE),
            "[[transition]]\nfrom = \"Done\"\nevent = \"StartSaga\"\nto = \"Planning\"\n",
        )
        .unwrap();
        let e = Config::load(&p).unwrap_err().to_string();
        assert!(e.contains("fsm.toml") && e.contains("terminal"), "{e}");
    }

    #[test]
    fn a_capability_kind_without_a_factor_fails_policy_load() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("capsaga.toml");
        for (grant, kind) in [("kv:notes", "kv"), ("kv:cache-2", "kv")] {
            std::fs::write(&p, format!("[tools.x]\ngrants = [\"{grant}\"]\n")).unwrap();
            let e = Config::load(&p).unwrap_err().to_string();
            assert!(
                e.contains("capsaga.toml") && e.contains(&format!("capability kind `{kind}`")),
                "{e}"
            );
        }
    }

    #[test]
    fn errors_name_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("capsaga.toml");
        std::fs::write(&p, "[tools.x]\ngrants = [\"fs:read:/a/*.md\"]\n").unwrap();
        let e = Config::load(&p).unwrap_err().to_string();
        assert!(e.contains("capsaga.toml") && e.contains("/**"), "{e}");
        assert!(Config::load(&dir.path().join("missing.toml")).is_err());
    }
}
