//! Turning the script's changes into real ones, and undoing them.
//!
//! [`plan`] compares the overlay ([`crate::vfs::Vfs`]) with the real files
//! and lists the operations, in the order they must run: remove what the
//! script removed or replaced by another kind (files before their
//! directories), create the new directories (parents first), then write the
//! files. Each [`Change`] carries the pre-image of its path (absent, a
//! directory, or a file's content and SHA-256) and the post-image (its
//! SHA-256), recorded *before* anything is touched. [`apply`] runs them and
//! stops at the first failure, returning what it did. [`undo`] walks the
//! changes in reverse: a path still in its post-image is put back to its
//! pre-image, a path already in its pre-image is left alone (so undo is
//! idempotent and accepts a dry run's plan for a step that never ran), and a
//! path in any other state was changed by someone else: it is left alone and
//! reported, and the compensation ends `unrevertible`.
//!
//! Files are read, written and removed through the SDK's guarded file
//! ([`capsaga_sdk::fs::open_file`]): no link followed on the way or at the
//! end. A file's pre-image keeps its identity ([`FileId`]: which object, how
//! many names); `apply` writes only to that object, and [`undo`] writes back
//! only to it while it has no more names than then, and removes a file the
//! script created only while it has one name. A link, a directory or a FIFO
//! swapped in, another file, or a hard link added since (to a file outside
//! the grant or inside it) is left alone and reported, never written
//! through.

use std::collections::BTreeSet;
use std::fs;
use std::io;
use std::path::{Path, PathBuf};

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as BASE64;
use capsaga_sdk::fs::{Expect, FileError, FileId, Follow, open_file, resolve};
use capsaga_sdk::prelude::*;
use sha2::{Digest, Sha256};

use crate::vfs::{FsError, FsErrorKind, Kind, MAX_FILE_BYTES, Node, Vfs, real_stat};

/// Most bytes of previous file content one call keeps to undo itself
/// (2 MiB): the pre-images travel in the tool's output.
pub const MAX_UNDO_BYTES: u64 = 2 * 1024 * 1024;

/// Most paths one call may change.
pub const MAX_CHANGES: usize = 10_000;

/// How [`Before::File::content`] is encoded.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum Encoding {
    /// UTF-8 text as is.
    Utf8,
    /// Standard base64 of the bytes.
    Base64,
}

/// A path before the call.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
#[serde(tag = "kind", rename_all = "lowercase")]
pub enum Before {
    /// Nothing there.
    Absent,
    /// A directory.
    Dir,
    /// A file with this content.
    File {
        /// The content.
        content: String,
        /// How `content` is encoded.
        encoding: Encoding,
        /// Lowercase hex SHA-256 of the bytes.
        sha256: String,
        /// Which file it was and how many names it had (absent in outputs
        /// of older versions): writes and undo go only to that file.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        id: Option<FileId>,
    },
}

impl Before {
    /// What a write over this path accepts there: the file it was, or
    /// nothing.
    fn expect(&self) -> Expect {
        match self {
            Before::File { id, .. } => Expect::same_or_one_name(id.as_ref()),
            _ => Expect::Absent,
        }
    }
}

/// A path after the call.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
#[serde(tag = "kind", rename_all = "lowercase")]
pub enum After {
    /// Removed.
    Absent,
    /// A directory.
    Dir,
    /// A file with this content.
    File {
        /// Lowercase hex SHA-256 of the bytes.
        sha256: String,
        /// Its size.
        bytes: u64,
    },
}

/// One path changed by the call, in the order applied.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct Change {
    /// The resolved absolute path.
    pub path: String,
    /// Its pre-image.
    pub before: Before,
    /// Its post-image.
    pub after: After,
}

