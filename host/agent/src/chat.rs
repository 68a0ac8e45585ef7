//! The provider-neutral chat records the agent loop speaks (requests,
//! answers, usage, a provider's failures): what every provider
//! (`super::provider`) and the meter (`super::meter`) exchange.

pub use capsaga_core::policy::tool_choice::ToolChoice;
use serde::{Deserialize, Serialize};

/// Who wrote a message.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Role {
    /// The operator's user: the task.
    User,
    /// The model.
    Assistant,
    /// A tool result (or a validation error) answering a tool call.
    Tool,
}

/// A tool call the model made. `arguments` is the raw JSON text as the model
/// wrote it, so that the host can refuse duplicate keys before anything else
/// parses it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ToolCall {
    /// The provider's call id (generated when the provider has none).
    pub id: String,
    /// The tool name the model used.
    pub name: String,
    /// Raw JSON text of the arguments.
    pub arguments: String,
}

/// One message of the conversation.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Message {
    /// Who wrote it.
    pub role: Role,
    /// Its text.
    pub content: String,
    /// Tool calls of an assistant message.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tool_calls: Vec<ToolCall>,
    /// The call a tool message answers.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_call_id: Option<String>,
    /// True for a tool message reporting an error (validation or tool error).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub is_error: bool,
}

impl Message {
    /// A user message.
    pub fn user(content: impl Into<String>) -> Self {
        Message {
            role: Role::User,
            content: content.into(),
            tool_calls: Vec::new(),
            tool_call_id: None,
            is_error: false,
        }
    }

    /// An assistant message.
    pub fn assistant(content: impl Into<String>, tool_calls: Vec<ToolCall>) -> Self {
        Message {
            role: Role::Assistant,
            content: content.into(),
            tool_calls,
            tool_call_id: None,
            is_error: false,
        }
    }

    /// A tool result.
    pub fn tool(call_id: &str, content: impl Into<String>, is_error: bool) -> Self {
        Message {
            role: Role::Tool,
            content: content.into(),
            tool_calls: Vec::new(),
            tool_call_id: Some(call_id.to_string()),
            is_error,
        }
    }
}

/// A tool as presented to the model.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolSpec {
    /// Name.
    pub name: String,
    /// Description.
    pub description: String,
    /// Args JSON Schema.
    pub parameters: serde_json::Value,
    /// The tool's effective grants (shown in the system prompt so that the
    /// model knows which directories and hosts it can reach; not sent as part
    /// of the provider's tool definition).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub grants: Vec<String>,
}

/// Which model tier a call uses (seed 000 §6): the provider's normal model,
/// or its cheaper one once a soft budget cap is reached.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Tier {
    /// The provider's `model`.
    #[default]
    Normal,
    /// The provider's `cheap_model` (its `model` when it has none).
    Cheap,
}

impl Tier {
    /// The model this tier selects from a provider's `model` and optional
    /// `cheap_model`.
    pub fn pick(self, model: &str, cheap_model: Option<&str>) -> String {
        match self {
            Tier::Cheap => cheap_model.unwrap_or(model).to_string(),
            Tier::Normal => model.to_string(),
        }
    }
}

/// One model call.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ChatRequest {
    /// The system prompt.
    pub system: String,
    /// The conversation so far.
    pub messages: Vec<Message>,
    /// The tool catalog.
    pub tools: Vec<ToolSpec>,
    /// Most output tokens.
    pub max_tokens: u32,
    /// Model tier.
    pub tier: Tier,
    /// The role or call kind (`plan`, `review`, ...) that selects a provider
    /// order, if any.
    pub role: Option<String>,
    /// Whether the model must call a tool; sent only with a non-empty
    /// catalog and when not `Auto` (each provider's wire form:
    /// [`capsaga_core::policy::tool_choice`]).
    pub tool_choice: ToolChoice,
}

