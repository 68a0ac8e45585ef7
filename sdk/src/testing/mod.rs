//! Native test helpers for tool authors: a temporary granted directory, a
//! [`CallContext`] builder, and [`round_trip`], which checks the contract of
//! a side-effecting tool (dry-run changes nothing; execute then compensate
//! leaves the tree byte-identical; compensate twice is safe; compensate
//! after a third party's change is `unrevertible` and keeps that change).
//!
//! These run the tool's Rust code directly (`cargo test` in the tool's
//! crate), with [`crate::fs::granted_roots`] set to the temporary directory.
//! They do not enforce the sandbox: `capsaga test-tool X.wasm --roundtrip`
//! runs the same checks against the built component in the real sandbox
//! (read-only dry-run, preopens, WASI errors).
//!
//! ```
//! use capsaga_sdk::prelude::*;
//! use capsaga_sdk::testing::{GrantedDir, context};
//!
//! let dir = GrantedDir::new().unwrap();
//! dir.write("a.txt", "hello").unwrap();
//! let ctx = context().saga("t").step(3).build();
//! assert_eq!(ctx.step_seq, 3);
//! let path = dir.path_str("a.txt");
//! let text = dir.run(|| capsaga_sdk::fs::resolve(&path, capsaga_sdk::fs::Follow::Final));
//! assert!(text.is_ok());
//! ```
//!
//! Only in native builds (not in a component).

mod roundtrip;

pub use roundtrip::{RoundTrip, RoundTripError, round_trip};

use crate::CallContext;
use std::collections::BTreeMap;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

/// A fresh directory under the system's temporary directory, removed on
/// drop, that a test grants to the tool (as its only granted root, see
/// [`GrantedDir::run`]). Its path is canonical (no symbolic link in it), as
/// the host's grants are.
///
/// A small own implementation rather than the `tempfile` crate, so that the
/// SDK adds no dependency to the guest workspaces' lock files.
#[derive(Debug)]
pub struct GrantedDir {
    path: PathBuf,
}

impl GrantedDir {
    /// Create the directory.
    ///
    /// # Errors
    /// The OS error when the temporary directory is unusable.
    pub fn new() -> io::Result<GrantedDir> {
        static COUNTER: AtomicU64 = AtomicU64::new(0);
        let base = std::env::temp_dir().canonicalize()?;
        let nanos = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.subsec_nanos())
            .unwrap_or(0);
        for _ in 0..64 {
            let n = COUNTER.fetch_add(1, Ordering::Relaxed);
            let path = base.join(format!(
                "capsaga-test-{}-{nanos:08x}-{n}",
                std::process::id()
            ));
            match std::fs::create_dir(&path) {
                Ok(()) => return Ok(GrantedDir { path }),
                Err(e) if e.kind() == io::ErrorKind::AlreadyExists => continue,
                Err(e) => return Err(e),
            }
        }
        Err(io::Error::new(
            io::ErrorKind::AlreadyExists,
            "no free temporary directory name",
        ))
    }

    /// The directory (absolute, canonical).
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// `rel` under the directory.
    pub fn join(&self, rel: impl AsRef<Path>) -> PathBuf {
        self.path.join(rel)
    }

    /// `rel` under the directory as text, the way a model passes a path in
    /// the arguments.
    pub fn path_str(&self, rel: impl AsRef<Path>) -> String {
        self.join(rel).to_string_lossy().into_owned()
    }

    /// Write `contents` to `rel`, creating parent directories.
    ///
    /// # Errors
    /// The OS error.
    pub fn write(&self, rel: impl AsRef<Path>, contents: impl AsRef<[u8]>) -> io::Result<PathBuf> {
        let p = self.join(rel);
        if let Some(parent) = p.parent() {
            std::fs::create_dir_all(parent)?;
        }
        std::fs::write(&p, contents)?;
        Ok(p)
    }

    /// The bytes of `rel`.
    ///
    /// # Errors
    /// The OS error.
    pub fn read(&self, rel: impl AsRef<Path>) -> io::Result<Vec<u8>> {
        std::fs::read(self.join(rel))
    }

    /// Run `f` with this directory as the only granted root
    /// ([`crate::fs::with_granted_roots`]): paths outside it are refused by
    /// [`crate::fs::resolve`] as they are in the sandbox.
    pub fn run<R>(&self, f: impl FnOnce() -> R) -> R {
        crate::fs::with_granted_roots([&self.path], f)
    }

    /// Every entry below the directory with its content, to compare the tree
    /// before and after a call.
    ///
    /// # Errors
    /// The OS error.
    pub fn snapshot(&self) -> io::Result<Snapshot> {
        snapshot(&self.path)
    }
}

