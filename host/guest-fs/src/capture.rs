//! Looking at one name of an opened directory without following it: its
//! pre-image ([`capture`]) and its fingerprint ([`fingerprint`]).

use crate::beneath::{Roots, Special, walk};
use crate::record::{At, Fingerprint, Kind, Prior, SUM_MAX_BYTES, Time};
use rustix::fs::{AtFlags, FileType, Mode, OFlags, Stat};
use std::fs::File;
use std::io;

/// What a change does to the object at its path, for the hard-link rule.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Change {
    /// Opened for writing (its bytes may change).
    Write,
    /// Opened with truncation.
    Truncate,
    /// Created if absent.
    Create,
    /// Its times set.
    SetTimes,
    /// Its name removed (`unlink-file-at`).
    Unlink,
    /// A directory removed.
    RemoveDir,
    /// A directory created.
    CreateDir,
    /// A symbolic link created.
    Symlink,
    /// A hard link created.
    Link,
    /// The destination of a rename.
    RenameOver,
}

impl Change {
    /// The operation, for reports.
    pub fn label(self) -> &'static str {
        match self {
            Change::Write => "open for writing",
            Change::Truncate => "open with truncation",
            Change::Create => "create",
            Change::SetTimes => "set times",
            Change::Unlink => "unlink",
            Change::RemoveDir => "remove directory",
            Change::CreateDir => "create directory",
            Change::Symlink => "create symbolic link",
            Change::Link => "create hard link",
            Change::RenameOver => "rename onto",
        }
    }

    /// True when the change acts on the object itself (its bytes or
    /// times) rather than on its name: refused for an object with several
    /// names, whose other names the host does not see.
    pub fn acts_on_object(self) -> bool {
        matches!(
            self,
            Change::Write | Change::Truncate | Change::Create | Change::SetTimes
        )
    }
}

/// Why the host refuses a change it cannot journal.
#[derive(Debug, thiserror::Error)]
pub enum Refusal {
    /// A regular file with several names (hard links): writing it would
    /// change files the host does not see, and a restore could not put
    /// them back.
    #[error(
        "`{0}` has {1} names (hard links): the host cannot journal a change to it; write a copy instead"
    )]
    HardLinked(String, u64),
    /// A FIFO, socket or device.
    #[error("`{0}` is a {1}: the host does not change special files while it journals a call")]
    Special(String, &'static str),
    /// A symbolic link whose target is not UTF-8.
    #[error("`{0}` is a symbolic link whose target is not UTF-8")]
    NotUtf8(String),
    /// The object changed while it was looked at (someone else is writing).
    #[error("`{0}` changed while the host journaled it; try again")]
    Raced(String),
}

fn time(s: i64, ns: i64) -> Time {
    Time { s, ns }
}

#[allow(
    clippy::unnecessary_cast,
    reason = "the field types of `struct stat` differ between targets"
)]
fn mtime(st: &Stat) -> Time {
    time(st.st_mtime as i64, st.st_mtime_nsec as i64)
}

#[allow(
    clippy::unnecessary_cast,
    reason = "the field types of `struct stat` differ between targets"
)]
fn ctime(st: &Stat) -> Time {
    time(st.st_ctime as i64, st.st_ctime_nsec as i64)
}

/// The fingerprint of `st`.
pub fn fingerprint_of(st: &Stat) -> Fingerprint {
    let mode = st.st_mode & 0o7777;
    match FileType::from_raw_mode(st.st_mode) {
        FileType::Directory => Fingerprint {
            kind: Kind::Dir,
            ino: st.st_ino,
            mode,
            ..Fingerprint::ABSENT
        },
        ft => Fingerprint {
            kind: match ft {
                FileType::RegularFile => Kind::File,
                FileType::Symlink => Kind::Symlink,
                _ => Kind::Other,
            },
            ino: st.st_ino,
            size: st.st_size as u64,
            mode,
            mtime: mtime(st),
            ctime: ctime(st),
            sum: None,
        },
    }
}

