//! A regular file reached the way a write or its undo needs it: beneath its
//! granted directory, one plain name at a time, without following any
//! symbolic link, and checked to be the file expected ([`open_file`]).
//!
//! [`resolve`](super::resolve) checks how a path is *spelled* against the
//! grants, and WASI (cap-std) keeps every access inside them. Neither sees
//! what someone outside the sandbox did to the files meanwhile: swapped a
//! directory on the way for a symbolic link (into another part of the
//! grant), put a symbolic link, a directory or a FIFO where the file was,
//! or gave the file another name with a hard link, perhaps to a file
//! outside the grant (a hard link makes it reachable from inside). The
//! writes and undos of `fs_write`, `fs_edit` and `shell_run`
//! ([`write_file`](super::write_file), [`remove_file`]) go through
//! [`open_file`], in `execute` and in `compensate` alike:
//!
//! 1. every directory from the granted one down to the file's parent is
//!    opened without following a link (a link or a non-directory there:
//!    [`FileError::Detour`]), and the file is opened from that parent
//!    without following (a link: [`FileError::Link`]; a directory, FIFO,
//!    socket or device: [`FileError::NotAFile`]);
//! 2. what was opened is compared with what the caller [`Expect`]s.
//!    `execute` takes any regular file ([`Expect::Any`]) and keeps its
//!    [`FileId`] (which object, how many names) with the pre-image in its
//!    output; `compensate` then wants that same object with no more names
//!    than it had ([`Expect::Same`]): a file replaced since is
//!    [`FileError::Replaced`], a name added since is [`FileError::Names`],
//!    and nothing is written;
//! 3. a write reopens the name from the same parent descriptor and checks
//!    that it is still that object with no more names, so what was checked
//!    is what is written.
//!
//! With the host's file journal on, the host also refuses to write a file
//! with several names; with it off (`host_rollback = false`) these checks
//! are what keeps a tool's undo from writing through a planted link. In a
//! native build (a tool's unit tests), which no sandbox confines, the same
//! rules are applied through `std` (a link on the way is seen, but a swap
//! between the look and the open is not).

use std::io::{self, Read};
use std::path::{Component, Path, PathBuf};

use serde::{Deserialize, Serialize};
use serde_json::json;

use crate::ToolError;

#[cfg(all(target_arch = "wasm32", target_os = "wasi", target_env = "p2"))]
#[path = "file/guest.rs"]
mod imp;
#[cfg(not(all(target_arch = "wasm32", target_os = "wasi", target_env = "p2")))]
#[path = "file/native.rs"]
mod imp;

/// What a file was when a step looked at it: which object, and how many
/// names (hard links) it had. Kept in a tool's output with the pre-image,
/// so that the undo can tell the file it wrote from one put in its place.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FileId {
    /// The object's identity: in a component, `wasi:filesystem`'s metadata
    /// hash of the file (its device and inode), as 32 hex digits.
    pub object: String,
    /// Its number of names (hard links).
    pub names: u64,
}

/// What [`open_file`] (and the writes and removals built on it) accepts at
/// the path.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Expect {
    /// Nothing, or any regular file (what `execute` finds).
    Any,
    /// Nothing at all (a path the step creates).
    Absent,
    /// Nothing, or a regular file with one name (a file the step created,
    /// or the pre-image of an output that has no [`FileId`]).
    OneName,
    /// This very object, with no more names than it had then.
    Same(FileId),
}

impl Expect {
    /// `Same(id)` when the pre-image has an identity, else `OneName`.
    pub fn same_or_one_name(id: Option<&FileId>) -> Expect {
        id.map_or(Expect::OneName, |id| Expect::Same(id.clone()))
    }

    /// Whether the regular file `found` is acceptable.
    ///
    /// # Errors
    /// [`FileError::Occupied`], [`FileError::Replaced`] or
    /// [`FileError::Names`].
    pub fn check(&self, found: &FileId) -> Result<(), FileError> {
        match self {
            Expect::Any => Ok(()),
            Expect::Absent => Err(FileError::Occupied),
            Expect::OneName if found.names > 1 => Err(FileError::Names {
                now: found.names,
                then: 1,
            }),
            Expect::OneName => Ok(()),
            Expect::Same(then) if then.object != found.object => Err(FileError::Replaced),
            Expect::Same(then) if found.names > then.names => Err(FileError::Names {
                now: found.names,
                then: then.names,
            }),
            Expect::Same(_) => Ok(()),
        }
    }

