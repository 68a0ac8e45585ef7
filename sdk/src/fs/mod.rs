//! Path guard for tools: check a path against the directories granted to the
//! tool *before* touching the filesystem, so that every escape attempt gets
//! the same precise error on every toolchain.
//!
//! WASI (cap-std in the host) already confines a tool to its preopened
//! directories; this module does not replace that boundary. What it adds is a
//! uniform answer: depending on the guest's wasi-libc, a path outside the
//! grants can come back from `std::fs` as "not found", as errno 76 or as
//! "operation not permitted", and a symbolic link planted inside the grant
//! that points outside can look like a missing file. [`resolve`] turns all of
//! them into a `permission-denied` [`ToolError`] that names the path (or the
//! link) and, in its hint, the granted directories.
//!
//! ```no_run
//! use capsaga_sdk::fs::{Follow, resolve};
//! # fn f(path: &str) -> Result<(), capsaga_sdk::ToolError> {
//! // In `execute`: resolve first, then use the resolved path (never the raw
//! // one) for every filesystem call.
//! let resolved = resolve(path, Follow::Final)?;
//! let text = std::fs::read_to_string(&resolved)
//!     .map_err(|e| capsaga_sdk::ToolError::from_io(&e, path))?;
//! # let _ = text; Ok(()) }
//! ```
//!
//! # Rules
//! The host's path guard itself: this module runs the crate
//! `capsaga-path-guard`, which `capsaga check path` and the host's tests run
//! too, so what a tool gets and what the operator probes cannot disagree. In
//! short (the crate documents them in full):
//!
//! 1. The path must be non-empty, at most [`MAX_PATH_LEN`] bytes and free of
//!    NUL and control characters (`invalid-args` otherwise).
//! 2. An absolute path is resolved under each granted directory it
//!    literally starts with, most specific first; a relative path under the
//!    only granted directory (`invalid-args` when there are several). A path
//!    under no granted directory is `permission-denied`.
//! 3. Every component below the granted directory is checked for names
//!    special on some OS ([`check_component`]): `\`, `:`, a trailing dot or
//!    space, and the DOS device names `CON`, `PRN`, `AUX`, `NUL`,
//!    `COM0`-`COM9`, `LPT0`-`LPT9` with or without an extension
//!    (`invalid-args`).
//! 4. `.` is skipped; `..` removes the last *resolved* component (physical:
//!    `<link>/..` is the parent of the link's target, as the kernel and
//!    cap-std do it) and never goes above the granted directory, not even to
//!    come back (`permission-denied`).
//! 5. A symbolic link is expanded in place (the final component only with
//!    [`Follow::Final`], or when the path ends with `/`), at most
//!    [`MAX_SYMLINK_EXPANSIONS`] times (then `invalid-args`, like `ELOOP`).
//!    A link with an absolute target, or one whose target climbs above the
//!    granted directory, is `permission-denied` naming the link: WASI
//!    (cap-std) refuses to follow them, even into another granted directory.
//!
//! The result names the same file as the input but contains no `.`, `..` or
//! symbolic link (the final component excepted with [`Follow::NoFinal`]).
//! Give *that* path to `std::fs`.
//!
//! # Granted roots
//! In a component ([`granted_roots`]) they are the guest paths of the
//! preopened directories (`wasi:filesystem/preopens.get-directories`). A
//! native build (a tool's unit tests) is not sandboxed: its only root is `/`
//! unless a test sets its own with [`with_granted_roots`].

use std::path::{Path, PathBuf};

use serde_json::json;

use crate::ToolError;

mod file;
mod write;
pub use file::{Expect, FileError, FileId, GuardedFile, open_file, remove_file};
pub use write::{interrupted, write_file};

pub use capsaga_path_guard::{Follow, MAX_PATH_LEN, MAX_SYMLINK_EXPANSIONS};
use capsaga_path_guard::{FsView, Link, PathError};

// --- granted roots -------------------------------------------------------------

