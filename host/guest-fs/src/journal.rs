//! The journal of one step: the pre-image of every path the step changes,
//! taken before its first change, made durable, bounded, deduplicated.
//!
//! One file per step, `<state_dir>/fs-journal/<saga id>/<step>.jnl` (the
//! directory mode 0700, the file 0600), appended with the frames of
//! [`crate::record`]. A [`StepJournal`] is opened by the door before a
//! step's `execute` and lent to every call of the step (its attempts, then
//! its compensation): the host's filesystem functions call
//! [`StepJournal::before`] (or [`StepJournal::before_rename`]) with the
//! located path before they change it.
//!
//! - **Durable**: a record that destroys something (the prior content of a
//!   file, a directory, a link, a rename) is synced (`fdatasync`) before the
//!   change is made; one that records an absence (a path the step creates)
//!   is written before the change and synced at the next destructive
//!   record, at a guest's own `sync`, and when the call ends
//!   ([`StepJournal::seal`]), or at once with [`SyncMode::Every`]. Every
//!   record is in the kernel before its change, so a killed process loses
//!   none.
//! - **Bounded**: past the per-call or per-saga cap the change is refused
//!   with [`JournalError::Quota`] and every later change of the call too:
//!   the caller stops the call (`quota-exceeded`); nothing is changed
//!   unjournaled.
//! - **Deduplicated**: a path is journaled once per step; a rename ends
//!   that for the paths under its source and destination (what they name
//!   changed), so a later change to them is journaled again, and a
//!   directory's removal is always journaled (what is restored inside it
//!   later in the history needs it back first).

use crate::beneath::{Located, Roots};
use crate::capture::{CaptureError, Captured, Change, Refusal, capture, still_one_name};
use crate::record::{At, FRAME_OVERHEAD, Frame, Header, Prior, frame_head, read_frames};
use std::collections::{BTreeMap, BTreeSet};
use std::fs::File;
use std::io::{self, Read};
use std::os::unix::fs::{FileExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

/// When a record is synced.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum SyncMode {
    /// Records that destroy something are synced before their change; a
    /// record of an absent path before the next destructive one, a guest's
    /// `sync` and the end of the call.
    #[default]
    Destructive,
    /// Every record is synced before its change.
    Every,
}

/// Where journals live and how big they may grow.
#[derive(Debug, Clone)]
pub struct JournalConfig {
    /// The journal directory (`<state_dir>/fs-journal`).
    pub dir: PathBuf,
    /// Bytes one call may add to a step's journal.
    pub call_cap_bytes: u64,
    /// Bytes the journals of one saga may hold.
    pub saga_cap_bytes: u64,
    /// When records are synced.
    pub sync: SyncMode,
}

/// Why the journal refused or failed.
#[derive(Debug, thiserror::Error)]
pub enum JournalError {
    /// A cap would be passed: the change is refused, the call must stop.
    #[error("{0}")]
    Quota(String),
    /// The journal cannot be written: the change is refused, the call must stop.
    #[error("the host cannot journal the change: {0}")]
    Io(String),
    /// This change cannot be journaled (given to the guest as an error).
    #[error(transparent)]
    Refused(Refusal),
    /// Looking at the path failed as the guest's operation would fail too.
    #[error("{0}")]
    Path(io::Error),
}

use crate::dirs::mkdir_private;
pub use crate::dirs::{prune, remove_saga, step_path};

/// The journal of one step, open for appending.
pub struct StepJournal {
    path: PathBuf,
    file: File,
    end: u64,
    pub(crate) frames: Vec<Frame>,
    pub(crate) roots: Roots,
    seen: BTreeSet<At>,
    cfg: JournalConfig,
    call_bytes: u64,
    saga_bytes: u64,
    dirty: bool,
    stopped: Option<String>,
    pub(crate) seq: u64,
    /// Directories whose new entries (this journal, its saga's directory)
    /// are synced with the journal's first sync.
    unsynced_dirs: Vec<PathBuf>,
    /// Parent directories reached during a restore pass, by (root, path).
    pub(crate) parents: BTreeMap<(String, crate::beneath::RelPath), std::sync::Arc<File>>,
    /// Parents a call's paths were located in, by (the guest's directory,
    /// the path's parent part): see [`StepJournal::locate`].
    pub(crate) located: crate::located::ParentCache,
}

