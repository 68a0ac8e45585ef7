//! [`Prepared`]: a component ready to instantiate, or one whose compilation
//! is deferred to its first call (its meta came from the compiled cache, so
//! loading it did not need its code: `registry`).

use super::bindings::ToolPre;
use super::neuron::NeuronSource;
use super::state::CallState;
use super::{Sandbox, SandboxError};
use std::sync::{Arc, OnceLock};

/// A component compiled and pre-linked for instantiation, or its bytes,
/// compiled (through the compiled cache) by the first call that needs it.
#[derive(Clone)]
pub struct Prepared {
    slot: Slot,
    /// For a neuron: the definition the runner's `neuron-host` import
    /// answers in each call (see [`super::neuron`]).
    pub(super) neuron: Option<Arc<NeuronSource>>,
}

#[derive(Clone)]
enum Slot {
    Ready(ToolPre<CallState>),
    Deferred(Arc<Deferred>),
}

/// Bytes to compile once, and what compiling them gave.
struct Deferred {
    bytes: Vec<u8>,
    done: OnceLock<Result<ToolPre<CallState>, String>>,
}

impl Prepared {
    pub(super) fn ready(pre: ToolPre<CallState>) -> Prepared {
        Prepared {
            slot: Slot::Ready(pre),
            neuron: None,
        }
    }

    /// The same component, running the neuron `n`.
    pub(super) fn with_neuron(&self, n: Arc<NeuronSource>) -> Prepared {
        Prepared {
            slot: self.slot.clone(),
            neuron: Some(n),
        }
    }

    /// The pre-linked component, when it is compiled.
    pub(super) fn pre(&self) -> Option<&ToolPre<CallState>> {
        match &self.slot {
            Slot::Ready(p) => Some(p),
            Slot::Deferred(d) => d.done.get().and_then(|r| r.as_ref().ok()),
        }
    }

    /// Whether its compilation is deferred and has not happened yet.
    pub fn is_deferred(&self) -> bool {
        matches!(&self.slot, Slot::Deferred(d) if d.done.get().is_none())
    }

    /// For a neuron: what its calls run (definition and bytecode).
    pub fn neuron(&self) -> Option<&NeuronSource> {
        self.neuron.as_deref()
    }
}

impl Sandbox {
    /// A component whose compilation waits for its first call (see
    /// [`Sandbox::compile_deferred`]); `bytes` are not checked here.
    pub fn prepare_deferred(&self, bytes: Vec<u8>) -> Prepared {
        Prepared {
            slot: Slot::Deferred(Arc::new(Deferred {
                bytes,
                done: OnceLock::new(),
            })),
            neuron: None,
        }
    }

    /// `prepared`, compiled: through the compiled cache (one process at a
    /// time compiles an entry), once per [`Prepared`] and its clones (a
    /// failure is kept too). Blocks the thread while it compiles (on a
    /// multi-threaded runtime, the runtime is told).
    ///
    /// # Errors
    /// [`SandboxError::Component`] when the bytes do not compile or link.
    pub fn compile_deferred(&self, prepared: &Prepared) -> Result<Prepared, SandboxError> {
        let Slot::Deferred(d) = &prepared.slot else {
            return Ok(prepared.clone());
        };
        let compile = || {
            self.prepare_cached(&d.bytes)
                .map(|(p, _)| p)
                .and_then(|p| match p.slot {
                    Slot::Ready(pre) => Ok(pre),
                    Slot::Deferred(_) => Err(SandboxError::Component("not compiled".into())),
                })
                .map_err(|e| e.to_string())
        };
        let multi = tokio::runtime::Handle::try_current()
            .is_ok_and(|h| h.runtime_flavor() == tokio::runtime::RuntimeFlavor::MultiThread);
        let done = if multi {
            tokio::task::block_in_place(|| d.done.get_or_init(compile))
        } else {
            d.done.get_or_init(compile)
        };
        match done {
            Ok(pre) => Ok(Prepared {
                slot: Slot::Ready(pre.clone()),
                neuron: prepared.neuron.clone(),
            }),
            Err(e) => Err(SandboxError::Component(e.clone())),
        }
    }
}