impl ChatRequest {
    /// A request with the default output limit, normal tier, no role.
    pub fn new(system: impl Into<String>, messages: Vec<Message>, tools: Vec<ToolSpec>) -> Self {
        ChatRequest {
            system: system.into(),
            messages,
            tools,
            max_tokens: capsaga_core::providers::DEFAULT_MAX_TOKENS,
            tier: Tier::Normal,
            role: None,
            tool_choice: ToolChoice::Auto,
        }
    }
}

/// Why the model stopped, across wire formats (the provider's own word is
/// kept in [`ChatResponse::finish_raw`]).
///
/// | variant | OpenAI-compatible `finish_reason` | Anthropic `stop_reason` |
/// |---|---|---|
/// | `Stop` | `stop`, `eos` | `end_turn`, `stop_sequence` |
/// | `ToolCalls` | `tool_calls`, `function_call` | `tool_use` |
/// | `Length` | `length`, `max_tokens` | `max_tokens`, `model_context_window_exceeded` |
/// | `ContentFilter` | `content_filter` | — |
/// | `Refusal` | a `refusal` message or part | `refusal` |
/// | `PauseTurn` | — | `pause_turn` |
/// | `Other` | anything else, or none | anything else, or none |
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FinishReason {
    /// A final answer.
    Stop,
    /// It called tools.
    ToolCalls,
    /// Cut off: out of output tokens, or the context window is full.
    Length,
    /// The provider's content filter withheld (part of) the answer.
    ContentFilter,
    /// The model refused.
    Refusal,
    /// The provider paused a long turn; sending the answer back continues it
    /// (Anthropic).
    PauseTurn,
    /// Anything else.
    Other,
}

impl FinishReason {
    /// The stored name (`stop`, `tool_calls`, `length`, ...).
    pub fn as_str(self) -> &'static str {
        match self {
            FinishReason::Stop => "stop",
            FinishReason::ToolCalls => "tool_calls",
            FinishReason::Length => "length",
            FinishReason::ContentFilter => "content_filter",
            FinishReason::Refusal => "refusal",
            FinishReason::PauseTurn => "pause_turn",
            FinishReason::Other => "other",
        }
    }
}

/// Token counts of one call.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Usage {
    /// Prompt (input) tokens.
    pub input_tokens: u64,
    /// Response (output) tokens.
    pub output_tokens: u64,
}

impl Usage {
    /// No token at all.
    pub fn is_zero(&self) -> bool {
        self.input_tokens == 0 && self.output_tokens == 0
    }
}

/// One try of one provider, as recorded in the trace.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Attempt {
    /// Provider name.
    pub provider: String,
    /// Model asked for.
    pub model: String,
    /// HTTP status, when a response came back.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<u16>,
    /// Why it failed (`None`: it answered).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// What kind of failure (`None`: it answered).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kind: Option<FailureKind>,
    /// For a failed try: the tokens its response reported (and the provider
    /// bills) although the answer could not be used. Zero for the try that
    /// answered (its tokens are the answer's).
    #[serde(default, skip_serializing_if = "Usage::is_zero")]
    pub usage: Usage,
}

/// One model answer.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ChatResponse {
    /// Which provider answered.
    pub provider: String,
    /// Which model answered.
    pub model: String,
    /// Its text (may be empty when it only calls tools).
    pub text: String,
    /// Its tool calls, in order.
    pub tool_calls: Vec<ToolCall>,
    /// Why it stopped.
    pub finish_reason: FinishReason,
    /// The provider's own word for it (`end_turn`, `max_tokens`, ...; empty
    /// when it gave none).
    pub finish_raw: String,
    /// Tokens used.
    pub usage: Usage,
    /// Every try made for this answer, the successful one last (filled by
    /// the failover router; empty for a single provider).
    pub attempts: Vec<Attempt>,
    /// Where the answer departed from its wire format's documented shape and
    /// how it was read (an empty-string `arguments` read as `{}`, a missing
    /// or duplicated call id replaced, ...), for the trace.
    pub repairs: Vec<String>,
}

