//! `fs_write`: writes a UTF-8 text file, keeping an existing file's
//! permissions, and can undo it.
//!
//! Arguments: `{"path": "/abs/dir/a.txt", "content": "...", "create_dirs":
//! false}`.
//!
//! `execute` captures the pre-image of the file (did it exist, its content as
//! UTF-8 text or base64, its SHA-256), creates missing parent directories when
//! `create_dirs` is true, then writes the file with the SDK's
//! [`capsaga_sdk::fs::write_file`]: a new file through a temporary file and a
//! rename (a reader sees it whole or not at all); an existing file in place,
//! so it keeps its permission bits, owner and hard links (WASI cannot read or
//! set modes, so a rename would widen a `0600` file to the default `0644`),
//! with a marker file that tells `compensate` a crash may have left it partly
//! written. Output data ([`WriteData`]):
//!
//! ```json
//! {"path": "/w/a.txt", "resolved_path": "/w/a.txt", "bytes_written": 5,
//!  "created": true, "created_dirs": [],
//!  "previous": {"existed": false, "content": null, "encoding": null, "sha256": null},
//!  "written_sha256": "2cf2…", "dry_run": false}
//! ```
//!
//! `dry_run` returns the same data (with `"dry_run": true`) without writing;
//! the host logs it as the pre-image for crash recovery.
//!
//! `compensate` checks the path again (it must still resolve, inside the
//! grants, to the `resolved_path` that was written, otherwise `unrevertible`),
//! then compares the file as it is now with the pre-image and what was
//! written ([`decide`]): still the previous content (or still absent) →
//! nothing to do; exactly what this step wrote → restore the previous content
//! (in place, keeping the file's mode), or remove the file this step created
//! (and the directories it created, when empty); a file whose write was
//! interrupted (the marker is there) → restore the previous content; anything
//! else → `unrevertible`, naming the conflict, because a third party changed
//! the file since.
//!
//! Links planted since the step: `execute` keeps the identity of the file it
//! replaces (which object, how many names: `previous.id`), and both writes go
//! through the SDK's guarded file ([`capsaga_sdk::fs::write_file`] with an
//! [`Expect`]): each directory reached without following a link, the file
//! opened without following, and, for the undo, required to be that same
//! object with no more names than it had. A symbolic link swapped in for the
//! file or for a directory on the way, a directory or FIFO in its place,
//! another file, or a hard link added to it (to a file outside the grant or
//! inside it) is refused with `unrevertible`, and nothing is written through
//! it. A file the step created is removed only while it has one name.
//!
//! Paths: before anything is read or written, the path is checked with
//! [`capsaga_sdk::fs::resolve`]. A `..` walk or an absolute path outside the
//! directories granted for writing, or a symbolic link (anywhere in the path,
//! the final component included) that leads outside them, fails with
//! `permission-denied`, and nothing is read or written. Symbolic links to
//! directories inside the grants are followed; the file is written at the
//! resolved path (`resolved_path` in the output, the one the effects name).
//!
//! A final component that is a symbolic link whose target is inside the
//! grants is refused with `unsupported`, naming the target: the atomic write
//! renames a new file over the path, which would replace the link itself by a
//! regular file instead of changing the file it points to, and the pre-image
//! and the undo would then concern the link and not its target. Writing to the
//! target's path does what was meant.
//!
//! Limits: pre-images over 4 MiB are refused (`unsupported`); file
//! permissions of a replaced file are not preserved (WASI has no chmod).
//!
//! Side effects, risk medium, idempotent, supports dry-run. The output holds
//! the previous content of the file, so it is marked untrusted. Needs
//! `fs:write:*`.

use std::fs;
use std::path::{Path, PathBuf};

use capsaga_sdk::fs::{Expect, Follow, resolve};
use capsaga_sdk::prelude::*;

mod files;
mod preimage;
mod prepare;
mod undo;

pub use preimage::{Encoding, Previous, sha256_hex};
pub use undo::{Current, Plan, decide};

use files::{atomic_write, remove_empty_dirs, remove_scratches, temp_path};
use preimage::decode_previous;
use prepare::prepare;
use undo::observe;

/// Largest pre-image (existing file) that `fs_write` captures: 4 MiB.
pub const MAX_PRE_IMAGE_BYTES: u64 = 4 * 1024 * 1024;

