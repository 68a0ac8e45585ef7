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
//!
//! Each tool's grants are configured into its bindings here (phase 2 of the
//! capability factors, `sandbox::factors`). Host built-in tools
//! ([`BuiltinTool`]) are registered beside the components and go through the
//! same door.

mod builtin;
mod neuron;
mod tool;

pub use builtin::BuiltinTool;
pub use tool::{LoadedTool, ToolBindings, ToolSource};

use crate::sandbox::{CacheOutcome, Prepared, Sandbox, SandboxError};
use capsaga_core::capability::Capability;
use capsaga_core::grant::{GrantError, dry_run_grants, effective_grants};
use capsaga_core::idempotency::sha256_hex;
use capsaga_core::meta::{MetaError, RawToolMeta, ToolMeta};
use capsaga_core::policy::Policy;
use capsaga_core::validate::ArgsValidator;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, RwLock};

/// Largest component file accepted, bytes.
pub const MAX_COMPONENT_BYTES: u64 = 256 * 1024 * 1024;

/// A problem with one component or policy section, reported at load.
#[derive(Debug, Clone, serde::Serialize)]
pub struct LoadIssue {
    /// The file or policy section.
    pub source: String,
    /// What is wrong.
    pub error: String,
    /// The component is fine but the policy does not list it (default deny),
    /// or a policy section that grants nothing names no loaded tool (yet):
    /// reported by `tools list`, logged at info level only.
    pub unlisted: bool,
    /// For a policy section that named no loaded tool: that tool's name.
    /// The issue is resolved once a built-in of that name is registered
    /// after the load (the memory tools, the neuron tools):
    /// [`Registry::open_issues`].
    #[serde(skip)]
    pub section: Option<String>,
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
    /// A neuron's name is reserved or reads like a tool already offered
    /// (`capsaga_core::neuron::name::check`).
    #[error("{path}: {error}")]
    Name {
        /// Where the neuron came from (`neuron:<name>@<version>`).
        path: PathBuf,
        /// Why.
        error: capsaga_core::neuron::name::NameError,
    },
    /// No stored component has this hash.
    #[error("no component with content hash {0} is stored")]
    UnknownHash(String),
    /// The tool table was poisoned by a panic in another thread.
    #[error("the tool registry is unusable after a panic")]
    Poisoned,
}

/// The identity hash of a built-in tool: SHA-256 of `builtin:` and its meta.
fn builtin_identity(raw: &RawToolMeta) -> String {
    let meta = serde_json::to_string(raw).unwrap_or_default();
    sha256_hex(format!("builtin:{meta}").as_bytes())
}

/// A tool with its effective grants under `policy` (a tool the policy does
/// not list gets none and is not callable) and their bindings.
#[allow(clippy::too_many_arguments)]
fn assemble(
    sandbox: &Sandbox,
    policy: &Policy,
    meta: ToolMeta,
    validator: ArgsValidator,
    hash: String,
    path: PathBuf,
    source: ToolSource,
    compiled: CacheOutcome,
) -> LoadedTool {
    let tp = policy.tool(&meta.name);
    let grants: Result<Vec<Capability>, GrantError> = if policy.section(&meta.name).is_some() {
        effective_grants(&meta.name, &meta.capabilities, &tp.grants)
    } else {
        Err(GrantError::NotListed {
            tool: meta.name.clone(),
        })
    };
    let bindings = match &grants {
        Ok(g) => ToolBindings {
            execute: sandbox.factors().configure(g),
            dry_run: sandbox.factors().configure(&dry_run_grants(g)),
        },
        Err(_) => ToolBindings::default(),
    };
    LoadedTool {
        meta,
        hash,
        path,
        source,
        validator,
        grants,
        bindings,
        limits: tp.limits,
        compiled,
        own_policy: None,
    }
}

