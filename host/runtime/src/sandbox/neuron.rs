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

use super::bindings::{WitRisk, WitToolMeta};
use super::state::CallState;
use super::{
    CacheOutcome, CallDiagnostics, CallRequest, CallResult, CompiledCache, Op, Prepared, Sandbox,
    SandboxError,
};
use crate::sandbox::Bindings;
use capsaga_core::meta::{RawToolMeta, Risk};
use capsaga_core::policy::Limits;
use capsaga_core::tool::CallContext;
use std::path::Path;
use std::sync::Arc;
use wasmtime::component::{Component, HasSelf, Linker};

/// Host bindings of the `neuron` world; only its `neuron-host` import is
/// used (the exports are the tool world's).
pub mod bindings {
    wasmtime::component::bindgen!({
        path: "../../wit",
        world: "neuron",
        exports: { default: async },
        with: {
            "capsaga:tool/types": crate::sandbox::bindings::capsaga::tool::types,
            "capsaga:tool/log": crate::sandbox::bindings::capsaga::tool::log,
        },
    });
}

pub use bindings::capsaga::tool::neuron_host::{NamedFile, NeuronDefinition, SourceKind};

impl bindings::capsaga::tool::neuron_host::Host for CallState {
    /// The call's definition; a runner instance without one (never made by
    /// the host) gets an empty source, which fails every export.
    fn definition(&mut self) -> NeuronDefinition {
        match &self.neuron {
            Some(d) => (**d).clone(),
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
    pub fn neuron(&self, def: NeuronDefinition) -> Prepared {
        Prepared {
            pre: self.prepared.pre.clone(),
            neuron: Some(Arc::new(def)),
        }
    }
}

/// The linker of the runner: the tool world's (see `Sandbox::with_config`)
/// plus `neuron-host`.
pub(super) fn add_neuron_host(linker: &mut Linker<CallState>) -> Result<(), SandboxError> {
    bindings::capsaga::tool::neuron_host::add_to_linker::<_, HasSelf<_>>(linker, |s| s)
        .map_err(|e| SandboxError::Engine(e.to_string()))
}

impl Sandbox {
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
        let hash = capsaga_core::idempotency::sha256_hex(bytes);
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
        let (component, loaded) = match cache.map(|c| (c, c.load(&self.engine, &hash))) {
            Some((_, Ok(Some(c)))) => (c, CacheOutcome::Hit),
            found => {
                let component = Component::from_binary(&self.engine, bytes)
                    .map_err(|e| SandboxError::Component(format!("{e:#}")))?;
                let outcome = match &found {
                    Some((c, res)) => {
                        c.store(&hash, &component);
                        match res {
                            Err(reason) => CacheOutcome::Rejected {
                                reason: reason.clone(),
                            },
                            _ => CacheOutcome::Miss,
                        }
                    }
                    None => CacheOutcome::Disabled,
                };
                (component, outcome)
            }
        };
        let pre = self
            .runner_linker
            .instantiate_pre(&component)
            .map_err(|e| SandboxError::Component(format!("{e:#}")))?;
        let pre = super::bindings::ToolPre::new(pre)
            .map_err(|e| SandboxError::Component(format!("{e:#}")))?;
        Ok(Runner {
            prepared: Prepared { pre, neuron: None },
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
            deadline_ms: crate::clock::deadline_from_now(limits.deadline_ms),
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
