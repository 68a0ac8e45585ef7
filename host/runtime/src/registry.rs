//! The tool registry: every component in the tools directory, compiled once,
//! described by its own `meta` (called with no grants), and matched against the
//! operator's policy.
//!
//! A component is stored by content hash under `<state_dir>/components/`, so
//! that compensation and crash recovery can re-instantiate exactly the
//! component a step ran with, even after the tools directory changed.
//!
//! Compilation goes through the sandbox's compiled cache when it has one
//! (`<state_dir>/compiled/`), so a second start loads native code instead of
//! compiling; [`LoadedTool::compiled`] says which happened.
//!
//! One bad component does not stop the others: it is reported as a
//! [`LoadIssue`] and left out of the catalog.

use crate::sandbox::{CacheOutcome, Prepared, Sandbox, SandboxError};
use capsaga_core::capability::Capability;
use capsaga_core::grant::{GrantError, effective_grants};
use capsaga_core::idempotency::sha256_hex;
use capsaga_core::meta::{MetaError, ToolMeta};
use capsaga_core::policy::{Limits, Policy};
use capsaga_core::validate::ArgsValidator;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

/// Largest component file accepted, bytes.
pub const MAX_COMPONENT_BYTES: u64 = 256 * 1024 * 1024;

/// A problem with one component or policy section, reported at load.
#[derive(Debug, Clone, serde::Serialize)]
pub struct LoadIssue {
    /// The file or policy section.
    pub source: String,
    /// What is wrong.
    pub error: String,
    /// The component is fine but the policy does not list it (default deny):
    /// reported by `tools list`, logged at info level only.
    pub unlisted: bool,
}

/// Why a tool could not be loaded.
#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    /// The file could not be read.
    #[error("cannot read {path}: {error}")]
    Read {
        /// The file.
        path: PathBuf,
        /// OS error.
        error: String,
    },
    /// Over [`MAX_COMPONENT_BYTES`].
    #[error("{path} is {size} bytes, over the limit of {MAX_COMPONENT_BYTES}")]
    TooLarge {
        /// The file.
        path: PathBuf,
        /// Its size.
        size: u64,
    },
    /// Not a component of the tool world, or `meta` failed.
    #[error("{path}: {error}")]
    Sandbox {
        /// The file.
        path: PathBuf,
        /// Why.
        error: SandboxError,
    },
    /// `meta` returned something malformed.
    #[error("{path}: {error}")]
    Meta {
        /// The file.
        path: PathBuf,
        /// Why.
        error: MetaError,
    },
    /// No stored component has this hash.
    #[error("no component with content hash {0} is stored")]
    UnknownHash(String),
}

/// A loaded tool.
pub struct LoadedTool {
    /// Its checked meta.
    pub meta: ToolMeta,
    /// SHA-256 of the component bytes, lowercase hex.
    pub hash: String,
    /// Where it was loaded from.
    pub path: PathBuf,
    /// Compiled and linked.
    pub prepared: Prepared,
    /// Its args validator.
    pub validator: ArgsValidator,
    /// Effective grants, or why the tool is not callable.
    pub grants: Result<Vec<Capability>, GrantError>,
    /// Limits of its calls.
    pub limits: Limits,
    /// Whether it was compiled at load or loaded from the compiled cache.
    pub compiled: CacheOutcome,
}

impl LoadedTool {
    /// The effective grants as strings (for the WAL).
    pub fn grant_strings(&self) -> Vec<String> {
        match &self.grants {
            Ok(g) => g.iter().map(ToString::to_string).collect(),
            Err(_) => Vec::new(),
        }
    }
}

/// All loaded tools.
pub struct Registry {
    tools: BTreeMap<String, Arc<LoadedTool>>,
    by_hash: Mutex<BTreeMap<String, Prepared>>,
    store_dir: PathBuf,
    /// Problems found at load.
    pub issues: Vec<LoadIssue>,
}

fn read_component(path: &Path) -> Result<Vec<u8>, LoadError> {
    let meta = std::fs::metadata(path).map_err(|e| LoadError::Read {
        path: path.to_path_buf(),
        error: e.to_string(),
    })?;
    if meta.len() > MAX_COMPONENT_BYTES {
        return Err(LoadError::TooLarge {
            path: path.to_path_buf(),
            size: meta.len(),
        });
    }
    std::fs::read(path).map_err(|e| LoadError::Read {
        path: path.to_path_buf(),
        error: e.to_string(),
    })
}