/// All loaded tools. Shared by every call (`Sync`): tools can be added
/// while the host runs ([`Registry::register_builtin`]).
pub struct Registry {
    tools: RwLock<BTreeMap<String, Arc<LoadedTool>>>,
    by_hash: Mutex<BTreeMap<String, Prepared>>,
    /// Neurons by identity (active and retired ones), for compensation.
    neurons: Mutex<BTreeMap<String, Prepared>>,
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
        let mut tools: BTreeMap<String, Arc<LoadedTool>> = BTreeMap::new();
        let mut reg = Registry {
            tools: RwLock::new(BTreeMap::new()),
            by_hash: Mutex::new(BTreeMap::new()),
            neurons: Mutex::new(BTreeMap::new()),
            store_dir: store_dir.to_path_buf(),
            issues: Vec::new(),
        };
        for path in paths {
            match reg.load_one(sandbox, &path, policy).await {
                Ok(tool) => {
                    let name = tool.meta.name.clone();
                    if let Some(prev) = tools.get(&name) {
                        reg.issues.push(LoadIssue {
                            source: path.display().to_string(),
                            error: format!(
                                "tool name `{name}` is already taken by {}; this component was skipped",
                                prev.path.display()
                            ),
                            unlisted: false,
                            section: None,
                        });
                        continue;
                    }
                    if let Err(e) = &tool.grants {
                        reg.issues.push(LoadIssue {
                            source: path.display().to_string(),
                            error: e.to_string(),
                            unlisted: matches!(e, GrantError::NotListed { .. }),
                            section: None,
                        });
                    }
                    tools.insert(name, Arc::new(tool));
                }
                Err(e) => reg.issues.push(LoadIssue {
                    source: path.display().to_string(),
                    error: e.to_string(),
                    unlisted: false,
                    section: None,
                }),
            }
        }
        for (name, section) in &policy.tools {
            if !tools.contains_key(name) {
                // A section that grants nothing may be for a built-in an
                // embedder registers after the host opens (the benches'
                // `bench_step`): reported, at info level. Unused grants are a
                // warning (a misspelt tool name).
                let (error, unlisted) = if section.grants.is_empty() {
                    (
                        format!(
                            "no tool named `{name}` was loaded yet (its section grants nothing)"
                        ),
                        true,
                    )
                } else {
                    (
                        format!("no tool named `{name}` was loaded; its grants are unused"),
                        false,
                    )
                };
                reg.issues.push(LoadIssue {
                    source: format!("policy [tools.{name}]"),
                    error,
                    unlisted,
                    section: Some(name.clone()),
                });
            }
        }
        reg.tools = RwLock::new(tools);
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
        let sandbox_error = |error| LoadError::Sandbox {
            path: path.to_path_buf(),
            error,
        };
        // A meta the compiled cache kept for these bytes, or one read
        // through the baseline compiler (`sandbox::meta`): the tool is
        // loaded without compiling it, and compiled by its first call (a
        // process compiles only what it calls).
        let cache = sandbox.compiled_cache();
        let label = path.display().to_string();
        let found = match cache.and_then(|c| c.load_meta(&hash)) {
            Some(raw) => Some(raw),
            None => sandbox
                .meta_baseline(&label, &bytes, &hash)
                .await
                .transpose()
                .map_err(sandbox_error)?,
        };
        let (prepared, compiled, raw) = match found {
            Some(raw) => (
                sandbox.prepare_deferred(bytes.clone()),
                CacheOutcome::Deferred,
                raw,
            ),
            None => {
                let (prepared, compiled) = sandbox.prepare_cached(&bytes).map_err(sandbox_error)?;
                let raw = sandbox
                    .meta(&label, &prepared)
                    .await
                    .map_err(sandbox_error)?;
                if let Some(c) = cache {
                    c.store_meta(&hash, &raw);
                }
                (prepared, compiled, raw)
            }
        };
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
        Ok(assemble(
            sandbox,
            policy,
            meta,
            validator,
            hash,
            path.to_path_buf(),
            ToolSource::Component(prepared),
            compiled,
        ))
    }

    /// Register a tool the host implements, under the policy's section of
    /// its name (like a component: not listed, not callable). Its identity
    /// hash is the SHA-256 of `builtin:` and its meta, so a changed built-in
    /// is a new tool version for approvals and the WAL.
    ///
    /// # Errors
    /// [`LoadError::Meta`] for a malformed meta, or a name already taken.
    pub fn register_builtin(
        &self,
        sandbox: &Sandbox,
        policy: &Policy,
        tool: Arc<dyn BuiltinTool>,
    ) -> Result<Arc<LoadedTool>, LoadError> {
        let raw = tool.meta();
        let identity = builtin_identity(&raw);
        let path = PathBuf::from(format!("builtin:{}", raw.name));
        let meta_error = |error| LoadError::Meta {
            path: path.clone(),
            error,
        };
        let meta = ToolMeta::from_raw(raw).map_err(meta_error)?;
        let validator = ArgsValidator::new(&meta.name, &meta.args_schema).map_err(|e| {
            meta_error(MetaError::SchemaInvalid {
                tool: meta.name.clone(),
                error: e.to_string(),
            })
        })?;
        let loaded = Arc::new(assemble(
            sandbox,
            policy,
            meta,
            validator,
            identity,
            path.clone(),
            ToolSource::Builtin(tool),
            CacheOutcome::Disabled,
        ));
        let mut tools = self.tools.write().map_err(|_| LoadError::Poisoned)?;
        if tools.contains_key(&loaded.meta.name) {
            return Err(meta_error(MetaError::BadName(format!(
                "{} (already taken)",
                loaded.meta.name
            ))));
        }
        tools.insert(loaded.meta.name.clone(), loaded.clone());
        Ok(loaded)
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

    /// The load's issues that still hold: those about a policy section
    /// are dropped once a tool of its name is registered (a built-in the
    /// host registers after the load, such as `memory_fetch`).
    pub fn open_issues(&self) -> Vec<&LoadIssue> {
        self.issues
            .iter()
            .filter(|i| i.section.as_deref().is_none_or(|n| self.get(n).is_none()))
            .collect()
    }

    /// The tool named `name`.
    pub fn get(&self, name: &str) -> Option<Arc<LoadedTool>> {
        self.tools.read().ok()?.get(name).cloned()
    }

    /// All tools, by name.
    pub fn tools(&self) -> Vec<Arc<LoadedTool>> {
        self.tools
            .read()
            .map(|t| t.values().cloned().collect())
            .unwrap_or_default()
    }

    /// Names of all tools, sorted.
    pub fn names(&self) -> Vec<String> {
        self.tools
            .read()
            .map(|t| t.keys().cloned().collect())
            .unwrap_or_default()
    }

    /// What runs the tool `tool_id` whose identity hash is `hash` (what a
    /// step's BEGIN pinned): for a component, the loaded one or the stored
    /// copy with that content hash; for a built-in, the registered one if
    /// its identity is unchanged; for a neuron, the runner with the
    /// version of that identity.
    ///
    /// # Errors
    /// [`LoadError::UnknownHash`] or a compile error.
    pub fn source_by_identity(
        &self,
        sandbox: &Sandbox,
        tool_id: &str,
        hash: &str,
    ) -> Result<ToolSource, LoadError> {
        if let Some(t) = self.get(tool_id)
            && t.hash == hash
            && let ToolSource::Builtin(b) = &t.source
        {
            return Ok(ToolSource::Builtin(b.clone()));
        }
        if let Some(p) = self.neuron_by_identity(hash) {
            return Ok(ToolSource::Neuron(p));
        }
        self.prepared_by_hash(sandbox, hash)
            .map(ToolSource::Component)
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