/// Arguments of `fs_write`.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Args {
    /// Absolute path of the file to write, inside a directory granted for writing.
    pub path: String,
    /// The complete new content of the file, as UTF-8 text.
    pub content: String,
    /// Create missing parent directories (default false).
    #[serde(default)]
    pub create_dirs: bool,
}

/// Output data of `execute` and `dry_run`.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct WriteData {
    /// The path as given.
    pub path: String,
    /// The path actually written: `path` with `.`, `..` and symbolic links to
    /// directories resolved (absent in outputs of older versions).
    #[serde(default)]
    pub resolved_path: Option<String>,
    /// Bytes written (for a dry run: that would be written).
    pub bytes_written: u64,
    /// True when the file did not exist before.
    pub created: bool,
    /// Parent directories created (for a dry run: missing), outermost first.
    pub created_dirs: Vec<String>,
    /// The pre-image.
    pub previous: Previous,
    /// Lowercase hex SHA-256 of the new content.
    pub written_sha256: String,
    /// True when this came from `dry_run` and nothing was written.
    pub dry_run: bool,
}

/// The tool.
pub struct FsWrite;

impl Tool for FsWrite {
    type Args = Args;

    fn meta() -> Meta {
        Meta::new(
            "fs_write",
            "Writes a UTF-8 text file (creating or replacing it) at an absolute path inside a \
             directory granted for writing; an existing file keeps its permissions, and the write \
             can be undone.",
        )
        .side_effects(true)
        .risk(Risk::Medium)
        .returns_untrusted(true)
        .idempotent(true)
        .dry_run(true)
        .capability("fs:write:*")
        // Field labels: see docs/information-flow.md (first-party tools).
        .trusted_field("/bytes_written")
        .trusted_field("/created")
        .trusted_field("/written_sha256")
        .trusted_field("/dry_run")
        .trusted_field("/previous/existed")
        .trusted_field("/previous/encoding")
        .trusted_field("/previous/sha256")
        .trusted_field("/previous/id/object")
        .trusted_field("/previous/id/names")
        .untrusted_field("/path")
        .untrusted_field("/resolved_path")
        .untrusted_field("/created_dirs")
        .untrusted_field("/previous/content")
    }

    fn execute(ctx: &CallContext, args: Args) -> Result<Output, ToolError> {
        let plan = prepare(&args)?;
        let path = plan.target.as_path();
        let shown = path.display();
        let unchanged = plan.previous.sha256.as_deref() == Some(plan.written_sha256.as_str());
        let created_dirs: Vec<String> = plan
            .missing_dirs
            .iter()
            .map(|d| d.display().to_string())
            .collect();
        if !plan.missing_dirs.is_empty()
            && let Some(parent) = path.parent()
            && let Err(e) = fs::create_dir_all(parent)
        {
            remove_empty_dirs(&created_dirs);
            return Err(ToolError::from_io(&e, parent));
        }
        let expect = if plan.previous.existed {
            Expect::same_or_one_name(plan.previous.id.as_ref())
        } else {
            Expect::Absent
        };
        if !unchanged
            && let Err(e) = atomic_write(path, args.content.as_bytes(), ctx, "execute", &expect)
        {
            // A failed step is not compensated: leave no empty directories behind.
            remove_empty_dirs(&created_dirs);
            return Err(e.tool_error(path));
        }
        let bytes = args.content.len();
        let mut out = Output::new(plan.data(&args, false));
        for dir in &plan.missing_dirs {
            out = out.effect(format!("created directory {}", dir.display()));
        }
        let (effect, summary) = if unchanged {
            (
                format!("left {shown} unchanged (same content, {bytes} bytes)"),
                format!("{shown} already had this content"),
            )
        } else if plan.previous.existed {
            (
                format!("wrote {shown} ({bytes} bytes)"),
                format!("Replaced {shown} with {bytes} bytes"),
            )
        } else {
            (
                format!("wrote {shown} ({bytes} bytes)"),
                format!("Created {shown} with {bytes} bytes"),
            )
        };
        crate_log(&effect);
        Ok(out.effect(effect).summary(summary))
    }

