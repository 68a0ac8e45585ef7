//! Path guard: resolve a path under a granted root, component by component,
//! the way cap-std resolves paths inside a directory capability.
//!
//! The host never hands a raw path to the operating system on a tool's behalf:
//! it resolves it here first. The rules (DESIGN §3):
//!
//! 1. The input must be non-empty, at most [`MAX_PATH_LEN`] bytes, and free of
//!    NUL and control characters.
//! 2. Every component is checked for names that are special on some operating
//!    system: `\` (a separator on Windows), `:` (drive letters and NTFS
//!    alternate data streams), trailing dots or spaces (stripped by Windows),
//!    and the DOS device names `CON`, `PRN`, `AUX`, `NUL`, `COM0-9`, `LPT0-9`
//!    with or without an extension, in any case.
//! 3. An absolute input must lie under the root; a relative input is taken
//!    relative to the root.
//! 4. `.` is skipped. `..` removes the last *resolved* component (after
//!    symlinks, as the kernel does), and refusing to go above the root.
//! 5. Each intermediate component that is a symlink is expanded in place (at
//!    most [`MAX_SYMLINK_EXPANSIONS`] times). An absolute symlink target is
//!    refused, as cap-std refuses it: it would name a place outside the
//!    capability. A relative target continues the walk and is subject to 4.
//! 6. The final component is followed too when [`Follow::Final`] is asked.
//!
//! The filesystem is reached only through the [`FsView`] trait, so the guard is
//! a pure function of (root, path, view): [`RealFs`] reads the host's
//! filesystem, tests and fuzzers use a map.

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