impl Registry {
    /// Load every `*.wasm` in `tools_dir` (sorted by file name), keeping a
    /// copy of each under `store_dir` by content hash.
    ///
    /// Problems with single components, duplicate names, grants and policy
    /// sections for tools that do not exist are collected in
    /// [`Registry::issues`]; only an unreadable tools directory is an error.
    ///
    /// # Errors
    /// [`LoadError::Read`] when `tools_dir` cannot be listed.
    pub async fn load(
        sandbox: &Sandbox,
        tools_dir: &Path,
        store_dir: &Path,
        policy: &Policy,
    ) -> Result<Registry, LoadError> {
        let mut paths: Vec<PathBuf> = std::fs::read_dir(tools_dir)
            .map_err(|e| LoadError::Read {
                path: tools_dir.to_path_buf(),
                error: e.to_string(),
            })?
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| p.extension().is_some_and(|x| x == "wasm") && p.is_file())
            .collect();
        paths.sort();
        let mut reg = Registry {
            tools: BTreeMap::new(),
            by_hash: Mutex::new(BTreeMap::new()),
            store_dir: store_dir.to_path_buf(),
            issues: Vec::new(),
        };
        for path in paths {
            match reg.load_one(sandbox, &path, policy).await {
                Ok(tool) => {
                    let name = tool.meta.name.clone();
                    if let Some(prev) = reg.tools.get(&name) {
                        reg.issues.push(LoadIssue {
                            source: path.display().to_string(),
                            error: format!(
                                "tool name `{name}` is already taken by {}; this component was skipped",
                                prev.path.display()
                            ),
                            unlisted: false,
                        });
                        continue;
                    }
                    if let Err(e) = &tool.grants {
                        reg.issues.push(LoadIssue {
                            source: path.display().to_string(),
                            error: e.to_string(),
                            unlisted: matches!(e, GrantError::NotListed { .. }),
                        });
                    }
                    reg.tools.insert(name, Arc::new(tool));
                }
                Err(e) => reg.issues.push(LoadIssue {
                    source: path.display().to_string(),
                    error: e.to_string(),
                    unlisted: false,
                }),
            }
        }
        for name in policy.tools.keys() {
            if !reg.tools.contains_key(name) {
                reg.issues.push(LoadIssue {
                    source: format!("policy [tools.{name}]"),
                    error: format!("no tool named `{name}` was loaded; its grants are unused"),
                    unlisted: false,
                });
            }
        }
        Ok(reg)
    }

    async fn load_one(
        &self,
        sandbox: &Sandbox,
        path: &Path,
        policy: &Policy,
    ) -> Result<LoadedTool, LoadError> {
        let bytes = read_component(path)?;
        let hash = sha256_hex(&bytes);
        let (prepared, compiled) =
            sandbox
                .prepare_cached(&bytes)
                .map_err(|error| LoadError::Sandbox {
                    path: path.to_path_buf(),
                    error,
                })?;
        let raw = sandbox
            .meta(&path.display().to_string(), &prepared)
            .await
            .map_err(|error| LoadError::Sandbox {
                path: path.to_path_buf(),
                error,
            })?;
        let meta = ToolMeta::from_raw(raw).map_err(|error| LoadError::Meta {
            path: path.to_path_buf(),
            error,
        })?;
        let validator =
            ArgsValidator::new(&meta.name, &meta.args_schema).map_err(|e| LoadError::Meta {
                path: path.to_path_buf(),
                error: MetaError::SchemaInvalid {
                    tool: meta.name.clone(),
                    error: e.to_string(),
                },
            })?;
        self.store_copy(&hash, &bytes);
        if let Ok(mut m) = self.by_hash.lock() {
            m.insert(hash.clone(), prepared.clone());
        }
        let tp = policy.tool(&meta.name);
        let grants = if policy.section(&meta.name).is_some() {
            effective_grants(&meta.name, &meta.capabilities, &tp.grants)
        } else {
            Err(GrantError::NotListed {
                tool: meta.name.clone(),
            })
        };
        Ok(LoadedTool {
            hash,
            path: path.to_path_buf(),
            prepared,
            validator,
            grants,
            limits: tp.limits,
            compiled,
            meta,
        })
    }

    /// Keep a content-addressed copy; failures only cost recovery the option
    /// of an old version, so they are logged, not fatal.
    fn store_copy(&self, hash: &str, bytes: &[u8]) {
        let target = self.store_dir.join(format!("{hash}.wasm"));
        if target.exists() {
            return;
        }
        let res = std::fs::create_dir_all(&self.store_dir).and_then(|()| {
            let tmp = self.store_dir.join(format!(".{hash}.wasm.tmp"));
            std::fs::write(&tmp, bytes)?;
            std::fs::rename(&tmp, &target)
        });
        if let Err(e) = res {
            tracing::warn!("cannot store component copy {}: {e}", target.display());
        }
    }

    /// The tool named `name`.
    pub fn get(&self, name: &str) -> Option<Arc<LoadedTool>> {
        self.tools.get(name).cloned()
    }

    /// All tools, by name.
    pub fn tools(&self) -> impl Iterator<Item = &Arc<LoadedTool>> {
        self.tools.values()
    }

    /// Names of all tools, sorted.
    pub fn names(&self) -> Vec<&str> {
        self.tools.keys().map(String::as_str).collect()
    }

    /// The prepared component with content hash `hash`: a loaded one, or the
    /// stored copy compiled on demand.
    ///
    /// # Errors
    /// [`LoadError::UnknownHash`] or a compile error.
    pub fn prepared_by_hash(&self, sandbox: &Sandbox, hash: &str) -> Result<Prepared, LoadError> {
        if let Some(p) = self.by_hash.lock().ok().and_then(|m| m.get(hash).cloned()) {
            return Ok(p);
        }
        if hash.len() != 64 || !hash.bytes().all(|b| b.is_ascii_hexdigit()) {
            return Err(LoadError::UnknownHash(hash.chars().take(80).collect()));
        }
        let path = self.store_dir.join(format!("{hash}.wasm"));
        if !path.exists() {
            return Err(LoadError::UnknownHash(hash.to_string()));
        }
        let bytes = read_component(&path)?;
        if sha256_hex(&bytes) != hash {
            return Err(LoadError::Read {
                path,
                error: "stored component does not match its content hash".into(),
            });
        }
        let (prepared, _) = sandbox
            .prepare_cached(&bytes)
            .map_err(|error| LoadError::Sandbox {
                path: path.clone(),
                error,
            })?;
        if let Ok(mut m) = self.by_hash.lock() {
            m.insert(hash.to_string(), prepared.clone());
        }
        Ok(prepared)
    }
}