impl Change {
    /// A human-readable effect, e.g. "wrote /w/a.txt (12 bytes)".
    pub fn effect(&self, done: bool) -> String {
        let (verb_done, verb_would) = match (&self.before, &self.after) {
            (_, After::File { bytes, .. }) => {
                let v = if matches!(self.before, Before::Absent) {
                    "create"
                } else {
                    "replace"
                };
                return if done {
                    format!("wrote {} ({bytes} bytes)", self.path)
                } else {
                    format!("would {v} {} ({bytes} bytes)", self.path)
                };
            }
            (_, After::Dir) => ("created directory", "would create directory"),
            (Before::Dir, After::Absent) => ("removed directory", "would remove directory"),
            (_, After::Absent) => ("removed", "would remove"),
        };
        format!(
            "{} {}",
            if done { verb_done } else { verb_would },
            self.path
        )
    }
}

/// A planned operation.
pub struct Planned {
    /// What it changes.
    pub change: Change,
    op: Op,
}

enum Op {
    RemoveFile,
    RemoveDir,
    CreateDir,
    Write(std::rc::Rc<Vec<u8>>),
}

/// Lowercase hex SHA-256.
pub fn sha256_hex(bytes: &[u8]) -> String {
    let digest = Sha256::digest(bytes);
    let mut s = String::with_capacity(64);
    for b in digest {
        s.push_str(&format!("{b:02x}"));
    }
    s
}

fn file_before((bytes, id): (Vec<u8>, FileId)) -> Before {
    let sha256 = sha256_hex(&bytes);
    let id = Some(id);
    match String::from_utf8(bytes) {
        Ok(content) => Before::File {
            content,
            encoding: Encoding::Utf8,
            sha256,
            id,
        },
        Err(e) => Before::File {
            content: BASE64.encode(e.into_bytes()),
            encoding: Encoding::Base64,
            sha256,
            id,
        },
    }
}

/// The bytes and identity of the regular file `p`, reached without
/// following a link.
fn read_real(p: &Path) -> Result<(Vec<u8>, FileId), FsError> {
    let shown = p.display();
    let file = match open_file(p, &Expect::Any) {
        Ok(Some(f)) => f,
        Ok(None) => return Err(FsError::new(FsErrorKind::NotFound, shown.to_string())),
        Err(FileError::Io(e)) => {
            return Err(FsError::new(FsErrorKind::Io, format!("{shown}: {e}")));
        }
        Err(e) => {
            return Err(FsError::new(
                FsErrorKind::Unsupported,
                format!("{shown}: {e}"),
            ));
        }
    };
    let too_big = |len: u64| FsError::new(FsErrorKind::TooBig, format!("{shown}: {len} bytes"));
    if file.len() > MAX_FILE_BYTES {
        return Err(too_big(file.len()));
    }
    let bytes = file
        .read_at_most(MAX_FILE_BYTES)
        .map_err(|e| FsError::new(FsErrorKind::Io, format!("{shown}: {e}")))?;
    if bytes.len() as u64 > MAX_FILE_BYTES {
        return Err(too_big(bytes.len() as u64));
    }
    Ok((bytes, file.id().clone()))
}

fn real_kind(p: &Path) -> Result<Option<Kind>, FsError> {
    Ok(real_stat(p)?.map(|s| s.kind))
}

