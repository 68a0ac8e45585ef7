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
use std::io;
use std::path::{Path, PathBuf};

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as BASE64;
use capsaga_sdk::fs::{Expect, FileError, FileId, Follow, open_file, resolve};
use capsaga_sdk::prelude::*;
use sha2::{Digest, Sha256};

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

/// How [`Previous::content`] is encoded.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum Encoding {
    /// The content is the file's text as is.
    Utf8,
    /// The file was not UTF-8: standard base64 of its bytes.
    Base64,
}

/// The file before the write: what `compensate` restores.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct Previous {
    /// Whether the file existed.
    pub existed: bool,
    /// Its content (`null` when it did not exist).
    pub content: Option<String>,
    /// Encoding of `content` (`null` when it did not exist).
    pub encoding: Option<Encoding>,
    /// Lowercase hex SHA-256 of its bytes (`null` when it did not exist).
    pub sha256: Option<String>,
    /// Which file it was and how many names it had (absent when it did not
    /// exist, and in outputs of older versions): the undo writes only to
    /// that file, never through a link put in its place.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<FileId>,
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

/// The file as `compensate` finds it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Current {
    /// Nothing at the path.
    Absent,
    /// A regular file with this lowercase hex SHA-256.
    File {
        /// Hash of its bytes.
        sha256: String,
    },
    /// Something that is not a regular file (directory, symbolic link...).
    Other,
}

/// What `compensate` must do, decided by [`decide`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Plan {
    /// The file is as before the write (or the write never happened).
    Nothing,
    /// The file holds what we wrote and did not exist before: remove it.
    Remove,
    /// The file holds what we wrote: put the previous content back.
    Restore,
    /// The file holds something else: a third party changed it; refuse.
    Conflict,
}

