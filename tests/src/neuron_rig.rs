//! A rig for the neuron runner (`target/neurons/neuron_runner.wasm`, built
//! from `tools/neuron_runner/` by `scripts/build-components`) on bare Wasmtime
//! with the host's sandbox parts: its engine configuration (pooling
//! allocator, epoch interruption, fuel), its compiled-component cache, its
//! WASI context builder (preopens from `fs:` grants only, no inherited
//! environment, no sockets), its memory limiter and its `wasi:http` hooks (the
//! net guard).
//!
//! It shows how the host binds the `neuron` world (`wit/neuron.wit`): the
//! runner's exports go through the host's own tool-world bindings
//! ([`ToolPre`]), and the linker only gains the `neuron-host` import, answered
//! from the call's store ([`RunnerState::definition`]). The sandbox's own
//! call path (`Sandbox::call`) will do the same once the host integrates
//! neurons; until then [`classify_trap`] mirrors its mapping of traps and
//! limits to typed errors.

use capsaga_core::capability::Capability;
use capsaga_core::error::{ErrorKind, ToolError};
use capsaga_core::policy::Limits;
use capsaga_sandbox::bindings::{
    LogLevel, Tool, ToolPre, WitCallContext, WitErrorKind, WitRisk, WitToolError, WitToolMeta,
    WitToolOutput, capsaga as tool_world,
};
use capsaga_sandbox::factors::net::NetHooks;
use capsaga_sandbox::state::{CallLimiter, InstanceCaps};
use capsaga_sandbox::stdio::CapturePipe;
use capsaga_sandbox::{CompiledCache, EPOCH_TICK_MS, Factors, SandboxConfig};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};
use wasmtime::component::{Component, HasSelf, Linker, ResourceTable};
use wasmtime::{Engine, Store, Trap, UpdateDeadline};
use wasmtime_wasi::{WasiCtx, WasiCtxView, WasiView};
use wasmtime_wasi_http::{WasiHttpCtx, WasiHttpCtxView, WasiHttpView};

/// Host bindings of the `neuron` world. Only its `neuron-host` import is
/// used: the exports are the tool world's, called through [`ToolPre`]. The
/// shared interfaces are the host's own generated types.
pub mod bindings {
    wasmtime::component::bindgen!({
        path: "../wit",
        world: "neuron",
        exports: { default: async },
        with: {
            "capsaga:tool/types": capsaga_sandbox::bindings::capsaga::tool::types,
            "capsaga:tool/log": capsaga_sandbox::bindings::capsaga::tool::log,
        },
    });
}

pub use bindings::capsaga::tool::neuron_host::{NamedFile, NeuronDefinition, SourceKind};

/// Environment variable that lets the neuron tests pass without the runner
/// (they print that they skipped); without it a missing runner fails them.
pub const SKIP_ENV: &str = "CAPSAGA_SKIP_RUNNER";

/// The built runner, or `None` when it is missing and [`SKIP_ENV`] is set.
///
/// # Panics
/// When it is missing and [`SKIP_ENV`] is not set.
pub fn runner_wasm() -> Option<PathBuf> {
    let p = crate::target_dir()
        .join("neurons")
        .join("neuron_runner.wasm");
    if p.exists() {
        return Some(p);
    }
    if std::env::var_os(SKIP_ENV).is_some() {
        eprintln!(
            "neuron runner tests SKIPPED: {} is missing and {SKIP_ENV} is set",
            p.display()
        );
        return None;
    }
    panic!(
        "the neuron runner is not built ({} is missing): run scripts/setup, then \
         scripts/build-components (or set {SKIP_ENV}=1 to skip these tests)",
        p.display()
    );
}

/// The data of one runner call's store: the same parts as the sandbox's
/// `CallState`, plus the definition the `neuron-host` import answers.
pub struct RunnerState {
    wasi: WasiCtx,
    table: ResourceTable,
    http: WasiHttpCtx,
    net: NetHooks,
    limiter: CallLimiter,
    deadline: Instant,
    definition: NeuronDefinition,
    /// Records of the `log` import, `(level, message)`.
    pub logs: Vec<(String, String)>,
}