    /// Whether nothing at the path is acceptable.
    ///
    /// # Errors
    /// [`FileError::Gone`] when a file was expected.
    pub fn check_absent(&self) -> Result<(), FileError> {
        match self {
            Expect::Same(_) => Err(FileError::Gone),
            _ => Ok(()),
        }
    }
}

/// Why [`open_file`] (or a write or removal built on it) refused a path, or
/// failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum FileError {
    /// A directory on the way is a symbolic link or not a directory.
    #[error("{} on the way is a symbolic link or not a directory", at.display())]
    Detour {
        /// The directory (its path) that is not one.
        at: PathBuf,
    },
    /// The path itself is a symbolic link.
    #[error("it is a symbolic link")]
    Link,
    /// The path holds a directory, FIFO, socket or device.
    #[error("it is a {kind}, not a regular file")]
    NotAFile {
        /// What it is.
        kind: &'static str,
    },
    /// Something is at a path expected empty.
    #[error("something is there now where nothing was")]
    Occupied,
    /// Nothing is at a path that held the expected file.
    #[error("the file is gone")]
    Gone,
    /// The path names another file than the one expected.
    #[error("it is another file than the one the step saw (replaced since)")]
    Replaced,
    /// The file has more names (hard links) than expected.
    #[error("it has {now} names (hard links) where it had {then}: another name was linked to it")]
    Names {
        /// Its names now.
        now: u64,
        /// Its names then.
        then: u64,
    },
    /// The path lies under no granted directory.
    #[error("it is under no directory granted to this tool")]
    Outside,
    /// An I/O error.
    #[error("{0}")]
    Io(#[from] io::Error),
}

impl FileError {
    /// A short name of the refusal, for `details`: `detour`, `link`,
    /// `not-a-file`, `occupied`, `gone`, `replaced`, `names`, `outside`,
    /// `io`.
    pub fn code(&self) -> &'static str {
        match self {
            FileError::Detour { .. } => "detour",
            FileError::Link => "link",
            FileError::NotAFile { .. } => "not-a-file",
            FileError::Occupied => "occupied",
            FileError::Gone => "gone",
            FileError::Replaced => "replaced",
            FileError::Names { .. } => "names",
            FileError::Outside => "outside",
            FileError::Io(_) => "io",
        }
    }

    /// The error for `execute` (the file at `path` changed under the step,
    /// or cannot be written): `permission-denied` for a link or a detour,
    /// `unsupported` for something that is not a regular file, `external`
    /// for a file changed meanwhile, the I/O error's own kind otherwise.
    pub fn tool_error(&self, path: &Path) -> ToolError {
        let message = format!("{}: {self}", path.display());
        let details = json!({"path": path.display().to_string(), "refused": self.code()});
        match self {
            FileError::Io(e) => ToolError::from_io(e, path),
            FileError::Detour { .. } | FileError::Link | FileError::Outside => {
                ToolError::permission_denied(message)
                    .hint(
                        "the path changed while the tool worked on it; do not write through links",
                    )
                    .details(details)
            }
            FileError::NotAFile { .. } => ToolError::unsupported(message)
                .hint("give the path of a regular file")
                .details(details),
            _ => ToolError::external(message)
                .hint("someone else changed the file meanwhile; read it again before writing")
                .details(details),
        }
    }

    /// The error for `compensate`: `unrevertible`, saying nothing was
    /// written at `path`; an I/O error keeps its own kind (it may be
    /// transient).
    pub fn unrevertible(&self, path: &Path) -> ToolError {
        if let FileError::Io(e) = self {
            return ToolError::from_io(e, path);
        }
        ToolError::unrevertible(format!(
            "{}: {self}; the undo did not write through it",
            path.display()
        ))
        .hint("do not overwrite it; tell the operator that the path changed since the step")
        .details(json!({"path": path.display().to_string(), "refused": self.code()}))
    }
}

impl From<FileError> for io::Error {
    fn from(e: FileError) -> io::Error {
        match e {
            FileError::Io(e) => e,
            other => io::Error::new(io::ErrorKind::InvalidInput, other.to_string()),
        }
    }
}

/// A regular file opened by [`open_file`] (for reading), with what it is.
#[derive(Debug)]
pub struct GuardedFile {
    file: imp::Opened,
    id: FileId,
    len: u64,
}

impl GuardedFile {
    /// Which object it is and how many names it has.
    pub fn id(&self) -> &FileId {
        &self.id
    }

