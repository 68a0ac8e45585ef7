//! [`super::open_file`] in a native build (a tool's unit tests), through
//! `std`: each directory on the way is looked at without following, the
//! file too, and the file opened is checked to be the object looked at
//! (same device and inode), so a link is never written through. No sandbox
//! confines a native build, and a directory swapped between the look and
//! the open is not seen here; a component opens each name from its parent's
//! descriptor instead (`guest.rs`).

use super::{FileError, FileId, shown};
use std::fs::{self, File, Metadata, OpenOptions};
use std::io::{self, Write};
use std::path::{Path, PathBuf};

/// A regular file opened for reading, and its path.
#[derive(Debug)]
pub(super) struct Opened {
    path: PathBuf,
    file: File,
}

/// The same path opened again for writing.
pub(in crate::fs) struct Writer {
    file: File,
}

/// Look at `root`/`dirs`/`name` without following links and open it for
/// reading: `None` when it (or a directory on the way) does not exist.
pub(super) fn open(
    root: &Path,
    dirs: &[String],
    name: &str,
) -> Result<Option<(Opened, FileId, u64)>, FileError> {
    let mut dir = root.to_path_buf();
    for (i, d) in dirs.iter().enumerate() {
        dir.push(d);
        match fs::symlink_metadata(&dir) {
            Ok(m) if m.is_dir() => {}
            Ok(_) => {
                return Err(FileError::Detour {
                    at: shown(root, dirs, i + 1),
                });
            }
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(FileError::Io(e)),
        }
    }
    let path = dir.join(name);
    let seen = match fs::symlink_metadata(&path) {
        Ok(m) => m,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(FileError::Io(e)),
    };
    let ft = seen.file_type();
    if ft.is_symlink() {
        return Err(FileError::Link);
    }
    if !ft.is_file() {
        return Err(FileError::NotAFile {
            kind: kind_name(&seen),
        });
    }
    let file = File::open(&path)?;
    let meta = file.metadata()?;
    if identity(&meta) != identity(&seen) {
        return Err(FileError::Replaced);
    }
    let len = meta.len();
    Ok(Some((Opened { path, file }, file_id(&meta), len)))
}

impl Opened {
    pub(super) fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<usize> {
        read_at(&self.file, buf, offset)
    }

    pub(super) fn reopen_for_writing(&self) -> Result<Writer, FileError> {
        match OpenOptions::new().write(true).open(&self.path) {
            Ok(file) => Ok(Writer { file }),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Err(FileError::Gone),
            Err(e) => Err(FileError::Io(e)),
        }
    }

    pub(super) fn remove(&self) -> io::Result<()> {
        fs::remove_file(&self.path)
    }
}

impl Writer {
    pub(super) fn id(&self) -> Result<FileId, FileError> {
        let meta = self.file.metadata()?;
        if !meta.is_file() {
            return Err(FileError::NotAFile {
                kind: kind_name(&meta),
            });
        }
        Ok(file_id(&meta))
    }

    pub(in crate::fs) fn replace(&self, bytes: &[u8]) -> io::Result<()> {
        let mut f = &self.file;
        f.write_all(bytes)?;
        f.set_len(bytes.len() as u64)?;
        f.sync_all()
    }
}

#[cfg(unix)]
fn read_at(file: &File, buf: &mut [u8], offset: u64) -> io::Result<usize> {
    std::os::unix::fs::FileExt::read_at(file, buf, offset)
}

#[cfg(not(unix))]
fn read_at(file: &File, buf: &mut [u8], offset: u64) -> io::Result<usize> {
    use std::io::{Read, Seek, SeekFrom};
    let mut f = file.try_clone()?;
    f.seek(SeekFrom::Start(offset))?;
    f.read(buf)
}

/// What `m` names when it is not a regular file, for [`FileError::NotAFile`].
fn kind_name(m: &Metadata) -> &'static str {
    let ft = m.file_type();
    #[cfg(unix)]
    let kinds = {
        use std::os::unix::fs::FileTypeExt;
        [
            (ft.is_dir(), "directory"),
            (ft.is_symlink(), "symbolic link"),
            (ft.is_fifo(), "FIFO"),
            (ft.is_socket(), "socket"),
            (ft.is_char_device(), "character device"),
            (ft.is_block_device(), "block device"),
        ]
    };
    #[cfg(not(unix))]
    let kinds = [
        (ft.is_dir(), "directory"),
        (ft.is_symlink(), "symbolic link"),
    ];
    kinds
        .iter()
        .find(|(is, _)| *is)
        .map_or("special file", |(_, kind)| kind)
}

#[cfg(unix)]
fn identity(m: &Metadata) -> (u64, u64) {
    use std::os::unix::fs::MetadataExt;
    (m.dev(), m.ino())
}

#[cfg(unix)]
fn file_id(m: &Metadata) -> FileId {
    use std::os::unix::fs::MetadataExt;
    let (dev, ino) = identity(m);
    FileId {
        object: format!("{dev:016x}{ino:016x}"),
        names: m.nlink(),
    }
}

// Elsewhere std shows neither inodes nor names: every file is itself, once.
#[cfg(not(unix))]
fn identity(_: &Metadata) -> (u64, u64) {
    (0, 0)
}

#[cfg(not(unix))]
fn file_id(_: &Metadata) -> FileId {
    FileId {
        object: String::new(),
        names: 1,
    }
}
