//! Tools the host implements itself (later: `neuron_create`, the MCP
//! session's `capsaga_commit`). They are registered like components and go
//! through the same door: validation, policy, guardrail, saga, enforced
//! dry-run.

use crate::sandbox::Op;
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
    /// it by the call's deadline.
    ///
    /// # Errors
    /// A [`ToolError`] as a component would return it.
    async fn call(
        &self,
        op: &Op,
        ctx: &CallContext,
        args: &Value,
    ) -> Result<Option<ToolOutput>, ToolError>;
}
