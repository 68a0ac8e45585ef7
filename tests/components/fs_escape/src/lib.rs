//! `fs_escape` (test component): tries to reach files through the sandbox and
//! reports what the OS answered, so that the host's tests can see each
//! attempt denied.
//!
//! Args: `{"mode": "...", "path": "/abs/path", "target": "..."}`. Modes:
//! - `read`: read `path` (use `..` walks, absolute paths outside the grants,
//!   or a symbolic link the test planted, to try an escape);
//! - `write`: write a few bytes to `path`;
//! - `list`: list the directory `path`;
//! - `stat`: metadata of `path`;
//! - `dotdot`: list `path/..` (above a granted root when `path` is one);
//! - `symlink`: create a symbolic link at `path` pointing to `target`
//!   (e.g. `/etc/passwd` or `../../etc/passwd`), then read through it.
//!
//! Success (the OS allowed it) is an output `{"mode", "path", "ok": true,
//! "observed": ...}`; a refusal is the `ToolError` of [`ToolError::from_io`]
//! with `details` adding `mode` and `step`. Needs `fs:read:*` and `fs:write:*`.
//!
//! What the OS answers depends on the guest's wasi-libc: `..` walks and
//! symbolic links leading out are `EPERM` (permission-denied) in both builds;
//! an absolute path outside every preopen is `ENOENT` (not-found) with
//! rustup's wasm32-wasip2 libc, `ENOTCAPABLE` (permission-denied) with
//! Debian's 2022 wasi-libc. A test should accept either kind and check that
//! no data leaked and nothing outside the grant changed.

use std::fs;
use std::io;

use capsaga_sdk::prelude::*;

/// What to try.
#[derive(Debug, Clone, Copy, Deserialize, JsonSchema, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum Mode {
    /// Read the file at `path`.
    Read,
    /// Write a few bytes to `path`.
    Write,
    /// List the directory `path`.
    List,
    /// Read the metadata of `path`.
    Stat,
    /// List `path/..`.
    Dotdot,
    /// Create a symbolic link at `path` to `target`, then read through it.
    Symlink,
}

/// Arguments.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Args {
    /// What to try.
    pub mode: Mode,
    /// The path to try it on.
    pub path: String,
    /// Target of the link (mode `symlink` only); default `/etc/passwd`.
    #[serde(default)]
    pub target: Option<String>,
}

/// The component.
pub struct FsEscape;

impl Tool for FsEscape {
    type Args = Args;

    fn meta() -> Meta {
        Meta::new(
            "fs_escape",
            "Test component: tries to escape the filesystem sandbox and reports the OS answer.",
        )
        .side_effects(true)
        .risk(Risk::High)
        .capability("fs:read:*")
        .capability("fs:write:*")
    }

    fn execute(_ctx: &CallContext, args: Args) -> Result<Output, ToolError> {
        let mode = args.mode;
        let path = args.path.clone();
        let denied = |step: &str, at: &str, e: &io::Error| {
            let mut err = ToolError::from_io(e, at);
            if let Some(d) = err.details.as_mut().and_then(|d| d.as_object_mut()) {
                d.insert("mode".into(), json!(format!("{mode:?}").to_lowercase()));
                d.insert("step".into(), json!(step));
            }
            err
        };
        let observed = match mode {
            Mode::Read => {
                let bytes = fs::read(&path).map_err(|e| denied("read", &path, &e))?;
                json!({"len": bytes.len(), "head": String::from_utf8_lossy(&bytes[..bytes.len().min(64)])})
            }
            Mode::Write => {
                fs::write(&path, b"fs_escape was here").map_err(|e| denied("write", &path, &e))?;
                json!("wrote 18 bytes")
            }
            Mode::List => json!(list(&path).map_err(|e| denied("list", &path, &e))?),
            Mode::Stat => {
                let m = fs::metadata(&path).map_err(|e| denied("stat", &path, &e))?;
                json!({"is_dir": m.is_dir(), "len": m.len()})
            }
            Mode::Dotdot => {
                let up = format!("{}/..", path.trim_end_matches('/'));
                json!(list(&up).map_err(|e| denied("dotdot", &up, &e))?)
            }
            Mode::Symlink => {
                let target = args.target.as_deref().unwrap_or("/etc/passwd");
                symlink(target, &path).map_err(|e| denied("create-symlink", &path, &e))?;
                let bytes =
                    fs::read(&path).map_err(|e| denied("read-through-symlink", &path, &e))?;
                json!({"target": target, "len": bytes.len()})
            }
        };
        Ok(Output::new(
            json!({"mode": format!("{mode:?}").to_lowercase(), "path": path, "ok": true, "observed": observed}),
        ))
    }
}

capsaga_sdk::export_tool!(FsEscape);

/// Up to 20 names of the directory at `path`.
fn list(path: &str) -> io::Result<Vec<String>> {
    let mut names = Vec::new();
    for entry in fs::read_dir(path)?.take(20) {
        names.push(entry?.file_name().to_string_lossy().into_owned());
    }
    Ok(names)
}

/// `symlink(2)`: wasi-libc's on wasm32 (std's is unstable there), std's on unix.
fn symlink(target: &str, link: &str) -> io::Result<()> {
    #[cfg(target_os = "wasi")]
    {
        use std::ffi::{CString, c_char, c_int};
        unsafe extern "C" {
            fn symlink(target: *const c_char, link: *const c_char) -> c_int;
        }
        let nul = |_| io::Error::from(io::ErrorKind::InvalidInput);
        let target = CString::new(target).map_err(nul)?;
        let link = CString::new(link).map_err(nul)?;
        // SAFETY: both pointers are valid NUL-terminated strings for the call.
        if unsafe { symlink(target.as_ptr(), link.as_ptr()) } == 0 {
            Ok(())
        } else {
            Err(io::Error::last_os_error())
        }
    }
    #[cfg(unix)]
    {
        std::os::unix::fs::symlink(target, link)
    }
    #[cfg(not(any(unix, target_os = "wasi")))]
    {
        let _ = (target, link);
        Err(io::Error::from(io::ErrorKind::Unsupported))
    }
}
