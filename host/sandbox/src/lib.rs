//! # capsaga-sandbox
//!
//! The lowest layer of the capsaga runtime that runs guest code: the
//! Wasmtime engine, the compiled-component cache, the capability factors
//! that bind a call's grants, the `wasi:http` hooks of the net guard and
//! the neuron runner's linker. It depends on `capsaga-core` (the rules),
//! `capsaga-guest-fs` (the host's file journal) and Wasmtime; it knows
//! nothing of sagas, the store or the door above it, and only the door
//! (`capsaga-door`) depends on it: every call it runs is a step the door
//! logged (ARCHITECTURE.md, "only the door runs a tool").
//!
//! The sandbox: one shared Wasmtime [`Engine`], components compiled once, and
//! a **fresh instance per call** whose WASI context holds exactly the call's
//! grants (DESIGN §4).
//!
//! What a call may reach is bound into its store by the capability factors
//! ([`factors`]: fs, env, net, secret), loaded from the policy once and set
//! with [`Sandbox::set_factors`]. Outgoing HTTP goes through `wasi:http` and
//! the net guard ([`factors::net`]).
//!
//! Limits per call: a wall-clock deadline (epoch interruption, plus a host-side
//! timeout for time spent in host calls), fuel, a cap on the sum of all linear
//! memories, table/instance caps, an output size cap and a log size cap. A
//! trap, a limit hit or a malformed return becomes a typed [`ToolError`]; the
//! host never panics because of a guest. What the host copies out of guest
//! memory in one transfer (an export's results, one host call's arguments)
//! is bounded before the copy by Wasmtime's hostcall fuel, set from the
//! output cap (`outcome::transfer_cap_bytes`).
//!
//! Instances come from the pooling allocator ([`engine`]); compiled
//! components can be cached on disk ([`cache`]); a tool's meta is read
//! through the baseline compiler when the cache has none (`meta`); at most
//! [`SandboxConfig::max_concurrent_calls`] calls run at once. A running
//! guest yields to the async runtime at every epoch tick, so a few guests
//! spinning until their deadline do not starve the other calls.

#![warn(missing_docs)]

pub mod bindings;
pub mod cache;
pub mod engine;
pub mod factors;
pub mod log;
mod meta;
pub mod neuron;
mod outcome;
mod prepared;
pub mod state;
pub mod stdio;
pub(crate) mod wasi;

#[cfg(test)]
mod caps_tests;
mod deadline;

pub use cache::{CacheOutcome, CompiledCache};
pub use deadline::deadline_from_now;
pub use engine::{Allocator, SandboxConfig};
pub use factors::llm::{SubAnswer, SubModel, SubRequest};
pub use factors::{Bindings, Factors};
pub use prepared::Prepared;

use bindings::{Tool, ToolPre, WitCallContext};
use capsaga_core::error::{ErrorKind, ToolError};
use capsaga_core::policy::Limits;
use capsaga_core::tool::{CallContext, ToolOutput};
use factors::net::{self, NetRecord};
use log::{LogBuffer, LogRecord};
use state::{CallLimiter, CallState, InstanceCaps};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};
use wasmtime::component::{Component, HasSelf, Linker, ResourceTable};
use wasmtime::{Engine, Store, UpdateDeadline};

/// Interval of the epoch ticker, milliseconds: a running guest checks its
/// deadline (and yields to the runtime) this often.
pub const EPOCH_TICK_MS: u64 = 5;
/// Extra host-side time allowed past the deadline before the call future is
/// dropped (covers a guest blocked in a host call), milliseconds.
pub const HOST_GRACE_MS: u64 = 250;
/// Limits of the `meta` call (no grants at all).
pub const META_LIMITS: Limits = Limits {
    deadline_ms: 5_000,
    memory_bytes: 64 * 1024 * 1024,
    fuel: 2_000_000_000,
    output_bytes: 512 * 1024,
    log_bytes: 4 * 1024,
};

