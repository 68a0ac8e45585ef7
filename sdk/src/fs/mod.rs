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
//! The same as the host's path guard (`capsaga-core`'s `path_guard`), for
//! several roots at once, each mounted at its own absolute path:
//!
//! 1. The path must be non-empty, at most [`MAX_PATH_LEN`] bytes, free of NUL
//!    and control characters, and absolute (`invalid-args` otherwise).
//! 2. Every component below or beside the granted roots is checked for names
//!    special on some operating system ([`check_component`]): `\`, `:`,
//!    a trailing dot or space, and the DOS device names `CON`, `PRN`, `AUX`,
//!    `NUL`, `COM0`-`COM9`, `LPT0`-`LPT9` with or without an extension
//!    (`invalid-args`).
//! 3. `.` is skipped; `..` removes the last *resolved* component. Before any
//!    symbolic link this is plain lexical normalisation; after a link it is
//!    physical: `<link>/..` is the parent of the link's target, as the kernel
//!    and cap-std do it.
//! 4. Each component strictly inside a granted root is looked at with
//!    `symlink_metadata`; a symbolic link is expanded in place (the final
//!    component only with [`Follow::Final`]), at most
//!    [`MAX_SYMLINK_EXPANSIONS`] times (then `invalid-args`, like `ELOOP`).
//!    The target (absolute, or relative to the link's directory) is
//!    normalised lexically and must lie in a granted root, otherwise the
//!    result is `permission-denied` naming the link. A link whose target
//!    cannot be read is `permission-denied` naming the link too. In a
//!    component that is every link with an *absolute* target: WASI (cap-std)
//!    refuses to read those, so they cannot be followed there even when they
//!    point inside the grants. Natively an absolute target inside the roots is
//!    followed.
//! 5. The result must lie in a granted root (the root itself included),
//!    otherwise `permission-denied`: "`<path>` is outside the directories
//!    granted to this tool".
//!
//! Paths outside every root are resolved lexically only: the guest cannot see
//! them, so it cannot (and need not) follow links there.
//!
//! The result names the same file as the input but contains no `.`, `..` or
//! symbolic link (the final component excepted with [`Follow::NoFinal`]).
//! Give *that* path to `std::fs`: the raw path may still contain `..` walks
//! that WASI refuses or resolves differently.
//!
//! # Granted roots
//! In a component ([`granted_roots`]) they are the guest paths of the
//! preopened directories (`wasi:filesystem/preopens.get-directories`). A
//! native build (a tool's unit tests) is not sandboxed: its only root is `/`
//! unless a test sets its own with [`with_granted_roots`].

use std::path::{Path, PathBuf};

use serde_json::json;

use crate::ToolError;

/// Longest accepted path, in bytes (the host's limit).
pub const MAX_PATH_LEN: usize = 4096;

/// Most symbolic links expanded in one resolution (Linux's `MAXSYMLINKS`).
pub const MAX_SYMLINK_EXPANSIONS: usize = 40;

/// Whether [`resolve`] follows a symbolic link in the final component.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Follow {
    /// Follow it: for opening, reading, listing, `metadata`.
    Final,
    /// Leave it: for `symlink_metadata`, removing, renaming over it, or
    /// `read_link`. Links in the middle of the path are still followed, and
    /// the final link itself must lie in a granted root.
    NoFinal,
}

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
/// - `invalid-args`: empty, too long, NUL or control characters, relative,
///   a name special on some OS, too many symbolic links, a link target that
///   is not UTF-8;
/// - `permission-denied`: the path, or a symbolic link on the way, leads
///   outside the granted directories. The message names the path (or the
///   link), the hint lists the granted directories, and `details` holds
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
    let mut roots: Vec<Vec<String>> = roots
        .iter()
        .map(|r| r.as_ref().to_string_lossy().into_owned())
        .filter(|r| r.starts_with('/'))
        .map(|r| lexical(&[], &r))
        .collect();
    roots.sort();
    roots.dedup();
    Guard {
        roots: &roots,
        path,
    }
    .resolve(follow, &RealFs)
}

