//! `llm`: ask the model a sub-question (seed 002's `supra_llm`), through the
//! host's `capsaga:tool/llm` import.
//!
//! The question goes to the calling agent turn's own provider (its failover
//! router), with no tools, checked against and charged to the turn's budget;
//! the operator's `llm:<tier>[:<max-tokens>]` grants say which tiers the tool
//! may use and how long an answer may be. The answer is content from outside
//! the operator's trust (`returns-untrusted`): the host wraps it before the
//! model reads it.
//!
//! Arguments: `{"prompt": "...", "system": "...", "max_tokens": 300,
//! "tier": "cheap"}` (only `prompt` required). Output: `{"answer": "...",
//! "provider": "...", "model": "...", "tier": "cheap", "input_tokens": 12,
//! "output_tokens": 40, "cost_usd": 0.0001, "finish_reason": "stop"}`.
//! No side effects. Dry run: describes the question, no model call.

use capsaga_sdk::llm::{Question, ask};
use capsaga_sdk::prelude::*;

/// Longest prompt accepted, characters.
pub const MAX_PROMPT_CHARS: usize = 64_000;

/// Arguments of `llm`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Args {
    /// The self-contained question for the model (it sees nothing else of the
    /// conversation), e.g. "Classify this review as positive or negative: ...".
    #[schemars(length(min = 1, max = 64000))]
    pub prompt: String,
    /// Optional instructions for the model (its system prompt).
    #[serde(default)]
    #[schemars(length(max = 16000))]
    pub system: Option<String>,
    /// Most output tokens of the answer (the operator's grant may lower it).
    #[serde(default)]
    #[schemars(range(min = 1, max = 100000))]
    pub max_tokens: Option<u32>,
    /// Model tier: `cheap` (default when granted) or `normal`.
    #[serde(default)]
    pub tier: Option<Tier>,
}

/// A model tier.
#[derive(Debug, Clone, Copy, Deserialize, JsonSchema, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum Tier {
    /// The provider's cheaper model.
    Cheap,
    /// The provider's normal model.
    Normal,
}

impl Tier {
    fn as_str(self) -> &'static str {
        match self {
            Tier::Cheap => "cheap",
            Tier::Normal => "normal",
        }
    }
}

/// What `llm` returns.
#[derive(Debug, Serialize, Deserialize, PartialEq)]
pub struct Reply {
    /// The model's answer (untrusted).
    pub answer: String,
    /// The provider that answered.
    pub provider: String,
    /// The model that answered.
    pub model: String,
    /// The tier used.
    pub tier: String,
    /// Input tokens billed.
    pub input_tokens: u64,
    /// Output tokens billed.
    pub output_tokens: u64,
    /// Cost charged to the turn, USD.
    pub cost_usd: f64,
    /// Why the model stopped (`stop`, `length`, ...).
    pub finish_reason: String,
}

/// The tool.
pub struct Llm;

fn question(args: &Args) -> Result<Question, ToolError> {
    if args.prompt.trim().is_empty() {
        return Err(ToolError::invalid_args("the prompt is empty")
            .hint("pass the complete question as `prompt`"));
    }
    if args.prompt.chars().count() > MAX_PROMPT_CHARS {
        return Err(ToolError::invalid_args(format!(
            "the prompt is longer than {MAX_PROMPT_CHARS} characters"
        ))
        .hint("shorten the question"));
    }
    let mut q = Question::new(args.prompt.clone());
    q.system = args.system.clone();
    q.max_tokens = args.max_tokens;
    q.tier = args.tier.map(|t| t.as_str().to_string());
    Ok(q)
}

impl Tool for Llm {
    type Args = Args;

    fn meta() -> Meta {
        Meta::new(
            "llm",
            "Asks a language model one self-contained sub-question (no tools, no conversation history) and returns its answer as text; costs tokens from this turn's budget.",
        )
        .returns_untrusted(true)
        .dry_run(true)
        .capability("llm:*")
    }

    fn execute(_ctx: &CallContext, args: Args) -> Result<Output, ToolError> {
        let q = question(&args)?;
        let a = ask(&q)?;
        let summary = format!(
            "{} ({}) answered in {} tokens, ${:.6}",
            a.model, a.tier, a.output_tokens, a.cost_usd
        );
        Ok(Output::new(Reply {
            answer: a.text,
            provider: a.provider,
            model: a.model,
            tier: a.tier,
            input_tokens: a.input_tokens,
            output_tokens: a.output_tokens,
            cost_usd: a.cost_usd,
            finish_reason: a.finish_reason,
        })
        .summary(summary))
    }

    fn dry_run(_ctx: &CallContext, args: Args) -> Result<Output, ToolError> {
        let q = question(&args)?;
        let preview: String = q.prompt.chars().take(200).collect();
        Ok(Output::new(json!({
            "would_ask": preview,
            "prompt_chars": q.prompt.chars().count(),
            "tier": q.tier,
            "max_tokens": q.max_tokens,
        }))
        .summary("would ask the model one question (no model call in a dry run)"))
    }
}

capsaga_sdk::export_tool!(Llm);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn meta_is_valid_and_untrusted() {
        let m = capsaga_sdk::describe::<Llm>(env!("CARGO_PKG_VERSION"));
        assert_eq!(m.check(), Ok(()));
        assert!(m.returns_untrusted && !m.has_side_effects);
    }

    #[test]
    fn empty_prompt_is_invalid() {
        let args: Args = capsaga_sdk::parse_args(r#"{"prompt": "  "}"#).unwrap();
        assert_eq!(question(&args).unwrap_err().kind, ErrorKind::InvalidArgs);
        assert!(capsaga_sdk::parse_args::<Args>(r#"{"prompt": "x", "tier": "frontier"}"#).is_err());
    }
}