/// Why the sandbox could not be set up or a component not loaded.
#[derive(Debug, thiserror::Error)]
pub enum SandboxError {
    /// Engine configuration failed.
    #[error("cannot create the Wasmtime engine: {0}")]
    Engine(String),
    /// The bytes are not a valid component, or it does not fit the tool world.
    #[error("not a valid capsaga tool component: {0}")]
    Component(String),
    /// `meta` failed.
    #[error("the component's meta call failed: {0}")]
    Meta(ToolError),
}

/// Which export to call.
#[derive(Debug, Clone)]
pub enum Op {
    /// `execute`.
    Execute,
    /// `dry-run` (give it the bindings of the dry-run grants: see
    /// `capsaga_core::grant::dry_run_grants`).
    DryRun,
    /// `compensate`, with the output being undone.
    Compensate(ToolOutput),
}

impl Op {
    /// The output being undone, for `compensate`.
    pub fn undone_output(&self) -> Option<&ToolOutput> {
        match self {
            Op::Compensate(o) => Some(o),
            _ => None,
        }
    }

    /// The export's WIT name.
    pub fn name(&self) -> &'static str {
        match self {
            Op::Execute => "execute",
            Op::DryRun => "dry-run",
            Op::Compensate(_) => "compensate",
        }
    }
}

/// Everything a call produced besides its result.
#[derive(Debug, Clone, Default, serde::Serialize)]
pub struct CallDiagnostics {
    /// Guest log records (capped).
    pub logs: Vec<LogRecord>,
    /// Log records dropped past the cap.
    pub logs_dropped: usize,
    /// Captured guest stdout/stderr (capped), e.g. a panic message.
    pub stdio: String,
    /// Wall time of the call, milliseconds.
    pub wall_ms: u64,
    /// Fuel consumed.
    pub fuel_used: u64,
    /// Outgoing HTTP requests and what the net guard did with them.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub net: Vec<NetRecord>,
    /// True when the host stopped the call or refused what it returned
    /// after the guest ran (deadline, trap, fuel, memory, an output over
    /// the cap or not JSON): whatever the guest did before that is in doubt,
    /// unlike an error the guest returned itself.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub interrupted: bool,
}

/// The result of one call: `Ok(None)` for a successful `compensate`.
pub type CallResult = Result<Option<ToolOutput>, ToolError>;

/// One call: which tool, with which bindings and limits, what to call.
#[derive(Clone, Copy)]
pub struct CallRequest<'a> {
    /// The tool's name (for logs and errors).
    pub tool: &'a str,
    /// The tool's prepared component.
    pub prepared: &'a Prepared,
    /// What the call's grants bind (those of the dry-run grants for a
    /// dry-run): see [`Factors::configure`].
    pub bindings: &'a Bindings,
    /// Limits of this call.
    pub limits: &'a Limits,
    /// The call context passed to the guest.
    pub ctx: &'a CallContext,
    /// Arguments, JSON text, already validated.
    pub args_json: &'a str,
    /// Which export.
    pub op: &'a Op,
}

/// The shared engine and linker.
pub struct Sandbox {
    engine: Engine,
    linker: Linker<CallState>,
    runner_linker: Linker<CallState>,
    stop_ticker: Arc<AtomicBool>,
    factors: Arc<Factors>,
    allocator: Allocator,
    cache: Option<CompiledCache>,
    slots: tokio::sync::Semaphore,
    /// The baseline (Winch) engine metas are read with, made at the first
    /// meta no cache holds (`meta`).
    baseline: Arc<std::sync::OnceLock<Option<meta::Baseline>>>,
}

impl Drop for Sandbox {
    fn drop(&mut self) {
        self.stop_ticker.store(true, Ordering::Relaxed);
    }
}

