//! Stage 10, compensation: roll a saga back, compensating its steps in
//! reverse order (DESIGN §5).
//!
//! Each side-effecting step that is COMMIT (or BEGIN: in doubt after a crash,
//! or COMPENSATION_FAILED: an operator retry) is compensated by a fresh
//! instance of exactly the tool it ran with (by its pinned identity hash),
//! given exactly the grants it ran with, the same arguments and the output
//! it returned (the dry-run pre-image for an in-doubt step). Success is
//! logged COMPENSATED, failure COMPENSATION_FAILED, and the rollback goes on
//! with the earlier steps either way: undo as much as can be undone.
//! Read-only steps have nothing to undo and keep their status.
//!
//! A step whose files the host journaled (issue 28, `files`) is also rolled
//! back by the host: after the tool's `compensate` (lent the journal), the
//! host restores every path the step changed, in reverse, whatever that
//! `compensate` did or failed to do; a failed step that changed files is
//! restored too (FAIL → COMPENSATED).

use super::execute::{self, Run};
use super::{DispatchError, files, guardrail, resolve};
use crate::clock::deadline_from_now;
use crate::host::Host;
use crate::saga::{RollbackReport, Saga, StepUndo};
use crate::sandbox::Op;
use crate::sandbox::factors::fs::journal::CallJournal;
use crate::store::{StepRow, StepStatus};
use capsaga_core::capability::Capability;
use capsaga_core::error::{ErrorKind, ToolError};
use capsaga_core::fsm::{Event, OperatorEvent, State};
use capsaga_core::json::canonical;
use capsaga_core::tool::{CallContext, ToolOutput};
use tracing::Instrument;

/// Move `saga` to Compensating by `event` and roll it back.
///
/// # Errors
/// [`DispatchError`].
pub(super) async fn rollback(
    host: &Host,
    saga: &mut Saga,
    event: Event,
) -> Result<RollbackReport, DispatchError> {
    saga.pending_success = false;
    let moved = guardrail::transition(host, saga, event).await;
    if let Err(e) = moved {
        return Err(left_in_doubt(host, saga, e));
    }
    finish_rollback(host, saga).await
}

/// `e` from a rollback of `saga`: a store failure (but a refusal by
/// fencing: another process drives it now) leaves it in doubt, to be
/// rolled back again once the store answers (`doubt.rs`).
fn left_in_doubt(host: &Host, saga: &mut Saga, e: DispatchError) -> DispatchError {
    if let DispatchError::Store(s) = &e {
        saga.store_failed(s, &host.in_doubt);
    }
    e
}

/// Compensate what a Compensating saga still holds, then end it
/// FailedRolledBack (all compensated) or FailedRollbackPartial (no longer
/// in doubt either way).
///
/// # Errors
/// [`DispatchError`]; a store failure leaves the saga in doubt.
pub(super) async fn finish_rollback(
    host: &Host,
    saga: &mut Saga,
) -> Result<RollbackReport, DispatchError> {
    match compensate_and_end(host, saga).await {
        Ok(report) => {
            saga.doubt = None;
            Ok(report)
        }
        Err(e) => Err(left_in_doubt(host, saga, e)),
    }
}

async fn compensate_and_end(host: &Host, saga: &mut Saga) -> Result<RollbackReport, DispatchError> {
    let report = compensate_all(host, saga).await?;
    let end = if report.all_compensated() {
        Event::CompensationDone
    } else {
        Event::CompensationFailed
    };
    guardrail::transition(host, saga, end).await?;
    if saga.state == State::FailedRolledBack {
        // Everything is undone: the journals have served.
        files::forget(host, &saga.id).await;
    }
    Ok(RollbackReport {
        final_state: saga.state,
        ..report
    })
}

