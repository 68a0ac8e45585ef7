//! The neuron runner in the sandbox (`wit/neuron.wit`): one component,
//! compiled once and cached like any other, linked with the tool world's
//! imports plus `neuron-host`, through which each fresh instance asks which
//! neuron it runs. A neuron is the runner's pre-linked instance with a
//! definition attached ([`Runner::neuron`]); [`Sandbox::call`] puts that
//! definition in the call's store, so a neuron call is an ordinary sandbox
//! call: same fresh instance, bindings, limits and error mapping.
//!
//! Only the runner linker has `neuron-host`: a tool component that imports
//! it fails to link in the tools directory.
//!
//! A neuron's bytecode is made once per [`Prepared`] (one loaded version, or
//! one candidate under trial): before its first call the sandbox calls the
//! runner's `compile-neuron` export in a fresh instance with no grants and
//! no definition ([`Sandbox::neuron_bytecode`]), and every later call's
//! definition carries the result, so a call loads the code instead of
//! parsing and compiling the source (most of a call's time in the guest,
//! measured by `capsaga bench-neurons`). A source that does not compile gets
//! no bytecode: each call compiles it and reports the error.

use super::bindings::{WitRisk, WitToolMeta};
use super::state::CallState;
use super::{
    CacheOutcome, CallDiagnostics, CallRequest, CallResult, CompiledCache, Op, Prepared, Sandbox,
    SandboxError,
};
use crate::Bindings;
use capsaga_core::meta::{RawToolMeta, Risk};
use capsaga_core::policy::Limits;
use capsaga_core::tool::CallContext;
use std::path::Path;
use std::sync::Arc;
use wasmtime::component::{Component, HasSelf, Linker};

/// The compiled cache's hint for the neuron runner's content hash
/// ([`CompiledCache::hint`]).
const RUNNER_HINT: &str = "neuron-runner";

/// Host bindings of the `neuron` world; only its `neuron-host` import is
/// used (the exports are the tool world's).
pub mod bindings {
    wasmtime::component::bindgen!({
        path: "../../wit",
        world: "neuron",
        exports: { default: async },
        with: {
            "capsaga:tool/types": crate::bindings::capsaga::tool::types,
            "capsaga:tool/log": crate::bindings::capsaga::tool::log,
        },
    });
}

pub use bindings::capsaga::tool::neuron_host::{NamedFile, NeuronDefinition, SourceKind};

/// Limits of a `compile-neuron` call: no grants, no neuron code runs; the
/// output cap bounds the bytecode copied out (bytes).
pub const COMPILE_LIMITS: Limits = Limits {
    deadline_ms: 5_000,
    memory_bytes: 128 * 1024 * 1024,
    fuel: 4_000_000_000,
    output_bytes: 8 * 1024 * 1024,
    log_bytes: 4 * 1024,
};

/// What a runner instance runs: a neuron's definition and, once the runner
/// compiled it, its bytecode (see the module documentation).
#[derive(Debug)]
pub struct NeuronSource {
    def: NeuronDefinition,
    /// `None` inside: compiling failed (the calls compile and report it).
    code: tokio::sync::OnceCell<Option<Vec<u8>>>,
}

impl NeuronSource {
    /// `def` without bytecode yet.
    pub fn new(def: NeuronDefinition) -> NeuronSource {
        NeuronSource {
            def,
            code: tokio::sync::OnceCell::new(),
        }
    }

    /// The definition (its `code` field is filled in per call).
    pub fn definition(&self) -> &NeuronDefinition {
        &self.def
    }

    /// The bytecode, when the runner compiled the source.
    pub fn bytecode(&self) -> Option<&[u8]> {
        self.code.get().and_then(|c| c.as_deref())
    }

    /// Whether calls get bytecode at all: neurons do, scripts (`code_run`,
    /// run once) do not.
    fn wants_bytecode(&self) -> bool {
        self.def.kind == SourceKind::Module
    }

    /// The definition a call's `neuron-host.definition` answers.
    fn for_call(&self) -> NeuronDefinition {
        let mut d = self.def.clone();
        d.code = self.bytecode().map(<[u8]>::to_vec);
        d
    }
}

impl bindings::capsaga::tool::neuron_host::Host for CallState {
    /// The call's definition; a runner instance without one (never made by
    /// the host) gets an empty source, which fails every export.
    fn definition(&mut self) -> NeuronDefinition {
        match &self.neuron {
            Some(n) => n.for_call(),
            None => definition(
                &RawToolMeta {
                    name: "unconfigured".into(),
                    description: "no neuron".into(),
                    args_schema: "{}".into(),
                    has_side_effects: false,
                    risk: Risk::Low,
                    returns_untrusted: false,
                    idempotent: true,
                    supports_dry_run: false,
                    capabilities: Vec::new(),
                    version: "0".into(),
                },
                "",
                0,
            ),
        }
    }
}

