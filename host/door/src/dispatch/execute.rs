//! Stage 8, execute: the only code that runs a tool. A component runs in a
//! fresh sandbox instance holding exactly its bindings ([`run`]); a host
//! built-in runs in-process, bounded by the same deadline. Before a
//! side-effecting step, the tool's `dry-run` runs with the dry-run bindings
//! and its output is the step's pre-image (what crash recovery hands to
//! `compensate` for a step whose outcome was never logged); `execute` is
//! retried while its error is retriable, running it again is safe (the tool
//! is idempotent, or the failed attempt provably sent nothing:
//! `capsaga_core::retry::Repeat`) and the host's retry policy allows, each
//! retry logged.

use super::DispatchError;
use crate::clock::deadline_from_now;
use crate::host::Host;
use crate::registry::{LoadedTool, ToolSource};
use crate::saga::Saga;
use crate::sandbox::factors::fs::journal::CallJournal;
use crate::sandbox::{
    Bindings, CallDiagnostics, CallRequest, CallResult, HOST_GRACE_MS, Op, SubModel,
};
use capsaga_core::capability::{Capability, FsAccess};
use capsaga_core::error::{ErrorKind, ToolError};
use capsaga_core::json::canonical;
use capsaga_core::policy::Limits;
use capsaga_core::retry::Repeat;
use capsaga_core::tool::{CallContext, ToolOutput};
use serde_json::Value;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// One run of one export.
pub(super) struct Run<'a> {
    /// The tool's name (for logs and errors).
    pub label: &'a str,
    /// What runs it.
    pub source: &'a ToolSource,
    /// Which export.
    pub op: &'a Op,
    /// What its grants bind.
    pub bindings: &'a Bindings,
    /// Its limits.
    pub limits: &'a Limits,
    /// The call context.
    pub ctx: &'a CallContext,
    /// The arguments, canonical JSON text and value.
    pub args_text: &'a str,
    /// The same arguments, parsed.
    pub args: &'a Value,
    /// The model the entry point lends to the tool's `llm` import (only an
    /// `execute` of an agent turn's call has one).
    pub sub_model: Option<&'a Arc<dyn SubModel>>,
}

/// Run one export: the only place a tool runs.
pub(super) async fn run(host: &Host, r: Run<'_>) -> (CallResult, CallDiagnostics) {
    match r.source {
        ToolSource::Component(prepared) | ToolSource::Neuron(prepared) => {
            host.sandbox
                .call_with_model(
                    CallRequest {
                        tool: r.label,
                        prepared,
                        bindings: r.bindings,
                        limits: r.limits,
                        ctx: r.ctx,
                        args_json: r.args_text,
                        op: r.op,
                    },
                    r.sub_model,
                )
                .await
        }
        ToolSource::Builtin(b) => {
            let started = Instant::now();
            let budget = Duration::from_millis(r.limits.deadline_ms + HOST_GRACE_MS);
            let res =
                match tokio::time::timeout(budget, b.call(r.op, r.ctx, r.args, r.bindings)).await {
                    Ok(res) => res,
                    Err(_) => Err(ToolError::with_hint(
                        ErrorKind::Timeout,
                        format!(
                            "tool `{}` ({}) ran past its deadline of {} ms",
                            r.label,
                            r.op.name(),
                            r.limits.deadline_ms
                        ),
                        "Try a smaller request.",
                    )),
                };
            let diagnostics = CallDiagnostics {
                wall_ms: started.elapsed().as_millis() as u64,
                ..CallDiagnostics::default()
            };
            (res, diagnostics)
        }
    }
}

fn expect_output(res: CallResult, op: &str) -> Result<ToolOutput, ToolError> {
    res.and_then(|o| {
        o.ok_or_else(|| {
            ToolError::with_hint(
                ErrorKind::Unknown,
                format!("{op} returned no output"),
                "Report the tool.",
            )
        })
    })
}

/// `dry-run` of `tool` with its dry-run bindings and `ctx` (marked dry-run).
pub(super) async fn dry_run(
    host: &Host,
    tool: &LoadedTool,
    ctx: &CallContext,
    args_text: &str,
    args: &Value,
) -> (Result<ToolOutput, ToolError>, CallDiagnostics) {
    let ctx = CallContext {
        dry_run: true,
        ..ctx.clone()
    };
    let (res, diagnostics) = run(
        host,
        Run {
            label: &tool.meta.name,
            source: &tool.source,
            op: &Op::DryRun,
            bindings: &tool.bindings.dry_run,
            limits: &tool.limits,
            ctx: &ctx,
            args_text,
            args,
            sub_model: None,
        },
    )
    .await;
    (expect_output(res, "dry-run"), diagnostics)
}

/// The dry-run mode of the door: `dry-run` outside any saga.
pub(super) async fn preview(
    host: &Host,
    tool: &LoadedTool,
    args: &Value,
) -> (Result<ToolOutput, ToolError>, CallDiagnostics) {
    let ctx = CallContext {
        saga_id: String::new(),
        step_seq: 0,
        idempotency_key: String::new(),
        deadline_ms: deadline_from_now(tool.limits.deadline_ms),
        dry_run: true,
    };
    dry_run(host, tool, &ctx, &canonical(args), args).await
}