impl Sandbox {
    /// [`Sandbox::with_config`] with the defaults: pooling allocator, no
    /// compiled cache.
    ///
    /// # Errors
    /// [`SandboxError::Engine`].
    pub fn new() -> Result<Sandbox, SandboxError> {
        Sandbox::with_config(&SandboxConfig::default())
    }

    /// Create the engine (epoch interruption and fuel on, pooling allocator
    /// unless disabled or unavailable) and the linker (WASI preview 2 and
    /// the `log` import), open the compiled cache if one is configured (an
    /// unusable one is disabled with a warning), and start the epoch ticker.
    ///
    /// # Errors
    /// [`SandboxError::Engine`].
    pub fn with_config(config: &SandboxConfig) -> Result<Sandbox, SandboxError> {
        let (engine, allocator) = engine::build(config)?;
        let cache = config.compiled_cache.as_deref().and_then(|dir| {
            CompiledCache::open(dir, &engine)
                .map_err(|e| tracing::warn!("{e}; components will be compiled at every start"))
                .ok()
        });
        let linker = tool_linker(&engine)?;
        let mut runner_linker = tool_linker(&engine)?;
        neuron::add_to_linker(&mut runner_linker)?;
        let stop = Arc::new(AtomicBool::new(false));
        let ticker_engine = engine.clone();
        let ticker_stop = stop.clone();
        let baseline = Arc::new(std::sync::OnceLock::new());
        if config.meta_compiler == capsaga_core::policy::MetaCompiler::Cranelift {
            let _ = baseline.set(None);
        }
        let ticker_baseline: Arc<std::sync::OnceLock<Option<meta::Baseline>>> = baseline.clone();
        std::thread::Builder::new()
            .name("capsaga-epoch".into())
            .spawn(move || {
                while !ticker_stop.load(Ordering::Relaxed) {
                    std::thread::sleep(Duration::from_millis(EPOCH_TICK_MS));
                    ticker_engine.increment_epoch();
                    if let Some(Some(b)) = ticker_baseline.get() {
                        b.engine.increment_epoch();
                    }
                }
            })
            .map_err(|e| SandboxError::Engine(format!("cannot start the epoch ticker: {e}")))?;
        Ok(Sandbox {
            engine,
            linker,
            runner_linker,
            stop_ticker: stop,
            factors: Arc::new(Factors::none()),
            allocator,
            cache,
            slots: tokio::sync::Semaphore::new(config.max_concurrent_calls.max(1) as usize),
            baseline,
        })
    }

    /// Set the capability factors loaded from the operator's policy
    /// (default: no secrets, no `env:` values, default outgoing-HTTP
    /// settings; see [`Factors::none`]).
    pub fn set_factors(&mut self, factors: Arc<Factors>) {
        self.factors = factors;
    }

    /// The capability factors.
    pub fn factors(&self) -> &Factors {
        &self.factors
    }

    /// Which instance allocator the engine uses.
    pub fn allocator(&self) -> Allocator {
        self.allocator
    }

    /// The compiled-component cache, if one is in use.
    pub fn compiled_cache(&self) -> Option<&CompiledCache> {
        self.cache.as_ref()
    }

    /// The engine (shared with the component cache).
    pub fn engine(&self) -> &Engine {
        &self.engine
    }

    /// Compile component bytes (binary only; WAT text is refused) and link them
    /// against the tool world.
    ///
    /// # Errors
    /// [`SandboxError::Component`] for bytes that are not a component, or a
    /// component that imports something the host does not provide or does
    /// not export the tool world.
    pub fn prepare(&self, bytes: &[u8]) -> Result<Prepared, SandboxError> {
        let component = Component::from_binary(&self.engine, bytes)
            .map_err(|e| SandboxError::Component(format!("{e:#}")))?;
        self.prepare_component(&component)
    }

