//! Opening beneath a granted directory: the one place the host names a
//! guest's files.
//!
//! Two ways, for two purposes:
//! - **as the guest would** ([`open_nonblocking`], [`locate`]): a guest's
//!   path resolved by `cap_primitives` beneath the directory it was given
//!   (links followed while they stay beneath it, `..` never above it: the
//!   resolver Wasmtime's WASI runs), opened with `O_NONBLOCK | O_NOCTTY` so
//!   that a FIFO or a device never blocks the host;
//! - **as the host restores** ([`walk`]): a path recorded in a journal,
//!   walked from the granted directory one plain name at a time with
//!   `O_NOFOLLOW | O_DIRECTORY`, so that no symbolic link is ever followed:
//!   a directory swapped for a link between the journal and the restore is
//!   refused, never crossed. Never a plain absolute path.
//!
//! A [`RelPath`] is a path relative to a granted directory whose components
//! are plain names (no `.`, `..`, empty component, `/` or NUL).

use std::fs::File;
use std::io;
use std::os::fd::{AsFd, AsRawFd, FromRawFd, IntoRawFd, OwnedFd};
use std::path::{Path, PathBuf};

use rustix::fs::{AtFlags, FileType, Mode, OFlags};
use serde::{Deserialize, Serialize};

/// A path relative to a granted directory, each component a plain name
/// (`""` is the directory itself).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct RelPath(String);

/// Why a string is not a [`RelPath`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("`{0}` is not a plain relative path (no `.`, `..`, empty component or NUL)")]
pub struct BadRelPath(pub String);

impl RelPath {
    /// The granted directory itself.
    pub fn root() -> RelPath {
        RelPath(String::new())
    }

    /// Check `s`: components separated by single `/`, none empty, `.` or
    /// `..`, no NUL, no leading or trailing `/`.
    ///
    /// # Errors
    /// [`BadRelPath`].
    pub fn parse(s: &str) -> Result<RelPath, BadRelPath> {
        if s.is_empty() {
            return Ok(RelPath::root());
        }
        let ok = s
            .split('/')
            .all(|c| !c.is_empty() && c != "." && c != ".." && !c.contains('\0'));
        if ok {
            Ok(RelPath(s.to_string()))
        } else {
            Err(BadRelPath(s.chars().take(200).collect()))
        }
    }

    /// `self/name`.
    ///
    /// # Errors
    /// [`BadRelPath`] when `name` is not one plain name.
    pub fn join(&self, name: &str) -> Result<RelPath, BadRelPath> {
        if name.is_empty() || name == "." || name == ".." || name.contains(['/', '\0']) {
            return Err(BadRelPath(name.chars().take(200).collect()));
        }
        Ok(if self.0.is_empty() {
            RelPath(name.to_string())
        } else {
            RelPath(format!("{}/{name}", self.0))
        })
    }

    /// The parent and the last name; `None` for the directory itself.
    pub fn split(&self) -> Option<(RelPath, &str)> {
        if self.0.is_empty() {
            return None;
        }
        Some(match self.0.rsplit_once('/') {
            Some((p, n)) => (RelPath(p.to_string()), n),
            None => (RelPath::root(), self.0.as_str()),
        })
    }

    /// The components, outermost first.
    pub fn components(&self) -> impl Iterator<Item = &str> {
        self.0.split('/').filter(|c| !c.is_empty())
    }

    /// True when `self` is `other` or lies beneath it.
    pub fn is_within(&self, other: &RelPath) -> bool {
        other.0.is_empty()
            || self.0 == other.0
            || (self.0.starts_with(&other.0) && self.0.as_bytes().get(other.0.len()) == Some(&b'/'))
    }

    /// The path as text.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// Number of components.
    pub fn depth(&self) -> usize {
        self.components().count()
    }
}

impl TryFrom<String> for RelPath {
    type Error = BadRelPath;
    fn try_from(s: String) -> Result<Self, Self::Error> {
        RelPath::parse(&s)
    }
}

