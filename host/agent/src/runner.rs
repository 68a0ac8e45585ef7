//! The ReAct loop with native function calling (seed 000 §2-§5): the model
//! exchange and the trace. Every tool call goes through the dispatch door
//! (`capsaga_door::dispatch`), which resolves, validates, decides, asks for
//! approval, logs and runs it as a step of the turn's saga; this loop only
//! talks to the model and records what happened.
//!
//! One turn is one saga. Before each model call the budget is checked (a
//! hard cap reached ends the turn as `budget_hit` with no call; a soft cap
//! moves the call to the cheaper tier) and each try reserves its maximum
//! estimate ([`super::meter`]: refused past a hard cap, nothing sent);
//! each answer is a Thought, priced from the price table, its reservation
//! settled in the day's ledger. A call the door refuses as
//! unknown or invalid is answered with a `tool_error` message the model can
//! act on; two invalid calls in a row end the turn as `tool_hallucination`.
//! A call the policy denies ends the turn as `policy_denied`; one that
//! needs a human and is not approved ends it as `user_aborted` (see
//! [`super::approval`]). Results of `returns-untrusted` tools are wrapped in
//! `<untrusted>` markers; results over [`MAX_RESULT_BYTES`] are truncated by
//! the host with a note. A final answer ends the saga (Done); any other end
//! rolls back what committed. Critic steps record the turn's fitness and
//! every neutralised marker-like sequence (safety). A tool's sub-question
//! to the model (the `llm` import) is answered by the turn's own provider
//! and budget while the call runs, and traced as a SubCall
//! ([`super::subcall`]).

use super::budget::Budget;
use super::meter::Meter;
pub use super::options::{AgentError, TurnOptions};
use super::provider::{ChatRequest, Message, Provider, Tier, ToolCall, ToolChoice, ToolSpec};
use super::reply::Next;
use super::subcall::TurnModel;
use super::trace::{self, ExecutionTrace, Outcome, TraceStep, Validation};
use capsaga_core::budget::BudgetState;
use capsaga_core::fsm::State;
use capsaga_core::policy::Autonomy;
use capsaga_core::prompt::{CatalogEntry, DEFAULT_IDENTITY, system_prompt};
use capsaga_door::dispatch::{Approver, Args, Call, DispatchError, Dispatcher, Hold};
use capsaga_door::host::Host;
use capsaga_door::saga::Saga;
use capsaga_store::clock::now_rfc3339;
use std::sync::Arc;
use std::time::Instant;
use tracing::Instrument;

/// Tool results longer than this many bytes are truncated for the model.
pub const MAX_RESULT_BYTES: usize = 2048;
/// Invalid calls in a row that end the turn as `tool_hallucination`.
pub const MAX_CONSECUTIVE_INVALID: u32 = 2;

/// Truncate `text` to [`MAX_RESULT_BYTES`] on a character boundary, with a
/// note giving the full size.
pub fn truncate_result(text: &str) -> String {
    truncate_result_at(text, MAX_RESULT_BYTES)
}

/// Truncate `text` to `limit` bytes (the policy's `[agent]
/// max_result_bytes`) on a character boundary, with a note giving the
/// full size.
pub fn truncate_result_at(text: &str, limit: usize) -> String {
    if text.len() <= limit {
        return text.to_string();
    }
    let mut cut = limit;
    while !text.is_char_boundary(cut) {
        cut -= 1;
    }
    format!(
        "{}\n[... truncated, {} bytes total]",
        &text[..cut],
        text.len()
    )
}

/// The catalog the model sees at the operator's autonomy level.
pub fn catalog(host: &Arc<Host>) -> Vec<ToolSpec> {
    catalog_at(host, Autonomy::Autonomous)
}

/// The catalog the model sees at autonomy `requested` (narrowed by the
/// operator's): the door's catalog (callable tools whose calls the policy
/// does not always deny) as function specs.
pub fn catalog_at(host: &Arc<Host>, requested: Autonomy) -> Vec<ToolSpec> {
    Dispatcher::new(host.clone())
        .catalog(requested)
        .into_iter()
        .map(|t| ToolSpec {
            name: t.meta.name.clone(),
            description: t.meta.description.clone(),
            parameters: t.meta.args_schema.clone(),
            grants: t.grant_strings(),
        })
        .collect()
}

