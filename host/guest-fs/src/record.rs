//! The records of a step's journal file and their framing.
//!
//! A journal file is a sequence of frames, appended, never rewritten:
//!
//! ```text
//! "CSJ1" | header length: u32 LE | payload length: u64 LE | header (JSON) | payload | CRC-32 of header ++ payload: u32 LE
//! ```
//!
//! The header is a [`Header`]; the payload is the prior content of a
//! regular file (a [`Header::Pre`] with a [`Prior::File`]), empty
//! otherwise. Reading stops at the first frame that is short, has another
//! magic or a wrong checksum: a torn tail (a frame being written when the
//! power went) is ignored, and an appender truncates it away first.

use crate::beneath::RelPath;
use serde::{Deserialize, Serialize};
use std::fs::File;
use std::io::{self, Read};
use std::os::unix::fs::FileExt;

/// The frame magic.
pub const MAGIC: &[u8; 4] = b"CSJ1";
/// Bytes of a frame besides its header and payload.
pub const FRAME_OVERHEAD: u64 = 4 + 4 + 8 + 4;
/// Largest header read, bytes (a `post` or `left` record lists every path
/// of a step).
pub const MAX_HEADER_BYTES: u32 = 64 * 1024 * 1024;

/// A point in time, seconds and nanoseconds since the epoch.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
pub struct Time {
    /// Seconds.
    pub s: i64,
    /// Nanoseconds.
    pub ns: i64,
}

/// What was at a path before the step's first change to it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Prior {
    /// Nothing.
    Absent,
    /// A regular file: its bytes are the record's payload.
    File {
        /// Permission bits (`st_mode & 0o7777`).
        mode: u32,
        /// Modification time.
        mtime: Time,
        /// Length, bytes.
        len: u64,
    },
    /// A directory (its entries are journaled one by one as they change).
    Dir {
        /// Permission bits.
        mode: u32,
        /// Modification time.
        mtime: Time,
    },
    /// A symbolic link.
    Symlink {
        /// Its target, as written.
        target: String,
    },
}

impl Prior {
    /// A short description for reports: `absent`, `a file (12 bytes)`, ...
    pub fn describe(&self) -> String {
        match self {
            Prior::Absent => "absent".into(),
            Prior::File { len, .. } => format!("a file ({len} bytes)"),
            Prior::Dir { .. } => "a directory".into(),
            Prior::Symlink { target } => format!("a symbolic link to `{target}`"),
        }
    }
}

/// The kind of object at a path, for fingerprints.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Kind {
    /// Nothing there.
    Absent,
    /// A regular file.
    File,
    /// A directory.
    Dir,
    /// A symbolic link.
    Symlink,
    /// Anything else.
    Other,
    /// The path cannot be reached without crossing a link or a non-directory.
    Unreachable,
}

/// What a path held at one moment, enough to tell whether anyone changed
/// it since: the kind, inode, size, permission bits and times (the change
/// time cannot be set from user space, so any write moves it). For a
/// directory only the kind, inode and mode count: its times move with
/// every entry added or removed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Fingerprint {
    /// Kind.
    pub kind: Kind,
    /// Inode.
    #[serde(default)]
    pub ino: u64,
    /// Size, bytes.
    #[serde(default)]
    pub size: u64,
    /// Permission bits.
    #[serde(default)]
    pub mode: u32,
    /// Modification time.
    #[serde(default)]
    pub mtime: Time,
    /// Status change time.
    #[serde(default)]
    pub ctime: Time,
    /// CRC-32 of the bytes of a regular file of at most
    /// [`SUM_MAX_BYTES`], or of a link's target.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sum: Option<u32>,
}

/// Largest file whose bytes a fingerprint sums, bytes (16 MiB): a larger
/// one is compared by inode and times only.
pub const SUM_MAX_BYTES: u64 = 16 * 1024 * 1024;

impl Fingerprint {
    /// The fingerprint of nothing.
    pub const ABSENT: Fingerprint = Fingerprint {
        kind: Kind::Absent,
        ino: 0,
        size: 0,
        mode: 0,
        mtime: Time { s: 0, ns: 0 },
        ctime: Time { s: 0, ns: 0 },
        sum: None,
    };

