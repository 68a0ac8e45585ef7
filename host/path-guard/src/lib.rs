//! # capsaga-path-guard
//!
//! The one path guard of capsaga: resolve a path under the granted
//! directories, component by component, the way cap-std resolves paths
//! beneath a directory capability (which is what Wasmtime's WASI enforces
//! for every preopen). The host (`capsaga-core`: `capsaga check path`, the
//! hostile corpus, the fuzz targets) and the tools (`capsaga-sdk`'s
//! `fs::resolve`, in the guest) run this same code, and the host's
//! differential tests compare it with cap-std on real files and with the
//! real sandbox.
//!
//! The rules (DESIGN §3, issue 13):
//!
//! 1. The input must be non-empty, at most [`MAX_PATH_LEN`] bytes, and free of
//!    NUL and control characters.
//! 2. Which granted directory ([`candidate_roots`]): an absolute path is taken
//!    under each granted directory it literally starts with (at a component
//!    boundary; `//`, `/./` or `..` before the directory's name do not
//!    count), most specific first, and the first under which it resolves
//!    wins. A relative path is relative to the granted directory when there
//!    is exactly one, and refused as ambiguous when there are several.
//! 3. Every component below the granted directory is checked for names that
//!    are special on some operating system: `\` (a separator on Windows),
//!    `:` (drive letters and NTFS alternate data streams), trailing dots or
//!    spaces (stripped by Windows), and the DOS device names `CON`, `PRN`,
//!    `AUX`, `NUL`, `COM0-9`, `LPT0-9` with or without an extension, in any
//!    case.
//! 4. `.` is skipped. `..` removes the last *resolved* component (after
//!    symlinks, as the kernel does), and may never go above the granted
//!    directory, not even to come back into it (`ws/x/../../ws/f` is refused,
//!    as cap-std refuses it).
//! 5. Each intermediate component that is a symlink is expanded in place (at
//!    most [`MAX_SYMLINK_EXPANSIONS`] times). An absolute symlink target is
//!    refused, as cap-std refuses it: it would name a place outside the
//!    capability. A relative target continues the walk and is subject to 4:
//!    a link never leads into another granted directory.
//! 6. The final component is followed too when [`Follow::Final`] is asked,
//!    and always when the path ends with `/` or `/.` (the kernel follows a
//!    link written `link/`: it must be a directory).
//!
//! The filesystem is reached only through the [`FsView`] trait, so the guard is
//! a pure function of (root, path, view): [`RealFs`] reads the host's
//! filesystem, tests and fuzzers use a map, the SDK reads the guest's.

use std::path::{Component, Path, PathBuf};

/// Longest accepted path, in bytes.
pub const MAX_PATH_LEN: usize = 4096;
/// Most symlinks expanded in one resolution (Linux's `MAXSYMLINKS` is 40).
pub const MAX_SYMLINK_EXPANSIONS: usize = 40;

/// Why a path was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PathError {
    /// Empty path.
    #[error("empty path")]
    Empty,
    /// Longer than [`MAX_PATH_LEN`].
    #[error("path longer than {MAX_PATH_LEN} bytes")]
    TooLong,
    /// A NUL or other control character.
    #[error("path contains a NUL or control character")]
    ControlCharacter,
    /// A component special on some OS.
    #[error("path component `{0}` is special on some operating systems")]
    SpecialName(String),
    /// An absolute path outside the root.
    #[error("absolute path `{path}` is outside the granted directory `{root}`")]
    OutsideRoot {
        /// The path given.
        path: String,
        /// The granted root.
        root: String,
    },
    /// `..` would climb above the root.
    #[error("`..` climbs above the granted directory `{root}`")]
    EscapesRoot {
        /// The granted root.
        root: String,
    },
    /// A symlink pointing out of the root (absolute target, or `..` above it).
    #[error("symlink `{link}` points outside the granted directory")]
    SymlinkEscape {
        /// The symlink, as a host path.
        link: String,
    },
    /// More than [`MAX_SYMLINK_EXPANSIONS`] symlinks.
    #[error("too many levels of symbolic links")]
    TooManySymlinks,
    /// The root itself is not absolute and normalised.
    #[error("granted root `{0}` is not an absolute, normalised path")]
    BadRoot(String),
    /// A relative path with several granted directories.
    #[error(
        "a relative path is ambiguous with several granted directories ({roots}): name the file by its absolute path"
    )]
    AmbiguousRelative {
        /// The granted directories.
        roots: String,
    },
    /// A relative path with no granted directory, or an absolute one under
    /// none of them.
    #[error("`{path}` is outside the granted directories ({roots})")]
    OutsideRoots {
        /// The path given.
        path: String,
        /// The granted directories (empty: none).
        roots: String,
    },
    /// A symlink whose target cannot be read (in the sandbox: every link
    /// with an absolute target).
    #[error("symlink `{link}` cannot be followed: its target cannot be read ({why})")]
    UnreadableLink {
        /// The symlink, as a path.
        link: String,
        /// The reason.
        why: String,
    },
    /// A symlink whose target is not UTF-8.
    #[error("symlink `{link}` has a target that is not UTF-8")]
    NotUtf8 {
        /// The symlink, as a path.
        link: String,
    },
}

