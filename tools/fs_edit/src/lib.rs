//! `fs_edit`: exact search-and-replace in a UTF-8 text file, the edit tool
//! coding agents use.
//!
//! Arguments: `{"path": "/w/src/main.rs", "old_string": "fn a()", "new_string":
//! "fn b()", "replace_all": false}`.
//!
//! `old_string` must occur in the file exactly once (unless `replace_all`):
//! none is `not-found`, several are `invalid-args` saying how many, so the
//! model adds context instead of editing the wrong place. `dry_run` returns
//! the same data with a unified diff and writes nothing. `execute` writes the
//! new content in place with the SDK's [`capsaga_sdk::fs::write_file`] (the
//! file keeps its permission bits, owner and hard links: WASI cannot read or
//! set modes, so a temporary file renamed over it would widen a `0600` file
//! to `0644`) and returns the previous content, its SHA-256 and the diff.
//! `compensate` puts the previous content back when the file still holds
//! what was written or when the write was interrupted (its marker file is
//! there: the file may be partly written), does nothing when it already
//! holds the previous content, and is `unrevertible` when someone else
//! changed it since.
//!
//! Paths are checked with the SDK's path guard; a final symbolic link is
//! refused (edit its target). Files over 4 MiB are refused.
//!
//! The file is read and written through the SDK's guarded file
//! ([`capsaga_sdk::fs::open_file`]): no link followed on the way or at the
//! end. `execute` keeps its identity (`previous_id`: which object, how many
//! names), and `compensate` writes only to that object while it has no more
//! names than then: a link, a directory or a FIFO swapped in, another file,
//! or a hard link added since (to a file outside the grant or inside it) is
//! `unrevertible`, and nothing is written through it.
//!
//! Side effects, risk medium, dry-run, not idempotent (a second identical
//! call finds nothing to replace). The output holds file content: untrusted.
//! Needs `fs:write:*`.

use std::fs;
use std::io;
use std::path::{Path, PathBuf};

use capsaga_sdk::fs::{Expect, FileError, FileId, Follow, open_file, resolve, write_file};
use capsaga_sdk::prelude::*;
use sha2::{Digest, Sha256};

/// Largest file `fs_edit` edits: 4 MiB.
pub const MAX_FILE_BYTES: u64 = 4 * 1024 * 1024;

/// Largest diff returned, bytes.
pub const MAX_DIFF_BYTES: usize = 64 * 1024;

/// Arguments of `fs_edit`.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Args {
    /// Absolute path of the file, inside a directory granted for writing.
    pub path: String,
    /// The exact text to replace (whitespace and newlines included); it must
    /// occur exactly once unless `replace_all` is true.
    pub old_string: String,
    /// The text to put in its place.
    pub new_string: String,
    /// Replace every occurrence (default false).
    #[serde(default)]
    pub replace_all: bool,
}

/// Output data of `execute` and `dry_run`.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct EditData {
    /// The path as given.
    pub path: String,
    /// The file edited (`.`, `..` and directory links resolved).
    pub resolved_path: String,
    /// Occurrences replaced.
    pub replacements: usize,
    /// The previous content (UTF-8: the files edited are text).
    pub previous_content: String,
    /// Lowercase hex SHA-256 of the previous content.
    pub previous_sha256: String,
    /// Which file was edited and how many names it had (absent in outputs
    /// of older versions): the undo writes only to that file.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub previous_id: Option<FileId>,
    /// Lowercase hex SHA-256 of the new content.
    pub written_sha256: String,
    /// Unified diff of the change (cut at 64 KiB).
    pub diff: String,
    /// True when this came from `dry_run` and nothing was written.
    pub dry_run: bool,
}

/// The tool.
pub struct FsEdit;

impl Tool for FsEdit {
    type Args = Args;

    fn meta() -> Meta {
        Meta::new(
            "fs_edit",
            "Replaces an exact string in a UTF-8 text file: old_string must occur exactly once \
             (or set replace_all). The path must be absolute and inside a directory granted for \
             writing. Returns a unified diff; the edit can be undone.",
        )
        .side_effects(true)
        .risk(Risk::Medium)
        .returns_untrusted(true)
        .idempotent(false)
        .dry_run(true)
        .capability("fs:write:*")
        // Field labels: see docs/information-flow.md (first-party tools).
        .trusted_field("/replacements")
        .trusted_field("/dry_run")
        .trusted_field("/previous_id/object")
        .trusted_field("/previous_id/names")
        .untrusted_field("/path")
        .untrusted_field("/resolved_path")
        .untrusted_field("/previous_content")
        .untrusted_field("/diff")
    }

