//! The outputs a `code_run` step is about to copy, made durable before the
//! first one is created, for the step a crash leaves in doubt.
//!
//! Recovery compensates a step with a BEGIN and no COMMIT from its dry-run
//! pre-image; `code_run`'s pre-image is its plan, which cannot name the
//! files the code had not written yet. So `execute` writes their names and
//! SHA-256 to `<state_dir>/code-run-journal/<sha256(idempotency key)>.json`
//! (written to a temporary name, synced, renamed, the directory synced)
//! before copying, and compensation from a pre-image reads them there; a
//! file is still removed only while it has the recorded bytes.
//!
//! A compensation (from the output or the pre-image) removes the entry. An
//! entry of a committed step is no longer needed (its output names the
//! files) and is removed once older than [`KEEP_DAYS`] days, when a later
//! run writes its own.

use capsaga_core::idempotency::sha256_hex;
use capsaga_core::neuron::code_run::{MAX_OUTPUTS, OutputFile};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

/// Days an entry is kept (a step in doubt longer than that, with no
/// capsaga command run on its state directory meanwhile, leaves its outputs).
pub const KEEP_DAYS: u64 = 30;

/// Largest entry read, bytes.
const MAX_ENTRY_BYTES: u64 = 256 * 1024;

/// The journal directory of one state directory.
#[derive(Debug, Clone)]
pub struct Journal {
    dir: PathBuf,
}

impl Journal {
    /// The journal under `state_dir`.
    pub fn new(state_dir: &Path) -> Journal {
        Journal {
            dir: state_dir.join("code-run-journal"),
        }
    }

    fn path(&self, idempotency_key: &str) -> PathBuf {
        self.dir
            .join(format!("{}.json", sha256_hex(idempotency_key.as_bytes())))
    }

    /// Record `outputs` for the step `idempotency_key`, durably.
    ///
    /// # Errors
    /// The I/O error (the step must then copy nothing).
    pub fn write(&self, idempotency_key: &str, outputs: &[OutputFile]) -> std::io::Result<()> {
        std::fs::create_dir_all(&self.dir)?;
        let target = self.path(idempotency_key);
        let tmp = target.with_extension("tmp");
        let body = serde_json::to_vec(outputs).map_err(std::io::Error::other)?;
        {
            let mut f = std::fs::File::create(&tmp)?;
            f.write_all(&body)?;
            f.sync_all()?;
        }
        std::fs::rename(&tmp, &target)?;
        std::fs::File::open(&self.dir)?.sync_all()?;
        self.prune(&target);
        Ok(())
    }

    /// The outputs recorded for `idempotency_key`; `None` when there is no
    /// entry (the step copied nothing) or it is unreadable or malformed
    /// (reported by the caller as nothing to remove).
    pub fn read(&self, idempotency_key: &str) -> Option<Vec<OutputFile>> {
        let path = self.path(idempotency_key);
        let meta = std::fs::symlink_metadata(&path).ok()?;
        if !meta.is_file() || meta.len() > MAX_ENTRY_BYTES {
            return None;
        }
        let bytes = std::fs::read(&path).ok()?;
        let v: Vec<OutputFile> = serde_json::from_slice(&bytes).ok()?;
        (v.len() <= MAX_OUTPUTS).then_some(v)
    }

    /// Forget the entry of `idempotency_key` (absent is fine).
    pub fn remove(&self, idempotency_key: &str) {
        let _ = std::fs::remove_file(self.path(idempotency_key));
    }

    /// Remove entries other than `keep` older than [`KEEP_DAYS`].
    fn prune(&self, keep: &Path) {
        let Ok(rd) = std::fs::read_dir(&self.dir) else {
            return;
        };
        let horizon = Duration::from_secs(KEEP_DAYS * 24 * 3600);
        let now = SystemTime::now();
        for e in rd.filter_map(Result::ok) {
            let p = e.path();
            if p == keep {
                continue;
            }
            let old = e
                .metadata()
                .and_then(|m| m.modified())
                .ok()
                .and_then(|t| now.duration_since(t).ok())
                .is_some_and(|age| age > horizon);
            if old {
                let _ = std::fs::remove_file(p);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn out(name: &str) -> OutputFile {
        OutputFile {
            name: name.into(),
            path: format!("/out/{name}"),
            sha256: sha256_hex(name.as_bytes()),
            bytes: 1,
        }
    }

    #[test]
    fn entries_are_written_read_and_removed_by_key() {
        let d = tempfile::tempdir().unwrap();
        let j = Journal::new(d.path());
        assert_eq!(j.read("k1"), None);
        j.write("k1", &[out("a.csv"), out("b.json")]).unwrap();
        j.write("../../k2", &[out("c.txt")]).unwrap();
        assert_eq!(j.read("k1").unwrap().len(), 2);
        assert_eq!(j.read("../../k2").unwrap()[0].name, "c.txt");
        assert!(
            std::fs::read_dir(d.path().join("code-run-journal"))
                .unwrap()
                .all(|e| e.unwrap().file_name().len() == 64 + 5),
            "entries are named by the key's hash, never by the key"
        );
        j.remove("k1");
        assert_eq!(j.read("k1"), None);
        std::fs::write(j.path("bad"), b"{not json").unwrap();
        assert_eq!(j.read("bad"), None, "a malformed entry names nothing");
    }
}
