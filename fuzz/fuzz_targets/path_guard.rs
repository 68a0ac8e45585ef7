//! The path guard against the real filesystem.
//!
//! Each input builds a small real tree under a fresh granted root (plain
//! directories, files, and symlinks with arbitrary targets, some leading out
//! to a sibling `outside/` holding a secret), then resolves an arbitrary path
//! with `capsaga_core::path_guard::resolve` over `RealFs`, following the
//! final component and not.
//!
//! Properties:
//! 1. An accepted path lies under the root and has no `.` or `..` component.
//! 2. When the accepted path exists, the kernel's own resolution of it
//!    (`canonicalize`) lies under the canonical root (for `NoFinal`, that of
//!    its directory).
//! 3. When cap-std (the resolution Wasmtime's WASI uses) refuses the path as
//!    an escape, the guard refuses it too.
//! 4. When both the guard and cap-std resolve the path to an existing file,
//!    it is the same file (device and inode).
//! 5. The guard never panics.
#![no_main]

use cap_std::ambient_authority;
use cap_std::fs::{Dir, MetadataExt as _};
use capsaga_core::path_guard::{Follow, RealFs, resolve};
use libfuzzer_sys::arbitrary::{self, Arbitrary, Unstructured};
use libfuzzer_sys::fuzz_target;
use std::os::unix::fs::MetadataExt;
use std::path::{Component, Path, PathBuf};
use std::sync::OnceLock;

/// Names the tree and the paths are built from: short, colliding, and the
/// special ones.
const NAMES: &[&str] = &[
    "a", "b", "c", "d", "..", ".", "", "outside", "secret", "a.txt", "CON", "x:y", "l",
];

#[derive(Debug, Arbitrary)]
enum Entry {
    Dir(Vec<u8>),
    File(Vec<u8>),
    Link(Vec<u8>, Target),
}

#[derive(Debug, Arbitrary)]
enum Target {
    /// Built from NAMES, relative.
    Names(Vec<u8>),
    /// `../outside/...`: out of the root.
    Outside(Vec<u8>),
    /// An absolute path inside the root.
    AbsoluteInside(Vec<u8>),
    /// Raw text.
    Raw(String),
}

#[derive(Debug, Arbitrary)]
struct Input {
    entries: Vec<Entry>,
    path: PathSpec,
}

#[derive(Debug, Arbitrary)]
enum PathSpec {
    Names(Vec<u8>, bool),
    Raw(String),
}

fn join_names(ix: &[u8]) -> String {
    ix.iter()
        .take(8)
        .map(|i| NAMES[*i as usize % NAMES.len()])
        .collect::<Vec<_>>()
        .join("/")
}

/// The per-process base: `base/root` is rebuilt for each input,
/// `base/outside/secret` stays.
fn base() -> &'static PathBuf {
    static BASE: OnceLock<PathBuf> = OnceLock::new();
    BASE.get_or_init(|| {
        let dir = tempfile::Builder::new()
            .prefix("capsaga-fuzz-path")
            .tempdir()
            .expect("tempdir")
            .keep();
        let base = dir.canonicalize().expect("canonical base");
        std::fs::create_dir_all(base.join("outside")).expect("outside");
        std::fs::write(base.join("outside/secret"), "secret").expect("secret");
        base
    })
}

fn build(root: &Path, entries: &[Entry]) {
    let _ = std::fs::remove_dir_all(root);
    std::fs::create_dir(root).expect("root");
    for e in entries.iter().take(12) {
        match e {
            Entry::Dir(n) => {
                let _ = std::fs::create_dir_all(root.join(join_names(n)));
            }
            Entry::File(n) => {
                let _ = std::fs::write(root.join(join_names(n)), "f");
            }
            Entry::Link(n, t) => {
                let target = match t {
                    Target::Names(ix) => join_names(ix),
                    Target::Outside(ix) => format!("../outside/{}", join_names(ix)),
                    Target::AbsoluteInside(ix) => format!("{}/{}", root.display(), join_names(ix)),
                    Target::Raw(s) => s.chars().filter(|c| *c != '\0').take(200).collect(),
                };
                if target.is_empty() {
                    continue;
                }
                let _ = std::os::unix::fs::symlink(target, root.join(join_names(n)));
            }
        }
    }
}