    fn execute(ctx: &CallContext, args: Args) -> Result<Output, ToolError> {
        let (target, data, new) = prepare(&args, false)?;
        if data.replacements > 0 {
            let expect = Expect::same_or_one_name(data.previous_id.as_ref());
            scratch(&target, ctx, "execute")
                .and_then(|tmp| write_file(&target, new.as_bytes(), &tmp, &expect))
                .map_err(|e| e.tool_error(&target))?;
        }
        let effect = format!(
            "edited {} ({} replacement{})",
            data.resolved_path,
            data.replacements,
            if data.replacements == 1 { "" } else { "s" }
        );
        Ok(Output::new(&data).effect(effect.clone()).summary(effect))
    }

    fn dry_run(_ctx: &CallContext, args: Args) -> Result<Output, ToolError> {
        let (_, data, _) = prepare(&args, true)?;
        let summary = format!(
            "would edit {} ({} replacement{})",
            data.resolved_path,
            data.replacements,
            if data.replacements == 1 { "" } else { "s" }
        );
        Ok(Output::new(&data).effect(summary.clone()).summary(summary))
    }

    fn compensate(ctx: &CallContext, args: Args, output: &Output) -> Result<(), ToolError> {
        let data: EditData = output.data_as()?;
        let target = resolve(&args.path, Follow::NoFinal)?;
        if target != Path::new(&data.resolved_path) {
            return Err(ToolError::unrevertible(format!(
                "{} now leads to {}, not to {} where the edit was made",
                args.path,
                target.display(),
                data.resolved_path
            ))
            .hint("tell the operator that the path changed meanwhile"));
        }
        // A crash in execute's write (or an earlier compensation's) leaves its
        // marker: the file may be partly written, and is ours to restore.
        let scratches: Vec<PathBuf> = ["execute", "compensate"]
            .iter()
            .filter_map(|op| temp_path(&target, ctx, op))
            .collect();
        let torn = scratches.iter().any(|t| capsaga_sdk::fs::interrupted(t));
        // What is there now, reached without following a link: a link, a
        // directory or a special file is someone else's ("other").
        let now = match open_file(&target, &Expect::Any) {
            Ok(Some(f)) => {
                let mut hasher = Sha256::new();
                io::copy(&mut f.reader(), &mut hasher)
                    .map_err(|e| ToolError::from_io(&e, &target))?;
                hasher
                    .finalize()
                    .iter()
                    .map(|b| format!("{b:02x}"))
                    .collect()
            }
            Ok(None) => String::new(),
            Err(FileError::Link | FileError::NotAFile { .. }) => "other".to_owned(),
            Err(e) => return Err(e.unrevertible(&target)),
        };
        if now == data.previous_sha256 {
            return remove_scratches(&scratches);
        }
        if now != data.written_sha256 && (!torn || now.is_empty() || now == "other") {
            return Err(ToolError::unrevertible(format!(
                "{} was changed by someone else since the edit (sha256 {}, expected {} or {})",
                args.path,
                match now.as_str() {
                    "" => "none: the file is gone",
                    "other" => "none: not a regular file",
                    sha => sha,
                },
                data.written_sha256,
                data.previous_sha256
            ))
            .hint("do not overwrite it; tell the operator that the file changed meanwhile"));
        }
        if sha256_hex(data.previous_content.as_bytes()) != data.previous_sha256 {
            return Err(ToolError::invalid_args(
                "the previous content in the output does not match its sha256",
            )
            .hint("pass compensate the output that execute returned, unchanged"));
        }
        let expect = Expect::same_or_one_name(data.previous_id.as_ref());
        let previous = data.previous_content.as_bytes();
        scratch(&target, ctx, "compensate")
            .and_then(|tmp| write_file(&target, previous, &tmp, &expect))
            .map_err(|e| e.unrevertible(&target))?;
        remove_scratches(&scratches)
    }
}

