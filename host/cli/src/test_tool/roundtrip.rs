//! `capsaga test-tool --roundtrip`: the compensation contract checked on
//! the built component, through the door, in the real sandbox:
//!
//! 1. the dry-run (read-only sandbox) succeeds and changes nothing;
//! 2. the call commits as a one-step saga;
//! 3. `undo` (`Dispatcher::undo`: the operator's compensation of a Done saga)
//!    compensates it and the granted write directories are byte-identical
//!    to before;
//! 4. when the call changed files: it runs again, a third party overwrites
//!    what it changed, and `undo` must fail `unrevertible` (the saga ends
//!    FailedRollbackPartial) and leave the third party's bytes alone.
//!
//! The granted write directories are restored to their first state at the
//! end, whatever happened.

use super::super::render::{Out, error_line};
use super::super::{Failure, exit};
use capsaga_core::capability::{Capability, FsAccess, FsDir, Place};
use capsaga_core::error::ErrorKind;
use capsaga_core::fsm::State;
use capsaga_door::dispatch::{Act, Args, Call, Dispatcher, Outcome, Scope, Via};
use capsaga_door::plan::{self, Plan, PlanStep};
use capsaga_door::registry::LoadedTool;
use std::collections::BTreeMap;
use std::path::PathBuf;

/// Bytes a third party writes over what the call changed.
const THIRD_PARTY: &[u8] = b"changed by someone else after the tool ran\n";

/// One entry of a tree.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Entry {
    Dir,
    File(Vec<u8>),
    Link(PathBuf),
}

type Snapshot = BTreeMap<PathBuf, Entry>;

fn snapshot(roots: &[PathBuf]) -> std::io::Result<Snapshot> {
    let mut out = Snapshot::new();
    let mut stack: Vec<PathBuf> = roots.to_vec();
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir)? {
            let path = entry?.path();
            let meta = std::fs::symlink_metadata(&path)?;
            let e = if meta.file_type().is_symlink() {
                Entry::Link(std::fs::read_link(&path)?)
            } else if meta.is_dir() {
                stack.push(path.clone());
                Entry::Dir
            } else {
                Entry::File(std::fs::read(&path)?)
            };
            out.insert(path, e);
        }
    }
    Ok(out)
}

fn diff(a: &Snapshot, b: &Snapshot) -> Vec<String> {
    let mut out: Vec<String> = a
        .iter()
        .filter(|(p, e)| b.get(*p) != Some(e))
        .map(|(p, _)| {
            let sign = if b.contains_key(p) { '~' } else { '-' };
            format!("{sign} {}", p.display())
        })
        .collect();
    out.extend(
        b.keys()
            .filter(|p| !a.contains_key(*p))
            .map(|p| format!("+ {}", p.display())),
    );
    out
}

/// Put `now` back to `before`: entries added are removed, changed and
/// removed ones rewritten (deepest first for removals).
fn restore(before: &Snapshot, now: &Snapshot) -> std::io::Result<()> {
    for (p, e) in now.iter().rev() {
        if before.get(p) != Some(e) {
            match e {
                Entry::Dir if !before.contains_key(p) => std::fs::remove_dir_all(p)?,
                Entry::Dir => {}
                _ => std::fs::remove_file(p)?,
            }
        }
    }
    for (p, e) in before {
        if now.get(p) == Some(e) {
            continue;
        }
        match e {
            Entry::Dir => std::fs::create_dir_all(p)?,
            Entry::File(b) => std::fs::write(p, b)?,
            Entry::Link(t) => std::os::unix::fs::symlink(t, p)?,
        }
    }
    Ok(())
}

fn write_dirs(tool: &LoadedTool) -> Vec<PathBuf> {
    let Ok(grants) = &tool.grants else {
        return Vec::new();
    };
    grants
        .iter()
        .filter_map(|g| match g {
            Capability::Fs {
                access: FsAccess::Write,
                dir: Place::Concrete(FsDir::Absolute(p)),
            } => Some(PathBuf::from(p)),
            _ => None,
        })
        .collect()
}

