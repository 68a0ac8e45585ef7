//! Stage 1, resolve: the tool of a call, whatever runs it (a component
//! today; a neuron or a host built-in are other [`ToolSource`]s), and the
//! tool a logged step pinned by its identity hash (for compensation).

use super::{Dispatcher, Refusal, Rejection};
use crate::host::Host;
use crate::registry::{LoadError, LoadedTool, ToolSource};
use capsaga_core::error::{ErrorKind, ToolError};
use capsaga_core::policy::{Autonomy, offered};
use capsaga_core::validate::unknown_tool;
use std::sync::Arc;

impl Dispatcher {
    /// The tools a caller at autonomy `requested` (narrowed by the
    /// operator's) is offered, by name: callable (grants satisfied) and not
    /// always denied by the policy. A tool offered only with a human's
    /// approval is listed; at `read_only` no tool with side effects is.
    /// Neurons are listed within `[neurons] catalog_tokens`.
    pub fn catalog(&self, requested: Autonomy) -> Vec<Arc<LoadedTool>> {
        let policy = &self.host.config.policy;
        let tools = self
            .host
            .registry
            .tools()
            .into_iter()
            .filter(|t| t.grants.is_ok())
            .filter(|t| {
                offered(
                    t.meta.risk,
                    t.meta.has_side_effects,
                    t.section(policy),
                    requested,
                )
            })
            .collect();
        crate::neurons::catalog::within_budget(tools, policy.neurons.catalog_tokens)
    }
}

/// The loaded tool named `name`, callable under the operator's grants.
///
/// # Errors
/// [`Refusal::UnknownTool`] (the error lists every loaded tool) or
/// [`Refusal::NotCallable`].
pub(super) fn resolve(host: &Host, name: &str) -> Result<Arc<LoadedTool>, Box<Rejection>> {
    let Some(t) = host.registry.get(name) else {
        let names = host.registry.names();
        let names: Vec<&str> = names.iter().map(String::as_str).collect();
        let error = ToolError::with_hint(
            ErrorKind::InvalidArgs,
            format!(
                "unknown tool `{}`",
                name.chars().take(80).collect::<String>()
            ),
            format!("Use one of: {}.", names.join(", ")),
        );
        return Err(Rejection::boxed(
            Refusal::UnknownTool(unknown_tool(name, &names)),
            error,
        ));
    };
    if let Err(e) = &t.grants {
        let error = ToolError::with_hint(
            ErrorKind::PermissionDenied,
            e.to_string(),
            "The operator has not granted what this tool needs; use another tool or ask the operator.",
        );
        return Err(Rejection::boxed(Refusal::NotCallable(e.clone()), error));
    }
    Ok(t)
}

/// What runs the tool `tool_id` with identity `hash`, as a step's BEGIN
/// pinned it (the component it ran with, even if the tools directory
/// changed since).
///
/// # Errors
/// [`LoadError`] when no such tool is stored any more.
pub(super) fn pinned(host: &Host, tool_id: &str, hash: &str) -> Result<ToolSource, LoadError> {
    host.registry
        .source_by_identity(&host.sandbox, tool_id, hash)
}