impl From<RelPath> for String {
    fn from(p: RelPath) -> String {
        p.0
    }
}

impl std::fmt::Display for RelPath {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

/// Open a granted directory (the operator's absolute path from the policy).
///
/// # Errors
/// The OS error.
pub fn open_root(path: &Path) -> io::Result<File> {
    let fd = rustix::fs::open(
        path,
        OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC,
        Mode::empty(),
    )?;
    Ok(File::from(fd))
}

/// Walk `rel` from `root`, one plain name at a time, never following a
/// symbolic link (`O_NOFOLLOW | O_DIRECTORY` at every step), and return the
/// directory reached (a new descriptor; `root` duplicated for `""`).
///
/// # Errors
/// `ELOOP`/`ENOTDIR` when a component is a link or not a directory,
/// `ENOENT` when one is missing.
pub fn walk(root: &File, rel: &RelPath) -> io::Result<File> {
    let mut cur = root.try_clone()?;
    for name in rel.components() {
        let fd = rustix::fs::openat(
            &cur,
            name,
            OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC,
            Mode::empty(),
        )?;
        cur = File::from(fd);
    }
    Ok(cur)
}

/// Where an opened descriptor is now: the kernel's own path of it
/// (`/proc/self/fd/N`).
///
/// # Errors
/// The OS error, or `NotFound` when the object has been deleted.
pub fn path_of(fd: &impl AsRawFd) -> io::Result<PathBuf> {
    let p = std::fs::read_link(format!("/proc/self/fd/{}", fd.as_raw_fd()))?;
    if p.to_string_lossy().ends_with(" (deleted)") || !p.is_absolute() {
        return Err(io::Error::new(
            io::ErrorKind::NotFound,
            "the directory was removed",
        ));
    }
    Ok(p)
}

/// Open options for a path opened as a guest would, without blocking:
/// `O_NONBLOCK | O_NOCTTY` (clear the non-blocking flag afterwards with
/// [`clear_nonblocking`]).
pub fn nonblocking_options() -> cap_primitives::fs::OpenOptions {
    use cap_primitives::fs::OpenOptionsExt;
    let mut o = cap_primitives::fs::OpenOptions::new();
    o._cap_fs_ext_nonblock(true);
    o.custom_flags(OFlags::NOCTTY.bits() as i32);
    o
}

/// Open `path` beneath `dir` with `opts` as the guest's resolver does
/// (`cap_primitives::fs::open`).
///
/// # Errors
/// The OS error; an escape is `PermissionDenied`.
pub fn open_nonblocking(
    dir: &File,
    path: &Path,
    opts: &cap_primitives::fs::OpenOptions,
) -> io::Result<File> {
    cap_primitives::fs::open(dir, path, opts)
}

/// Clear `O_NONBLOCK` on an opened regular file or directory.
///
/// # Errors
/// The OS error.
pub fn clear_nonblocking(file: &File) -> io::Result<()> {
    let fd = file.as_fd();
    let flags = rustix::fs::fcntl_getfl(fd)?;
    rustix::fs::fcntl_setfl(fd, flags - OFlags::NONBLOCK)?;
    Ok(())
}

/// What is at a path that is neither a regular file nor a directory nor a
/// symbolic link.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Special {
    /// A FIFO (named pipe).
    Fifo,
    /// A Unix domain socket.
    Socket,
    /// A character device.
    CharDevice,
    /// A block device.
    BlockDevice,
    /// Something else.
    Other,
}

impl Special {
    /// The special kind of `ft`, or `None` for a regular file or directory.
    pub fn of(ft: &std::fs::FileType) -> Option<Special> {
        use std::os::unix::fs::FileTypeExt;
        if ft.is_file() || ft.is_dir() {
            None
        } else if ft.is_fifo() {
            Some(Special::Fifo)
        } else if ft.is_socket() {
            Some(Special::Socket)
        } else if ft.is_char_device() {
            Some(Special::CharDevice)
        } else if ft.is_block_device() {
            Some(Special::BlockDevice)
        } else {
            Some(Special::Other)
        }
    }

