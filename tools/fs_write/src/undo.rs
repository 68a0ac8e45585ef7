//! What `compensate` finds at the path and what it must do about it
//! ([`decide`], pure).

use std::io;
use std::path::Path;

use capsaga_sdk::fs::{Expect, FileError, open_file};
use sha2::{Digest, Sha256};

use crate::preimage::{Previous, hex};

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

/// What is at `path` now, reached through the SDK's guarded file: a link
/// or anything but a regular file is [`Current::Other`]; a link or a
/// non-directory on the way is an error (the path leads elsewhere now).
pub(crate) fn observe(path: &Path) -> Result<Current, FileError> {
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
