//! Saga ownership: which process drives a saga, and whether it is still
//! alive.
//!
//! Crash recovery at start-up must finish the sagas of a process that died,
//! and must never touch the sagas of a process that is still running (a
//! second `capsaga` on the same workspace). Each host holds
//! an [`OwnerLock`]: an exclusive advisory lock (`flock`) on
//! `<state_dir>/owners/<owner id>.lock`, held for the life of the host and
//! released by the kernel when the process exits, however it exits (SIGKILL
//! included). `saga_state.owner` names the owner of each saga; the owner is
//! alive exactly when its lock file exists and is locked ([`is_alive`]).
//!
//! The owner id is written to the database only after the lock is held, so
//! a process that finds an id in the database and an unlocked (or missing)
//! file knows its owner is gone. Which sagas recovery may take over is
//! [`recoverable`]; taking them over and finishing them is the dispatch
//! door's (`dispatch::recover`).

use std::fs::{File, OpenOptions, TryLockError};
use std::path::{Path, PathBuf};

/// The directory of lock files under the state directory.
pub const OWNERS_DIR: &str = "owners";

/// This process's lock. Dropping it removes the file and releases the lock.
#[derive(Debug)]
pub struct OwnerLock {
    id: String,
    path: PathBuf,
    // Held for its lock; never read.
    _file: File,
}

impl OwnerLock {
    /// Create and lock `<state_dir>/owners/<new id>.lock`.
    ///
    /// # Errors
    /// The I/O error when the directory or the file cannot be created or
    /// locked.
    pub fn acquire(state_dir: &Path) -> std::io::Result<OwnerLock> {
        let dir = state_dir.join(OWNERS_DIR);
        std::fs::create_dir_all(&dir)?;
        let id = uuid::Uuid::new_v4().to_string();
        let path = dir.join(format!("{id}.lock"));
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create_new(true)
            .open(&path)?;
        file.try_lock().map_err(|e| match e {
            TryLockError::Error(e) => e,
            TryLockError::WouldBlock => {
                std::io::Error::other("a fresh owner lock file is locked by someone else")
            }
        })?;
        Ok(OwnerLock {
            id,
            path,
            _file: file,
        })
    }

    /// The owner id (a UUID v4), as stored in `saga_state.owner`.
    pub fn id(&self) -> &str {
        &self.id
    }
}

impl Drop for OwnerLock {
    fn drop(&mut self) {
        // Unlink while still holding the lock: a process that opens the path
        // afterwards finds nothing and concludes, rightly, that we are gone.
        let _ = std::fs::remove_file(&self.path);
    }
}

/// Whether the owner `id` is alive: its lock file exists and another
/// process (or another host in this process) holds its lock. An id that is
/// not a UUID (an edited row) counts as dead; a file that cannot be opened
/// or locked for another reason counts as alive, so that recovery never
/// compensates a saga that may still be running.
pub fn is_alive(state_dir: &Path, id: &str) -> bool {
    if uuid::Uuid::parse_str(id).is_err() || id.len() != 36 {
        return false;
    }
    let path = state_dir.join(OWNERS_DIR).join(format!("{id}.lock"));
    let file = match OpenOptions::new().read(true).write(true).open(&path) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return false,
        Err(e) => {
            tracing::warn!(
                "cannot open {}: {e}; treating its owner as alive",
                path.display()
            );
            return true;
        }
    };
    match file.try_lock() {
        Ok(()) => {
            // Nobody holds it: the owner died without removing its file.
            let _ = std::fs::remove_file(&path);
            false
        }
        Err(TryLockError::WouldBlock) => true,
        Err(TryLockError::Error(e)) => {
            tracing::warn!(
                "cannot lock {}: {e}; treating its owner as alive",
                path.display()
            );
            true
        }
    }
}

/// Whether recovery at start-up may take over a saga owned by `owner`
/// (`None`: no owner recorded) in `state` from a saga of `origin`, for the
/// process `me`: not its own, not a live process's, and not a plan or call
/// saga parked in AwaitingApproval (those wait durably for `capsaga
/// approve|deny` and `capsaga resume`; an agent saga parked when its process
/// died is rolled back: a turn cannot be resumed without its conversation).
pub fn recoverable(
    state_dir: &Path,
    me: &str,
    owner: Option<&str>,
    state: capsaga_core::fsm::State,
    origin: &str,
) -> bool {
    if state == capsaga_core::fsm::State::AwaitingApproval && origin != "agent" {
        return false;
    }
    match owner {
        Some(o) if o == me => false,
        Some(o) => !is_alive(state_dir, o),
        None => true,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn alive_while_held_dead_after() {
        let dir = tempfile::tempdir().unwrap();
        let a = OwnerLock::acquire(dir.path()).unwrap();
        let b = OwnerLock::acquire(dir.path()).unwrap();
        assert_ne!(a.id(), b.id());
        assert!(is_alive(dir.path(), a.id()));
        let id = a.id().to_string();
        drop(a);
        assert!(!is_alive(dir.path(), &id));
        assert!(is_alive(dir.path(), b.id()));
        // A stale file whose lock nobody holds (the owner was killed before
        // its drop ran) is dead, and is cleaned up.
        let stale = uuid::Uuid::new_v4().to_string();
        let p = dir.path().join(OWNERS_DIR).join(format!("{stale}.lock"));
        std::fs::write(&p, "").unwrap();
        assert!(!is_alive(dir.path(), &stale));
        assert!(!p.exists());
        // Ids that are not UUIDs never name a path.
        assert!(!is_alive(dir.path(), "../../etc/passwd"));
    }
}
