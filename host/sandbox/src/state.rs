//! Per-call store data: the WASI context built from the grants, the
//! `wasi:http` context with the net guard's hooks, the resource limiter, the
//! wall-clock deadline, and the slot of each host import (the capped log
//! buffer behind `log`, the `llm` slot, the neuron of `neuron-host`), each
//! reached through its own accessor.

use super::bindings::capsaga;
use super::factors::llm::{LlmSlot, LlmView};
use super::log::{LogBuffer, LogView};
use super::neuron::{NeuronSlot, NeuronView};
use std::time::Instant;
use wasmtime::ResourceLimiter;
use wasmtime::component::ResourceTable;
use wasmtime_wasi::{WasiCtx, WasiCtxView, WasiView};
use wasmtime_wasi_http::{WasiHttpCtx, WasiHttpCtxView, WasiHttpView};

/// Caps enforced by [`CallLimiter`], per call.
#[derive(Debug, Clone, Copy)]
pub struct InstanceCaps {
    /// Sum of all linear memories, bytes.
    pub memory_bytes: u64,
    /// Elements per table.
    pub table_elements: usize,
    /// Core instances per component instance.
    pub instances: usize,
    /// Tables per component instance.
    pub tables: usize,
    /// Linear memories per component instance.
    pub memories: usize,
}

impl InstanceCaps {
    /// Caps for a call with `memory_bytes` of memory. The instance, table and
    /// memory counts leave room for what wasm-component-ld and the WASI
    /// adapter produce (a handful of each).
    pub fn for_memory(memory_bytes: u64) -> Self {
        InstanceCaps {
            memory_bytes,
            table_elements: 100_000,
            instances: 32,
            tables: 32,
            memories: 8,
        }
    }
}

/// A [`ResourceLimiter`] that caps the *sum* of all linear memories of the
/// instance (a component holds several core instances, each may have its
/// own memory), and records whether a cap was hit so that the resulting trap
/// can be reported as `quota-exceeded`.
#[derive(Debug)]
pub struct CallLimiter {
    caps: InstanceCaps,
    used_bytes: u64,
    /// Set when a memory or table growth was refused.
    pub hit: Option<String>,
}

impl CallLimiter {
    /// A limiter with nothing allocated yet.
    pub fn new(caps: InstanceCaps) -> Self {
        CallLimiter {
            caps,
            used_bytes: 0,
            hit: None,
        }
    }
}

impl ResourceLimiter for CallLimiter {
    fn memory_growing(
        &mut self,
        current: usize,
        desired: usize,
        _maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        let delta = desired.saturating_sub(current) as u64;
        let next = self.used_bytes.saturating_add(delta);
        if next > self.caps.memory_bytes {
            self.hit = Some(format!(
                "memory cap of {} bytes reached (asked for {} more)",
                self.caps.memory_bytes, delta
            ));
            return Ok(false);
        }
        self.used_bytes = next;
        Ok(true)
    }

    fn table_growing(
        &mut self,
        _current: usize,
        desired: usize,
        _maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        if desired > self.caps.table_elements {
            self.hit = Some(format!(
                "table cap of {} elements reached",
                self.caps.table_elements
            ));
            return Ok(false);
        }
        Ok(true)
    }

    fn instances(&self) -> usize {
        self.caps.instances
    }
    fn tables(&self) -> usize {
        self.caps.tables
    }
    fn memories(&self) -> usize {
        self.caps.memories
    }
}

/// The data of one call's `Store`.
pub struct CallState {
    pub(crate) wasi: WasiCtx,
    pub(crate) table: ResourceTable,
    pub(crate) limiter: CallLimiter,
    pub(crate) log: LogBuffer,
    pub(crate) http: WasiHttpCtx,
    pub(crate) net: super::factors::net::NetHooks,
    /// What the `llm` import may ask in this call (`factors::llm`).
    pub(crate) llm: LlmSlot,
    /// When the call's wall-clock deadline passes (checked at every epoch
    /// tick, see `Sandbox`'s epoch callback).
    pub(crate) deadline: Instant,
    /// The neuron a runner instance runs in this call (`neuron-host`).
    pub(crate) neuron: NeuronSlot,
    /// The journal of the call's files (issue 28), if they are journaled.
    #[cfg(unix)]
    pub(crate) fs_journal: Option<super::factors::fs::journal::CallJournal>,
}

#[cfg(unix)]
impl super::factors::fs::journal::JournalView for CallState {
    fn fs_journal(&self) -> Option<super::factors::fs::journal::CallJournal> {
        self.fs_journal.clone()
    }
}

impl WasiHttpView for CallState {
    fn http(&mut self) -> WasiHttpCtxView<'_> {
        WasiHttpCtxView {
            ctx: &mut self.http,
            table: &mut self.table,
            hooks: &mut self.net,
        }
    }
}

impl WasiView for CallState {
    fn ctx(&mut self) -> WasiCtxView<'_> {
        WasiCtxView {
            ctx: &mut self.wasi,
            table: &mut self.table,
        }
    }
}

impl LogView for CallState {
    fn log(&mut self) -> &mut LogBuffer {
        &mut self.log
    }
}

impl LlmView for CallState {
    fn llm(&mut self) -> &mut LlmSlot {
        &mut self.llm
    }
}

impl NeuronView for CallState {
    fn neuron(&mut self) -> &mut NeuronSlot {
        &mut self.neuron
    }
}

/// The tool world's `types` interface has no functions: nothing to hold.
impl capsaga::tool::types::Host for CallState {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn limiter_caps_the_sum_of_memories() {
        let mut l = CallLimiter::new(InstanceCaps::for_memory(100));
        assert!(l.memory_growing(0, 60, None).unwrap());
        // A second memory: 60 + 50 > 100.
        assert!(!l.memory_growing(0, 50, None).unwrap());
        assert!(l.hit.is_some());
        assert!(l.memory_growing(0, 40, None).unwrap());
    }
}
