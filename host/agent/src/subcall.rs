//! The turn's model lent to its tool calls: the [`SubModel`] behind the `llm`
//! import (`capsaga_sandbox::factors::llm`, `wit/llm.wit`).
//!
//! While a call the turn submitted runs, a tool may ask the model a
//! sub-question. The question travels over a channel back to the turn
//! ([`TurnModel`]), which answers it with its own provider (the failover
//! router) and budget, concurrently with the call ([`serve`]):
//!
//! 1. the budget first: past the hard cap, or when its maximum estimate
//!    cannot be reserved under a hard cap ([`super::meter`]), the tool gets
//!    `quota-exceeded` and nothing is sent; past the soft cap the cheap tier
//!    is used;
//! 2. the request carries **no tools** (so a sub-question can never call a
//!    tool) and the turn's role, at most the admitted output tokens;
//! 3. the answer (and every failed try the provider billed) is priced with
//!    the same price table, its reservation settled in the day's ledger,
//!    added to the turn's cost and tokens, and recorded as a
//!    [`TraceStep::SubCall`].
//!
//! The answer's text goes back to the tool as it is; the tool holds an
//! `llm:` grant, so the door marks its output untrusted whatever it
//! declares, and the turn wraps it before the model sees it.

use super::budget::Budget;
use super::meter::{Charge, Meter};
use super::provider::{ChatRequest, Message, Provider, ProviderError, Tier};
use super::reply::add;
use super::trace::{ExecutionTrace, TraceStep};
use capsaga_core::budget::BudgetState;
use capsaga_core::error::{ErrorKind, ToolError};
use capsaga_door::{SubAnswer, SubModel, SubRequest};
use std::sync::Arc;
use std::time::Instant;
use tokio::sync::{mpsc, oneshot};

/// The system text of a sub-question whose tool gave none.
pub const DEFAULT_SUB_SYSTEM: &str = "You answer one question asked by a tool of an AI agent. Answer in plain text, concisely. You cannot call tools.";

/// One sub-question waiting for the turn.
pub struct Ask {
    request: SubRequest,
    reply: oneshot::Sender<Result<SubAnswer, ToolError>>,
}

/// The [`SubModel`] a turn lends to one call: a channel to the turn, which
/// answers in [`serve`].
pub struct TurnModel {
    tx: mpsc::Sender<Ask>,
}

impl TurnModel {
    /// A model handle and the receiving end the turn serves.
    pub fn channel() -> (Arc<dyn SubModel>, mpsc::Receiver<Ask>) {
        let (tx, rx) = mpsc::channel(1);
        (Arc::new(TurnModel { tx }), rx)
    }
}

fn turn_gone() -> ToolError {
    ToolError::with_hint(
        ErrorKind::Unknown,
        "the agent turn stopped answering sub-questions",
        "Answer without the sub-question.",
    )
}

#[async_trait::async_trait]
impl SubModel for TurnModel {
    async fn ask(&self, request: SubRequest) -> Result<SubAnswer, ToolError> {
        let (reply, answer) = oneshot::channel();
        self.tx
            .send(Ask { request, reply })
            .await
            .map_err(|_| turn_gone())?;
        answer.await.map_err(|_| turn_gone())?
    }
}

/// Answer every sub-question arriving on `asks` until every handle is gone
/// (the call finished). See the module documentation.
pub async fn serve(
    asks: &mut mpsc::Receiver<Ask>,
    tr: &mut ExecutionTrace,
    meter: &Meter<'_>,
    budget: &Budget,
    provider: &dyn Provider,
    turn: &ChatRequest,
) {
    while let Some(ask) = asks.recv().await {
        let res = answer(tr, meter, budget, provider, turn, ask.request).await;
        // The tool may have timed out meanwhile; the cost is recorded anyway.
        let _ = ask.reply.send(res);
    }
}

fn tier_name(t: Tier) -> &'static str {
    match t {
        Tier::Normal => "normal",
        Tier::Cheap => "cheap",
    }
}

