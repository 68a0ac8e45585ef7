//! The operator's approval commands: `approvals`, `approve`, `deny`.

use super::render::{Out, clip};
use super::{Failure, exit};
use capsaga_core::approval::ApprovalStatus;
use capsaga_core::fsm::State;
use capsaga_door::dispatch::{Dispatcher, decider};
use capsaga_door::host::Host;
use capsaga_store::ApprovalRow;
use serde_json::json;

fn print_approval(a: &ApprovalRow) {
    outln!(
        "{}  {:<8} saga {} step {}  {}",
        a.approval_id,
        a.status,
        a.saga_id,
        a.step_seq,
        a.created_at
    );
    outln!(
        "    tool {} (component {})",
        a.binding.tool_id,
        a.binding.tool_hash
    );
    outln!(
        "    args {} (sha256 {})",
        clip(&a.args.to_string(), 160),
        a.binding.args_hash
    );
    outln!("    why: {}", a.reason);
    outln!("    preview: {}", clip(&a.summary, 200));
    if let Some(p) = &a.preview
        && let Some(effects) = p.get("effects").and_then(|e| e.as_array())
    {
        for e in effects.iter().filter_map(|e| e.as_str()) {
            outln!("      - {}", clip(e, 200));
        }
    }
    if let Some(by) = &a.decided_by {
        outln!(
            "    decided by {by} at {}",
            a.decided_at.as_deref().unwrap_or("?")
        );
    }
    if let Some(note) = &a.note {
        outln!("    note: {}", clip(note, 300));
    }
    if let Some(e) = &a.expires_at
        && matches!(a.status, ApprovalStatus::Pending | ApprovalStatus::Approved)
    {
        outln!("    expires at {e}");
    }
    if let Some(r) = &a.replaces {
        outln!("    replaces approval {r}");
    }
    if let Some(s) = &a.claimed_saga {
        outln!(
            "    claimed by saga {s} step {} at {}",
            a.claimed_step.map(|x| x.to_string()).unwrap_or_default(),
            a.claimed_at.as_deref().unwrap_or("?")
        );
    }
}

/// `capsaga approvals [--all]`.
pub(crate) async fn list(host: &Host, out: &Out, all: bool) -> Result<u8, Failure> {
    let rows = host.store.approvals(all).await?;
    if out.json {
        out.json(&json!({"approvals": rows}));
    } else if rows.is_empty() {
        outln!(
            "{}",
            if all {
                "no approvals"
            } else {
                "no approval is waiting"
            }
        );
    } else {
        for a in &rows {
            print_approval(a);
        }
    }
    Ok(exit::OK)
}

/// `capsaga approve <id> [--note ..] [--resume]`.
pub(crate) async fn approve(
    door: &Dispatcher,
    out: &Out,
    id: &str,
    note: Option<&str>,
    resume: bool,
) -> Result<u8, Failure> {
    let decided = door.decide(id, true, &decider("cli"), note).await?;
    let a = &decided.approval;
    if resume && decided.resumable {
        if !out.json {
            outln!(
                "approved {} ({} with args sha256 {})",
                a.approval_id,
                a.binding.tool_id,
                a.binding.args_hash
            );
        }
        return super::run::resume(door, out, &a.saga_id).await;
    }
    if out.json {
        out.json(
            &json!({"approval": a, "resumable_saga": decided.resumable.then_some(&a.saga_id)}),
        );
    } else {
        outln!(
            "approved {}: {} may now run once with exactly these arguments (sha256 {})",
            a.approval_id,
            a.binding.tool_id,
            a.binding.args_hash
        );
        if decided.resumable {
            outln!(
                "saga {} is parked on it: run `capsaga resume --saga {}`",
                a.saga_id,
                a.saga_id
            );
        } else {
            outln!(
                "the next call of {} with these arguments (from any saga or agent turn) will claim it",
                a.binding.tool_id
            );
        }
    }
    Ok(exit::OK)
}

/// `capsaga deny <id> [--note ..]`: a plan or call saga parked on the
/// approval is rolled back now, unless a live process drives it (it then
/// sees the denial itself).
pub(crate) async fn deny(
    door: &Dispatcher,
    out: &Out,
    id: &str,
    note: Option<&str>,
) -> Result<u8, Failure> {
    let decided = door.decide(id, false, &decider("cli"), note).await?;
    let (a, report) = (&decided.approval, &decided.rollback);
    if out.json {
        out.json(&json!({"approval": a, "rollback": report}));
    } else {
        outln!(
            "denied {}: {} will not run",
            a.approval_id,
            a.binding.tool_id
        );
        if let Some(r) = report {
            outln!("saga {} was parked on it:", a.saga_id);
            for u in &r.undone {
                match &u.result {
                    Ok(()) => outln!("  compensated step {} ({})", u.seq, u.tool),
                    Err(e) => outln!("  COMPENSATION FAILED step {} ({}): {e}", u.seq, u.tool),
                }
                for line in u.files.iter().flat_map(super::render::restore_lines) {
                    outln!("    {line}");
                }
            }
            outln!("saga state: {}", r.final_state);
        }
    }
    Ok(match report.as_ref().map(|r| r.final_state) {
        Some(State::FailedRollbackPartial) => exit::ROLLBACK_PARTIAL,
        _ => exit::OK,
    })
}
