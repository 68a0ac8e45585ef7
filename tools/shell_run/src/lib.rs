//! `shell_run`: a POSIX-subset shell and the commands agents use, all inside
//! this one WebAssembly component. No host process is ever started: the
//! interpreter ([`shell`]) and every command ([`cmds`]) are Rust code
//! compiled into the component, confined by the same preopens as any tool.
//!
//! Arguments: `{"script": "grep -c foo big.txt | sort", "cwd": "/w",
//! "stdin": "", "max_output_bytes": 65536}`.
//!
//! Files: every path is checked by the SDK's path guard, so what is outside
//! the granted directories does not exist for the script (`permission
//! denied`, naming the grants). The script's writes, removals and new
//! directories go to an in-memory overlay ([`vfs`]) that the rest of the
//! script sees; when the script ends, `execute` compares the overlay with the
//! real files, records the pre-image of every path it will change (content
//! or absence) and only then changes them ([`commit`]). A script stopped by
//! a limit changes nothing. `dry_run` always runs the script against the
//! overlay (the host gives it read-only grants) and reports exactly what it
//! would change, with the pre-images, without changing anything. The script
//! cannot tell the two apart: the shell never looks at whether a grant is
//! writable (see [`vfs`]); `execute` refuses a change under a read-only
//! grant after the script, before anything is changed. Before changing
//! anything, the output is measured as the host will count it
//! ([`budget`]): too large pre-images are `quota-exceeded` with nothing
//! changed. `compensate` restores every
//! changed path in reverse order, removing what the script created, and is
//! idempotent; a path changed by someone else since is left alone and the
//! compensation ends `unrevertible`.
//!
//! Output data ([`RunData`]): `exit_code`, `stdout`, `stderr` (each capped
//! at `max_output_bytes`, the cut counted), `changes` (path, before, after),
//! `applied`, `stopped` (the limit that stopped the script), `refused`
//! (paths the guard refused). The output is untrusted (it holds file
//! content) and the host truncates what the model sees.
//!
//! Limits: commands and loop iterations (1,000,000), nesting of function
//! calls and substitutions (64), a stop time at 80% of the time left before
//! the call's deadline, pipes and captures of 32 MiB, files of 64 MiB,
//! 96 MiB of changed content held, 2 MiB of previous content kept for undo,
//! 10,000 changed paths; on top of the host's fuel, memory and deadline.
//!
//! Side effects, risk medium, not idempotent, dry-run. Needs `fs:read:*`
//! and `fs:write:*` (a write grant answers both).

pub mod budget;
pub mod cmds;
pub mod commit;
pub mod shell;
pub mod vfs;

use std::path::PathBuf;

use capsaga_sdk::fs::{Follow, resolve};
use capsaga_sdk::prelude::*;

use commit::Change;
use shell::io::{Io, Sink};
use shell::{Limits, Shell};
use vfs::{FsErrorKind, Kind, Vfs};

/// Default of `max_output_bytes`: 64 KiB.
pub const DEFAULT_MAX_OUTPUT: u64 = 64 * 1024;

/// Largest `max_output_bytes`: 1 MiB.
pub const MAX_OUTPUT: u64 = 1024 * 1024;

fn default_max_output() -> u64 {
    DEFAULT_MAX_OUTPUT
}

/// Arguments of `shell_run`.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Args {
    /// The script, in POSIX sh: pipelines, `&&` `||` `;`, redirections (`>`
    /// `>>` `<` `2>&1`, here-documents), quoting, variables, globs, `if`
    /// `for` `while` `case`, functions, `$(...)`. Only shell_run's own
    /// commands run (no programs): cat head tail wc ls find grep sed sort
    /// uniq cut tr echo printf mkdir rm rmdir cp mv touch tee diff basename
    /// dirname date env pwd test [ true false xargs yes seq cd.
    pub script: String,
    /// Working directory: an absolute path inside a granted directory
    /// (default: the first granted directory, by path).
    #[serde(default)]
    pub cwd: Option<String>,
    /// Text given to the script as its standard input.
    #[serde(default)]
    pub stdin: String,
    /// Bytes of stdout, and of stderr, returned at most (default 65536).
    #[serde(default = "default_max_output")]
    #[schemars(range(min = 1, max = 1_048_576))]
    pub max_output_bytes: u64,
}

/// Output data of `execute` and `dry_run`.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct RunData {
    /// The script's exit status (124 when a limit stopped it).
    pub exit_code: i32,
    /// Standard output (lossy UTF-8), at most `max_output_bytes`.
    pub stdout: String,
    /// Standard error, at most `max_output_bytes`.
    pub stderr: String,
    /// Bytes of stdout cut.
    pub stdout_truncated_bytes: u64,
    /// Bytes of stderr cut.
    pub stderr_truncated_bytes: u64,
    /// The working directory the script started in.
    pub cwd: String,
    /// Commands and loop iterations run.
    pub steps: u64,
    /// Why a limit stopped the script (then nothing was changed).
    pub stopped: Option<String>,
    /// Paths changed (execute) or that would change (dry run), in order,
    /// with their pre-images: what `compensate` restores.
    pub changes: Vec<Change>,
    /// True when `changes` were made to the real files.
    pub applied: bool,
    /// Why applying the changes stopped part way (those listed were made).
    pub apply_error: Option<String>,
    /// Accesses the path guard refused.
    pub refused: Vec<String>,
    /// True for a dry run.
    pub dry_run: bool,
    /// Always true: the script always runs, dry runs included (kept for
    /// readers of older outputs, where a dry run of a script judged
    /// read-only was skipped).
    #[serde(default = "yes")]
    pub ran: bool,
}

