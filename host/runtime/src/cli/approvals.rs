//! The operator's approval commands: `approvals`, `approve`, `deny`.

use super::render::{Out, clip};
use super::{Failure, exit};
use crate::host::Host;
use crate::saga::Saga;
use crate::saga::owner;
use crate::wal::Wal;
use crate::wal::approvals::{ApprovalOpError, ApprovalRow};
use capsaga_core::fsm::State;
use serde_json::json;

impl From<ApprovalOpError> for Failure {
    fn from(e: ApprovalOpError) -> Self {
        let code = match &e {
            ApprovalOpError::Db(_) => exit::DATABASE,
            ApprovalOpError::NotFound(_) | ApprovalOpError::Ambiguous(_) => exit::NOT_FOUND,
            ApprovalOpError::Refused(_) => exit::NOT_SUCCESS,
        };
        Failure {
            code,
            message: e.to_string(),
        }
    }
}

fn print_approval(a: &ApprovalRow) {
    println!(
        "{}  {:<8} saga {} step {}  {}",
        a.approval_id, a.status, a.saga_id, a.step_seq, a.created_at
    );
    println!(
        "    tool {} (component {})",
        a.binding.tool_id, a.binding.tool_hash
    );
    println!(
        "    args {} (sha256 {})",
        clip(&a.args.to_string(), 160),
        a.binding.args_hash
    );
    println!("    why: {}", a.reason);
    println!("    preview: {}", clip(&a.summary, 200));
    if let Some(p) = &a.preview
        && let Some(effects) = p.get("effects").and_then(|e| e.as_array())
    {
        for e in effects.iter().filter_map(|e| e.as_str()) {
            println!("      - {}", clip(e, 200));
        }
    }
    if let Some(by) = &a.decided_by {
        println!(
            "    decided by {by} at {}",
            a.decided_at.as_deref().unwrap_or("?")
        );
    }
    if let Some(s) = &a.claimed_saga {
        println!(
            "    claimed by saga {s} step {} at {}",
            a.claimed_step.map(|x| x.to_string()).unwrap_or_default(),
            a.claimed_at.as_deref().unwrap_or("?")
        );
    }
}

/// `capsaga approvals [--all]`.
pub(crate) fn list(host: &Host, out: &Out, all: bool) -> Result<u8, Failure> {
    let rows = Wal::new(&host.db).approvals(all)?;
    if out.json {
        out.json(&json!({"approvals": rows}));
    } else if rows.is_empty() {
        println!(
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

/// True when `a`'s saga is parked on it and can be resumed from its stored
/// plan.
fn parked_on(host: &Host, a: &ApprovalRow) -> Result<Option<crate::wal::SagaRow>, Failure> {
    let wal = Wal::new(&host.db);
    let Some(saga) = wal.saga(&a.saga_id)? else {
        return Ok(None);
    };
    if saga.state != State::AwaitingApproval {
        return Ok(None);
    }
    let steps = wal.steps(&a.saga_id)?;
    // Parked on this approval: no step at its position was logged yet.
    if steps.iter().any(|s| s.step_seq >= a.step_seq) {
        return Ok(None);
    }
    Ok(Some(saga))
}

/// `capsaga approve <id> [--note ..] [--resume]`.
pub(crate) async fn approve(
    host: &Host,
    out: &Out,
    id: &str,
    note: Option<&str>,
    resume: bool,
) -> Result<u8, Failure> {
    let a = Wal::new(&host.db).decide_approval(
        id,
        true,
        &crate::saga::approve::decider("cli"),
        note,
    )?;
    let parked = parked_on(host, &a)?;
    let resumable = parked.is_some() && Wal::new(&host.db).saga_plan(&a.saga_id)?.is_some();
    if resume && resumable {
        if !out.json {
            println!(
                "approved {} ({} with args sha256 {})",
                a.approval_id, a.binding.tool_id, a.binding.args_hash
            );
        }
        return super::run::resume(host, out, &a.saga_id).await;
    }
    if out.json {
        out.json(&json!({"approval": a, "resumable_saga": resumable.then_some(&a.saga_id)}));
    } else {
        println!(
            "approved {}: {} may now run once with exactly these arguments (sha256 {})",
            a.approval_id, a.binding.tool_id, a.binding.args_hash
        );
        if resumable {
            println!(
                "saga {} is parked on it: run `capsaga resume --saga {}`",
                a.saga_id, a.saga_id
            );
        } else {
            println!(
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
    host: &Host,
    out: &Out,
    id: &str,
    note: Option<&str>,
) -> Result<u8, Failure> {
    let a = Wal::new(&host.db).decide_approval(
        id,
        false,
        &crate::saga::approve::decider("cli"),
        note,
    )?;
    let mut report = None;
    if let Some(saga) = parked_on(host, &a)? {
        let live = saga
            .owner
            .as_deref()
            .is_some_and(|o| o != host.owner.id() && owner::is_alive(&host.config.state_dir, o));
        if !live {
            let mut s = Saga::resume(host, &a.saga_id)?;
            report = Some(s.abort().await?);
        }
    }
    if out.json {
        out.json(&json!({"approval": a, "rollback": report}));
    } else {
        println!(
            "denied {}: {} will not run",
            a.approval_id, a.binding.tool_id
        );
        if let Some(r) = &report {
            println!("saga {} was parked on it:", a.saga_id);
            for u in &r.undone {
                match &u.result {
                    Ok(()) => println!("  compensated step {} ({})", u.seq, u.tool),
                    Err(e) => println!("  COMPENSATION FAILED step {} ({}): {e}", u.seq, u.tool),
                }
            }
            println!("saga state: {}", r.final_state);
        }
    }
    Ok(match report.map(|r| r.final_state) {
        Some(State::FailedRollbackPartial) => exit::ROLLBACK_PARTIAL,
        _ => exit::OK,
    })
}