impl WasiView for RunnerState {
    fn ctx(&mut self) -> WasiCtxView<'_> {
        WasiCtxView {
            ctx: &mut self.wasi,
            table: &mut self.table,
        }
    }
}

impl WasiHttpView for RunnerState {
    fn http(&mut self) -> WasiHttpCtxView<'_> {
        WasiHttpCtxView {
            ctx: &mut self.http,
            table: &mut self.table,
            hooks: &mut self.net,
        }
    }
}

impl tool_world::tool::log::Host for RunnerState {
    fn log(&mut self, level: LogLevel, message: String) {
        let level = match level {
            LogLevel::Trace => "trace",
            LogLevel::Debug => "debug",
            LogLevel::Info => "info",
            LogLevel::Warn => "warn",
            LogLevel::Error => "error",
        }
        .to_string();
        if self.logs.len() < 64 {
            self.logs
                .push((level, message.chars().take(64 * 1024).collect()));
        }
    }
}

impl tool_world::tool::types::Host for RunnerState {}

/// Neurons get no `llm:` grant: a sub-question is refused, as by the
/// sandbox's `llm` factor without a grant.
impl tool_world::tool::llm::Host for RunnerState {
    async fn ask(
        &mut self,
        _request: tool_world::tool::llm::LlmRequest,
    ) -> Result<tool_world::tool::llm::LlmAnswer, WitToolError> {
        Err(WitToolError {
            kind: WitErrorKind::PermissionDenied,
            message: "a neuron has no `llm:` grant: it may not ask the model anything".into(),
            llm_hint: "Answer without asking a sub-question.".into(),
            details: None,
            retriable: false,
        })
    }
}

impl bindings::capsaga::tool::neuron_host::Host for RunnerState {
    fn definition(&mut self) -> NeuronDefinition {
        self.definition.clone()
    }
}

/// Which export to call.
#[derive(Debug, Clone)]
pub enum Op {
    /// `execute`.
    Execute,
    /// `dry-run`.
    DryRun,
    /// `compensate`, with the output being undone.
    Compensate(WitToolOutput),
}

/// What one call produced.
#[derive(Debug)]
pub struct Called {
    /// The output (`None` for a successful compensate) or the typed error.
    pub result: Result<Option<WitToolOutput>, ToolError>,
    /// Captured stdout/stderr of the instance (the runner prints nothing
    /// itself; a trap's report lands here).
    pub stdio: String,
    /// Records of the `log` import.
    pub logs: Vec<(String, String)>,
    /// Wall time from store creation to the end of the call.
    pub elapsed: Duration,
}

impl Called {
    /// The error.
    ///
    /// # Panics
    /// When the call succeeded.
    pub fn err(&self) -> &ToolError {
        match &self.result {
            Err(e) => e,
            Ok(out) => panic!("the call succeeded: {out:?}"),
        }
    }

    /// The output's data, parsed.
    ///
    /// # Panics
    /// When the call failed or returned no output.
    pub fn data(&self) -> serde_json::Value {
        match &self.result {
            Ok(Some(out)) => serde_json::from_str(&out.data).expect("output data is JSON"),
            other => panic!("no output: {other:?}\nstdio: {}", self.stdio),
        }
    }
}

/// How the rig's component was obtained.
#[derive(Debug, Clone, Copy)]
pub enum Loaded {
    /// Compiled now (cache miss), in this many milliseconds.
    Compiled(u128),
    /// Deserialized from the compiled cache, in this many milliseconds.
    Cached(u128),
}

/// One engine, the compiled runner and its pre-linked instance, shared by
/// every call.
pub struct Rig {
    engine: Engine,
    pre: ToolPre<RunnerState>,
    /// How the component was obtained.
    pub loaded: Loaded,
    /// SHA-256 of the runner's bytes (what a neuron's identity pins).
    pub runner_hash: String,
    factors: Arc<Factors>,
    stop_ticker: Arc<AtomicBool>,
}

