//! The `llm` factor: `llm:<tier>[:<max-tokens>]` grants let a tool ask the
//! calling turn's model a sub-question through the `capsaga:tool/llm` import
//! (`wit/llm.wit`).
//!
//! - **validate** at policy load: the tier is one the host has (`normal`,
//!   `cheap`: [`TIERS`]); `llm:*` is only a tool's requirement, never a grant;
//! - **configure** per tool: the granted tiers and their token caps
//!   ([`LlmBinding`]);
//! - **bind** per call: those tiers, the call's dry-run flag, and the model
//!   of the entry point ([`SubModel`], handed in by the dispatch door: the
//!   agent turn's provider and budget; none for `capsaga call` or a plan).
//!
//! The checks of an `ask` ([`LlmSlot::admit`]) are pure and made before the
//! model is reached: no grant → `permission-denied`; a tier not granted →
//! `permission-denied` naming the granted ones; a dry run or no model →
//! `unsupported`; an empty prompt → `invalid-args`. What the model handle
//! does (budget, pricing, counters, trace) is the entry point's business;
//! it must send the question without any tool, so a sub-question can never
//! call a tool.

use super::super::bindings::{WitLlmAnswer, WitLlmRequest, WitToolError, capsaga, error_to_wit};
use capsaga_core::capability::{Capability, Place};
use capsaga_core::error::{ErrorKind, ToolError};
use std::sync::Arc;
use std::time::Instant;

/// The tiers the host has: the provider's `model` and its `cheap_model`.
pub const TIERS: [&str; 2] = ["normal", "cheap"];
/// Output-token cap of a sub-question when neither the tool nor the grant
/// names a lower one.
pub const DEFAULT_MAX_TOKENS: u32 = 1024;
/// Largest prompt (plus system text) of one sub-question, bytes.
pub const MAX_PROMPT_BYTES: usize = 256 * 1024;

/// One sub-question, as admitted by the factor.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SubRequest {
    /// The tool asking.
    pub tool: String,
    /// The question (the user message).
    pub prompt: String,
    /// The system text, if the tool gave one.
    pub system: Option<String>,
    /// Most output tokens (already capped by the grant).
    pub max_tokens: u32,
    /// A granted tier, one of [`TIERS`].
    pub tier: &'static str,
}

/// The model's answer to a sub-question.
#[derive(Debug, Clone, PartialEq)]
pub struct SubAnswer {
    /// The answer's text (untrusted content).
    pub text: String,
    /// The provider that answered.
    pub provider: String,
    /// The model that answered.
    pub model: String,
    /// The tier actually used (`cheap` past a soft budget cap).
    pub tier: &'static str,
    /// Input tokens billed.
    pub input_tokens: u64,
    /// Output tokens billed.
    pub output_tokens: u64,
    /// Cost charged, USD.
    pub cost_usd: f64,
    /// Why the model stopped (`stop`, `length`, ...).
    pub finish_reason: String,
}

/// The model an entry point lends to the tool calls it submits (the agent
/// turn: its provider router and budget). Shared by `Arc` with the call's
/// store, so it must be `Send + Sync`.
#[async_trait::async_trait]
pub trait SubModel: Send + Sync {
    /// Ask the question, with no tools offered, charged to the caller.
    ///
    /// # Errors
    /// A [`ToolError`] for the tool: `quota-exceeded` when the budget's
    /// hard cap is reached (nothing sent), `network-error` /
    /// `external-error` when every provider failed.
    async fn ask(&self, request: SubRequest) -> Result<SubAnswer, ToolError>;
}

/// The `llm:` grants of one tool: tier → per-call token cap.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LlmBinding {
    /// Granted tiers (of [`TIERS`]) and their caps, in grant order.
    pub tiers: Vec<(&'static str, Option<u32>)>,
}

