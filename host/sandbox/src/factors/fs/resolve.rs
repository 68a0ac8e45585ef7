//! What the sandbox itself finds at a path: `cap_primitives` beneath the
//! granted directory, the resolver Wasmtime's WASI runs for every preopen
//! (issue 13 item 5).
//!
//! The path guard (`capsaga-path-guard`, run by `capsaga check path` and by
//! the tools through the SDK) predicts the sandbox's answer without touching
//! the filesystem beyond reading links. [`confirm`] checks that prediction
//! against the real thing when something exists at the path: a path the
//! guard allows must be refused by nobody and name the same file
//! (device and inode) for cap-std; a path the guard refuses as an escape
//! must not be one the sandbox opens. A disagreement turns the verdict into
//! a refusal of kind `sandbox_disagrees`, which the hostile corpus's
//! differential test requires never to happen.

use capsaga_check::{Decision, PathProbe, Verdict, check_path};
use capsaga_core::capability::{Capability, FsDir, Place};
use capsaga_core::path_guard::{Follow, FsView, candidate_roots, literally_under};
use serde_json::json;
use std::io;
use std::path::Path;

/// What cap-std's resolution beneath a directory found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Beneath {
    /// An object: its device and inode.
    Found {
        /// Device.
        dev: u64,
        /// Inode.
        ino: u64,
    },
    /// Nothing there (`ENOENT`, `ENOTDIR`): a create would be tried there.
    Missing,
    /// Refused as leading outside the directory.
    Escape(String),
    /// Too many symbolic links (`ELOOP`).
    Loop,
    /// Any other error (the root cannot be opened, `EACCES`, ...).
    Other(String),
}

impl Beneath {
    /// A short description for messages.
    pub fn describe(&self) -> String {
        match self {
            Beneath::Found { dev, ino } => format!("an object (device {dev}, inode {ino})"),
            Beneath::Missing => "nothing".into(),
            Beneath::Escape(e) => format!("an escape ({e})"),
            Beneath::Loop => "a symbolic link loop".into(),
            Beneath::Other(e) => format!("an error ({e})"),
        }
    }
}

fn classify(e: &io::Error) -> Beneath {
    match e.kind() {
        io::ErrorKind::NotFound | io::ErrorKind::NotADirectory => Beneath::Missing,
        io::ErrorKind::PermissionDenied if e.raw_os_error().is_none() => {
            Beneath::Escape(e.to_string())
        }
        _ if e.raw_os_error() == Some(rustix::io::Errno::XDEV.raw_os_error()) => {
            Beneath::Escape(e.to_string())
        }
        _ if e.raw_os_error() == Some(rustix::io::Errno::LOOP.raw_os_error()) => Beneath::Loop,
        _ => Beneath::Other(e.to_string()),
    }
}

/// Resolve `path` (as written: absolute, literally under `root`, or
/// relative to it; a trailing `/` kept) beneath `root` with cap-std, following
/// the final symlink or not, and stat what it names.
pub fn beneath(root: &Path, path: &str, follow: Follow) -> Beneath {
    use cap_primitives::fs::{FollowSymlinks, MetadataExt};
    let root_s = root.to_string_lossy();
    let rel = if path.starts_with('/') {
        if root_s == "/" {
            path.trim_start_matches('/')
        } else if literally_under(&root_s, path) {
            path[root_s.len()..].trim_start_matches('/')
        } else {
            return Beneath::Escape(format!("`{path}` is not under `{root_s}`"));
        }
    } else {
        path
    };
    let rel = if rel.is_empty() { "." } else { rel };
    let dir = match cap_primitives::fs::open_ambient_dir(root, cap_primitives::ambient_authority())
    {
        Ok(d) => d,
        Err(e) => return Beneath::Other(format!("cannot open {root_s}: {e}")),
    };
    // A path written as a directory (`link/`, `link/.`) follows its final
    // link, as the kernel does and as the guard predicts; cap-primitives'
    // `stat` without follow would report the link itself.
    let as_dir = rel.ends_with('/') || rel.ends_with("/.");
    let follow = match follow {
        Follow::NoFinal if !as_dir => FollowSymlinks::No,
        _ => FollowSymlinks::Yes,
    };
    match cap_primitives::fs::stat(&dir, Path::new(rel), follow) {
        Ok(m) => Beneath::Found {
            dev: m.dev(),
            ino: m.ino(),
        },
        Err(e) => classify(&e),
    }
}