impl Drop for Rig {
    fn drop(&mut self) {
        self.stop_ticker.store(true, Ordering::Relaxed);
    }
}

/// Directory of the rig's compiled cache: `target/neuron-runner-cache`.
pub fn cache_dir() -> PathBuf {
    crate::target_dir().join("neuron-runner-cache")
}

impl Rig {
    /// Engine as the sandbox builds it (its default configuration), its
    /// epoch ticker, and the runner loaded through the compiled cache in
    /// `cache` (compiled and stored on a miss).
    ///
    /// # Panics
    /// When the engine cannot be built or the runner does not load.
    pub fn load(wasm: &Path, cache: &Path) -> Rig {
        let (engine, _alloc) =
            capsaga_sandbox::engine::build(&SandboxConfig::default()).expect("engine");
        let bytes = std::fs::read(wasm).expect("read the runner");
        let hash = capsaga_core::idempotency::sha256_hex(&bytes);
        let cache_store = CompiledCache::open(cache, &engine).expect("open the compiled cache");
        remove_stale_entries(cache, &hash);
        let cache = cache_store;
        let started = Instant::now();
        let (component, loaded) = match cache.load(&engine, &hash) {
            Ok(Some(c)) => (c, Loaded::Cached(started.elapsed().as_millis())),
            _ => {
                let c = Component::from_binary(&engine, &bytes).expect("compile the runner");
                let ms = started.elapsed().as_millis();
                cache.store(&hash, &c);
                (c, Loaded::Compiled(ms))
            }
        };
        Rig::from_parts(engine, &component, loaded, hash)
    }

    /// A rig on `engine` (built with the sandbox's configuration) for the
    /// already compiled runner: links it and starts the epoch ticker.
    ///
    /// # Panics
    /// When the runner does not link.
    pub fn from_parts(
        engine: Engine,
        component: &Component,
        loaded: Loaded,
        runner_hash: String,
    ) -> Rig {
        let pre = Self::link(&engine, component);
        let stop = Arc::new(AtomicBool::new(false));
        start_ticker(&engine, stop.clone());
        Rig {
            engine,
            pre,
            loaded,
            runner_hash,
            factors: Arc::new(Factors::none()),
            stop_ticker: stop,
        }
    }

    /// The linker of the runner: what the sandbox links for every tool
    /// (WASI p2, `wasi:http`, the `log` and `llm` imports) plus the
    /// `neuron-host` import; the exports are bound with the tool world's
    /// [`ToolPre`].
    ///
    /// # Panics
    /// When the runner does not link.
    pub fn link(engine: &Engine, component: &Component) -> ToolPre<RunnerState> {
        let mut linker: Linker<RunnerState> = Linker::new(engine);
        wasmtime_wasi::p2::add_to_linker_async(&mut linker).expect("wasi");
        wasmtime_wasi_http::p2::add_only_http_to_linker_async(&mut linker).expect("wasi:http");
        Tool::add_to_linker::<_, HasSelf<_>>(&mut linker, |s| s).expect("tool world imports");
        bindings::capsaga::tool::neuron_host::add_to_linker::<_, HasSelf<_>>(&mut linker, |s| s)
            .expect("neuron-host import");
        let pre = linker.instantiate_pre(component).expect("the runner links");
        ToolPre::new(pre).expect("the runner exports the tool world")
    }

    /// The engine.
    pub fn engine(&self) -> &Engine {
        &self.engine
    }

