//! The host's file journal bound into a call (issue 28): every
//! `wasi:filesystem` function that changes a path journals its pre-image
//! first (`capsaga_guest_fs::journal`), then does what Wasmtime does.
//!
//! How: like [`super::open_at`], the functions of
//! `wasi:filesystem/types` that `wasmtime_wasi::p2::add_to_linker_async`
//! defines are shadowed, each by a function that (when the call holds a
//! journal and the descriptor is writable) locates the path beneath the
//! descriptor as Wasmtime's resolver does, journals it in a blocking task,
//! and then calls Wasmtime's own implementation (`HostDescriptor`), so the
//! operation itself is exactly Wasmtime's. The shadowed functions are the
//! ones WASI 0.2 gives to change a path: `open-at` with `create`,
//! `truncate` or `write` (in `open_at.rs`; writes through the opened
//! descriptor, `set-size` and the streams need nothing more: the open was
//! the moment), `unlink-file-at`, `remove-directory-at`, `rename-at` (both
//! ends), `create-directory-at`, `symlink-at`, `link-at` (the new name),
//! `set-times-at` and `set-times` (by the descriptor's current path);
//! `sync` and `sync-data` sync the journal before the guest's data.
//!
//! What the journal refuses:
//! - past a cap, or when the journal cannot be written, the call is stopped
//!   with a trap carrying [`JournalStop`] (`quota-exceeded` or `unknown`):
//!   nothing further changes, nothing unjournaled;
//! - a change it cannot journal (a file with several hard links written,
//!   a special file, a link leading nowhere written through) is refused
//!   with an error code the guest sees, and not done.

use capsaga_guest_fs::{Change, JournalError, Refusal, StepJournal, Unlocated, locate_open};
use std::sync::{Arc, Mutex};
use wasmtime::component::{Linker, Resource};
use wasmtime_wasi::WasiView;
use wasmtime_wasi::filesystem::{Descriptor, Dir, WasiFilesystemCtxView};
use wasmtime_wasi::p2::FsResult;
use wasmtime_wasi::p2::bindings::filesystem::types::{
    ErrorCode, Host as _, HostDescriptor, NewTimestamp, PathFlags,
};

/// The journal of the step a call belongs to, shared by the call's
/// filesystem functions (one at a time: a guest has one thread).
#[derive(Clone)]
pub struct CallJournal(pub Arc<Mutex<StepJournal>>);

impl CallJournal {
    /// Wrap a step's journal.
    pub fn new(j: StepJournal) -> CallJournal {
        CallJournal(Arc::new(Mutex::new(j)))
    }

    /// Run `f` on the journal.
    ///
    /// # Errors
    /// [`JournalError::Io`] when a thread panicked holding it.
    pub fn with<R>(
        &self,
        f: impl FnOnce(&mut StepJournal) -> Result<R, JournalError>,
    ) -> Result<R, JournalError> {
        let mut g = self
            .0
            .lock()
            .map_err(|_| JournalError::Io("the journal's lock was poisoned".into()))?;
        f(&mut g)
    }
}

impl PartialEq for CallJournal {
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }
}

impl std::fmt::Debug for CallJournal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("CallJournal")
    }
}

/// Why the host stopped a call whose journal refused to go on: the trap's
/// error, read back by `sandbox::outcome` (`quota-exceeded` when `quota`).
#[derive(Debug, Clone, thiserror::Error)]
#[error("{message}")]
pub struct JournalStop {
    /// A cap was reached (else the journal could not be written).
    pub quota: bool,
    /// Why.
    pub message: String,
}

/// A store whose calls may hold a journal.
pub trait JournalView: WasiView + Send {
    /// The call's journal, if its files are journaled.
    fn fs_journal(&self) -> Option<CallJournal>;
}

/// The interface whose functions are shadowed (see [`super::open_at`]).
use super::open_at::FILESYSTEM_TYPES;

/// What a journaled function does after asking the journal.
pub(crate) enum Verdict {
    /// Journaled (or nothing to journal): do the operation.
    Go,
    /// Refused: give the guest this error, do nothing.
    Guest(ErrorCode),
    /// Stop the call.
    Stop(wasmtime::Error),
}

enum Blocked {
    Unlocated(Unlocated),
    Journal(JournalError),
}

