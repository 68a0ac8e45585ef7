//! `fs_glob`: files matching a glob pattern under a granted directory (the
//! `glob_list` the tool protocol's error hints point to).
//!
//! Arguments: `{"pattern": "**/*.md", "root": "/w", "max_results": 200,
//! "include_dirs": false}`.
//!
//! The pattern is matched against paths relative to `root` (default: the
//! first granted directory), with `/` separating components: `*` and `?`
//! stay inside one component, `**` spans any number, `{a,b}` and `[...]` as
//! usual. An absolute pattern must start with `root`. Hidden entries are
//! matched only by a pattern that names them (`.*`, `**/.env`). Symbolic
//! links are listed but never followed. Results are sorted; at most
//! `max_results` (default 200, at most 10000) are returned, and `truncated`
//! says when there were more or when the walk stopped after 100,000 entries.
//!
//! Read-only, idempotent. File names can be chosen by anyone who writes in
//! the directory, so the output is untrusted. Needs `fs:read:*`.

use capsaga_sdk::fs::{Follow, granted_roots, resolve};
use capsaga_sdk::prelude::*;
use globset::GlobBuilder;

/// Most entries looked at in one call.
pub const MAX_VISITED: usize = 100_000;

fn default_max() -> usize {
    200
}

/// Arguments of `fs_glob`.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Args {
    /// Glob pattern relative to `root`, e.g. `**/*.rs` or `src/*.{md,txt}`.
    pub pattern: String,
    /// Absolute directory to search, inside the granted directories
    /// (default: the first granted directory).
    #[serde(default)]
    pub root: Option<String>,
    /// Most results returned (default 200).
    #[serde(default = "default_max")]
    #[schemars(range(min = 1, max = 10_000))]
    pub max_results: usize,
    /// Also list matching directories (default false: files and links).
    #[serde(default)]
    pub include_dirs: bool,
}

/// One match.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct Match {
    /// Absolute path.
    pub path: String,
    /// `file`, `dir` or `symlink`.
    pub kind: String,
    /// Size in bytes (files).
    pub bytes: u64,
}

/// The tool.
pub struct FsGlob;

impl Tool for FsGlob {
    type Args = Args;

    fn meta() -> Meta {
        Meta::new(
            "fs_glob",
            "Lists files matching a glob pattern (e.g. **/*.md) under a granted directory, \
             sorted, with their sizes; symbolic links are not followed.",
        )
        .idempotent(true)
        .dry_run(true)
        .returns_untrusted(true)
        .capability("fs:read:*")
        // Field labels: see docs/information-flow.md (first-party tools).
        .trusted_field("/matches/*/path")
        .trusted_field("/matches/*/kind")
        .trusted_field("/matches/*/bytes")
        .trusted_field("/total")
        .trusted_field("/truncated")
        .trusted_field("/walk_stopped")
        .untrusted_field("/root")
        .untrusted_field("/pattern")
    }