/// Run one agent turn for `task` with `provider`. The trace is stored before
/// it is returned.
///
/// # Errors
/// [`AgentError`] when the door, the store or the price table fails;
/// everything the model or a tool does wrong ends up in the trace's outcome
/// instead.
pub async fn run_turn(
    host: &Arc<Host>,
    provider: &dyn Provider,
    task: &str,
    opts: &TurnOptions,
) -> Result<ExecutionTrace, AgentError> {
    // The turn's `invoke_agent` span (issue 30): its model calls and tool
    // calls are its children.
    let span = capsaga_telemetry::spans::invoke_agent(provider.name());
    let result = turn(host, provider, task, opts)
        .instrument(span.clone())
        .await;
    super::observe::turn_ended(&span, &result);
    result
}

async fn turn(
    host: &Arc<Host>,
    provider: &dyn Provider,
    task: &str,
    opts: &TurnOptions,
) -> Result<ExecutionTrace, AgentError> {
    let started = Instant::now();
    let door = Dispatcher::new(host.clone());
    let budget = Budget::open(&host.config, host.store.clone())?;
    // A required core memory file missing refuses the session before any
    // saga starts (seed 004 `ensure_core`).
    let identity = match &host.memory {
        Some(hm) => Some(super::remember::identity(hm)?),
        None => None,
    };
    let meter = Meter::new(&budget);
    let model = super::remember::Summariser {
        meter: &meter,
        budget: &budget,
        provider,
    };
    let mut turn = Turn::begin(&door, provider, task, opts).await?;
    if let (Some(hm), Some(identity)) = (&host.memory, &identity)
        && let Err(e) = super::remember::prepare(
            super::remember::TurnParts {
                tr: &mut turn.tr,
                request: &mut turn.request,
                saga: &mut turn.saga,
            },
            hm,
            identity,
            model,
            task,
            opts,
        )
        .await
    {
        if let Some(saga) = &turn.tr.saga_id {
            hm.end_saga(saga);
        }
        door.abort(&mut turn.saga).await?;
        return Err(e);
    }
    for _ in 0..opts.max_steps {
        if turn.paused().await? {
            break;
        }
        // A pause while the model answers stops the turn at once (the
        // request is dropped); read-only mode lets it answer.
        let mut switch = host.switch.watch();
        let thought = tokio::select! {
            r = turn.think(&meter, &budget, provider) => Some(r?),
            _ = capsaga_door::switch::stopped(&mut switch, false) => None,
        };
        let Some(thought) = thought else {
            turn.paused().await?;
            break;
        };
        let calls = match thought {
            Some(calls) => calls,
            None => break,
        };
        if !turn
            .act(&calls, opts.approver.as_ref(), &meter, &budget, provider)
            .await?
        {
            break;
        }
    }
    turn.end(started, model, opts).await
}

/// The trace of a turn just begun on `saga`.
fn new_trace(
    saga: &Saga,
    provider: &dyn Provider,
    task: &str,
    opts: &TurnOptions,
) -> ExecutionTrace {
    let autonomy = saga.autonomy();
    ExecutionTrace {
        trace_id: uuid::Uuid::new_v4().to_string(),
        session_id: opts.session_id.clone(),
        channel: opts.channel.clone(),
        saga_id: Some(saga.id().to_string()),
        saga_state: None,
        started_at: now_rfc3339(),
        finished_at: None,
        user_message: task.to_string(),
        steps: Vec::new(),
        final_response: None,
        cost_usd: 0.0,
        prompt_tokens: 0,
        response_tokens: 0,
        wall_time_ms: 0,
        outcome: Outcome::TimeoutSteps,
        provider_mode: if opts.provider_mode.is_empty() {
            provider.name().to_string()
        } else {
            opts.provider_mode.clone()
        },
        autonomy: Some(autonomy),
        after_untrusted: false,
        scope: None,
    }
}

