//! The scripted provider: deterministic model turns read from a JSON file, no
//! network, no key, no cost. The embedded default.
//!
//! ```json
//! {
//!   "model": "scripted-demo",
//!   "turns": [
//!     { "text": "I will write the note.",
//!       "tool_calls": [ { "name": "fs_write", "arguments": { "path": "/ws/a.txt", "content": "hi" } } ] },
//!     { "text": "Done: the note is written." }
//!   ]
//! }
//! ```
//!
//! Turns are returned in order, whatever the request says. `arguments` is a
//! JSON object, or a string holding raw JSON text (to script malformed calls
//! such as duplicate keys). Token counts are simulated (about four characters
//! per token); `latency_ms` simulates a model's delay, scaled by
//! `CAPSAGA_SIM_LATENCY_SCALE` (0 = none, the default).

use super::provider::{
    ChatRequest, ChatResponse, FinishReason, Provider, ProviderError, ToolCall, Usage,
};
use serde::Deserialize;
use serde_json::Value;
use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};

/// Largest script file accepted, bytes.
pub const MAX_SCRIPT_BYTES: usize = 16 * 1024 * 1024;

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
struct ScriptFile {
    #[serde(default = "default_model")]
    model: String,
    #[serde(default)]
    latency_ms: u64,
    turns: Vec<ScriptTurn>,
}