/// Read-only view of a filesystem, enough to resolve symlinks.
pub trait FsView {
    /// `Some(target)` when `path` is a symlink, `None` otherwise (including
    /// when it does not exist).
    fn read_link(&self, path: &Path) -> Option<PathBuf>;
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
    // `\`, `:`, trailing dots and spaces, DOS device names: one rule, shared
    // with the SDK's guard.
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
    if path.is_empty() {
        return Err(PathError::Empty);
    }
    if path.len() > MAX_PATH_LEN {
        return Err(PathError::TooLong);
    }
    if path.chars().any(|c| c.is_control()) {
        return Err(PathError::ControlCharacter);
    }
    let root_str = root.to_string_lossy().into_owned();
    let rel: &str = if path.starts_with('/') {
        let under = if root_str == "/" {
            Some(path)
        } else {
            path.strip_prefix(root_str.as_str())
                .filter(|t| t.is_empty() || t.starts_with('/'))
        };
        match under {
            Some(t) => t,
            None => {
                // `/root/../root/x` is lexically outside until normalised; only
                // accept paths that literally start with the root.
                return Err(PathError::OutsideRoot {
                    path: path.chars().take(200).collect(),
                    root: root_str,
                });
            }
        }
    } else {
        path
    };

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
        let is_final = pending.iter().all(|c| c.is_empty() || c == ".");
        let mut candidate = root.to_path_buf();
        candidate.extend(resolved.iter());
        candidate.push(&comp);
        let follow_this = !is_final || follow == Follow::Final;
        if follow_this && let Some(target) = fs.read_link(&candidate) {
            expansions += 1;
            if expansions > MAX_SYMLINK_EXPANSIONS {
                return Err(PathError::TooManySymlinks);
            }
            let target = target.to_string_lossy().into_owned();
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
mod tests {
    use super::*;
    use std::collections::HashMap;

    struct MapFs(HashMap<PathBuf, PathBuf>);
    impl FsView for MapFs {
        fn read_link(&self, p: &Path) -> Option<PathBuf> {
            self.0.get(p).cloned()
        }
    }
    fn links(v: &[(&str, &str)]) -> MapFs {
        MapFs(
            v.iter()
                .map(|(a, b)| (PathBuf::from(a), PathBuf::from(b)))
                .collect(),
        )
    }
    fn r(path: &str, fs: &impl FsView) -> Result<PathBuf, PathError> {
        resolve(Path::new("/ws"), path, Follow::Final, fs)
    }

    #[test]
    fn plain_paths() {
        assert_eq!(
            r("a/b.txt", &NoLinks).unwrap(),
            PathBuf::from("/ws/a/b.txt")
        );
        assert_eq!(r("/ws/a/./b", &NoLinks).unwrap(), PathBuf::from("/ws/a/b"));
        assert_eq!(r("/ws", &NoLinks).unwrap(), PathBuf::from("/ws"));
        assert_eq!(r("a/../b", &NoLinks).unwrap(), PathBuf::from("/ws/b"));
        assert_eq!(r("a//b/", &NoLinks).unwrap(), PathBuf::from("/ws/a/b"));
    }

    #[test]
    fn escapes_refused() {
        assert!(matches!(
            r("..", &NoLinks),
            Err(PathError::EscapesRoot { .. })
        ));
        assert!(matches!(
            r("a/../../etc/passwd", &NoLinks),
            Err(PathError::EscapesRoot { .. })
        ));
        assert!(matches!(
            r("/etc/passwd", &NoLinks),
            Err(PathError::OutsideRoot { .. })
        ));
        assert!(matches!(
            r("/wsx/a", &NoLinks),
            Err(PathError::OutsideRoot { .. })
        ));
        assert!(matches!(
            r("/ws/../etc", &NoLinks),
            Err(PathError::EscapesRoot { .. })
        ));
        assert!(matches!(
            r("a\0b", &NoLinks),
            Err(PathError::ControlCharacter)
        ));
        assert!(matches!(r("", &NoLinks), Err(PathError::Empty)));
    }

    #[test]
    fn special_names_refused() {
        for bad in [
            "CON", "nul.txt", "Com1", "lpt9.log", "a:stream", "a\\b", "trail.", "trail ", "COM¹",
        ] {
            assert!(
                matches!(r(bad, &NoLinks), Err(PathError::SpecialName(_))),
                "{bad}"
            );
        }
        for fine in ["console", "com10", "nullable", ".hidden", "a.b.c"] {
            assert!(r(fine, &NoLinks).is_ok(), "{fine}");
        }
    }

    #[test]
    fn symlinks_followed_inside_refused_outside() {
        let fs = links(&[
            ("/ws/in", "sub/target"),
            ("/ws/abs", "/etc"),
            ("/ws/up", "../etc"),
            ("/ws/sub/deep", "../../outside"),
            ("/ws/sub/ok", "../other"),
            ("/ws/loop", "loop"),
        ]);
        assert_eq!(r("in", &fs).unwrap(), PathBuf::from("/ws/sub/target"));
        assert!(matches!(
            r("abs/passwd", &fs),
            Err(PathError::SymlinkEscape { .. })
        ));
        assert!(matches!(
            r("up/passwd", &fs),
            Err(PathError::SymlinkEscape { .. })
        ));
        assert!(matches!(
            r("sub/deep", &fs),
            Err(PathError::SymlinkEscape { .. })
        ));
        assert_eq!(r("sub/ok/x", &fs).unwrap(), PathBuf::from("/ws/other/x"));
        assert!(matches!(r("loop", &fs), Err(PathError::TooManySymlinks)));
        // Not following the final component leaves the link itself.
        assert_eq!(
            resolve(Path::new("/ws"), "abs", Follow::NoFinal, &fs).unwrap(),
            PathBuf::from("/ws/abs")
        );
    }

    #[test]
    fn dotdot_after_symlink_is_physical() {
        // /ws/l -> a/b ; "l/.." is /ws/a (physical), not /ws (lexical).
        let fs = links(&[("/ws/l", "a/b")]);
        assert_eq!(r("l/../c", &fs).unwrap(), PathBuf::from("/ws/a/c"));
    }

    #[test]
    fn bad_roots() {
        assert!(resolve(Path::new("ws"), "a", Follow::Final, &NoLinks).is_err());
        assert!(resolve(Path::new("/ws/../x"), "a", Follow::Final, &NoLinks).is_err());
        assert!(resolve(Path::new("/"), "etc/x", Follow::Final, &NoLinks).is_ok());
    }

    #[test]
    fn real_fs_symlink_escape() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("root");
        std::fs::create_dir(&root).unwrap();
        std::os::unix::fs::symlink("/etc", root.join("etc")).unwrap();
        std::os::unix::fs::symlink("../", root.join("parent")).unwrap();
        let root_c = root.canonicalize().unwrap();
        assert!(resolve(&root_c, "etc/passwd", Follow::Final, &RealFs).is_err());
        assert!(resolve(&root_c, "parent/x", Follow::Final, &RealFs).is_err());
        assert!(resolve(&root_c, "plain.txt", Follow::Final, &RealFs).is_ok());
    }

    proptest::proptest! {
        #[test]
        fn result_always_under_root(path in "[a-z./]{0,30}") {
            let fs = links(&[("/ws/a", "../b"), ("/ws/b", "a/..")]);
            if let Ok(p) = r(&path, &fs) {
                proptest::prop_assert!(p.starts_with("/ws"));
                proptest::prop_assert!(!p.components().any(|c| matches!(c, Component::ParentDir | Component::CurDir)));
            }
        }
    }
}