impl From<Unlocated> for Blocked {
    fn from(e: Unlocated) -> Self {
        Blocked::Unlocated(e)
    }
}

impl From<JournalError> for Blocked {
    fn from(e: JournalError) -> Self {
        Blocked::Journal(e)
    }
}

fn verdict(r: Result<(), Blocked>) -> Verdict {
    match r {
        Ok(()) => Verdict::Go,
        Err(Blocked::Unlocated(Unlocated::Io(e))) => Verdict::Guest(ErrorCode::from(&e)),
        Err(Blocked::Unlocated(u)) => {
            tracing::info!("file change refused: {u}");
            Verdict::Guest(ErrorCode::NotPermitted)
        }
        Err(Blocked::Journal(JournalError::Path(e))) => Verdict::Guest(ErrorCode::from(&e)),
        Err(Blocked::Journal(JournalError::Refused(r))) => {
            tracing::info!("file change refused: {r}");
            Verdict::Guest(match r {
                Refusal::HardLinked(..) => ErrorCode::NotPermitted,
                Refusal::Special(..) => ErrorCode::Unsupported,
                Refusal::NotUtf8(_) => ErrorCode::IllegalByteSequence,
                Refusal::Raced(_) => ErrorCode::Busy,
            })
        }
        Err(Blocked::Journal(JournalError::Quota(message))) => {
            Verdict::Stop(wasmtime::Error::new(JournalStop {
                quota: true,
                message,
            }))
        }
        Err(Blocked::Journal(JournalError::Io(message))) => {
            Verdict::Stop(wasmtime::Error::new(JournalStop {
                quota: false,
                message,
            }))
        }
    }
}

/// Journal `path` beneath `dir` before `change` (following a final link
/// when `follow`).
pub(crate) async fn journal_path(
    j: CallJournal,
    dir: Dir,
    path: String,
    change: Change,
    follow: bool,
) -> Verdict {
    wasmtime_wasi::runtime::spawn_blocking(move || journal_now(&j, &dir, &path, change, follow))
        .await
}

/// [`journal_path`] on the current thread (already a blocking one).
pub(crate) fn journal_now(
    j: &CallJournal,
    dir: &Dir,
    path: &str,
    change: Change,
    follow: bool,
) -> Verdict {
    let r = j
        .with(|g| Ok(g.locate(&dir.dir, path, follow)))
        .map_err(Blocked::from)
        .and_then(|l| l.map_err(Blocked::from))
        .and_then(|loc| j.with(|g| g.before(&loc, change)).map_err(Blocked::from));
    verdict(r)
}

/// The writable directory behind `fd` when the call journals (`None`: no
/// journal, a read-only preopen, or not a directory: Wasmtime's own
/// function refuses or does it unjournaled-safe).
fn writable_dir<T: JournalView>(
    data: &mut T,
    fd: &Resource<Descriptor>,
) -> wasmtime::Result<Option<(CallJournal, Dir)>> {
    let Some(j) = data.fs_journal() else {
        return Ok(None);
    };
    match data.ctx().table.get(fd)? {
        Descriptor::Dir(d) if !d.perms.write_not_permitted() => Ok(Some((j, d.clone()))),
        _ => Ok(None),
    }
}

/// Journal `path` of `fd` for `change`: `Ok(Some(code))` when refused.
async fn guard<T: JournalView>(
    data: &mut T,
    fd: &Resource<Descriptor>,
    path: &str,
    change: Change,
    follow: bool,
) -> wasmtime::Result<Option<ErrorCode>> {
    let Some((j, dir)) = writable_dir(data, fd)? else {
        return Ok(None);
    };
    match journal_path(j, dir, path.to_string(), change, follow).await {
        Verdict::Go => Ok(None),
        Verdict::Guest(code) => Ok(Some(code)),
        Verdict::Stop(e) => Err(e),
    }
}