    /// A path that cannot be reached.
    pub const UNREACHABLE: Fingerprint = Fingerprint {
        kind: Kind::Unreachable,
        ..Fingerprint::ABSENT
    };

    /// True when `self` and `other` hold the same thing: same kind and
    /// permission bits, and for a file or link the same size and bytes (by
    /// their sums, else by inode and times: a write moves the change time).
    /// A directory is the same directory whatever its entries (they are
    /// journaled one by one).
    pub fn same(&self, other: &Fingerprint) -> bool {
        if self.kind != other.kind || self.mode != other.mode {
            return false;
        }
        match self.kind {
            Kind::File | Kind::Symlink => {
                self.size == other.size
                    && match (self.sum, other.sum) {
                        (Some(a), Some(b)) => a == b,
                        _ => {
                            (self.ino, self.mtime, self.ctime)
                                == (other.ino, other.mtime, other.ctime)
                        }
                    }
            }
            Kind::Dir | Kind::Absent | Kind::Unreachable => true,
            Kind::Other => self == other,
        }
    }

    /// A short description for reports.
    pub fn describe(&self) -> String {
        match self.kind {
            Kind::Absent => "nothing".into(),
            Kind::File => format!("a file of {} bytes (inode {})", self.size, self.ino),
            Kind::Dir => format!("a directory (inode {})", self.ino),
            Kind::Symlink => format!("a symbolic link (inode {})", self.ino),
            Kind::Other => "a special file".into(),
            Kind::Unreachable => "a path behind a symbolic link or a file".into(),
        }
    }
}

/// A path beneath a granted directory, as recorded.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct At {
    /// The granted directory, as the policy names it.
    pub root: String,
    /// The path beneath it.
    pub path: RelPath,
}

impl At {
    /// `root/path`, for reports.
    pub fn display(&self) -> String {
        if self.path.as_str().is_empty() {
            self.root.clone()
        } else {
            format!("{}/{}", self.root.trim_end_matches('/'), self.path)
        }
    }
}

/// One record of a journal.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "t", rename_all = "snake_case")]
pub enum Header {
    /// The pre-image of a path, taken before the step's first change to it.
    Pre {
        /// The path.
        at: At,
        /// What was there.
        prior: Prior,
        /// The operation about to change it (for reports): `open for
        /// writing`, `unlink`, ...
        by: String,
        /// `(st_dev, st_ino)` of what was there (absent when nothing was,
        /// and in journals written before it was added): tells a rename
        /// recorded but never done from one done (see `what` in
        /// [`Header::Moved`]).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        id: Option<(u64, u64)>,
    },
    /// A rename about to happen: undone by renaming `to` back to `from`.
    Moved {
        /// The source.
        from: At,
        /// The destination (its own pre-image is the record before).
        to: At,
        /// `(st_dev, st_ino)` of what is moved, when the record was written.
        /// The record is written before the rename: a call stopped between
        /// the two leaves a record of a rename that never happened, told
        /// apart by where this file is at the restore, or by the next record
        /// of the source's path still finding this file there (absent in
        /// journals written before it was added).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        what: Option<(u64, u64)>,
    },
    /// The fingerprints of the step's paths when its call ended.
    Post {
        /// Path → fingerprint.
        fps: Vec<(At, Fingerprint)>,
    },
    /// The start of a restore pass: the paths left alone because someone
    /// else changed them since the step.
    Plan {
        /// Pass number, from 1.
        pass: u32,
        /// Each path left alone, and why.
        conflicts: Vec<(At, String)>,
    },
    /// Record `i` restored in pass `pass`.
    Done {
        /// Pass.
        pass: u32,
        /// Index of the record.
        i: u32,
        /// What was done (for reports).
        action: String,
    },
    /// The end of a pass: what each path holds after it (`None`: left alone).
    Finished {
        /// Pass.
        pass: u32,
        /// True when nothing was left alone and nothing failed.
        clean: bool,
        /// Path → fingerprint after the pass, or `None` when left alone.
        left: Vec<(At, Option<Fingerprint>)>,
    },
}