/// True in a wasm32-wasip2 component, where the roots are the preopens.
macro_rules! cfg_component {
    ($($item:item)*) => {
        $(#[cfg(all(target_arch = "wasm32", target_os = "wasi", target_env = "p2"))] $item)*
    };
}

/// True everywhere else (native builds, unit tests).
macro_rules! cfg_native {
    ($($item:item)*) => {
        $(#[cfg(not(all(target_arch = "wasm32", target_os = "wasi", target_env = "p2")))] $item)*
    };
}

/// The directories granted to this tool, as absolute, lexically normalised
/// paths, sorted and without duplicates.
///
/// In a component: the guest paths of the preopened directories (in capsaga
/// each grant is mounted at its own absolute host path; a preopen with a
/// relative name is ignored). The list is read once per instance; the
/// descriptors that come with it are closed at once. Natively: `/`, or what
/// the innermost [`with_granted_roots`] of this thread set.
pub fn granted_roots() -> Vec<PathBuf> {
    imp::granted_roots()
}

cfg_component! {
    mod imp {
        use std::path::PathBuf;
        use std::sync::OnceLock;

        pub(super) fn granted_roots() -> Vec<PathBuf> {
            static ROOTS: OnceLock<Vec<PathBuf>> = OnceLock::new();
            ROOTS
                .get_or_init(|| {
                    let names = wasip2::filesystem::preopens::get_directories()
                        .into_iter()
                        // Dropping the descriptor closes this handle only; the
                        // preopen itself stays open for std's wasi-libc.
                        .map(|(descriptor, name)| {
                            drop(descriptor);
                            name
                        });
                    super::normalise_roots(names)
                })
                .clone()
        }
    }
}

cfg_native! {
    mod imp {
        use std::cell::RefCell;
        use std::path::PathBuf;

        thread_local! {
            pub(super) static OVERRIDE: RefCell<Option<Vec<PathBuf>>> = const { RefCell::new(None) };
        }

        pub(super) fn granted_roots() -> Vec<PathBuf> {
            OVERRIDE
                .with(|o| o.borrow().clone())
                .unwrap_or_else(|| vec![PathBuf::from("/")])
        }
    }

    /// Runs `f` with `roots` as this thread's [`granted_roots`], as if they
    /// were the tool's preopened directories, and restores the previous roots
    /// afterwards (also when `f` panics). Only in native builds: a unit test
    /// of a tool uses it to check what the tool does with paths outside its
    /// grants. Relative roots are ignored; an empty list grants nothing.
    ///
    /// ```
    /// use capsaga_sdk::fs::{Follow, resolve, with_granted_roots};
    /// let err = with_granted_roots(["/srv/data"], || resolve("/etc/passwd", Follow::Final));
    /// assert_eq!(err.unwrap_err().kind.as_str(), "permission-denied");
    /// ```
    pub fn with_granted_roots<R, P: AsRef<std::path::Path>>(
        roots: impl IntoIterator<Item = P>,
        f: impl FnOnce() -> R,
    ) -> R {
        struct Restore(Option<Vec<PathBuf>>);
        impl Drop for Restore {
            fn drop(&mut self) {
                let previous = self.0.take();
                imp::OVERRIDE.with(|o| *o.borrow_mut() = previous);
            }
        }
        let roots = normalise_roots(
            roots
                .into_iter()
                .map(|p| p.as_ref().to_string_lossy().into_owned()),
        );
        let _restore = Restore(imp::OVERRIDE.with(|o| o.borrow_mut().replace(roots)));
        f()
    }
}

/// Absolute names normalised lexically, sorted, deduplicated.
fn normalise_roots(names: impl IntoIterator<Item = String>) -> Vec<PathBuf> {
    let mut roots: Vec<PathBuf> = names
        .into_iter()
        .filter(|n| n.starts_with('/'))
        .map(|n| to_path(&lexical(&[], &n)))
        .collect();
    roots.sort();
    roots.dedup();
    roots
}

// --- resolution ----------------------------------------------------------------

/// Resolves `path` against the directories granted to this tool
/// ([`granted_roots`]) and returns the path to use with `std::fs`. See the
/// [module documentation](self) for the rules.
///
/// # Errors
/// - `invalid-args`: empty, too long, NUL or control characters, a name
///   special on some OS, a relative path with several granted directories,
///   too many symbolic links, a link target that is not UTF-8;
/// - `permission-denied`: the path, a `..` or a symbolic link on the way
///   leads outside the granted directories. The message names the path (or
///   the link), the hint lists the granted directories, and `details` holds
///   `{"path", "granted", "link"?}`.
pub fn resolve(path: &str, follow: Follow) -> Result<PathBuf, ToolError> {
    resolve_in(&granted_roots(), path, follow)
}

/// [`resolve`] against explicit `roots` (absolute paths) instead of
/// [`granted_roots`]. Symbolic links are read from the real filesystem.
///
/// # Errors
/// As for [`resolve`].
pub fn resolve_in(
    roots: &[impl AsRef<Path>],
    path: &str,
    follow: Follow,
) -> Result<PathBuf, ToolError> {
    let roots = normalise_roots(
        roots
            .iter()
            .map(|r| r.as_ref().to_string_lossy().into_owned()),
    );
    resolve_with(&roots, path, follow, &RealFs)
}

fn resolve_with(
    roots: &[PathBuf],
    path: &str,
    follow: Follow,
    fs: &impl FsView,
) -> Result<PathBuf, ToolError> {
    let names: Vec<String> = roots.iter().map(|r| r.display().to_string()).collect();
    let refs: Vec<&str> = names.iter().map(String::as_str).collect();
    capsaga_path_guard::resolve_in_roots(&refs, path, follow, fs)
        .map(|(_, p)| p)
        .map_err(|e| {
            Messages {
                granted: &names,
                path,
            }
            .error(e)
        })
}

/// How the guard sees symbolic links in the tool: in a component, WASI
/// (cap-std) refuses to read a link whose target is absolute, which makes it
/// an unreadable link.
struct RealFs;

impl FsView for RealFs {
    fn read_link(&self, path: &Path) -> Option<PathBuf> {
        match self.link(path) {
            Link::Target(t) => Some(t),
            _ => None,
        }
    }

    fn link(&self, path: &Path) -> Link {
        match std::fs::symlink_metadata(path) {
            Ok(meta) if meta.file_type().is_symlink() => match std::fs::read_link(path) {
                Ok(t) => Link::Target(t),
                Err(e) => Link::Unreadable(e.to_string()),
            },
            _ => Link::NotALink,
        }
    }
}

/// The [`ToolError`]s of the guard's refusals, for the model.
struct Messages<'a> {
    granted: &'a [String],
    path: &'a str,
}

impl Messages<'_> {
    fn error(&self, e: PathError) -> ToolError {
        let path = self.path;
        match e {
            PathError::Empty => ToolError::invalid_args("the path is empty")
                .hint(self.hint("give the absolute path of a file or directory")),
            PathError::TooLong => ToolError::invalid_args(format!(
                "the path is {} bytes long, more than {MAX_PATH_LEN}",
                path.len()
            ))
            .hint("give a shorter path"),
            PathError::ControlCharacter => ToolError::invalid_args(format!(
                "the path {:?} contains a NUL or control character",
                shown(path)
            ))
            .hint("remove the control characters from the path"),
            PathError::SpecialName(name) => special_name_error(&name),
            PathError::AmbiguousRelative { .. } => ToolError::invalid_args(format!(
                "the path {:?} is relative, and several directories are granted",
                shown(path)
            ))
            .hint(self.hint("give an absolute path (starting with /)")),
            PathError::OutsideRoot { .. } | PathError::OutsideRoots { .. } => self.outside(),
            PathError::EscapesRoot { .. } => ToolError::permission_denied(format!(
                "{}: `..` climbs above the granted directory",
                shown(path)
            ))
            .hint(
                self.hint("remove the `..` that leave the granted directory; use an absolute path"),
            )
            .details(json!({"path": path, "granted": self.granted})),
            PathError::SymlinkEscape { link } => self.link_escape(Path::new(&link)),
            PathError::UnreadableLink { link, why } => self.unreadable_link(Path::new(&link), &why),
            PathError::TooManySymlinks => ToolError::invalid_args(format!(
                "{}: too many levels of symbolic links (more than {MAX_SYMLINK_EXPANSIONS})",
                shown(path)
            ))
            .hint("the path runs into a symbolic link loop; use another path")
            .details(json!({"path": path})),
            PathError::NotUtf8 { link } => ToolError::invalid_args(format!(
                "{}: the symbolic link {link} has a target that is not UTF-8",
                shown(path)
            ))
            .hint("use a path that does not go through this link"),
            PathError::BadRoot(root) => ToolError::invalid_args(format!(
                "the granted directory {root} is not an absolute, normalised path"
            )),
        }
    }

    /// `what` followed by the granted directories.
    fn hint(&self, what: &str) -> String {
        if self.granted.is_empty() {
            format!("{what}; note that this tool was granted no directory at all")
        } else {
            format!(
                "{what} inside one of the directories granted to this tool: {}",
                self.granted.join(", ")
            )
        }
    }

    fn outside(&self) -> ToolError {
        ToolError::permission_denied(format!(
            "{} is outside the directories granted to this tool",
            shown(self.path)
        ))
        .hint(self.hint("the path is not in a granted directory; use an absolute path"))
        .details(json!({"path": self.path, "granted": self.granted}))
    }

    fn unreadable_link(&self, link: &Path, why: &str) -> ToolError {
        ToolError::permission_denied(format!(
            "{}: the symbolic link {} cannot be followed in the sandbox: its target cannot \
             be read ({why}), as for every link with an absolute target",
            shown(self.path),
            link.display()
        ))
        .hint(
            self.hint(
                "do not go through this symbolic link; its target is not accessible. Use a path",
            ),
        )
        .details(json!({
            "path": self.path,
            "link": link.display().to_string(),
            "error": why,
            "granted": self.granted,
        }))
    }

    fn link_escape(&self, link: &Path) -> ToolError {
        ToolError::permission_denied(format!(
            "{}: the symbolic link {} points outside the directories granted to this tool",
            shown(self.path),
            link.display()
        ))
        .hint(
            self.hint(
                "do not go through this symbolic link; its target is not accessible. Use a path",
            ),
        )
        .details(json!({
            "path": self.path,
            "link": link.display().to_string(),
            "granted": self.granted,
        }))
    }
}