/// Journal the object an opened descriptor names (by its current path).
async fn guard_open<T: JournalView>(
    data: &mut T,
    fd: &Resource<Descriptor>,
    change: Change,
) -> wasmtime::Result<Option<ErrorCode>> {
    let Some(j) = data.fs_journal() else {
        return Ok(None);
    };
    let (file, perms) = match data.ctx().table.get(fd)? {
        Descriptor::File(f) => (f.file.clone(), f.perms),
        Descriptor::Dir(d) => (d.dir.clone(), d.perms),
    };
    if perms.write_not_permitted() {
        return Ok(None);
    }
    let r = wasmtime_wasi::runtime::spawn_blocking(move || -> Result<(), Blocked> {
        let loc = j.with(|g| Ok(locate_open(g.roots(), &file)))??;
        match loc {
            Some(loc) => j.with(|g| g.before(&loc, change)).map_err(Blocked::from),
            // A granted directory itself: its own times are not journaled.
            None => Ok(()),
        }
    })
    .await;
    match verdict(r) {
        Verdict::Go => Ok(None),
        Verdict::Guest(code) => Ok(Some(code)),
        Verdict::Stop(e) => Err(e),
    }
}

/// Wasmtime's filesystem view of the store.
fn fs<T: WasiView>(data: &mut T) -> WasiFilesystemCtxView<'_> {
    let v = data.ctx();
    WasiFilesystemCtxView {
        ctx: v.ctx.filesystem(),
        table: v.table,
    }
}

/// Wasmtime's result as the function's return value.
fn lift<T: WasiView, R>(data: &mut T, r: FsResult<R>) -> wasmtime::Result<Result<R, ErrorCode>> {
    match r {
        Ok(v) => Ok(Ok(v)),
        Err(e) => Ok(Err(fs(data).convert_error_code(e)?)),
    }
}

type Rsrc = Resource<Descriptor>;

/// Shadow the path-changing functions of `wasi:filesystem/types` in
/// `linker` (after `add_to_linker_async`) with journaling ones.
///
/// # Errors
/// When the linker refuses a definition.
#[allow(
    clippy::too_many_lines,
    reason = "one definition per shadowed function, each short"
)]
pub fn shadow<T: JournalView + 'static>(linker: &mut Linker<T>) -> wasmtime::Result<()> {
    linker.allow_shadowing(true);
    let defined = (|| -> wasmtime::Result<()> {
        let mut types = linker.instance(FILESYSTEM_TYPES)?;
        types.func_wrap_async(
            "[method]descriptor.unlink-file-at",
            |mut store, (fd, path): (Rsrc, String)| {
                Box::new(async move {
                    let d = store.data_mut();
                    if let Some(code) = guard(d, &fd, &path, Change::Unlink, false).await? {
                        return Ok((Err(code),));
                    }
                    let r = fs(d).unlink_file_at(fd, path).await;
                    Ok((lift(d, r)?,))
                })
            },
        )?;
        types.func_wrap_async(
            "[method]descriptor.remove-directory-at",
            |mut store, (fd, path): (Rsrc, String)| {
                Box::new(async move {
                    let d = store.data_mut();
                    if let Some(code) = guard(d, &fd, &path, Change::RemoveDir, false).await? {
                        return Ok((Err(code),));
                    }
                    let r = fs(d).remove_directory_at(fd, path).await;
                    Ok((lift(d, r)?,))
                })
            },
        )?;
        types.func_wrap_async(
            "[method]descriptor.create-directory-at",
            |mut store, (fd, path): (Rsrc, String)| {
                Box::new(async move {
                    let d = store.data_mut();
                    if let Some(code) = guard(d, &fd, &path, Change::CreateDir, false).await? {
                        return Ok((Err(code),));
                    }
                    let r = fs(d).create_directory_at(fd, path).await;
                    Ok((lift(d, r)?,))
                })
            },
        )?;
        types.func_wrap_async(
            "[method]descriptor.symlink-at",
            |mut store, (fd, src, dest): (Rsrc, String, String)| {
                Box::new(async move {
                    let d = store.data_mut();
                    if let Some(code) = guard(d, &fd, &dest, Change::Symlink, false).await? {
                        return Ok((Err(code),));
                    }
                    let r = fs(d).symlink_at(fd, src, dest).await;
                    Ok((lift(d, r)?,))
                })
            },
        )?;
        types.func_wrap_async(
            "[method]descriptor.link-at",
            |mut store,
             (fd, old_flags, old, new_fd, new): (Rsrc, PathFlags, String, Rsrc, String)| {
                Box::new(async move {
                    let d = store.data_mut();
                    if let Some(code) = guard(d, &new_fd, &new, Change::Link, false).await? {
                        return Ok((Err(code),));
                    }
                    let r = fs(d).link_at(fd, old_flags, old, new_fd, new).await;
                    Ok((lift(d, r)?,))
                })
            },
        )?;
        types.func_wrap_async(
            "[method]descriptor.rename-at",
            |mut store, (fd, old, new_fd, new): (Rsrc, String, Rsrc, String)| {
                Box::new(async move {
                    let d = store.data_mut();
                    if let Some(code) = guard_rename(d, &fd, &old, &new_fd, &new).await? {
                        return Ok((Err(code),));
                    }
                    let r = fs(d).rename_at(fd, old, new_fd, new).await;
                    Ok((lift(d, r)?,))
                })
            },
        )?;
        types.func_wrap_async(
            "[method]descriptor.set-times-at",
            |mut store,
             (fd, flags, path, atim, mtim): (
                Rsrc,
                PathFlags,
                String,
                NewTimestamp,
                NewTimestamp,
            )| {
                Box::new(async move {
                    let d = store.data_mut();
                    let follow = flags.contains(PathFlags::SYMLINK_FOLLOW);
                    if let Some(code) = guard(d, &fd, &path, Change::SetTimes, follow).await? {
                        return Ok((Err(code),));
                    }
                    let r = fs(d).set_times_at(fd, flags, path, atim, mtim).await;
                    Ok((lift(d, r)?,))
                })
            },
        )?;
        types.func_wrap_async(
            "[method]descriptor.set-times",
            |mut store, (fd, atim, mtim): (Rsrc, NewTimestamp, NewTimestamp)| {
                Box::new(async move {
                    let d = store.data_mut();
                    if let Some(code) = guard_open(d, &fd, Change::SetTimes).await? {
                        return Ok((Err(code),));
                    }
                    let r = fs(d).set_times(fd, atim, mtim).await;
                    Ok((lift(d, r)?,))
                })
            },
        )?;
        types.func_wrap_async("[method]descriptor.sync", |mut store, (fd,): (Rsrc,)| {
            Box::new(async move {
                let d = store.data_mut();
                flush(d).await?;
                let r = fs(d).sync(fd).await;
                Ok((lift(d, r)?,))
            })
        })?;
        types.func_wrap_async(
            "[method]descriptor.sync-data",
            |mut store, (fd,): (Rsrc,)| {
                Box::new(async move {
                    let d = store.data_mut();
                    flush(d).await?;
                    let r = fs(d).sync_data(fd).await;
                    Ok((lift(d, r)?,))
                })
            },
        )?;
        Ok(())
    })();
    linker.allow_shadowing(false);
    defined
}