/// Removes this step's scratch files once its compensation is done.
fn remove_scratches(scratches: &[PathBuf]) -> Result<(), ToolError> {
    for t in scratches {
        match fs::remove_file(t) {
            Err(e) if e.kind() != io::ErrorKind::NotFound => {
                return Err(ToolError::from_io(&e, t));
            }
            _ => {}
        }
    }
    Ok(())
}

capsaga_sdk::export_tool!(FsEdit);

/// Checks the arguments and the file, and computes the edit.
fn prepare(args: &Args, dry_run: bool) -> Result<(PathBuf, EditData, String), ToolError> {
    if args.old_string.is_empty() {
        return Err(ToolError::invalid_args("old_string is empty")
            .hint("give the exact text to replace; to create a file use fs_write"));
    }
    if args.old_string == args.new_string {
        return Err(
            ToolError::invalid_args("old_string and new_string are the same")
                .hint("nothing would change; give the new text in new_string"),
        );
    }
    let followed = resolve(&args.path, Follow::Final)?;
    let target = resolve(&args.path, Follow::NoFinal)?;
    if followed != target {
        return Err(ToolError::unsupported(format!(
            "{} is a symbolic link (to {})",
            args.path,
            followed.display()
        ))
        .hint(format!(
            "edit the link's target {} instead",
            followed.display()
        )));
    }
    let file = match open_file(&target, &Expect::Any) {
        Ok(Some(f)) => f,
        Ok(None) => {
            let e = io::Error::from(io::ErrorKind::NotFound);
            return Err(ToolError::from_io(&e, &args.path));
        }
        Err(FileError::NotAFile { .. }) => {
            return Err(
                ToolError::invalid_args(format!("{} is not a regular file", args.path))
                    .hint("give the path of a text file"),
            );
        }
        Err(e) => return Err(e.tool_error(&target)),
    };
    let too_big = |len: u64| {
        ToolError::unsupported(format!(
            "{} has {len} bytes; fs_edit edits files of at most {MAX_FILE_BYTES} bytes",
            args.path,
        ))
    };
    if file.len() > MAX_FILE_BYTES {
        return Err(too_big(file.len()));
    }
    let bytes = file
        .read_at_most(MAX_FILE_BYTES)
        .map_err(|e| e.tool_error(&target))?;
    if bytes.len() as u64 > MAX_FILE_BYTES {
        return Err(too_big(bytes.len() as u64));
    }
    let Ok(text) = String::from_utf8(bytes) else {
        return Err(
            ToolError::unsupported(format!("{} is not UTF-8 text", args.path))
                .hint("fs_edit edits text files only"),
        );
    };
    let count = text.matches(args.old_string.as_str()).count();
    if count == 0 {
        return Err(
            ToolError::not_found(format!("old_string was not found in {}", args.path)).hint(
                "read the file again and copy the exact text to replace, whitespace included",
            ),
        );
    }
    if count > 1 && !args.replace_all {
        return Err(ToolError::invalid_args(format!(
            "old_string occurs {count} times in {}",
            args.path
        ))
        .hint("add surrounding lines to old_string so that it occurs once, or set replace_all")
        .details(json!({"occurrences": count})));
    }
    let new = if args.replace_all {
        text.replace(&args.old_string, &args.new_string)
    } else {
        text.replacen(&args.old_string, &args.new_string, 1)
    };
    let shown = target.display().to_string();
    let mut diff = similar::TextDiff::from_lines(&text, &new)
        .unified_diff()
        .context_radius(3)
        .header(&shown, &shown)
        .to_string();
    if diff.len() > MAX_DIFF_BYTES {
        let mut cut = MAX_DIFF_BYTES;
        while !diff.is_char_boundary(cut) {
            cut -= 1;
        }
        diff.truncate(cut);
        diff.push_str("\n[diff truncated]\n");
    }
    let data = EditData {
        path: args.path.clone(),
        resolved_path: shown,
        replacements: if args.replace_all { count } else { 1 },
        previous_sha256: sha256_hex(text.as_bytes()),
        previous_id: Some(file.id().clone()),
        written_sha256: sha256_hex(new.as_bytes()),
        previous_content: text,
        diff,
        dry_run,
    };
    Ok((target, data, new))
}