/// The operations that make the real files match the overlay, with their
/// pre-images, in order.
///
/// # Errors
/// `Unsupported` when a symbolic link or special file would have to be
/// removed; `TooBig` when more than [`MAX_UNDO_BYTES`] of previous content
/// or more than [`MAX_CHANGES`] paths would change (nothing may then be
/// applied); `Deadline` when `stop_at_ms` (ms since the epoch) passes
/// while planning (nothing has been changed then); I/O errors.
pub fn plan(vfs: &Vfs, stop_at_ms: Option<u64>) -> Result<Vec<Planned>, FsError> {
    let mut out = Vec::new();
    let mut removed: BTreeSet<PathBuf> = BTreeSet::new();
    let mut removal_roots: Vec<PathBuf> = Vec::new();
    let in_time = || match stop_at_ms {
        Some(stop) if crate::shell::now_ms() >= stop => Err(FsError::new(
            FsErrorKind::Deadline,
            "the call's time ran out while reading the files the script changes",
        )),
        _ => Ok(()),
    };
    // One stat per changed path (a WASI call costs): the real kinds, once.
    let mut kinds = std::collections::BTreeMap::new();
    for p in vfs.nodes().keys() {
        in_time()?;
        kinds.insert(p, real_kind(p)?);
    }
    let kind_of = |p: &PathBuf| kinds.get(p).copied().flatten();
    for (p, node) in vfs.nodes() {
        let Some(rk) = kind_of(p) else { continue };
        let replace = match node {
            Node::Deleted | Node::Dir { opaque: true } => true,
            Node::Dir { .. } => rk != Kind::Dir,
            Node::File(_) => rk != Kind::File,
        };
        if !replace || removal_roots.iter().any(|r| p.starts_with(r)) {
            continue;
        }
        removal_roots.push(p.clone());
        collect_removals(p, rk, &mut out, &mut removed)?;
    }
    for (p, node) in vfs.nodes() {
        if matches!(node, Node::Dir { .. })
            && (removed.contains(p) || kind_of(p) != Some(Kind::Dir))
        {
            out.push(Planned {
                change: Change {
                    path: p.display().to_string(),
                    before: Before::Absent,
                    after: After::Dir,
                },
                op: Op::CreateDir,
            });
        }
    }
    for (p, node) in vfs.nodes() {
        let Node::File(data) = node else { continue };
        in_time()?;
        let before = if removed.contains(p) {
            Before::Absent
        } else {
            match kind_of(p) {
                None => Before::Absent,
                Some(Kind::File) => file_before(read_real(p)?),
                Some(_) => {
                    return Err(FsError::new(
                        FsErrorKind::Unsupported,
                        format!("{}: not a regular file", p.display()),
                    ));
                }
            }
        };
        let sha256 = sha256_hex(data);
        if matches!(&before, Before::File { sha256: s, .. } if *s == sha256) {
            continue;
        }
        out.push(Planned {
            change: Change {
                path: p.display().to_string(),
                before,
                after: After::File {
                    sha256,
                    bytes: data.len() as u64,
                },
            },
            op: Op::Write(data.clone()),
        });
    }
    check_budget(&out)?;
    Ok(out)
}

fn check_budget(out: &[Planned]) -> Result<(), FsError> {
    if out.len() > MAX_CHANGES {
        return Err(FsError::new(
            FsErrorKind::TooBig,
            format!(
                "the script would change {} paths, more than shell_run undoes in one call \
                 ({MAX_CHANGES}); nothing was changed",
                out.len()
            ),
        ));
    }
    let kept: u64 = out
        .iter()
        .map(|p| match &p.change.before {
            Before::File { content, .. } => content.len() as u64,
            _ => 0,
        })
        .sum();
    if kept > MAX_UNDO_BYTES {
        return Err(FsError::new(
            FsErrorKind::TooBig,
            format!(
                "the script would remove or overwrite {kept} bytes of existing files, more \
                 than shell_run keeps to undo a call ({MAX_UNDO_BYTES}); nothing was changed"
            ),
        ));
    }
    Ok(())
}