/// The compensation decision (pure): compare the file as it is now with the
/// pre-image and with what was written.
pub fn decide(previous: &Previous, written_sha256: &str, current: &Current) -> Plan {
    match current {
        Current::Absent if !previous.existed => Plan::Nothing,
        Current::Absent | Current::Other => Plan::Conflict,
        Current::File { sha256 } => {
            if previous.existed && previous.sha256.as_deref() == Some(sha256.as_str()) {
                Plan::Nothing
            } else if sha256 == written_sha256 {
                if previous.existed {
                    Plan::Restore
                } else {
                    Plan::Remove
                }
            } else {
                Plan::Conflict
            }
        }
    }
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

fn crate_log(message: &str) {
    capsaga_sdk::log::info(message);
}

/// Everything `execute` and `dry_run` learn before writing.
struct Prepared {
    /// The path to write: resolved, inside the grants, not a symbolic link.
    target: PathBuf,
    previous: Previous,
    written_sha256: String,
    missing_dirs: Vec<PathBuf>,
}

impl Prepared {
    fn data(&self, args: &Args, dry_run: bool) -> WriteData {
        WriteData {
            path: args.path.clone(),
            resolved_path: Some(self.target.display().to_string()),
            bytes_written: args.content.len() as u64,
            created: !self.previous.existed,
            created_dirs: self
                .missing_dirs
                .iter()
                .map(|d| d.display().to_string())
                .collect(),
            previous: self.previous.clone(),
            written_sha256: self.written_sha256.clone(),
            dry_run,
        }
    }
}

/// Validates the path, captures the pre-image and finds missing parents.
fn prepare(args: &Args) -> Result<Prepared, ToolError> {
    let target = locate(&args.path)?;
    let Some(parent) = target.parent() else {
        return Err(
            ToolError::invalid_args(format!("path {:?} does not name a file", args.path))
                .hint("end the path with a file name, e.g. /dir/notes.txt"),
        );
    };
    let missing_dirs = missing_ancestors(parent)?;
    if !missing_dirs.is_empty() && !args.create_dirs {
        return Err(ToolError::not_found(format!(
            "the directory {} does not exist",
            parent.display()
        ))
        .hint("set create_dirs to true to create it, or write into an existing directory"));
    }
    let previous = if missing_dirs.is_empty() {
        capture_previous(&target)?
    } else {
        Previous {
            existed: false,
            content: None,
            encoding: None,
            sha256: None,
            id: None,
        }
    };
    Ok(Prepared {
        target,
        previous,
        written_sha256: sha256_hex(args.content.as_bytes()),
        missing_dirs,
    })
}

/// The file to write for `raw`: checked against the grants and resolved
/// ([`resolve`]), not a symbolic link.
///
/// # Errors
/// `invalid-args` for a path that is relative while several directories are
/// granted, or does not end with a file
/// name; `permission-denied` when the path, or a symbolic link on the way or
/// at its end, leads outside the granted directories; `unsupported` when the
/// final component is a symbolic link inside them (see the crate docs).
fn locate(raw: &str) -> Result<PathBuf, ToolError> {
    // Follow the final link too, so that a link leading out is refused as
    // such (permission-denied), whatever its target.
    let followed = resolve(raw, Follow::Final)?;
    let target = resolve(raw, Follow::NoFinal)?;
    if matches!(raw.rsplit('/').next(), Some("" | "." | "..")) {
        return Err(
            ToolError::invalid_args(format!("path {raw:?} does not name a file"))
                .hint("end the path with a file name, e.g. /dir/notes.txt"),
        );
    }
    if followed != target {
        return Err(ToolError::unsupported(format!(
            "{raw} is a symbolic link (to {})",
            followed.display()
        ))
        .hint(format!(
            "fs_write does not write through symbolic links; write to the link's target path {}",
            followed.display()
        ))
        .details(json!({"path": raw, "link_target": followed.display().to_string()})));
    }
    Ok(target)
}

/// Ancestors of `dir` (itself included) that do not exist, outermost first.
fn missing_ancestors(dir: &Path) -> Result<Vec<PathBuf>, ToolError> {
    let mut missing = Vec::new();
    for ancestor in dir.ancestors() {
        match fs::metadata(ancestor) {
            Ok(meta) if meta.is_dir() => break,
            Ok(_) => {
                return Err(ToolError::invalid_args(format!(
                    "{} is not a directory",
                    ancestor.display()
                ))
                .hint("a component of the path is a file; choose another path"));
            }
            Err(e) if e.kind() == io::ErrorKind::NotFound => missing.push(ancestor.to_path_buf()),
            Err(e) => return Err(ToolError::from_io(&e, ancestor)),
        }
    }
    missing.reverse();
    Ok(missing)
}

/// Reads the file at `path` (if any) as the pre-image, with its identity,
/// reached through the SDK's guarded file (no link followed).
fn capture_previous(path: &Path) -> Result<Previous, ToolError> {
    let shown = path.display();
    let file = match open_file(path, &Expect::Any) {
        Ok(Some(f)) => f,
        Ok(None) => {
            return Ok(Previous {
                existed: false,
                content: None,
                encoding: None,
                sha256: None,
                id: None,
            });
        }
        Err(FileError::Link) => {
            return Err(
                ToolError::unsupported(format!("{shown} is a symbolic link")).hint(
                    "fs_write does not write through symbolic links; write to the link's target path",
                ),
            );
        }
        Err(FileError::NotAFile { kind: "directory" }) => {
            return Err(ToolError::invalid_args(format!("{shown} is a directory"))
                .hint("give the path of a file, e.g. a new name inside this directory"));
        }
        Err(FileError::NotAFile { kind }) => {
            return Err(ToolError::unsupported(format!(
                "{shown} is not a regular file (a {kind})"
            )));
        }
        Err(e) => return Err(e.tool_error(path)),
    };
    let too_big = |size: u64| {
        ToolError::unsupported(format!(
            "{shown} has {size} bytes; fs_write keeps at most {MAX_PRE_IMAGE_BYTES} bytes of \
             previous content to be able to undo the write"
        ))
        .hint("fs_write cannot replace files over 4 MiB; write a new file instead")
        .details(
            json!({"path": shown.to_string(), "size_bytes": size, "limit": MAX_PRE_IMAGE_BYTES}),
        )
    };
    if file.len() > MAX_PRE_IMAGE_BYTES {
        return Err(too_big(file.len()));
    }
    let bytes = file
        .read_at_most(MAX_PRE_IMAGE_BYTES)
        .map_err(|e| e.tool_error(path))?;
    if bytes.len() as u64 > MAX_PRE_IMAGE_BYTES {
        return Err(too_big(bytes.len() as u64));
    }
    let sha256 = sha256_hex(&bytes);
    let (content, encoding) = match String::from_utf8(bytes) {
        Ok(text) => (text, Encoding::Utf8),
        Err(e) => (BASE64.encode(e.into_bytes()), Encoding::Base64),
    };
    Ok(Previous {
        existed: true,
        content: Some(content),
        encoding: Some(encoding),
        sha256: Some(sha256),
        id: Some(file.id().clone()),
    })
}

/// What is at `path` now, reached through the SDK's guarded file: a link
/// or anything but a regular file is [`Current::Other`]; a link or a
/// non-directory on the way is an error (the path leads elsewhere now).
fn observe(path: &Path) -> Result<Current, FileError> {
    let file = match open_file(path, &Expect::Any) {
        Ok(Some(f)) => f,
        Ok(None) => return Ok(Current::Absent),
        Err(FileError::Link | FileError::NotAFile { .. }) => return Ok(Current::Other),
        Err(e) => return Err(e),
    };
    let mut hasher = Sha256::new();
    io::copy(&mut file.reader(), &mut hasher)?;
    Ok(Current::File {
        sha256: hex(&hasher.finalize()),
    })
}

/// The previous content as bytes, checked against its hash.
fn decode_previous(previous: &Previous) -> Result<Vec<u8>, ToolError> {
    let bad = |why: &str| {
        ToolError::invalid_args(format!("the pre-image in the output is unusable: {why}"))
            .hint("pass compensate the output that execute or dry-run returned, unchanged")
    };
    let content = previous
        .content
        .as_deref()
        .ok_or_else(|| bad("no content"))?;
    let bytes = match previous.encoding {
        Some(Encoding::Utf8) => content.as_bytes().to_vec(),
        Some(Encoding::Base64) => BASE64
            .decode(content)
            .map_err(|e| bad(&format!("bad base64: {e}")))?,
        None => return Err(bad("no encoding")),
    };
    if previous.sha256.as_deref() != Some(sha256_hex(&bytes).as_str()) {
        return Err(bad("content does not match its sha256"));
    }
    Ok(bytes)
}

/// Writes `bytes` to `path` with [`capsaga_sdk::fs::write_file`] when what
/// is there is what `expect` accepts: an existing file in place (its mode,
/// owner and hard links kept), a new one through a temporary file and a
/// rename.
///
/// The scratch name is derived from the step's idempotency key and the
/// operation ([`temp_path`]): a process killed during the write leaves it,
/// and the step's own compensation (or its next attempt) finds it, knows the
/// file may be partly written, and removes it.
fn atomic_write(
    path: &Path,
    bytes: &[u8],
    ctx: &CallContext,
    op: &str,
    expect: &Expect,
) -> Result<(), FileError> {
    let Some(tmp) = temp_path(path, ctx, op) else {
        return Err(FileError::Io(io::Error::new(
            io::ErrorKind::InvalidInput,
            "the path does not name a file",
        )));
    };
    capsaga_sdk::fs::write_file(path, bytes, &tmp, expect)
}

/// Removes the scratch files of this step once its compensation is done.
fn remove_scratches(scratches: &[PathBuf]) -> Result<(), ToolError> {
    scratches.iter().try_for_each(|t| remove_if_present(t))
}

/// `<dir>/.<name>.<16 hex digits>.capsaga-tmp`, the digits from the SHA-256
/// of the idempotency key and `op` (`execute` or `compensate`): stable for
/// one step, different between steps.
fn temp_path(path: &Path, ctx: &CallContext, op: &str) -> Option<PathBuf> {
    let (parent, name) = (path.parent()?, path.file_name()?);
    let mut hasher = Sha256::new();
    hasher.update(ctx.idempotency_key.as_bytes());
    hasher.update([0u8]);
    hasher.update(op.as_bytes());
    Some(parent.join(format!(
        ".{}.{}.capsaga-tmp",
        name.to_string_lossy(),
        hex(&hasher.finalize()[..8])
    )))
}

/// Remove `path` if it exists (a symlink is removed, not followed).
fn remove_if_present(path: &Path) -> Result<(), ToolError> {
    match fs::remove_file(path) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(ToolError::from_io(&e, path)),
    }
}

/// Removes the directories this step created, innermost first, if empty.
/// Failures (not empty, already gone) are ignored: never remove others' files.
/// Each path is checked again first and skipped unless it still resolves,
/// inside the grants, to itself (no symbolic link on the way any more).
fn remove_empty_dirs(dirs: &[String]) {
    for dir in dirs.iter().rev() {
        match resolve(dir, Follow::NoFinal) {
            Ok(resolved) if resolved == Path::new(dir) => {
                if fs::remove_dir(&resolved).is_ok() {
                    crate_log(&format!("removed empty directory {dir}"));
                }
            }
            _ => capsaga_sdk::log::warn(&format!(
                "left {dir} alone: it no longer resolves to itself inside the granted directories"
            )),
        }
    }
}

/// Lowercase hex SHA-256 of `bytes`.
pub fn sha256_hex(bytes: &[u8]) -> String {
    hex(&Sha256::digest(bytes))
}

fn hex(bytes: &[u8]) -> String {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut s = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        s.push(char::from(DIGITS[usize::from(b >> 4)]));
        s.push(char::from(DIGITS[usize::from(b & 0x0f)]));
    }
    s
}

#[cfg(test)]
mod tests;