/// The definition of a neuron (`source-kind::module`) with `meta`, its
/// Python `source` and the output cap, bytes.
pub fn definition(meta: &RawToolMeta, source: &str, max_output_bytes: u64) -> NeuronDefinition {
    NeuronDefinition {
        meta: WitToolMeta {
            name: meta.name.clone(),
            description: meta.description.clone(),
            args_schema: meta.args_schema.clone(),
            has_side_effects: meta.has_side_effects,
            risk: match meta.risk {
                Risk::Low => WitRisk::Low,
                Risk::Medium => WitRisk::Medium,
                Risk::High => WitRisk::High,
            },
            returns_untrusted: meta.returns_untrusted,
            idempotent: meta.idempotent,
            supports_dry_run: meta.supports_dry_run,
            capabilities: meta.capabilities.clone(),
            version: meta.version.clone(),
        },
        source: source.to_string(),
        kind: SourceKind::Module,
        inputs: Vec::new(),
        scratch_dir: None,
        max_output_bytes,
        code: None,
    }
}

/// The compiled, linked runner.
#[derive(Clone)]
pub struct Runner {
    prepared: Prepared,
    /// SHA-256 of the runner's bytes (part of every neuron's identity).
    pub hash: String,
    /// Whether it was compiled now or loaded from the compiled cache.
    pub loaded: CacheOutcome,
}

impl std::fmt::Debug for Runner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Runner").field("hash", &self.hash).finish()
    }
}

impl Runner {
    /// The runner running `def`: what a neuron's tool source holds.
    ///
    /// Its calls share one bytecode, made before the first of them.
    pub fn neuron(&self, def: NeuronDefinition) -> Prepared {
        self.prepared.with_neuron(Arc::new(NeuronSource::new(def)))
    }
}

/// The linker of the runner: the tool world's (see `Sandbox::with_config`)
/// plus `neuron-host`.
pub(super) fn add_neuron_host(linker: &mut Linker<CallState>) -> Result<(), SandboxError> {
    bindings::capsaga::tool::neuron_host::add_to_linker::<_, HasSelf<_>>(linker, |s| s)
        .map_err(|e| SandboxError::Engine(e.to_string()))
}

impl Sandbox {
    /// Make sure `prepared` (a neuron) has its bytecode before a call: the
    /// first caller runs `compile-neuron` in a fresh instance with no grants
    /// ([`COMPILE_LIMITS`]); concurrent callers wait for it; later calls
    /// return at once. A script, a tool or a source that does not compile
    /// gets none (a trap, a timeout or a guest error is logged at debug
    /// level: the call that follows compiles the source and reports it).
    pub(super) async fn neuron_bytecode(&self, tool_label: &str, prepared: &Prepared) {
        let Some(n) = prepared.neuron.as_ref().filter(|n| n.wants_bytecode()) else {
            return;
        };
        n.code
            .get_or_init(|| self.compile_neuron(tool_label, prepared, &n.def))
            .await;
    }

    async fn compile_neuron(
        &self,
        tool_label: &str,
        prepared: &Prepared,
        def: &NeuronDefinition,
    ) -> Option<Vec<u8>> {
        let started = std::time::Instant::now();
        let _slot = self.slot().await.ok()?;
        let (mut store, _stdio) = self
            .new_store(
                tool_label,
                &Bindings::default(),
                &COMPILE_LIMITS,
                false,
                None,
            )
            .ok()?;
        let pre = match prepared
            .pre()
            .ok_or_else(|| wasmtime::Error::msg("the runner is not compiled yet"))
            .and_then(|p| bindings::NeuronPre::new(p.instance_pre().clone()))
        {
            Ok(p) => p,
            Err(e) => {
                tracing::debug!(
                    tool = tool_label,
                    "the runner has no neuron-compiler: {e:#}"
                );
                return None;
            }
        };
        let run = async {
            let inst = pre.instantiate_async(&mut store).await?;
            inst.capsaga_tool_neuron_compiler()
                .call_compile_neuron(&mut store, &def.meta.name, &def.source)
                .await
        };
        let deadline =
            std::time::Duration::from_millis(COMPILE_LIMITS.deadline_ms + super::HOST_GRACE_MS);
        match tokio::time::timeout(deadline, run).await {
            Ok(Ok(Ok(code))) => {
                tracing::debug!(
                    tool = tool_label,
                    bytes = code.len(),
                    ms = started.elapsed().as_millis() as u64,
                    "neuron compiled"
                );
                Some(code)
            }
            Ok(Ok(Err(e))) => {
                tracing::debug!(
                    tool = tool_label,
                    "the neuron does not compile: {}",
                    e.message
                );
                None
            }
            Ok(Err(trap)) => {
                tracing::debug!(tool = tool_label, "compile-neuron trapped: {trap:#}");
                None
            }
            Err(_) => {
                tracing::debug!(tool = tool_label, "compile-neuron timed out");
                None
            }
        }
    }

