//! Replacing a file's content without changing what the file is:
//! [`write_file`], shared by the tools that write and undo files (fs_write,
//! fs_edit, shell_run).
//!
//! WASI shows a guest no permission bits and lets it set none: a file it
//! creates gets the host's default mode (`0666` less the umask, usually
//! `0644`). Writing a new file and renaming it over an existing one would
//! therefore widen a `0600` `.env` to `0644`, drop the execute bit of a
//! `0755` script, give the file a new owner, and split it from its hard
//! links. So an existing regular file is rewritten *in place*: the same
//! inode keeps its permission bits, owner, hard links (every name sees the
//! new content, as after a shell's `>`) and extended attributes; a file the
//! host may not write (`0444`) is refused instead of replaced.
//!
//! In place is not atomic: a crash in the middle leaves the file partly
//! written. Before the first byte, [`write_file`] creates an empty marker
//! (the caller's `scratch` path, derived from the step's idempotency key)
//! and removes it only once the new content is synced; a marker found later
//! ([`interrupted`]) means the file may be torn, and the step's undo puts
//! the pre-image back whatever the file holds. The marker is empty, so no
//! content is copied anywhere a wider mode could expose it.
//!
//! A file that does not exist yet is written to `scratch` and renamed into
//! place (atomic; it gets the default mode like any new file).
//!
//! The path is reached through [`open_file`](super::open_file), for the
//! write of `execute` and the one of `compensate` alike: no link on the
//! way or at the end, a regular file, and the file the caller [`Expect`]s
//! (`compensate`: the object `execute` wrote, with no more names than it
//! had), opened again for writing from the same parent and checked once
//! more, so a link or another file put there meanwhile is never written
//! through.
//!
//! Directories: a directory an undo recreates gets the default mode too,
//! since WASI cannot read or set modes; the guest cannot do better.

use std::fs;
use std::io::{self, Write};
use std::path::Path;

use super::file::{Expect, FileError, GuardedFile, open_file};

/// Replaces the content of the regular file `path` with `bytes` (in place,
/// keeping its inode), or creates it (through `scratch` and a rename), when
/// what is there is what `expect` accepts (see [`open_file`]). `scratch`
/// must be a path in the same directory that names nothing of the user's
/// (a stale one is removed first).
///
/// After an error, `scratch` exists only when `path` may have been partly
/// written (see [`interrupted`]).
///
/// # Errors
/// [`FileError`]: a link on the way or at the end, not a regular file,
/// another file than expected or one with more names, or the I/O error.
pub fn write_file(
    path: &Path,
    bytes: &[u8],
    scratch: &Path,
    expect: &Expect,
) -> Result<(), FileError> {
    remove_if_present(scratch)?;
    match open_file(path, expect)? {
        Some(file) => in_place(&file, bytes, scratch, expect),
        None => create(path, bytes, scratch).map_err(FileError::Io),
    }
}

/// True when `scratch` exists: a [`write_file`] with this scratch path
/// stopped before it finished, and its target may hold a mix of old and new
/// content (or, for a new file, was never renamed into place).
pub fn interrupted(scratch: &Path) -> bool {
    fs::symlink_metadata(scratch).is_ok()
}

fn in_place(
    file: &GuardedFile,
    bytes: &[u8],
    marker: &Path,
    expect: &Expect,
) -> Result<(), FileError> {
    fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(marker)?
        .sync_all()?;
    let writer = match file.writer(expect) {
        Ok(w) => w,
        Err(e) => {
            // Nothing was written.
            let _ = fs::remove_file(marker);
            return Err(e);
        }
    };
    writer.replace(bytes)?;
    fs::remove_file(marker)?;
    Ok(())
}

fn create(path: &Path, bytes: &[u8], scratch: &Path) -> io::Result<()> {
    let r = (|| {
        let mut f = fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(scratch)?;
        f.write_all(bytes)?;
        f.sync_all()?;
        fs::rename(scratch, path)
    })();
    if r.is_err() {
        let _ = fs::remove_file(scratch);
    }
    r
}

fn remove_if_present(p: &Path) -> io::Result<()> {
    match fs::remove_file(p) {
        Err(e) if e.kind() != io::ErrorKind::NotFound => Err(e),
        _ => Ok(()),
    }
}

