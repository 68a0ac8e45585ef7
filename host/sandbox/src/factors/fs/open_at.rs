//! The guest's `open-at`, refusing everything that is neither a regular file
//! nor a directory: FIFOs, sockets, character and block devices (issue 13).
//!
//! Why: Wasmtime's WASI opens a path with a blocking `openat` on a
//! `spawn_blocking` thread. Opening a FIFO for reading blocks until a writer
//! appears, which may be never; epoch interruption cannot stop a blocked host
//! call, so the call's deadline fires but the thread stays in `open`, and the
//! process cannot exit while it does (one more thread per call of an agent
//! turn). A device can also block, or act, on open.
//!
//! How: the host function `wasi:filesystem/types.[method]descriptor.open-at`
//! that `wasmtime_wasi::p2::add_to_linker_async` defines is shadowed by
//! [`shadow_open_at`] with [`open_at`], which does what Wasmtime 48's
//! `Dir::open_at` does (same flags, same read-only enforcement, same
//! confinement: `cap_primitives::fs::open` resolves the path beneath the
//! directory, as Wasmtime's copy of it does) with two differences:
//!
//! 1. the file is opened with `O_NONBLOCK | O_NOCTTY`, so opening a FIFO or a
//!    device returns at once instead of waiting, and a terminal never becomes
//!    the host's controlling terminal;
//! 2. the opened descriptor's type (`fstat`, race-free: it is the object
//!    opened, not a second lookup of the path) must be a regular file or a
//!    directory; anything else is closed and the guest gets `unsupported`
//!    (`ENOTSUP`). `O_NONBLOCK` is then cleared, so reads and writes behave
//!    as usual.
//!
//! When the call's files are journaled (issue 28, [`super::journal`]), an
//! open that may change the file (`create`, `truncate`, `write`) journals
//! the path's pre-image before it opens: every later write through the
//! descriptor, its streams and `set-size` change only a journaled file.
//!
//! Every other filesystem function is Wasmtime's: none of them opens a path
//! (`stat-at`, `readlink-at`, `metadata-hash-at`, ... do not block on a FIFO),
//! and the streams of a descriptor only ever see files opened here or the
//! preopened directories.

use super::journal::{CallJournal, JournalView, Verdict, journal_now};
use capsaga_guest_fs::Change;
use std::io;
use wasmtime::component::{Linker, Resource};
use wasmtime_wasi::OpenMode;
use wasmtime_wasi::filesystem::{Descriptor, Dir, File};
use wasmtime_wasi::p2::bindings::filesystem::types::{
    DescriptorFlags, ErrorCode, OpenFlags, PathFlags,
};

/// The interface whose `open-at` is shadowed: the version of `wasi:filesystem`
/// that `wasmtime-wasi` 48 implements (guests importing any 0.2.x version
/// are linked to it by semver).
pub const FILESYSTEM_TYPES: &str = "wasi:filesystem/types@0.2.12";
/// The function shadowed.
pub const OPEN_AT: &str = "[method]descriptor.open-at";

/// What [`open_at`] found at the path, when it refused it (the shared
/// classification of `capsaga_guest_fs::beneath`).
pub use capsaga_guest_fs::beneath::Special;

/// Redefine `open-at` in `linker` (after `add_to_linker_async`) with
/// [`open_at`].
///
/// # Errors
/// When the linker refuses the definition.
pub fn shadow_open_at<T: JournalView + 'static>(linker: &mut Linker<T>) -> wasmtime::Result<()> {
    linker.allow_shadowing(true);
    let defined = linker.instance(FILESYSTEM_TYPES).and_then(|mut types| {
        types.func_wrap_async(
            OPEN_AT,
            |mut store,
             (fd, path_flags, path, oflags, flags): (
                Resource<Descriptor>,
                PathFlags,
                String,
                OpenFlags,
                DescriptorFlags,
            )| {
                Box::new(async move {
                    let dir = match store.data_mut().ctx().table.get(&fd)? {
                        Descriptor::Dir(d) => d.clone(),
                        Descriptor::File(_) => return Ok((Err(ErrorCode::NotDirectory),)),
                    };
                    // The journal first, in the same blocking task as the open.
                    let journal = store
                        .data()
                        .fs_journal()
                        .and_then(|j| changes(&dir, oflags, flags).map(|c| (j, c)));
                    let opened =
                        match open_journaled(dir, path_flags, path, oflags, flags, journal).await {
                            Ok(d) => d,
                            Err(Verdict::Guest(code)) => return Ok((Err(code),)),
                            Err(Verdict::Stop(e)) => return Err(e),
                            Err(Verdict::Go) => return Ok((Err(ErrorCode::Io),)),
                        };
                    let fd = store.data_mut().ctx().table.push(opened)?;
                    Ok((Ok(fd),))
                })
            },
        )
    });
    linker.allow_shadowing(false);
    defined
}