/// What kind of failure a provider call met.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FailureKind {
    /// No connection, or the connection broke.
    Transport,
    /// No complete answer before the deadline (`[agent] timeout_ms`).
    Timeout,
    /// A non-2xx HTTP status.
    Http,
    /// A 2xx response whose body is an error object (`{"error": {...}}`).
    ErrorInBody,
    /// A 2xx response that is not a usable answer in the wire format
    /// (not JSON, no choice, `tool_calls` announced but none sent, ...).
    Malformed,
    /// Anything else (configuration, encoding, size limit).
    Other,
}

/// Why a provider call failed.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ProviderError {
    /// The scripted provider has no more turns.
    #[error("the script has no more turns (after {0})")]
    ScriptExhausted(usize),
    /// Transport or protocol failure.
    #[error("provider `{provider}` failed: {message}")]
    Failed {
        /// Which provider.
        provider: String,
        /// What happened (never holds the API key).
        message: String,
        /// Whether a retry may succeed (429, 5xx, timeouts).
        retriable: bool,
        /// The HTTP status, when a response came back.
        status: Option<u16>,
        /// The server's `Retry-After`, milliseconds.
        retry_after_ms: Option<u64>,
        /// What kind of failure.
        kind: FailureKind,
        /// Tokens the response reported although it could not be used
        /// (billed all the same).
        usage: Usage,
    },
    /// No provider is allowed for this request: nothing was sent.
    #[error(transparent)]
    NoAllowedProvider(#[from] capsaga_core::providers::NoAllowedProvider),
    /// Every allowed provider failed, retries and failover included.
    #[error("every allowed provider failed: {}", summary(.0))]
    AllFailed(Vec<Attempt>),
    /// A hard budget cap refused the reservation of the next try (see
    /// [`super::meter`]): it was not sent.
    #[error("{0}")]
    Budget(String),
}

fn summary(attempts: &[Attempt]) -> String {
    attempts
        .iter()
        .map(|a| {
            format!(
                "{} ({})",
                a.provider,
                a.error
                    .as_deref()
                    .unwrap_or("ok")
                    .chars()
                    .take(200)
                    .collect::<String>()
            )
        })
        .collect::<Vec<_>>()
        .join("; ")
}

impl ProviderError {
    /// A failure of `provider` of kind [`FailureKind::Other`].
    pub fn failed(provider: &str, message: impl Into<String>, retriable: bool) -> Self {
        ProviderError::of_kind(provider, FailureKind::Other, message, retriable)
    }

    /// A failure of `provider` of `kind`, no status, no usage.
    pub fn of_kind(
        provider: &str,
        kind: FailureKind,
        message: impl Into<String>,
        retriable: bool,
    ) -> Self {
        ProviderError::Failed {
            provider: provider.to_string(),
            message: message.into(),
            retriable,
            status: None,
            retry_after_ms: None,
            kind,
            usage: Usage::default(),
        }
    }

    /// The same error carrying the tokens its response reported.
    pub fn with_usage(mut self, billed: Usage) -> Self {
        if let ProviderError::Failed { usage, .. } = &mut self {
            *usage = billed;
        }
        self
    }

    /// The tokens a failure's responses reported (billed although unusable).
    pub fn billed(&self) -> Usage {
        match self {
            ProviderError::Failed { usage, .. } => *usage,
            ProviderError::AllFailed(attempts) => Usage {
                input_tokens: attempts.iter().map(|a| a.usage.input_tokens).sum(),
                output_tokens: attempts.iter().map(|a| a.usage.output_tokens).sum(),
            },
            _ => Usage::default(),
        }
    }

    /// The kind of failure (`None` for the variants that sent nothing).
    pub fn kind(&self) -> Option<FailureKind> {
        match self {
            ProviderError::Failed { kind, .. } => Some(*kind),
            _ => None,
        }
    }
}