/// Phase 1: a grant names a tier the host has; `*` is refused (only a tool
/// may require "any tier").
///
/// # Errors
/// Why the grant is refused.
pub fn validate(grant: &Capability) -> Result<(), String> {
    match grant {
        Capability::Llm {
            tier: Place::Any, ..
        } => Err("`llm:*` is a tool's requirement; a grant names a tier (`llm:normal`, `llm:cheap`, optionally `:<max-tokens>`)".into()),
        Capability::Llm {
            tier: Place::Concrete(t),
            ..
        } if !TIERS.contains(&t.as_str()) => Err(format!(
            "unknown tier `{t}` (this host has the tiers {})",
            TIERS.join(", ")
        )),
        _ => Ok(()),
    }
}

/// Phase 2: the tiers and caps of the `llm:` grants among `grants`.
pub fn configure(grants: &[Capability]) -> LlmBinding {
    let mut b = LlmBinding::default();
    for g in grants {
        if let Capability::Llm {
            tier: Place::Concrete(t),
            max_tokens,
        } = g
            && let Some(tier) = TIERS.iter().find(|k| **k == t.as_str())
        {
            b.tiers.push((*tier, *max_tokens));
        }
    }
    b
}

/// Phase 3's result: what one call may ask. It is the `llm` import's own
/// context: the import is implemented on it and linked with the accessor
/// of [`LlmView`] ([`add_to_linker`]), as wasmtime-wasi links each of its
/// interfaces.
#[derive(Clone)]
pub struct LlmSlot {
    /// The tool.
    pub tool: String,
    /// Its granted tiers.
    pub binding: LlmBinding,
    /// The entry point's model, if it has one.
    pub model: Option<Arc<dyn SubModel>>,
    /// True in a dry run (no model call).
    pub dry_run: bool,
    /// When the call's wall-clock deadline passes: the model's answer is
    /// waited for until then.
    pub deadline: Instant,
}

impl std::fmt::Debug for LlmSlot {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LlmSlot")
            .field("tool", &self.tool)
            .field("binding", &self.binding)
            .field("model", &self.model.is_some())
            .field("dry_run", &self.dry_run)
            .field("deadline", &self.deadline)
            .finish()
    }
}

/// Phase 3: the slot of one call ending at `deadline`.
pub fn bind(
    tool: &str,
    binding: &LlmBinding,
    model: Option<Arc<dyn SubModel>>,
    dry_run: bool,
    deadline: Instant,
) -> LlmSlot {
    LlmSlot {
        tool: tool.to_string(),
        binding: binding.clone(),
        model,
        dry_run,
        deadline,
    }
}

/// A store's data that holds an [`LlmSlot`] (the accessor the `llm`
/// import is linked with).
pub trait LlmView: Send {
    /// The call's slot.
    fn llm(&mut self) -> &mut LlmSlot;
}

/// Link the `capsaga:tool/llm` import, implemented on [`LlmSlot`], into
/// `linker`.
///
/// # Errors
/// When the linker refuses the definition.
pub fn add_to_linker<T: LlmView + 'static>(
    linker: &mut wasmtime::component::Linker<T>,
) -> wasmtime::Result<()> {
    capsaga::tool::llm::add_to_linker::<T, wasmtime::component::HasSelf<LlmSlot>>(linker, T::llm)
}

