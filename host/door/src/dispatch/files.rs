//! The host's file journal in the door (issue 28): which steps have their
//! files journaled, the journal lent to their calls, and the restore of a
//! step's files during a rollback.
//!
//! - **Which**: every step of a tool with an `fs:write` grant, unless the
//!   policy turns the host's rollback off for it (`[fs] host_rollback`,
//!   `[tools.X] host_rollback = false`). The journal is opened before the
//!   step's BEGIN ([`lend`]), so a journaled step always has one, even one
//!   a crash stopped before it ran: its tool's `compensate` is then
//!   journaled and undone too, and cannot disturb what older steps expect.
//!   A journal that cannot be opened fails the step before it runs (never
//!   unjournaled).
//! - **Lent**: the step's calls get bindings carrying the journal
//!   (`FsBinding::journal`); the sandbox's filesystem functions and the
//!   built-ins journal through it. Each call is sealed when it ends
//!   ([`seal`]): the fingerprint of every path it changed, synced, before
//!   the step's outcome is logged.
//! - **Restored** (stage 10, [`undo_step`]): for each step with a journal,
//!   newest first, the restore is planned (paths someone else changed since
//!   are left alone), then the tool's own `compensate` runs (lent the
//!   journal too: whatever it changes is journaled and undone with the
//!   rest), then the host restores the journal in reverse. The tool's
//!   `compensate` runs first because it undoes what the host cannot see
//!   (a request it sent); the host's restore comes last, so the files end
//!   as they were before the step whatever `compensate` did. The step is
//!   COMPENSATED when the files were all restored and either the tool's
//!   `compensate` succeeded or the tool's grants reach nothing but files
//!   (no `net:`, no `secret:`); otherwise COMPENSATION_FAILED with what was
//!   left. What the host did, per path, is logged as an `FS_RESTORE`
//!   record.

use super::DispatchError;
use crate::host::Host;
use crate::registry::LoadedTool;
use crate::sandbox::Bindings;
use crate::sandbox::factors::fs::journal::CallJournal;
use crate::store::{StepRow, StepStatus};
use capsaga_core::capability::Capability;
use capsaga_core::error::{ErrorKind, ToolError};
use capsaga_core::policy::fs::JournalSync;
use capsaga_guest_fs::journal::{self as gj, JournalConfig, SyncMode};
use capsaga_guest_fs::{Expected, RestoreReport, Roots, StepJournal, fold};
use std::sync::atomic::{AtomicBool, Ordering};

/// The journal directory and caps from the policy.
pub(super) fn config(host: &Host) -> JournalConfig {
    let fs = &host.config.policy.fs;
    JournalConfig {
        dir: host.config.state_dir.join("fs-journal"),
        call_cap_bytes: fs.journal_call_bytes,
        saga_cap_bytes: fs.journal_saga_bytes,
        sync: match fs.journal_sync {
            JournalSync::Destructive => SyncMode::Destructive,
            JournalSync::Every => SyncMode::Every,
        },
    }
}

fn host_error(message: String) -> ToolError {
    ToolError::with_hint(
        ErrorKind::Unknown,
        message,
        "The host could not record this step's files; retry later or ask the operator.",
    )
}

/// Journals of sagas untouched for `journal_keep_days` are removed once per
/// process.
static PRUNED: AtomicBool = AtomicBool::new(false);

/// Open the journal of step `seq` of `saga_id` when `tool`'s files are
/// journaled, and return the execute bindings with it attached.
///
/// # Errors
/// A `ToolError` (the step must not run) when the journal cannot be opened.
pub(super) async fn lend(
    host: &Host,
    saga_id: &str,
    seq: u64,
    tool: &LoadedTool,
) -> Result<Option<(Bindings, CallJournal)>, ToolError> {
    let writable = tool.bindings.execute.fs.writable();
    if writable.is_empty() || !host.config.policy.fs.host_rollback_for(&tool.meta.name) {
        return Ok(None);
    }
    let cfg = config(host);
    let keep = host.config.policy.fs.journal_keep_days;
    let saga = saga_id.to_string();
    let opened = tokio::task::spawn_blocking(move || {
        if !PRUNED.swap(true, Ordering::Relaxed) {
            gj::prune(&cfg.dir, keep);
        }
        let roots = Roots::open(&writable)?;
        StepJournal::open(&cfg, &saga, seq, roots)
    })
    .await
    .map_err(|e| host_error(format!("the journal task failed: {e}")))?
    .map_err(|e| host_error(format!("the host cannot journal this step's files: {e}")))?;
    let journal = CallJournal::new(opened);
    let mut bindings = tool.bindings.execute.clone();
    bindings.fs.journal = Some(journal.clone());
    Ok(Some((bindings, journal)))
}

