//! Errors of the overlay: a kind the commands map to their messages and
//! exit statuses, and the message for stderr.

use std::fmt;
use std::io;
use std::path::Path;

use super::MAX_FILE_BYTES;

/// Why a filesystem operation failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FsErrorKind {
    /// No such file or directory.
    NotFound,
    /// Outside the grants, or a read-only grant.
    Denied,
    /// Already exists.
    Exists,
    /// Not a directory.
    NotDir,
    /// Is a directory.
    IsDir,
    /// Directory not empty.
    NotEmpty,
    /// Over a size or count limit of shell_run.
    TooBig,
    /// Not supported by shell_run.
    Unsupported,
    /// Malformed path.
    Invalid,
    /// Another I/O error.
    Io,
    /// The call's time ran out before the operation could finish.
    Deadline,
}

/// A failed filesystem operation, with a message for stderr.
#[derive(Debug, Clone)]
pub struct FsError {
    /// Its kind.
    pub kind: FsErrorKind,
    /// What happened, naming the path.
    pub msg: String,
}

impl FsError {
    /// An error of `kind` with `msg`.
    pub fn new(kind: FsErrorKind, msg: impl Into<String>) -> FsError {
        FsError {
            kind,
            msg: msg.into(),
        }
    }

    pub(super) fn io(path: &Path, e: &io::Error) -> FsError {
        let kind = match e.kind() {
            io::ErrorKind::NotFound => FsErrorKind::NotFound,
            io::ErrorKind::PermissionDenied => FsErrorKind::Denied,
            io::ErrorKind::AlreadyExists => FsErrorKind::Exists,
            io::ErrorKind::NotADirectory => FsErrorKind::NotDir,
            io::ErrorKind::IsADirectory => FsErrorKind::IsDir,
            io::ErrorKind::DirectoryNotEmpty => FsErrorKind::NotEmpty,
            _ => FsErrorKind::Io,
        };
        FsError::new(kind, format!("{}: {e}", path.display()))
    }

    pub(super) fn not_found(path: &Path) -> FsError {
        FsError::new(
            FsErrorKind::NotFound,
            format!("{}: No such file or directory", path.display()),
        )
    }
}

impl fmt::Display for FsError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.msg)
    }
}

pub(super) fn is_dir(p: &Path) -> FsError {
    FsError::new(
        FsErrorKind::IsDir,
        format!("{}: Is a directory", p.display()),
    )
}

pub(super) fn too_big(p: &Path, len: u64) -> FsError {
    FsError::new(
        FsErrorKind::TooBig,
        format!(
            "{}: {len} bytes, more than shell_run handles in one file ({MAX_FILE_BYTES})",
            p.display()
        ),
    )
}
