//! Scratch directories of agent-written code (a `neuron_create` example's,
//! a `code_run`'s) are bounded while the code runs: WASI has no disk quota,
//! so the host measures the directory every
//! [`SCRATCH_POLL_MS`] and drops the run (its instance) once it holds more
//! than [`MAX_SCRATCH_BYTES`] or [`MAX_SCRATCH_ENTRIES`]. What the disk
//! holds at most is the bound plus what the code writes in one interval.

use capsaga_core::error::{ErrorKind, ToolError};
use capsaga_core::neuron::code_run::{MAX_SCRATCH_BYTES, MAX_SCRATCH_ENTRIES, SCRATCH_POLL_MS};
use std::future::Future;
use std::path::Path;
use std::time::Duration;

/// What a scratch directory holds: bytes of its regular files and how many
/// entries (files, directories, links) it has, its own not counted.
/// Symbolic links are counted, never followed. The walk stops once it has
/// seen more than `max_entries`, so a directory of a million files costs no
/// more than one over the limit.
pub fn usage(dir: &Path, max_entries: usize) -> (u64, usize) {
    let mut bytes = 0u64;
    let mut entries = 0usize;
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        let Ok(rd) = std::fs::read_dir(&d) else {
            continue;
        };
        for e in rd.filter_map(Result::ok) {
            entries += 1;
            if entries > max_entries {
                return (bytes, entries);
            }
            let Ok(m) = std::fs::symlink_metadata(e.path()) else {
                continue;
            };
            if m.is_dir() {
                stack.push(e.path());
            } else if m.is_file() {
                bytes = bytes.saturating_add(m.len());
            }
        }
    }
    (bytes, entries)
}

/// `quota-exceeded` when `dir` holds more than the bound.
pub fn over(dir: &Path) -> Option<ToolError> {
    let (bytes, entries) = usage(dir, MAX_SCRATCH_ENTRIES);
    if bytes <= MAX_SCRATCH_BYTES && entries <= MAX_SCRATCH_ENTRIES {
        return None;
    }
    Some(ToolError::with_hint(
        ErrorKind::QuotaExceeded,
        format!(
            "the code filled its scratch directory past the limit ({MAX_SCRATCH_BYTES} bytes and {MAX_SCRATCH_ENTRIES} entries at most; seen {bytes} bytes, {entries}{} entries): the run was stopped",
            if entries > MAX_SCRATCH_ENTRIES {
                "+"
            } else {
                ""
            },
        ),
        "Write fewer and smaller files.",
    ))
}

/// Run `fut` (a call of the runner writing into `dir`) with `dir` bounded:
/// its output, or `quota-exceeded` when `dir` went over the bound while it
/// ran (the future is then dropped at once, the instance with it) or holds
/// too much when it ends.
///
/// # Errors
/// The `quota-exceeded` tool error of [`over`].
pub async fn bounded<F: Future>(dir: &Path, fut: F) -> Result<F::Output, ToolError> {
    tokio::pin!(fut);
    let mut tick = tokio::time::interval(Duration::from_millis(SCRATCH_POLL_MS));
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let out = loop {
        tokio::select! {
            r = &mut fut => break r,
            _ = tick.tick() => {
                if let Some(e) = over(dir) {
                    return Err(e);
                }
            }
        }
    };
    match over(dir) {
        Some(e) => Err(e),
        None => Ok(out),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn usage_counts_nested_files_and_stops_past_the_entry_limit() {
        let d = tempfile::tempdir().unwrap();
        std::fs::write(d.path().join("a.txt"), vec![0u8; 1000]).unwrap();
        std::fs::create_dir(d.path().join("sub")).unwrap();
        std::fs::write(d.path().join("sub/b.txt"), vec![0u8; 24]).unwrap();
        std::os::unix::fs::symlink("/etc/passwd", d.path().join("link")).unwrap();
        assert_eq!(
            usage(d.path(), 100),
            (1024, 4),
            "the link counted, not followed"
        );
        for i in 0..50 {
            std::fs::write(d.path().join(format!("f{i}")), b"").unwrap();
        }
        let (_, n) = usage(d.path(), 10);
        assert_eq!(n, 11, "the walk stops one past the limit");
    }

    #[tokio::test]
    async fn a_future_filling_the_directory_is_dropped() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().to_path_buf();
        let filler = async move {
            for i in 0..(MAX_SCRATCH_ENTRIES + 10) {
                std::fs::write(p.join(format!("{i}")), b"").unwrap();
                if i % 100 == 0 {
                    tokio::time::sleep(Duration::from_millis(5)).await;
                }
            }
            tokio::time::sleep(Duration::from_secs(3600)).await;
        };
        let r = tokio::time::timeout(Duration::from_secs(30), bounded(d.path(), filler)).await;
        match r {
            Ok(Err(e)) => assert_eq!(e.kind, ErrorKind::QuotaExceeded),
            other => panic!("not stopped: {other:?}"),
        }
        assert_eq!(
            bounded(d.path(), async { 1 }).await.map_err(|e| e.kind),
            Err(ErrorKind::QuotaExceeded),
            "checked at the end too"
        );
    }
}