/// The operator's retry of a FailedRollbackPartial saga: compensate again
/// every step whose compensation failed (and anything else still holding an
/// effect), newest first. When every one is now COMPENSATED, the
/// operator-only transition `FailedRollbackPartial
/// --OperatorCompensationRetried--> FailedRolledBack` is applied and logged
/// with `actor: operator`; otherwise the saga stays FailedRollbackPartial.
///
/// # Errors
/// [`DispatchError`]; a saga in another state is refused by the guardrail.
pub(super) async fn retry(host: &Host, saga: &mut Saga) -> Result<RollbackReport, DispatchError> {
    if saga.state != State::FailedRollbackPartial {
        return Err(capsaga_core::fsm::TransitionDenied {
            from: saga.state,
            event: "OperatorCompensationRetried",
            reason: Some("only a FailedRollbackPartial saga can be retried".into()),
        }
        .into());
    }
    let report = compensate_all(host, saga).await?;
    let all_compensated = host.store.steps(&saga.id).await?.iter().all(|s| {
        s.status != StepStatus::CompensationFailed
            && (!s.has_side_effects || !s.status.needs_compensation())
    });
    let event = OperatorEvent::CompensationRetried { all_compensated };
    if let Ok(next) = host.guardrail.apply_operator(saga.state, event) {
        host.store
            .set_state(
                &saga.id,
                saga.fence,
                next,
                event.name(),
                Some(&serde_json::json!({"actor": "operator"})),
            )
            .await?;
        saga.state = next;
    }
    Ok(RollbackReport {
        final_state: saga.state,
        ..report
    })
}

/// Compensate every step of `saga_id` that needs it, newest first: by
/// the tool's own `compensate`, and for a step whose files the host
/// journaled, by the host's restore too (`files`; a failed step that
/// changed files is restored as well). Does not change the saga's
/// guardrail state (the callers above do).
///
/// # Errors
/// [`DispatchError`] when the log cannot be read or written.
async fn compensate_all(host: &Host, saga: &Saga) -> Result<RollbackReport, DispatchError> {
    let saga_id = saga.id.as_str();
    let mut steps = host.store.steps(saga_id).await?;
    steps.sort_by_key(|s| std::cmp::Reverse(s.step_seq));
    let journaled = files::saga_has_journals(host, saga_id).await;
    let mut expected = capsaga_guest_fs::Expected::new();
    let mut undone = Vec::new();
    for step in steps {
        let tool_due = step.has_side_effects && step.status.needs_compensation();
        let journal = if journaled {
            match files::reopen(host, &step).await {
                Ok(j) => j,
                Err(e) => {
                    tracing::warn!(step = step.step_seq, "{}", e.message);
                    None
                }
            }
        } else {
            None
        };
        // Each compensation that runs has its `saga.compensate` span
        // (issue 30), a child of whatever started the rollback.
        let span = || capsaga_telemetry::spans::compensation(saga_id, step.step_seq, &step.tool_id);
        let (result, report, span) = match journal {
            Some(j) => match files::stage(&j, &step, &mut expected) {
                files::Stage::Skip => continue,
                files::Stage::Restore { tool } => {
                    let s = &step;
                    let span = span();
                    let (result, report) = files::undo_step(
                        host,
                        saga.fence,
                        s,
                        &j,
                        tool,
                        &mut expected,
                        move |lent| async move { compensate_one(host, s, Some(&lent)).await },
                    )
                    .instrument(span.clone())
                    .await?;
                    (result, report, span)
                }
            },
            None if tool_due => {
                let span = span();
                let result = compensate_one(host, &step, None)
                    .instrument(span.clone())
                    .await;
                (result, None, span)
            }
            None => continue,
        };
        match &result {
            Ok(()) => capsaga_telemetry::spans::outcome(&span, "compensated"),
            Err(e) => {
                capsaga_telemetry::spans::outcome(&span, "compensation_failed");
                capsaga_telemetry::spans::fail(&span, &e.kind.to_string());
            }
        }
        drop(span);
        match &result {
            Ok(()) => host.store.compensated(saga.step(step.step_seq)).await?,
            Err(e) => {
                host.store
                    .compensation_failed(saga.step(step.step_seq), e)
                    .await?
            }
        }
        undone.push(StepUndo {
            seq: step.step_seq,
            tool: step.tool_id.clone(),
            was: step.status,
            result,
            files: report,
        });
    }
    let final_state = host
        .store
        .saga(saga_id)
        .await?
        .map(|s| s.state)
        .ok_or_else(|| DispatchError::NotFound(saga_id.to_string()))?;
    Ok(RollbackReport {
        undone,
        final_state,
    })
}

