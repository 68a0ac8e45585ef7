//! The shell's view of the granted directories: the real files plus the
//! script's changes, which stay in memory until the script ends.
//!
//! Every path goes through the SDK's path guard ([`capsaga_sdk::fs::resolve`])
//! before anything is looked up, so a `..` walk, an absolute path outside the
//! grants or a symbolic link leading out is refused with the same
//! `permission-denied` message as in every other tool. Writes, removals and
//! new directories are recorded in an overlay (a map from resolved path to
//! [`Node`]) that every later read, listing and glob of the script sees; the
//! real files are changed only by [`crate::commit`], after the script ended,
//! and only in `execute`. So a script stopped by a limit changes nothing, and
//! a dry run can run the whole script to say exactly what it would change.
//!
//! Symbolic links: followed when reading or writing through them (inside the
//! grants only); removing or renaming a link is refused, because shell_run
//! could not put it back.
//!
//! Dry run and execute look the same from inside the script: a dry run gets
//! every grant read-only, so nothing the script can observe depends on
//! whether a grant is writable (writes to any granted directory go to the
//! overlay in both modes; `test -w` answers from existence; messages do not
//! say "read-only"). A change under a read-only grant is refused by
//! [`crate::commit::refuse_read_only`] in `execute`, after the script and
//! before anything is changed.

mod error;
mod real;

pub use error::{FsError, FsErrorKind};
pub use real::{granted, real_stat};

use std::collections::BTreeMap;
use std::fs;
use std::ops::Bound;
use std::path::{Component, Path, PathBuf};
use std::rc::Rc;
use std::time::SystemTime;

use capsaga_sdk::ErrorKind;
use capsaga_sdk::fs::{Follow, resolve};

use error::{is_dir, too_big};

/// Largest file read or written in one piece, bytes (64 MiB).
pub const MAX_FILE_BYTES: u64 = 64 * 1024 * 1024;

/// Most bytes of changed file content held in memory at once (96 MiB).
pub const MAX_OVERLAY_BYTES: u64 = 96 * 1024 * 1024;

/// A change recorded by the script.
#[derive(Debug, Clone)]
pub enum Node {
    /// The file now has this content.
    File(Rc<Vec<u8>>),
    /// A directory; `opaque` when it replaces one that was removed, so that
    /// the real entries below are no longer visible.
    Dir {
        /// Hides the real directory's entries.
        opaque: bool,
    },
    /// Removed.
    Deleted,
}

/// What is at a path.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// A regular file.
    File,
    /// A directory.
    Dir,
    /// A symbolic link (only seen when the final link is not followed).
    Link,
    /// Anything else (device, socket...).
    Other,
}

/// Metadata of a path.
#[derive(Debug, Clone, Copy)]
pub struct Stat {
    /// Its kind.
    pub kind: Kind,
    /// Size in bytes (files).
    pub len: u64,
    /// Last modification (real files only).
    pub modified: Option<SystemTime>,
}

/// A granted directory.
#[derive(Debug, Clone)]
pub struct Root {
    /// Its absolute path (as mounted in the guest).
    pub path: PathBuf,
    /// Whether the grant allows writing.
    pub writable: bool,
}

/// Where a path's current state comes from.
enum Look<'a> {
    /// A change of the script.
    Node(&'a Node),
    /// Hidden by a change above it (a removed or replaced directory).
    Hidden,
    /// The real filesystem.
    Real,
}

/// The overlay.
#[derive(Debug)]
pub struct Vfs {
    roots: Vec<Root>,
    nodes: BTreeMap<PathBuf, Node>,
    held: u64,
}

impl Vfs {
    /// An overlay over `roots`. It behaves the same whether or not a root
    /// is writable (see the module's documentation).
    pub fn new(roots: Vec<Root>) -> Vfs {
        Vfs {
            roots,
            nodes: BTreeMap::new(),
            held: 0,
        }
    }

    /// The granted directories.
    pub fn roots(&self) -> &[Root] {
        &self.roots
    }

    /// The recorded changes, by path.
    pub fn nodes(&self) -> &BTreeMap<PathBuf, Node> {
        &self.nodes
    }