    /// A short name for messages: `FIFO`, `socket`, ...
    pub fn as_str(self) -> &'static str {
        match self {
            Special::Fifo => "FIFO",
            Special::Socket => "socket",
            Special::CharDevice => "character device",
            Special::BlockDevice => "block device",
            Special::Other => "special file",
        }
    }
}

/// One granted directory a journaled call may change.
#[derive(Debug)]
pub struct Root {
    /// The directory as the policy names it (absolute): what the journal
    /// records and the restore reopens.
    pub name: String,
    /// Where the kernel says it is (links in the operator's path resolved).
    pub canonical: PathBuf,
    /// The directory, opened.
    pub dir: File,
}

/// The granted directories of a call, by policy name.
#[derive(Debug, Default)]
pub struct Roots(Vec<Root>);

impl Roots {
    /// Open each directory of `names`.
    ///
    /// # Errors
    /// The first that cannot be opened.
    pub fn open(names: &[String]) -> io::Result<Roots> {
        let mut out = Vec::with_capacity(names.len());
        for name in names {
            let dir = open_root(Path::new(name))?;
            let canonical = path_of(&dir)?;
            out.push(Root {
                name: name.clone(),
                canonical,
                dir,
            });
        }
        Ok(Roots(out))
    }

    /// The root named `name`, opened now if it is not yet.
    ///
    /// # Errors
    /// When it cannot be opened.
    pub fn get_or_open(&mut self, name: &str) -> io::Result<usize> {
        if let Some(i) = self.0.iter().position(|r| r.name == name) {
            return Ok(i);
        }
        let dir = open_root(Path::new(name))?;
        let canonical = path_of(&dir)?;
        self.0.push(Root {
            name: name.to_string(),
            canonical,
            dir,
        });
        Ok(self.0.len() - 1)
    }

    /// The root at `i`.
    pub fn at(&self, i: usize) -> Option<&Root> {
        self.0.get(i)
    }

    /// The root (index) whose canonical path is the longest prefix of
    /// `abs`, with the rest as a [`RelPath`]; `None` when `abs` lies under
    /// none of them or is not a plain path.
    pub fn containing(&self, abs: &Path) -> Option<(usize, RelPath)> {
        let (i, rest) = self
            .0
            .iter()
            .enumerate()
            .filter_map(|(i, r)| abs.strip_prefix(&r.canonical).ok().map(|rest| (i, rest)))
            .max_by_key(|(i, _)| self.0[*i].canonical.components().count())?;
        let rest = rest.to_str()?;
        Some((i, RelPath::parse(rest).ok()?))
    }

    /// True when there is no root.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

/// A path a guest's call is about to change, found beneath a granted
/// directory: the root, the path relative to it (links in the directories
/// resolved: the kernel's path), and its parent directory, reached from the
/// root by [`walk`] (no link followed).
#[derive(Debug)]
pub struct Located {
    /// Index of the root in the call's [`Roots`].
    pub root: usize,
    /// The path beneath the root.
    pub rel: RelPath,
    /// The parent directory, opened.
    pub parent: std::sync::Arc<File>,
}

impl Located {
    /// The last name of the path (`""` for a root itself).
    pub fn name(&self) -> &str {
        self.rel.split().map(|(_, n)| n).unwrap_or("")
    }
}

/// Why a path could not be located for a journal.
#[derive(Debug, thiserror::Error)]
pub enum Unlocated {
    /// The OS error the guest's own operation would meet too (missing
    /// parent, escape, loop, ...): give it to the guest, change nothing.
    #[error("{0}")]
    Io(#[from] io::Error),
    /// The path lies outside every granted directory the call may change,
    /// or its name is not UTF-8 or not a plain name.
    #[error("the path is outside the directories this call may change")]
    Outside,
    /// The final name is a symbolic link leading nowhere, and the operation
    /// would create its target: not journaled, so refused.
    #[error(
        "a symbolic link that leads nowhere cannot be written through while the host journals the call"
    )]
    Dangling,
}

