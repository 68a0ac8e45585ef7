//! The harness against a correct tool and deliberately broken ones.

use super::*;
use crate::fs::{Follow, resolve};
use crate::prelude::*;

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct Args {
    path: String,
    line: String,
}

#[derive(Serialize, Deserialize)]
struct Data {
    path: String,
    previous: Option<String>,
    written: String,
}

fn plan(args: &Args) -> Result<Data, ToolError> {
    let p = resolve(&args.path, Follow::Final)?;
    let previous = match std::fs::read_to_string(&p) {
        Ok(t) => Some(t),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
        Err(e) => return Err(ToolError::from_io(&e, &args.path)),
    };
    let written = format!("{}{}\n", previous.clone().unwrap_or_default(), args.line);
    Ok(Data {
        path: args.path.clone(),
        previous,
        written,
    })
}

/// How the test tool's compensate behaves.
trait Undo {
    fn undo(d: &Data) -> Result<(), ToolError>;
}

struct Append<U>(std::marker::PhantomData<U>);

impl<U: Undo> Tool for Append<U> {
    type Args = Args;
    fn meta() -> Meta {
        Meta::new("append", "Appends a line.")
            .side_effects(true)
            .dry_run(true)
    }
    fn execute(_ctx: &CallContext, args: Args) -> Result<Output, ToolError> {
        let d = plan(&args)?;
        std::fs::write(&d.path, &d.written).map_err(|e| ToolError::from_io(&e, &d.path))?;
        Ok(Output::new(d))
    }
    fn dry_run(_ctx: &CallContext, args: Args) -> Result<Output, ToolError> {
        Ok(Output::new(plan(&args)?))
    }
    fn compensate(_ctx: &CallContext, _args: Args, output: &Output) -> Result<(), ToolError> {
        U::undo(&output.data_as::<Data>()?)
    }
}

/// Restores exactly: the previous content, or no file; refuses to touch a
/// file someone else changed.
struct Exact;
impl Undo for Exact {
    fn undo(d: &Data) -> Result<(), ToolError> {
        let now = std::fs::read_to_string(&d.path).ok();
        if now == d.previous {
            return Ok(());
        }
        if now.as_deref() != Some(d.written.as_str()) {
            return Err(ToolError::unrevertible(format!(
                "{} was changed by someone else",
                d.path
            )));
        }
        match &d.previous {
            Some(t) => std::fs::write(&d.path, t),
            None => std::fs::remove_file(&d.path),
        }
        .map_err(|e| ToolError::from_io(&e, &d.path))
    }
}

/// Leaves an empty file behind where there was none.
struct EmptiesInstead;
impl Undo for EmptiesInstead {
    fn undo(d: &Data) -> Result<(), ToolError> {
        std::fs::write(&d.path, d.previous.as_deref().unwrap_or(""))
            .map_err(|e| ToolError::from_io(&e, &d.path))
    }
}

/// Restores blindly, overwriting a third party's change.
struct Blind;
impl Undo for Blind {
    fn undo(d: &Data) -> Result<(), ToolError> {
        match &d.previous {
            Some(t) => std::fs::write(&d.path, t),
            None => match std::fs::remove_file(&d.path) {
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
                other => other,
            },
        }
        .map_err(|e| ToolError::from_io(&e, &d.path))
    }
}

/// Fails the second time (not idempotent).
struct Once;
impl Undo for Once {
    fn undo(d: &Data) -> Result<(), ToolError> {
        match &d.previous {
            Some(t) => std::fs::write(&d.path, t),
            None => std::fs::remove_file(&d.path),
        }
        .map_err(|e| ToolError::from_io(&e, &d.path))
    }
}

fn args(dir: &GrantedDir, rel: &str) -> serde_json::Value {
    json!({"path": dir.path_str(rel), "line": "added"})
}

#[test]
fn a_correct_tool_passes_and_the_tree_is_restored() {
    let dir = GrantedDir::new().unwrap();
    dir.write("notes/a.txt", "one\n").unwrap();
    let before = dir.snapshot().unwrap();
    let r = round_trip::<Append<Exact>>(&dir, &args(&dir, "notes/a.txt")).unwrap();
    assert!(r.third_party_checked);
    assert_eq!(r.changed, vec!["~ notes/a.txt".to_string()]);
    assert_eq!(dir.snapshot().unwrap(), before);
    // A new file: compensate removes it.
    let r = round_trip::<Append<Exact>>(&dir, &args(&dir, "notes/new.txt")).unwrap();
    assert_eq!(r.changed, vec!["+ notes/new.txt".to_string()]);
}

#[test]
fn a_compensate_that_does_not_restore_exactly_is_caught() {
    let dir = GrantedDir::new().unwrap();
    let e = round_trip::<Append<EmptiesInstead>>(&dir, &args(&dir, "new.txt")).unwrap_err();
    // With no execute, it already leaves an empty file behind.
    assert_eq!(e.stage, "compensate-unexecuted", "{e}");
    assert!(e.problem.contains("+ new.txt"), "{e}");
}

#[test]
fn a_compensate_that_overwrites_a_third_party_change_is_caught() {
    let dir = GrantedDir::new().unwrap();
    dir.write("a.txt", "one\n").unwrap();
    let e = round_trip::<Append<Blind>>(&dir, &args(&dir, "a.txt")).unwrap_err();
    assert_eq!(e.stage, "third-party", "{e}");
    assert!(e.problem.contains("unrevertible"), "{e}");
}

#[test]
fn a_compensate_that_is_not_idempotent_is_caught() {
    let dir = GrantedDir::new().unwrap();
    let e = round_trip::<Append<Once>>(&dir, &args(&dir, "new.txt")).unwrap_err();
    // Removing a file that was never written fails already without execute.
    assert_eq!(e.stage, "compensate-unexecuted", "{e}");
    assert!(
        e.problem.contains("not-found") || e.problem.contains("no such"),
        "{e}"
    );
}

#[test]
fn paths_outside_the_granted_dir_are_refused() {
    let dir = GrantedDir::new().unwrap();
    let e = round_trip::<Append<Exact>>(&dir, &json!({"path": "/etc/passwd", "line": "x"}))
        .unwrap_err();
    assert_eq!(e.stage, "dry-run");
    assert!(e.problem.contains("permission-denied"), "{e}");
}

#[test]
fn context_builder_fills_a_key_and_a_deadline() {
    let ctx = context().saga("s1").step(2).dry_run(true).build();
    assert_eq!(ctx.idempotency_key, "s1:2");
    assert!(ctx.dry_run);
    assert!(ctx.remaining_ms().is_some_and(|ms| ms > 0));
    let ctx = context().idempotency_key("k").deadline_in_ms(5).build();
    assert_eq!(ctx.idempotency_key, "k");
}

#[test]
fn snapshot_sees_contents_and_links() {
    let dir = GrantedDir::new().unwrap();
    dir.write("d/f", "1").unwrap();
    let a = dir.snapshot().unwrap();
    dir.write("d/f", "2").unwrap();
    let b = dir.snapshot().unwrap();
    assert_eq!(diff(&a, &b), vec!["~ d/f".to_string()]);
    #[cfg(unix)]
    {
        std::os::unix::fs::symlink("f", dir.join("d/l")).unwrap();
        let c = dir.snapshot().unwrap();
        assert_eq!(diff(&b, &c), vec!["+ d/l".to_string()]);
    }
    let p = dir.path().to_path_buf();
    drop(dir);
    assert!(!p.exists());
}