    fn store(
        &self,
        def: &NeuronDefinition,
        grants: &[Capability],
        limits: &Limits,
        dry_run: bool,
        factors: &Factors,
    ) -> (Store<RunnerState>, CapturePipe) {
        // The host's three factor phases: bindings from the grants, bound
        // into this call's WASI context and `wasi:http` hooks.
        let bound = factors
            .bind(&factors.configure(grants), dry_run, limits.deadline_ms)
            .expect("wasi context");
        let (wasi, stdio) = (bound.wasi, bound.stdio);
        let state = RunnerState {
            wasi,
            table: ResourceTable::new(),
            http: WasiHttpCtx::new(),
            net: bound.net,
            limiter: CallLimiter::new(InstanceCaps::for_memory(limits.memory_bytes)),
            deadline: Instant::now() + Duration::from_millis(limits.deadline_ms),
            definition: def.clone(),
            logs: Vec::new(),
        };
        let mut store = Store::new(&self.engine, state);
        store.limiter(|s| &mut s.limiter);
        store.set_hostcall_fuel(transfer_cap_bytes(limits));
        store.set_fuel(limits.fuel).expect("fuel");
        store.set_epoch_deadline(1);
        store.epoch_deadline_callback(|ctx| {
            Ok(if Instant::now() >= ctx.data().deadline {
                UpdateDeadline::Interrupt
            } else {
                UpdateDeadline::Yield(1)
            })
        });
        (store, stdio)
    }

    /// `meta` in a fresh instance with no grants.
    ///
    /// # Panics
    /// When the call traps.
    pub async fn meta(&self, def: &NeuronDefinition) -> WitToolMeta {
        let (mut store, _stdio) = self.store(def, &[], &Limits::DEFAULT, false, &self.factors);
        let inst = self
            .pre
            .instantiate_async(&mut store)
            .await
            .expect("instantiate");
        inst.call_meta(&mut store).await.expect("meta")
    }

    /// One export call in a fresh instance with `grants` and `limits`, and
    /// no outgoing-HTTP settings, secrets or `env:` values.
    pub async fn call(
        &self,
        def: &NeuronDefinition,
        op: &Op,
        grants: &[Capability],
        limits: &Limits,
        args_json: &str,
    ) -> Called {
        self.call_with(def, op, grants, limits, args_json, &self.factors)
            .await
    }

    /// [`Rig::call`] with the operator's outgoing settings, secrets and
    /// `env:` values from `factors`.
    pub async fn call_with(
        &self,
        def: &NeuronDefinition,
        op: &Op,
        grants: &[Capability],
        limits: &Limits,
        args_json: &str,
        factors: &Factors,
    ) -> Called {
        self.call_pre(&self.pre, def, op, grants, limits, args_json, factors)
            .await
    }

    /// Compile (without the cache) and link another component, e.g. a Rust
    /// tool from `target/tools/`, on the same engine and linker, to compare
    /// calls in the same run.
    ///
    /// # Panics
    /// When it does not compile or link.
    pub fn prepare(&self, wasm: &Path) -> ToolPre<RunnerState> {
        let component = Component::from_file(&self.engine, wasm).expect("compile");
        Self::link(&self.engine, &component)
    }

    /// The runner's `compile-neuron` export (interface `neuron-compiler`)
    /// in a fresh instance with no grants: `source`'s bytecode for a neuron
    /// named `name`, or the guest's error (a trap classified as the host
    /// does, e.g. a parser exhausting the wasm stack).
    ///
    /// # Panics
    /// When the runner lacks the export.
    pub async fn compile(&self, name: &str, source: &str) -> Result<Vec<u8>, ToolError> {
        let def = neuron(name, "");
        let (mut store, _stdio) = self.store(&def, &[], &Limits::DEFAULT, false, &self.factors);
        let pre = bindings::NeuronPre::new(self.pre.instance_pre().clone())
            .expect("the runner exports neuron-compiler");
        let inst = pre
            .instantiate_async(&mut store)
            .await
            .expect("instantiate");
        match inst
            .capsaga_tool_neuron_compiler()
            .call_compile_neuron(&mut store, name, source)
            .await
        {
            Ok(res) => res.map_err(error_from_wit),
            Err(trap) => Err(classify_trap(
                &trap,
                store.data().limiter.hit.as_deref(),
                &Limits::DEFAULT,
            )),
        }
    }

