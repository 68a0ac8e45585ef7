//! The parents a call's paths were located in, kept for the call: a guest
//! writing 100 files in one directory has that directory resolved once.

use crate::beneath::{Located, Roots};
use std::collections::HashMap;
use std::fs::File;

/// A parent directory located for a call, and the guest's directory it was
/// resolved from (kept, so its address is not reused while cached).
pub(crate) struct LocatedParent {
    _from: std::sync::Arc<File>,
    root: usize,
    rel: crate::beneath::RelPath,
    dir: std::sync::Arc<File>,
}

/// The parents located for one call, by (the guest's directory, the path
/// part): see [`ParentCache::locate`].
#[derive(Default)]
pub(crate) struct ParentCache(HashMap<(usize, String), LocatedParent>);

impl ParentCache {
    /// Forgets every parent (a rename, a removal or the call's end).
    pub(crate) fn clear(&mut self) {
        self.0.clear();
    }

    /// [`crate::beneath::locate`] for a call's path, `dir` being the guest's
    /// directory descriptor. The parent a path part resolves to is kept for
    /// the call and forgotten whenever a change could alter what it names
    /// (a rename, a removal); a final link to follow is always resolved
    /// afresh.
    ///
    /// # Errors
    /// As [`crate::beneath::locate`].
    pub(crate) fn locate(
        &mut self,
        roots: &Roots,
        dir: &std::sync::Arc<File>,
        path: &str,
        follow: bool,
    ) -> Result<Located, crate::beneath::Unlocated> {
        use crate::beneath::{Unlocated, locate, split_guest_path};
        let (part, name) = split_guest_path(path);
        if name.is_empty() || name == "." || name == ".." {
            return locate(roots, dir, path, follow);
        }
        let key = (std::sync::Arc::as_ptr(dir) as usize, part.to_string());
        let base = match self.0.get(&key) {
            Some(p) => Located {
                root: p.root,
                rel: p.rel.join(name).map_err(|_| Unlocated::Outside)?,
                parent: std::sync::Arc::clone(&p.dir),
            },
            None => {
                let l = locate(roots, dir, path, false)?;
                if let Some((rel, _)) = l.rel.split() {
                    self.0.insert(
                        key,
                        LocatedParent {
                            _from: std::sync::Arc::clone(dir),
                            root: l.root,
                            rel,
                            dir: std::sync::Arc::clone(&l.parent),
                        },
                    );
                }
                l
            }
        };
        let link = follow
            && rustix::fs::statat(&*base.parent, name, rustix::fs::AtFlags::SYMLINK_NOFOLLOW)
                .is_ok_and(|st| {
                    rustix::fs::FileType::from_raw_mode(st.st_mode) == rustix::fs::FileType::Symlink
                });
        if link {
            return locate(roots, dir, path, true);
        }
        Ok(base)
    }
}