/// Split a guest path into the part naming the parent directory and the
/// last name (trailing `/` dropped). The last name may be `.` or `..`.
pub(crate) fn split_guest_path(path: &str) -> (&str, &str) {
    let trimmed = path.trim_end_matches('/');
    if trimmed.is_empty() {
        return ("", if path.is_empty() { "" } else { "." });
    }
    match trimmed.rsplit_once('/') {
        Some((p, n)) => (if p.is_empty() { "/" } else { p }, n),
        None => ("", trimmed),
    }
}

/// Where `path`, as the guest names it relative to its directory `dir`,
/// lies among `roots`: the parent resolved beneath `dir` as the guest's
/// resolver does (links followed while beneath), then its kernel path
/// mapped to a root and re-walked from that root without links; when
/// `follow` and the last name is a symbolic link, the object it leads to.
///
/// # Errors
/// [`Unlocated`].
pub fn locate(roots: &Roots, dir: &File, path: &str, follow: bool) -> Result<Located, Unlocated> {
    let (parent_part, name) = split_guest_path(path);
    if name.is_empty() || name == "." || name == ".." {
        // The path names a directory by `.`/`..`: find it, then its parent.
        let opened = cap_primitives::fs::open_dir(dir, Path::new(path))?;
        return relocate(roots, &path_of(&opened)?);
    }
    let parent = if parent_part.is_empty() {
        dir.try_clone()?
    } else {
        cap_primitives::fs::open_dir(dir, Path::new(parent_part))?
    };
    let parent_abs = path_of(&parent)?;
    let (root, rel_parent) = roots.containing(&parent_abs).ok_or(Unlocated::Outside)?;
    let rel = rel_parent.join(name).map_err(|_| Unlocated::Outside)?;
    let walked = walk(&roots.0[root].dir, &rel_parent)?;
    same_object(&walked, &parent)?;
    if follow {
        let st = rustix::fs::statat(&walked, name, AtFlags::SYMLINK_NOFOLLOW);
        if let Ok(st) = st
            && FileType::from_raw_mode(st.st_mode) == FileType::Symlink
        {
            let mut o = nonblocking_options();
            o.read(true);
            return match cap_primitives::fs::open(dir, Path::new(path), &o) {
                Ok(target) => relocate(roots, &path_of(&target)?),
                Err(e) if e.kind() == io::ErrorKind::NotFound => Err(Unlocated::Dangling),
                Err(e) => Err(e.into()),
            };
        }
    }
    Ok(Located {
        root,
        rel,
        parent: std::sync::Arc::new(walked),
    })
}

/// Where an opened object (a guest's file or directory descriptor) is now
/// among `roots`; `Ok(None)` for a granted directory itself.
///
/// # Errors
/// [`Unlocated`].
pub fn locate_open(roots: &Roots, fd: &File) -> Result<Option<Located>, Unlocated> {
    let abs = path_of(fd)?;
    let (_, rel) = roots.containing(&abs).ok_or(Unlocated::Outside)?;
    if rel.as_str().is_empty() {
        return Ok(None);
    }
    relocate(roots, &abs).map(Some)
}

/// [`Located`] for an absolute kernel path.
fn relocate(roots: &Roots, abs: &Path) -> Result<Located, Unlocated> {
    let (root, rel) = roots.containing(abs).ok_or(Unlocated::Outside)?;
    let Some((rel_parent, _)) = rel.split() else {
        // A root itself: its parent is outside the grant.
        return Err(Unlocated::Outside);
    };
    let parent = std::sync::Arc::new(walk(&roots.0[root].dir, &rel_parent)?);
    Ok(Located { root, rel, parent })
}

/// Refuse (as a race) two descriptors that are not the same directory.
fn same_object(a: &File, b: &File) -> io::Result<()> {
    let (x, y) = (rustix::fs::fstat(a)?, rustix::fs::fstat(b)?);
    if (x.st_dev, x.st_ino) == (y.st_dev, y.st_ino) {
        Ok(())
    } else {
        Err(io::Error::new(
            io::ErrorKind::Interrupted,
            "the directory changed while it was being located",
        ))
    }
}