/// One turn in progress.
pub(super) struct Turn<'a> {
    door: &'a Dispatcher,
    pub(super) saga: Saga,
    /// The turn's hold on its saga (`dispatch::scope`): while the turn
    /// runs, no other scope of this process drives the saga.
    _hold: Hold,
    pub(super) tr: ExecutionTrace,
    pub(super) request: ChatRequest,
    /// The names of the catalog, for unknown-tool messages.
    pub(super) callable: Vec<String>,
    pub(super) invalid_in_a_row: u32,
    /// Tool calls the door admitted so far (an invalid call does not
    /// count), and the turn's limit ([`TurnOptions::max_tool_calls`]).
    calls_made: u32,
    max_tool_calls: Option<u32>,
    /// The saga's state after a failed step rolled it back.
    pub(super) rollback_state: Option<State>,
    /// Most bytes of a tool result shown to the model.
    pub(super) result_cap: usize,
}

impl<'a> Turn<'a> {
    /// Start the saga and the trace, and build the first request.
    async fn begin(
        door: &'a Dispatcher,
        provider: &dyn Provider,
        task: &str,
        opts: &TurnOptions,
    ) -> Result<Turn<'a>, AgentError> {
        let host = door.host();
        let (mut saga, hold) = door.open(&opts.principal, opts.scope, task, None).await?;
        door.set_autonomy(&mut saga, opts.autonomy.unwrap_or(Autonomy::Autonomous));
        // The user's message is the turn's trusted source (issue 47).
        saga.flow_mut().user_message(&opts.principal.name, task);
        let autonomy = saga.autonomy();
        let tr = new_trace(&saga, provider, task, opts);
        let tools = catalog_at(host, autonomy);
        let entries: Vec<CatalogEntry<'_>> = tools
            .iter()
            .map(|t| CatalogEntry {
                name: &t.name,
                description: &t.description,
                grants: &t.grants,
            })
            .collect();
        let mut request = ChatRequest::new(
            system_prompt(DEFAULT_IDENTITY, &entries, ""),
            vec![Message::user(task)],
            tools.clone(),
        );
        request.max_tokens = host
            .config
            .policy
            .agent
            .max_tokens
            .unwrap_or(capsaga_core::providers::DEFAULT_MAX_TOKENS);
        request.role = opts.role.clone();
        let max_tool_calls = opts
            .max_tool_calls
            .or(host.config.policy.agent.max_tool_calls);
        request.tool_choice = match max_tool_calls {
            // No call allowed at all: every model call asks for the answer.
            Some(0) => ToolChoice::None,
            _ => opts
                .tool_choice
                .clone()
                .or_else(|| host.config.policy.agent.tool_choice.clone())
                .unwrap_or_default(),
        };
        if let Some(name) = request.tool_choice.tool()
            && !tools.iter().any(|t| t.name == name)
        {
            let err = AgentError::ToolChoiceNotOffered {
                tool: name.to_string(),
                offered: tools
                    .iter()
                    .map(|t| t.name.as_str())
                    .collect::<Vec<_>>()
                    .join(", "),
            };
            door.abort(&mut saga).await?;
            return Err(err);
        }
        Ok(Turn {
            door,
            saga,
            _hold: hold,
            tr,
            request,
            callable: tools.into_iter().map(|t| t.name).collect(),
            calls_made: 0,
            max_tool_calls,
            invalid_in_a_row: 0,
            rollback_state: None,
            result_cap: host
                .config
                .policy
                .agent
                .max_result_bytes
                .map_or(MAX_RESULT_BYTES, |b| {
                    b.min(capsaga_core::providers::MAX_RESULT_BYTES_CEILING) as usize
                }),
        })
    }

    /// Whether the operator's kill switch stops the turn before its next
    /// model call (paused: every call, and so the turn, ends; the saga is
    /// rolled back by [`Turn::end`] like any turn that did not succeed).
    async fn paused(&mut self) -> Result<bool, AgentError> {
        let sw = self
            .door
            .host()
            .switch
            .current()
            .await
            .map_err(AgentError::Store)?;
        if sw.mode.allows_turns() {
            return Ok(false);
        }
        self.tr.outcome = Outcome::UserAborted;
        self.tr.final_response = Some(format!(
            "paused: the operator paused capsaga{}; the turn stopped and what it did is rolled back",
            sw.note.map(|n| format!(" ({n})")).unwrap_or_default()
        ));
        Ok(true)
    }

    /// One model call: the budget first (a hard cap reached ends the turn
    /// before anything is sent; a soft cap picks the cheaper tier), then
    /// the call, each of its tries reserved and settled by `meter` (a
    /// reservation the hard caps refuse ends the turn with that try not
    /// sent), then the answer as a Thought. `None` when the turn ends here
    /// (final answer, budget, provider failure), else the tool calls to
    /// make.
    async fn think(
        &mut self,
        meter: &Meter<'_>,
        budget: &Budget,
        provider: &dyn Provider,
    ) -> Result<Option<Vec<ToolCall>>, AgentError> {
        let tr = &mut self.tr;
        self.request.tier = match budget.state(tr.cost_usd).await? {
            BudgetState::Normal => Tier::Normal,
            BudgetState::Soft { reason } => {
                if self.request.tier == Tier::Normal {
                    tracing::warn!("{reason}: using the cheaper tier");
                }
                Tier::Cheap
            }
            BudgetState::Hard { reason } => {
                tr.outcome = Outcome::BudgetHit;
                tr.final_response = Some(format!("budget_hit: {reason}; no model call was made"));
                return Ok(None);
            }
        };
        let model = super::remember::Summariser {
            meter,
            budget,
            provider,
        };
        super::remember::fit_hot_blocks(tr, &mut self.request, model).await?;
        let t0 = Instant::now();
        let span =
            capsaga_telemetry::spans::chat(provider.name(), &provider.model_for(self.request.tier));
        let resp = provider
            .complete_metered(&self.request, meter)
            .instrument(span.clone())
            .await;
        let charges = meter.take()?;
        super::observe::chat_done(&span, &resp, &charges);
        drop(span);
        let resp = match resp {
            Ok(r) => r,
            Err(e) => {
                super::reply::record_failure(tr, &charges, provider, &self.request, &e, t0);
                return Ok(None);
            }
        };
        // Classified by `super::reply`: a truncated or refused answer ends
        // the turn with none of its calls run.
        let next = super::reply::record_answer(tr, &charges, &self.request, &resp, t0);
        self.request.messages.push(Message::assistant(
            resp.text.clone(),
            resp.tool_calls.clone(),
        ));
        // A plan declared in the answer's text fixes the turn's tool scope.
        super::scope::declare(&mut self.saga, tr, &resp.text);
        match next {
            Next::Calls => Ok(Some(resp.tool_calls)),
            // Paused by the provider: the model goes on with no call made.
            Next::Continue => Ok(Some(Vec::new())),
            Next::End => Ok(None),
            Next::Answer => {
                tr.final_response = Some(resp.text.clone());
                tr.outcome = Outcome::Success;
                Ok(None)
            }
        }
    }

    /// Submit the model's tool calls to the door, in order, lending each the
    /// turn's model for the `llm` import (answered meanwhile by
    /// [`super::subcall::serve`] with `provider`, `meter` and `budget`).
    /// False when the turn ends here.
    async fn act(
        &mut self,
        calls: &[ToolCall],
        approver: &dyn Approver,
        meter: &Meter<'_>,
        budget: &Budget,
        provider: &dyn Provider,
    ) -> Result<bool, AgentError> {
        for call in calls {
            let t1 = Instant::now();
            if let Some(limit) = self.max_tool_calls.filter(|l| self.calls_made >= *l) {
                self.over_limit(call, limit, t1);
                continue;
            }
            let (model, mut asks) = TurnModel::channel();
            let door = self.door;
            let saga = &mut self.saga;
            // The handle is dropped when the call is done, which ends `serve`.
            let submit = async move {
                let model = model;
                let c = Call::new(&call.name, Args::Text(&call.arguments))
                    .with_approver(approver)
                    .with_sub_model(&model);
                door.submit(saga, c).await
            };
            let serve = super::subcall::serve(
                &mut asks,
                &mut self.tr,
                meter,
                budget,
                provider,
                &self.request,
            );
            let (submitted, ()) = tokio::join!(submit, serve);
            let submitted = submitted?;
            if !self.answer(call, submitted, t1) {
                return Ok(false);
            }
            if self.invalid_in_a_row == 0 {
                // A call the door admitted. It meets a forced choice: the
                // model decides from now on (after an invalid call the
                // choice stays forced, so the next answer is the call
                // corrected or a second invalid one, which ends the turn
                // `tool_hallucination`; a `none` stays). It counts toward
                // the turn's limit, whose last call makes the next model
                // call ask for the answer.
                self.calls_made += 1;
                if matches!(
                    self.request.tool_choice,
                    ToolChoice::Required | ToolChoice::Tool(_)
                ) {
                    self.request.tool_choice = ToolChoice::Auto;
                }
                if self.max_tool_calls == Some(self.calls_made) {
                    self.request.tool_choice = ToolChoice::None;
                }
            }
        }
        Ok(true)
    }

    /// End the saga (Done after a final answer, else rolled back), add the
    /// fitness critic, and store the trace.
    async fn end(
        mut self,
        started: Instant,
        model: super::remember::Summariser<'_>,
        opts: &TurnOptions,
    ) -> Result<ExecutionTrace, AgentError> {
        let final_state = match (self.tr.outcome, self.rollback_state) {
            (_, Some(state)) => state,
            (Outcome::Success, None) => match self.door.finish(&mut self.saga).await {
                // Not committed (a step in doubt): rolled back instead.
                Err(DispatchError::InDoubt { report, .. }) => report.final_state,
                other => other?,
            },
            (_, None) => self.door.abort(&mut self.saga).await?.final_state,
        };
        let mut tr = self.tr;
        tr.saga_state = Some(final_state);
        let tainted = self.saga.flow().tainted();
        tr.after_untrusted = tr.final_response.is_some() && tainted;
        tr.steps
            .push(fitness(&tr, final_state, self.saga.side_effects()));
        let host = self.door.host();
        let summary = super::remember::episode_summary(host, model, &mut tr).await;
        tr.finished_at = Some(now_rfc3339());
        tr.wall_time_ms = started.elapsed().as_millis() as u64;
        trace::save(&*host.store, &tr).await?;
        super::remember::finish(host, &tr, opts, summary, tainted).await;
        Ok(tr)
    }
}