fn default_model() -> String {
    "scripted".into()
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
struct ScriptTurn {
    #[serde(default)]
    text: String,
    #[serde(default)]
    tool_calls: Vec<ScriptCall>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
struct ScriptCall {
    #[serde(default)]
    id: Option<String>,
    name: String,
    #[serde(default = "empty_object")]
    arguments: Value,
}

fn empty_object() -> Value {
    Value::Object(Default::default())
}

/// Why a script could not be loaded.
#[derive(Debug, thiserror::Error)]
pub enum ScriptError {
    /// Unreadable file.
    #[error("cannot read script {path}: {error}")]
    Read {
        /// The file.
        path: String,
        /// OS error.
        error: String,
    },
    /// Not a valid script.
    #[error("script {path} is not valid: {error}")]
    Invalid {
        /// The file.
        path: String,
        /// Why.
        error: String,
    },
}

/// The scripted provider.
#[derive(Debug)]
pub struct ScriptedProvider {
    script: ScriptFile,
    next: AtomicUsize,
    latency_scale: f64,
}

impl ScriptedProvider {
    /// Load a script file; `${home}` in tool-call arguments becomes `home`
    /// (see [`capsaga_door::config::expand_home_vars`]).
    ///
    /// # Errors
    /// [`ScriptError`].
    pub fn from_file(path: &Path, home: &Path) -> Result<Self, ScriptError> {
        let p = path.display().to_string();
        let text = std::fs::read_to_string(path).map_err(|e| ScriptError::Read {
            path: p.clone(),
            error: e.to_string(),
        })?;
        let mut sp =
            Self::from_json(&text).map_err(|error| ScriptError::Invalid { path: p, error })?;
        for turn in &mut sp.script.turns {
            for call in &mut turn.tool_calls {
                match &mut call.arguments {
                    Value::String(raw) => *raw = raw.replace("${home}", &home.to_string_lossy()),
                    other => capsaga_door::config::expand_home_vars(other, home),
                }
            }
        }
        Ok(sp)
    }

    /// Parse a script from JSON text.
    ///
    /// # Errors
    /// A message naming the problem.
    pub fn from_json(text: &str) -> Result<Self, String> {
        let value =
            capsaga_core::json::parse_strict(text, MAX_SCRIPT_BYTES).map_err(|e| e.to_string())?;
        let script: ScriptFile = serde_json::from_value(value).map_err(|e| e.to_string())?;
        let latency_scale = std::env::var("CAPSAGA_SIM_LATENCY_SCALE")
            .ok()
            .and_then(|v| v.parse::<f64>().ok())
            .filter(|v| v.is_finite() && *v >= 0.0)
            .unwrap_or(0.0);
        Ok(ScriptedProvider {
            script,
            next: AtomicUsize::new(0),
            latency_scale,
        })
    }
}

/// About four characters per token, at least one.
fn simulated_tokens(chars: usize) -> u64 {
    (chars as u64).div_ceil(4).max(1)
}

#[async_trait::async_trait]
impl Provider for ScriptedProvider {
    fn name(&self) -> &str {
        "scripted"
    }

    fn model_for(&self, _tier: super::provider::Tier) -> String {
        self.script.model.clone()
    }

    async fn complete(&self, request: &ChatRequest) -> Result<ChatResponse, ProviderError> {
        let i = self.next.fetch_add(1, Ordering::SeqCst);
        let turn = self
            .script
            .turns
            .get(i)
            .ok_or(ProviderError::ScriptExhausted(self.script.turns.len()))?;
        if self.latency_scale > 0.0 && self.script.latency_ms > 0 {
            let ms = (self.script.latency_ms as f64 * self.latency_scale) as u64;
            tokio::time::sleep(std::time::Duration::from_millis(ms)).await;
        }
        let tool_calls: Vec<ToolCall> = turn
            .tool_calls
            .iter()
            .enumerate()
            .map(|(k, c)| ToolCall {
                id: c.id.clone().unwrap_or_else(|| format!("call_{i}_{k}")),
                name: c.name.clone(),
                arguments: match &c.arguments {
                    Value::String(raw) => raw.clone(),
                    other => other.to_string(),
                },
            })
            .collect();
        let prompt_chars = request.system.len()
            + request
                .messages
                .iter()
                .map(|m| m.content.len())
                .sum::<usize>()
            + request
                .tools
                .iter()
                .map(|t| t.description.len() + t.parameters.to_string().len())
                .sum::<usize>();
        let out_chars = turn.text.len()
            + tool_calls
                .iter()
                .map(|c| c.name.len() + c.arguments.len())
                .sum::<usize>();
        Ok(ChatResponse {
            provider: "scripted".into(),
            model: self.script.model.clone(),
            text: turn.text.clone(),
            finish_reason: if tool_calls.is_empty() {
                FinishReason::Stop
            } else {
                FinishReason::ToolCalls
            },
            tool_calls,
            finish_raw: String::new(),
            usage: Usage {
                input_tokens: simulated_tokens(prompt_chars),
                output_tokens: simulated_tokens(out_chars),
            },
            attempts: Vec::new(),
            repairs: Vec::new(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn req() -> ChatRequest {
        ChatRequest::new("sys", vec![], vec![])
    }

    #[tokio::test]
    async fn turns_in_order_then_exhausted() {
        let p = ScriptedProvider::from_json(
            r#"{"turns":[{"text":"a","tool_calls":[{"name":"t","arguments":{"x":1}},{"name":"u","arguments":"{\"k\":1,\"k\":2}"}]},{"text":"done"}]}"#,
        )
        .unwrap();
        let r = p.complete(&req()).await.unwrap();
        assert_eq!(r.finish_reason, FinishReason::ToolCalls);
        assert_eq!(r.tool_calls[0].arguments, r#"{"x":1}"#);
        assert_eq!(r.tool_calls[1].arguments, r#"{"k":1,"k":2}"#);
        assert!(r.usage.input_tokens > 0);
        let r = p.complete(&req()).await.unwrap();
        assert_eq!(
            (r.text.as_str(), r.finish_reason),
            ("done", FinishReason::Stop)
        );
        assert_eq!(
            p.complete(&req()).await.unwrap_err(),
            ProviderError::ScriptExhausted(2)
        );
    }

    #[test]
    fn bad_scripts_refused() {
        assert!(ScriptedProvider::from_json(r#"{"turns":[],"turns":[]}"#).is_err());
        assert!(ScriptedProvider::from_json(r#"{"turns":[{"txt":"a"}]}"#).is_err());
        assert!(ScriptedProvider::from_json("nope").is_err());
    }
}