impl std::fmt::Debug for StepJournal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StepJournal")
            .field("path", &self.path)
            .field("records", &self.frames.len())
            .finish()
    }
}

impl StepJournal {
    /// Open (creating it if needed) the journal of step `seq` of `saga_id`
    /// for calls that may change files beneath `roots`. An existing journal
    /// is read (a torn tail cut off) and appended to: its paths stay
    /// journaled.
    ///
    /// # Errors
    /// The I/O error, or a saga id that cannot name a directory.
    pub fn open(
        cfg: &JournalConfig,
        saga_id: &str,
        seq: u64,
        roots: Roots,
    ) -> io::Result<StepJournal> {
        let path = step_path(&cfg.dir, saga_id, seq)?;
        let saga_dir = path.parent().unwrap_or(&cfg.dir).to_path_buf();
        let new_root = !cfg.dir.is_dir();
        let new_dir = !saga_dir.is_dir();
        mkdir_private(&saga_dir)?;
        let new_file = !path.exists();
        let file = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .mode(0o600)
            .custom_flags(rustix::fs::OFlags::NOFOLLOW.bits() as i32)
            .open(&path)?;
        let mut j = Self::from_file(cfg, path, file, roots, seq)?;
        // The new names are made durable with the first sync of the journal.
        if new_file {
            j.unsynced_dirs.push(saga_dir.clone());
        }
        if new_dir {
            j.unsynced_dirs.push(cfg.dir.clone());
        }
        if new_root && let Some(up) = cfg.dir.parent() {
            j.unsynced_dirs.push(up.to_path_buf());
        }
        Ok(j)
    }

    /// Open an existing journal of a step; `None` when the step has none.
    ///
    /// # Errors
    /// The I/O error.
    pub fn reopen(
        cfg: &JournalConfig,
        saga_id: &str,
        seq: u64,
        roots: Roots,
    ) -> io::Result<Option<StepJournal>> {
        let path = step_path(&cfg.dir, saga_id, seq)?;
        let file = match std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .custom_flags(rustix::fs::OFlags::NOFOLLOW.bits() as i32)
            .open(&path)
        {
            Ok(f) => f,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(e),
        };
        Self::from_file(cfg, path, file, roots, seq).map(Some)
    }

    fn from_file(
        cfg: &JournalConfig,
        path: PathBuf,
        file: File,
        roots: Roots,
        seq: u64,
    ) -> io::Result<StepJournal> {
        let (frames, end) = read_frames(&file)?;
        if file.metadata()?.len() > end {
            tracing::warn!(journal = %path.display(), "a torn record at the end of the journal was cut off");
            file.set_len(end)?;
        }
        let mut seen = BTreeSet::new();
        for f in &frames {
            match &f.header {
                Header::Pre { at, .. } => {
                    seen.insert(at.clone());
                }
                Header::Moved { from, to, .. } => forget_under(&mut seen, from, to),
                // A pre-image covers later changes to its path only until
                // its record is undone: once a pass has undone a record (an
                // interrupted pass, resumed) or finished, a change made to
                // the paths later (the tool's compensation, run again) is
                // journaled again, else the rest of the pass would not undo
                // it.
                Header::Done { .. } | Header::Finished { .. } => seen.clear(),
                _ => {}
            }
        }
        let saga_dir = path.parent().map(Path::to_path_buf).unwrap_or_default();
        let others: u64 = std::fs::read_dir(&saga_dir)
            .map(|rd| {
                rd.flatten()
                    .filter(|e| e.path() != path)
                    .filter_map(|e| e.metadata().ok())
                    .map(|m| m.len())
                    .sum()
            })
            .unwrap_or(0);
        Ok(StepJournal {
            path,
            file,
            end,
            frames,
            roots,
            seen,
            cfg: cfg.clone(),
            call_bytes: 0,
            saga_bytes: others + end,
            dirty: false,
            stopped: None,
            seq,
            unsynced_dirs: Vec::new(),
            parents: BTreeMap::new(),
            located: crate::located::ParentCache::default(),
        })
    }