impl Drop for GrantedDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.path);
    }
}

/// One entry of a [`Snapshot`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Entry {
    /// A directory.
    Dir,
    /// A regular file and its bytes.
    File(Vec<u8>),
    /// A symbolic link and its target.
    Symlink(PathBuf),
}

/// A directory tree: relative path → entry. Two snapshots are equal when the
/// trees are byte-identical (names, kinds, contents, link targets).
pub type Snapshot = BTreeMap<PathBuf, Entry>;

/// The [`Snapshot`] of the tree under `root`.
///
/// # Errors
/// The OS error.
pub fn snapshot(root: &Path) -> io::Result<Snapshot> {
    let mut out = Snapshot::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir)? {
            let path = entry?.path();
            let rel = path.strip_prefix(root).unwrap_or(&path).to_path_buf();
            let meta = std::fs::symlink_metadata(&path)?;
            let e = if meta.file_type().is_symlink() {
                Entry::Symlink(std::fs::read_link(&path)?)
            } else if meta.is_dir() {
                stack.push(path.clone());
                Entry::Dir
            } else {
                Entry::File(std::fs::read(&path)?)
            };
            out.insert(rel, e);
        }
    }
    Ok(out)
}

/// What differs between two snapshots, one line per path
/// (`+ added`, `- removed`, `~ changed`); empty when they are equal.
pub fn diff(before: &Snapshot, after: &Snapshot) -> Vec<String> {
    let mut out = Vec::new();
    for (p, e) in before {
        match after.get(p) {
            None => out.push(format!("- {}", p.display())),
            Some(a) if a != e => out.push(format!("~ {}", p.display())),
            Some(_) => {}
        }
    }
    for p in after.keys() {
        if !before.contains_key(p) {
            out.push(format!("+ {}", p.display()));
        }
    }
    out
}

/// Start a [`CallContext`] for a test: saga `test-saga`, step 0, an
/// idempotency key derived from both, a deadline a minute from now.
pub fn context() -> ContextBuilder {
    ContextBuilder {
        ctx: CallContext {
            saga_id: "test-saga".into(),
            step_seq: 0,
            idempotency_key: String::new(),
            deadline_ms: now_ms().saturating_add(60_000),
            dry_run: false,
        },
    }
}

fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
        .unwrap_or(0)
}

/// Builds a [`CallContext`] (see [`context`]).
#[derive(Debug, Clone)]
pub struct ContextBuilder {
    ctx: CallContext,
}

impl ContextBuilder {
    /// The saga id.
    pub fn saga(mut self, id: impl Into<String>) -> Self {
        self.ctx.saga_id = id.into();
        self
    }

    /// The step's position in its saga.
    pub fn step(mut self, seq: u64) -> Self {
        self.ctx.step_seq = seq;
        self
    }

    /// An explicit idempotency key (default: `<saga>:<step>`).
    pub fn idempotency_key(mut self, key: impl Into<String>) -> Self {
        self.ctx.idempotency_key = key.into();
        self
    }

    /// The deadline, milliseconds from now.
    pub fn deadline_in_ms(mut self, ms: u64) -> Self {
        self.ctx.deadline_ms = now_ms().saturating_add(ms);
        self
    }

    /// Mark the call as a dry run.
    pub fn dry_run(mut self, yes: bool) -> Self {
        self.ctx.dry_run = yes;
        self
    }

    /// The context.
    pub fn build(self) -> CallContext {
        let mut ctx = self.ctx;
        if ctx.idempotency_key.is_empty() {
            ctx.idempotency_key = format!("{}:{}", ctx.saga_id, ctx.step_seq);
        }
        ctx
    }
}

#[cfg(test)]
mod tests;