    /// Link an already compiled component.
    ///
    /// # Errors
    /// [`SandboxError::Component`].
    pub fn prepare_component(&self, component: &Component) -> Result<Prepared, SandboxError> {
        let pre = self
            .linker
            .instantiate_pre(component)
            .map_err(|e| SandboxError::Component(format!("{e:#}")))?;
        let pre = ToolPre::new(pre).map_err(|e| SandboxError::Component(format!("{e:#}")))?;
        Ok(Prepared::ready(pre))
    }

    /// Like [`Sandbox::prepare`], through the compiled cache when there is
    /// one: the component is loaded from the cache when a trusted entry for
    /// these bytes and this engine exists, else compiled and stored.
    ///
    /// # Errors
    /// [`SandboxError::Component`].
    pub fn prepare_cached(&self, bytes: &[u8]) -> Result<(Prepared, CacheOutcome), SandboxError> {
        let Some(cache) = &self.cache else {
            return Ok((self.prepare(bytes)?, CacheOutcome::Disabled));
        };
        let hash = capsaga_core::idempotency::sha256_hex(bytes);
        let (component, outcome) = cache.load_or_compile(&self.engine, &hash, || {
            let notice = cache::Notice::start(cache::Work::Compile, &hash, bytes.len());
            let component = Component::from_binary(&self.engine, bytes)
                .map_err(|e| SandboxError::Component(format!("{e:#}")))?;
            notice.end();
            Ok::<_, SandboxError>(component)
        })?;
        Ok((self.prepare_component(&component)?, outcome))
    }