/// The real subtree at `p`, children before their directory.
fn collect_removals(
    p: &Path,
    kind: Kind,
    out: &mut Vec<Planned>,
    removed: &mut BTreeSet<PathBuf>,
) -> Result<(), FsError> {
    if out.len() > MAX_CHANGES {
        return check_budget(out);
    }
    match kind {
        Kind::File => {
            let before = file_before(read_real(p)?);
            out.push(Planned {
                change: Change {
                    path: p.display().to_string(),
                    before,
                    after: After::Absent,
                },
                op: Op::RemoveFile,
            });
        }
        Kind::Dir => {
            let mut names: Vec<(PathBuf, Kind)> = Vec::new();
            let rd = fs::read_dir(p)
                .map_err(|e| FsError::new(FsErrorKind::Io, format!("{}: {e}", p.display())))?;
            for e in rd {
                let e =
                    e.map_err(|e| FsError::new(FsErrorKind::Io, format!("{}: {e}", p.display())))?;
                let child = p.join(e.file_name());
                if let Some(k) = real_kind(&child)? {
                    names.push((child, k));
                }
            }
            names.sort_by(|a, b| a.0.cmp(&b.0));
            for (child, k) in names {
                collect_removals(&child, k, out, removed)?;
            }
            out.push(Planned {
                change: Change {
                    path: p.display().to_string(),
                    before: Before::Dir,
                    after: After::Absent,
                },
                op: Op::RemoveDir,
            });
        }
        Kind::Link | Kind::Other => {
            return Err(FsError::new(
                FsErrorKind::Unsupported,
                format!(
                    "{}: is a symbolic link or special file; shell_run does not remove those \
                     (it could not put them back); nothing was changed",
                    p.display()
                ),
            ));
        }
    }
    removed.insert(p.to_path_buf());
    Ok(())
}

/// Refuses the plan when a change lies under a read-only grant: the script
/// ran as in a dry run (which cannot tell read-only grants from writable
/// ones), so the refusal comes here, before anything is changed.
///
/// # Errors
/// `permission-denied` naming the paths (at most 5) and their grants.
pub fn refuse_read_only(planned: &[Planned], vfs: &Vfs) -> Result<(), ToolError> {
    let bad: Vec<&str> = planned
        .iter()
        .map(|p| p.change.path.as_str())
        .filter(|p| !vfs.root_of(Path::new(p)).is_some_and(|r| r.writable))
        .collect();
    if bad.is_empty() {
        return Ok(());
    }
    let shown: Vec<&str> = bad.iter().take(5).copied().collect();
    Err(ToolError::permission_denied(format!(
        "the script would change {} paths under directories granted read-only (e.g. {}); \
         nothing was changed",
        bad.len(),
        shown.join(", ")
    ))
    .hint("write only inside the directories granted with fs:write; nothing was changed"))
}

/// Runs the planned operations in order. Returns the changes made and, if
/// one failed, why (the rest was not attempted). With `stop_at_ms` (ms
/// since the epoch), no operation starts at or after it: the call returns
/// in time with an exact record of what was changed, instead of being cut
/// off by the host's deadline in the middle of its writes.
pub fn apply(
    planned: Vec<Planned>,
    ctx: &CallContext,
    stop_at_ms: Option<u64>,
) -> (Vec<Change>, Option<String>) {
    let mut done = Vec::with_capacity(planned.len());
    let total = planned.len();
    for p in planned {
        if let Some(stop) = stop_at_ms
            && crate::shell::now_ms() >= stop
        {
            let msg = format!(
                "stopped before the call's deadline after {} of {total} changes; the rest \
                 was not attempted",
                done.len()
            );
            return (done, Some(msg));
        }
        let path = PathBuf::from(&p.change.path);
        let r = match &p.op {
            Op::RemoveFile => fs::remove_file(&path),
            Op::RemoveDir => fs::remove_dir(&path),
            Op::CreateDir => fs::create_dir(&path),
            Op::Write(data) => temp_path(&path, ctx, "execute")
                .ok_or_else(|| io::Error::from(io::ErrorKind::InvalidInput))
                .and_then(|tmp| {
                    let expect = p.change.before.expect();
                    Ok(capsaga_sdk::fs::write_file(&path, data, &tmp, &expect)?)
                }),
        };
        if let Err(e) = r {
            let mut msg = format!("{}: {e}", path.display());
            if msg.len() > 1024 {
                let cut = (0..=1024)
                    .rev()
                    .find(|i| msg.is_char_boundary(*i))
                    .unwrap_or(0);
                msg.truncate(cut);
            }
            return (done, Some(msg));
        }
        done.push(p.change);
    }
    (done, None)
}

