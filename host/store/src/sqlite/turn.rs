//! Whose turn it is to write: an exclusive advisory lock (`flock`) on the
//! file beside the database, `<db>.lock`.
//!
//! - First creation and migrations run under it, so that of many processes
//!   started together on a fresh state directory one creates the file, puts
//!   it in WAL mode, creates the tables and stamps the application id, and
//!   every other one finds the file either absent or complete (issue 13,
//!   item 11).
//! - Every write transaction takes it first. Under contention a writer
//!   waits blocked in the kernel and is woken when the lock is released,
//!   instead of polling SQLite's own lock with sleeps of up to 100 ms (with
//!   which a few unlucky processes of hundreds were starved past any
//!   timeout). The wait is bounded: past it the write fails as
//!   [`StoreError::Busy`], which says "busy", never "corrupt".
//!
//! The lock is a queue, not the guard of correctness: SQLite's own locking
//! (an `IMMEDIATE` transaction, its busy timeout) still serialises writers,
//! including those that do not take this lock (an operator's `sqlite3`).

use super::super::StoreError;
use std::fs::{File, OpenOptions, TryLockError};
use std::path::{Path, PathBuf};
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// The lock file of the database at `db`: `<db>.lock`.
pub fn lock_path(db: &Path) -> PathBuf {
    let mut name = db.file_name().unwrap_or_default().to_os_string();
    name.push(".lock");
    db.with_file_name(name)
}

/// The open lock file of one store.
#[derive(Debug)]
pub(super) struct Turn {
    file: File,
    path: PathBuf,
}

/// Held while it lives; dropping it releases the lock.
#[derive(Debug)]
pub(super) struct Held<'a> {
    file: &'a File,
}

impl Drop for Held<'_> {
    fn drop(&mut self) {
        let _ = self.file.unlock();
    }
}

/// What the waiting thread and the waiter agreed on.
#[derive(Debug, Default)]
struct Handoff {
    /// The waiter gave up: a lock acquired afterwards is released at once.
    abandoned: bool,
    /// The thread holds the lock for the waiter.
    delivered: bool,
}

impl Turn {
    /// Open (creating if needed) the lock file of the database at `db`.
    ///
    /// # Errors
    /// [`StoreError::Dir`] when the file cannot be created or opened.
    pub(super) fn open(db: &Path) -> Result<Turn, StoreError> {
        let path = lock_path(db);
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(&path)
            .map_err(|e| StoreError::Dir {
                path: path.clone(),
                error: e.to_string(),
            })?;
        Ok(Turn { file, path })
    }

    /// Wait for the lock, at most `wait`.
    ///
    /// # Errors
    /// [`StoreError::Busy`] when another process held it all that time, or
    /// [`StoreError::Backend`] when it cannot be taken at all.
    pub(super) fn take(&self, wait: Duration) -> Result<Held<'_>, StoreError> {
        match self.file.try_lock() {
            Ok(()) => return Ok(Held { file: &self.file }),
            Err(TryLockError::WouldBlock) => {}
            Err(TryLockError::Error(e)) => return Err(self.failed(&e)),
        }
        // Block in the kernel on a duplicate of the descriptor (the same
        // open file, hence the same lock), on a thread, so that the wait
        // can end at `wait`.
        let dup = self.file.try_clone().map_err(|e| self.failed(&e))?;
        let handoff = Arc::new(Mutex::new(Handoff::default()));
        let (tx, rx) = mpsc::channel();
        let shared = Arc::clone(&handoff);
        std::thread::Builder::new()
            .name("capsaga-store-turn".into())
            .spawn(move || {
                let r = dup.lock();
                let Ok(mut h) = shared.lock() else {
                    let _ = dup.unlock();
                    return;
                };
                match r {
                    Ok(()) if h.abandoned => {
                        let _ = dup.unlock();
                    }
                    Ok(()) => {
                        h.delivered = true;
                        let _ = tx.send(Ok(()));
                    }
                    Err(e) => {
                        let _ = tx.send(Err(e));
                    }
                }
            })
            .map_err(|e| self.failed(&e))?;
        match rx.recv_timeout(wait) {
            Ok(Ok(())) => Ok(Held { file: &self.file }),
            Ok(Err(e)) => Err(self.failed(&e)),
            Err(_) => {
                let mut h = handoff.lock().map_err(|_| StoreError::Poisoned)?;
                if h.delivered {
                    return Ok(Held { file: &self.file });
                }
                h.abandoned = true;
                Err(StoreError::Busy(format!(
                    "other capsaga processes kept the state database's write turn ({}) for more than {} ms",
                    self.path.display(),
                    wait.as_millis()
                )))
            }
        }
    }

    fn failed(&self, e: &std::io::Error) -> StoreError {
        StoreError::Backend(format!("cannot lock {}: {e}", self.path.display()))
    }
}
