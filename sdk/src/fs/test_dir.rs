//! A fresh directory under the system's temporary one for a test, removed
//! when dropped.

use std::path::PathBuf;

/// `<tmp>/sdk-<name>-<pid>`, empty when made, removed when dropped.
pub(crate) struct TestDir(pub(crate) PathBuf);

impl TestDir {
    pub(crate) fn new(name: &str) -> TestDir {
        let d = std::env::temp_dir().join(format!("sdk-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap_or_else(|e| panic!("{}: {e}", d.display()));
        TestDir(d)
    }
}

impl Drop for TestDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}