    /// [`crate::beneath::locate`] for a call's path, `dir` being the guest's
    /// directory descriptor, with the parents located earlier in the call
    /// kept (forgotten at every rename or removal); a final link to follow
    /// is always resolved afresh.
    ///
    /// # Errors
    /// As [`crate::beneath::locate`].
    pub fn locate(
        &mut self,
        dir: &std::sync::Arc<File>,
        path: &str,
        follow: bool,
    ) -> Result<Located, crate::beneath::Unlocated> {
        self.located.locate(&self.roots, dir, path, follow)
    }

    /// The granted directories of the calls lent this journal.
    pub fn roots(&self) -> &Roots {
        &self.roots
    }

    /// Replace the granted directories (the compensation's, reopened).
    pub fn set_roots(&mut self, roots: Roots) {
        self.roots = roots;
    }

    /// The journal file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Start a new call: its own byte count, no stop inherited.
    pub fn start_call(&mut self) {
        self.call_bytes = 0;
        self.stopped = None;
        self.located.clear();
    }

    /// Why the current call was stopped, if it was.
    pub fn stopped(&self) -> Option<&str> {
        self.stopped.as_deref()
    }

    /// Number of paths recorded (pre-images and renames).
    pub fn changes(&self) -> usize {
        self.frames
            .iter()
            .filter(|f| matches!(f.header, Header::Pre { .. } | Header::Moved { .. }))
            .count()
    }

    fn at(&self, loc: &Located) -> Result<At, JournalError> {
        let root = self
            .roots
            .at(loc.root)
            .ok_or_else(|| JournalError::Io("a path under no granted directory".into()))?;
        Ok(At {
            root: root.name.clone(),
            path: loc.rel.clone(),
        })
    }

    /// Journal the path `loc` before `change` (nothing when it already is).
    ///
    /// # Errors
    /// [`JournalError`]: `Quota`/`Io` stop the call, `Refused`/`Path`
    /// refuse this change only.
    pub fn before(&mut self, loc: &Located, change: Change) -> Result<(), JournalError> {
        if let Some(why) = &self.stopped {
            return Err(JournalError::Quota(why.clone()));
        }
        if matches!(change, Change::Unlink | Change::RemoveDir) {
            self.located.clear();
        }
        let at = self.at(loc)?;
        // A directory removed is journaled each time: a record taken later
        // inside it (a compensation writing there) needs it back first in
        // the reverse order, even when an earlier record names it.
        if change != Change::RemoveDir && self.seen.contains(&at) {
            // Journaled already, but not a file linked to since.
            return still_one_name(&loc.parent, loc.name(), &at.display(), change)
                .map_err(JournalError::Refused);
        }
        let shown = at.display();
        let Captured { prior, id, content } = capture(&loc.parent, loc.name(), &shown, change)
            .map_err(|e| match e {
                CaptureError::Refused(r) => JournalError::Refused(r),
                CaptureError::Io(e) => JournalError::Path(e),
            })?;
        let destructive = !matches!(prior, Prior::Absent);
        let len = match &prior {
            Prior::File { len, .. } => *len,
            _ => 0,
        };
        let header = Header::Pre {
            at: at.clone(),
            prior,
            by: change.label().into(),
            id,
        };
        self.append(&header, content.map(|f| (f, len)), destructive, &shown)?;
        self.seen.insert(at);
        Ok(())
    }

    /// Journal a rename of `from` onto `to`: the destination's pre-image,
    /// then the rename itself (undone by renaming back). Nothing for a
    /// source that does not exist (the rename will fail) or a rename that
    /// changes nothing (both names of one file).
    ///
    /// # Errors
    /// As [`StepJournal::before`].
    pub fn before_rename(&mut self, from: &Located, to: &Located) -> Result<(), JournalError> {
        if let Some(why) = &self.stopped {
            return Err(JournalError::Quota(why.clone()));
        }
        self.located.clear();
        let src = match rustix::fs::statat(
            &from.parent,
            from.name(),
            rustix::fs::AtFlags::SYMLINK_NOFOLLOW,
        ) {
            Ok(st) => st,
            Err(rustix::io::Errno::NOENT) => return Ok(()),
            Err(e) => return Err(JournalError::Path(e.into())),
        };
        let (from_at, to_at) = (self.at(from)?, self.at(to)?);
        if let Ok(dst) =
            rustix::fs::statat(&to.parent, to.name(), rustix::fs::AtFlags::SYMLINK_NOFOLLOW)
            && (dst.st_dev, dst.st_ino) == (src.st_dev, src.st_ino)
        {
            return Ok(());
        }
        if from_at == to_at || to_at.path.is_within(&from_at.path) && to_at.root == from_at.root {
            // Onto itself or into itself: the rename fails (EINVAL).
            return Ok(());
        }
        use rustix::fs::FileType;
        let ft = FileType::from_raw_mode(src.st_mode);
        if !matches!(
            ft,
            FileType::RegularFile | FileType::Directory | FileType::Symlink
        ) {
            return Err(JournalError::Refused(Refusal::Special(
                from_at.display(),
                "special file",
            )));
        }
        self.before(to, Change::RenameOver)?;
        let header = Header::Moved {
            from: from_at.clone(),
            to: to_at.clone(),
            what: Some((src.st_dev, src.st_ino)),
        };
        self.append(&header, None, true, &from_at.display())?;
        forget_under(&mut self.seen, &from_at, &to_at);
        Ok(())
    }