/// The checks' results, in order: (check, Ok(detail) | Err(problem)).
type Checks = Vec<(&'static str, Result<String, String>)>;

fn snap(roots: &[PathBuf]) -> Result<Snapshot, String> {
    snapshot(roots).map_err(|e| format!("cannot read the granted directories: {e}"))
}

/// Run the call as a one-step saga; its saga id when it committed.
async fn commit(door: &Dispatcher, tool: &str, args: &serde_json::Value) -> Result<String, String> {
    let one = Plan {
        description: format!("test-tool {tool}"),
        steps: vec![PlanStep {
            tool: tool.to_string(),
            args: args.clone(),
        }],
    };
    let report = plan::run_as(door, &one, None, Scope::Call)
        .await
        .map_err(|e| e.to_string())?;
    match report.steps.first() {
        Some(s) if s.status == "committed" => Ok(report.saga_id),
        Some(s) => Err(match &s.error {
            Some(e) => format!("the call {}: {}", s.status, error_line(e)),
            None => format!("the call {}", s.status),
        }),
        None => Err("the call did not run".into()),
    }
}

/// Undo a committed call saga; its rollback report.
async fn undo(
    door: &Dispatcher,
    saga_id: &str,
) -> Result<capsaga_door::saga::RollbackReport, String> {
    let who = capsaga_door::dispatch::decider("cli");
    let (mut saga, _hold) = door
        .reopen(saga_id, Via::Operator, Act::Undo, &who)
        .await
        .map_err(|e| e.to_string())?;
    door.undo(&mut saga).await.map_err(|e| e.to_string())
}

async fn dry_run(
    door: &Dispatcher,
    tool: &str,
    args: &str,
    roots: &[PathBuf],
    before: &Snapshot,
) -> Result<String, String> {
    let submitted = door.dry_run(Call::new(tool, Args::Text(args))).await;
    match submitted.outcome {
        Outcome::Previewed { result: Ok(o), .. } => {
            let d = diff(before, &snap(roots)?);
            if d.is_empty() {
                Ok(o.summary)
            } else {
                Err(format!("the dry run changed: {}", d.join(", ")))
            }
        }
        Outcome::Previewed { result: Err(e), .. } => Err(error_line(&e)),
        other => Err(format!("refused: {other:?}")),
    }
}

async fn execute_and_undo(
    door: &Dispatcher,
    tool: &str,
    args: &serde_json::Value,
    roots: &[PathBuf],
    before: &Snapshot,
    checks: &mut Checks,
) -> Result<Vec<String>, ()> {
    let saga = match commit(door, tool, args).await {
        Ok(s) => s,
        Err(e) => {
            checks.push(("execute", Err(e)));
            return Err(());
        }
    };
    let changed = snap(roots).map(|a| diff(before, &a)).unwrap_or_default();
    checks.push((
        "execute",
        Ok(format!("saga {saga} committed; changed {}", changed.len())),
    ));
    let undone = match undo(door, &saga).await {
        Ok(r) if r.final_state == State::FailedRolledBack => snap(roots).and_then(|now| {
            let d = diff(before, &now);
            if d.is_empty() {
                Ok("byte-identical to before".to_string())
            } else {
                Err(format!("differs from before: {}", d.join(", ")))
            }
        }),
        Ok(r) => Err(r
            .undone
            .iter()
            .filter_map(|u| u.result.as_ref().err())
            .map(error_line)
            .collect::<Vec<_>>()
            .join("; ")),
        Err(e) => Err(e),
    };
    let ok = undone.is_ok();
    checks.push(("undo (compensate)", undone));
    if ok { Ok(changed) } else { Err(()) }
}

async fn third_party(
    door: &Dispatcher,
    tool: &str,
    args: &serde_json::Value,
    roots: &[PathBuf],
    before: &Snapshot,
) -> Result<String, String> {
    let saga = commit(door, tool, args).await?;
    let after = snap(roots)?;
    for (p, e) in &after {
        if before.get(p) != Some(e) && matches!(e, Entry::File(_)) {
            std::fs::write(p, THIRD_PARTY).map_err(|e| e.to_string())?;
        }
    }
    for (p, e) in before {
        if !after.contains_key(p) && matches!(e, Entry::File(_)) {
            std::fs::write(p, THIRD_PARTY).map_err(|e| e.to_string())?;
        }
    }
    let tampered = snap(roots)?;
    let r = undo(door, &saga).await?;
    let errors: Vec<_> = r
        .undone
        .iter()
        .filter_map(|u| u.result.as_ref().err())
        .collect();
    if errors.is_empty() {
        return Err("compensate succeeded over a third party's change: it must fail `unrevertible` and leave it alone".into());
    }
    if let Some(e) = errors.iter().find(|e| e.kind != ErrorKind::Unrevertible) {
        return Err(format!(
            "compensate failed `{}`, expected `unrevertible`: {}",
            e.kind, e.message
        ));
    }
    let d = diff(&tampered, &snap(roots)?);
    if !d.is_empty() {
        return Err(format!(
            "compensate overwrote the third party's change: {}",
            d.join(", ")
        ));
    }
    Ok(format!("unrevertible, saga {}", r.final_state))
}

/// Run the checks and print them; exit 0 when all pass, 7 otherwise.
pub(super) async fn run(
    door: &Dispatcher,
    out: &Out,
    tool: &LoadedTool,
    args_text: &str,
) -> Result<u8, Failure> {
    let name = tool.meta.name.as_str();
    let args = capsaga_core::validate::parse_args(args_text).map_err(|e| Failure {
        code: exit::TOOL_ERROR,
        message: format!("--args: {e}"),
    })?;
    let roots = write_dirs(tool);
    let before = snap(&roots).map_err(|m| Failure {
        code: exit::CONFIG,
        message: m,
    })?;
    let mut checks: Checks = Vec::new();
    if tool.meta.supports_dry_run {
        checks.push((
            "dry-run",
            dry_run(door, name, args_text, &roots, &before).await,
        ));
    }
    let dry_ok = checks.iter().all(|(_, r)| r.is_ok());
    if dry_ok
        && let Ok(changed) = execute_and_undo(door, name, &args, &roots, &before, &mut checks).await
    {
        if changed.is_empty() {
            checks.push((
                "third party",
                Ok("skipped: the call changed nothing in the granted directories".into()),
            ));
        } else {
            checks.push((
                "third party",
                third_party(door, name, &args, &roots, &before).await,
            ));
        }
    }
    if let Ok(now) = snapshot(&roots) {
        let _ = restore(&before, &now);
    }
    let passed = checks.iter().all(|(_, r)| r.is_ok()) && !checks.is_empty();
    print(out, name, &checks, passed);
    Ok(if passed { exit::OK } else { exit::NOT_SUCCESS })
}

fn print(out: &Out, name: &str, checks: &Checks, passed: bool) {
    if out.json {
        let list: Vec<_> = checks
            .iter()
            .map(|(c, r)| match r {
                Ok(d) => serde_json::json!({"check": c, "ok": true, "detail": d}),
                Err(p) => serde_json::json!({"check": c, "ok": false, "problem": p}),
            })
            .collect();
        out.json(&serde_json::json!({"tool": name, "roundtrip": passed, "checks": list}));
        return;
    }
    for (c, r) in checks {
        match r {
            Ok(d) => println!("ok      {c}: {d}"),
            Err(p) => println!("FAILED  {c}: {p}"),
        }
    }
    println!(
        "round trip {}: {}",
        name,
        if passed { "passed" } else { "FAILED" }
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn restore_puts_a_tree_back() {
        let d = tempfile::tempdir().unwrap();
        let root = d.path().to_path_buf();
        std::fs::write(root.join("a"), "1").unwrap();
        let roots = vec![root.clone()];
        let before = snapshot(&roots).unwrap();
        std::fs::write(root.join("a"), "2").unwrap();
        std::fs::create_dir(root.join("sub")).unwrap();
        std::fs::write(root.join("sub/b"), "x").unwrap();
        let now = snapshot(&roots).unwrap();
        assert_eq!(diff(&before, &now).len(), 3);
        restore(&before, &now).unwrap();
        assert_eq!(snapshot(&roots).unwrap(), before);
    }
}