    fn dry_run(_ctx: &CallContext, args: Args) -> Result<Output, ToolError> {
        let plan = prepare(&args)?;
        let bytes = args.content.len();
        let mut out = Output::new(plan.data(&args, true));
        for dir in &plan.missing_dirs {
            out = out.effect(format!("would create directory {}", dir.display()));
        }
        let verb = if plan.previous.existed {
            "replace"
        } else {
            "create"
        };
        let shown = plan.target.display();
        Ok(out
            .effect(format!("would write {shown} ({bytes} bytes)"))
            .summary(format!("Would {verb} {shown} with {bytes} bytes")))
    }

    fn compensate(ctx: &CallContext, args: Args, output: &Output) -> Result<(), ToolError> {
        let data: WriteData = output.data_as()?;
        if data.path != args.path {
            return Err(ToolError::invalid_args(format!(
                "the output is for {}, the arguments for {}",
                data.path, args.path
            ))
            .hint("pass compensate the arguments and output of the same step"));
        }
        // Check the path again: it must still lead, inside the grants, to the
        // file that was written. The final component is not followed: a
        // symbolic link there now is a third party's change (`Current::Other`).
        let target = resolve(&args.path, Follow::NoFinal)?;
        if let Some(written) = &data.resolved_path
            && Path::new(written) != target
        {
            return Err(ToolError::unrevertible(format!(
                "{} now leads to {}, not to {written} where it was written (a directory \
                 on the way was replaced by a symbolic link or the reverse)",
                args.path,
                target.display()
            ))
            .hint("do not overwrite it; tell the operator that the path changed meanwhile")
            .details(
                json!({"path": args.path, "written": written, "now": target.display().to_string()}),
            ));
        }
        let path = target.as_path();
        // A crash in execute's write (or in an earlier compensation's) leaves
        // its scratch file: the file may then be partly written, and is ours
        // to restore whatever it holds.
        let scratches: Vec<PathBuf> = ["execute", "compensate"]
            .iter()
            .filter_map(|op| temp_path(path, ctx, op))
            .collect();
        let torn = scratches.iter().any(|t| capsaga_sdk::fs::interrupted(t));
        let current = observe(path).map_err(|e| e.unrevertible(path))?;
        let mut plan = decide(&data.previous, &data.written_sha256, &current);
        if torn && plan == Plan::Conflict && data.previous.existed {
            plan = Plan::Restore;
        }
        match plan {
            Plan::Nothing => remove_scratches(&scratches)?,
            Plan::Remove => {
                // The step created it: a file with one name, never one
                // someone linked since.
                if capsaga_sdk::fs::remove_file(path, &Expect::OneName)
                    .map_err(|e| e.unrevertible(path))?
                {
                    crate_log(&format!("removed {}", path.display()));
                }
                remove_scratches(&scratches)?;
            }
            Plan::Restore => {
                let bytes = decode_previous(&data.previous)?;
                let expect = Expect::same_or_one_name(data.previous.id.as_ref());
                atomic_write(path, &bytes, ctx, "compensate", &expect)
                    .map_err(|e| e.unrevertible(path))?;
                remove_scratches(&scratches)?;
                crate_log(&format!(
                    "restored {} ({} bytes)",
                    path.display(),
                    bytes.len()
                ));
            }
            Plan::Conflict => {
                let found = match &current {
                    Current::Absent => "no file".to_owned(),
                    Current::File { sha256 } => format!("content with sha256 {sha256}"),
                    Current::Other => "something that is not a regular file".to_owned(),
                };
                let expected = data
                    .previous
                    .sha256
                    .as_deref()
                    .map_or("no file".to_owned(), |s| format!("sha256 {s}"));
                return Err(ToolError::unrevertible(format!(
                    "{} was changed by someone else since it was written: found {found}, \
                     expected {expected} (before) or sha256 {} (written)",
                    args.path, data.written_sha256
                ))
                .hint("do not overwrite it; tell the operator that the file changed meanwhile")
                .details(json!({
                    "path": args.path,
                    "found": match &current {
                        Current::Absent => json!(null),
                        Current::File { sha256 } => json!(sha256),
                        Current::Other => json!("not-a-regular-file"),
                    },
                    "previous_sha256": data.previous.sha256,
                    "written_sha256": data.written_sha256,
                })));
            }
        }
        remove_empty_dirs(&data.created_dirs);
        Ok(())
    }
}

capsaga_sdk::export_tool!(FsWrite);

pub(crate) fn crate_log(message: &str) {
    capsaga_sdk::log::info(message);
}

#[cfg(test)]
mod tests;
