//! Reading a tool's meta: the `meta` export called in a fresh instance with
//! no grants and [`META_LIMITS`].
//!
//! A tool's meta is needed to list it, long before (and often without) any
//! call. A component whose meta the compiled cache does not hold yet is
//! compiled for it by Wasmtime's baseline compiler, Winch, in a separate
//! engine of the same settings (fuel, epoch deadline, memory limiter, the
//! same linker): about five times faster than Cranelift (measured on the
//! eleven first-party tools, 0.7 s against 3.6 s), and the code is thrown
//! away once the meta is read. The tool itself is then compiled by Cranelift
//! at its first call only (`Prepared` deferred), so a first start on a cold
//! state compiles with Cranelift just the tools it calls. Winch runs the
//! same guest code as Cranelift (one semantics, two code generators), so
//! the meta is the same; where Winch cannot compile a component (a
//! proposal it lacks on this architecture) or is not available, the meta
//! is read through Cranelift as before.
//!
//! Concurrent processes on one cold cache read each meta once: the reader
//! holds the meta entry's lock, the others wait and load what it stored
//! (`CompiledCache::lock_meta`).

use super::bindings::{OUTPUT_FIELDS_EXPORT, Tool, ToolPre, WitOutputField};
use super::cache::COMPILE_WAIT;
use super::state::CallState;
use super::{
    Bindings, HOST_GRACE_MS, META_LIMITS, Prepared, Sandbox, SandboxError, outcome, tool_linker,
};
use capsaga_core::meta::RawToolMeta;
use std::time::Duration;
use wasmtime::component::{Component, Linker};
use wasmtime::{Engine, Strategy};

/// The baseline engine and its linker (the tool world's imports, as the
/// main engine's).
pub(super) struct Baseline {
    pub(super) engine: Engine,
    linker: Linker<CallState>,
}

impl Baseline {
    /// The engine: the main engine's settings, compiled by Winch, instances
    /// allocated on demand (a meta call is rare; no pool reserved for it).
    /// `None` (with the reason logged at debug level) where Winch is not
    /// available.
    fn new() -> Option<Baseline> {
        let mut config = super::engine::base_config();
        config.strategy(Strategy::Winch);
        let made = Engine::new(&config)
            .map_err(|e| format!("{e:#}"))
            .and_then(|engine| {
                let linker = tool_linker(&engine).map_err(|e| e.to_string())?;
                Ok(Baseline { engine, linker })
            });
        match made {
            Ok(b) => Some(b),
            Err(e) => {
                tracing::debug!("no baseline compiler for metas ({e}); metas use Cranelift");
                None
            }
        }
    }
}

impl Sandbox {
    /// Call `meta` in an instance of `prepared` with no grants (compiling
    /// it first when its compilation was deferred).
    ///
    /// # Errors
    /// [`SandboxError::Meta`] when the call traps or times out;
    /// [`SandboxError::Component`] when a deferred compilation fails.
    pub async fn meta(
        &self,
        tool_label: &str,
        prepared: &Prepared,
    ) -> Result<RawToolMeta, SandboxError> {
        let prepared = self.compile_deferred(prepared)?;
        let pre = prepared
            .pre()
            .ok_or_else(|| SandboxError::Component("the component is not compiled".into()))?;
        self.run_meta(&self.engine, tool_label, pre).await
    }