    fn execute(_ctx: &CallContext, args: Args) -> Result<Output, ToolError> {
        let root_raw = match &args.root {
            Some(r) => r.clone(),
            None => granted_roots()
                .first()
                .map(|p| p.display().to_string())
                .ok_or_else(|| ToolError::permission_denied("fs_glob has no granted directory"))?,
        };
        let root = resolve(&root_raw, Follow::Final)?;
        if !root.is_dir() {
            return Err(
                ToolError::invalid_args(format!("{root_raw} is not a directory"))
                    .hint("give an existing directory inside the granted directories as root"),
            );
        }
        let root_s = root.display().to_string();
        let pattern = match args.pattern.strip_prefix('/') {
            Some(_) => match args
                .pattern
                .strip_prefix(&format!("{}/", root_s.trim_end_matches('/')))
            {
                Some(rel) => rel.to_owned(),
                None => {
                    return Err(ToolError::invalid_args(format!(
                        "the absolute pattern {} is not under root {root_s}",
                        args.pattern
                    ))
                    .hint("give a pattern relative to root, e.g. **/*.md"));
                }
            },
            None => args.pattern.trim_start_matches("./").to_owned(),
        };
        if pattern.split('/').any(|c| c == "..") {
            return Err(ToolError::invalid_args("the pattern contains `..`")
                .hint("search from another root instead of climbing with .."));
        }
        let matcher = GlobBuilder::new(&pattern)
            .literal_separator(true)
            .backslash_escape(true)
            .build()
            .map_err(|e| {
                ToolError::invalid_args(format!("bad glob pattern {pattern:?}: {e}"))
                    .hint("use *, ?, **, [abc] and {a,b}")
            })?
            .compile_matcher();
        let max = args.max_results.clamp(1, 10_000);
        let mut found = Vec::new();
        let mut visited = 0usize;
        let mut stopped = false;
        let walker = walkdir::WalkDir::new(&root)
            .follow_links(false)
            .max_depth(64)
            .sort_by_file_name()
            .min_depth(1);
        for entry in walker {
            let Ok(entry) = entry else { continue };
            visited += 1;
            if visited > MAX_VISITED {
                stopped = true;
                break;
            }
            let Ok(rel) = entry.path().strip_prefix(&root) else {
                continue;
            };
            let rel_s = rel.to_string_lossy();
            let ft = entry.file_type();
            if ft.is_dir() && !args.include_dirs {
                continue;
            }
            if !matcher.is_match(rel) {
                continue;
            }
            let named_hidden = pattern.contains("/.") || pattern.starts_with('.');
            if !named_hidden && rel_s.split('/').any(|c| c.starts_with('.')) {
                continue;
            }
            let kind = if ft.is_symlink() {
                "symlink"
            } else if ft.is_dir() {
                "dir"
            } else {
                "file"
            };
            let bytes = if ft.is_file() {
                entry.metadata().map_or(0, |m| m.len())
            } else {
                0
            };
            found.push(Match {
                path: entry.path().display().to_string(),
                kind: kind.into(),
                bytes,
            });
        }
        found.sort_by(|a, b| a.path.cmp(&b.path));
        let total = found.len();
        let truncated = stopped || total > max;
        found.truncate(max);
        let summary = format!(
            "{} match{} for {pattern} under {root_s}{}",
            total,
            if total == 1 { "" } else { "es" },
            if truncated { " (truncated)" } else { "" }
        );
        Ok(Output::new(json!({
            "root": root_s,
            "pattern": pattern,
            "matches": found,
            "total": total,
            "truncated": truncated,
            "walk_stopped": stopped,
        }))
        .summary(summary))
    }
}

capsaga_sdk::export_tool!(FsGlob);

#[cfg(test)]
mod tests {
    use super::*;
    use capsaga_sdk::fs::with_granted_roots;
    use capsaga_sdk::serde_json;
    use std::fs;

    #[test]
    fn globs_sorted_bounded_and_confined() {
        let d = std::env::temp_dir().join(format!("fs_glob-test-{}", std::process::id()));
        let _ = fs::remove_dir_all(&d);
        let ws = d.join("ws");
        for f in ["a.md", "b.txt", "sub/c.md", "sub/deep/d.md", ".hidden/e.md"] {
            let p = ws.join(f);
            fs::create_dir_all(p.parent().unwrap_or(&ws)).unwrap_or_else(|e| panic!("{e}"));
            fs::write(&p, "x").unwrap_or_else(|e| panic!("{e}"));
        }
        fs::write(d.join("outside.md"), "x").unwrap_or_else(|e| panic!("{e}"));
        std::os::unix::fs::symlink(&d, ws.join("up")).unwrap_or_else(|e| panic!("{e}"));
        let run = |pattern: &str, root: Option<String>, max: usize| {
            with_granted_roots([&ws], || {
                FsGlob::execute(
                    &CallContext::default(),
                    Args {
                        pattern: pattern.into(),
                        root,
                        max_results: max,
                        include_dirs: false,
                    },
                )
            })
        };
        let out = run("**/*.md", None, 200).unwrap_or_else(|e| panic!("{e}"));
        let v = out.data_as::<serde_json::Value>().unwrap_or_default();
        let paths: Vec<String> = v["matches"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|m| {
                m["path"]
                    .as_str()
                    .unwrap_or("")
                    .trim_start_matches(&ws.display().to_string())
                    .to_owned()
            })
            .collect();
        assert_eq!(
            paths,
            ["/a.md", "/sub/c.md", "/sub/deep/d.md"],
            "links not followed, hidden skipped"
        );
        let out = run("*.md", None, 200).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(
            out.data_as::<serde_json::Value>().unwrap_or_default()["total"],
            1
        );
        let out = run("**/*", None, 2).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(
            out.data_as::<serde_json::Value>().unwrap_or_default()["truncated"],
            true
        );
        let e = run("*.md", Some(d.display().to_string()), 10)
            .err()
            .map(|e| e.kind);
        assert_eq!(e, Some(ErrorKind::PermissionDenied));
        let e = run("../*.md", None, 10).err().map(|e| e.kind);
        assert_eq!(e, Some(ErrorKind::InvalidArgs));
        let _ = fs::remove_dir_all(&d);
    }
}