/// One sub-question: budget, model call, charge, trace step.
///
/// # Errors
/// A [`ToolError`] for the tool: `quota-exceeded` at the hard cap,
/// `network-error` / `external-error` when every provider failed, `unknown`
/// when the counters cannot be read or written.
pub async fn answer(
    tr: &mut ExecutionTrace,
    meter: &Meter<'_>,
    budget: &Budget,
    provider: &dyn Provider,
    turn: &ChatRequest,
    r: SubRequest,
) -> Result<SubAnswer, ToolError> {
    let started = Instant::now();
    let counters = |e: capsaga_store::StoreError| {
        ToolError::with_hint(
            ErrorKind::Unknown,
            format!("the budget counters are unusable: {e}"),
            "Answer without the sub-question.",
        )
    };
    let mut tier = if r.tier == "cheap" || turn.tier == Tier::Cheap {
        Tier::Cheap
    } else {
        Tier::Normal
    };
    match budget.state(tr.cost_usd).await.map_err(counters)? {
        BudgetState::Normal => {}
        BudgetState::Soft { .. } => tier = Tier::Cheap,
        BudgetState::Hard { reason } => {
            return Err(refused(tr, &r.tool, tier, &reason, &[], started));
        }
    }
    let mut request = ChatRequest::new(
        r.system.as_deref().unwrap_or(DEFAULT_SUB_SYSTEM),
        vec![Message::user(r.prompt.as_str())],
        Vec::new(),
    );
    request.max_tokens = r.max_tokens;
    request.tier = tier;
    request.role = turn.role.clone();
    let resp = provider.complete_metered(&request, meter).await;
    let charges = meter.take().map_err(counters)?;
    match resp {
        Ok(resp) => {
            let (usd, input, output) = add(tr, &charges);
            let ans = SubAnswer {
                text: resp.text.clone(),
                provider: resp.provider.clone(),
                model: resp.model.clone(),
                tier: tier_name(tier),
                input_tokens: input,
                output_tokens: output,
                cost_usd: usd,
                finish_reason: resp.finish_reason.as_str().to_string(),
            };
            tr.steps.push(TraceStep::SubCall {
                tool_name: r.tool,
                provider: ans.provider.clone(),
                model: ans.model.clone(),
                tier,
                prompt_tokens: ans.input_tokens,
                response_tokens: ans.output_tokens,
                finish_reason: ans.finish_reason.clone(),
                problem: (!resp.tool_calls.is_empty()).then(|| {
                    format!(
                        "the model answered with {} tool call(s) although none was offered; they were ignored",
                        resp.tool_calls.len()
                    )
                }),
                cost_usd: ans.cost_usd,
                wall_ms: started.elapsed().as_millis() as u64,
                attempts: resp.attempts,
            });
            Ok(ans)
        }
        Err(ProviderError::Budget(reason)) => {
            Err(refused(tr, &r.tool, tier, &reason, &charges, started))
        }
        Err(e) => Err(failed(tr, &charges, r.tool, tier, &e, started)),
    }
}

/// A sub-question a hard cap refused (reached already, or its maximum
/// estimate not reservable): trace it (with the billed tries before, if
/// any) and the tool's `quota-exceeded`.
fn refused(
    tr: &mut ExecutionTrace,
    tool: &str,
    tier: Tier,
    reason: &str,
    charges: &[Charge],
    started: Instant,
) -> ToolError {
    let message = format!("budget hard cap: {reason}: no model call was made");
    let (usd, input, output) = add(tr, charges);
    tr.steps.push(TraceStep::SubCall {
        tool_name: tool.to_string(),
        provider: charges
            .last()
            .map(|c| c.provider.clone())
            .unwrap_or_default(),
        model: charges.last().map(|c| c.model.clone()).unwrap_or_default(),
        tier,
        prompt_tokens: input,
        response_tokens: output,
        finish_reason: "refused".into(),
        problem: Some(message.clone()),
        cost_usd: usd,
        wall_ms: started.elapsed().as_millis() as u64,
        attempts: Vec::new(),
    });
    ToolError::with_hint(
        ErrorKind::QuotaExceeded,
        message,
        "The turn's budget is spent: do not ask sub-questions again; answer with what you have.",
    )
    .retriable(false)
}

/// A sub-question no provider answered: add the billed tries (settled by
/// the meter), trace it, and the tool's error.
fn failed(
    tr: &mut ExecutionTrace,
    charges: &[Charge],
    tool: String,
    tier: Tier,
    err: &ProviderError,
    started: Instant,
) -> ToolError {
    let attempts = match err {
        ProviderError::AllFailed(a) => a.clone(),
        _ => Vec::new(),
    };
    let (usd, tin, tout) = add(tr, charges);
    let last = attempts.last();
    tr.steps.push(TraceStep::SubCall {
        tool_name: tool,
        provider: last.map(|a| a.provider.clone()).unwrap_or_default(),
        model: last.map(|a| a.model.clone()).unwrap_or_default(),
        tier,
        prompt_tokens: tin,
        response_tokens: tout,
        finish_reason: "error".into(),
        problem: Some(err.to_string()),
        cost_usd: usd,
        wall_ms: started.elapsed().as_millis() as u64,
        attempts,
    });
    let kind = match err {
        ProviderError::NoAllowedProvider(_) | ProviderError::ScriptExhausted(_) => {
            ErrorKind::ExternalError
        }
        _ => ErrorKind::NetworkError,
    };
    // Not retriable: the door would run the tool again, and with it another
    // model call (the router has retried and failed over already).
    ToolError::with_hint(
        kind,
        format!("the model did not answer the sub-question: {err}"),
        "Answer without the sub-question.",
    )
    .retriable(false)
}