impl PathError {
    /// A stable snake_case name of the rule that refused the path
    /// (`escapes_root`, `symlink_escape`, ...), for corpus files and `--json`
    /// output.
    pub fn kind(&self) -> &'static str {
        match self {
            PathError::Empty => "empty",
            PathError::TooLong => "too_long",
            PathError::ControlCharacter => "control_character",
            PathError::SpecialName(_) => "special_name",
            PathError::OutsideRoot { .. } => "outside_root",
            PathError::EscapesRoot { .. } => "escapes_root",
            PathError::SymlinkEscape { .. } => "symlink_escape",
            PathError::TooManySymlinks => "too_many_symlinks",
            PathError::BadRoot(_) => "bad_root",
            PathError::AmbiguousRelative { .. } => "ambiguous_relative",
            PathError::OutsideRoots { .. } => "outside_root",
            PathError::UnreadableLink { .. } => "symlink_escape",
            PathError::NotUtf8 { .. } => "control_character",
        }
    }
}

/// Whether to follow a symlink in the final component.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Follow {
    /// Follow it (open, read, stat).
    Final,
    /// Leave it (lstat, unlink, rename, readlink).
    NoFinal,
}

/// What a path is, as far as resolution cares.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Link {
    /// Not a symlink, or nothing there.
    NotALink,
    /// A symlink and its target.
    Target(PathBuf),
    /// A symlink whose target cannot be read, and why.
    Unreadable(String),
}

/// Read-only view of a filesystem, enough to resolve symlinks.
pub trait FsView {
    /// `Some(target)` when `path` is a symlink, `None` otherwise (including
    /// when it does not exist).
    fn read_link(&self, path: &Path) -> Option<PathBuf>;

    /// [`Link`] at `path`; by default from [`FsView::read_link`]. A view that
    /// can see a link it cannot read (a guest in the sandbox) overrides it.
    fn link(&self, path: &Path) -> Link {
        match self.read_link(path) {
            Some(t) => Link::Target(t),
            None => Link::NotALink,
        }
    }
}

/// The host's real filesystem.
#[derive(Debug, Clone, Copy, Default)]
pub struct RealFs;

impl FsView for RealFs {
    fn read_link(&self, path: &Path) -> Option<PathBuf> {
        let meta = std::fs::symlink_metadata(path).ok()?;
        if meta.file_type().is_symlink() {
            std::fs::read_link(path).ok()
        } else {
            None
        }
    }
}

/// A filesystem without symlinks: purely lexical resolution.
#[derive(Debug, Clone, Copy, Default)]
pub struct NoLinks;

impl FsView for NoLinks {
    fn read_link(&self, _: &Path) -> Option<PathBuf> {
        None
    }
}

