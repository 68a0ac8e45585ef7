//! `fs_list`: lists a directory inside a granted directory.
//!
//! Arguments: `{"path": "/abs/dir", "max_entries": 1000}` (`max_entries`
//! optional, 1 to 100000). Output: `{"path", "entries": [{"name", "kind",
//! "size_bytes"}], "total_entries", "truncated"}` with entries sorted by name
//! (byte order), `kind` one of `file`, `dir`, `symlink`, `other` (symbolic
//! links are reported, not followed), `size_bytes` the size of files and
//! `null` for the rest.
//!
//! The path is checked with [`capsaga_sdk::fs::resolve`] first: `..` walks
//! and absolute paths outside the granted directories, and symbolic links
//! that lead outside them (the listed directory itself included), fail with
//! `permission-denied`; a symbolic link to a directory inside them is listed
//! as that directory.
//!
//! No side effects, risk low, idempotent; names are untrusted. Needs
//! `fs:read:*`.

use std::fs;
use std::path::Path;

use capsaga_sdk::fs::{Follow, resolve};
use capsaga_sdk::prelude::*;

/// Default for [`Args::max_entries`].
pub const DEFAULT_MAX_ENTRIES: usize = 1000;
/// Upper bound of [`Args::max_entries`].
pub const LIMIT_MAX_ENTRIES: usize = 100_000;

/// Arguments of `fs_list`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Args {
    /// Absolute path of the directory, inside a directory granted for reading.
    pub path: String,
    /// Return at most this many entries, the first ones by name (default 1000).
    #[serde(default = "default_max_entries")]
    #[schemars(range(min = 1, max = 100_000))]
    pub max_entries: usize,
}

fn default_max_entries() -> usize {
    DEFAULT_MAX_ENTRIES
}

/// Kind of a directory entry, as the entry itself is (links not followed).
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum Kind {
    /// A regular file.
    File,
    /// A directory.
    Dir,
    /// A symbolic link (not followed).
    Symlink,
    /// Anything else (device, socket, fifo...).
    Other,
}

/// One entry of the listing.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct Entry {
    /// File name (not the full path); non-UTF-8 bytes are replaced by U+FFFD.
    pub name: String,
    /// See [`Kind`].
    pub kind: Kind,
    /// Size in bytes for files, `null` otherwise.
    pub size_bytes: Option<u64>,
}

/// What `fs_list` returns.
#[derive(Debug, Serialize, Deserialize, PartialEq, Eq)]
pub struct ListOutput {
    /// The path as given.
    pub path: String,
    /// Entries sorted by name, at most `max_entries`.
    pub entries: Vec<Entry>,
    /// Number of entries in the directory.
    pub total_entries: usize,
    /// True when `entries` holds fewer than `total_entries`.
    pub truncated: bool,
}

/// The tool.
pub struct FsList;

impl Tool for FsList {
    type Args = Args;

    fn meta() -> Meta {
        Meta::new(
            "fs_list",
            "Lists a directory: names sorted, each with kind (file, dir, symlink, other) and \
             size. The path must be absolute and inside a directory granted to the tool.",
        )
        .returns_untrusted(true)
        .idempotent(true)
        .dry_run(true)
        .capability("fs:read:*")
        // Field labels: see docs/information-flow.md (first-party tools).
        .trusted_field("/entries/*/name")
        .trusted_field("/entries/*/kind")
        .trusted_field("/entries/*/size_bytes")
        .trusted_field("/total_entries")
        .trusted_field("/truncated")
        .untrusted_field("/path")
    }

    fn execute(_ctx: &CallContext, args: Args) -> Result<Output, ToolError> {
        if !(1..=LIMIT_MAX_ENTRIES).contains(&args.max_entries) {
            return Err(ToolError::invalid_args(format!(
                "max_entries {} is out of range",
                args.max_entries
            ))
            .hint(format!(
                "use a max_entries between 1 and {LIMIT_MAX_ENTRIES}"
            )));
        }
        // Refuse `..` walks, paths outside the grants and symbolic links
        // leading out with one precise error, then list the resolved path.
        let resolved = resolve(&args.path, Follow::Final)?;
        let path = Path::new(&args.path);
        let mut entries = Vec::new();
        for item in fs::read_dir(&resolved).map_err(|e| ToolError::from_io(&e, path))? {
            let item = item.map_err(|e| ToolError::from_io(&e, path))?;
            let file_type = item
                .file_type()
                .map_err(|e| ToolError::from_io(&e, item.path()))?;
            let (kind, size_bytes) = if file_type.is_symlink() {
                (Kind::Symlink, None)
            } else if file_type.is_dir() {
                (Kind::Dir, None)
            } else if file_type.is_file() {
                // A file removed between read_dir and here: report it without a size.
                (Kind::File, item.metadata().ok().map(|m| m.len()))
            } else {
                (Kind::Other, None)
            };
            entries.push(Entry {
                name: item.file_name().to_string_lossy().into_owned(),
                kind,
                size_bytes,
            });
        }
        let total_entries = entries.len();
        let listed = first_by_name(entries, args.max_entries);
        let truncated = listed.len() < total_entries;
        let summary = if truncated {
            format!(
                "Listed {} of {total_entries} entries of {}",
                listed.len(),
                args.path
            )
        } else {
            format!("Listed {total_entries} entries of {}", args.path)
        };
        Ok(Output::new(ListOutput {
            path: args.path,
            entries: listed,
            total_entries,
            truncated,
        })
        .summary(summary))
    }
}