impl LlmSlot {
    /// The checks of one `ask`, in order: a grant, a granted tier, not a dry
    /// run, a model at this entry point, a non-empty prompt within
    /// [`MAX_PROMPT_BYTES`]. Returns the admitted request and the model.
    ///
    /// # Errors
    /// `permission-denied`, `unsupported` or `invalid-args`, with a hint.
    pub fn admit(
        &self,
        prompt: String,
        system: Option<String>,
        max_tokens: Option<u32>,
        tier: Option<&str>,
    ) -> Result<(SubRequest, Arc<dyn SubModel>), ToolError> {
        let granted: Vec<&str> = self.binding.tiers.iter().map(|(t, _)| *t).collect();
        if granted.is_empty() {
            return Err(ToolError::with_hint(
                ErrorKind::PermissionDenied,
                format!(
                    "tool `{}` has no `llm:` grant: it may not ask the model anything",
                    self.tool
                ),
                "Answer without asking a sub-question, or ask the operator to grant `llm:cheap` (or `llm:normal`) to this tool.",
            ));
        }
        let (tier, cap) = match tier {
            Some(asked) => self
                .binding
                .tiers
                .iter()
                .find(|(t, _)| *t == asked)
                .copied()
                .ok_or_else(|| {
                    ToolError::with_hint(
                        ErrorKind::PermissionDenied,
                        format!(
                            "tool `{}` may not use the tier `{}` (granted: {})",
                            self.tool,
                            asked.chars().take(64).collect::<String>(),
                            granted.join(", ")
                        ),
                        format!(
                            "Ask again with a granted tier ({}), or without a tier.",
                            granted.join(", ")
                        ),
                    )
                })?,
            None => self.default_tier(),
        };
        if self.dry_run {
            return Err(ToolError::with_hint(
                ErrorKind::Unsupported,
                "no model call is made in a dry run",
                "The dry run only describes the question; run the call for real to get an answer.",
            ));
        }
        let Some(model) = self.model.clone() else {
            return Err(ToolError::with_hint(
                ErrorKind::Unsupported,
                "no model is available to this call (it was not made by an agent turn with a provider)",
                "Ask the sub-question from an agent turn, or answer without it.",
            ));
        };
        if prompt.trim().is_empty() {
            return Err(ToolError::with_hint(
                ErrorKind::InvalidArgs,
                "the prompt is empty",
                "Pass the question as a non-empty prompt.",
            ));
        }
        let size = prompt.len() + system.as_ref().map_or(0, String::len);
        if size > MAX_PROMPT_BYTES {
            return Err(ToolError::with_hint(
                ErrorKind::QuotaExceeded,
                format!("the prompt is {size} bytes; at most {MAX_PROMPT_BYTES} are sent"),
                "Shorten the question.",
            ));
        }
        let max_tokens = [max_tokens, cap, Some(DEFAULT_MAX_TOKENS)]
            .into_iter()
            .flatten()
            .min()
            .unwrap_or(DEFAULT_MAX_TOKENS)
            .max(1);
        Ok((
            SubRequest {
                tool: self.tool.clone(),
                prompt,
                system,
                max_tokens,
                tier,
            },
            model,
        ))
    }

    /// The only granted tier, else `cheap` when granted, else the first.
    fn default_tier(&self) -> (&'static str, Option<u32>) {
        let tiers = &self.binding.tiers;
        if tiers.len() > 1
            && let Some(c) = tiers.iter().find(|(t, _)| *t == "cheap")
        {
            return *c;
        }
        tiers.first().copied().unwrap_or(("cheap", None))
    }
}