/// The marker of this step's `op` over `path` for [`write_file`] (which
/// writes in place, mode, owner and hard links kept, only to the file the
/// caller expects): [`temp_path`], left behind if the write is interrupted.
fn scratch(path: &Path, ctx: &CallContext, op: &str) -> Result<PathBuf, FileError> {
    temp_path(path, ctx, op).ok_or_else(|| FileError::Io(io::ErrorKind::InvalidInput.into()))
}

/// `<dir>/.<name>.<16 hex>.capsaga-tmp`, from the idempotency key and `op`.
fn temp_path(path: &Path, ctx: &CallContext, op: &str) -> Option<PathBuf> {
    let (parent, name) = (path.parent()?, path.file_name()?);
    let key = sha256_hex(format!("{}\0{op}", ctx.idempotency_key).as_bytes());
    Some(parent.join(format!(
        ".{}.{}.capsaga-tmp",
        name.to_string_lossy(),
        &key[..16]
    )))
}

/// Lowercase hex SHA-256.
pub fn sha256_hex(bytes: &[u8]) -> String {
    Sha256::digest(bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use capsaga_sdk::fs::with_granted_roots;

    fn scratch(name: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("fs_edit-test-{}-{name}", std::process::id()));
        let _ = fs::remove_dir_all(&d);
        fs::create_dir_all(&d).unwrap_or_else(|e| panic!("{e}"));
        d
    }

    fn args(p: &Path, old: &str, new: &str, all: bool) -> Args {
        Args {
            path: p.display().to_string(),
            old_string: old.into(),
            new_string: new.into(),
            replace_all: all,
        }
    }

    #[test]
    fn edit_diff_and_undo() {
        let d = scratch("edit");
        let f = d.join("a.rs");
        fs::write(&f, "fn a() {}\nfn b() {}\n").unwrap_or_else(|e| panic!("{e}"));
        let ctx = CallContext::default();
        let a = args(&f, "fn a()", "fn alpha()", false);
        let dry = FsEdit::dry_run(&ctx, a.clone()).unwrap_or_else(|e| panic!("{e}"));
        let dd: EditData = dry.data_as().unwrap_or_else(|e| panic!("{e}"));
        assert!(
            dd.diff.contains("-fn a() {}\n+fn alpha() {}"),
            "{}",
            dd.diff
        );
        assert_eq!(
            fs::read_to_string(&f).ok().as_deref(),
            Some("fn a() {}\nfn b() {}\n")
        );
        let out = FsEdit::execute(&ctx, a.clone()).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(
            fs::read_to_string(&f).ok().as_deref(),
            Some("fn alpha() {}\nfn b() {}\n")
        );
        FsEdit::compensate(&ctx, a.clone(), &out).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(
            fs::read_to_string(&f).ok().as_deref(),
            Some("fn a() {}\nfn b() {}\n")
        );
        FsEdit::compensate(&ctx, a.clone(), &out).unwrap_or_else(|e| panic!("idempotent: {e}"));
        // A third party's change is not overwritten.
        FsEdit::execute(&ctx, a.clone()).unwrap_or_else(|e| panic!("{e}"));
        fs::write(&f, "theirs").unwrap_or_else(|e| panic!("{e}"));
        let e = FsEdit::compensate(&ctx, a, &out).err().map(|e| e.kind);
        assert_eq!(e, Some(ErrorKind::Unrevertible));
        let _ = fs::remove_dir_all(&d);
    }

    #[test]
    fn uniqueness_and_refusals() {
        let d = scratch("unique");
        let f = d.join("a.txt");
        fs::write(&f, "x x x").unwrap_or_else(|e| panic!("{e}"));
        let ctx = CallContext::default();
        let kind = |a: Args| FsEdit::execute(&ctx, a).err().map(|e| e.kind);
        assert_eq!(
            kind(args(&f, "x", "y", false)),
            Some(ErrorKind::InvalidArgs)
        );
        assert_eq!(kind(args(&f, "z", "y", false)), Some(ErrorKind::NotFound));
        assert_eq!(kind(args(&f, "", "y", false)), Some(ErrorKind::InvalidArgs));
        let out = FsEdit::execute(&ctx, args(&f, "x", "y", true)).unwrap_or_else(|e| panic!("{e}"));
        let data: EditData = out.data_as().unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(data.replacements, 3);
        assert_eq!(fs::read_to_string(&f).ok().as_deref(), Some("y y y"));
        let secret = d.join("secret.txt");
        fs::write(&secret, "s").unwrap_or_else(|e| panic!("{e}"));
        let ws = d.join("ws");
        fs::create_dir(&ws).unwrap_or_else(|e| panic!("{e}"));
        std::os::unix::fs::symlink(&secret, ws.join("link")).unwrap_or_else(|e| panic!("{e}"));
        with_granted_roots([&ws], || {
            assert_eq!(
                kind(args(&secret, "s", "p", false)),
                Some(ErrorKind::PermissionDenied)
            );
            assert_eq!(
                kind(args(&ws.join("link"), "s", "p", false)),
                Some(ErrorKind::PermissionDenied)
            );
        });
        assert_eq!(fs::read_to_string(&secret).ok().as_deref(), Some("s"));
        let _ = fs::remove_dir_all(&d);
    }

    #[test]
    fn edit_and_undo_keep_mode_inode_and_hard_links() {
        use std::os::unix::fs::{MetadataExt, PermissionsExt};
        let d = scratch("modes");
        let ctx = CallContext::default();
        for mode in [0o600, 0o640, 0o700, 0o755] {
            let f = d.join(format!("f{mode:o}"));
            fs::write(&f, "TOKEN=secret\n").unwrap_or_else(|e| panic!("{e}"));
            fs::set_permissions(&f, fs::Permissions::from_mode(mode))
                .unwrap_or_else(|e| panic!("{e}"));
            fs::hard_link(&f, d.join(format!("l{mode:o}"))).unwrap_or_else(|e| panic!("{e}"));
            let meta = || fs::metadata(&f).unwrap_or_else(|e| panic!("{e}"));
            let ino = meta().ino();
            let a = args(&f, "secret", "new", false);
            let out = FsEdit::execute(&ctx, a.clone()).unwrap_or_else(|e| panic!("{e}"));
            assert_eq!(meta().permissions().mode() & 0o7777, mode, "{mode:o}");
            assert_eq!((meta().ino(), meta().nlink()), (ino, 2), "{mode:o}");
            assert_eq!(
                fs::read_to_string(d.join(format!("l{mode:o}")))
                    .ok()
                    .as_deref(),
                Some("TOKEN=new\n")
            );
            FsEdit::compensate(&ctx, a, &out).unwrap_or_else(|e| panic!("{e}"));
            assert_eq!(
                fs::read_to_string(&f).ok().as_deref(),
                Some("TOKEN=secret\n")
            );
            assert_eq!(meta().permissions().mode() & 0o7777, mode, "undo {mode:o}");
            assert_eq!((meta().ino(), meta().nlink()), (ino, 2), "undo {mode:o}");
        }
        let _ = fs::remove_dir_all(&d);
    }

    #[test]
    fn an_edit_interrupted_in_place_is_restored_by_compensate() {
        let d = scratch("torn");
        let f = d.join("a.txt");
        fs::write(&f, "alpha beta").unwrap_or_else(|e| panic!("{e}"));
        let ctx = CallContext {
            idempotency_key: "saga:0:fs_edit:torn".into(),
            ..CallContext::default()
        };
        let a = args(&f, "alpha", "ALPHA-LONGER", false);
        let dry = FsEdit::dry_run(&ctx, a.clone()).unwrap_or_else(|e| panic!("{e}"));
        let marker = temp_path(&f, &ctx, "execute").unwrap_or_default();
        fs::write(&marker, "").unwrap_or_else(|e| panic!("{e}"));
        fs::write(&f, "ALPHA-LONbeta").unwrap_or_else(|e| panic!("{e}"));
        FsEdit::compensate(&ctx, a.clone(), &dry).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(fs::read_to_string(&f).ok().as_deref(), Some("alpha beta"));
        assert!(!marker.exists());
        fs::write(&f, "ALPHA-LONbeta").unwrap_or_else(|e| panic!("{e}"));
        let e = FsEdit::compensate(&ctx, a, &dry).err().map(|e| e.kind);
        assert_eq!(e, Some(ErrorKind::Unrevertible));
        let _ = fs::remove_dir_all(&d);
    }
}
