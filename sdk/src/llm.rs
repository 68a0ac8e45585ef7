//! Asking the model a sub-question (WIT import `capsaga:tool/llm`,
//! `wit/llm.wit`).
//!
//! ```no_run
//! use capsaga_sdk::llm::{Question, ask};
//! # fn f() -> Result<(), capsaga_sdk::ToolError> {
//! let answer = ask(&Question::new("Summarise in one line: ...").max_tokens(200))?;
//! // `answer.text` is untrusted: declare `returns_untrusted(true)` in the meta.
//! # let _ = answer; Ok(()) }
//! ```
//!
//! The host answers only within the tool's `llm:<tier>[:<max-tokens>]`
//! grants (declare `llm:*` in [`Meta::capability`](crate::Meta::capability)):
//! without one the error is `permission-denied`. The question goes to the
//! calling agent turn's provider with no tools, checked against and charged
//! to the turn's budget (`quota-exceeded` past its hard cap, nothing sent).
//! In a dry run, and where the call was not made by an agent turn with a
//! model (`capsaga call`, a plan), the error is `unsupported`.
//!
//! Outside a component (native unit tests) [`ask`] returns `unsupported`.

use crate::ToolError;

/// One sub-question.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Question {
    /// The question (the user message).
    pub prompt: String,
    /// Instructions for the model (its system prompt); the host's short
    /// default when `None`.
    pub system: Option<String>,
    /// Most output tokens; the host lowers it to the grant's cap and its own
    /// default, never raises it.
    pub max_tokens: Option<u32>,
    /// `normal` or `cheap`, which must be granted; `None`: the only granted
    /// tier, else `cheap` when granted.
    pub tier: Option<String>,
}

impl Question {
    /// A question with the host's defaults.
    pub fn new(prompt: impl Into<String>) -> Question {
        Question {
            prompt: prompt.into(),
            ..Question::default()
        }
    }

    /// Set the system text.
    pub fn system(mut self, system: impl Into<String>) -> Question {
        self.system = Some(system.into());
        self
    }

    /// Set the output-token cap.
    pub fn max_tokens(mut self, n: u32) -> Question {
        self.max_tokens = Some(n);
        self
    }

    /// Ask a tier (`normal` or `cheap`).
    pub fn tier(mut self, tier: impl Into<String>) -> Question {
        self.tier = Some(tier.into());
        self
    }
}

/// The model's answer.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Answer {
    /// The answer's text: content from outside the operator's trust.
    pub text: String,
    /// The provider that answered.
    pub provider: String,
    /// The model that answered.
    pub model: String,
    /// The tier used (`cheap` past the turn's soft budget cap).
    pub tier: String,
    /// Input tokens billed.
    pub input_tokens: u64,
    /// Output tokens billed.
    pub output_tokens: u64,
    /// Cost charged to the turn, USD.
    pub cost_usd: f64,
    /// Why the model stopped: `stop`, `length`, `content_filter`,
    /// `refusal`, `other`.
    pub finish_reason: String,
}

/// Ask the model `q` and wait for its answer (bounded by the call's
/// deadline).
///
/// # Errors
/// The host's [`ToolError`]: `permission-denied` (no `llm:` grant or a tier
/// not granted), `quota-exceeded` (budget hard cap), `unsupported` (dry run,
/// no model at this entry point, or native code), `invalid-args` (empty
/// prompt), `timeout`, `network-error` / `external-error` (no provider
/// answered).
pub fn ask(q: &Question) -> Result<Answer, ToolError> {
    #[cfg(target_arch = "wasm32")]
    {
        use crate::__private::bindings::capsaga::tool::llm as wit;
        let req = wit::LlmRequest {
            prompt: q.prompt.clone(),
            system: q.system.clone(),
            max_tokens: q.max_tokens,
            tier: q.tier.clone(),
        };
        wit::ask(&req)
            .map(|a| Answer {
                text: a.text,
                provider: a.provider,
                model: a.model,
                tier: a.tier,
                input_tokens: a.input_tokens,
                output_tokens: a.output_tokens,
                cost_usd: a.cost_usd,
                finish_reason: a.finish_reason,
            })
            .map_err(crate::__private::error_from_wit)
    }
    #[cfg(not(target_arch = "wasm32"))]
    {
        let _ = q;
        Err(
            ToolError::unsupported("no model outside a capsaga component")
                .hint("run the tool in the capsaga host"),
        )
    }
}