impl capsaga::tool::llm::Host for LlmSlot {
    /// Admit the request ([`LlmSlot::admit`]), then wait for the entry
    /// point's model until the call's deadline.
    async fn ask(&mut self, request: WitLlmRequest) -> Result<WitLlmAnswer, WitToolError> {
        let admitted = self.admit(
            request.prompt,
            request.system,
            request.max_tokens,
            request.tier.as_deref(),
        );
        let (sub, model) = admitted.map_err(|e| error_to_wit(&e))?;
        let deadline: Instant = self.deadline;
        let tool = self.tool.clone();
        let answer = match tokio::time::timeout_at(deadline.into(), model.ask(sub)).await {
            Ok(res) => res.map_err(|e| error_to_wit(&e))?,
            Err(_) => {
                return Err(error_to_wit(&ToolError::with_hint(
                    ErrorKind::Timeout,
                    format!("tool `{tool}`: the model did not answer before the call's deadline"),
                    "Ask a shorter question, or ask the operator for a longer deadline.",
                )));
            }
        };
        Ok(WitLlmAnswer {
            text: answer.text,
            provider: answer.provider,
            model: answer.model,
            tier: answer.tier.to_string(),
            input_tokens: answer.input_tokens,
            output_tokens: answer.output_tokens,
            cost_usd: answer.cost_usd,
            finish_reason: answer.finish_reason,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cap(s: &str) -> Capability {
        Capability::parse(s).unwrap_or_else(|e| panic!("{e}"))
    }

    struct Echo;
    #[async_trait::async_trait]
    impl SubModel for Echo {
        async fn ask(&self, r: SubRequest) -> Result<SubAnswer, ToolError> {
            Ok(SubAnswer {
                text: r.prompt,
                provider: "echo".into(),
                model: "echo".into(),
                tier: r.tier,
                input_tokens: 0,
                output_tokens: 0,
                cost_usd: 0.0,
                finish_reason: "stop".into(),
            })
        }
    }

    #[test]
    fn validate_refuses_hostile_and_unknown_grants() {
        // Strings the grammar refuses never reach the factor.
        for s in [
            "llm:",
            "llm:Cheap",
            "llm:cheap:0",
            "llm:cheap:-5",
            "llm:cheap:4e3",
            "llm:cheap:2000000",
            "llm:cheap:1:2",
            "llm:cheap\n",
            "llm:../normal",
            "llm:normal;rm",
            "llm:normal\u{202e}",
        ] {
            assert!(Capability::parse(s).is_err(), "{s:?} parsed");
        }
        // Strings it accepts that the factor refuses.
        for s in [
            "llm:*",
            "llm:frontier",
            "llm:gpt-4o",
            "llm:normal2",
            "llm:cheap_",
        ] {
            let e = validate(&cap(s)).unwrap_err();
            assert!(e.contains("tier"), "{s}: {e}");
        }
        for s in [
            "llm:normal",
            "llm:cheap",
            "llm:cheap:1",
            "llm:normal:1000000",
        ] {
            assert_eq!(validate(&cap(s)), Ok(()), "{s}");
        }
    }

    #[test]
    fn configure_keeps_tiers_and_caps() {
        let b = configure(&[
            cap("fs:read:/a/**"),
            cap("llm:normal:300"),
            cap("llm:cheap"),
        ]);
        assert_eq!(b.tiers, vec![("normal", Some(300)), ("cheap", None)]);
    }

    #[test]
    fn admit_checks_grant_tier_dry_run_model_and_caps() {
        let model: Arc<dyn SubModel> = Arc::new(Echo);
        let none = bind(
            "t",
            &LlmBinding::default(),
            Some(model.clone()),
            false,
            Instant::now(),
        );
        let e = none
            .admit("q".into(), None, None, None)
            .err()
            .map(|e| e.kind);
        assert_eq!(e, Some(ErrorKind::PermissionDenied));

        let b = configure(&[cap("llm:cheap:200"), cap("llm:normal")]);
        let slot = bind("t", &b, Some(model.clone()), false, Instant::now());
        let e = slot.admit("q".into(), None, None, Some("frontier")).err();
        let e = e.map(|e| (e.kind, e.message));
        assert!(
            matches!(&e, Some((ErrorKind::PermissionDenied, m)) if m.contains("cheap, normal")),
            "{e:?}"
        );
        let (r, _) = slot.admit("q".into(), None, Some(5000), None).unwrap();
        assert_eq!((r.tier, r.max_tokens), ("cheap", 200));
        let (r, _) = slot
            .admit("q".into(), None, Some(50), Some("normal"))
            .unwrap();
        assert_eq!((r.tier, r.max_tokens), ("normal", 50));
        let (r, _) = slot.admit("q".into(), None, None, Some("normal")).unwrap();
        assert_eq!(r.max_tokens, DEFAULT_MAX_TOKENS);
        let e = slot
            .admit("  ".into(), None, None, None)
            .err()
            .map(|e| e.kind);
        assert_eq!(e, Some(ErrorKind::InvalidArgs));
        let big = "x".repeat(MAX_PROMPT_BYTES + 1);
        let e = slot.admit(big, None, None, None).err().map(|e| e.kind);
        assert_eq!(e, Some(ErrorKind::QuotaExceeded));

        let dry = bind("t", &b, Some(model), true, Instant::now());
        let e = dry
            .admit("q".into(), None, None, None)
            .err()
            .map(|e| e.kind);
        assert_eq!(e, Some(ErrorKind::Unsupported));
        let nomodel = bind("t", &b, None, false, Instant::now());
        let e = nomodel
            .admit("q".into(), None, None, None)
            .err()
            .map(|e| e.kind);
        assert_eq!(e, Some(ErrorKind::Unsupported));
    }
}