    /// Its size in bytes when it was opened.
    pub fn len(&self) -> u64 {
        self.len
    }

    /// True when it was empty when opened.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Its bytes, at most `max` of them: reading stops after `max + 1`, so
    /// a result longer than `max` means the file is larger.
    ///
    /// # Errors
    /// The I/O error.
    pub fn read_at_most(&self, max: u64) -> Result<Vec<u8>, FileError> {
        let mut out = Vec::new();
        self.reader()
            .take(max.saturating_add(1))
            .read_to_end(&mut out)?;
        Ok(out)
    }

    /// A reader of its bytes from the start (for hashing a large file
    /// without holding it).
    pub fn reader(&self) -> impl io::Read + '_ {
        Reader { file: self, at: 0 }
    }

    /// Its name opened again for writing from the same parent, checked to
    /// be still this object with no more names than `expect` allows: what
    /// was checked is what is written.
    ///
    /// # Errors
    /// [`FileError::Replaced`] or [`FileError::Names`] when the name now
    /// leads elsewhere or has gained names; the I/O error.
    pub(super) fn writer(&self, expect: &Expect) -> Result<imp::Writer, FileError> {
        let writer = self.file.reopen_for_writing()?;
        let now = writer.id()?;
        if now.object != self.id.object {
            return Err(FileError::Replaced);
        }
        expect.check(&now)?;
        Ok(writer)
    }
}

/// [`GuardedFile::reader`].
struct Reader<'a> {
    file: &'a GuardedFile,
    at: u64,
}

impl io::Read for Reader<'_> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = self.file.file.read_at(buf, self.at)?;
        self.at += n as u64;
        Ok(n)
    }
}

/// Open the regular file at `path` (an absolute path inside the granted
/// directories, without `.`, `..` or links: what [`resolve`](super::resolve)
/// returns) for reading, reached without following any link, and check it
/// against `expect`. `Ok(None)`: nothing is there (nor, perhaps, its
/// parent directory), and `expect` accepts that.
///
/// # Errors
/// [`FileError`]: the refusals of the [module documentation](self), or the
/// I/O error.
pub fn open_file(path: &Path, expect: &Expect) -> Result<Option<GuardedFile>, FileError> {
    let (root, parts) = split(path)?;
    let Some((name, dirs)) = parts.split_last() else {
        return Err(FileError::NotAFile { kind: "directory" });
    };
    match imp::open(&root, dirs, name)? {
        None => {
            expect.check_absent()?;
            Ok(None)
        }
        Some((file, id, len)) => {
            expect.check(&id)?;
            Ok(Some(GuardedFile { file, id, len }))
        }
    }
}

/// Remove the name `path` of a regular file that `expect` accepts (checked
/// by [`open_file`] just before: a link, a directory or another file in its
/// place is refused). `Ok(false)` when nothing was there.
///
/// # Errors
/// As [`open_file`], or the I/O error of the removal.
pub fn remove_file(path: &Path, expect: &Expect) -> Result<bool, FileError> {
    match open_file(path, expect)? {
        None => Ok(false),
        Some(f) => match f.file.remove() {
            Ok(()) => Ok(true),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(false),
            Err(e) => Err(FileError::Io(e)),
        },
    }
}

/// The granted directory `path` lies under (the most specific one) and the
/// names below it.
fn split(path: &Path) -> Result<(PathBuf, Vec<String>), FileError> {
    let root = super::granted_roots()
        .into_iter()
        .filter(|r| path.starts_with(r))
        .max_by_key(|r| r.components().count())
        .ok_or(FileError::Outside)?;
    let rest = path.strip_prefix(&root).map_err(|_| FileError::Outside)?;
    let mut names = Vec::new();
    for c in rest.components() {
        match c {
            Component::Normal(n) => match n.to_str() {
                Some(s) => names.push(s.to_owned()),
                None => {
                    return Err(FileError::Io(io::Error::new(
                        io::ErrorKind::InvalidInput,
                        "a name that is not UTF-8",
                    )));
                }
            },
            // A resolved path has none of these.
            _ => return Err(FileError::Detour { at: path.into() }),
        }
    }
    Ok((root, names))
}

/// The path of the first `n` names below `root`, for messages.
fn shown(root: &Path, names: &[String], n: usize) -> PathBuf {
    let mut p = root.to_path_buf();
    p.extend(names.iter().take(n));
    p
}

#[cfg(test)]
#[path = "file/tests.rs"]
mod tests;