/// Check one path component for names special on some operating system.
///
/// # Errors
/// [`PathError::SpecialName`] or [`PathError::ControlCharacter`].
pub fn check_component(name: &str) -> Result<(), PathError> {
    if name.chars().any(|c| c.is_control()) {
        return Err(PathError::ControlCharacter);
    }
    // `\`, `:`, trailing dots and spaces, DOS device names: the rule the
    // SDK and the host share (`capsaga-types`).
    if capsaga_types::is_special_name(name) {
        return Err(PathError::SpecialName(name.chars().take(100).collect()));
    }
    Ok(())
}

fn check_root(root: &Path) -> Result<(), PathError> {
    let s = root.to_string_lossy();
    let clean = root.is_absolute()
        && root
            .components()
            .all(|c| matches!(c, Component::RootDir | Component::Normal(_)))
        && (s == "/" || !s.ends_with('/'));
    if clean {
        Ok(())
    } else {
        Err(PathError::BadRoot(s.into_owned()))
    }
}

/// Rule 1: non-empty, at most [`MAX_PATH_LEN`] bytes, no control character.
fn check_input(path: &str) -> Result<(), PathError> {
    if path.is_empty() {
        return Err(PathError::Empty);
    }
    if path.len() > MAX_PATH_LEN {
        return Err(PathError::TooLong);
    }
    if path.chars().any(|c| c.is_control()) {
        return Err(PathError::ControlCharacter);
    }
    Ok(())
}

/// Whether the absolute `path` literally lies under `root` (an absolute,
/// normalised directory): `root` itself, or `root` followed by `/`.
pub fn literally_under(root: &str, path: &str) -> bool {
    root == "/"
        || path
            .strip_prefix(root)
            .is_some_and(|t| t.is_empty() || t.starts_with('/'))
}

/// Rule 2: the granted directories to resolve `path` under, as indices into
/// `roots` (absolute, normalised directories), in the order to try them:
/// for an absolute path every root it literally starts with, most specific
/// (longest) first; for a relative path the only root.
///
/// # Errors
/// Rule 1's errors, [`PathError::AmbiguousRelative`] for a relative path
/// with several roots, [`PathError::OutsideRoots`] when no root fits.
pub fn candidate_roots(roots: &[&str], path: &str) -> Result<Vec<usize>, PathError> {
    check_input(path)?;
    let listed = || roots.join(", ");
    if !path.starts_with('/') {
        return match roots.len() {
            1 => Ok(vec![0]),
            0 => Err(PathError::OutsideRoots {
                path: path.chars().take(200).collect(),
                roots: String::new(),
            }),
            _ => Err(PathError::AmbiguousRelative { roots: listed() }),
        };
    }
    let mut fit: Vec<usize> = (0..roots.len())
        .filter(|&i| literally_under(roots[i], path))
        .collect();
    fit.sort_by_key(|&i| std::cmp::Reverse(roots[i].len()));
    if fit.is_empty() {
        return Err(PathError::OutsideRoots {
            path: path.chars().take(200).collect(),
            roots: listed(),
        });
    }
    Ok(fit)
}

/// Rules 1 to 6 over several granted directories: `path` resolved under the
/// first of its [`candidate_roots`] that resolves it. Returns the index of
/// that root and the path it names.
///
/// # Errors
/// The [`candidate_roots`] errors, or the error of the most specific root
/// when none resolves the path.
pub fn resolve_in_roots(
    roots: &[&str],
    path: &str,
    follow: Follow,
    fs: &impl FsView,
) -> Result<(usize, PathBuf), PathError> {
    let mut first_error = None;
    for i in candidate_roots(roots, path)? {
        match resolve(Path::new(roots[i]), path, follow, fs) {
            Ok(p) => return Ok((i, p)),
            Err(e) => {
                first_error.get_or_insert(e);
            }
        }
    }
    Err(first_error.unwrap_or(PathError::Empty))
}