    /// Wait for one of the concurrent-call slots.
    async fn slot(&self) -> Result<tokio::sync::SemaphorePermit<'_>, ToolError> {
        self.slots.acquire().await.map_err(|_| {
            ToolError::with_hint(
                ErrorKind::Unknown,
                "the sandbox is shutting down",
                "Retry later.",
            )
        })
    }

    fn new_store(
        &self,
        tool_label: &str,
        bindings: &Bindings,
        limits: &Limits,
        dry_run: bool,
        sub_model: Option<&Arc<dyn SubModel>>,
    ) -> Result<(Store<CallState>, stdio::CapturePipe), ToolError> {
        self.new_store_in(
            &self.engine,
            tool_label,
            bindings,
            limits,
            dry_run,
            sub_model,
        )
    }

    /// [`Sandbox::new_store`] on `engine` (the baseline engine of `meta`).
    fn new_store_in(
        &self,
        engine: &Engine,
        tool_label: &str,
        bindings: &Bindings,
        limits: &Limits,
        dry_run: bool,
        sub_model: Option<&Arc<dyn SubModel>>,
    ) -> Result<(Store<CallState>, stdio::CapturePipe), ToolError> {
        let bound = self
            .factors
            .bind(bindings, dry_run, limits.deadline_ms)
            .map(|b| b.with_model(tool_label, sub_model.cloned()))
            .map_err(|e| {
                ToolError::with_hint(
                    ErrorKind::PermissionDenied,
                    e.to_string(),
                    "A directory granted to this tool is missing on the host; ask the operator to fix the policy.",
                )
            })?;
        let state = CallState {
            wasi: bound.wasi,
            table: ResourceTable::new(),
            limiter: CallLimiter::new(InstanceCaps::for_memory(limits.memory_bytes)),
            log: LogBuffer::new(
                tool_label,
                usize::try_from(limits.log_bytes).unwrap_or(usize::MAX),
            ),
            http: wasmtime_wasi_http::WasiHttpCtx::new(),
            net: bound.net,
            deadline: bound.llm.deadline,
            llm: bound.llm,
            neuron: neuron::NeuronSlot::default(),
            #[cfg(unix)]
            fs_journal: bound.fs_journal,
        };
        let stdio = bound.stdio;
        let mut store = Store::new(engine, state);
        store.limiter(|s| &mut s.limiter);
        store.set_hostcall_fuel(outcome::transfer_cap_bytes(limits));
        store.set_fuel(limits.fuel).map_err(|e| {
            ToolError::with_hint(
                ErrorKind::Unknown,
                format!("cannot set fuel: {e}"),
                "Retry later.",
            )
        })?;
        // At every tick: past the deadline, trap (Interrupt → `timeout`);
        // otherwise yield to the runtime so other calls get the thread.
        store.set_epoch_deadline(1);
        store.epoch_deadline_callback(|ctx| {
            Ok(if Instant::now() >= ctx.data().deadline {
                UpdateDeadline::Interrupt
            } else {
                UpdateDeadline::Yield(1)
            })
        });
        Ok((store, stdio))
    }

    /// Call one export of a fresh instance with `grants` and `limits`.
    ///
    /// The result is `Ok(Some(output))` for execute/dry-run, `Ok(None)` for
    /// compensate, or a typed [`ToolError`]: the guest's own error, or one the
    /// host made from a trap (`unknown`), the deadline (`timeout`), the memory,
    /// fuel or output cap (`quota-exceeded`), or a malformed return
    /// (`unknown`). Diagnostics (logs, captured stdio, wall time, fuel) are
    /// returned in every case.
    pub async fn call(&self, req: CallRequest<'_>) -> (CallResult, CallDiagnostics) {
        self.call_with_model(req, None).await
    }

    /// [`Sandbox::call`], lending the call's `llm` import the model of the
    /// entry point that submitted it (the agent turn's provider and budget:
    /// see `factors::llm`). Without one, an `ask` is `unsupported`.
    pub async fn call_with_model(
        &self,
        req: CallRequest<'_>,
        sub_model: Option<&Arc<dyn SubModel>>,
    ) -> (CallResult, CallDiagnostics) {
        let CallRequest {
            tool: tool_label,
            prepared,
            bindings,
            limits,
            ctx,
            args_json,
            op,
        } = req;
        let compiled;
        let prepared = if prepared.pre().is_some() {
            prepared
        } else {
            match self.compile_deferred(prepared) {
                Ok(p) => {
                    compiled = p;
                    &compiled
                }
                Err(e) => {
                    let e = ToolError::with_hint(
                        ErrorKind::Unknown,
                        format!("{tool_label}: the component could not be compiled: {e}"),
                        "The tool is broken on this host; use another tool or tell the operator.",
                    );
                    return (Err(e), CallDiagnostics::default());
                }
            }
        };
        let started = Instant::now();
        self.neuron_bytecode(tool_label, prepared).await;
        let _slot = match self.slot().await {
            Ok(s) => s,
            Err(e) => return (Err(e), CallDiagnostics::default()),
        };
        let dry_run = matches!(op, Op::DryRun) || ctx.dry_run;
        let (mut store, stdio) =
            match self.new_store(tool_label, bindings, limits, dry_run, sub_model) {
                Ok(s) => s,
                Err(e) => return (Err(e), CallDiagnostics::default()),
            };
        store.data_mut().neuron = neuron::NeuronSlot(prepared.neuron.clone());
        let wit_ctx = WitCallContext {
            saga_id: ctx.saga_id.clone(),
            step_seq: ctx.step_seq,
            idempotency_key: ctx.idempotency_key.clone(),
            deadline_ms: ctx.deadline_ms,
            dry_run: ctx.dry_run,
        };
        let res = tokio::time::timeout(
            Duration::from_millis(limits.deadline_ms + HOST_GRACE_MS),
            run_export(&mut store, prepared, &wit_ctx, args_json, op),
        )
        .await;
        let captured = stdio.contents();
        let interrupted = !matches!(res, Ok(Ok(Ok(None) | Err(_))));
        let result = match res {
            Ok(Ok(Ok(Some(out)))) => outcome::output_from_wit(tool_label, out, limits).map(Some),
            Ok(Ok(Ok(None))) => Ok(None),
            Ok(Ok(Err(guest_err))) => Err(outcome::error_from_wit(guest_err)),
            Ok(Err(trap)) => Err(outcome::trap_to_error(
                tool_label,
                op.name(),
                &trap,
                store.data().limiter.hit.as_deref(),
                &captured,
                limits,
            )),
            Err(_) => Err(outcome::deadline_error(tool_label, op.name(), limits)),
        };
        let (result, mut diags) = diagnose(store, result, captured, started, limits);
        diags.interrupted = interrupted && result.is_err();
        (result, diags)
    }
}

