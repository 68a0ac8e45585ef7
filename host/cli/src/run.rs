//! Commands that run tools: `call`, `run --plan`, `agent`, `rollback`.

use super::render::{Out, error_line, output_line};
use super::{Failure, exit};
use capsaga_agent::budget::BudgetLoadError;
use capsaga_agent::router::RequestRoute;
use capsaga_agent::runner::{AgentError, TurnOptions, run_turn};
use capsaga_agent::select::{Selection, process_env, select};
use capsaga_agent::trace::Outcome;
use capsaga_core::fsm::State;
use capsaga_core::policy::Autonomy;
use capsaga_core::providers::parse_list;
use capsaga_door::dispatch::{
    Act, Args, Call, Dispatcher, Outcome as Step, Recovered, Refusal, Scope, Via,
};
use capsaga_door::host::Host;
use capsaga_door::plan::{self, Plan, PlanStep};
use capsaga_door::saga::RollbackReport;
use capsaga_store::ApprovalRow;
use serde_json::json;
use std::path::Path;
use std::sync::Arc;

fn state_code(state: State) -> u8 {
    match state {
        State::FailedRolledBack => exit::ROLLED_BACK,
        State::FailedRollbackPartial => exit::ROLLBACK_PARTIAL,
        _ => exit::OK,
    }
}

fn print_rollback(rb: &RollbackReport) {
    for u in &rb.undone {
        match &u.result {
            Ok(()) => outln!("  compensated step {} ({})", u.seq, u.tool),
            Err(e) => outln!(
                "  COMPENSATION FAILED step {} ({}): {}",
                u.seq,
                u.tool,
                error_line(e)
            ),
        }
        if let Some(files) = &u.files {
            for line in super::render::restore_lines(files) {
                outln!("    {line}");
            }
        }
    }
    outln!("saga state: {}", rb.final_state);
}

/// `capsaga call <tool> '<json>' [--dry-run]`.
pub(crate) async fn call(
    door: &Dispatcher,
    out: &Out,
    tool: &str,
    args: &str,
    dry_run: bool,
) -> Result<u8, Failure> {
    if dry_run {
        return call_dry_run(door, out, tool, args).await;
    }
    // Unknown tools, tools that are not callable and invalid arguments fail
    // before any saga starts; other refusals are the saga's step.
    let args = match door.check(tool, Args::Text(args)) {
        Ok((_, args)) => args,
        Err(r) => match r.refusal {
            Refusal::UnknownTool(e) => {
                return Err(Failure {
                    code: exit::NOT_FOUND,
                    message: e.to_model_message(),
                });
            }
            Refusal::InvalidArgs(e) => {
                return Err(Failure {
                    code: exit::TOOL_ERROR,
                    message: e.to_model_message(),
                });
            }
            // Not callable (not listed, or not granted what it declares): a
            // configuration problem for the operator, refused before any saga.
            Refusal::NotCallable(e) => {
                let declared = door
                    .host()
                    .registry
                    .get(tool)
                    .map(|t| t.meta.capabilities.clone())
                    .unwrap_or_default();
                return Err(Failure {
                    code: exit::CONFIG,
                    message: e.for_operator(&declared),
                });
            }
            _ => capsaga_core::validate::parse_args(args).unwrap_or_else(|_| json!({})),
        },
    };
    // A call is a one-step plan, stored with its saga so that a call parked
    // for approval can be resumed (`capsaga resume`).
    let one = Plan {
        description: format!("call {tool}"),
        steps: vec![PlanStep {
            tool: tool.to_string(),
            args,
        }],
    };
    let report = plan::run_as(door, &one, None, Scope::Call).await?;
    Ok(print_call_report(out, tool, &report))
}

