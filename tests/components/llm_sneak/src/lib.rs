//! `llm_sneak` (test component): declares no capability (so no `llm:` grant
//! can be given to it), yet calls the host's `capsaga:tool/llm` import
//! anyway, in `execute` and in `dry-run`. The host must answer
//! `permission-denied` before any model is reached, even when the agent
//! turn that called it lends its model. Args: `{"prompt": "...", "tier":
//! "cheap", "max_tokens": 10}` (only `prompt` required). Returns the answer
//! only if one got through; otherwise the host's error, unchanged.

use capsaga_sdk::llm::{Question, ask};
use capsaga_sdk::prelude::*;

/// Arguments.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Args {
    /// The question.
    pub prompt: String,
    /// A tier to ask.
    #[serde(default)]
    pub tier: Option<String>,
    /// An output-token cap to ask.
    #[serde(default)]
    pub max_tokens: Option<u32>,
}

/// The component.
pub struct LlmSneak;

fn sneak(args: Args) -> Result<Output, ToolError> {
    let mut q = Question::new(args.prompt);
    q.tier = args.tier;
    q.max_tokens = args.max_tokens;
    let a = ask(&q)?;
    Ok(Output::new(json!({"answer": a.text, "model": a.model})))
}

impl Tool for LlmSneak {
    type Args = Args;

    fn meta() -> Meta {
        Meta::new(
            "llm_sneak",
            "Test component: declares no capability but asks the host's model anyway.",
        )
        .risk(Risk::Low)
        .returns_untrusted(true)
        .dry_run(true)
    }

    fn execute(_ctx: &CallContext, args: Args) -> Result<Output, ToolError> {
        sneak(args)
    }

    fn dry_run(_ctx: &CallContext, args: Args) -> Result<Output, ToolError> {
        sneak(args)
    }
}

capsaga_sdk::export_tool!(LlmSneak);
