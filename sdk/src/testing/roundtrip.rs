//! [`round_trip`]: the compensation contract of a side-effecting tool,
//! checked natively on a [`GrantedDir`].

use super::{GrantedDir, Snapshot, context, diff};
use crate::{ErrorKind, Output, Tool, ToolError, parse_args};
use std::fmt;
use std::path::Path;

/// What a passed round trip saw.
#[derive(Debug)]
pub struct RoundTrip {
    /// The dry-run's output (the pre-image the host logs).
    pub dry_run: Output,
    /// The first execute's output.
    pub execute: Output,
    /// What execute changed in the tree (`+`/`-`/`~` lines, see
    /// [`super::diff`]).
    pub changed: Vec<String>,
    /// Whether the third-party check ran (it needs an execute that changes
    /// the tree).
    pub third_party_checked: bool,
}

/// Which check failed, and how.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RoundTripError {
    /// The stage: `dry-run`, `compensate-unexecuted`, `execute`,
    /// `compensate`, `compensate-twice`, `third-party` or `setup`.
    pub stage: &'static str,
    /// What went wrong.
    pub problem: String,
}

impl fmt::Display for RoundTripError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "round trip failed at {}: {}", self.stage, self.problem)
    }
}

impl std::error::Error for RoundTripError {}

fn fail(stage: &'static str, problem: impl Into<String>) -> RoundTripError {
    RoundTripError {
        stage,
        problem: problem.into(),
    }
}

fn tool_err(stage: &'static str, e: &ToolError) -> RoundTripError {
    fail(
        stage,
        format!("returned an error: {e} (hint: {})", e.llm_hint),
    )
}

/// Bytes a third party writes over what execute changed.
const THIRD_PARTY: &[u8] = b"changed by someone else after the tool ran\n";

/// Check `T`'s compensation contract with `args` on the tree in `dir`
/// (set it up first), with `dir` as the only granted root:
///
/// 1. `dry-run` leaves the tree unchanged;
/// 2. `compensate` given the dry-run's output, with no execute before
///    (a step that crashed in doubt), succeeds and changes nothing;
/// 3. `execute` succeeds; then `compensate` succeeds and the tree is
///    byte-identical to before;
/// 4. a second `compensate` succeeds and changes nothing;
/// 5. when execute changes the tree: execute again, let a third party
///    overwrite what it changed, then `compensate` must fail `unrevertible`
///    and leave the third party's bytes in place.
///
/// The tree is restored to its initial state afterwards.
///
/// # Errors
/// [`RoundTripError`] naming the first check that failed.
pub fn round_trip<T: Tool>(
    dir: &GrantedDir,
    args: &serde_json::Value,
) -> Result<RoundTrip, RoundTripError> {
    let (report, before) = dir.run(|| checks::<T>(dir, args))?;
    restore(dir.path(), &before).map_err(|e| fail("setup", e.to_string()))?;
    Ok(report)
}

fn snap(dir: &GrantedDir, stage: &'static str) -> Result<Snapshot, RoundTripError> {
    dir.snapshot()
        .map_err(|e| fail(stage, format!("cannot read the tree: {e}")))
}

fn same(
    stage: &'static str,
    before: &Snapshot,
    now: &Snapshot,
    what: &str,
) -> Result<(), RoundTripError> {
    let d = diff(before, now);
    if d.is_empty() {
        Ok(())
    } else {
        Err(fail(stage, format!("{what}: {}", d.join(", "))))
    }
}