/// What the name `name` of `parent` holds now, not following a final
/// link; with the sum of its bytes when `sum`.
///
/// # Errors
/// An OS error other than absence.
pub fn fingerprint_at(parent: &File, name: &str, sum: bool) -> io::Result<Fingerprint> {
    let st = match rustix::fs::statat(parent, name, AtFlags::SYMLINK_NOFOLLOW) {
        Ok(st) => st,
        Err(rustix::io::Errno::NOENT) => return Ok(Fingerprint::ABSENT),
        Err(e) => return Err(e.into()),
    };
    let mut fp = fingerprint_of(&st);
    if !sum {
        return Ok(fp);
    }
    fp.sum = match fp.kind {
        Kind::File if fp.size <= SUM_MAX_BYTES => sum_file(parent, name, &st),
        Kind::Symlink => rustix::fs::readlinkat(parent, name, Vec::new())
            .ok()
            .map(|t| crc32fast::hash(t.as_bytes())),
        _ => None,
    };
    Ok(fp)
}

/// CRC-32 of the regular file `name` of `parent` (the object `st`
/// describes), not following links; `None` when it cannot be read whole.
fn sum_file(parent: &File, name: &str, st: &Stat) -> Option<u32> {
    use std::io::Read;
    let fd = rustix::fs::openat(
        parent,
        name,
        OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::NONBLOCK | OFlags::NOCTTY | OFlags::CLOEXEC,
        Mode::empty(),
    )
    .ok()?;
    let now = rustix::fs::fstat(&fd).ok()?;
    if (now.st_dev, now.st_ino) != (st.st_dev, st.st_ino) {
        return None;
    }
    let mut f = File::from(fd);
    let mut h = crc32fast::Hasher::new();
    let mut buf = vec![0u8; 64 * 1024];
    let mut total = 0u64;
    loop {
        let n = f.read(&mut buf).ok()?;
        if n == 0 {
            break;
        }
        total += n as u64;
        if total > SUM_MAX_BYTES {
            return None;
        }
        h.update(&buf[..n]);
    }
    Some(h.finalize())
}

/// The fingerprint of a recorded path (with the sum of its bytes when
/// `sum`), reached from its root without following links:
/// [`Fingerprint::UNREACHABLE`] when a directory on the way is now a link
/// or a file, [`Fingerprint::ABSENT`] when one is missing.
pub fn fingerprint(roots: &mut Roots, at: &At, sum: bool) -> Fingerprint {
    let Ok(i) = roots.get_or_open(&at.root) else {
        return Fingerprint::UNREACHABLE;
    };
    let Some(root) = roots.at(i) else {
        return Fingerprint::UNREACHABLE;
    };
    let Some((parent, name)) = at.path.split() else {
        return rustix::fs::fstat(&root.dir)
            .map(|st| fingerprint_of(&st))
            .unwrap_or(Fingerprint::UNREACHABLE);
    };
    match walk(&root.dir, &parent) {
        Ok(dir) => fingerprint_at(&dir, name, sum).unwrap_or(Fingerprint::UNREACHABLE),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Fingerprint::ABSENT,
        Err(_) => Fingerprint::UNREACHABLE,
    }
}

/// Refuse `change` when it acts on the object (its bytes or times) and
/// `st` is a regular file with several names: the host sees one of them.
#[allow(
    clippy::unnecessary_cast,
    reason = "the field types of `struct stat` differ between targets"
)]
fn one_name(st: &Stat, shown: &str, change: Change) -> Result<(), Refusal> {
    if FileType::from_raw_mode(st.st_mode) == FileType::RegularFile
        && st.st_nlink > 1
        && change.acts_on_object()
    {
        return Err(Refusal::HardLinked(shown.to_string(), st.st_nlink as u64));
    }
    Ok(())
}