fn yes() -> bool {
    true
}

/// The tool.
pub struct ShellRun;

impl Tool for ShellRun {
    type Args = Args;

    fn meta() -> Meta {
        Meta::new(
            "shell_run",
            "Runs a POSIX shell script (pipelines, && || ;, redirections, quoting, variables, \
             globs, if/for/while/case, functions, $(...)) inside the sandbox, with built-in \
             commands: cat head tail wc ls find grep sed sort uniq cut tr echo printf mkdir rm \
             rmdir cp mv touch tee diff basename dirname date env pwd test [ true false xargs yes \
             seq cd. No program of the host ever runs. Paths must be inside the granted \
             directories. Files the script changes are written when it ends, and can be undone. \
             Returns exit_code, stdout, stderr and the changed paths.",
        )
        .side_effects(true)
        .risk(Risk::Medium)
        .returns_untrusted(true)
        .idempotent(false)
        .dry_run(true)
        .capability("fs:read:*")
        .capability("fs:write:*")
        // Field labels: see docs/information-flow.md (first-party tools).
        .trusted_field("/exit_code")
        .trusted_field("/steps")
        .trusted_field("/stdout_truncated_bytes")
        .trusted_field("/stderr_truncated_bytes")
        .trusted_field("/applied")
        .trusted_field("/dry_run")
        .untrusted_field("/stdout")
        .untrusted_field("/stderr")
        .untrusted_field("/cwd")
        .untrusted_field("/stopped")
        .untrusted_field("/changes")
        .untrusted_field("/apply_error")
        .untrusted_field("/refused")
    }

    fn execute(ctx: &CallContext, args: Args) -> Result<Output, ToolError> {
        run(ctx, &args, false)
    }

    fn dry_run(ctx: &CallContext, args: Args) -> Result<Output, ToolError> {
        run(ctx, &args, true)
    }

    fn compensate(ctx: &CallContext, _args: Args, output: &Output) -> Result<(), ToolError> {
        let data: RunData = output.data_as()?;
        let restored = commit::undo(&data.changes, ctx)?;
        for p in restored {
            capsaga_sdk::log::info(&format!("restored {p}"));
        }
        Ok(())
    }
}

capsaga_sdk::export_tool!(ShellRun);

/// The working directory: `cwd` checked, or the first root by path (not the
/// first writable one: a dry run sees every root read-only, and must start
/// where execute starts).
fn start_dir(roots: &[vfs::Root], cwd: Option<&str>) -> Result<PathBuf, ToolError> {
    let Some(raw) = cwd else {
        return roots.first().map(|r| r.path.clone()).ok_or_else(|| {
            ToolError::permission_denied("shell_run has no granted directory")
                .hint("the operator must grant shell_run a directory (fs:write:<dir>/**)")
        });
    };
    let p = resolve(raw, Follow::Final)?;
    match vfs::real_stat(&p) {
        Ok(Some(s)) if s.kind == Kind::Dir => Ok(p),
        _ => Err(
            ToolError::invalid_args(format!("cwd {raw} is not a directory"))
                .hint("give an existing directory inside the granted directories as cwd"),
        ),
    }
}