fn checks<T: Tool>(
    dir: &GrantedDir,
    args: &serde_json::Value,
) -> Result<(RoundTrip, Snapshot), RoundTripError> {
    let text = args.to_string();
    let parse = |stage| parse_args::<T::Args>(&text).map_err(|e| tool_err(stage, &e));
    let before = snap(dir, "setup")?;

    let dry_ctx = context().step(0).dry_run(true).build();
    let dry = T::dry_run(&dry_ctx, parse("dry-run")?).map_err(|e| tool_err("dry-run", &e))?;
    same(
        "dry-run",
        &before,
        &snap(dir, "dry-run")?,
        "the dry run changed the tree",
    )?;

    let ctx = context().step(0).build();
    T::compensate(&ctx, parse("compensate-unexecuted")?, &dry)
        .map_err(|e| tool_err("compensate-unexecuted", &e))?;
    same(
        "compensate-unexecuted",
        &before,
        &snap(dir, "compensate-unexecuted")?,
        "compensate with the dry-run pre-image and no execute changed the tree",
    )?;

    let out = T::execute(&ctx, parse("execute")?).map_err(|e| tool_err("execute", &e))?;
    let after = snap(dir, "execute")?;
    let changed = diff(&before, &after);

    T::compensate(&ctx, parse("compensate")?, &out).map_err(|e| tool_err("compensate", &e))?;
    same(
        "compensate",
        &before,
        &snap(dir, "compensate")?,
        "the tree after compensate differs from the tree before execute",
    )?;
    T::compensate(&ctx, parse("compensate-twice")?, &out)
        .map_err(|e| tool_err("compensate-twice", &e))?;
    same(
        "compensate-twice",
        &before,
        &snap(dir, "compensate-twice")?,
        "a second compensate changed the tree",
    )?;

    let third_party_checked = !changed.is_empty();
    if third_party_checked {
        third_party::<T>(dir, &ctx, &text, &before)?;
    }
    Ok((
        RoundTrip {
            dry_run: dry,
            execute: out,
            changed,
            third_party_checked,
        },
        before,
    ))
}

fn third_party<T: Tool>(
    dir: &GrantedDir,
    ctx: &crate::CallContext,
    text: &str,
    before: &Snapshot,
) -> Result<(), RoundTripError> {
    let stage = "third-party";
    let parse = || parse_args::<T::Args>(text).map_err(|e| tool_err(stage, &e));
    let out = T::execute(ctx, parse()?).map_err(|e| tool_err(stage, &e))?;
    let after = snap(dir, stage)?;
    for (rel, entry) in &after {
        let touched = before.get(rel) != Some(entry);
        if touched && matches!(entry, super::Entry::File(_)) {
            dir.write(rel, THIRD_PARTY)
                .map_err(|e| fail(stage, e.to_string()))?;
        }
    }
    for (rel, entry) in before {
        if !after.contains_key(rel) && matches!(entry, super::Entry::File(_)) {
            dir.write(rel, THIRD_PARTY)
                .map_err(|e| fail(stage, e.to_string()))?;
        }
    }
    let tampered = snap(dir, stage)?;
    match T::compensate(ctx, parse()?, &out) {
        Ok(()) => Err(fail(
            stage,
            "compensate succeeded after a third party changed what execute wrote: it must fail `unrevertible` and leave their change alone",
        )),
        Err(e) if e.kind != ErrorKind::Unrevertible => Err(fail(
            stage,
            format!(
                "compensate after a third party's change failed `{}`, expected `unrevertible`: {e}",
                e.kind.as_str()
            ),
        )),
        Err(_) => same(
            stage,
            &tampered,
            &snap(dir, stage)?,
            "compensate overwrote the third party's change",
        ),
    }
}

/// Put the tree under `root` back to `snap`.
fn restore(root: &Path, snap: &Snapshot) -> std::io::Result<()> {
    for entry in std::fs::read_dir(root)? {
        let p = entry?.path();
        if std::fs::symlink_metadata(&p)?.is_dir() {
            std::fs::remove_dir_all(&p)?;
        } else {
            std::fs::remove_file(&p)?;
        }
    }
    for (rel, e) in snap {
        let p = root.join(rel);
        match e {
            super::Entry::Dir => std::fs::create_dir_all(&p)?,
            super::Entry::File(bytes) => {
                if let Some(parent) = p.parent() {
                    std::fs::create_dir_all(parent)?;
                }
                std::fs::write(&p, bytes)?;
            }
            super::Entry::Symlink(target) => {
                #[cfg(unix)]
                std::os::unix::fs::symlink(target, &p)?;
                #[cfg(not(unix))]
                let _ = target;
            }
        }
    }
    Ok(())
}
