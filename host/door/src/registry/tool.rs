//! [`LoadedTool`]: a tool the registry knows, whatever runs it, and
//! [`ToolSource`]: what runs it.

use super::builtin::BuiltinTool;
use crate::sandbox::{Bindings, CacheOutcome, Prepared};
use capsaga_core::capability::Capability;
use capsaga_core::grant::GrantError;
use capsaga_core::meta::ToolMeta;
use capsaga_core::policy::{Limits, Policy, ToolPolicy};
use capsaga_core::validate::ArgsValidator;
use std::path::PathBuf;
use std::sync::Arc;

/// How a tool runs. The dispatch door's resolve stage hands it to its
/// execute stage, the only one that looks inside; every other stage sees a
/// [`LoadedTool`]'s meta, identity, grants and limits, whatever the source.
/// A new way to run tools (agent-written neurons: one shared runner
/// component given each neuron's source) is a new variant here and a new
/// arm in `dispatch::execute`.
#[derive(Clone)]
pub enum ToolSource {
    /// A WebAssembly component, compiled and linked: a fresh instance per
    /// call, confined by its bindings.
    Component(Prepared),
    /// A tool the host implements itself (no sandbox: it must only act
    /// through the host's own checked interfaces).
    Builtin(Arc<dyn BuiltinTool>),
    /// An agent-written neuron: the shared runner component with the
    /// neuron's definition attached (`sandbox::neuron`); it runs exactly like
    /// a component, in a fresh instance confined by its bindings.
    Neuron(Prepared),
}

impl std::fmt::Debug for ToolSource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            ToolSource::Component(_) => "Component",
            ToolSource::Builtin(_) => "Builtin",
            ToolSource::Neuron(_) => "Neuron",
        })
    }
}

/// A loaded tool.
pub struct LoadedTool {
    /// Its checked meta.
    pub meta: ToolMeta,
    /// Its identity hash, lowercase hex: pinned by every WAL BEGIN and every
    /// approval, so compensation and a claimed approval run exactly this
    /// tool. For a component, SHA-256 of its bytes.
    pub hash: String,
    /// Where it was loaded from (a file, or `builtin:<name>`).
    pub path: PathBuf,
    /// What runs it.
    pub source: ToolSource,
    /// Its args validator.
    pub validator: ArgsValidator,
    /// Effective grants, or why the tool is not callable.
    pub grants: Result<Vec<Capability>, GrantError>,
    /// What its effective grants bind in each call (the factors' phase 2),
    /// and what the dry-run grants bind (write access stripped).
    pub bindings: ToolBindings,
    /// Limits of its calls.
    pub limits: Limits,
    /// Whether it was compiled at load or loaded from the compiled cache.
    pub compiled: CacheOutcome,
    /// A policy section the host made for this tool instead of the
    /// operator's `[tools.<name>]`: for a neuron, the operator's approval
    /// (its grants) under the default limits; for `neuron_create`, the
    /// `[neurons]` section. `None` for every other tool.
    pub own_policy: Option<ToolPolicy>,
}

impl std::fmt::Debug for LoadedTool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LoadedTool")
            .field("name", &self.meta.name)
            .field("hash", &self.hash)
            .field("path", &self.path)
            .field("source", &self.source)
            .finish_non_exhaustive()
    }
}

/// A tool's bindings for execute and for dry-run.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ToolBindings {
    /// `execute` (and `compensate` of a step run with the same grants).
    pub execute: Bindings,
    /// `dry-run`: read-only preopens, HTTP limited to GET/HEAD.
    pub dry_run: Bindings,
}

impl LoadedTool {
    /// The effective grants as strings (for the WAL).
    pub fn grant_strings(&self) -> Vec<String> {
        match &self.grants {
            Ok(g) => g.iter().map(ToString::to_string).collect(),
            Err(_) => Vec::new(),
        }
    }

    /// The prepared component, for a component tool.
    pub fn component(&self) -> Option<&Prepared> {
        match &self.source {
            ToolSource::Component(p) => Some(p),
            ToolSource::Builtin(_) | ToolSource::Neuron(_) => None,
        }
    }

    /// The policy section the door decides this tool's calls under: its
    /// own (see [`LoadedTool::own_policy`]) or the operator's.
    pub fn section<'a>(&'a self, policy: &'a Policy) -> Option<&'a ToolPolicy> {
        self.own_policy
            .as_ref()
            .or_else(|| policy.section(&self.meta.name))
    }
}
