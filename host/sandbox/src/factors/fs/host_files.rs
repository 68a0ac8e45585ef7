//! The files `code_run` touches outside its instance, opened by the host the
//! way the sandbox opens them for a guest: beneath a preopened directory of
//! the tool's bindings with `cap_primitives` (the resolver Wasmtime's WASI
//! runs: a symbolic link may not lead out of the directory), non-blocking,
//! and only regular files (a FIFO or a device is refused, never waited on).
//!
//! A path is absolute, has no `.` or `..` component, and belongs to the
//! preopen that is its longest directory prefix, as for a guest.

use cap_primitives::fs::{FollowSymlinks, OpenOptions};
use capsaga_core::error::{ErrorKind, ToolError};
use capsaga_core::idempotency::sha256_hex;
use capsaga_guest_fs::beneath::clear_nonblocking;
use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::path::{Component, Path, PathBuf};
use wasmtime_wasi::FsPerms;

/// A path split into the preopened directory it lies under and the rest.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Beneath {
    /// The preopened directory (absolute).
    pub root: PathBuf,
    /// The path relative to it (not empty).
    pub rel: PathBuf,
    /// Whether the preopen is writable.
    pub writable: bool,
}

fn refused(what: &str, path: &str, why: &str) -> ToolError {
    ToolError::with_hint(
        ErrorKind::PermissionDenied,
        format!("{what} {path}: {why}"),
        "Use an absolute path inside a directory granted to code_run (no `..`).",
    )
}

/// Where `path` lies among `preopens` (directory → permissions).
///
/// # Errors
/// `permission-denied` for a relative path, a `.`/`..` component, or a path
/// under no preopen.
pub fn locate(
    preopens: &BTreeMap<String, FsPerms>,
    path: &str,
    what: &str,
) -> Result<Beneath, ToolError> {
    let p = Path::new(path);
    if !p.is_absolute() {
        return Err(refused(what, path, "not an absolute path"));
    }
    if path.split('/').any(|seg| seg == "." || seg == "..")
        || p.components().any(|c| matches!(c, Component::ParentDir))
    {
        return Err(refused(what, path, "`.` and `..` are not allowed"));
    }
    let best = preopens
        .iter()
        .filter_map(|(dir, perms)| {
            let rel = p.strip_prefix(dir).ok()?;
            Some((dir, perms, rel))
        })
        .max_by_key(|(dir, _, _)| Path::new(dir.as_str()).components().count());
    match best {
        Some((dir, perms, rel)) => Ok(Beneath {
            root: PathBuf::from(dir),
            rel: rel.to_path_buf(),
            writable: *perms == FsPerms::ReadWrite,
        }),
        None => Err(refused(what, path, "not inside a granted directory")),
    }
}

fn io_error(what: &str, path: &str, e: &std::io::Error) -> ToolError {
    let (kind, hint) = match e.kind() {
        std::io::ErrorKind::NotFound => (ErrorKind::NotFound, "Check the path (fs_list)."),
        std::io::ErrorKind::AlreadyExists => (
            ErrorKind::InvalidArgs,
            "code_run never replaces a file: choose another output_dir or remove the file first.",
        ),
        std::io::ErrorKind::PermissionDenied => (
            ErrorKind::PermissionDenied,
            "Use a path inside a directory granted to code_run.",
        ),
        _ => (ErrorKind::Unknown, "Check the path."),
    };
    // An escape through a symbolic link is reported by cap-std as
    // permission denied / "a path led outside of the filesystem".
    ToolError::with_hint(kind, format!("{what} {path}: {}", short(e)), hint)
}

fn short(e: &std::io::Error) -> String {
    let s = e.to_string();
    match s.find(" (os error") {
        Some(i) => s[..i].to_string(),
        None => s,
    }
}

fn root_dir(b: &Beneath) -> std::io::Result<std::fs::File> {
    cap_primitives::fs::open_ambient_dir(&b.root, cap_primitives::ambient_authority())
}

fn options() -> OpenOptions {
    capsaga_guest_fs::beneath::nonblocking_options()
}

