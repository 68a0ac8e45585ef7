//! Writing and removing on the file system: the guarded write (with its
//! scratch file), the scratch files' names and removal, the directories a
//! step created.

use std::fs;
use std::io;
use std::path::{Path, PathBuf};

use capsaga_sdk::fs::{Expect, FileError, Follow, resolve};
use capsaga_sdk::prelude::*;
use sha2::{Digest, Sha256};

use crate::crate_log;
use crate::preimage::hex;

/// Writes `bytes` to `path` with [`capsaga_sdk::fs::write_file`] when what
/// is there is what `expect` accepts: an existing file in place (its mode,
/// owner and hard links kept), a new one through a temporary file and a
/// rename.
///
/// The scratch name is derived from the step's idempotency key and the
/// operation ([`temp_path`]): a process killed during the write leaves it,
/// and the step's own compensation (or its next attempt) finds it, knows the
/// file may be partly written, and removes it.
pub(crate) fn atomic_write(
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
pub(crate) fn remove_scratches(scratches: &[PathBuf]) -> Result<(), ToolError> {
    scratches.iter().try_for_each(|t| remove_if_present(t))
}

/// `<dir>/.<name>.<16 hex digits>.capsaga-tmp`, the digits from the SHA-256
/// of the idempotency key and `op` (`execute` or `compensate`): stable for
/// one step, different between steps.
pub(crate) fn temp_path(path: &Path, ctx: &CallContext, op: &str) -> Option<PathBuf> {
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
pub(crate) fn remove_if_present(path: &Path) -> Result<(), ToolError> {
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
pub(crate) fn remove_empty_dirs(dirs: &[String]) {
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