/// `capsaga call --dry-run`: the door's dry-run mode (read-only sandbox,
/// nothing logged).
async fn call_dry_run(door: &Dispatcher, out: &Out, tool: &str, args: &str) -> Result<u8, Failure> {
    let submitted = door.dry_run(Call::new(tool, Args::Text(args))).await;
    let (result, diag) = match submitted.outcome {
        Step::Previewed {
            result,
            diagnostics,
        } => (result, diagnostics),
        Step::Refused {
            refusal: Refusal::NotCallable(e),
            ..
        } => {
            let declared = door
                .host()
                .registry
                .get(tool)
                .map(|t| t.meta.capabilities.clone())
                .unwrap_or_default();
            return Err(Failure {
                code: exit::CONFIG,
                message: e.for_operator(&declared),
            });
        }
        Step::Refused {
            refusal: Refusal::UnknownTool(e),
            ..
        } => {
            return Err(Failure {
                code: exit::NOT_FOUND,
                message: e.to_model_message(),
            });
        }
        Step::Refused {
            refusal: Refusal::InvalidArgs(e),
            ..
        } => {
            return Err(Failure {
                code: exit::TOOL_ERROR,
                message: e.to_model_message(),
            });
        }
        other => {
            return Err(Failure {
                code: exit::INTERNAL,
                message: format!("unexpected outcome of a dry-run: {other:?}"),
            });
        }
    };
    Ok(match result {
        Ok(o) => {
            if out.json {
                out.json(&json!({"dry_run": true, "output": o, "wall_ms": diag.wall_ms}));
            } else {
                outln!("dry-run {tool}: {}", output_line(&o));
                outln!(
                    "{}",
                    serde_json::to_string_pretty(&o.data).unwrap_or_default()
                );
            }
            exit::OK
        }
        Err(e) => {
            if out.json {
                out.json(&json!({"dry_run": true, "error": e}));
            } else {
                outln!(
                    "dry-run {tool} failed: {}\nhint: {}",
                    error_line(&e),
                    e.llm_hint
                );
            }
            exit::TOOL_ERROR
        }
    })
}

/// Print the one step of a `capsaga call` saga; its exit code.
fn print_call_report(out: &Out, tool: &str, report: &plan::PlanReport) -> u8 {
    let state = report.final_state;
    let step = report.steps.first();
    let status = step.map(|s| s.status).unwrap_or("refused");
    let code = match status {
        "committed" | "replayed" => exit::OK,
        "awaiting_approval" => exit::AWAITING_APPROVAL,
        _ => exit::TOOL_ERROR,
    };
    if out.json {
        let body = match step {
            Some(s) if s.output.is_some() => {
                json!({"step_seq": s.step_seq, "output": s.output, "replayed": status == "replayed"})
            }
            Some(s) if s.error.is_some() => json!({"step_seq": s.step_seq, "error": s.error}),
            _ => json!({"awaiting_approval": report.awaiting_approval}),
        };
        out.json(&json!({"saga_id": report.saga_id, "saga_state": state, "result": body}));
        return code;
    }
    match (
        step.and_then(|s| s.output.as_ref()),
        step.and_then(|s| s.error.as_ref()),
    ) {
        (Some(output), _) => {
            outln!("{tool}: {}", output_line(output));
            outln!(
                "{}",
                serde_json::to_string_pretty(&output.data).unwrap_or_default()
            );
        }
        (None, Some(error)) => {
            outln!(
                "{tool} failed: {}\nhint: {}",
                error_line(error),
                error.llm_hint
            );
        }
        (None, None) => {}
    }
    if let Some(a) = &report.awaiting_approval {
        print_parked(&report.saga_id, a);
    }
    outln!("saga {} ended {state}", report.saga_id);
    code
}

/// What a parked saga waits for, and what the operator can do.
fn print_parked(saga_id: &str, a: &ApprovalRow) {
    outln!("approval needed: {}", a.approval_id);
    outln!(
        "  tool:    {} (component {})",
        a.binding.tool_id,
        a.binding.tool_hash
    );
    outln!(
        "  args:    {} (sha256 {})",
        super::render::clip(&a.args.to_string(), 200),
        a.binding.args_hash
    );
    outln!("  why:     {}", a.reason);
    outln!("  preview: {}", a.summary);
    outln!(
        "  decide with `capsaga approve {id}` or `capsaga deny {id}`, then `capsaga resume --saga {saga_id}`",
        id = a.approval_id
    );
}