    /// The meta of the component `bytes` (content hash `hash`) without
    /// compiling it for calls: from the compiled cache if another process
    /// stored it meanwhile, else read through the baseline compiler and
    /// stored there. `None` when the baseline compiler is not available or
    /// cannot compile these bytes: the caller compiles the component with
    /// Cranelift and reads the meta from it ([`Sandbox::meta`]), which
    /// reports what is wrong with bytes that are not a tool at all.
    ///
    /// # Errors
    /// `Some(Err)`: [`SandboxError::Component`] when the component does
    /// not link against the tool world, [`SandboxError::Meta`] when its
    /// `meta` traps or times out.
    pub async fn meta_baseline(
        &self,
        tool_label: &str,
        bytes: &[u8],
        hash: &str,
    ) -> Option<Result<RawToolMeta, SandboxError>> {
        let baseline = self.baseline.get_or_init(Baseline::new).as_ref()?;
        let lock = self
            .cache
            .as_ref()
            .and_then(|c| c.lock_meta(hash, COMPILE_WAIT));
        if lock.is_some()
            && let Some(raw) = self.cache.as_ref().and_then(|c| c.load_meta(hash))
        {
            return Some(Ok(raw));
        }
        let work = if self.cache.is_some() {
            super::cache::Work::Meta
        } else {
            super::cache::Work::MetaUncached
        };
        let notice = super::cache::Notice::start(work, hash, bytes.len());
        let component = match Component::from_binary(&baseline.engine, bytes) {
            Ok(c) => c,
            Err(e) => {
                notice.end();
                tracing::debug!("{tool_label}: baseline compiler: {e:#}; meta read via Cranelift");
                return None;
            }
        };
        let pre = match baseline
            .linker
            .instantiate_pre(&component)
            .and_then(ToolPre::new)
        {
            Ok(pre) => pre,
            Err(e) => return Some(Err(SandboxError::Component(format!("{e:#}")))),
        };
        let raw = self.run_meta(&baseline.engine, tool_label, &pre).await;
        notice.end();
        if let (Ok(raw), Some(cache)) = (&raw, &self.cache) {
            cache.store_meta(hash, raw);
        }
        drop(lock);
        Some(raw)
    }

    /// Instantiate `pre` (compiled for `engine`) with no grants and call
    /// its `meta`, within [`META_LIMITS`].
    async fn run_meta(
        &self,
        engine: &Engine,
        tool_label: &str,
        pre: &ToolPre<CallState>,
    ) -> Result<RawToolMeta, SandboxError> {
        let _slot = self.slot().await.map_err(SandboxError::Meta)?;
        let (mut store, _stdio) = self
            .new_store_in(
                engine,
                tool_label,
                &Bindings::default(),
                &META_LIMITS,
                false,
                None,
            )
            .map_err(SandboxError::Meta)?;
        let fut = async {
            let instance = pre
                .instance_pre()
                .instantiate_async(&mut store)
                .await
                .map_err(|e| e.context(outcome::Instantiating))?;
            let tool = Tool::new(&mut store, &instance)?;
            let meta = tool.call_meta(&mut store).await?;
            let fields = output_fields(&mut store, &instance).await?;
            Ok::<_, wasmtime::Error>((meta, fields))
        };
        let res = tokio::time::timeout(
            Duration::from_millis(META_LIMITS.deadline_ms + HOST_GRACE_MS),
            fut,
        )
        .await;
        match res {
            Ok(Ok((m, fields))) => Ok(outcome::raw_meta(m, fields)),
            Ok(Err(e)) => Err(SandboxError::Meta(outcome::trap_to_error(
                tool_label,
                "meta",
                &e,
                store.data().limiter.hit.as_deref(),
                "",
                &META_LIMITS,
            ))),
            Err(_) => Err(SandboxError::Meta(outcome::deadline_error(
                tool_label,
                "meta",
                &META_LIMITS,
            ))),
        }
    }
}

/// The field labels a component declares (its optional `output-fields`
/// export, `wit/tool.wit`'s `labelled-tool` world), called in the meta's
/// instance; empty when it has no such export.
///
/// # Errors
/// An export of that name with another type (the component is refused, as
/// for a trapping `meta`), or a trap in it.
async fn output_fields(
    store: &mut wasmtime::Store<CallState>,
    instance: &wasmtime::component::Instance,
) -> wasmtime::Result<Vec<WitOutputField>> {
    if instance
        .get_export_index(&mut *store, None, OUTPUT_FIELDS_EXPORT)
        .is_none()
    {
        return Ok(Vec::new());
    }
    let func = instance
        .get_typed_func::<(), (Vec<WitOutputField>,)>(&mut *store, OUTPUT_FIELDS_EXPORT)
        .map_err(|e| e.context(format!("the `{OUTPUT_FIELDS_EXPORT}` export")))?;
    let (fields,) = func.call_async(&mut *store, ()).await?;
    Ok(fields)
}
