//! Before anything is written: the path checked against the grants and
//! resolved, the missing parents found, the pre-image captured.

use std::fs;
use std::io;
use std::path::{Path, PathBuf};

use capsaga_sdk::fs::{Follow, resolve};
use capsaga_sdk::prelude::*;

use crate::preimage::{Previous, capture_previous, sha256_hex};
use crate::{Args, WriteData};

/// Everything `execute` and `dry_run` learn before writing.
pub(crate) struct Prepared {
    /// The path to write: resolved, inside the grants, not a symbolic link.
    pub(crate) target: PathBuf,
    pub(crate) previous: Previous,
    pub(crate) written_sha256: String,
    pub(crate) missing_dirs: Vec<PathBuf>,
}

impl Prepared {
    pub(crate) fn data(&self, args: &Args, dry_run: bool) -> WriteData {
        WriteData {
            path: args.path.clone(),
            resolved_path: Some(self.target.display().to_string()),
            bytes_written: args.content.len() as u64,
            created: !self.previous.existed,
            created_dirs: self
                .missing_dirs
                .iter()
                .map(|d| d.display().to_string())
                .collect(),
            previous: self.previous.clone(),
            written_sha256: self.written_sha256.clone(),
            dry_run,
        }
    }
}

/// Validates the path, captures the pre-image and finds missing parents.
pub(crate) fn prepare(args: &Args) -> Result<Prepared, ToolError> {
    let target = locate(&args.path)?;
    let Some(parent) = target.parent() else {
        return Err(
            ToolError::invalid_args(format!("path {:?} does not name a file", args.path))
                .hint("end the path with a file name, e.g. /dir/notes.txt"),
        );
    };
    let missing_dirs = missing_ancestors(parent)?;
    if !missing_dirs.is_empty() && !args.create_dirs {
        return Err(ToolError::not_found(format!(
            "the directory {} does not exist",
            parent.display()
        ))
        .hint("set create_dirs to true to create it, or write into an existing directory"));
    }
    let previous = if missing_dirs.is_empty() {
        capture_previous(&target)?
    } else {
        Previous {
            existed: false,
            content: None,
            encoding: None,
            sha256: None,
            id: None,
        }
    };
    Ok(Prepared {
        target,
        previous,
        written_sha256: sha256_hex(args.content.as_bytes()),
        missing_dirs,
    })
}

/// The file to write for `raw`: checked against the grants and resolved
/// ([`resolve`]), not a symbolic link.
///
/// # Errors
/// `invalid-args` for a path that is relative while several directories are
/// granted, or does not end with a file
/// name; `permission-denied` when the path, or a symbolic link on the way or
/// at its end, leads outside the granted directories; `unsupported` when the
/// final component is a symbolic link inside them (see the crate docs).
pub(crate) fn locate(raw: &str) -> Result<PathBuf, ToolError> {
    // Follow the final link too, so that a link leading out is refused as
    // such (permission-denied), whatever its target.
    let followed = resolve(raw, Follow::Final)?;
    let target = resolve(raw, Follow::NoFinal)?;
    if matches!(raw.rsplit('/').next(), Some("" | "." | "..")) {
        return Err(
            ToolError::invalid_args(format!("path {raw:?} does not name a file"))
                .hint("end the path with a file name, e.g. /dir/notes.txt"),
        );
    }
    if followed != target {
        return Err(ToolError::unsupported(format!(
            "{raw} is a symbolic link (to {})",
            followed.display()
        ))
        .hint(format!(
            "fs_write does not write through symbolic links; write to the link's target path {}",
            followed.display()
        ))
        .details(json!({"path": raw, "link_target": followed.display().to_string()})));
    }
    Ok(target)
}

/// Ancestors of `dir` (itself included) that do not exist, outermost first.
pub(crate) fn missing_ancestors(dir: &Path) -> Result<Vec<PathBuf>, ToolError> {
    let mut missing = Vec::new();
    for ancestor in dir.ancestors() {
        match fs::metadata(ancestor) {
            Ok(meta) if meta.is_dir() => break,
            Ok(_) => {
                return Err(ToolError::invalid_args(format!(
                    "{} is not a directory",
                    ancestor.display()
                ))
                .hint("a component of the path is a file; choose another path"));
            }
            Err(e) if e.kind() == io::ErrorKind::NotFound => missing.push(ancestor.to_path_buf()),
            Err(e) => return Err(ToolError::from_io(&e, ancestor)),
        }
    }
    missing.reverse();
    Ok(missing)
}
