//! Owners on one machine: an exclusive advisory lock (`flock`) on
//! `<state dir>/owners/<owner id>.lock` (the state dir is the database
//! file's directory), held for the life of the process and released by the
//! kernel when it exits, however it exits (SIGKILL included). The owner is
//! alive exactly when its lock file exists and is locked.
//!
//! The owner id is written to the database only after the lock is held, so
//! a process that finds an id in the database and an unlocked (or missing)
//! file knows its owner is gone, for good (ids are never reused).

use super::super::{OwnerLease, OwnerRow, OwnerStore, StoreError};
use super::SqliteStore;
use async_trait::async_trait;
use std::fs::{File, OpenOptions, TryLockError};
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// The directory of lock files under the state directory.
pub const OWNERS_DIR: &str = "owners";

/// This process's lock. Dropping it removes the file and releases the lock.
#[derive(Debug)]
pub struct OwnerLock {
    id: String,
    path: PathBuf,
    // Held for its lock; never read.
    _file: File,
    // Never becomes true: a lock is not lost while the process lives.
    lost: tokio::sync::watch::Sender<bool>,
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
            lost: tokio::sync::watch::Sender::new(false),
        })
    }
}

#[async_trait]
impl OwnerLease for OwnerLock {
    fn id(&self) -> &str {
        &self.id
    }

    fn lost(&self) -> tokio::sync::watch::Receiver<bool> {
        self.lost.subscribe()
    }

    fn set_policy_hash(&self, _sha256: &str) {}

    async fn retire(&self) {
        // Unlinked while still locked: whoever looks from now on finds no
        // file, and a dead owner (the lock goes with the process).
        match std::fs::remove_file(&self.path) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => tracing::warn!("cannot remove {}: {e}", self.path.display()),
        }
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
/// process (or another lock in this process) holds its lock. An id that is
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

impl SqliteStore {
    /// The directory of the database file (where `owners/` lives).
    pub(super) fn state_dir(&self) -> &Path {
        self.path
            .parent()
            .filter(|p| !p.as_os_str().is_empty())
            .unwrap_or(Path::new("."))
    }
}

#[async_trait]
impl OwnerStore for SqliteStore {
    async fn register_owner(&self) -> Result<Arc<dyn OwnerLease>, StoreError> {
        let dir = self.state_dir();
        let lock = OwnerLock::acquire(dir).map_err(|e| StoreError::Dir {
            path: dir.join(OWNERS_DIR),
            error: e.to_string(),
        })?;
        Ok(Arc::new(lock))
    }

    async fn owner_alive(&self, id: &str) -> Result<bool, StoreError> {
        Ok(is_alive(self.state_dir(), id))
    }

    async fn live_owners(&self) -> Result<Vec<OwnerRow>, StoreError> {
        Ok(Vec::new())
    }

    fn recovery_interval(&self) -> Option<std::time::Duration> {
        None
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