#[cfg(all(test, unix))]
mod tests {
    use super::*;
    use crate::fs::test_dir::TestDir;
    use std::os::unix::fs::{MetadataExt, PermissionsExt};

    fn dir(name: &str) -> TestDir {
        TestDir::new(&format!("write-{name}"))
    }
    fn mode(p: &Path) -> u32 {
        fs::metadata(p).unwrap().permissions().mode() & 0o7777
    }

    #[test]
    fn permission_bits_owner_and_hard_links_are_kept() {
        let d = dir("modes");
        for m in [0o600, 0o640, 0o700, 0o755, 0o604, 0o660] {
            let p = d.0.join(format!("f{m:o}"));
            fs::write(&p, "old content, longer than the new one").unwrap();
            fs::set_permissions(&p, fs::Permissions::from_mode(m)).unwrap();
            let (ino, uid) = (
                fs::metadata(&p).unwrap().ino(),
                fs::metadata(&p).unwrap().uid(),
            );
            write_file(&p, b"new", &d.0.join(".scratch"), &Expect::Any).unwrap();
            assert_eq!(fs::read(&p).unwrap(), b"new");
            assert_eq!(mode(&p), m, "{m:o}");
            assert_eq!(fs::metadata(&p).unwrap().ino(), ino);
            assert_eq!(fs::metadata(&p).unwrap().uid(), uid);
            assert!(!interrupted(&d.0.join(".scratch")));
        }
        // A hard link sees the new content.
        let a = d.0.join("a");
        fs::write(&a, "one").unwrap();
        fs::hard_link(&a, d.0.join("b")).unwrap();
        write_file(&a, b"two, longer", &d.0.join(".scratch"), &Expect::Any).unwrap();
        assert_eq!(fs::read(d.0.join("b")).unwrap(), b"two, longer");
        assert_eq!(fs::metadata(&a).unwrap().nlink(), 2);
    }

    #[test]
    fn a_read_only_file_is_refused_not_replaced_and_new_files_are_created() {
        let d = dir("refuse");
        let p = d.0.join("ro");
        fs::write(&p, "keep").unwrap();
        fs::set_permissions(&p, fs::Permissions::from_mode(0o444)).unwrap();
        let scratch = d.0.join(".scratch");
        // Root may write anything: only check the refusal when not root.
        if fs::OpenOptions::new().write(true).open(&p).is_err() {
            assert!(write_file(&p, b"x", &scratch, &Expect::Any).is_err());
            assert_eq!(fs::read(&p).unwrap(), b"keep");
            assert_eq!(mode(&p), 0o444);
            assert!(!interrupted(&scratch), "nothing was written");
        }
        let n = d.0.join("new");
        write_file(&n, b"fresh", &scratch, &Expect::Any).unwrap();
        assert_eq!(fs::read(&n).unwrap(), b"fresh");
        assert!(!interrupted(&scratch));
        // Not a regular file: refused.
        fs::create_dir(d.0.join("sub")).unwrap();
        let e = write_file(&d.0.join("sub"), b"x", &scratch, &Expect::Any).unwrap_err();
        assert!(
            matches!(e, FileError::NotAFile { kind: "directory" }),
            "{e}"
        );
        std::os::unix::fs::symlink(&n, d.0.join("link")).unwrap();
        assert!(write_file(&d.0.join("link"), b"x", &scratch, &Expect::Any).is_err());
        assert_eq!(fs::read(&n).unwrap(), b"fresh");
    }

    #[test]
    fn a_stale_scratch_is_replaced_and_a_marker_means_interrupted() {
        let d = dir("stale");
        let p = d.0.join("f");
        let scratch = d.0.join(".scratch");
        fs::write(&p, "old").unwrap();
        fs::write(&scratch, "stale").unwrap();
        write_file(&p, b"new", &scratch, &Expect::Any).unwrap();
        assert_eq!(fs::read(&p).unwrap(), b"new");
        assert!(!interrupted(&scratch));
        fs::write(&scratch, "").unwrap();
        assert!(interrupted(&scratch));
    }
}