/// Duplicate a descriptor into a [`File`].
///
/// # Errors
/// The OS error.
pub fn dup(fd: &impl AsFd) -> io::Result<File> {
    let owned: OwnedFd = fd.as_fd().try_clone_to_owned()?;
    // SAFETY: `into_raw_fd` hands over an open descriptor we own.
    Ok(unsafe { File::from_raw_fd(owned.into_raw_fd()) })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rel_paths_are_plain() {
        for bad in ["/a", "a/", "a//b", "./a", "a/..", "..", "a\0b"] {
            assert!(RelPath::parse(bad).is_err(), "{bad:?}");
        }
        let p = RelPath::parse("a/b/c").unwrap();
        assert_eq!(p.split().map(|(p, n)| (p.0, n)), Some(("a/b".into(), "c")));
        assert!(p.is_within(&RelPath::parse("a/b").unwrap()));
        assert!(
            !RelPath::parse("a/bc")
                .unwrap()
                .is_within(&RelPath::parse("a/b").unwrap())
        );
        assert!(p.is_within(&RelPath::root()));
        assert!(RelPath::root().join("..").is_err());
        assert!(RelPath::root().join("a/b").is_err());
    }

    #[test]
    fn guest_paths_split_at_the_last_name() {
        assert_eq!(split_guest_path("a/b/c"), ("a/b", "c"));
        assert_eq!(split_guest_path("c"), ("", "c"));
        assert_eq!(split_guest_path("a/b/"), ("a", "b"));
        assert_eq!(split_guest_path("a/.."), ("a", ".."));
        assert_eq!(split_guest_path("/x"), ("/", "x"));
    }

    #[test]
    fn walk_never_follows_a_link() {
        let t = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(t.path().join("real/sub")).unwrap();
        std::os::unix::fs::symlink("real", t.path().join("link")).unwrap();
        let root = open_root(t.path()).unwrap();
        assert!(walk(&root, &RelPath::parse("real/sub").unwrap()).is_ok());
        let e = walk(&root, &RelPath::parse("link/sub").unwrap()).unwrap_err();
        assert!(
            matches!(e.raw_os_error(), Some(n) if n == rustix::io::Errno::LOOP.raw_os_error() || n == rustix::io::Errno::NOTDIR.raw_os_error()),
            "{e}"
        );
    }

    #[test]
    fn located_paths_are_the_kernels_and_stay_beneath() {
        let t = tempfile::tempdir().unwrap();
        let base = t.path().canonicalize().unwrap();
        let ws = base.join("ws");
        std::fs::create_dir_all(ws.join("real")).unwrap();
        std::fs::write(base.join("secret"), b"s").unwrap();
        std::os::unix::fs::symlink("real", ws.join("link")).unwrap();
        std::os::unix::fs::symlink("real/f", ws.join("flink")).unwrap();
        std::os::unix::fs::symlink("../secret", ws.join("out")).unwrap();
        let roots = Roots::open(&[ws.to_string_lossy().into_owned()]).unwrap();
        let dir = open_root(&ws).unwrap();
        let l = locate(&roots, &dir, "link/f", false).unwrap();
        assert_eq!(l.rel.as_str(), "real/f");
        let l = locate(&roots, &dir, "flink", false).unwrap();
        assert_eq!(l.rel.as_str(), "flink", "not followed");
        assert!(matches!(
            locate(&roots, &dir, "flink", true),
            Err(Unlocated::Dangling)
        ));
        std::fs::write(ws.join("real/f"), b"x").unwrap();
        assert_eq!(
            locate(&roots, &dir, "flink", true).unwrap().rel.as_str(),
            "real/f"
        );
        assert!(locate(&roots, &dir, "out", true).is_err(), "a link out");
        assert!(
            locate(&roots, &dir, "../secret", false).is_err(),
            "`..` out"
        );
        assert!(locate(&roots, &dir, "real/../../secret", false).is_err());
    }
}