    /// Instantiate the runner in a fresh store and drop it, calling nothing.
    ///
    /// # Panics
    /// When instantiation fails.
    pub async fn instantiate_only(&self, def: &NeuronDefinition) {
        let (mut store, _stdio) = self.store(def, &[], &Limits::DEFAULT, false, &self.factors);
        self.pre
            .instantiate_async(&mut store)
            .await
            .expect("instantiate");
    }

    /// One export call of the component behind `pre` in a fresh instance.
    #[allow(clippy::too_many_arguments)]
    pub async fn call_pre(
        &self,
        pre: &ToolPre<RunnerState>,
        def: &NeuronDefinition,
        op: &Op,
        grants: &[Capability],
        limits: &Limits,
        args_json: &str,
        factors: &Factors,
    ) -> Called {
        let started = Instant::now();
        let dry = matches!(op, Op::DryRun);
        let (mut store, stdio) = self.store(def, grants, limits, dry, factors);
        let ctx = WitCallContext {
            saga_id: "neuron-test".into(),
            step_seq: 0,
            idempotency_key: "neuron-test-0".into(),
            deadline_ms: 0,
            dry_run: dry,
        };
        let fut = async {
            let inst: Tool = pre.instantiate_async(&mut store).await?;
            Ok::<_, wasmtime::Error>(match op {
                Op::Execute => inst
                    .call_execute(&mut store, &ctx, args_json)
                    .await?
                    .map(Some),
                Op::DryRun => inst
                    .call_dry_run(&mut store, &ctx, args_json)
                    .await?
                    .map(Some),
                Op::Compensate(out) => inst
                    .call_compensate(&mut store, &ctx, args_json, out)
                    .await?
                    .map(|()| None),
            })
        };
        let res = tokio::time::timeout(Duration::from_millis(limits.deadline_ms + 250), fut).await;
        let result = match res {
            Ok(Ok(Ok(out))) => Ok(out),
            Ok(Ok(Err(guest))) => Err(error_from_wit(guest)),
            Ok(Err(trap)) => Err(classify_trap(
                &trap,
                store.data().limiter.hit.as_deref(),
                limits,
            )),
            Err(_) => Err(ToolError::with_hint(
                ErrorKind::Timeout,
                "deadline passed (host side)",
                "The call took too long. Try a smaller request.",
            )),
        };
        let logs = std::mem::take(&mut store.data_mut().logs);
        Called {
            result,
            stdio: stdio.contents(),
            logs,
            elapsed: started.elapsed(),
        }
    }
}

/// Remove compiled runners of other builds from the rig's cache directory
/// (each build of the runner has its own hash; its entry is about 40 MB).
fn remove_stale_entries(dir: &Path, keep_hash: &str) {
    let Ok(rd) = std::fs::read_dir(dir) else {
        return;
    };
    for e in rd.flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        if name.ends_with(".cwasm") && !name.starts_with(keep_hash) {
            let _ = std::fs::remove_file(e.path());
        }
    }
}

fn start_ticker(engine: &Engine, stop: Arc<AtomicBool>) {
    let engine = engine.clone();
    std::thread::Builder::new()
        .name("neuron-rig-epoch".into())
        .spawn(move || {
            while !stop.load(Ordering::Relaxed) {
                std::thread::sleep(Duration::from_millis(EPOCH_TICK_MS));
                engine.increment_epoch();
            }
        })
        .expect("epoch ticker");
}

/// The sandbox's cap on one guest-to-host transfer (`outcome::transfer_cap_bytes`).
fn transfer_cap_bytes(limits: &Limits) -> usize {
    let out = usize::try_from(limits.output_bytes).unwrap_or(usize::MAX);
    out.max(2 * 1024 * 1024).saturating_add(64 * 1024)
}