    /// Granted directories, for messages (without their writability, which
    /// a dry run cannot see).
    pub fn granted_list(&self) -> String {
        let v: Vec<String> = self
            .roots
            .iter()
            .map(|r| r.path.display().to_string())
            .collect();
        if v.is_empty() {
            "none".into()
        } else {
            v.join(", ")
        }
    }

    /// Resolves `raw` (absolute, or relative to `cwd`) inside the grants.
    ///
    /// # Errors
    /// `Denied` outside the grants (naming them), `Invalid` for malformed
    /// paths, `NotFound` below a directory the script removed.
    pub fn resolve(&self, cwd: &Path, raw: &str, follow: Follow) -> Result<PathBuf, FsError> {
        if raw.is_empty() {
            return Err(FsError::new(
                FsErrorKind::NotFound,
                "'': No such file or directory",
            ));
        }
        let joined = if raw.starts_with('/') {
            raw.to_owned()
        } else {
            format!("{}/{raw}", cwd.display())
        };
        let resolved = resolve(&joined, follow).map_err(|e| match e.kind {
            ErrorKind::PermissionDenied => FsError::new(
                FsErrorKind::Denied,
                format!(
                    "{raw}: permission denied: outside the directories granted to shell_run \
                     (granted: {})",
                    self.granted_list()
                ),
            ),
            ErrorKind::NotFound => FsError::not_found(Path::new(raw)),
            _ => FsError::new(FsErrorKind::Invalid, format!("{raw}: {}", e.message)),
        })?;
        // A real symbolic link below a directory the script removed must not
        // be followed: check the lexical path's prefixes too.
        let mut lexical = PathBuf::from("/");
        let comps: Vec<Component<'_>> = Path::new(&joined).components().collect();
        for (i, c) in comps.iter().enumerate() {
            match c {
                Component::Normal(n) => lexical.push(n),
                Component::ParentDir => {
                    lexical.pop();
                }
                _ => {}
            }
            if i + 1 < comps.len()
                && matches!(
                    self.nodes.get(&lexical),
                    Some(Node::Deleted | Node::File(_))
                )
            {
                return Err(FsError::not_found(Path::new(raw)));
            }
        }
        Ok(resolved)
    }

    /// The granted directory `p` lies in (the deepest one), if any.
    pub fn root_of(&self, p: &Path) -> Option<&Root> {
        self.roots
            .iter()
            .filter(|r| p.starts_with(&r.path))
            .max_by_key(|r| r.path.as_os_str().len())
    }

    /// True when `p` is a granted directory itself.
    pub fn is_root(&self, p: &Path) -> bool {
        self.roots.iter().any(|r| r.path == p)
    }

    fn check_write(&self, p: &Path) -> Result<(), FsError> {
        if self.root_of(p).is_none() {
            return Err(FsError::new(
                FsErrorKind::Denied,
                format!(
                    "{}: permission denied: outside the directories granted to shell_run \
                     (granted: {})",
                    p.display(),
                    self.granted_list()
                ),
            ));
        }
        Ok(())
    }