/// Runs the script; in a dry run the changes are planned, not made. The
/// script runs the same way in both modes (against the overlay, with the
/// same view of the grants), so a dry run reports what execute would do.
fn run(ctx: &CallContext, args: &Args, dry_run: bool) -> Result<Output, ToolError> {
    let roots = vfs::granted();
    let cwd = start_dir(&roots, args.cwd.as_deref())?;
    let max = usize::try_from(args.max_output_bytes.clamp(1, MAX_OUTPUT)).unwrap_or(65536);
    let started = shell::now_ms();
    let stop_at_ms = (ctx.deadline_ms > started && ctx.deadline_ms < u64::MAX / 2)
        .then(|| started + (ctx.deadline_ms - started) * 8 / 10);
    let limits = Limits {
        stop_at_ms,
        ..Limits::default()
    };
    let env: Vec<(String, String)> = std::env::vars().collect();
    let mut sh = Shell::new(Vfs::new(roots), cwd.clone(), env, limits);
    let io = Io::new(
        args.stdin.clone().into_bytes(),
        Sink::soft(max),
        Sink::soft(max),
    );
    let result = sh.run_script(&args.script, &io);
    let (exit_code, stopped) = match result {
        Ok(c) => (c, None),
        Err(why) => {
            io.warn(format!("shell_run: stopped: {why}; nothing was changed"));
            (124, Some(why))
        }
    };
    let mut data = RunData {
        exit_code,
        stdout: String::new(),
        stderr: String::new(),
        stdout_truncated_bytes: 0,
        stderr_truncated_bytes: 0,
        cwd: cwd.display().to_string(),
        steps: sh.steps(),
        stopped,
        changes: Vec::new(),
        applied: false,
        apply_error: None,
        refused: std::mem::take(&mut sh.refused),
        dry_run,
        ran: true,
    };
    // Planning (a stat and a read per changed path) stops at 90% of the
    // call's time, before anything is changed, so a slow filesystem gives a
    // clean timeout rather than a call the host has to cut off.
    let plan_stop = (ctx.deadline_ms > started && ctx.deadline_ms < u64::MAX / 2)
        .then(|| ctx.deadline_ms - (ctx.deadline_ms - started) / 10);
    let planned = plan_changes(&sh.vfs, &data, dry_run, plan_stop)?;
    {
        let out = io.out.borrow();
        data.stdout = String::from_utf8_lossy(&out.buf).into_owned();
        data.stdout_truncated_bytes = out.dropped;
        let err = io.err.borrow();
        data.stderr = String::from_utf8_lossy(&err.buf).into_owned();
        data.stderr_truncated_bytes = err.dropped;
    }
    let changes: Vec<Change> = planned.iter().map(|p| p.change.clone()).collect();
    budget::fit(&mut data, &changes, dry_run, budget::OUTPUT_CAP)?;
    if dry_run {
        data.changes = changes;
    } else if data.stopped.is_none() {
        // Writing stops at 95% of the call's time: the output, with exactly
        // what was changed, must reach the host before its deadline.
        let now = shell::now_ms();
        let apply_stop = (ctx.deadline_ms > now && ctx.deadline_ms < u64::MAX / 2)
            .then(|| ctx.deadline_ms - (ctx.deadline_ms - started) / 20);
        let (done, err) = commit::apply(planned, ctx, apply_stop);
        data.applied = !done.is_empty();
        data.changes = done;
        if let Some(e) = &err {
            let line = format!("shell_run: applying the script's changes stopped: {e}\n");
            data.stderr.push_str(&line);
        }
        data.apply_error = err;
    }
    Ok(finish(data))
}

/// The operations that make the real files match the overlay. A stopped
/// script plans nothing in execute; a stopped dry run still plans what the
/// script did until it stopped, so the preview shows it (marked
/// incomplete). In execute, a change under a read-only grant refuses the
/// whole call before anything is changed.
fn plan_changes(
    vfs: &Vfs,
    data: &RunData,
    dry_run: bool,
    stop_at_ms: Option<u64>,
) -> Result<Vec<commit::Planned>, ToolError> {
    if data.stopped.is_some() && !dry_run {
        return Ok(Vec::new());
    }
    let exit_code = data.exit_code;
    let planned = commit::plan(vfs, stop_at_ms).map_err(|e| {
        if e.kind == FsErrorKind::Deadline {
            return ToolError::new(
                ErrorKind::Timeout,
                format!("the script ran (exit {exit_code}) but {}; nothing was changed", e.msg),
            )
            .hint("nothing was changed; split the script into smaller calls that change fewer files")
            .details(json!({"exit_code": exit_code}));
        }
        let kind = if e.kind == FsErrorKind::TooBig {
            ErrorKind::QuotaExceeded
        } else {
            ErrorKind::Unsupported
        };
        ToolError::new(kind, format!("the script ran (exit {exit_code}) but its changes cannot be made: {}", e.msg))
            .hint("nothing was changed; change fewer or smaller existing files per call, or avoid removing symbolic links")
            .details(json!({"exit_code": exit_code}))
    })?;
    if !dry_run {
        commit::refuse_read_only(&planned, vfs)?;
    }
    Ok(planned)
}

/// The output record: effects and summary from `data`.
fn finish(data: RunData) -> Output {
    let dry_run = data.dry_run;
    let mut output = Output::new(&data);
    for c in &data.changes {
        output = output.effect(c.effect(!dry_run));
    }
    let verb = if dry_run { "would change" } else { "changed" };
    let exit_code = data.exit_code;
    let summary = match (&data.stopped, data.changes.len()) {
        (Some(why), n) if dry_run => format!(
            "INCOMPLETE: the script stopped ({why}) before its end, so what execute would do \
             is unknown; until then it would have changed {n} paths"
        ),
        (Some(why), _) => format!("script stopped ({why}); nothing changed"),
        (None, 0) => format!("script exited {exit_code}; no files {verb}"),
        (None, n) => format!("script exited {exit_code}; {n} paths {verb}"),
    };
    output.summary(if dry_run {
        format!("Dry run: {summary}")
    } else {
        summary
    })
}

#[cfg(test)]
mod tests;
#[cfg(test)]
mod tests_parity;