/// A guest's `tool-error` as the host's [`ToolError`].
pub fn error_from_wit(e: WitToolError) -> ToolError {
    let kind = match e.kind {
        WitErrorKind::InvalidArgs => ErrorKind::InvalidArgs,
        WitErrorKind::NotFound => ErrorKind::NotFound,
        WitErrorKind::PermissionDenied => ErrorKind::PermissionDenied,
        WitErrorKind::NetworkError => ErrorKind::NetworkError,
        WitErrorKind::ExternalError => ErrorKind::ExternalError,
        WitErrorKind::QuotaExceeded => ErrorKind::QuotaExceeded,
        WitErrorKind::Unsupported => ErrorKind::Unsupported,
        WitErrorKind::Timeout => ErrorKind::Timeout,
        WitErrorKind::Unrevertible => ErrorKind::Unrevertible,
        WitErrorKind::Unknown => ErrorKind::Unknown,
    };
    let mut err = ToolError::with_hint(kind, e.message, e.llm_hint).retriable(e.retriable);
    if let Some(d) = e.details {
        err = err.with_details(serde_json::from_str(&d).unwrap_or(serde_json::Value::String(d)));
    }
    err
}

/// The host's classification of a trap (as `sandbox::outcome::trap_to_error`
/// does it): deadline → `timeout`; fuel, memory cap, transfer cap or stack
/// → `quota-exceeded`; anything else → `unknown`.
pub fn classify_trap(
    err: &wasmtime::Error,
    limiter_hit: Option<&str>,
    limits: &Limits,
) -> ToolError {
    let trap = err.downcast_ref::<Trap>().copied();
    let text = format!("{err:#}");
    let details = serde_json::json!({ "trap": text.chars().take(2000).collect::<String>() });
    let (kind, message, hint) = match trap {
        Some(Trap::Interrupt) => (
            ErrorKind::Timeout,
            format!(
                "exceeded its deadline of {} ms and was stopped",
                limits.deadline_ms
            ),
            "The call took too long. Try a smaller request, or a different approach.",
        ),
        Some(Trap::OutOfFuel) => (
            ErrorKind::QuotaExceeded,
            "used all its fuel".to_string(),
            "The call needed too much computation. Try a smaller request.",
        ),
        Some(Trap::StackOverflow) => (
            ErrorKind::QuotaExceeded,
            "exhausted its call stack".into(),
            "The call recursed too deeply. Try a smaller or flatter input.",
        ),
        _ if text.contains("fuel allocated for hostcalls has been exhausted") => (
            ErrorKind::QuotaExceeded,
            "tried to pass more than the transfer cap to the host".into(),
            "Ask for less data at once.",
        ),
        _ if limiter_hit.is_some() => (
            ErrorKind::QuotaExceeded,
            format!("was stopped: {}", limiter_hit.unwrap_or_default()),
            "The call needed too much memory. Try a smaller request.",
        ),
        Some(t) => (
            ErrorKind::Unknown,
            format!("trapped ({t})"),
            "The tool crashed. Do not retry the same call.",
        ),
        None => (
            ErrorKind::Unknown,
            format!("failed in the host: {text}"),
            "The tool crashed. Do not retry the same call.",
        ),
    };
    ToolError::with_hint(kind, message, hint).with_details(details)
}

/// A neuron definition: `source` as a module, with a meta named `name`,
/// no side effects, risk low, no capabilities, and the default output cap.
pub fn neuron(name: &str, source: &str) -> NeuronDefinition {
    NeuronDefinition {
        meta: WitToolMeta {
            name: name.to_string(),
            description: format!("test neuron {name}"),
            args_schema: r#"{"type":"object"}"#.into(),
            has_side_effects: false,
            risk: WitRisk::Low,
            returns_untrusted: false,
            idempotent: true,
            supports_dry_run: true,
            capabilities: Vec::new(),
            version: "0.1.0".into(),
        },
        source: source.to_string(),
        kind: SourceKind::Module,
        inputs: Vec::new(),
        scratch_dir: None,
        max_output_bytes: Limits::DEFAULT.output_bytes,
        code: None,
    }
}