/// Start a call of the step: its own byte count.
pub(super) fn start_call(journal: &CallJournal) {
    let _ = journal.with(|g| {
        g.start_call();
        Ok(())
    });
}

/// End a call of the step: record its paths' fingerprints, sync.
pub(super) async fn seal(journal: &CallJournal) {
    let j = journal.clone();
    let r = tokio::task::spawn_blocking(move || {
        j.with(|g| {
            g.seal()
                .map_err(|e| capsaga_guest_fs::JournalError::Io(e.to_string()))
        })
    })
    .await;
    if let Err(e) | Ok(Err(e)) = r.map_err(|e| capsaga_guest_fs::JournalError::Io(e.to_string())) {
        tracing::warn!(
            "the end of a journaled call was not recorded ({e}): its rollback will not tell others' changes from its own"
        );
    }
}

/// The grants a step ran with, parsed (unparsable ones are skipped: the
/// tool compensation reports them).
fn grants(step: &StepRow) -> Vec<Capability> {
    step.grants
        .iter()
        .filter_map(|g| Capability::parse(g).ok())
        .collect()
}

/// True when the step's grants reach something besides files (a request
/// sent can only be undone by the tool's own `compensate`).
fn reaches_beyond_files(step: &StepRow) -> bool {
    grants(step)
        .iter()
        .any(|c| matches!(c, Capability::Net { .. } | Capability::Secret { .. }))
}

/// Reopen the journal of `step`, with the directories it was granted for
/// writing; `None` when it has none.
pub(super) async fn reopen(host: &Host, step: &StepRow) -> Result<Option<CallJournal>, ToolError> {
    let cfg = config(host);
    let writable = host
        .sandbox
        .factors()
        .configure(&grants(step))
        .fs
        .writable();
    let (saga, seq) = (step.saga_id.clone(), step.step_seq);
    let opened = tokio::task::spawn_blocking(move || {
        let roots = Roots::open(&writable).unwrap_or_default();
        StepJournal::reopen(&cfg, &saga, seq, roots)
    })
    .await
    .map_err(|e| host_error(format!("the journal task failed: {e}")))?
    .map_err(|e| host_error(format!("the step's file journal cannot be read: {e}")))?;
    Ok(opened.map(CallJournal::new))
}

/// What to do with a step that has a journal.
pub(super) enum Stage {
    /// Nothing: its tool needs no compensation and its files were restored
    /// before or it changed none (what it left is folded into the
    /// expectations).
    Skip,
    /// Restore it (after the tool's compensation when `tool` is true).
    Restore {
        /// Run the tool's own compensate first.
        tool: bool,
    },
}

/// Decide what a rollback does with `step`'s journal; a step skipped folds
/// what its last restore left into `expected`.
pub(super) fn stage(journal: &CallJournal, step: &StepRow, expected: &mut Expected) -> Stage {
    let tool_due = step.has_side_effects && step.status.needs_compensation();
    let seen = journal.with(|g| Ok((g.changes(), g.last_finished(), g.open_plan().is_some())));
    let Ok((changes, finished, open)) = seen else {
        return Stage::Restore { tool: tool_due };
    };
    let restored = matches!(&finished, Some((_, true, _))) && !open;
    let nothing_due =
        !tool_due && (changes == 0 || restored || step.status == StepStatus::Compensated);
    if nothing_due {
        if let Some((_, _, left)) = finished {
            fold(expected, &left);
        }
        return Stage::Skip;
    }
    Stage::Restore { tool: tool_due }
}

/// Plan the restore (or resume an interrupted one).
pub(super) async fn plan(
    journal: &CallJournal,
    expected: &Expected,
) -> Result<capsaga_guest_fs::Plan, ToolError> {
    let j = journal.clone();
    let expected = expected.clone();
    tokio::task::spawn_blocking(move || {
        j.with(|g| match g.open_plan() {
            Some(p) => Ok(p),
            None => g
                .plan(&expected)
                .map_err(|e| capsaga_guest_fs::JournalError::Io(e.to_string())),
        })
    })
    .await
    .map_err(|e| host_error(format!("the journal task failed: {e}")))?
    .map_err(|e| host_error(format!("the restore cannot be planned: {e}")))
}

/// Restore the journal for `plan` under `step`'s write grants; fold what
/// it left into `expected`.
pub(super) async fn restore(
    host: &Host,
    journal: &CallJournal,
    plan: capsaga_guest_fs::Plan,
    step: &StepRow,
    expected: &mut Expected,
) -> Result<RestoreReport, ToolError> {
    let allowed = host
        .sandbox
        .factors()
        .configure(&grants(step))
        .fs
        .writable();
    let j = journal.clone();
    let (report, left) = tokio::task::spawn_blocking(move || {
        j.with(|g| {
            let report = g.restore(&plan, &allowed);
            Ok((report, g.last_finished().map(|(_, _, l)| l)))
        })
    })
    .await
    .map_err(|e| host_error(format!("the journal task failed: {e}")))?
    .map_err(|e| host_error(format!("the restore failed: {e}")))?;
    if let Some(left) = left {
        fold(expected, &left);
    }
    Ok(report)
}

