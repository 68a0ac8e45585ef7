//! The per-call paths of `capsaga-bench` other than capsaga itself: the bare
//! Wasmtime floors (synchronous, asynchronous, with fuel and epochs), the
//! same call through `Sandbox::call`, the native Rust function and a process
//! spawn, each measured by `super::bench`.

use capsaga_core::policy::Limits;
use capsaga_core::tool::CallContext;
use capsaga_sandbox::bindings::{LogLevel, Tool, ToolPre, WitCallContext, capsaga};
use capsaga_sandbox::{Bindings, CallRequest, Op, Prepared, Sandbox, SandboxConfig, engine};
use wasmtime::component::{Component, HasSelf, Linker, ResourceTable};
use wasmtime::{Config, Engine, InstanceAllocationStrategy, Store};
use wasmtime_wasi::{WasiCtx, WasiCtxView, WasiView};

/// Synchronous bindings of the tool world, for the synchronous floor only.
mod sync_bindings {
    wasmtime::component::bindgen!({
        path: "../../wit",
        world: "tool",
    });
}

/// Store data of the floors: an empty WASI context, nothing else.
pub(super) struct FloorState {
    wasi: WasiCtx,
    table: ResourceTable,
}

impl FloorState {
    pub(super) fn new() -> Self {
        FloorState {
            wasi: WasiCtx::builder().build(),
            table: ResourceTable::new(),
        }
    }
}

impl WasiView for FloorState {
    fn ctx(&mut self) -> WasiCtxView<'_> {
        WasiCtxView {
            ctx: &mut self.wasi,
            table: &mut self.table,
        }
    }
}

impl capsaga::tool::log::Host for FloorState {
    fn log(&mut self, _level: LogLevel, _message: String) {}
}
impl capsaga::tool::types::Host for FloorState {}
/// The floors grant nothing: a sub-question is refused, as without an
/// `llm:` grant.
impl capsaga::tool::llm::Host for FloorState {
    async fn ask(
        &mut self,
        _request: capsaga::tool::llm::LlmRequest,
    ) -> Result<capsaga::tool::llm::LlmAnswer, capsaga::tool::types::ToolError> {
        Err(capsaga::tool::types::ToolError {
            kind: capsaga::tool::types::ErrorKind::PermissionDenied,
            message: "the benchmark floor grants no `llm:` tier".into(),
            llm_hint: "Answer without asking the model.".into(),
            details: None,
            retriable: false,
        })
    }
}
impl sync_bindings::capsaga::tool::log::Host for FloorState {
    fn log(&mut self, _level: sync_bindings::capsaga::tool::log::Level, _message: String) {}
}
impl sync_bindings::capsaga::tool::types::Host for FloorState {}

/// An engine with the pooling allocator sized like capsaga's, and fuel and
/// epoch interruption as asked.
pub(super) fn floor_engine(instrumented: bool) -> Result<Engine, String> {
    let mut config = Config::new();
    config.wasm_component_model(true);
    config.consume_fuel(instrumented);
    config.epoch_interruption(instrumented);
    config.max_wasm_stack(engine::MAX_WASM_STACK_BYTES);
    // As in capsaga's engine: no WASI 0.3 concurrency state per store.
    config.concurrency_support(false);
    config.allocation_strategy(InstanceAllocationStrategy::Pooling(engine::pooling_config(
        &SandboxConfig::default(),
    )));
    Engine::new(&config).map_err(|e| format!("floor engine: {e:#}"))
}

pub(super) fn wit_ctx() -> WitCallContext {
    WitCallContext {
        saga_id: "bench".into(),
        step_seq: 0,
        idempotency_key: "bench".into(),
        deadline_ms: u64::MAX,
        dry_run: false,
    }
}

/// The synchronous bare-Wasmtime floor, ready to call.
pub(super) struct SyncFloor {
    engine: Engine,
    pre: sync_bindings::ToolPre<FloorState>,
    ctx: sync_bindings::capsaga::tool::types::CallContext,
}

impl SyncFloor {
    pub(super) fn new(bytes: &[u8]) -> Result<Self, String> {
        let engine = floor_engine(false)?;
        let component = Component::from_binary(&engine, bytes).map_err(|e| format!("{e:#}"))?;
        let mut linker: Linker<FloorState> = Linker::new(&engine);
        wasmtime_wasi::p2::add_to_linker_sync(&mut linker).map_err(|e| format!("{e:#}"))?;
        sync_bindings::Tool::add_to_linker::<_, HasSelf<_>>(&mut linker, |s| s)
            .map_err(|e| format!("{e:#}"))?;
        let pre = sync_bindings::ToolPre::new(
            linker
                .instantiate_pre(&component)
                .map_err(|e| format!("{e:#}"))?,
        )
        .map_err(|e| format!("{e:#}"))?;
        let ctx = sync_bindings::capsaga::tool::types::CallContext {
            saga_id: "bench".into(),
            step_seq: 0,
            idempotency_key: "bench".into(),
            deadline_ms: u64::MAX,
            dry_run: false,
        };
        Ok(SyncFloor { engine, pre, ctx })
    }