/// How the guard sees symbolic links; [`RealFs`] outside tests.
trait LinkView {
    /// `None` when `path` is not a symbolic link (including when it does not
    /// exist or cannot be examined), `Some(Ok(target))` for a link,
    /// `Some(Err(why))` for a link whose target cannot be read.
    fn read_link(&self, path: &Path) -> Option<Result<PathBuf, String>>;
}

struct RealFs;

impl LinkView for RealFs {
    fn read_link(&self, path: &Path) -> Option<Result<PathBuf, String>> {
        let meta = std::fs::symlink_metadata(path).ok()?;
        if meta.file_type().is_symlink() {
            // In a component, WASI (cap-std) refuses to read a link whose
            // target is absolute: such a link cannot be followed there.
            Some(std::fs::read_link(path).map_err(|e| e.to_string()))
        } else {
            None
        }
    }
}

/// Where a resolved prefix lies relative to the roots.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Place {
    /// A root itself.
    Root,
    /// Strictly inside a root (and not itself a root).
    Inside,
    /// An ancestor of a root (e.g. `/`): on the way in, not granted itself.
    Above,
    /// None of the above.
    Outside,
}

struct Guard<'a> {
    roots: &'a [Vec<String>],
    path: &'a str,
}

impl Guard<'_> {
    fn place(&self, comps: &[String]) -> Place {
        let mut place = Place::Outside;
        for root in self.roots {
            if comps == root.as_slice() {
                return Place::Root;
            }
            if comps.starts_with(root) {
                place = Place::Inside;
            } else if place == Place::Outside && root.starts_with(comps) {
                place = Place::Above;
            }
        }
        place
    }

    fn granted(&self, comps: &[String]) -> bool {
        matches!(self.place(comps), Place::Root | Place::Inside)
    }

    fn resolve(&self, follow: Follow, fs: &impl LinkView) -> Result<PathBuf, ToolError> {
        let path = self.path;
        if path.is_empty() {
            return Err(ToolError::invalid_args("the path is empty")
                .hint(self.hint("give the absolute path of a file or directory")));
        }
        if path.len() > MAX_PATH_LEN {
            return Err(ToolError::invalid_args(format!(
                "the path is {} bytes long, more than {MAX_PATH_LEN}",
                path.len()
            ))
            .hint("give a shorter path"));
        }
        if path.chars().any(char::is_control) {
            return Err(ToolError::invalid_args(format!(
                "the path {:?} contains a NUL or control character",
                shown(path)
            ))
            .hint("remove the control characters from the path"));
        }
        if !path.starts_with('/') {
            return Err(ToolError::invalid_args(format!(
                "the path {:?} is not absolute",
                shown(path)
            ))
            .hint(self.hint("give an absolute path (starting with /)")));
        }

        // Components still to walk, the next one last (a stack).
        let mut pending: Vec<String> = Vec::new();
        push_components(&mut pending, path);
        // The walk so far, from `/`: never holds "", "." or "..".
        let mut resolved: Vec<String> = Vec::new();
        let mut expansions = 0usize;

        while let Some(comp) = pending.pop() {
            match comp.as_str() {
                "" | "." => continue,
                ".." => {
                    resolved.pop();
                    continue;
                }
                _ => {}
            }
            resolved.push(comp);
            let place = self.place(&resolved);
            if !matches!(place, Place::Root | Place::Above) {
                check_component(resolved.last().map_or("", String::as_str))?;
            }
            let is_final = pending.iter().all(|c| c.is_empty() || c == ".");
            if place != Place::Inside || (is_final && follow == Follow::NoFinal) {
                continue;
            }
            let link = to_path(&resolved);
            let target = match fs.read_link(&link) {
                None => continue,
                Some(Ok(target)) => target,
                Some(Err(why)) => return Err(self.unreadable_link(&link, &why)),
            };
            expansions += 1;
            if expansions > MAX_SYMLINK_EXPANSIONS {
                return Err(ToolError::invalid_args(format!(
                    "{}: too many levels of symbolic links (more than {MAX_SYMLINK_EXPANSIONS}, \
                     at {})",
                    shown(path),
                    link.display()
                ))
                .hint("the path runs into a symbolic link loop; use another path")
                .details(json!({"path": path, "link": link.display().to_string()})));
            }
            let Some(target) = target.to_str() else {
                return Err(ToolError::invalid_args(format!(
                    "{}: the symbolic link {} has a target that is not UTF-8",
                    shown(path),
                    link.display()
                ))
                .hint("use a path that does not go through this link"));
            };
            if target.chars().any(char::is_control) {
                return Err(ToolError::invalid_args(format!(
                    "{}: the target of the symbolic link {} contains a control character",
                    shown(path),
                    link.display()
                ))
                .hint("use a path that does not go through this link"));
            }
            resolved.pop();
            let destination = lexical(&resolved, target);
            if target.is_empty() || !self.granted(&destination) {
                return Err(self.link_escape(&link));
            }
            if target.starts_with('/') {
                resolved.clear();
            }
            push_components(&mut pending, target);
        }
        if !self.granted(&resolved) {
            return Err(self.outside());
        }
        Ok(to_path(&resolved))
    }

    fn granted_list(&self) -> Vec<String> {
        self.roots
            .iter()
            .map(|r| to_path(r).display().to_string())
            .collect()
    }

    /// `what` followed by the granted directories.
    fn hint(&self, what: &str) -> String {
        let granted = self.granted_list();
        if granted.is_empty() {
            format!("{what}; note that this tool was granted no directory at all")
        } else {
            format!(
                "{what} inside one of the directories granted to this tool: {}",
                granted.join(", ")
            )
        }
    }

    fn outside(&self) -> ToolError {
        ToolError::permission_denied(format!(
            "{} is outside the directories granted to this tool",
            shown(self.path)
        ))
        .hint(self.hint(
            "the path (after resolving `..`) is not in a granted directory; use an absolute path",
        ))
        .details(json!({"path": self.path, "granted": self.granted_list()}))
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
            "granted": self.granted_list(),
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
            "granted": self.granted_list(),
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

/// Pushes the components of `rel` so that the first is popped first.
fn push_components(stack: &mut Vec<String>, rel: &str) {
    stack.extend(rel.split('/').rev().map(str::to_owned));
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
/// the host's path guard does: `\` (a separator on Windows), `:` (drive
/// letters, NTFS alternate data streams), a trailing dot or space (stripped by
/// Windows), and the DOS device names `CON`, `PRN`, `AUX`, `NUL`, `CONIN$`,
/// `CONOUT$`, `COM0`-`COM9`, `LPT0`-`LPT9` (also with `¹²³`), in any case and
/// with or without an extension (`NUL.txt`). `.` and `..` are fine.
///
/// # Errors
/// `invalid-args` naming the component.
pub fn check_component(name: &str) -> Result<(), ToolError> {
    let shown: String = name.chars().take(100).collect();
    if name.chars().any(char::is_control) {
        return Err(ToolError::invalid_args(format!(
            "the path component {shown:?} contains a NUL or control character"
        ))
        .hint("remove the control characters from the path"));
    }
    if special_name(name) {
        return Err(ToolError::invalid_args(format!(
            "the path component {shown:?} is a name special on some operating systems"
        ))
        .hint(
            "choose another name: no `\\` or `:`, no trailing dot or space, and no device \
             name such as CON, PRN, AUX, NUL, COM1 or LPT1 (with or without an extension)",
        ));
    }
    Ok(())
}

/// The rule is shared with the host's path guard (`capsaga_types::names`).
fn special_name(name: &str) -> bool {
    capsaga_types::is_special_name(name)
}

#[cfg(test)]
mod tests;
