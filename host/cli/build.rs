//! Stamps the git commit the `capsaga` binary was built from into
//! `CAPSAGA_BUILD_COMMIT`, which `capsaga --version` prints beside the
//! crate version.
//!
//! - `CAPSAGA_BUILD_COMMIT` set in the environment wins (packagers, CI).
//! - Otherwise `git rev-parse --short=12 HEAD`, with `-dirty` when the work
//!   tree has changes, or `unknown` outside a git checkout (a source
//!   tarball).
//! - A release build (`cargo install --path host/cli`, `--release`) is
//!   re-stamped whenever HEAD moves, so its commit is exact. A dev build is
//!   stamped when this package's own sources change (cargo's default), not
//!   at every commit (which would rebuild the whole crate each time): it
//!   says `dev build` so that nobody takes its commit for exact.

use std::path::PathBuf;
use std::process::Command;

fn git(args: &[&str]) -> Option<String> {
    let out = Command::new("git").args(args).output().ok()?;
    if !out.status.success() {
        return None;
    }
    let s = String::from_utf8(out.stdout).ok()?.trim().to_string();
    (!s.is_empty()).then_some(s)
}

fn main() {
    println!("cargo:rerun-if-env-changed=CAPSAGA_BUILD_COMMIT");
    let release = std::env::var("PROFILE").is_ok_and(|p| p == "release");
    if release {
        // HEAD, the branch it names, and packed refs: a new commit or a
        // checkout re-runs this script.
        for p in ["HEAD", "packed-refs"] {
            if let Some(path) = git(&["rev-parse", "--git-path", p]) {
                println!("cargo:rerun-if-changed={}", abs(&path).display());
            }
        }
        if let Some(r) = git(&["symbolic-ref", "-q", "HEAD"])
            && let Some(path) = git(&["rev-parse", "--git-path", &r])
        {
            println!("cargo:rerun-if-changed={}", abs(&path).display());
        }
    } else {
        // Cargo's default (any file of this package), kept explicit.
        for p in ["src", "templates", "Cargo.toml", "build.rs"] {
            println!("cargo:rerun-if-changed={p}");
        }
    }
    let commit = std::env::var("CAPSAGA_BUILD_COMMIT")
        .ok()
        .filter(|c| !c.is_empty())
        .or_else(|| {
            let head = git(&["rev-parse", "--short=12", "HEAD"])?;
            let dirty = git(&["status", "--porcelain", "--untracked-files=no"]).is_some();
            Some(if dirty { format!("{head}-dirty") } else { head })
        })
        .unwrap_or_else(|| "unknown".into());
    let kind = if release { "" } else { ", dev build" };
    println!("cargo:rustc-env=CAPSAGA_BUILD_COMMIT={commit}{kind}");
}

/// `path` as git printed it, made absolute (relative ones are relative to
/// this package's directory, where cargo runs the script).
fn abs(path: &str) -> PathBuf {
    let p = PathBuf::from(path);
    if p.is_absolute() {
        p
    } else {
        std::env::current_dir().map(|d| d.join(&p)).unwrap_or(p)
    }
}