fn normalised(p: &Path) -> bool {
    p.components()
        .all(|c| matches!(c, Component::RootDir | Component::Normal(_)))
}

/// Whether the last name of `path` is followed whatever `Follow` says:
/// only separators and `.` come after it (path_resolution(7): a trailing
/// `/` forces the resolution of the component before it).
fn follows_anyway(path: &str) -> bool {
    let mut segments: Vec<&str> = path.split('/').collect();
    let mut dropped = false;
    while segments.len() > 1 && matches!(segments.last(), Some(&"" | &".")) {
        segments.pop();
        dropped = true;
    }
    dropped && !matches!(segments.last(), Some(&"" | &"." | &".."))
}

fn is_escape(e: &std::io::Error) -> bool {
    // cap-std reports "a path led outside of the filesystem" as
    // PermissionDenied.
    e.kind() == std::io::ErrorKind::PermissionDenied
}

fuzz_target!(|data: &[u8]| {
    let mut u = Unstructured::new(data);
    let Ok(input) = Input::arbitrary(&mut u) else {
        return;
    };
    let root = base().join("root");
    build(&root, &input.entries);
    let path = match &input.path {
        PathSpec::Names(ix, absolute) => {
            let rel = join_names(ix);
            if *absolute {
                format!("{}/{rel}", root.display())
            } else {
                rel
            }
        }
        PathSpec::Raw(s) => s.chars().take(300).collect(),
    };
    let dir = Dir::open_ambient_dir(&root, ambient_authority()).expect("open root");
    // cap-std takes paths relative to the directory: `<root>`, `<root>/x`
    // and `<root>//x` are the root and x in it (repeated slashes are one
    // separator); `<root>x` is another directory.
    let rel_for_cap: Option<&str> =
        if let Some(r) = path.strip_prefix(root.to_str().unwrap_or("\0")) {
            if r.is_empty() {
                Some(".")
            } else if r.starts_with('/') {
                let r = r.trim_start_matches('/');
                Some(if r.is_empty() { "." } else { r })
            } else {
                None
            }
        } else if path.starts_with('/') || path.is_empty() || path.contains('\0') {
            None
        } else {
            Some(path.as_str())
        };
    let forced = follows_anyway(&path);
    for follow in [Follow::Final, Follow::NoFinal] {
        let got = resolve(&root, &path, follow, &RealFs);
        // The oracle follows a final link written as a directory (`l/`,
        // `l/.`) as the kernel does (`lstat("l/")` is the target's);
        // cap-std's `symlink_metadata` gives the link itself there.
        let cap = rel_for_cap.map(|r| match follow {
            Follow::NoFinal if !forced => dir.symlink_metadata(r),
            _ => dir.metadata(r),
        });
        if let Some(Err(e)) = &cap
            && is_escape(e)
        {
            assert!(
                got.is_err(),
                "cap-std refuses {path:?} as an escape ({e}), the guard resolved it to {got:?}"
            );
        }
        let Ok(p) = got else { continue };
        assert!(
            p.starts_with(&root),
            "{path:?} resolved outside the root: {p:?}"
        );
        assert!(normalised(&p), "{p:?} is not normalised");
        let probe = match follow {
            Follow::NoFinal if p != root => p.parent().map(Path::to_path_buf),
            _ => Some(p.clone()),
        };
        if let Some(probe) = probe
            && let Ok(real) = probe.canonicalize()
        {
            assert!(
                real.starts_with(&root),
                "{path:?} resolved to {p:?}, which the kernel resolves to {real:?}"
            );
        }
        let std_meta = match follow {
            Follow::Final => std::fs::metadata(&p),
            Follow::NoFinal => std::fs::symlink_metadata(&p),
        };
        if let (Ok(a), Some(Ok(b))) = (std_meta, &cap) {
            assert_eq!(
                (a.dev(), a.ino()),
                (b.dev(), b.ino()),
                "{path:?}: the guard's {p:?} and cap-std's resolution are different files"
            );
        }
    }
});
