//! [`super::open_file`] in a component: `wasi:filesystem` descriptors,
//! from the preopened directory down, every `open-at` without
//! `symlink-follow`; identity from `metadata-hash`, names from `stat`.

use super::{FileError, FileId, shown};
use std::io;
use std::path::Path;
use wasip2::filesystem::types::{
    Descriptor, DescriptorFlags, DescriptorType, ErrorCode, OpenFlags, PathFlags,
};

/// A regular file opened for reading, and the parent it was opened from.
#[derive(Debug)]
pub(super) struct Opened {
    parent: Descriptor,
    name: String,
    file: Descriptor,
}

/// The same name opened again for writing.
pub(in crate::fs) struct Writer {
    file: Descriptor,
}

/// Reach `name` in `root`/`dirs` without following links and open it for
/// reading: `None` when it (or a directory on the way) does not exist.
pub(super) fn open(
    root: &Path,
    dirs: &[String],
    name: &str,
) -> Result<Option<(Opened, FileId, u64)>, FileError> {
    let mut dir = preopen(root).ok_or(FileError::Outside)?;
    for (i, d) in dirs.iter().enumerate() {
        let next = match dir.open_at(
            PathFlags::empty(),
            d,
            OpenFlags::DIRECTORY,
            DescriptorFlags::READ,
        ) {
            Ok(next) => next,
            Err(ErrorCode::NoEntry) => return Ok(None),
            Err(ErrorCode::Loop | ErrorCode::NotDirectory) => {
                return Err(FileError::Detour {
                    at: shown(root, dirs, i + 1),
                });
            }
            Err(e) => return Err(FileError::Io(io_error(e))),
        };
        dir = next;
    }
    let file = match dir.open_at(
        PathFlags::empty(),
        name,
        OpenFlags::empty(),
        DescriptorFlags::READ,
    ) {
        Ok(f) => f,
        Err(ErrorCode::NoEntry) => return Ok(None),
        Err(e) => return Err(classify(&dir, name, e)),
    };
    let (id, len) = regular(&file)?;
    Ok(Some((
        Opened {
            parent: dir,
            name: name.to_owned(),
            file,
        },
        id,
        len,
    )))
}

impl Opened {
    pub(super) fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<usize> {
        let (chunk, _end) = self.file.read(buf.len() as u64, offset).map_err(io_error)?;
        let n = chunk.len().min(buf.len());
        buf[..n].copy_from_slice(&chunk[..n]);
        Ok(n)
    }

    pub(super) fn reopen_for_writing(&self) -> Result<Writer, FileError> {
        let file = self
            .parent
            .open_at(
                PathFlags::empty(),
                &self.name,
                OpenFlags::empty(),
                DescriptorFlags::READ | DescriptorFlags::WRITE,
            )
            .map_err(|e| match e {
                ErrorCode::NoEntry => FileError::Gone,
                e => classify(&self.parent, &self.name, e),
            })?;
        Ok(Writer { file })
    }

    pub(super) fn remove(&self) -> io::Result<()> {
        self.parent.unlink_file_at(&self.name).map_err(io_error)
    }
}

impl Writer {
    pub(super) fn id(&self) -> Result<FileId, FileError> {
        regular(&self.file).map(|(id, _)| id)
    }

    pub(in crate::fs) fn replace(&self, bytes: &[u8]) -> io::Result<()> {
        let mut at = 0usize;
        while at < bytes.len() {
            let n = self.file.write(&bytes[at..], at as u64).map_err(io_error)?;
            if n == 0 {
                return Err(io::Error::new(io::ErrorKind::WriteZero, "wrote nothing"));
            }
            at += usize::try_from(n)
                .unwrap_or(usize::MAX)
                .min(bytes.len() - at);
        }
        self.file.set_size(bytes.len() as u64).map_err(io_error)?;
        self.file.sync().map_err(io_error)
    }
}

/// Its identity, names and size, when `file` is a regular file.
fn regular(file: &Descriptor) -> Result<(FileId, u64), FileError> {
    let st = file.stat().map_err(|e| FileError::Io(io_error(e)))?;
    if !matches!(st.type_, DescriptorType::RegularFile) {
        return Err(FileError::NotAFile {
            kind: kind_name(st.type_),
        });
    }
    let h = file
        .metadata_hash()
        .map_err(|e| FileError::Io(io_error(e)))?;
    Ok((
        FileId {
            object: format!("{:016x}{:016x}", h.upper, h.lower),
            names: st.link_count,
        },
        st.size,
    ))
}

/// Why `name` of `dir` could not be opened without following: a link, a
/// special file (which the host refuses to open), or the error itself.
fn classify(dir: &Descriptor, name: &str, e: ErrorCode) -> FileError {
    match dir.stat_at(PathFlags::empty(), name) {
        Ok(st) => match st.type_ {
            DescriptorType::SymbolicLink => FileError::Link,
            DescriptorType::RegularFile => FileError::Io(io_error(e)),
            t => FileError::NotAFile { kind: kind_name(t) },
        },
        Err(_) => FileError::Io(io_error(e)),
    }
}

fn kind_name(t: DescriptorType) -> &'static str {
    match t {
        DescriptorType::Directory => "directory",
        DescriptorType::Fifo => "FIFO",
        DescriptorType::Socket => "socket",
        DescriptorType::CharacterDevice => "character device",
        DescriptorType::BlockDevice => "block device",
        DescriptorType::SymbolicLink => "symbolic link",
        DescriptorType::RegularFile => "regular file",
        DescriptorType::Unknown => "special file",
    }
}

/// The preopened directory named `root`, writable if one is.
fn preopen(root: &Path) -> Option<Descriptor> {
    let mut found: Option<Descriptor> = None;
    for (d, name) in wasip2::filesystem::preopens::get_directories() {
        let same = super::super::normalise_roots([name])
            .first()
            .is_some_and(|n| n.as_path() == root);
        if !same {
            continue;
        }
        let writable = d
            .get_flags()
            .is_ok_and(|f| f.contains(DescriptorFlags::MUTATE_DIRECTORY));
        if writable {
            return Some(d);
        }
        found.get_or_insert(d);
    }
    found
}

/// A WASI error code as an I/O error of the matching kind.
fn io_error(e: ErrorCode) -> io::Error {
    use io::ErrorKind as K;
    let kind = match e {
        ErrorCode::NoEntry => K::NotFound,
        ErrorCode::Access | ErrorCode::NotPermitted | ErrorCode::ReadOnly => K::PermissionDenied,
        ErrorCode::Exist => K::AlreadyExists,
        ErrorCode::IsDirectory => K::IsADirectory,
        ErrorCode::NotDirectory => K::NotADirectory,
        ErrorCode::NotEmpty => K::DirectoryNotEmpty,
        ErrorCode::WouldBlock => K::WouldBlock,
        ErrorCode::Interrupted => K::Interrupted,
        ErrorCode::InsufficientSpace => K::StorageFull,
        ErrorCode::Unsupported => K::Unsupported,
        ErrorCode::Invalid => K::InvalidInput,
        _ => K::Other,
    };
    io::Error::new(kind, format!("{} ({})", e.message(), e.name()))
}