/// What an open with these flags may do to the file, for the journal:
/// `None` when it cannot change it (read-only, a read-only preopen, or a
/// directory, which cannot be opened for writing).
fn changes(dir: &Dir, oflags: OpenFlags, flags: DescriptorFlags) -> Option<Change> {
    if dir.perms.write_not_permitted() || oflags.contains(OpenFlags::DIRECTORY) {
        return None;
    }
    if oflags.contains(OpenFlags::TRUNCATE) {
        Some(Change::Truncate)
    } else if oflags.contains(OpenFlags::CREATE) {
        Some(Change::Create)
    } else if flags.contains(DescriptorFlags::WRITE) {
        Some(Change::Write)
    } else {
        None
    }
}

/// [`open_at`], journaling the path first (in the same blocking task) when
/// `journal` says the open may change it.
///
/// # Errors
/// The journal's refusal or stop, or the open's error code as
/// `Verdict::Guest`.
async fn open_journaled(
    dir: Dir,
    path_flags: PathFlags,
    path: String,
    oflags: OpenFlags,
    flags: DescriptorFlags,
    journal: Option<(CallJournal, Change)>,
) -> Result<Descriptor, Verdict> {
    let before: Option<BeforeOpen> = journal.map(|(j, change)| {
        let (dir, path) = (dir.clone(), path.clone());
        let follow = path_flags.contains(PathFlags::SYMLINK_FOLLOW);
        Box::new(move || journal_now(&j, &dir, &path, change, follow)) as BeforeOpen
    });
    open_at_with(dir, path_flags, path, oflags, flags, before).await
}

/// What runs before the open, in its blocking task.
type BeforeOpen = Box<dyn FnOnce() -> Verdict + Send>;

/// Open `path` beneath `dir` as Wasmtime's `open-at` does, refusing FIFOs,
/// sockets and devices without blocking (see the module documentation).
///
/// # Errors
/// The WASI error code: `not-permitted` for a write on a read-only preopen,
/// `unsupported` for a special file, `not-directory` when a directory was
/// required, or the OS error of the open (`no-entry`, `loop`, ...; an
/// escape from the directory is `not-permitted`, as in Wasmtime).
pub async fn open_at(
    dir: Dir,
    path_flags: PathFlags,
    path: String,
    oflags: OpenFlags,
    flags: DescriptorFlags,
) -> Result<Descriptor, ErrorCode> {
    open_at_with(dir, path_flags, path, oflags, flags, None)
        .await
        .map_err(|v| match v {
            Verdict::Guest(code) => code,
            _ => ErrorCode::Io,
        })
}

async fn open_at_with(
    dir: Dir,
    path_flags: PathFlags,
    path: String,
    oflags: OpenFlags,
    flags: DescriptorFlags,
    before: Option<BeforeOpen>,
) -> Result<Descriptor, Verdict> {
    let (opts, open_mode, create) = options(path_flags, oflags, flags).map_err(Verdict::Guest)?;
    if dir.perms.write_not_permitted() && (create || open_mode.contains(OpenMode::WRITE)) {
        return Err(Verdict::Guest(ErrorCode::NotPermitted));
    }
    let parent = dir.dir.clone();
    let want_dir = oflags.contains(OpenFlags::DIRECTORY);
    let shown = path.chars().take(200).collect::<String>();
    let opened = wasmtime_wasi::runtime::spawn_blocking(move || {
        if let Some(before) = before {
            match before() {
                Verdict::Go => {}
                refused => return Err(refused),
            }
        }
        opened(&parent, &path, &opts).map_err(|e| Verdict::Guest(ErrorCode::from(e)))
    })
    .await?;
    match opened {
        Err(special) => {
            tracing::info!("open-at refused `{shown}`: a {}", special.as_str());
            Err(Verdict::Guest(ErrorCode::Unsupported))
        }
        Ok((file, true)) => Ok(Descriptor::Dir(Dir::new(file, dir.perms, open_mode, false))),
        Ok(_) if want_dir => Err(Verdict::Guest(ErrorCode::NotDirectory)),
        Ok((file, false)) => Ok(Descriptor::File(File::new(
            file, dir.perms, open_mode, false,
        ))),
    }
}

