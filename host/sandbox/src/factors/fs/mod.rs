//! The `fs` factor: `fs:read:<dir>/**` and `fs:write:<dir>/**` grants become
//! preopened directories, each mounted in the guest at its own absolute path
//! (so a path means the same to the model, the guest and the operator), with
//! read-only or read-write permissions.
//!
//! Everything the host does to a guest's files lives in this folder:
//! - this file: the grant binding (the factor's three phases);
//! - [`open_at`]: the guest's `open-at`, opened beneath the preopen without
//!   blocking, special files refused;
//! - [`resolve`]: what the sandbox's own resolver finds at a path, checked
//!   against the path guard's prediction (`capsaga check path`);
//! - [`host_files`]: files the host itself opens beneath a call's preopens
//!   for a built-in tool (`code_run`'s inputs and outputs);
//! - [`journal`]: the host's file journal bound into a call (issue 28): the
//!   `wasi:filesystem` functions that change a path journal its pre-image
//!   first (the journal itself, the open-beneath primitives and the restore
//!   are the crate `capsaga-guest-fs`).

#[cfg(unix)]
pub mod host_files;
#[cfg(unix)]
pub mod journal;
#[cfg(unix)]
pub mod open_at;
#[cfg(unix)]
pub mod resolve;

use super::super::wasi::WasiSetupError;
use capsaga_core::capability::{Capability, FsAccess, FsDir, Place};
use std::collections::BTreeMap;
use wasmtime_wasi::{FsPerms, WasiCtxBuilder};

/// The preopens of one tool: absolute directory → permissions; for one
/// call of a step whose files the host journals, the step's journal.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct FsBinding {
    /// Directory → read-only or read-write, write winning over read for the
    /// same directory.
    pub preopens: BTreeMap<String, FsPerms>,
    /// The journal of the step this call belongs to (set per call by the
    /// door, never in a tool's configured bindings; see [`journal`]).
    #[cfg(unix)]
    pub journal: Option<journal::CallJournal>,
}

impl FsBinding {
    /// The directories granted for writing.
    pub fn writable(&self) -> Vec<String> {
        self.preopens
            .iter()
            .filter(|(_, p)| **p == FsPerms::ReadWrite)
            .map(|(d, _)| d.clone())
            .collect()
    }
}

/// Phase 1: an fs grant must name an absolute directory (`~` is expanded
/// when the policy is checked, never by the guest).
///
/// # Errors
/// Why the grant is refused.
pub fn validate(grant: &Capability) -> Result<(), String> {
    match grant {
        Capability::Fs {
            dir: Place::Concrete(FsDir::Absolute(_)),
            ..
        } => Ok(()),
        _ => Err("an fs grant must name an absolute directory".into()),
    }
}

/// Phase 2: the preopens for `grants` (grants of other kinds are ignored;
/// an fs grant that is not absolute, which phase 1 refuses, is skipped).
pub fn configure(grants: &[Capability]) -> FsBinding {
    let mut preopens: BTreeMap<String, FsPerms> = BTreeMap::new();
    for g in grants {
        let Capability::Fs {
            access,
            dir: Place::Concrete(FsDir::Absolute(path)),
        } = g
        else {
            if matches!(g, Capability::Fs { .. }) {
                tracing::warn!("grant `{g}` is not an absolute directory: not mounted");
            }
            continue;
        };
        let perms = match access {
            FsAccess::Read => FsPerms::ReadOnly,
            FsAccess::Write => FsPerms::ReadWrite,
        };
        let entry = preopens.entry(path.clone()).or_insert(perms);
        if perms == FsPerms::ReadWrite {
            *entry = FsPerms::ReadWrite;
        }
    }
    FsBinding {
        preopens,
        ..FsBinding::default()
    }
}

/// Phase 3: open each directory into the call's WASI context.
///
/// # Errors
/// [`WasiSetupError::Preopen`] when a granted directory cannot be opened.
pub fn bind(b: &FsBinding, builder: &mut WasiCtxBuilder) -> Result<(), WasiSetupError> {
    for (dir, perms) in &b.preopens {
        builder
            .preopened_dir(dir, dir, *perms)
            .map_err(|e| WasiSetupError::Preopen {
                dir: dir.clone(),
                error: e.to_string(),
            })?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn caps(list: &[&str]) -> Vec<Capability> {
        list.iter()
            .map(|s| Capability::parse(s).unwrap_or_else(|e| panic!("{e}")))
            .collect()
    }

    #[test]
    fn write_wins_and_home_refused() {
        let p = configure(&caps(&["fs:read:/a/**", "fs:write:/a/**", "fs:read:/b/**"])).preopens;
        assert_eq!(p.get("/a"), Some(&FsPerms::ReadWrite));
        assert_eq!(p.get("/b"), Some(&FsPerms::ReadOnly));
        let home = caps(&["fs:read:~/x/**"]);
        assert!(validate(&home[0]).is_err());
        assert!(configure(&home).preopens.is_empty());
    }

    #[test]
    fn missing_directory_is_an_error() {
        let b = configure(&caps(&["fs:read:/definitely/not/here/capsaga/**"]));
        let mut builder = WasiCtxBuilder::new();
        assert!(matches!(
            bind(&b, &mut builder),
            Err(WasiSetupError::Preopen { .. })
        ));
    }
}