/// `capsaga run --plan <file> [--saga <id>]`.
pub(crate) async fn plan(
    door: &Dispatcher,
    out: &Out,
    path: &Path,
    resume: Option<&str>,
) -> Result<u8, Failure> {
    let plan = Plan::from_file(path, &door.host().config.home).map_err(|e| Failure {
        code: exit::CONFIG,
        message: e.to_string(),
    })?;
    plan.validate(door).map_err(|e| Failure {
        code: exit::CONFIG,
        message: e.to_string(),
    })?;
    let report = plan::run(door, &plan, resume).await?;
    print_plan_report(out, &report, &plan.description);
    Ok(plan_code(&report))
}

fn plan_code(report: &plan::PlanReport) -> u8 {
    if report.awaiting_approval.is_some() {
        exit::AWAITING_APPROVAL
    } else {
        state_code(report.final_state)
    }
}

/// `capsaga resume --saga <id>`.
pub(crate) async fn resume(door: &Dispatcher, out: &Out, saga_id: &str) -> Result<u8, Failure> {
    let report = plan::resume(door, saga_id).await?;
    print_plan_report(out, &report, "resumed");
    Ok(plan_code(&report))
}

fn print_plan_report(out: &Out, report: &plan::PlanReport, description: &str) {
    if out.json {
        out.json(&report);
    } else {
        outln!("saga {}  ({})", report.saga_id, description);
        for s in &report.steps {
            let seq = s
                .step_seq
                .map(|q| format!("step {q}"))
                .unwrap_or_else(|| "-".into());
            match (&s.output, &s.error) {
                (Some(o), _) => outln!(
                    "  {seq:<8} {:<10} {:<9} {}",
                    s.tool,
                    s.status,
                    output_line(o)
                ),
                (_, Some(e)) => outln!(
                    "  {seq:<8} {:<10} {:<9} {}",
                    s.tool,
                    s.status,
                    error_line(e)
                ),
                _ => outln!("  {seq:<8} {:<10} {}", s.tool, s.status),
            }
        }
        if let Some(a) = &report.awaiting_approval {
            print_parked(&report.saga_id, a);
        }
        if let Some(rb) = &report.rollback {
            outln!("rollback:");
            print_rollback(rb);
        } else {
            outln!("saga state: {}", report.final_state);
        }
    }
}

/// What `capsaga agent` was asked.
pub(crate) struct AgentRequest {
    pub script: Option<std::path::PathBuf>,
    pub task: String,
    pub max_steps: usize,
    pub role: Option<String>,
    pub allow_providers: Option<String>,
    pub prefer_providers: Option<String>,
    pub autonomy: Option<String>,
    pub session: Option<String>,
    pub sender: Option<String>,
    pub tool_choice: Option<capsaga_core::policy::tool_choice::ToolChoice>,
    pub max_tool_calls: Option<u32>,
}

/// The principal a command-line turn runs as: the local operator
/// (`cli:$USER`), or `cli:NAME` with `--sender NAME` (the operator at the
/// terminal speaking for a named user; its name keys the session and
/// episodic memory, and records the saga).
fn cli_principal(sender: Option<&str>) -> capsaga_core::principal::Principal {
    match sender {
        Some(n) => capsaga_core::principal::Principal::local(
            "cli",
            Some(n),
            capsaga_core::principal::Role::Operator,
        ),
        None => capsaga_door::dispatch::decider("cli"),
    }
}

fn agent_failure(e: AgentError) -> Failure {
    Failure {
        code: match &e {
            AgentError::Budget(BudgetLoadError::Store(s)) | AgentError::Store(s) => {
                super::store_code(s)
            }
            AgentError::Budget(_) | AgentError::Memory(_) => exit::CONFIG,
            AgentError::ToolChoiceNotOffered { .. } => exit::USAGE,
            AgentError::Dispatch(_) => exit::INTERNAL,
        },
        message: e.to_string(),
    }
}