/// The pre-image of a side-effecting step: its dry-run output. A
/// side-effecting tool that supports dry-run never executes without one:
/// its failed dry-run fails the step (the error is returned), so a BEGIN
/// record of such a tool without a pre-image always means `execute` never
/// started (what recovery relies on, see `compensate`).
pub(super) async fn preimage(
    host: &Host,
    tool: &LoadedTool,
    ctx: &CallContext,
    args_text: &str,
    args: &Value,
) -> (Option<ToolOutput>, Option<ToolError>) {
    if !(tool.meta.has_side_effects && tool.meta.supports_dry_run) {
        return (None, None);
    }
    match dry_run(host, tool, ctx, args_text, args).await.0 {
        Ok(o) => (Some(o), None),
        Err(e) => {
            tracing::debug!(tool = %tool.meta.name, "dry-run before execute failed: {e}");
            (None, Some(e))
        }
    }
}

/// What the attempts of one step's `execute` get.
pub(super) struct Attempts<'a> {
    /// The call context (same idempotency key for every attempt).
    pub ctx: &'a CallContext,
    /// The arguments, canonical JSON text.
    pub args_text: &'a str,
    /// The same, parsed.
    pub args: &'a Value,
    /// The model lent to the tool's `llm` import.
    pub sub_model: Option<&'a Arc<dyn SubModel>>,
    /// The execute bindings with the step's file journal, and the journal
    /// (none when the step's files are not journaled).
    pub journal: Option<&'a (Bindings, CallJournal)>,
}

/// `execute`, retried while the tool says its error is retriable, running it
/// again is safe ([`repeat_of`]) and the host's retry policy allows, with
/// the same context (same idempotency key) and a fresh deadline per
/// attempt; each failed attempt that will be retried is logged as a RETRY
/// record. A retriable error that is not retried because the step may have
/// had its effect says so in its message. Every attempt may ask `sub_model`.
///
/// # Errors
/// [`DispatchError`] when a RETRY record cannot be written.
pub(super) async fn with_retries(
    host: &Host,
    saga: &Saga,
    tool: &LoadedTool,
    attempts: Attempts<'_>,
) -> Result<(Result<ToolOutput, ToolError>, CallDiagnostics), DispatchError> {
    let Attempts {
        ctx,
        args_text,
        args,
        sub_model,
        journal,
    } = attempts;
    // The step's file journal (issue 28) is lent to every attempt, and each
    // attempt is sealed when it ends.
    let bindings = journal.map_or(&tool.bindings.execute, |(b, _)| b);
    let mut attempt = 1u32;
    loop {
        let ctx = CallContext {
            deadline_ms: deadline_from_now(tool.limits.deadline_ms),
            ..ctx.clone()
        };
        if let Some((_, j)) = journal {
            super::files::start_call(j);
        }
        let (res, diagnostics) = run(
            host,
            Run {
                label: &tool.meta.name,
                source: &tool.source,
                op: &Op::Execute,
                bindings,
                limits: &tool.limits,
                ctx: &ctx,
                args_text,
                args,
                sub_model,
            },
        )
        .await;
        if let Some((_, j)) = journal {
            super::files::seal(j).await;
        }
        let res = expect_output(res, "execute");
        let Err(e) = &res else {
            return Ok((res, diagnostics));
        };
        let repeat = repeat_of(tool, &diagnostics);
        let Some(delay_ms) = host.retry.next_delay_ms(attempt, e, repeat) else {
            return Ok((not_repeated(res, repeat), diagnostics));
        };
        host.store
            .retry_attempt(saga.step(ctx.step_seq), attempt, delay_ms, e)
            .await?;
        tokio::time::sleep(Duration::from_millis(delay_ms)).await;
        attempt += 1;
    }
}

/// Whether running `tool` again after a failed attempt (with these
/// diagnostics) is safe: its meta says idempotent, or it holds no writable
/// grant and every outgoing request of the attempt was refused by the
/// guard (`denied`) or failed before a connection was made (`unsent`).
fn repeat_of(tool: &LoadedTool, diagnostics: &CallDiagnostics) -> Repeat {
    let network_only = matches!(&tool.source, ToolSource::Component(_))
        && tool.grants.as_ref().is_ok_and(|g| {
            g.iter().all(|c| {
                !matches!(
                    c,
                    Capability::Fs {
                        access: FsAccess::Write,
                        ..
                    }
                )
            })
        });
    let all_unsent = diagnostics
        .net
        .iter()
        .all(|r| r.outcome == "denied" || r.outcome == "unsent");
    Repeat::of(
        tool.meta.idempotent,
        network_only,
        diagnostics.net.len(),
        all_unsent,
    )
}

/// A retriable error of a step that is not repeated because it may have
/// had its effect: marked not retriable, saying why, so neither the model
/// nor a later driver repeats it blindly.
fn not_repeated(
    res: Result<ToolOutput, ToolError>,
    repeat: Repeat,
) -> Result<ToolOutput, ToolError> {
    match res {
        Err(mut e) if e.retriable && repeat == Repeat::Unsafe => {
            e.retriable = false;
            e.message = format!(
                "{} (not retried: the tool is not idempotent and the request may have reached its destination)",
                e.message
            );
            e.llm_hint = "The call may have taken effect: check (e.g. read the resource) before sending it again.".into();
            Err(e)
        }
        other => other,
    }
}