    /// Append one frame (with `content`'s first `len` bytes as payload),
    /// synced when `destructive` (or always with [`SyncMode::Every`]).
    fn append(
        &mut self,
        header: &Header,
        content: Option<(File, u64)>,
        destructive: bool,
        shown: &str,
    ) -> Result<(), JournalError> {
        let len = content.as_ref().map_or(0, |(_, l)| *l);
        let head = frame_head(header, len).map_err(|e| JournalError::Io(e.to_string()))?;
        let size = head.len() as u64 + len + 4;
        let over = if self.call_bytes + size > self.cfg.call_cap_bytes {
            Some(format!(
                "the host's file journal for this call would pass its cap of {} bytes (policy [fs] journal_call_bytes) at `{shown}`",
                self.cfg.call_cap_bytes
            ))
        } else if self.saga_bytes + size > self.cfg.saga_cap_bytes {
            Some(format!(
                "the host's file journal for this saga would pass its cap of {} bytes (policy [fs] journal_saga_bytes) at `{shown}`",
                self.cfg.saga_cap_bytes
            ))
        } else {
            None
        };
        if let Some(why) = over {
            self.stopped = Some(why.clone());
            return Err(JournalError::Quota(why));
        }
        let start = self.end;
        match self.write_frame(start, &head, content, len) {
            Ok(()) => {}
            Err(e) => {
                let _ = self.file.set_len(start);
                if e.kind() == io::ErrorKind::UnexpectedEof {
                    return Err(JournalError::Refused(Refusal::Raced(shown.to_string())));
                }
                return Err(JournalError::Io(e.to_string()));
            }
        }
        self.end = start + size;
        self.call_bytes += size;
        self.saga_bytes += size;
        self.frames.push(Frame {
            offset: start,
            header: header.clone(),
            payload_at: start + head.len() as u64,
            payload_len: len,
        });
        if destructive || self.cfg.sync == SyncMode::Every {
            self.sync().map_err(|e| JournalError::Io(e.to_string()))?;
        } else {
            self.dirty = true;
        }
        Ok(())
    }

    fn write_frame(
        &self,
        start: u64,
        head: &[u8],
        content: Option<(File, u64)>,
        len: u64,
    ) -> io::Result<()> {
        let mut crc = crc32fast::Hasher::new();
        crc.update(&head[16..]);
        self.file.write_all_at(head, start)?;
        let mut at = start + head.len() as u64;
        if let Some((mut src, _)) = content {
            let mut left = len;
            let mut buf =
                vec![0u8; (256 * 1024).min(usize::try_from(len.max(1)).unwrap_or(usize::MAX))];
            while left > 0 {
                let want = buf.len().min(usize::try_from(left).unwrap_or(usize::MAX));
                let n = src.read(&mut buf[..want])?;
                if n == 0 {
                    return Err(io::Error::new(
                        io::ErrorKind::UnexpectedEof,
                        "the file shrank while it was journaled",
                    ));
                }
                crc.update(&buf[..n]);
                self.file.write_all_at(&buf[..n], at)?;
                at += n as u64;
                left -= n as u64;
            }
        }
        self.file.write_all_at(&crc.finalize().to_le_bytes(), at)?;
        Ok(())
    }