/// `capsaga chat`: one turn per line of standard input, one session.
pub(crate) async fn chat(
    host: &Arc<Host>,
    out: &Out,
    script: Option<std::path::PathBuf>,
    session: Option<String>,
    sender: Option<String>,
    max_steps: usize,
) -> Result<u8, Failure> {
    use tokio::io::AsyncBufReadExt as _;
    let selection = Selection {
        script,
        ..Selection::default()
    };
    let selection = capsaga_agent::keys::with_sealed(host, selection).await?;
    let selected = select(&host.config, &process_env(), &selection).map_err(|e| Failure {
        code: exit::CONFIG,
        message: e.to_string(),
    })?;
    let opts = TurnOptions {
        max_steps,
        provider_mode: selected.mode.clone(),
        principal: cli_principal(sender.as_deref()),
        session_id: session.unwrap_or_else(|| uuid::Uuid::new_v4().to_string()),
        ..TurnOptions::default()
    };
    if host.memory.is_none() && !out.json {
        errln!(
            "capsaga: memory is off ([memory] enabled = false): each line is a turn without the earlier ones"
        );
    }
    if !out.json {
        outln!(
            "model: {}  session: {}  (/exit to end)",
            selected.mode,
            opts.session_id
        );
    }
    let mut lines = tokio::io::BufReader::new(tokio::io::stdin()).lines();
    let mut code = exit::OK;
    // A line longer than this is refused (a turn's task, not a file).
    const MAX_LINE: usize = 64 * 1024;
    while let Ok(Some(line)) = lines.next_line().await {
        let task = line.trim();
        if task.is_empty() {
            continue;
        }
        if task == "/exit" {
            break;
        }
        if task.len() > MAX_LINE {
            errln!("capsaga: a line over {MAX_LINE} bytes is not a turn; skipped");
            continue;
        }
        let tr = run_turn(host, selected.provider.as_ref(), task, &opts)
            .await
            .map_err(agent_failure)?;
        if tr.outcome != Outcome::Success {
            code = exit::NOT_SUCCESS;
        }
        if out.json {
            out.json(&json!({"trace_id": tr.trace_id, "session": opts.session_id, "outcome": tr.outcome.as_str(), "answer": tr.final_response}));
        } else {
            outln!(
                "{}",
                tr.final_response
                    .as_deref()
                    .map(|f| super::render::clip(f, 4000))
                    .unwrap_or_else(|| format!("({})", tr.outcome.as_str()))
            );
        }
    }
    Ok(code)
}

/// `capsaga agent [--script <file>] "<task>"`.
pub(crate) async fn agent(host: &Arc<Host>, out: &Out, req: &AgentRequest) -> Result<u8, Failure> {
    let config_error = |message: String| Failure {
        code: exit::CONFIG,
        message,
    };
    let autonomy = req
        .autonomy
        .as_deref()
        .map(str::parse::<Autonomy>)
        .transpose()
        .map_err(config_error)?;
    if let Some(r) = &req.role
        && !capsaga_core::providers::is_role_name(r)
    {
        return Err(config_error(format!(
            "--role `{}`: lower-case letters, digits and `_` only",
            super::render::clip(r, 40)
        )));
    }
    let selection = Selection {
        script: req.script.clone(),
        route: RequestRoute {
            preferred: req
                .prefer_providers
                .as_deref()
                .map(parse_list)
                .unwrap_or_default(),
            allowed: req.allow_providers.as_deref().map(parse_list),
        },
        ..Selection::default()
    };
    let selection = capsaga_agent::keys::with_sealed(host, selection).await?;
    let selected = select(&host.config, &process_env(), &selection)
        .map_err(|e| config_error(e.to_string()))?;
    let opts = TurnOptions {
        max_steps: req.max_steps,
        autonomy,
        role: req.role.clone(),
        provider_mode: selected.mode.clone(),
        approver: capsaga_agent::approval::detect(),
        principal: cli_principal(req.sender.as_deref()),
        tool_choice: req.tool_choice.clone(),
        max_tool_calls: req.max_tool_calls,
        ..TurnOptions::default()
    };
    let opts = match &req.session {
        Some(s) => TurnOptions {
            session_id: s.clone(),
            ..opts
        },
        None => opts,
    };
    if !out.json {
        outln!("model: {}", selected.mode);
    }
    let tr = run_turn(host, selected.provider.as_ref(), &req.task, &opts)
        .await
        .map_err(agent_failure)?;
    if out.json {
        out.json(&tr);
    } else {
        outln!(
            "trace {}  saga {}",
            tr.trace_id,
            tr.saga_id.as_deref().unwrap_or("-")
        );
        for s in &tr.steps {
            outln!("{}", super::render::trace_step_line(s));
        }
        if let Some(f) = &tr.final_response {
            outln!("answer: {}", super::render::clip(f, 500));
        }
        outln!(
            "outcome: {}  saga state: {}  tokens: {} in, {} out  cost: ${:.6}",
            tr.outcome.as_str(),
            tr.saga_state.map(|s| s.to_string()).unwrap_or_default(),
            tr.prompt_tokens,
            tr.response_tokens,
            tr.cost_usd
        );
    }
    Ok(match (tr.outcome, tr.saga_state) {
        (Outcome::Success, _) => exit::OK,
        (_, Some(State::FailedRollbackPartial)) => exit::ROLLBACK_PARTIAL,
        (Outcome::RolledBack, _) => exit::ROLLED_BACK,
        _ => exit::NOT_SUCCESS,
    })
}

