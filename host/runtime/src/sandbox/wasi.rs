//! The WASI context of one call, built from the effective grants and nothing
//! else: one preopen per `fs:*` grant (mounted at its own absolute path, so a
//! path means the same to the model, the guest and the operator), only the
//! environment variables of `env:*` grants with the operator's values (nothing
//! inherited from the host process), no arguments, stdin closed, stdout/stderr captured in a capped
//! buffer, no sockets and no name lookup.

use super::stdio::CapturePipe;
use capsaga_core::capability::{Capability, FsAccess, FsDir, Place};
use std::collections::BTreeMap;
use wasmtime_wasi::{FsPerms, WasiCtx, WasiCtxBuilder};

/// Bytes of guest stdout/stderr kept per call (for trap diagnostics): the
/// first and the last half; writes past it succeed and are dropped.
pub const STDIO_CAPTURE_BYTES: usize = 16 * 1024;

/// Why a WASI context could not be built.
#[derive(Debug, thiserror::Error)]
pub enum WasiSetupError {
    /// A granted directory could not be opened.
    #[error("granted directory `{dir}` cannot be opened: {error}")]
    Preopen {
        /// The directory.
        dir: String,
        /// The OS error.
        error: String,
    },
    /// An fs grant whose `~` was not expanded (a policy bug).
    #[error("grant `{0}` is not an absolute directory")]
    NotAbsolute(String),
}

/// The preopens for `grants`: absolute directory → permissions, write winning
/// over read for the same directory.
pub fn preopens(grants: &[Capability]) -> Result<BTreeMap<String, FsPerms>, WasiSetupError> {
    let mut out: BTreeMap<String, FsPerms> = BTreeMap::new();
    for g in grants {
        if let Capability::Fs { access, dir } = g {
            let Place::Concrete(FsDir::Absolute(path)) = dir else {
                return Err(WasiSetupError::NotAbsolute(g.to_string()));
            };
            let perms = match access {
                FsAccess::Read => FsPerms::ReadOnly,
                FsAccess::Write => FsPerms::ReadWrite,
            };
            let entry = out.entry(path.clone()).or_insert(perms);
            if perms == FsPerms::ReadWrite {
                *entry = FsPerms::ReadWrite;
            }
        }
    }
    Ok(out)
}

/// Build the WASI context of one call: preopens from `grants`, the
/// environment from `env` (the operator's values of the call's `env:`
/// grants). Returns it with the pipe that captures the guest's stdout and
/// stderr.
///
/// # Errors
/// [`WasiSetupError`] when a granted directory cannot be opened.
pub fn build(
    grants: &[Capability],
    env: &[(String, String)],
) -> Result<(WasiCtx, CapturePipe), WasiSetupError> {
    let mut b = WasiCtxBuilder::new();
    for (k, v) in env {
        b.env(k, v);
    }
    for (dir, perms) in preopens(grants)? {
        b.preopened_dir(&dir, &dir, perms)
            .map_err(|e| WasiSetupError::Preopen {
                dir: dir.clone(),
                error: e.to_string(),
            })?;
    }
    let stdio = CapturePipe::new(STDIO_CAPTURE_BYTES);
    b.stdout(stdio.clone());
    b.stderr(stdio.clone());
    b.allow_tcp(false);
    b.allow_udp(false);
    b.allow_ip_name_lookup(false);
    Ok((b.build(), stdio))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn write_wins_and_home_refused() {
        let caps: Vec<Capability> = ["fs:read:/a/**", "fs:write:/a/**", "fs:read:/b/**"]
            .iter()
            .map(|s| Capability::parse(s).unwrap())
            .collect();
        let p = preopens(&caps).unwrap();
        assert_eq!(p.get("/a"), Some(&FsPerms::ReadWrite));
        assert_eq!(p.get("/b"), Some(&FsPerms::ReadOnly));
        let home = [Capability::parse("fs:read:~/x/**").unwrap()];
        assert!(preopens(&home).is_err());
    }

    #[test]
    fn missing_directory_is_an_error() {
        let caps = [Capability::parse("fs:read:/definitely/not/here/capsaga/**").unwrap()];
        assert!(matches!(
            build(&caps, &[]),
            Err(WasiSetupError::Preopen { .. })
        ));
    }
}
