//! The Wasmtime engine configuration: epoch interruption and fuel on, the
//! component model, a bounded wasm stack, and the pooling instance allocator
//! sized for the per-call caps, with a fallback to on-demand allocation when
//! the pool's address space cannot be reserved (DESIGN §4).

use super::SandboxError;
use super::state::InstanceCaps;
use capsaga_core::policy::Limits;
use capsaga_core::policy::MetaCompiler;
use std::path::PathBuf;
use wasmtime::{Config, Enabled, Engine, InstanceAllocationStrategy, PoolingAllocationConfig};

/// Largest wasm call stack of a guest, bytes. Deeper recursion traps with a
/// stack overflow (reported as `quota-exceeded`).
pub const MAX_WASM_STACK_BYTES: usize = 512 * 1024;

/// Host stack of one call's fiber, bytes (must exceed
/// [`MAX_WASM_STACK_BYTES`] plus what host functions need).
const ASYNC_STACK_BYTES: usize = 2 * 1024 * 1024;

/// Bytes of a linear memory that the pool resets with `memset` instead of
/// returning them to the kernel when an instance ends, when the kernel
/// lacks `PAGEMAP_SCAN` (Linux < 6.7): the first bytes are reset whether the
/// guest touched them or not, and a Rust guest touches about this much
/// (stack and first heap pages) on every call.
const MEMORY_KEEP_RESIDENT_BYTES: usize = 1024 * 1024;

/// The same with `PAGEMAP_SCAN`: only the pages a guest dirtied are reset
/// (copied back from the memory image), up to this many bytes, and they
/// stay mapped for the next instance. The neuron runner (CPython) dirties a
/// few MiB of its heap per call; returning them to the kernel and faulting
/// them in again (copy-on-write from the image) was most of a neuron call
/// (`capsaga-bench neurons`).
const MEMORY_KEEP_RESIDENT_SCAN_BYTES: usize = 64 * 1024 * 1024;

/// How much of a linear memory stays resident between instances on this
/// host (see [`MEMORY_KEEP_RESIDENT_SCAN_BYTES`]).
pub fn memory_keep_resident() -> usize {
    if PoolingAllocationConfig::is_pagemap_scan_available() {
        MEMORY_KEEP_RESIDENT_SCAN_BYTES
    } else {
        MEMORY_KEEP_RESIDENT_BYTES
    }
}

/// How much of a table stays resident between instances on this host.
fn table_keep_resident() -> usize {
    if PoolingAllocationConfig::is_pagemap_scan_available() {
        TABLE_KEEP_RESIDENT_SCAN_BYTES
    } else {
        TABLE_KEEP_RESIDENT_BYTES
    }
}

/// Table bytes reset with `memset` on reuse (see [`MEMORY_KEEP_RESIDENT_BYTES`]).
const TABLE_KEEP_RESIDENT_BYTES: usize = 64 * 1024;

/// The same with `PAGEMAP_SCAN` (only dirtied pages reset): the runner's
/// funcref tables hold tens of thousands of entries, filled on every
/// instantiation.
const TABLE_KEEP_RESIDENT_SCAN_BYTES: usize = 1024 * 1024;

/// How the sandbox is set up.
#[derive(Debug, Clone)]
pub struct SandboxConfig {
    /// Largest memory cap of any call, bytes (the pool's memory slots are
    /// sized for it). Default: [`Limits::DEFAULT`]'s.
    pub max_memory_bytes: u64,
    /// Calls (any export, `meta` included) that may run at once; more wait
    /// for a free slot. The pool holds this many instances. Default 16: on
    /// a 2-core machine more would only queue inside the CPU.
    pub max_concurrent_calls: u32,
    /// Use the pooling allocator (falls back to on-demand allocation, with a
    /// warning, when the pool cannot be reserved). Default true.
    pub pooling: bool,
    /// Directory of the compiled-component cache (see
    /// [`super::cache::CompiledCache`]); `None` compiles every time.
    pub compiled_cache: Option<PathBuf>,
    /// What compiles a component to read its meta when the cache has none
    /// (`sandbox::meta`). Default Winch.
    pub meta_compiler: MetaCompiler,
}

impl Default for SandboxConfig {
    fn default() -> Self {
        SandboxConfig {
            max_memory_bytes: Limits::DEFAULT.memory_bytes,
            max_concurrent_calls: 16,
            pooling: true,
            compiled_cache: None,
            meta_compiler: MetaCompiler::Winch,
        }
    }
}

/// Which instance allocator the engine ended up with.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Allocator {
    /// Pre-reserved slots for instances, memories, tables and stacks.
    Pooling,
    /// Each instance allocated by mmap on demand (pooling off, or its
    /// reservation failed).
    OnDemand,
}

pub(super) fn base_config() -> Config {
    let mut config = Config::new();
    config.epoch_interruption(true);
    config.consume_fuel(true);
    config.wasm_component_model(true);
    config.max_wasm_stack(MAX_WASM_STACK_BYTES);
    config.async_stack_size(ASYNC_STACK_BYTES);
    // No component-model-async (WASI 0.3) runtime state in every store: the
    // tool world and WASI 0.2 do not use it, and it doubles the cost of a
    // fresh instance per call (measured by `capsaga-bench`).
    config.concurrency_support(false);
    config
}

/// The pool for `cfg`: every concurrent call can have the most core
/// instances, memories and tables [`InstanceCaps`] allow, so a call admitted
/// by the concurrency limit never finds the pool empty.
pub fn pooling_config(cfg: &SandboxConfig) -> PoolingAllocationConfig {
    let caps = InstanceCaps::for_memory(cfg.max_memory_bytes);
    let calls = cfg.max_concurrent_calls.max(1);
    let per = |n: usize| u32::try_from(n).unwrap_or(u32::MAX);
    let mut pool = PoolingAllocationConfig::new();
    pool.total_component_instances(calls)
        .total_core_instances(calls.saturating_mul(per(caps.instances)))
        .max_core_instances_per_component(per(caps.instances))
        .total_memories(calls.saturating_mul(per(caps.memories)))
        .max_memories_per_component(per(caps.memories))
        .max_memories_per_module(per(caps.memories))
        .total_tables(calls.saturating_mul(per(caps.tables)))
        .max_tables_per_component(per(caps.tables))
        .max_tables_per_module(per(caps.tables))
        .table_elements(caps.table_elements)
        .max_memory_size(usize::try_from(cfg.max_memory_bytes).unwrap_or(usize::MAX))
        .total_stacks(calls)
        .total_gc_heaps(calls)
        .linear_memory_keep_resident(memory_keep_resident())
        .table_keep_resident(table_keep_resident())
        .pagemap_scan(Enabled::Auto);
    pool
}

/// Build the engine for `cfg`.
///
/// # Errors
/// [`SandboxError::Engine`] when even the on-demand engine cannot be built.
pub fn build(cfg: &SandboxConfig) -> Result<(Engine, Allocator), SandboxError> {
    if cfg.pooling {
        let mut config = base_config();
        config.allocation_strategy(InstanceAllocationStrategy::Pooling(pooling_config(cfg)));
        match Engine::new(&config) {
            Ok(engine) => return Ok((engine, Allocator::Pooling)),
            Err(e) => tracing::warn!(
                "cannot reserve the pooling allocator ({} instances): {e:#}; \
                 falling back to on-demand instance allocation (slower instantiation)",
                cfg.max_concurrent_calls
            ),
        }
    }
    let engine = Engine::new(&base_config()).map_err(|e| SandboxError::Engine(format!("{e:#}")))?;
    Ok((engine, Allocator::OnDemand))
}
