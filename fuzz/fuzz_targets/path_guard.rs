//! Property: whatever the input and whatever symlinks the fake filesystem
//! holds, a path the guard accepts lies under its root and has no `.` or `..`
//! component.
#![no_main]

use capsaga_core::path_guard::{Follow, FsView, resolve};
use libfuzzer_sys::fuzz_target;
use std::collections::HashMap;
use std::path::{Component, Path, PathBuf};

struct MapFs(HashMap<PathBuf, PathBuf>);
impl FsView for MapFs {
    fn read_link(&self, p: &Path) -> Option<PathBuf> {
        self.0.get(p).cloned()
    }
}

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else { return };
    // First line: the path; following lines: `link=target` pairs under /r.
    let mut lines = text.split('\n');
    let path = lines.next().unwrap_or("");
    let mut links = HashMap::new();
    for l in lines.take(8) {
        if let Some((a, b)) = l.split_once('=') {
            links.insert(Path::new("/r").join(a.trim_start_matches('/')), PathBuf::from(b));
        }
    }
    let fs = MapFs(links);
    for follow in [Follow::Final, Follow::NoFinal] {
        if let Ok(p) = resolve(Path::new("/r"), path, follow, &fs) {
            assert!(p.starts_with("/r"), "{path:?} resolved outside the root: {p:?}");
            assert!(
                !p.components().any(|c| matches!(c, Component::ParentDir | Component::CurDir)),
                "{p:?} is not normalised"
            );
        }
    }
});
