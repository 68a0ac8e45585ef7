//! Tools the host implements itself (`neuron_create`, `code_run`). They are
//! registered like components and go through the same door: validation,
//! policy, guardrail, saga, enforced dry-run.

use crate::sandbox::{Bindings, Op};
use async_trait::async_trait;
use capsaga_core::error::ToolError;
use capsaga_core::meta::RawToolMeta;
use capsaga_core::tool::{CallContext, ToolOutput};
use serde_json::Value;

/// A tool implemented by the host.
#[async_trait]
pub trait BuiltinTool: Send + Sync {
    /// Its meta, as a component's `meta` export would return it.
    fn meta(&self) -> RawToolMeta;

    /// Run one export with the already validated `args`: `Ok(Some(output))`
    /// for execute and dry-run, `Ok(None)` for compensate. The door bounds
    /// it by the call's deadline. `bindings` are what the tool's grants bind
    /// for this export (read-only preopens for a dry run, the logged grants
    /// for a compensation), exactly what a component would be given: a
    /// built-in that touches files opens them only beneath those preopens.
    ///
    /// # Errors
    /// A [`ToolError`] as a component would return it.
    async fn call(
        &self,
        op: &Op,
        ctx: &CallContext,
        args: &Value,
        bindings: &Bindings,
    ) -> Result<Option<ToolOutput>, ToolError>;
}