    /// Compile (or load from the compiled cache in `cache_dir`, else the
    /// sandbox's own) and link the runner component `bytes`.
    ///
    /// # Errors
    /// [`SandboxError::Component`] for bytes that are not the runner.
    pub fn prepare_runner(
        &self,
        bytes: &[u8],
        cache_dir: Option<&Path>,
    ) -> Result<Runner, SandboxError> {
        let own;
        let cache = match cache_dir {
            Some(dir) => {
                own = CompiledCache::open(dir, &self.engine)
                    .map_err(|e| {
                        tracing::warn!("{e}; the neuron runner is compiled at every start")
                    })
                    .ok();
                own.as_ref()
            }
            None => self.cache.as_ref(),
        };
        // The runner's identity is the SHA-256 of its ~21 MB (about 12 ms);
        // the entry of the hash it had last time is checked meanwhile, on
        // another thread (its BLAKE3 sum, about 9 ms), and used only if the
        // bytes still have that hash.
        let hinted = cache.and_then(|c| c.hint(RUNNER_HINT));
        let (hash, early) = std::thread::scope(|s| {
            let early = match (cache, hinted.as_deref()) {
                // No thread to be had: no head start, nothing else changes.
                (Some(c), Some(h)) => std::thread::Builder::new()
                    .name("capsaga-runner-check".into())
                    .spawn_scoped(s, move || c.check_entry(h))
                    .ok(),
                _ => None,
            };
            let hash = capsaga_core::idempotency::sha256_hex(bytes);
            (hash, early.and_then(|j| j.join().ok()))
        });
        let compile = || {
            Component::from_binary(&self.engine, bytes)
                .map_err(|e| SandboxError::Component(format!("{e:#}")))
        };
        let early = match early {
            Some(Ok(Some(checked))) if hinted.as_deref() == Some(hash.as_str()) => Some(checked),
            _ => None,
        };
        let (component, loaded) = match (cache, early) {
            (Some(c), Some(checked)) => match c.load_checked(&self.engine, checked) {
                Ok(component) => (component, CacheOutcome::Hit),
                Err(_) => c.load_or_compile(&self.engine, &hash, compile)?,
            },
            (Some(c), None) => c.load_or_compile(&self.engine, &hash, compile)?,
            (None, _) => (compile()?, CacheOutcome::Disabled),
        };
        if let Some(c) = cache
            && hinted.as_deref() != Some(hash.as_str())
        {
            c.set_hint(RUNNER_HINT, &hash);
        }
        let pre = self
            .runner_linker
            .instantiate_pre(&component)
            .map_err(|e| SandboxError::Component(format!("{e:#}")))?;
        let pre = super::bindings::ToolPre::new(pre)
            .map_err(|e| SandboxError::Component(format!("{e:#}")))?;
        Ok(Runner {
            prepared: Prepared::ready(pre),
            hash,
            loaded,
        })
    }

    /// Run one example of a candidate neuron (`prepared`, from
    /// [`Runner::neuron`]): `execute` in a fresh instance with `bindings`
    /// (no grants, or a scratch directory) and `limits`, outside any saga.
    ///
    /// Only `neuron_create` calls this, from inside its own step (the
    /// dispatch door's execute stage runs `neuron_create`): a candidate is
    /// not a tool yet, nothing it does is logged or can take effect.
    pub async fn trial(
        &self,
        name: &str,
        prepared: &Prepared,
        bindings: &Bindings,
        limits: &Limits,
        args_json: &str,
    ) -> (CallResult, CallDiagnostics) {
        let ctx = CallContext {
            saga_id: "neuron-trial".into(),
            step_seq: 0,
            idempotency_key: format!("neuron-trial-{name}"),
            deadline_ms: crate::deadline_from_now(limits.deadline_ms),
            dry_run: false,
        };
        self.call(CallRequest {
            tool: name,
            prepared,
            bindings,
            limits,
            ctx: &ctx,
            args_json,
            op: &Op::Execute,
        })
        .await
    }

    /// Run a one-shot script (`code_run`, `source-kind::script` in
    /// `prepared`'s definition): `execute` in a fresh runner instance with
    /// `bindings` (the private copies of its inputs and its scratch
    /// directory, nothing else) and `limits`, under the step's `ctx`.
    ///
    /// Only `code_run` calls this, from inside its own step (the dispatch
    /// door's execute stage runs `code_run`): the script is not a tool,
    /// and what it writes reaches a granted directory only through the step
    /// that runs it.
    pub async fn run_script(
        &self,
        prepared: &Prepared,
        bindings: &Bindings,
        limits: &Limits,
        ctx: &CallContext,
    ) -> (CallResult, CallDiagnostics) {
        self.call(CallRequest {
            tool: "code_run",
            prepared,
            bindings,
            limits,
            ctx,
            args_json: "{}",
            op: &Op::Execute,
        })
        .await
    }
}