/// The scratch path of a write to `path` by the step of `ctx` in `op`
/// (`execute` or `compensate`): `<dir>/.<name>.<16 hex>.capsaga-tmp`. Given
/// to [`capsaga_sdk::fs::write_file`], which writes an existing file in
/// place (permission bits, owner and hard links kept; WASI cannot read or
/// set modes), only when it is the file expected, and a new one through
/// this scratch and a rename; a crash leaves the scratch, and the step's
/// compensation then knows the path may be partly written, restores it,
/// and removes the scratch.
pub fn temp_path(path: &Path, ctx: &CallContext, op: &str) -> Option<PathBuf> {
    let (parent, name) = (path.parent()?, path.file_name()?);
    let key = sha256_hex(format!("{}\0{op}\0{}", ctx.idempotency_key, path.display()).as_bytes());
    Some(parent.join(format!(
        ".{}.{}.capsaga-tmp",
        name.to_string_lossy(),
        &key[..16]
    )))
}

fn remove_scratches(scratches: &[PathBuf]) {
    for t in scratches {
        let _ = fs::remove_file(t);
    }
}

/// What is at a path now, for [`undo`].
#[derive(Debug, PartialEq, Eq)]
enum Now {
    Absent,
    Dir,
    File(String),
    Other,
}

fn observe(p: &Path) -> Result<Now, String> {
    match real_stat(p).map_err(|e| e.msg)? {
        None => Ok(Now::Absent),
        Some(s) if s.kind == Kind::Dir => Ok(Now::Dir),
        Some(s) if s.kind == Kind::File => {
            // Read without following: a link swapped in meanwhile is not
            // read through (and is someone else's).
            let file = match open_file(p, &Expect::Any) {
                Ok(Some(f)) => f,
                Ok(None) => return Ok(Now::Absent),
                Err(FileError::Link | FileError::NotAFile { .. }) => return Ok(Now::Other),
                Err(e) => return Err(format!("{}: {e}", p.display())),
            };
            let mut h = Sha256::new();
            io::copy(&mut file.reader(), &mut h).map_err(|e| format!("{}: {e}", p.display()))?;
            let mut s = String::with_capacity(64);
            for b in h.finalize() {
                s.push_str(&format!("{b:02x}"));
            }
            Ok(Now::File(s))
        }
        Some(_) => Ok(Now::Other),
    }
}

fn matches_before(now: &Now, b: &Before) -> bool {
    match (now, b) {
        (Now::Absent, Before::Absent) | (Now::Dir, Before::Dir) => true,
        (Now::File(s), Before::File { sha256, .. }) => s == sha256,
        _ => false,
    }
}

fn matches_after(now: &Now, a: &After) -> bool {
    match (now, a) {
        (Now::Absent, After::Absent) | (Now::Dir, After::Dir) => true,
        (Now::File(s), After::File { sha256, .. }) => s == sha256,
        _ => false,
    }
}

fn decode(b: &Before) -> Result<Vec<u8>, String> {
    let Before::File {
        content,
        encoding,
        sha256,
        ..
    } = b
    else {
        return Err("not a file".into());
    };
    let bytes = match encoding {
        Encoding::Utf8 => content.as_bytes().to_vec(),
        Encoding::Base64 => BASE64
            .decode(content)
            .map_err(|e| format!("bad base64: {e}"))?,
    };
    if sha256_hex(&bytes) != *sha256 {
        return Err("the pre-image does not match its sha256".into());
    }
    Ok(bytes)
}

