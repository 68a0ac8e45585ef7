//! `[fs]`: the host's file journal (issue 28). For every call with an
//! `fs:write` grant the host records each path's pre-image before the
//! call's first change to it, and a rollback restores them whatever the
//! tool's own `compensate` does.
//!
//! ```toml
//! [fs]
//! host_rollback = true            # default: on for every fs:write grant
//! journal_call_bytes = 268435456  # cap of one call's journal (256 MiB)
//! journal_saga_bytes = 1073741824 # cap of one saga's journals (1 GiB)
//! journal_sync = "destructive"    # or "every"
//! journal_keep_days = 30          # journals of finished sagas kept for `undo`
//!
//! [tools.big_files]
//! grants = ["fs:write:~/media/**"]
//! host_rollback = false           # this tool's files are undone by its own compensate only
//! ```

use serde::Deserialize;
use std::collections::BTreeSet;

/// Default cap of one call's journal, bytes (256 MiB).
pub const DEFAULT_CALL_BYTES: u64 = 256 * 1024 * 1024;
/// Default cap of one saga's journals, bytes (1 GiB).
pub const DEFAULT_SAGA_BYTES: u64 = 1024 * 1024 * 1024;
/// Default days a finished saga's journals are kept.
pub const DEFAULT_KEEP_DAYS: u64 = 30;

/// When a journal record is synced to disk.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum JournalSync {
    /// A record that destroys something (prior bytes, a directory, a link,
    /// a rename) is synced before its change; the record of a path the step
    /// creates is synced with the next such record, a guest's `sync`, and
    /// when the call ends. Every record is written before its change, so a
    /// killed process loses none; a power cut may leave a file the step
    /// created unjournaled.
    #[default]
    Destructive,
    /// Every record is synced before its change (one `fdatasync` per path
    /// the step creates).
    Every,
}

/// The `[fs]` section as written.
#[derive(Debug, Clone, PartialEq, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FsFile {
    /// Journal and restore the files of calls with `fs:write` grants
    /// (default true).
    pub host_rollback: Option<bool>,
    /// Cap of one call's journal, bytes.
    pub journal_call_bytes: Option<u64>,
    /// Cap of one saga's journals, bytes.
    pub journal_saga_bytes: Option<u64>,
    /// When records are synced.
    #[serde(default)]
    pub journal_sync: JournalSync,
    /// Days the journals of a saga are kept after it was last written.
    pub journal_keep_days: Option<u64>,
}

/// The `[fs]` section, checked, with the tools that turned it off.
#[derive(Debug, Clone, PartialEq)]
pub struct FsPolicy {
    /// The default for tools with `fs:write` grants.
    pub host_rollback: bool,
    /// Cap of one call's journal, bytes.
    pub journal_call_bytes: u64,
    /// Cap of one saga's journals, bytes.
    pub journal_saga_bytes: u64,
    /// When records are synced.
    pub journal_sync: JournalSync,
    /// Days journals are kept.
    pub journal_keep_days: u64,
    /// Tools whose section says `host_rollback = false` (or `true` when the
    /// default is off: see [`FsPolicy::host_rollback_for`]).
    pub exceptions: BTreeSet<String>,
}

impl Default for FsPolicy {
    fn default() -> Self {
        FsPolicy {
            host_rollback: true,
            journal_call_bytes: DEFAULT_CALL_BYTES,
            journal_saga_bytes: DEFAULT_SAGA_BYTES,
            journal_sync: JournalSync::Destructive,
            journal_keep_days: DEFAULT_KEEP_DAYS,
            exceptions: BTreeSet::new(),
        }
    }
}

impl FsPolicy {
    /// Whether the host journals and restores `tool`'s files.
    pub fn host_rollback_for(&self, tool: &str) -> bool {
        self.host_rollback != self.exceptions.contains(tool)
    }
}

impl FsFile {
    /// Check the section; `per_tool` lists each tool's own `host_rollback`.
    ///
    /// # Errors
    /// A cap or a number of days of zero.
    pub fn check<'a>(
        &self,
        per_tool: impl Iterator<Item = (&'a String, Option<bool>)>,
    ) -> Result<FsPolicy, String> {
        let d = FsPolicy::default();
        for (name, v) in [
            ("journal_call_bytes", self.journal_call_bytes),
            ("journal_saga_bytes", self.journal_saga_bytes),
            ("journal_keep_days", self.journal_keep_days),
        ] {
            if v == Some(0) {
                return Err(format!("{name} must be greater than zero"));
            }
        }
        let host_rollback = self.host_rollback.unwrap_or(d.host_rollback);
        let exceptions = per_tool
            .filter(|(_, v)| v.is_some_and(|v| v != host_rollback))
            .map(|(n, _)| n.clone())
            .collect();
        Ok(FsPolicy {
            host_rollback,
            journal_call_bytes: self.journal_call_bytes.unwrap_or(d.journal_call_bytes),
            journal_saga_bytes: self.journal_saga_bytes.unwrap_or(d.journal_saga_bytes),
            journal_sync: self.journal_sync,
            journal_keep_days: self.journal_keep_days.unwrap_or(d.journal_keep_days),
            exceptions,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn on_by_default_off_per_tool() {
        let f: FsFile = toml::from_str("").unwrap();
        let names = ["big".to_string(), "small".to_string()];
        let p = f
            .check([(&names[0], Some(false)), (&names[1], None)].into_iter())
            .unwrap();
        assert!(p.host_rollback_for("small") && p.host_rollback_for("other"));
        assert!(!p.host_rollback_for("big"));
        let f: FsFile = toml::from_str("host_rollback = false\njournal_sync = \"every\"").unwrap();
        let p = f.check([(&names[1], Some(true))].into_iter()).unwrap();
        assert!(p.host_rollback_for("small") && !p.host_rollback_for("big"));
        assert_eq!(p.journal_sync, JournalSync::Every);
        let f: FsFile = toml::from_str("journal_call_bytes = 0").unwrap();
        assert!(f.check(std::iter::empty()).is_err());
        assert!(toml::from_str::<FsFile>("journal_sync = \"never\"").is_err());
        assert!(toml::from_str::<FsFile>("rollback = true").is_err());
    }
}