    /// Sync the journal (`fdatasync`; the first sync also syncs the
    /// directories the journal was created in).
    ///
    /// # Errors
    /// The OS error.
    pub fn sync(&mut self) -> io::Result<()> {
        self.file.sync_data()?;
        for d in std::mem::take(&mut self.unsynced_dirs) {
            File::open(&d)?.sync_all()?;
        }
        self.dirty = false;
        Ok(())
    }

    /// Sync the journal if a record is not yet synced (before a guest's own
    /// `sync` makes its change durable).
    ///
    /// # Errors
    /// The OS error.
    pub fn flush(&mut self) -> io::Result<()> {
        if self.dirty { self.sync() } else { Ok(()) }
    }

    /// Append a record without payload (restore progress), synced or not.
    pub(crate) fn note(&mut self, header: &Header, sync: bool) -> io::Result<()> {
        let head = frame_head(header, 0)?;
        let start = self.end;
        let mut crc = crc32fast::Hasher::new();
        crc.update(&head[16..]);
        let mut bytes = head;
        bytes.extend_from_slice(&crc.finalize().to_le_bytes());
        if let Err(e) = self.file.write_all_at(&bytes, start) {
            let _ = self.file.set_len(start);
            return Err(e);
        }
        self.end = start + bytes.len() as u64;
        if matches!(header, Header::Done { .. } | Header::Finished { .. }) {
            // As when the journal is read back (`from_file`).
            self.seen.clear();
        }
        self.frames.push(Frame {
            offset: start,
            header: header.clone(),
            payload_at: self.end - 4,
            payload_len: 0,
        });
        if sync { self.sync() } else { Ok(()) }
    }

    /// The paths the step's records name, in order of first appearance.
    pub fn paths(&self) -> Vec<At> {
        self.paths_of(|_| true)
    }

    /// The paths of the records `keep` accepts (by index).
    pub(crate) fn paths_of(&self, keep: impl Fn(usize) -> bool) -> Vec<At> {
        let mut out = Vec::new();
        let mut have = BTreeSet::new();
        for (i, f) in self.frames.iter().enumerate() {
            if !keep(i) {
                continue;
            }
            let ats: Vec<&At> = match &f.header {
                Header::Pre { at, .. } => vec![at],
                Header::Moved { from, to, .. } => vec![from, to],
                _ => continue,
            };
            for at in ats {
                if have.insert(at.clone()) {
                    out.push(at.clone());
                }
            }
        }
        out
    }

    /// End the step's call: record what each of its paths holds now (what
    /// a rollback compares with, to leave alone what someone else changed
    /// since) and sync the journal. Nothing when nothing was journaled.
    ///
    /// # Errors
    /// The I/O error (the caller must then treat the step as in doubt).
    pub fn seal(&mut self) -> io::Result<()> {
        if self.changes() == 0 {
            return Ok(());
        }
        let paths = self.paths();
        let mut fps = Vec::with_capacity(paths.len());
        self.forget_parents();
        for at in paths {
            let fp = self.look_with(&at, true);
            fps.push((at, fp));
        }
        self.forget_parents();
        self.note(&Header::Post { fps }, true)
    }

    /// The latest post-image fingerprints, by path.
    pub(crate) fn post(&self) -> BTreeMap<At, crate::record::Fingerprint> {
        let mut out = BTreeMap::new();
        for f in &self.frames {
            if let Header::Post { fps } = &f.header {
                out = fps.iter().cloned().collect();
            }
        }
        out
    }

    /// The payload of frame `i`: `len` bytes at its offset.
    pub(crate) fn payload(&self, i: usize) -> Option<(u64, u64)> {
        self.frames.get(i).map(|f| (f.payload_at, f.payload_len))
    }

    /// The journal file, for reading payloads.
    pub(crate) fn file(&self) -> &File {
        &self.file
    }

    /// Bytes of the journal file.
    pub fn bytes(&self) -> u64 {
        self.end
    }
}

/// Forget the paths at or under `a` and `b` (a rename changed what they name).
fn forget_under(seen: &mut BTreeSet<At>, a: &At, b: &At) {
    seen.retain(|x| {
        !((x.root == a.root && x.path.is_within(&a.path))
            || (x.root == b.root && x.path.is_within(&b.path)))
    });
}

/// The overhead of a frame, for size estimates.
pub const RECORD_OVERHEAD: u64 = FRAME_OVERHEAD;
