//! Where the journals live: one directory per saga under
//! `<state_dir>/fs-journal/`, one file per step; removed when a saga is
//! rolled back completely, pruned when old.

use std::io;
use std::path::{Path, PathBuf};

/// True when `id` can name a directory (a saga id: letters, digits, `-`).
pub(crate) fn plain_id(id: &str) -> bool {
    !id.is_empty()
        && id.len() <= 64
        && id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
}

/// The journal file of step `seq` of saga `saga_id` under `dir`.
///
/// # Errors
/// `InvalidInput` for a saga id that cannot name a directory.
pub fn step_path(dir: &Path, saga_id: &str, seq: u64) -> io::Result<PathBuf> {
    if !plain_id(saga_id) {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "a saga id names the journal directory: letters, digits and `-` only",
        ));
    }
    Ok(dir.join(saga_id).join(format!("{seq}.jnl")))
}

/// Remove the journals of a saga (absent is fine).
pub fn remove_saga(dir: &Path, saga_id: &str) {
    if plain_id(saga_id) {
        let _ = std::fs::remove_dir_all(dir.join(saga_id));
    }
}

/// Remove the journal directories of sagas none of whose journals was
/// written to for more than `days` days.
pub fn prune(dir: &Path, days: u64) {
    let Ok(rd) = std::fs::read_dir(dir) else {
        return;
    };
    let horizon = std::time::Duration::from_secs(days.saturating_mul(24 * 3600));
    let now = std::time::SystemTime::now();
    let old = |p: &Path| {
        std::fs::symlink_metadata(p)
            .and_then(|m| m.modified())
            .ok()
            .and_then(|t| now.duration_since(t).ok())
            .is_some_and(|age| age > horizon)
    };
    for e in rd.flatten() {
        if !e.file_name().to_str().is_some_and(plain_id) || !old(&e.path()) {
            continue;
        }
        let all_old = std::fs::read_dir(e.path())
            .map(|files| files.flatten().all(|f| old(&f.path())))
            .unwrap_or(false);
        if all_old {
            let _ = std::fs::remove_dir_all(e.path());
        }
    }
}

pub(crate) fn mkdir_private(dir: &Path) -> io::Result<()> {
    let mut b = std::fs::DirBuilder::new();
    std::os::unix::fs::DirBuilderExt::mode(&mut b, 0o700);
    b.recursive(true);
    b.create(dir)
}