/// The hard-link rule for a path journaled already: a later change of the
/// same step (a next write of the call, or the tool's own compensation)
/// to what is now a file with several names is refused as the first one
/// would have been, since someone may have linked it meanwhile (to a file
/// outside the grant).
///
/// # Errors
/// [`Refusal::HardLinked`].
pub fn still_one_name(
    parent: &File,
    name: &str,
    shown: &str,
    change: Change,
) -> Result<(), Refusal> {
    if !change.acts_on_object() {
        return Ok(());
    }
    match rustix::fs::statat(parent, name, AtFlags::SYMLINK_NOFOLLOW) {
        Ok(st) => one_name(&st, shown, change),
        // Absent or unreadable: the change itself will fail or create.
        Err(_) => Ok(()),
    }
}

/// A pre-image: what is at the path, and for a regular file the file
/// itself, opened, to copy its bytes from.
pub struct Captured {
    /// What is there.
    pub prior: Prior,
    /// Its `(st_dev, st_ino)` (`None` when absent).
    pub id: Option<(u64, u64)>,
    /// The regular file, opened for reading (not following links).
    pub content: Option<File>,
}

/// Take the pre-image of the name `name` of `parent` (`shown` names it in
/// errors), for `change`. Links are never followed: a symbolic link is
/// recorded as a link.
///
/// # Errors
/// [`CaptureError`].
pub fn capture(
    parent: &File,
    name: &str,
    shown: &str,
    change: Change,
) -> Result<Captured, CaptureError> {
    let st = match rustix::fs::statat(parent, name, AtFlags::SYMLINK_NOFOLLOW) {
        Ok(st) => st,
        Err(rustix::io::Errno::NOENT) => {
            return Ok(Captured {
                prior: Prior::Absent,
                id: None,
                content: None,
            });
        }
        Err(e) => return Err(CaptureError::Io(e.into())),
    };
    let mode = st.st_mode & 0o7777;
    let id = Some((st.st_dev, st.st_ino));
    match FileType::from_raw_mode(st.st_mode) {
        FileType::RegularFile => {
            one_name(&st, shown, change).map_err(CaptureError::Refused)?;
            let fd = rustix::fs::openat(
                parent,
                name,
                OFlags::RDONLY
                    | OFlags::NOFOLLOW
                    | OFlags::NONBLOCK
                    | OFlags::NOCTTY
                    | OFlags::CLOEXEC,
                Mode::empty(),
            )
            .map_err(|e| CaptureError::Io(e.into()))?;
            let now = rustix::fs::fstat(&fd).map_err(|e| CaptureError::Io(e.into()))?;
            if (now.st_dev, now.st_ino) != (st.st_dev, st.st_ino) {
                return Err(CaptureError::Refused(Refusal::Raced(shown.to_string())));
            }
            Ok(Captured {
                prior: Prior::File {
                    mode,
                    mtime: mtime(&now),
                    len: now.st_size as u64,
                },
                id,
                content: Some(File::from(fd)),
            })
        }
        FileType::Directory => Ok(Captured {
            prior: Prior::Dir {
                mode,
                mtime: mtime(&st),
            },
            id,
            content: None,
        }),
        FileType::Symlink => {
            let target = rustix::fs::readlinkat(parent, name, Vec::new())
                .map_err(|e| CaptureError::Io(e.into()))?;
            let target = target
                .into_string()
                .map_err(|_| CaptureError::Refused(Refusal::NotUtf8(shown.to_string())))?;
            Ok(Captured {
                prior: Prior::Symlink { target },
                id,
                content: None,
            })
        }
        other => {
            let special = match other {
                FileType::Fifo => Special::Fifo,
                FileType::Socket => Special::Socket,
                FileType::CharacterDevice => Special::CharDevice,
                FileType::BlockDevice => Special::BlockDevice,
                _ => Special::Other,
            };
            Err(CaptureError::Refused(Refusal::Special(
                shown.to_string(),
                special.as_str(),
            )))
        }
    }
}

/// Why a pre-image could not be taken.
#[derive(Debug, thiserror::Error)]
pub enum CaptureError {
    /// The change is refused (given to the guest).
    #[error(transparent)]
    Refused(Refusal),
    /// An I/O error looking at the path.
    #[error("{0}")]
    Io(io::Error),
}