/// The step's result from the tool's compensation (if it ran) and the
/// host's restore.
pub(super) fn outcome(
    step: &StepRow,
    tool: Option<Result<(), ToolError>>,
    report: &RestoreReport,
) -> Result<(), ToolError> {
    let problems = report.problems();
    let files = if problems.is_empty() {
        Ok(())
    } else {
        Err(ToolError::with_hint(
            ErrorKind::Unrevertible,
            format!(
                "the host did not restore {} path(s) of step {}: {}",
                problems.len(),
                step.step_seq,
                problems.join("; ")
            ),
            "A human must look at these files: they were changed by someone else since the step, or cannot be reached.",
        ))
    };
    match (tool, files) {
        (None | Some(Ok(())), files) => files,
        (Some(Err(e)), Ok(())) if !reaches_beyond_files(step) => {
            tracing::info!(
                step = step.step_seq,
                "the tool's compensate failed ({}); the host restored every file the step changed, which is all it could change",
                e.message
            );
            Ok(())
        }
        (Some(Err(e)), Ok(())) => Err(e),
        (Some(Err(e)), Err(mut f)) => {
            f.message = format!(
                "{}; and the tool's compensate failed: {}",
                f.message, e.message
            );
            Err(f)
        }
    }
}

/// The `FS_RESTORE` record of a restore.
pub(super) fn record(
    report: &RestoreReport,
    tool: Option<&Result<(), ToolError>>,
) -> serde_json::Value {
    let mut v = serde_json::to_value(report).unwrap_or(serde_json::Value::Null);
    if let (Some(m), Some(t)) = (v.as_object_mut(), tool) {
        m.insert(
            "tool_compensate".into(),
            match t {
                Ok(()) => "ok".into(),
                Err(e) => format!("failed: {}", e.message).into(),
            },
        );
    }
    v
}

/// Remove the journals of a saga whose rollback is complete.
pub(super) async fn forget(host: &Host, saga_id: &str) {
    let dir = config(host).dir;
    let saga = saga_id.to_string();
    let _ = tokio::task::spawn_blocking(move || gj::remove_saga(&dir, &saga)).await;
}

/// Whether the saga has any journal (a rollback without one skips the
/// journal work).
pub(super) async fn saga_has_journals(host: &Host, saga_id: &str) -> bool {
    let Ok(p) = gj::step_path(&config(host).dir, saga_id, 0) else {
        return false;
    };
    let Some(dir) = p.parent().map(std::path::Path::to_path_buf) else {
        return false;
    };
    tokio::task::spawn_blocking(move || dir.is_dir())
        .await
        .unwrap_or(false)
}

/// Roll `step` back with its journal: the plan, the tool's compensation
/// (when `tool`, run by `compensate_tool` with the journal lent), the
/// restore, the `FS_RESTORE` record (written with `fence`, the token this
/// process holds on the saga: refused once another host took it over).
/// Returns the step's result and the report.
///
/// # Errors
/// [`DispatchError`] when the log cannot be written (fenced included).
pub(super) async fn undo_step<F, Fut>(
    host: &Host,
    fence: u64,
    step: &StepRow,
    journal: &CallJournal,
    tool: bool,
    expected: &mut Expected,
    compensate_tool: F,
) -> Result<(Result<(), ToolError>, Option<RestoreReport>), DispatchError>
where
    F: FnOnce(CallJournal) -> Fut,
    Fut: std::future::Future<Output = Result<(), ToolError>>,
{
    let plan = match plan(journal, expected).await {
        Ok(p) => p,
        Err(e) => {
            let tool_result = if tool {
                Some(compensate_tool(journal.clone()).await)
            } else {
                None
            };
            return Ok((tool_result.unwrap_or(Err(e.clone())).and(Err(e)), None));
        }
    };
    let tool_result = if tool {
        start_call(journal);
        Some(compensate_tool(journal.clone()).await)
    } else {
        None
    };
    let report = match restore(host, journal, plan, step, expected).await {
        Ok(r) => r,
        Err(e) => return Ok((Err(e), None)),
    };
    host.store
        .fs_restored(
            crate::store::StepKey {
                saga_id: &step.saga_id,
                fence,
                step_seq: step.step_seq,
            },
            &record(&report, tool_result.as_ref()),
        )
        .await?;
    Ok((outcome(step, tool_result, &report), Some(report)))
}