/// The closing critic step: how the turn ended and why.
fn fitness(tr: &ExecutionTrace, state: State, side_effects: u64) -> TraceStep {
    let thoughts = tr
        .steps
        .iter()
        .filter(|s| matches!(s, TraceStep::Thought { .. }))
        .count();
    let actions = tr
        .steps
        .iter()
        .filter(|s| matches!(s, TraceStep::Action { .. }))
        .count();
    let invalid = tr
        .steps
        .iter()
        .filter(
            |s| matches!(s, TraceStep::Action { validation, .. } if *validation != Validation::Ok),
        )
        .count();
    TraceStep::Critic {
        purpose: "fitness".into(),
        input: format!(
            "{thoughts} model call(s), {actions} tool call(s) ({invalid} invalid), {side_effects} side effect(s) committed, ${:.6}",
            tr.cost_usd
        ),
        verdict: if tr.outcome == Outcome::Success {
            "pass".into()
        } else {
            "fail".into()
        },
        reason: format!("outcome {}, saga {state}", tr.outcome.as_str()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn truncation_note_and_boundary() {
        assert_eq!(truncate_result("short"), "short");
        let long = "é".repeat(2000);
        let t = truncate_result(&long);
        assert!(t.ends_with("[... truncated, 4000 bytes total]"), "{t}");
        assert!(t.len() < 2100);
    }
}
