//! File operations run by `fs_churn` and `undo_garbage` (test components),
//! each through the guest's own WASI filesystem: what the host's file
//! journal must see (issue 28).

use std::fs::{self, File, OpenOptions};
use std::io::Write;
use std::path::Path;

use capsaga_sdk::prelude::*;

/// One file operation.
#[derive(Deserialize, JsonSchema, Clone)]
#[serde(tag = "op", rename_all = "snake_case", deny_unknown_fields)]
pub enum FileOp {
    /// Create or replace `path` with `content` (or `size` bytes of `x`).
    Write {
        /// Absolute path.
        path: String,
        /// The bytes, as text.
        #[serde(default)]
        content: Option<String>,
        /// Or this many bytes.
        #[serde(default)]
        size: Option<u64>,
        /// Sync the file afterwards.
        #[serde(default)]
        sync: bool,
    },
    /// Append `content` to `path`.
    Append {
        /// Absolute path.
        path: String,
        /// The bytes, as text.
        content: String,
    },
    /// Rename `from` to `to`.
    Rename {
        /// Source.
        from: String,
        /// Destination.
        to: String,
    },
    /// Remove the file `path`.
    Unlink {
        /// Absolute path.
        path: String,
    },
    /// Create the directory `path`.
    Mkdir {
        /// Absolute path.
        path: String,
    },
    /// Remove the empty directory `path`.
    Rmdir {
        /// Absolute path.
        path: String,
    },
    /// Create a symbolic link `path` to `target`.
    Symlink {
        /// The link's target, as written.
        target: String,
        /// Absolute path of the link.
        path: String,
    },
    /// Create a hard link `path` to `from`.
    Link {
        /// Existing file.
        from: String,
        /// The new name.
        path: String,
    },
    /// Set the length of `path` (opened for writing).
    Truncate {
        /// Absolute path.
        path: String,
        /// New length, bytes.
        size: u64,
    },
    /// Set the modification time of `path` (opened read-only) to 1 s after the epoch.
    Touch {
        /// Absolute path.
        path: String,
    },
    /// Write `count` files `dir/f<i>` of `size` bytes each.
    Many {
        /// Absolute directory.
        dir: String,
        /// How many.
        count: u32,
        /// Bytes each.
        size: u64,
    },
}

/// How `execute` ends after its operations (tests of failed steps).
#[derive(Deserialize, JsonSchema, Clone, Copy)]
#[serde(rename_all = "snake_case")]
pub enum After {
    /// Return an error (the step fails after changing files).
    Fail,
    /// Panic (a trap: the step is in doubt).
    Trap,
}

/// Arguments.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Args {
    /// The operations, in order.
    pub ops: Vec<FileOp>,
    /// How `execute` ends.
    #[serde(default)]
    pub after: Option<After>,
}

unsafe extern "C" {
    /// wasi-libc's `symlink(2)`.
    fn symlink(target: *const core::ffi::c_char, path: *const core::ffi::c_char) -> i32;
}

fn io(e: std::io::Error, p: &str) -> ToolError {
    ToolError::from_io(&e, Path::new(p))
}

fn write_file(path: &str, bytes: &[u8], sync: bool) -> Result<(), ToolError> {
    let mut f = File::create(path).map_err(|e| io(e, path))?;
    f.write_all(bytes).map_err(|e| io(e, path))?;
    if sync {
        f.sync_all().map_err(|e| io(e, path))?;
    }
    Ok(())
}

