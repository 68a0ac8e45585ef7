//! `ledger` (test component): an append-only ledger in which every `execute`
//! leaves a visible trace, for the host's crash and approval tests ("no effect
//! applied twice", "the approved step ran exactly once").
//!
//! Args: `{"path": "/granted/dir/ledger.txt", "entry": "text"}` (`entry` on
//! one line).
//!
//! - `execute` first appends `execute <idempotency key>` to the journal
//!   `<path>.journal`, then `<entry> <idempotency key>` to `path`. It is
//!   deliberately *not* idempotent: running the same step twice leaves two
//!   lines, which is what the tests look for.
//! - `dry_run` says what would be appended (used as the approval summary and
//!   the pre-image).
//! - `compensate` appends `compensate <key>` to the journal and removes every
//!   line of `path` ending in ` <key>`, rewriting the file through
//!   `<path>.compensate.tmp` and a rename. An absent file or line is fine
//!   (the step never ran), so it is idempotent.
//!
//! - `after` (optional) makes `execute` misbehave once both lines are
//!   written, for the host's in-doubt tests: `"trap"` panics, `"spin"` loops
//!   until the host's deadline stops it, `"big_output"` returns more output
//!   than the host accepts. The host must then compensate the step from its
//!   pre-image, since what it wrote stays written. `"wait"` creates
//!   `<path>.waiting` and returns only once `<path>.go` exists (polled every
//!   10 ms), so a test can act between the step's effect and its outcome.
//!   Give the step a deadline longer than the test holds it.
//!
//! Side effects, risk medium, supports dry-run. Needs `fs:write:*`.

use std::fs::{self, OpenOptions};
use std::io::{self, Write};
use std::path::Path;

use capsaga_sdk::prelude::*;

/// Arguments.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Args {
    /// Absolute path of the ledger file, inside a directory granted for writing.
    pub path: String,
    /// The entry to append (one line).
    pub entry: String,
    /// How `execute` misbehaves after appending (tests only).
    #[serde(default)]
    pub after: Option<After>,
}

/// How `execute` misbehaves after it has appended.
#[derive(Deserialize, JsonSchema, Clone, Copy)]
#[serde(rename_all = "snake_case")]
pub enum After {
    /// Panic (a trap).
    Trap,
    /// Loop until the deadline.
    Spin,
    /// Return 8 MiB of output.
    BigOutput,
    /// Create `<path>.waiting`, then wait until `<path>.go` exists before
    /// returning normally: the test holds the step between its effect and
    /// its outcome (e.g. to stop the state store meanwhile).
    Wait,
}

/// The component.
pub struct Ledger;

fn append_line(path: &Path, line: &str) -> Result<(), ToolError> {
    let mut f = OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
        .map_err(|e| ToolError::from_io(&e, path))?;
    // One write of the whole line: an append either lands whole or not at all.
    f.write_all(format!("{line}\n").as_bytes())
        .map_err(|e| ToolError::from_io(&e, path))?;
    f.sync_all().map_err(|e| ToolError::from_io(&e, path))
}

fn check(args: &Args, ctx: &CallContext) -> Result<(), ToolError> {
    if args.entry.contains('\n') || args.entry.contains('\r') {
        return Err(ToolError::invalid_args("entry must be one line"));
    }
    if ctx.idempotency_key.is_empty() || ctx.idempotency_key.contains(char::is_whitespace) {
        return Err(ToolError::invalid_args(
            "the call has no usable idempotency key",
        ));
    }
    Ok(())
}

impl Tool for Ledger {
    type Args = Args;

    fn meta() -> Meta {
        Meta::new(
            "ledger",
            "Test component: appends an entry to a ledger file; every execute is journalled.",
        )
        .side_effects(true)
        .risk(Risk::Medium)
        .dry_run(true)
        .capability("fs:write:*")
    }

    fn execute(ctx: &CallContext, args: Args) -> Result<Output, ToolError> {
        check(&args, ctx)?;
        let path = Path::new(&args.path);
        let journal = format!("{}.journal", args.path);
        append_line(
            Path::new(&journal),
            &format!("execute {}", ctx.idempotency_key),
        )?;
        append_line(path, &format!("{} {}", args.entry, ctx.idempotency_key))?;
        match args.after {
            Some(After::Trap) => panic!("ledger: told to trap after appending"),
            Some(After::Spin) => loop {
                std::hint::spin_loop();
            },
            Some(After::BigOutput) => {
                return Ok(Output::new(json!({"filler": "x".repeat(8 << 20)})));
            }
            Some(After::Wait) => {
                let waiting = format!("{}.waiting", args.path);
                fs::write(&waiting, ctx.idempotency_key.as_bytes())
                    .map_err(|e| ToolError::from_io(&e, Path::new(&waiting)))?;
                let go = format!("{}.go", args.path);
                while !Path::new(&go).exists() {
                    std::thread::sleep(std::time::Duration::from_millis(10));
                }
            }
            None => {}
        }
        Ok(
            Output::new(json!({"path": args.path, "entry": args.entry, "key": ctx.idempotency_key}))
                .effect(format!("appended `{}` to {}", args.entry, args.path))
                .summary(format!("Appended `{}` to {}", args.entry, args.path)),
        )
    }

    fn dry_run(ctx: &CallContext, args: Args) -> Result<Output, ToolError> {
        check(&args, ctx)?;
        Ok(
            Output::new(json!({"path": args.path, "entry": args.entry, "key": ctx.idempotency_key}))
                .effect(format!("would append `{}` to {}", args.entry, args.path))
                .summary(format!("Would append `{}` to {}", args.entry, args.path)),
        )
    }

    fn compensate(ctx: &CallContext, args: Args, _output: &Output) -> Result<(), ToolError> {
        check(&args, ctx)?;
        let path = Path::new(&args.path);
        let journal = format!("{}.journal", args.path);
        append_line(
            Path::new(&journal),
            &format!("compensate {}", ctx.idempotency_key),
        )?;
        let text = match fs::read_to_string(path) {
            Ok(t) => t,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(()),
            Err(e) => return Err(ToolError::from_io(&e, path)),
        };
        let suffix = format!(" {}", ctx.idempotency_key);
        let kept: String = text
            .lines()
            .filter(|l| !l.ends_with(&suffix))
            .map(|l| format!("{l}\n"))
            .collect();
        if kept.len() == text.len() {
            return Ok(());
        }
        let tmp = format!("{}.compensate.tmp", args.path);
        let tmp = Path::new(&tmp);
        match fs::remove_file(tmp) {
            Ok(()) => {}
            Err(e) if e.kind() == io::ErrorKind::NotFound => {}
            Err(e) => return Err(ToolError::from_io(&e, tmp)),
        }
        let mut f = OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(tmp)
            .map_err(|e| ToolError::from_io(&e, tmp))?;
        f.write_all(kept.as_bytes())
            .and_then(|()| f.sync_all())
            .map_err(|e| ToolError::from_io(&e, tmp))?;
        fs::rename(tmp, path).map_err(|e| ToolError::from_io(&e, path))
    }
}

capsaga_sdk::export_tool!(Ledger);