/// At most 200 characters of `path`, for messages.
fn shown(path: &str) -> String {
    if path.chars().count() <= 200 {
        path.to_owned()
    } else {
        let head: String = path.chars().take(200).collect();
        format!("{head}…")
    }
}

/// `target` normalised lexically: from `/` when absolute, else from `base`.
fn lexical(base: &[String], target: &str) -> Vec<String> {
    let mut out: Vec<String> = if target.starts_with('/') {
        Vec::new()
    } else {
        base.to_vec()
    };
    for c in target.split('/') {
        match c {
            "" | "." => {}
            ".." => {
                out.pop();
            }
            name => out.push(name.to_owned()),
        }
    }
    out
}

fn to_path(comps: &[String]) -> PathBuf {
    let mut p = PathBuf::from("/");
    p.extend(comps);
    p
}

/// Checks one path component for names special on some operating system, as
/// the host's path guard does (it is the same function): `\` (a separator on
/// Windows), `:` (drive letters, NTFS alternate data streams), a trailing dot
/// or space (stripped by Windows), and the DOS device names `CON`, `PRN`,
/// `AUX`, `NUL`, `CONIN$`, `CONOUT$`, `COM0`-`COM9`, `LPT0`-`LPT9` (also with
/// `¹²³`), in any case and with or without an extension (`NUL.txt`). `.` and
/// `..` are fine.
///
/// # Errors
/// `invalid-args` naming the component.
pub fn check_component(name: &str) -> Result<(), ToolError> {
    match capsaga_path_guard::check_component(name) {
        Ok(()) => Ok(()),
        Err(PathError::ControlCharacter) => {
            let shown: String = name.chars().take(100).collect();
            Err(ToolError::invalid_args(format!(
                "the path component {shown:?} contains a NUL or control character"
            ))
            .hint("remove the control characters from the path"))
        }
        Err(_) => Err(special_name_error(name)),
    }
}

fn special_name_error(name: &str) -> ToolError {
    let shown: String = name.chars().take(100).collect();
    ToolError::invalid_args(format!(
        "the path component {shown:?} is a name special on some operating systems"
    ))
    .hint(
        "choose another name: no `\\` or `:`, no trailing dot or space, and no device \
         name such as CON, PRN, AUX, NUL, COM1 or LPT1 (with or without an extension)",
    )
}

#[cfg(test)]
mod test_dir;
#[cfg(test)]
mod tests;