/// Device and inode of a host path (following the final link or not).
fn identity(path: &Path, follow: Follow) -> Option<(u64, u64)> {
    use std::os::unix::fs::MetadataExt;
    let m = match follow {
        Follow::Final => std::fs::metadata(path),
        Follow::NoFinal => std::fs::symlink_metadata(path),
    }
    .ok()?;
    Some((m.dev(), m.ino()))
}

/// Rule names of refusals that say "this leads outside".
const ESCAPES: &[&str] = &["escapes_root", "symlink_escape", "outside_root"];

/// [`check_path`], then the prediction checked against the sandbox's own
/// resolver ([`beneath`]) under each granted directory the path is taken
/// under. The verdict is [`check_path`]'s, with `value.sandbox` saying what
/// cap-std found; it becomes a refusal of kind `sandbox_disagrees` when
/// - the guard allows a path that cap-std refuses as an escape or a loop
///   under every directory it is taken under, or resolves to another file
///   than the guard's (cap-std finding nothing is no disagreement);
/// - the guard refuses a path as an escape that cap-std resolves to a file
///   under the directory.
pub fn confirm(probe: &PathProbe<'_>, fs: &impl FsView) -> Verdict {
    let mut v = check_path(probe, fs);
    let roots: Vec<&str> = probe
        .grants
        .iter()
        .filter_map(|c| match c {
            Capability::Fs {
                dir: Place::Concrete(FsDir::Absolute(d)),
                ..
            } => Some(d.as_str()),
            _ => None,
        })
        .collect();
    let mut names = roots.clone();
    names.sort_unstable();
    names.dedup();
    let Ok(order) = candidate_roots(&names, probe.path) else {
        return v;
    };
    let found: Vec<(&str, Beneath)> = order
        .iter()
        .map(|&i| {
            (
                names[i],
                beneath(Path::new(names[i]), probe.path, probe.follow),
            )
        })
        .collect();
    let disagreement = match v.decision {
        Decision::Allow => {
            let resolved = v
                .value
                .as_ref()
                .and_then(|x| x["resolved"].as_str())
                .map(str::to_owned)
                .unwrap_or_default();
            let want = identity(Path::new(&resolved), probe.follow);
            // Nothing there (or not readable) is no disagreement: the guard
            // allows creating it, or the OS will answer not-found.
            let agrees = found.iter().any(|(_, b)| match b {
                Beneath::Found { dev, ino } => want == Some((*dev, *ino)),
                Beneath::Missing | Beneath::Other(_) => true,
                Beneath::Escape(_) | Beneath::Loop => false,
            });
            (!agrees).then(|| format!("the guard resolves it to `{resolved}`"))
        }
        Decision::Deny if ESCAPES.contains(&v.kind.as_str()) => found
            .iter()
            .find(|(_, b)| matches!(b, Beneath::Found { .. }))
            .map(|(root, _)| {
                format!(
                    "the guard refuses it as {}, but cap-std opens it under {root}",
                    v.kind
                )
            }),
        _ => None,
    };
    let sandbox: Vec<_> = found
        .iter()
        .map(|(root, b)| json!({"root": root, "found": b.describe()}))
        .collect();
    if let Some(why) = disagreement {
        let mut d = Verdict {
            decision: Decision::Deny,
            kind: "sandbox_disagrees".into(),
            reason: format!(
                "{why}; the sandbox's resolver (cap-std beneath the granted directory) finds {}: please report this as a bug of the path guard",
                found
                    .iter()
                    .map(|(r, b)| format!("{} under {r}", b.describe()))
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
            ..v
        };
        d.value = Some(json!({ "sandbox": sandbox }));
        return d;
    }
    let mut value = v.value.take().unwrap_or_else(|| json!({}));
    if let Some(m) = value.as_object_mut() {
        m.insert("sandbox".into(), json!(sandbox));
    }
    v.value = Some(value);
    v
}