/// The linker of every tool: WASI preview 2 (with the host's own
/// `open-at` and, for journaled calls, its own path-changing functions),
/// `wasi:http` and the tool world's `log` import.
fn tool_linker(engine: &Engine) -> Result<Linker<CallState>, SandboxError> {
    let mut linker: Linker<CallState> = Linker::new(engine);
    wasmtime_wasi::p2::add_to_linker_async(&mut linker)
        .map_err(|e| SandboxError::Engine(e.to_string()))?;
    #[cfg(unix)]
    factors::fs::open_at::shadow_open_at(&mut linker)
        .and_then(|()| factors::fs::journal::shadow(&mut linker))
        .map_err(|e| SandboxError::Engine(e.to_string()))?;
    wasmtime_wasi_http::p2::add_only_http_to_linker_async(&mut linker)
        .map_err(|e| SandboxError::Engine(e.to_string()))?;
    // Each import of the tool world on its own context, with its own
    // accessor (`types` has no functions).
    bindings::capsaga::tool::types::add_to_linker::<_, HasSelf<_>>(&mut linker, |s| s)
        .and_then(|()| log::add_to_linker(&mut linker))
        .and_then(|()| factors::llm::add_to_linker(&mut linker))
        .map_err(|e| SandboxError::Engine(e.to_string()))?;
    Ok(linker)
}

/// What one export returned: the output (`None` for compensate) or the
/// guest's own error; a trap is the outer error.
type ExportResult =
    wasmtime::Result<Result<Option<bindings::WitToolOutput>, bindings::WitToolError>>;

/// Instantiate `prepared` in `store` and call `op`'s export.
async fn run_export(
    store: &mut Store<CallState>,
    prepared: &Prepared,
    wit_ctx: &WitCallContext,
    args_json: &str,
    op: &Op,
) -> ExportResult {
    let Some(pre) = prepared.pre() else {
        return Err(wasmtime::Error::msg("the component is not compiled yet"));
    };
    let inst: Tool = pre
        .instantiate_async(&mut *store)
        .await
        .map_err(|e| e.context(outcome::Instantiating))?;
    Ok(match op {
        Op::Execute => inst
            .call_execute(&mut *store, wit_ctx, args_json)
            .await?
            .map(Some),
        Op::DryRun => inst
            .call_dry_run(&mut *store, wit_ctx, args_json)
            .await?
            .map(Some),
        Op::Compensate(output) => {
            let wit_out = outcome::output_to_wit(output);
            inst.call_compensate(&mut *store, wit_ctx, args_json, &wit_out)
                .await?
                .map(|()| None)
        }
    })
}

/// The call's diagnostics from its store (logs, fuel, network records), and
/// its result with the host's reasons for refused requests added.
fn diagnose(
    mut store: Store<CallState>,
    mut result: CallResult,
    captured: String,
    started: Instant,
    limits: &Limits,
) -> (CallResult, CallDiagnostics) {
    let fuel_left = store.get_fuel().unwrap_or(0);
    let data = store.data_mut();
    let net = data.net.records();
    if let Err(e) = &mut result {
        net::annotate_error(e, &net);
    }
    let diags = CallDiagnostics {
        logs: std::mem::take(&mut data.log.records),
        logs_dropped: data.log.dropped,
        stdio: captured,
        wall_ms: started.elapsed().as_millis() as u64,
        fuel_used: limits.fuel.saturating_sub(fuel_left),
        net,
        interrupted: false,
    };
    (result, diags)
}