capsaga_sdk::export_tool!(FsList);

/// Sorts entries by name (byte order) and keeps the first `max`.
pub fn first_by_name(mut entries: Vec<Entry>, max: usize) -> Vec<Entry> {
    entries.sort_by(|a, b| a.name.cmp(&b.name));
    entries.truncate(max);
    entries
}

#[cfg(test)]
mod tests {
    use super::*;

    fn list(path: &str, max_entries: usize) -> Result<ListOutput, ToolError> {
        let args = Args {
            path: path.to_owned(),
            max_entries,
        };
        FsList::execute(&CallContext::default(), args)?.data_as()
    }

    #[test]
    fn meta_is_valid() {
        let meta = capsaga_sdk::describe::<FsList>(env!("CARGO_PKG_VERSION"));
        assert_eq!(meta.check(), Ok(()));
        assert_eq!(meta.capabilities, ["fs:read:*"]);
        let schema = meta.args_schema.unwrap_or_default();
        assert_eq!(schema["properties"]["max_entries"]["default"], 1000);
    }

    #[test]
    fn lists_sorted_with_kinds_and_truncates() {
        let dir = std::env::temp_dir().join(format!("fs_list-test-{}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        fs::create_dir_all(dir.join("b_dir")).unwrap_or_else(|e| panic!("{e}"));
        fs::write(dir.join("c.txt"), "12345").unwrap_or_else(|e| panic!("{e}"));
        fs::write(dir.join("a.txt"), "1").unwrap_or_else(|e| panic!("{e}"));
        #[cfg(unix)]
        std::os::unix::fs::symlink("/etc", dir.join("d_link")).unwrap_or_else(|e| panic!("{e}"));
        let p = dir.display().to_string();

        let out = list(&p, 1000).unwrap_or_else(|e| panic!("{e}"));
        let names: Vec<&str> = out.entries.iter().map(|e| e.name.as_str()).collect();
        assert_eq!(names, ["a.txt", "b_dir", "c.txt", "d_link"]);
        assert_eq!(out.entries[0].size_bytes, Some(1));
        assert_eq!(out.entries[1].kind, Kind::Dir);
        assert_eq!(out.entries[1].size_bytes, None);
        assert_eq!(out.entries[2].size_bytes, Some(5));
        assert_eq!(out.entries[3].kind, Kind::Symlink);
        assert!(!out.truncated);

        let out = list(&p, 2).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(out.entries.len(), 2);
        assert_eq!(out.total_entries, 4);
        assert!(out.truncated);

        let kind = |r: Result<ListOutput, ToolError>| r.err().map(|e| e.kind);
        assert_eq!(
            kind(list(&format!("{p}/nope"), 10)),
            Some(ErrorKind::NotFound)
        );
        // Relative with several granted directories: ambiguous.
        let relative =
            capsaga_sdk::fs::with_granted_roots(["/srv/a", "/srv/b"], || list("relative", 10));
        assert_eq!(kind(relative), Some(ErrorKind::InvalidArgs));
        assert_eq!(kind(list(&p, 0)), Some(ErrorKind::InvalidArgs));
        let _ = fs::remove_dir_all(&dir);
    }

    #[cfg(unix)]
    #[test]
    fn outside_the_grant_is_permission_denied() {
        use capsaga_sdk::fs::with_granted_roots;
        use std::os::unix::fs::symlink;
        let base = std::env::temp_dir().join(format!("fs_list-confine-{}", std::process::id()));
        let _ = fs::remove_dir_all(&base);
        let ws = base.join("ws");
        fs::create_dir_all(ws.join("sub")).unwrap_or_else(|e| panic!("{e}"));
        fs::write(ws.join("sub/a.txt"), "a").unwrap_or_else(|e| panic!("{e}"));
        symlink(&base, ws.join("dir_link")).unwrap_or_else(|e| panic!("{e}"));
        symlink("..", ws.join("up_link")).unwrap_or_else(|e| panic!("{e}"));
        symlink("sub", ws.join("sub_link")).unwrap_or_else(|e| panic!("{e}"));
        let w = ws.display().to_string();
        let kind = |r: Result<ListOutput, ToolError>| r.err().map(|e| e.kind);
        with_granted_roots([&ws], || {
            for p in [
                format!("{w}/.."),
                format!("{w}/sub/../.."),
                base.display().to_string(),
                "/".to_owned(),
                format!("{w}/dir_link"),
                format!("{w}/up_link"),
                format!("{w}/up_link/ws"),
            ] {
                assert_eq!(kind(list(&p, 10)), Some(ErrorKind::PermissionDenied), "{p}");
            }
            // A link to a directory inside the grant lists that directory.
            let out = list(&format!("{w}/sub_link"), 10).unwrap_or_else(|e| panic!("{e}"));
            assert_eq!(out.entries.len(), 1);
            assert_eq!(out.entries[0].name, "a.txt");
        });
        let _ = fs::remove_dir_all(&base);
    }
}