/// The blocking open of [`open_at`]: the file and whether it is a
/// directory, or the special kind refused.
fn opened(
    parent: &std::fs::File,
    path: &str,
    opts: &cap_primitives::fs::OpenOptions,
) -> io::Result<Result<(std::fs::File, bool), Special>> {
    let file = match cap_primitives::fs::open(parent, path.as_ref(), opts) {
        // ENXIO at open: a socket, a FIFO opened for writing without a
        // reader, a device without a driver: special files all.
        Err(e) if e.raw_os_error() == Some(rustix::io::Errno::NXIO.raw_os_error()) => {
            return Ok(Err(Special::Other));
        }
        opened => opened?,
    };
    let ft = file.metadata()?.file_type();
    if let Some(special) = Special::of(&ft) {
        return Ok(Err(special));
    }
    capsaga_guest_fs::beneath::clear_nonblocking(&file)?;
    Ok(Ok((file, ft.is_dir())))
}

/// The OS open options, the open mode recorded in the descriptor, and
/// whether the call may create: Wasmtime 48's rules, plus `O_NONBLOCK` and
/// `O_NOCTTY`.
fn options(
    path_flags: PathFlags,
    oflags: OpenFlags,
    flags: DescriptorFlags,
) -> Result<(cap_primitives::fs::OpenOptions, OpenMode, bool), ErrorCode> {
    use cap_primitives::fs::{FollowSymlinks, OpenOptions, OpenOptionsExt};
    let mut opts = OpenOptions::new();
    let mut open_mode = OpenMode::empty();
    let create = oflags.contains(OpenFlags::CREATE);
    if create {
        if oflags.contains(OpenFlags::EXCLUSIVE) {
            opts.create_new(true);
        } else {
            opts.create(true);
        }
        opts.write(true);
        open_mode |= OpenMode::WRITE;
    }
    if oflags.contains(OpenFlags::TRUNCATE) {
        opts.truncate(true).write(true);
        open_mode |= OpenMode::WRITE;
    }
    if flags.contains(DescriptorFlags::READ) {
        opts.read(true);
        open_mode |= OpenMode::READ;
    }
    if flags.contains(DescriptorFlags::WRITE) {
        opts.write(true);
        open_mode |= OpenMode::WRITE;
    } else {
        // As Wasmtime: open for reading at least, the permissions decide the rest.
        opts.read(true);
        open_mode |= OpenMode::READ;
    }
    // The public entry points cap-fs-ext uses for these two options.
    opts._cap_fs_ext_follow(if path_flags.contains(PathFlags::SYMLINK_FOLLOW) {
        FollowSymlinks::Yes
    } else {
        FollowSymlinks::No
    });
    opts._cap_fs_ext_nonblock(true);
    if flags.contains(DescriptorFlags::FILE_INTEGRITY_SYNC)
        || flags.contains(DescriptorFlags::DATA_INTEGRITY_SYNC)
        || flags.contains(DescriptorFlags::REQUESTED_WRITE_SYNC)
    {
        return Err(ErrorCode::Unsupported);
    }
    if oflags.contains(OpenFlags::DIRECTORY)
        && (create || oflags.contains(OpenFlags::EXCLUSIVE) || oflags.contains(OpenFlags::TRUNCATE))
    {
        return Err(ErrorCode::Invalid);
    }
    opts.custom_flags(rustix::fs::OFlags::NOCTTY.bits() as i32);
    Ok((opts, open_mode, create))
}
