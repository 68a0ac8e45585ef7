//! The host's view of the records a tool call exchanges (WIT `call-context`
//! and `tool-output`), independent of Wasmtime's generated bindings.

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// Identity and limits of one call (WIT `call-context`), shared with the SDK.
pub use capsaga_types::CallContext;

/// What a successful `execute` or `dry-run` returned (WIT `tool-output`),
/// with `data` parsed.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolOutput {
    /// The result, as JSON.
    pub data: Value,
    /// Human-readable effects, e.g. `wrote /data/a.txt (120 bytes)`.
    #[serde(default)]
    pub effects: Vec<String>,
    /// Hint for the guardrail (`validate`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next_hint: Option<String>,
    /// One line for humans.
    #[serde(default)]
    pub summary: String,
}

impl ToolOutput {
    /// Bytes of the output as the host accounts them: data text plus effects
    /// plus hint plus summary.
    pub fn size_bytes(&self) -> usize {
        self.data.to_string().len()
            + self.effects.iter().map(String::len).sum::<usize>()
            + self.next_hint.as_ref().map_or(0, String::len)
            + self.summary.len()
    }

    /// True when the tool asked the guardrail to validate next.
    pub fn wants_validation(&self) -> bool {
        self.next_hint.as_deref() == Some("validate")
    }
}