fn unrevertible(message: String, hint: &str) -> ToolError {
    ToolError::with_hint(ErrorKind::Unrevertible, message, hint)
}

/// The output `compensate` gets for a logged step: what execute returned,
/// or the dry-run pre-image for an in-doubt step (an empty output when
/// there is neither).
fn logged_output(step: &StepRow) -> Result<ToolOutput, ToolError> {
    let output_json = match step.status {
        StepStatus::Begin => step.preimage.clone(),
        _ => step.output.clone().or_else(|| step.preimage.clone()),
    };
    match output_json {
        Some(v) => serde_json::from_value::<ToolOutput>(v).map_err(|e| {
            unrevertible(
                format!(
                    "the logged output of step {} does not decode: {e}",
                    step.step_seq
                ),
                "The WAL row was altered; the operator must act.",
            )
        }),
        None => Ok(ToolOutput {
            data: serde_json::Value::Null,
            effects: Vec::new(),
            next_hint: None,
            summary: String::new(),
        }),
    }
}

fn logged_grants(step: &StepRow) -> Result<Vec<Capability>, ToolError> {
    step.grants
        .iter()
        .map(|g| {
            Capability::parse(g).map_err(|e| {
                unrevertible(
                    format!(
                        "the logged grants of step {} do not parse: {e}",
                        step.step_seq
                    ),
                    "The WAL row was altered; the operator must act.",
                )
            })
        })
        .collect()
}

/// The tool's own `compensate` for `step`, lent the step's file journal
/// when it has one (what it changes is then journaled and restored too).
async fn compensate_one(
    host: &Host,
    step: &StepRow,
    journal: Option<&CallJournal>,
) -> Result<(), ToolError> {
    // An in-doubt step of a tool that supports dry-run, logged without a
    // pre-image: the door never executes such a step (its dry-run failed,
    // see `execute::preimage`), so there is nothing to undo.
    if step.status == StepStatus::Begin
        && step.preimage.is_none()
        && host
            .registry
            .get(&step.tool_id)
            .is_some_and(|t| t.hash == step.tool_hash && t.meta.supports_dry_run)
    {
        return Ok(());
    }
    let source = resolve::pinned(host, &step.tool_id, &step.tool_hash).map_err(|e| {
        unrevertible(
            format!(
                "cannot load the component step {} ran with: {e}",
                step.step_seq
            ),
            "The operator must restore the component or undo the step by hand.",
        )
    })?;
    let mut bindings = host.sandbox.factors().configure(&logged_grants(step)?);
    bindings.fs.journal = journal.cloned();
    let output = logged_output(step)?;
    let limits = host.config.policy.tool(&step.tool_id).limits;
    let ctx = CallContext {
        saga_id: step.saga_id.clone(),
        step_seq: step.step_seq,
        idempotency_key: step.idempotency_key.clone(),
        deadline_ms: deadline_from_now(limits.deadline_ms),
        dry_run: false,
    };
    let (res, _diag) = execute::run(
        host,
        Run {
            label: &step.tool_id,
            source: &source,
            op: &Op::Compensate(output),
            bindings: &bindings,
            limits: &limits,
            ctx: &ctx,
            args_text: &canonical(&step.args),
            args: &step.args,
            sub_model: None,
        },
    )
    .await;
    res.map(|_| ())
}