    pub(super) fn call(&self, args: &str) -> Result<(), String> {
        let mut store = Store::new(&self.engine, FloorState::new());
        let r = self
            .pre
            .instantiate(&mut store)
            .and_then(|tool| tool.call_execute(&mut store, &self.ctx, args));
        match r {
            Ok(Ok(_)) => Ok(()),
            Ok(Err(e)) => Err(format!("the tool failed: {}", e.message)),
            Err(e) => Err(format!("{e:#}")),
        }
    }
}

/// The asynchronous bare-Wasmtime floor, with or without fuel and epoch
/// interruption, ready to call.
pub(super) struct AsyncFloor {
    engine: Engine,
    pre: ToolPre<FloorState>,
    ctx: WitCallContext,
    instrumented: bool,
}

impl AsyncFloor {
    pub(super) fn new(bytes: &[u8], instrumented: bool) -> Result<Self, String> {
        let engine = floor_engine(instrumented)?;
        let component = Component::from_binary(&engine, bytes).map_err(|e| format!("{e:#}"))?;
        let mut linker: Linker<FloorState> = Linker::new(&engine);
        wasmtime_wasi::p2::add_to_linker_async(&mut linker).map_err(|e| format!("{e:#}"))?;
        Tool::add_to_linker::<_, HasSelf<_>>(&mut linker, |s| s).map_err(|e| format!("{e:#}"))?;
        let pre = ToolPre::new(
            linker
                .instantiate_pre(&component)
                .map_err(|e| format!("{e:#}"))?,
        )
        .map_err(|e| format!("{e:#}"))?;
        Ok(AsyncFloor {
            engine,
            pre,
            ctx: wit_ctx(),
            instrumented,
        })
    }

    pub(super) async fn call(&self, args: &str) -> Result<(), String> {
        let mut store = Store::new(&self.engine, FloorState::new());
        if self.instrumented {
            store
                .set_fuel(Limits::DEFAULT.fuel)
                .map_err(|e| format!("{e:#}"))?;
            store.set_epoch_deadline(u64::MAX / 2);
        }
        let tool = self
            .pre
            .instantiate_async(&mut store)
            .await
            .map_err(|e| format!("{e:#}"))?;
        match tool.call_execute(&mut store, &self.ctx, args).await {
            Ok(Ok(_)) => Ok(()),
            Ok(Err(e)) => Err(format!("the tool failed: {}", e.message)),
            Err(e) => Err(format!("{e:#}")),
        }
    }
}

/// A trivial call through capsaga's sandbox, ready to call.
pub(super) struct ThroughCapsaga {
    pub(super) sandbox: Sandbox,
    prepared: Prepared,
    limits: Limits,
    ctx: CallContext,
}

impl ThroughCapsaga {
    pub(super) fn new(bytes: &[u8]) -> Result<Self, String> {
        let sandbox = Sandbox::with_config(&SandboxConfig::default()).map_err(|e| e.to_string())?;
        let prepared = sandbox.prepare(bytes).map_err(|e| e.to_string())?;
        Ok(ThroughCapsaga {
            sandbox,
            prepared,
            limits: Limits::DEFAULT,
            ctx: CallContext {
                saga_id: "bench".into(),
                step_seq: 0,
                idempotency_key: "bench".into(),
                deadline_ms: u64::MAX,
                dry_run: false,
            },
        })
    }

    pub(super) async fn call(&self, args: &str) -> Result<(), String> {
        let (res, _diag) = self
            .sandbox
            .call(CallRequest {
                tool: "bench",
                prepared: &self.prepared,
                bindings: &Bindings::default(),
                limits: &self.limits,
                ctx: &self.ctx,
                args_json: args,
                op: &Op::Execute,
            })
            .await;
        res.map(|_| ()).map_err(|e| e.to_string())
    }
}

/// The same work as `time_now` in native Rust: read the clock, format
/// RFC 3339, serialize the JSON output.
pub(super) fn native_time_now() -> String {
    let now = jiff::Timestamp::now();
    let unix_ms = now.as_millisecond();
    serde_json::json!({ "unix_ms": unix_ms, "rfc3339": now.to_string() }).to_string()
}

pub(super) fn spawn_true() -> Result<(), String> {
    let status = std::process::Command::new("/bin/true")
        .status()
        .map_err(|e| format!("cannot spawn /bin/true: {e}"))?;
    if status.success() {
        Ok(())
    } else {
        Err(format!("/bin/true exited with {status}"))
    }
}