/// `capsaga rollback --saga <id>`.
pub(crate) async fn rollback(door: &Dispatcher, out: &Out, saga_id: &str) -> Result<u8, Failure> {
    let who = capsaga_door::dispatch::decider("cli");
    let (mut saga, _hold) = door
        .reopen(saga_id, Via::Operator, Act::Rollback, &who)
        .await?;
    let before = saga.state();
    let report = door.recover(&mut saga).await?;
    if out.json {
        out.json(&json!({"saga_id": saga_id, "state_before": before, "report": report}));
    } else {
        outln!("saga {saga_id} was {before}");
        if report.undone.is_empty() {
            outln!("  nothing to compensate");
        }
        print_rollback(&report);
        if before == State::FailedRollbackPartial && report.final_state == State::FailedRolledBack {
            outln!(
                "  every step is compensated now: operator transition to FailedRolledBack logged"
            );
        }
    }
    Ok(
        if report.final_state == State::FailedRollbackPartial || !report.all_compensated() {
            exit::ROLLBACK_PARTIAL
        } else {
            exit::OK
        },
    )
}

/// `capsaga undo --saga <id>`: compensate a Done saga's committed steps.
pub(crate) async fn undo(door: &Dispatcher, out: &Out, saga_id: &str) -> Result<u8, Failure> {
    let who = capsaga_door::dispatch::decider("cli");
    let (mut saga, _hold) = door.reopen(saga_id, Via::Operator, Act::Undo, &who).await?;
    let before = saga.state();
    let report = door.undo(&mut saga).await.map_err(|e| match e {
        capsaga_door::dispatch::DispatchError::Transition(t) => Failure {
            code: exit::CONFIG,
            message: format!(
                "saga {saga_id} is {before}: only a Done saga can be undone ({t}); an unfinished one is rolled back with `capsaga rollback --saga`"
            ),
        },
        other => other.into(),
    })?;
    if out.json {
        out.json(&json!({"saga_id": saga_id, "state_before": before, "report": report}));
    } else {
        println!("saga {saga_id} was {before}");
        if report.undone.is_empty() {
            println!("  nothing to compensate (no committed step with side effects)");
        }
        print_rollback(&report);
    }
    Ok(
        if report.final_state == State::FailedRollbackPartial || !report.all_compensated() {
            exit::ROLLBACK_PARTIAL
        } else {
            exit::OK
        },
    )
}

/// `capsaga recover`: what start-up recovery did.
pub(crate) fn recover_report(out: &Out, recovered: &[Recovered]) -> u8 {
    if out.json {
        out.json(&json!({"recovered": recovered}));
    } else if recovered.is_empty() {
        outln!("nothing to recover: no saga was left unfinished by a process that died");
    } else {
        for r in recovered {
            outln!("saga {} was {}:", r.saga_id, r.state_before);
            print_rollback(&r.report);
        }
    }
    if recovered
        .iter()
        .any(|r| r.report.final_state == State::FailedRollbackPartial)
    {
        exit::ROLLBACK_PARTIAL
    } else {
        exit::OK
    }
}