/// Undoes `changes` (in reverse order). Returns the restored paths.
///
/// # Errors
/// `unrevertible` naming every path that was changed by someone else since
/// (those are left alone; the others are restored), or whose path now leads
/// elsewhere; `invalid-args` for a damaged pre-image.
pub fn undo(changes: &[Change], ctx: &CallContext) -> Result<Vec<String>, ToolError> {
    let mut restored = Vec::new();
    let mut conflicts = Vec::new();
    for c in changes.iter().rev() {
        // The path must still resolve, inside the grants, to itself.
        match resolve(&c.path, Follow::NoFinal) {
            Ok(r) if r == Path::new(&c.path) => {}
            Ok(r) => {
                conflicts.push(format!("{} now leads to {}", c.path, r.display()));
                continue;
            }
            Err(e) => return Err(e),
        }
        let p = Path::new(&c.path);
        // A scratch left by an interrupted write (execute's or an earlier
        // undo's): the file may be partly written, and is ours to restore.
        let scratches: Vec<PathBuf> = ["execute", "compensate"]
            .iter()
            .filter_map(|op| temp_path(p, ctx, op))
            .collect();
        let torn = scratches.iter().any(|t| capsaga_sdk::fs::interrupted(t));
        let now = observe(p).map_err(|m| ToolError::external(m).retriable(true))?;
        if matches_before(&now, &c.before) {
            remove_scratches(&scratches);
            continue;
        }
        let ours = torn && matches!((&now, &c.before), (Now::File(_), Before::File { .. }));
        if !matches_after(&now, &c.after) && !ours {
            conflicts.push(format!(
                "{} was changed by someone else since the script ran (found {})",
                c.path,
                match &now {
                    Now::Absent => "nothing".to_owned(),
                    Now::Dir => "a directory".to_owned(),
                    Now::File(s) => format!("a file with sha256 {s}"),
                    Now::Other => "a special file".to_owned(),
                }
            ));
            continue;
        }
        let r = match &c.before {
            Before::Absent => match now {
                Now::Dir => fs::remove_dir(p),
                // The script created it: one name, never one linked since.
                _ => match capsaga_sdk::fs::remove_file(p, &Expect::OneName) {
                    Ok(_) => Ok(()),
                    Err(FileError::Io(e)) => Err(e),
                    Err(e) => {
                        conflicts.push(format!("{}: {e}; not removed", c.path));
                        continue;
                    }
                },
            },
            Before::Dir => fs::create_dir(p),
            Before::File { .. } => {
                let bytes = decode(&c.before).map_err(|m| {
                    ToolError::invalid_args(format!("the pre-image of {} is unusable: {m}", c.path))
                        .hint("pass compensate the output that execute or dry-run returned, unchanged")
                })?;
                let expect = match now {
                    Now::Absent => Expect::Absent,
                    _ => c.before.expect(),
                };
                let tmp = temp_path(p, ctx, "compensate").ok_or_else(|| {
                    ToolError::invalid_args(format!("{} does not name a file", c.path))
                })?;
                match capsaga_sdk::fs::write_file(p, &bytes, &tmp, &expect) {
                    Ok(()) => Ok(()),
                    Err(FileError::Io(e)) => Err(e),
                    Err(e) => {
                        conflicts.push(format!(
                            "{}: {e}; the undo did not write through it",
                            c.path
                        ));
                        continue;
                    }
                }
            }
        };
        match r {
            Ok(()) => {
                remove_scratches(&scratches);
                restored.push(c.path.clone());
            }
            Err(e) if e.kind() == io::ErrorKind::DirectoryNotEmpty => conflicts.push(format!(
                "{}: someone added files to this directory since the script created it",
                c.path
            )),
            Err(e) => return Err(ToolError::from_io(&e, p)),
        }
    }
    if conflicts.is_empty() {
        Ok(restored)
    } else {
        Err(ToolError::unrevertible(format!(
            "shell_run restored {} paths but left {} alone: {}",
            restored.len(),
            conflicts.len(),
            conflicts.join("; ")
        ))
        .hint("do not overwrite them; tell the operator which files changed meanwhile")
        .details(json!({"conflicts": conflicts, "restored": restored})))
    }
}
