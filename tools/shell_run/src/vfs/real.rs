//! The real filesystem under the grants: metadata without following a
//! final link, and the granted directories themselves (from the WASI
//! preopens in the component, from the SDK's test roots natively).

use std::fs;
use std::io;
use std::path::Path;

use super::{FsError, Kind, Root, Stat};

/// The real filesystem's answer for `p`, not following a final link.
///
/// # Errors
/// I/O errors other than "not found".
pub fn real_stat(p: &Path) -> Result<Option<Stat>, FsError> {
    match fs::symlink_metadata(p) {
        Ok(m) => {
            let t = m.file_type();
            let kind = if t.is_symlink() {
                Kind::Link
            } else if t.is_dir() {
                Kind::Dir
            } else if t.is_file() {
                Kind::File
            } else {
                Kind::Other
            };
            Ok(Some(Stat {
                kind,
                len: m.len(),
                modified: m.modified().ok(),
            }))
        }
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(FsError::io(p, &e)),
    }
}

/// The granted directories of this instance and whether each is writable.
pub fn granted() -> Vec<Root> {
    imp::granted()
}

#[cfg(all(target_arch = "wasm32", target_os = "wasi", target_env = "p2"))]
mod imp {
    use super::Root;
    use std::path::PathBuf;
    use wasip2::filesystem::types::DescriptorFlags;

    pub(super) fn granted() -> Vec<Root> {
        let mut roots: Vec<Root> = wasip2::filesystem::preopens::get_directories()
            .into_iter()
            .filter(|(_, name)| name.starts_with('/'))
            .map(|(d, name)| {
                let writable = d
                    .get_flags()
                    .is_ok_and(|f| f.contains(DescriptorFlags::MUTATE_DIRECTORY));
                let trimmed = name.trim_end_matches('/');
                Root {
                    path: PathBuf::from(if trimmed.is_empty() { "/" } else { trimmed })
                        .components()
                        .collect(),
                    writable,
                }
            })
            .collect();
        roots.sort_by(|a, b| a.path.cmp(&b.path));
        roots.dedup_by(|a, b| {
            if a.path == b.path {
                b.writable |= a.writable;
                true
            } else {
                false
            }
        });
        roots
    }
}

#[cfg(not(all(target_arch = "wasm32", target_os = "wasi", target_env = "p2")))]
mod imp {
    use super::Root;

    pub(super) fn granted() -> Vec<Root> {
        capsaga_sdk::fs::granted_roots()
            .into_iter()
            .map(|path| Root {
                path,
                writable: true,
            })
            .collect()
    }
}