/// Journal both ends of a rename.
async fn guard_rename<T: JournalView>(
    data: &mut T,
    fd: &Rsrc,
    old: &str,
    new_fd: &Rsrc,
    new: &str,
) -> wasmtime::Result<Option<ErrorCode>> {
    let (Some((j, from_dir)), Some((_, to_dir))) =
        (writable_dir(data, fd)?, writable_dir(data, new_fd)?)
    else {
        return Ok(None);
    };
    let (old, new) = (old.to_string(), new.to_string());
    let r = wasmtime_wasi::runtime::spawn_blocking(move || -> Result<(), Blocked> {
        let from = j.with(|g| Ok(g.locate(&from_dir.dir, &old, false)))??;
        let to = j.with(|g| Ok(g.locate(&to_dir.dir, &new, false)))??;
        j.with(|g| g.before_rename(&from, &to))
            .map_err(Blocked::from)
    })
    .await;
    match verdict(r) {
        Verdict::Go => Ok(None),
        Verdict::Guest(code) => Ok(Some(code)),
        Verdict::Stop(e) => Err(e),
    }
}

/// Sync the journal before a guest's own sync makes its change durable.
async fn flush<T: JournalView>(data: &mut T) -> wasmtime::Result<()> {
    let Some(j) = data.fs_journal() else {
        return Ok(());
    };
    let r = wasmtime_wasi::runtime::spawn_blocking(move || {
        j.with(|g| g.flush().map_err(|e| JournalError::Io(e.to_string())))
    })
    .await;
    match verdict(r.map_err(Blocked::from)) {
        Verdict::Stop(e) => Err(e),
        _ => Ok(()),
    }
}