/// Read the regular file `b` (at most `max` bytes), as a guest would open
/// it (links followed while they stay beneath the directory).
///
/// # Errors
/// `not-found`, `permission-denied` (an escape), `unsupported` (not a
/// regular file), `quota-exceeded` (over `max`).
pub fn read(b: &Beneath, path: &str, max: u64) -> Result<Vec<u8>, ToolError> {
    let what = "input";
    let dir = root_dir(b).map_err(|e| io_error(what, path, &e))?;
    let mut o = options();
    o.read(true);
    let mut file =
        cap_primitives::fs::open(&dir, &b.rel, &o).map_err(|e| io_error(what, path, &e))?;
    let meta = file.metadata().map_err(|e| io_error(what, path, &e))?;
    if !meta.is_file() {
        return Err(ToolError::with_hint(
            ErrorKind::Unsupported,
            format!("input {path} is not a regular file"),
            "Give regular files as inputs.",
        ));
    }
    if meta.len() > max {
        return Err(ToolError::with_hint(
            ErrorKind::QuotaExceeded,
            format!("input {path} is {} bytes, over {max}", meta.len()),
            "Use smaller inputs.",
        ));
    }
    clear_nonblocking(&file).map_err(|e| io_error(what, path, &e))?;
    let mut bytes = Vec::with_capacity(meta.len() as usize);
    (&mut file)
        .take(max + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| io_error(what, path, &e))?;
    if bytes.len() as u64 > max {
        return Err(ToolError::with_hint(
            ErrorKind::QuotaExceeded,
            format!("input {path} grew past {max} bytes while read"),
            "Use smaller inputs.",
        ));
    }
    Ok(bytes)
}

/// The directory `b` (links followed while they stay beneath the preopen),
/// opened.
///
/// # Errors
/// As [`read`]; `invalid-args` when it is not a directory.
pub fn open_dir(b: &Beneath, path: &str) -> Result<std::fs::File, ToolError> {
    let what = "output_dir";
    let root = root_dir(b).map_err(|e| io_error(what, path, &e))?;
    if b.rel.as_os_str().is_empty() {
        return Ok(root);
    }
    cap_primitives::fs::open_dir(&root, &b.rel).map_err(|e| {
        if e.raw_os_error() == Some(rustix::io::Errno::NOTDIR.raw_os_error()) {
            ToolError::with_hint(
                ErrorKind::InvalidArgs,
                format!("output_dir {path} is not a directory"),
                "Give an existing directory inside a directory granted to code_run.",
            )
        } else {
            io_error(what, path, &e)
        }
    })
}

/// Create the file `name` (a plain file name) in `dir` with `bytes`; never
/// replaces anything (an existing name, a symbolic link included, is
/// `invalid-args`). The file is synced before this returns.
///
/// # Errors
/// As [`read`].
pub fn create(dir: &std::fs::File, name: &str, shown: &str, bytes: &[u8]) -> Result<(), ToolError> {
    let what = "output";
    let mut o = options();
    o.write(true).create_new(true);
    o._cap_fs_ext_follow(FollowSymlinks::No);
    let mut file = cap_primitives::fs::open(dir, Path::new(name), &o)
        .map_err(|e| io_error(what, shown, &e))?;
    clear_nonblocking(&file).map_err(|e| io_error(what, shown, &e))?;
    file.write_all(bytes)
        .and_then(|()| file.sync_all())
        .map_err(|e| io_error(what, shown, &e))
}

/// What compensation found at an output's path.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Removal {
    /// It had the recorded bytes and was removed.
    Removed,
    /// Nothing there any more.
    Absent,
    /// Something else is there now (SHA-256 of what was found, or why it
    /// could not be read): left alone.
    Changed(String),
}