/// Resolve `path` under `root` and return the host path it names, which is
/// always `root` or below it.
///
/// `root` must be an absolute, normalised host path (the granted directory,
/// `~` already expanded). `path` is what the guest, the model or the policy
/// wrote: absolute (must lie under `root`) or relative to `root`.
///
/// # Errors
/// A [`PathError`] naming the first rule broken; see the module documentation.
pub fn resolve(
    root: &Path,
    path: &str,
    follow: Follow,
    fs: &impl FsView,
) -> Result<PathBuf, PathError> {
    check_root(root)?;
    check_input(path)?;
    let root_str = root.to_string_lossy().into_owned();
    let rel = relative_to_root(&root_str, path)?;

    // Pending components, processed from the end of the vector (a stack).
    let mut pending: Vec<String> = Vec::new();
    push_components(&mut pending, rel)?;
    let mut resolved: Vec<String> = Vec::new();
    let mut expansions = 0usize;

    while let Some(comp) = pending.pop() {
        match comp.as_str() {
            "" | "." => continue,
            ".." => {
                if resolved.pop().is_none() {
                    return Err(PathError::EscapesRoot { root: root_str });
                }
                continue;
            }
            _ => {}
        }
        check_component(&comp)?;
        // Rule 6: a trailing `/` or `/.` leaves components to walk, so the
        // link before it is followed whatever `follow` says.
        let is_final = pending.is_empty();
        let mut candidate = root.to_path_buf();
        candidate.extend(resolved.iter());
        candidate.push(&comp);
        let follow_this = !is_final || follow == Follow::Final;
        let link = if follow_this {
            fs.link(&candidate)
        } else {
            Link::NotALink
        };
        let shown = || candidate.to_string_lossy().into_owned();
        let target = match link {
            Link::NotALink => None,
            Link::Unreadable(why) => {
                return Err(PathError::UnreadableLink { link: shown(), why });
            }
            Link::Target(t) => Some(t),
        };
        if let Some(target) = target {
            expansions += 1;
            if expansions > MAX_SYMLINK_EXPANSIONS {
                return Err(PathError::TooManySymlinks);
            }
            let Some(target) = target.to_str().map(str::to_owned) else {
                return Err(PathError::NotUtf8 { link: shown() });
            };
            if target.starts_with('/') || target.is_empty() {
                return Err(PathError::SymlinkEscape {
                    link: candidate.to_string_lossy().into_owned(),
                });
            }
            if target.chars().any(|c| c.is_control()) {
                return Err(PathError::ControlCharacter);
            }
            // The link's target replaces it, relative to the link's directory.
            let depth_before = resolved.len();
            push_components(&mut pending, &target)?;
            // Climbing above the root through a link is an escape of the link.
            let ups = count_leading_escape(&target, depth_before);
            if ups {
                return Err(PathError::SymlinkEscape {
                    link: candidate.to_string_lossy().into_owned(),
                });
            }
            continue;
        }
        resolved.push(comp);
    }
    let mut out = root.to_path_buf();
    out.extend(resolved.iter());
    Ok(out)
}

/// `path` relative to the root `root_str`: an absolute path must literally
/// start with the root.
fn relative_to_root<'p>(root_str: &str, path: &'p str) -> Result<&'p str, PathError> {
    Ok(if path.starts_with('/') {
        let under = if root_str == "/" {
            Some(path)
        } else if literally_under(root_str, path) {
            path.strip_prefix(root_str)
        } else {
            None
        };
        match under {
            Some(t) => t,
            None => {
                // `/root/../root/x` is lexically outside until normalised; only
                // accept paths that literally start with the root.
                return Err(PathError::OutsideRoot {
                    path: path.chars().take(200).collect(),
                    root: root_str.to_string(),
                });
            }
        }
    } else {
        path
    })
}

/// Push the components of `rel` so that the first is popped first.
fn push_components(stack: &mut Vec<String>, rel: &str) -> Result<(), PathError> {
    let comps: Vec<&str> = rel.split('/').collect();
    for c in comps.into_iter().rev() {
        stack.push(c.to_string());
    }
    Ok(())
}

/// True when `target`, read from a directory at `depth` below the root, climbs
/// above the root at some point.
fn count_leading_escape(target: &str, depth: usize) -> bool {
    let mut d = depth as isize;
    for c in target.split('/') {
        match c {
            "" | "." => {}
            ".." => {
                d -= 1;
                if d < 0 {
                    return true;
                }
            }
            _ => d += 1,
        }
    }
    false
}

#[cfg(test)]
mod tests;