/// Run `ops` in order; the effects, one line each.
pub fn run(ops: &[FileOp]) -> Result<Vec<String>, ToolError> {
    let mut effects = Vec::new();
    for op in ops {
        match op {
            FileOp::Write {
                path,
                content,
                size,
                sync,
            } => {
                let bytes = match (content, size) {
                    (Some(c), _) => c.as_bytes().to_vec(),
                    (None, Some(n)) => vec![b'x'; *n as usize],
                    (None, None) => Vec::new(),
                };
                write_file(path, &bytes, *sync)?;
                effects.push(format!("wrote {path}"));
            }
            FileOp::Append { path, content } => {
                let mut f = OpenOptions::new()
                    .append(true)
                    .create(true)
                    .open(path)
                    .map_err(|e| io(e, path))?;
                f.write_all(content.as_bytes()).map_err(|e| io(e, path))?;
                effects.push(format!("appended to {path}"));
            }
            FileOp::Rename { from, to } => {
                fs::rename(from, to).map_err(|e| io(e, from))?;
                effects.push(format!("renamed {from} to {to}"));
            }
            FileOp::Unlink { path } => {
                fs::remove_file(path).map_err(|e| io(e, path))?;
                effects.push(format!("removed {path}"));
            }
            FileOp::Mkdir { path } => {
                fs::create_dir(path).map_err(|e| io(e, path))?;
                effects.push(format!("made {path}"));
            }
            FileOp::Rmdir { path } => {
                fs::remove_dir(path).map_err(|e| io(e, path))?;
                effects.push(format!("removed {path}"));
            }
            FileOp::Symlink { target, path } => {
                let (t, p) = (
                    std::ffi::CString::new(target.as_str())
                        .map_err(|_| ToolError::invalid_args("NUL in target"))?,
                    std::ffi::CString::new(path.as_str())
                        .map_err(|_| ToolError::invalid_args("NUL in path"))?,
                );
                // SAFETY: two NUL-terminated strings that outlive the call.
                if unsafe { symlink(t.as_ptr(), p.as_ptr()) } != 0 {
                    return Err(io(std::io::Error::last_os_error(), path));
                }
                effects.push(format!("linked {path} -> {target}"));
            }
            FileOp::Link { from, path } => {
                fs::hard_link(from, path).map_err(|e| io(e, path))?;
                effects.push(format!("hard-linked {path} to {from}"));
            }
            FileOp::Truncate { path, size } => {
                let f = OpenOptions::new()
                    .write(true)
                    .open(path)
                    .map_err(|e| io(e, path))?;
                f.set_len(*size).map_err(|e| io(e, path))?;
                effects.push(format!("set the length of {path} to {size}"));
            }
            FileOp::Touch { path } => {
                let f = File::open(path).map_err(|e| io(e, path))?;
                f.set_modified(std::time::UNIX_EPOCH + std::time::Duration::from_secs(1))
                    .map_err(|e| io(e, path))?;
                effects.push(format!("set the time of {path}"));
            }
            FileOp::Many { dir, count, size } => {
                let bytes = vec![b'm'; *size as usize];
                for i in 0..*count {
                    write_file(&format!("{dir}/f{i}"), &bytes, false)?;
                }
                effects.push(format!("wrote {count} files in {dir}"));
            }
        }
    }
    Ok(effects)
}

/// The paths `ops` write or create (for a compensate that scribbles).
pub fn written(ops: &[FileOp]) -> Vec<String> {
    let mut out = Vec::new();
    for op in ops {
        match op {
            FileOp::Write { path, .. }
            | FileOp::Append { path, .. }
            | FileOp::Truncate { path, .. } => out.push(path.clone()),
            FileOp::Rename { to, .. } => out.push(to.clone()),
            FileOp::Many { dir, count, .. } => {
                out.extend((0..*count).map(|i| format!("{dir}/f{i}")));
            }
            _ => {}
        }
    }
    out
}

/// The result of `execute`: run the operations, then end as `after` says.
pub fn execute(args: &Args) -> Result<Output, ToolError> {
    let effects = run(&args.ops)?;
    match args.after {
        Some(After::Fail) => {
            return Err(ToolError::new(
                ErrorKind::ExternalError,
                "told to fail after changing files",
            ));
        }
        Some(After::Trap) => panic!("told to trap after changing files"),
        None => {}
    }
    let mut out = Output::new(json!({"ops": args.ops.len()}));
    for e in effects {
        out = out.effect(e);
    }
    Ok(out)
}