/// One decoded frame: where it starts, its header, where its payload is.
#[derive(Debug, Clone)]
pub struct Frame {
    /// Offset of the frame in the file.
    pub offset: u64,
    /// The header.
    pub header: Header,
    /// Offset of the payload in the file.
    pub payload_at: u64,
    /// Length of the payload.
    pub payload_len: u64,
}

/// Encode the start of a frame (magic, lengths, header).
///
/// # Errors
/// When the header cannot be serialised.
pub fn frame_head(header: &Header, payload_len: u64) -> io::Result<Vec<u8>> {
    let json = serde_json::to_vec(header).map_err(io::Error::other)?;
    let len = u32::try_from(json.len()).map_err(io::Error::other)?;
    let mut out = Vec::with_capacity(16 + json.len());
    out.extend_from_slice(MAGIC);
    out.extend_from_slice(&len.to_le_bytes());
    out.extend_from_slice(&payload_len.to_le_bytes());
    out.extend_from_slice(&json);
    Ok(out)
}

/// Read every whole frame of `file`; returns them and the offset where the
/// good frames end (anything after is a torn tail).
///
/// # Errors
/// An I/O error reading the file.
pub fn read_frames(file: &File) -> io::Result<(Vec<Frame>, u64)> {
    let size = file.metadata()?.len();
    let mut frames = Vec::new();
    let mut at = 0u64;
    let mut fixed = [0u8; 16];
    while at + FRAME_OVERHEAD <= size {
        file.read_exact_at(&mut fixed, at)?;
        if &fixed[..4] != MAGIC {
            break;
        }
        let hlen = u32::from_le_bytes([fixed[4], fixed[5], fixed[6], fixed[7]]);
        let plen = u64::from_le_bytes([
            fixed[8], fixed[9], fixed[10], fixed[11], fixed[12], fixed[13], fixed[14], fixed[15],
        ]);
        if hlen > MAX_HEADER_BYTES {
            break;
        }
        let Some(end) = (at + 16)
            .checked_add(u64::from(hlen))
            .and_then(|x| x.checked_add(plen))
            .and_then(|x| x.checked_add(4))
        else {
            break;
        };
        if end > size {
            break;
        }
        let mut head = vec![0u8; hlen as usize];
        file.read_exact_at(&mut head, at + 16)?;
        let mut crc = crc32fast::Hasher::new();
        crc.update(&head);
        let payload_at = at + 16 + u64::from(hlen);
        let mut reader = ReadAt {
            file,
            at: payload_at,
            left: plen,
        };
        let mut buf = vec![0u8; 256 * 1024];
        loop {
            let n = reader.read(&mut buf)?;
            if n == 0 {
                break;
            }
            crc.update(&buf[..n]);
        }
        let mut sum = [0u8; 4];
        file.read_exact_at(&mut sum, end - 4)?;
        if crc.finalize() != u32::from_le_bytes(sum) {
            break;
        }
        let Ok(header) = serde_json::from_slice::<Header>(&head) else {
            break;
        };
        frames.push(Frame {
            offset: at,
            header,
            payload_at,
            payload_len: plen,
        });
        at = end;
    }
    Ok((frames, at))
}

/// A reader of `left` bytes of `file` from offset `at`.
pub struct ReadAt<'a> {
    /// The file.
    pub file: &'a File,
    /// Next offset.
    pub at: u64,
    /// Bytes left.
    pub left: u64,
}

impl Read for ReadAt<'_> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        if self.left == 0 {
            return Ok(0);
        }
        let want = buf
            .len()
            .min(usize::try_from(self.left).unwrap_or(usize::MAX));
        let n = self.file.read_at(&mut buf[..want], self.at)?;
        if n == 0 {
            return Err(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                "the journal ends inside a record",
            ));
        }
        self.at += n as u64;
        self.left -= n as u64;
        Ok(n)
    }
}