    fn lookup(&self, p: &Path) -> Look<'_> {
        if let Some(n) = self.nodes.get(p) {
            return Look::Node(n);
        }
        for anc in p.ancestors().skip(1) {
            if let Some(Node::Deleted | Node::File(_) | Node::Dir { opaque: true }) =
                self.nodes.get(anc)
            {
                return Look::Hidden;
            }
            if self.is_root(anc) {
                break;
            }
        }
        Look::Real
    }

    /// What is at `p` (a resolved path), or `None`.
    ///
    /// # Errors
    /// An I/O error other than "not found".
    pub fn stat(&self, p: &Path) -> Result<Option<Stat>, FsError> {
        match self.lookup(p) {
            Look::Node(Node::File(d)) => Ok(Some(Stat {
                kind: Kind::File,
                len: d.len() as u64,
                modified: None,
            })),
            Look::Node(Node::Dir { .. }) => Ok(Some(Stat {
                kind: Kind::Dir,
                len: 0,
                modified: None,
            })),
            Look::Node(Node::Deleted) | Look::Hidden => Ok(None),
            Look::Real => real_stat(p),
        }
    }

    /// The content of the file at `p`.
    ///
    /// # Errors
    /// `NotFound`, `IsDir`, `TooBig` (over [`MAX_FILE_BYTES`]), I/O errors.
    pub fn read(&self, p: &Path) -> Result<Rc<Vec<u8>>, FsError> {
        match self.lookup(p) {
            Look::Node(Node::File(d)) => Ok(d.clone()),
            Look::Node(Node::Dir { .. }) => Err(is_dir(p)),
            Look::Node(Node::Deleted) | Look::Hidden => Err(FsError::not_found(p)),
            Look::Real => {
                let st = real_stat(p)?.ok_or_else(|| FsError::not_found(p))?;
                match st.kind {
                    Kind::Dir => return Err(is_dir(p)),
                    Kind::File => {}
                    _ => {
                        return Err(FsError::new(
                            FsErrorKind::Unsupported,
                            format!("{}: not a regular file", p.display()),
                        ));
                    }
                }
                if st.len > MAX_FILE_BYTES {
                    return Err(too_big(p, st.len));
                }
                fs::read(p).map(Rc::new).map_err(|e| FsError::io(p, &e))
            }
        }
    }

    /// Replaces (or creates) the file at `p` with `data`.
    ///
    /// # Errors
    /// `Denied` (read-only grant), `NotFound` (no parent directory),
    /// `IsDir`, `TooBig`.
    pub fn write(&mut self, p: &Path, data: Vec<u8>) -> Result<(), FsError> {
        self.check_write(p)?;
        if self.is_root(p) {
            return Err(is_dir(p));
        }
        self.parent_dir(p)?;
        match self.stat(p)?.map(|s| s.kind) {
            Some(Kind::Dir) => return Err(is_dir(p)),
            Some(Kind::Other | Kind::Link) => {
                return Err(FsError::new(
                    FsErrorKind::Unsupported,
                    format!("{}: not a regular file", p.display()),
                ));
            }
            _ => {}
        }
        if data.len() as u64 > MAX_FILE_BYTES {
            return Err(too_big(p, data.len() as u64));
        }
        let old = match self.nodes.get(p) {
            Some(Node::File(d)) => d.len() as u64,
            _ => 0,
        };
        let held = self.held - old + data.len() as u64;
        if held > MAX_OVERLAY_BYTES {
            return Err(FsError::new(
                FsErrorKind::TooBig,
                format!(
                    "{}: the script's changed files would hold {held} bytes, more than \
                     shell_run keeps in memory ({MAX_OVERLAY_BYTES})",
                    p.display()
                ),
            ));
        }
        self.held = held;
        self.nodes
            .insert(p.to_path_buf(), Node::File(Rc::new(data)));
        Ok(())
    }

    /// Appends `data` to the file at `p` (created when missing).
    ///
    /// # Errors
    /// As for [`Vfs::write`] and [`Vfs::read`].
    pub fn append(&mut self, p: &Path, data: &[u8]) -> Result<(), FsError> {
        let mut content = match self.stat(p)? {
            Some(_) => self.read(p)?.as_ref().clone(),
            None => Vec::new(),
        };
        content.extend_from_slice(data);
        self.write(p, content)
    }

    /// Removes the file at `p` (resolved without following a final link).
    ///
    /// # Errors
    /// `NotFound`, `IsDir`, `Unsupported` for a symbolic link.
    pub fn remove_file(&mut self, p: &Path) -> Result<(), FsError> {
        self.check_write(p)?;
        match self.stat(p)?.map(|s| s.kind) {
            None => Err(FsError::not_found(p)),
            Some(Kind::Dir) => Err(is_dir(p)),
            Some(Kind::Link | Kind::Other) => Err(FsError::new(
                FsErrorKind::Unsupported,
                format!(
                    "{}: is a symbolic link or special file; shell_run does not remove those \
                     (it could not put them back)",
                    p.display()
                ),
            )),
            Some(Kind::File) => {
                if let Some(Node::File(d)) = self.nodes.get(p) {
                    self.held -= d.len() as u64;
                }
                self.nodes.insert(p.to_path_buf(), Node::Deleted);
                Ok(())
            }
        }
    }

    /// Creates the directory `p` (its parent must exist).
    ///
    /// # Errors
    /// `Exists`, `NotFound` (no parent), `Denied`.
    pub fn mkdir(&mut self, p: &Path) -> Result<(), FsError> {
        self.check_write(p)?;
        if self.stat(p)?.is_some() || self.is_root(p) {
            return Err(FsError::new(
                FsErrorKind::Exists,
                format!("{}: File exists", p.display()),
            ));
        }
        self.parent_dir(p)?;
        let opaque = fs::symlink_metadata(p).is_ok();
        self.nodes.insert(p.to_path_buf(), Node::Dir { opaque });
        Ok(())
    }

    /// Removes the empty directory `p`.
    ///
    /// # Errors
    /// `NotFound`, `NotDir`, `NotEmpty`, `Denied` for a granted directory.
    pub fn rmdir(&mut self, p: &Path) -> Result<(), FsError> {
        self.check_write(p)?;
        if self.is_root(p) {
            return Err(FsError::new(
                FsErrorKind::Denied,
                format!(
                    "{}: is a granted directory itself; shell_run does not remove it",
                    p.display()
                ),
            ));
        }
        match self.stat(p)?.map(|s| s.kind) {
            None => return Err(FsError::not_found(p)),
            Some(Kind::Dir) => {}
            Some(_) => {
                return Err(FsError::new(
                    FsErrorKind::NotDir,
                    format!("{}: Not a directory", p.display()),
                ));
            }
        }
        if !self.list(p)?.is_empty() {
            return Err(FsError::new(
                FsErrorKind::NotEmpty,
                format!("{}: Directory not empty", p.display()),
            ));
        }
        self.nodes.insert(p.to_path_buf(), Node::Deleted);
        Ok(())
    }

    /// The entries of the directory `p`, sorted by name.
    ///
    /// # Errors
    /// `NotFound`, `NotDir`, I/O errors.
    pub fn list(&self, p: &Path) -> Result<Vec<(String, Kind)>, FsError> {
        match self.stat(p)?.map(|s| s.kind) {
            None => return Err(FsError::not_found(p)),
            Some(Kind::Dir) => {}
            Some(_) => {
                return Err(FsError::new(
                    FsErrorKind::NotDir,
                    format!("{}: Not a directory", p.display()),
                ));
            }
        }
        let mut out = BTreeMap::new();
        // A directory the script made exists only in the overlay unless it
        // is a transparent one over a real directory.
        let see_real = match self.lookup(p) {
            Look::Real => true,
            Look::Node(Node::Dir { opaque: false }) => {
                matches!(real_stat(p)?, Some(s) if s.kind == Kind::Dir)
            }
            _ => false,
        };
        if see_real {
            let rd = fs::read_dir(p).map_err(|e| FsError::io(p, &e))?;
            for e in rd {
                let e = e.map_err(|e| FsError::io(p, &e))?;
                let name = e.file_name().to_string_lossy().into_owned();
                if self.nodes.contains_key(&p.join(&name)) {
                    continue;
                }
                let kind = match e.file_type() {
                    Ok(t) if t.is_symlink() => Kind::Link,
                    Ok(t) if t.is_dir() => Kind::Dir,
                    Ok(t) if t.is_file() => Kind::File,
                    _ => Kind::Other,
                };
                out.insert(name, kind);
            }
        }
        let below = self
            .nodes
            .range::<Path, _>((Bound::Excluded(p), Bound::Unbounded))
            .take_while(|(k, _)| k.starts_with(p));
        for (k, node) in below {
            if k.parent() != Some(p) {
                continue;
            }
            let Some(name) = k.file_name() else { continue };
            let kind = match node {
                Node::File(_) => Kind::File,
                Node::Dir { .. } => Kind::Dir,
                Node::Deleted => continue,
            };
            out.insert(name.to_string_lossy().into_owned(), kind);
        }
        Ok(out.into_iter().collect())
    }

    fn parent_dir(&self, p: &Path) -> Result<(), FsError> {
        let parent = p.parent().unwrap_or(Path::new("/"));
        match self.stat(parent)?.map(|s| s.kind) {
            Some(Kind::Dir) => Ok(()),
            None => Err(FsError::not_found(p)),
            Some(_) => Err(FsError::new(
                FsErrorKind::NotDir,
                format!("{}: Not a directory", parent.display()),
            )),
        }
    }
}