/// Remove the file `name` of `dir` if it still holds bytes whose SHA-256 is
/// `sha256`.
///
/// # Errors
/// An I/O error other than absence.
pub fn remove_if_unchanged(
    dir: &std::fs::File,
    name: &str,
    sha256: &str,
    max: u64,
) -> std::io::Result<Removal> {
    let mut o = options();
    o.read(true);
    o._cap_fs_ext_follow(FollowSymlinks::No);
    let mut file = match cap_primitives::fs::open(dir, Path::new(name), &o) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Removal::Absent),
        Err(e) if e.raw_os_error() == Some(rustix::io::Errno::LOOP.raw_os_error()) => {
            return Ok(Removal::Changed("a symbolic link".into()));
        }
        Err(e) => return Err(e),
    };
    if !file.metadata()?.is_file() {
        return Ok(Removal::Changed("not a regular file".into()));
    }
    clear_nonblocking(&file)?;
    let mut bytes = Vec::new();
    (&mut file).take(max + 1).read_to_end(&mut bytes)?;
    let now = sha256_hex(&bytes);
    if now != sha256 {
        return Ok(Removal::Changed(format!("sha256:{now}")));
    }
    drop(file);
    cap_primitives::fs::remove_file(dir, Path::new(name))?;
    Ok(Removal::Removed)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn preopens(dirs: &[(&str, FsPerms)]) -> BTreeMap<String, FsPerms> {
        dirs.iter().map(|(d, p)| (d.to_string(), *p)).collect()
    }

    #[test]
    fn paths_belong_to_their_longest_preopen_and_never_climb() {
        let p = preopens(&[("/w", FsPerms::ReadOnly), ("/w/out", FsPerms::ReadWrite)]);
        let b = locate(&p, "/w/out/a.csv", "input").unwrap_or_else(|e| panic!("{e:?}"));
        assert_eq!((b.root.as_path(), b.writable), (Path::new("/w/out"), true));
        let b = locate(&p, "/w/a.csv", "input").unwrap_or_else(|e| panic!("{e:?}"));
        assert!(!b.writable);
        for bad in [
            "w/a.csv",
            "/w/../etc/passwd",
            "/w/./a",
            "/etc/passwd",
            "/wx/a",
            "",
        ] {
            assert!(locate(&p, bad, "input").is_err(), "{bad:?}");
        }
    }

    #[test]
    fn links_out_fifos_and_big_files_are_refused() {
        let t = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let root = t.path().canonicalize().unwrap_or_else(|e| panic!("{e}"));
        let root_s = root.to_string_lossy().into_owned();
        std::fs::write(root.join("ok.txt"), b"hello").unwrap_or_else(|e| panic!("{e}"));
        std::os::unix::fs::symlink("/etc/passwd", root.join("out"))
            .unwrap_or_else(|e| panic!("{e}"));
        std::os::unix::fs::symlink("ok.txt", root.join("in")).unwrap_or_else(|e| panic!("{e}"));
        rustix::fs::mkfifoat(
            rustix::fs::CWD,
            root.join("q"),
            rustix::fs::Mode::from_raw_mode(0o600),
        )
        .unwrap_or_else(|e| panic!("{e}"));
        let p = preopens(&[(&root_s, FsPerms::ReadOnly)]);
        let at = |n: &str| {
            let path = format!("{root_s}/{n}");
            let b = locate(&p, &path, "input").unwrap_or_else(|e| panic!("{e:?}"));
            read(&b, &path, 1024)
        };
        assert_eq!(at("ok.txt").unwrap_or_else(|e| panic!("{e:?}")), b"hello");
        assert_eq!(at("in").unwrap_or_else(|e| panic!("{e:?}")), b"hello");
        assert_eq!(
            at("out").map_err(|e| e.kind),
            Err(ErrorKind::PermissionDenied)
        );
        assert_eq!(at("q").map_err(|e| e.kind), Err(ErrorKind::Unsupported));
        assert_eq!(at("missing").map_err(|e| e.kind), Err(ErrorKind::NotFound));
        let b =
            locate(&p, &format!("{root_s}/ok.txt"), "input").unwrap_or_else(|e| panic!("{e:?}"));
        assert_eq!(
            read(&b, "ok.txt", 2).map_err(|e| e.kind),
            Err(ErrorKind::QuotaExceeded)
        );
    }

    #[test]
    fn outputs_are_created_once_and_removed_only_while_unchanged() {
        let t = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let dir = std::fs::File::open(t.path()).unwrap_or_else(|e| panic!("{e}"));
        create(&dir, "a.csv", "a.csv", b"x,y\n").unwrap_or_else(|e| panic!("{e:?}"));
        assert_eq!(
            create(&dir, "a.csv", "a.csv", b"again").map_err(|e| e.kind),
            Err(ErrorKind::InvalidArgs)
        );
        std::os::unix::fs::symlink("/etc/passwd", t.path().join("l.csv"))
            .unwrap_or_else(|e| panic!("{e}"));
        assert!(create(&dir, "l.csv", "l.csv", b"x").is_err());
        assert_eq!(
            std::fs::read_link(t.path().join("l.csv")).ok(),
            Some(PathBuf::from("/etc/passwd"))
        );
        let sha = sha256_hex(b"x,y\n");
        std::fs::write(t.path().join("b.csv"), b"changed").unwrap_or_else(|e| panic!("{e}"));
        assert!(matches!(
            remove_if_unchanged(&dir, "b.csv", &sha, 1024),
            Ok(Removal::Changed(_))
        ));
        assert!(t.path().join("b.csv").exists());
        assert!(matches!(
            remove_if_unchanged(&dir, "l.csv", &sha, 1024),
            Ok(Removal::Changed(_))
        ));
        assert_eq!(
            remove_if_unchanged(&dir, "a.csv", &sha, 1024).ok(),
            Some(Removal::Removed)
        );
        assert_eq!(
            remove_if_unchanged(&dir, "a.csv", &sha, 1024).ok(),
            Some(Removal::Absent)
        );
    }
}
