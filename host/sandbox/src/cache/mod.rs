//! The compiled-component cache: native code produced by Wasmtime for a
//! component, kept on disk so that a second start does not compile again.
//!
//! Loading a compiled component means mapping native code into the process
//! (`Component::deserialize` is `unsafe` for that reason), so the cache only
//! ever loads files this host wrote itself:
//! - the directory (`<state_dir>/compiled/`) is created with mode 0700, and is
//!   used only when it is a real directory (not a symbolic link) owned by the
//!   host's effective user and not writable by group or others; otherwise the
//!   cache is disabled with a warning and components are compiled each time;
//! - files are opened relative to that directory's descriptor without
//!   following symbolic links, and must be regular files with one link,
//!   owned by the host's user, not writable by group or others;
//! - a file is `<content sha256>-<engine key>.cwasm`: the payload written by
//!   `Component::serialize`, then a trailer naming the component's content
//!   hash and the engine key (a hash of Wasmtime's version and every
//!   compilation setting), with the BLAKE3 hash of the payload (`entry.rs`).
//!   A file whose trailer or checksum does not match, or that Wasmtime
//!   refuses as incompatible, is not loaded: the component is compiled again
//!   and the file replaced. A checked file is mapped by Wasmtime from the
//!   descriptor the checks were made on (`/proc/self/fd`), not copied;
//! - files are written under a temporary name (created exclusively, mode
//!   0600), synced, then renamed into place, so a reader never sees half a
//!   file.
//!
//! - a component missing from the cache is compiled by one process at a
//!   time: a compiler holds an exclusive `flock` on `.<entry>.lock` (a file
//!   in the same directory, opened without following links), and a process
//!   that finds the lock taken waits for it, then loads what the other one
//!   stored instead of compiling too ([`CompiledCache::load_or_compile`]).
//!   The kernel drops the lock when its holder exits, even by SIGKILL; a
//!   wait longer than [`COMPILE_WAIT`] compiles without the lock.
//!
//! - next to a compiled file, the component's meta (`meta.rs`), so a later
//!   start loads the tool without compiling it and its first call compiles
//!   it (`sandbox::prepared`, [`CacheOutcome::Deferred`]).
//!
//! Another local user therefore cannot plant native code: they cannot create
//! entries in the directory, and any entry they could have made earlier (a
//! directory left open) is refused on ownership or mode. A process running
//! as the host's own user is out of scope: it could replace the binary.

use capsaga_core::idempotency::sha256_hex;
use sha2::{Digest, Sha256};
use std::path::{Path, PathBuf};
use wasmtime::Engine;
use wasmtime::component::Component;

const HASH_HEX: usize = 64;
const ENGINE_KEY_HEX: usize = 32;
/// Largest cache file read, bytes.
const MAX_FILE_BYTES: u64 = 1024 * 1024 * 1024;
/// Longest wait for another process compiling the same component, before
/// compiling it here too.
pub const COMPILE_WAIT: std::time::Duration = std::time::Duration::from_secs(180);

/// What the cache did for one component.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
#[serde(tag = "cache", rename_all = "kebab-case")]
pub enum CacheOutcome {
    /// No cache configured (or it was disabled at start): compiled.
    Disabled,
    /// Loaded from the cache: not compiled.
    Hit,
    /// Not in the cache: compiled, and stored.
    Miss,
    /// Its meta was in the cache: loaded without compiling; compiled
    /// (through the cache) by its first call.
    Deferred,
    /// A cache file was there but not loaded (corrupt, stale, or not
    /// trusted): compiled, and the file replaced.
    Rejected {
        /// Why the file was not loaded.
        reason: String,
    },
}

/// Why the cache directory cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum CacheError {
    /// The directory could not be created or opened.
    #[error("cannot open the compiled-component cache {dir}: {error}")]
    Open {
        /// The directory.
        dir: PathBuf,
        /// The OS error.
        error: String,
    },
    /// The directory is not safe to load native code from.
    #[error("the compiled-component cache {dir} is not used: {reason}")]
    Untrusted {
        /// The directory.
        dir: PathBuf,
        /// What is wrong with it.
        reason: String,
    },
}

/// The on-disk cache of compiled components for one engine configuration.
#[derive(Debug)]
pub struct CompiledCache {
    dir: PathBuf,
    engine_key: String,
    #[cfg(unix)]
    dirfd: std::os::fd::OwnedFd,
}

/// The lock on compiling one cache entry ([`CompiledCache::lock_compile`]);
/// released when dropped (the descriptor closed), or by the kernel when the
/// process dies.
#[derive(Debug)]
pub struct CompileLock {
    #[cfg(unix)]
    _fd: std::os::fd::OwnedFd,
}

/// A stable key for the engine's compilation settings and Wasmtime version:
/// the first 16 bytes of a SHA-256 over Wasmtime's compatibility hash.
pub fn engine_key(engine: &Engine) -> String {
    struct ShaHasher(Sha256);
    impl std::hash::Hasher for ShaHasher {
        fn finish(&self) -> u64 {
            0
        }
        fn write(&mut self, bytes: &[u8]) {
            self.0.update(bytes);
        }
    }
    let mut h = ShaHasher(Sha256::new());
    std::hash::Hash::hash(&engine.precompile_compatibility_hash(), &mut h);
    hex::encode(&h.0.finalize()[..ENGINE_KEY_HEX / 2])
}

fn is_hash(s: &str) -> bool {
    s.len() == HASH_HEX
        && s.bytes()
            .all(|b| b.is_ascii_hexdigit() && !b.is_ascii_uppercase())
}

#[cfg(unix)]
mod fs {
    //! The few system calls the cache needs, relative to the directory's
    //! descriptor and never following symbolic links.
    use rustix::fs::{Mode, OFlags};
    use std::os::fd::{AsFd, OwnedFd};

    /// Check that `fd` is owned by the effective user and not writable by
    /// group or others; `what` names it in the error.
    pub fn check_owner(st: &rustix::fs::Stat, what: &str) -> Result<(), String> {
        let euid = rustix::process::geteuid().as_raw();
        if st.st_uid != euid {
            return Err(format!(
                "{what} is owned by uid {}, not by this host's uid {euid}",
                st.st_uid
            ));
        }
        if st.st_mode & 0o022 != 0 {
            return Err(format!(
                "{what} is writable by group or others (mode {:o})",
                st.st_mode & 0o7777
            ));
        }
        Ok(())
    }

    pub fn open_dir(path: &std::path::Path) -> Result<(OwnedFd, rustix::fs::Stat), String> {
        let fd = rustix::fs::open(
            path,
            OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC,
            Mode::empty(),
        )
        .map_err(|e| e.to_string())?;
        let st = rustix::fs::fstat(&fd).map_err(|e| e.to_string())?;
        Ok((fd, st))
    }

    /// Open `name` in `dir` for reading; `Ok(None)` when it does not exist.
    pub fn open_file(dir: impl AsFd, name: &str) -> Result<Option<std::fs::File>, String> {
        match rustix::fs::openat(
            dir,
            name,
            OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::CLOEXEC | OFlags::NOCTTY | OFlags::NONBLOCK,
            Mode::empty(),
        ) {
            Ok(fd) => Ok(Some(std::fs::File::from(fd))),
            Err(rustix::io::Errno::NOENT) => Ok(None),
            Err(rustix::io::Errno::LOOP) => Err("it is a symbolic link".into()),
            Err(e) => Err(e.to_string()),
        }
    }

    pub fn create_exclusive(dir: impl AsFd, name: &str) -> std::io::Result<std::fs::File> {
        let fd = rustix::fs::openat(
            dir,
            name,
            OFlags::WRONLY | OFlags::CREATE | OFlags::EXCL | OFlags::NOFOLLOW | OFlags::CLOEXEC,
            Mode::from_raw_mode(0o600),
        )?;
        Ok(std::fs::File::from(fd))
    }

    /// Open (creating it, mode 0600) the lock file `name` in `dir`, never
    /// following a link; it must be a regular file of ours.
    pub fn open_lock(dir: impl AsFd, name: &str) -> Result<OwnedFd, String> {
        let fd = rustix::fs::openat(
            dir,
            name,
            OFlags::RDWR | OFlags::CREATE | OFlags::NOFOLLOW | OFlags::CLOEXEC | OFlags::NONBLOCK,
            Mode::from_raw_mode(0o600),
        )
        .map_err(|e| e.to_string())?;
        let st = rustix::fs::fstat(&fd).map_err(|e| e.to_string())?;
        if rustix::fs::FileType::from_raw_mode(st.st_mode) != rustix::fs::FileType::RegularFile {
            return Err("the lock is not a regular file".into());
        }
        check_owner(&st, "the lock file")?;
        Ok(fd)
    }

    pub fn rename(dir: impl AsFd + Copy, from: &str, to: &str) -> std::io::Result<()> {
        rustix::fs::renameat(dir, from, dir, to)?;
        Ok(())
    }

    pub fn remove(dir: impl AsFd, name: &str) {
        let _ = rustix::fs::unlinkat(dir, name, rustix::fs::AtFlags::empty());
    }
}

impl CompiledCache {
    /// Open (creating it with mode 0700 if needed) the cache directory for
    /// `engine`.
    ///
    /// # Errors
    /// [`CacheError::Open`] when it cannot be created or opened,
    /// [`CacheError::Untrusted`] when it is a symbolic link, not owned by this
    /// user, or writable by others.
    #[cfg(unix)]
    pub fn open(dir: &Path, engine: &Engine) -> Result<CompiledCache, CacheError> {
        use std::os::unix::fs::DirBuilderExt;
        let open_err = |error: String| CacheError::Open {
            dir: dir.to_path_buf(),
            error,
        };
        if let Some(parent) = dir.parent() {
            std::fs::create_dir_all(parent).map_err(|e| open_err(e.to_string()))?;
        }
        match std::fs::DirBuilder::new().mode(0o700).create(dir) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
            Err(e) => return Err(open_err(e.to_string())),
        }
        let (dirfd, st) = fs::open_dir(dir).map_err(|e| CacheError::Untrusted {
            dir: dir.to_path_buf(),
            reason: format!("cannot open it as a directory without following links: {e}"),
        })?;
        fs::check_owner(&st, "the directory").map_err(|reason| CacheError::Untrusted {
            dir: dir.to_path_buf(),
            reason,
        })?;
        Ok(CompiledCache {
            dir: dir.to_path_buf(),
            engine_key: engine_key(engine),
            dirfd,
        })
    }

    /// Not available off Unix: ownership cannot be checked the same way.
    ///
    /// # Errors
    /// Always [`CacheError::Untrusted`].
    #[cfg(not(unix))]
    pub fn open(dir: &Path, _engine: &Engine) -> Result<CompiledCache, CacheError> {
        Err(CacheError::Untrusted {
            dir: dir.to_path_buf(),
            reason: "the compiled cache is only supported on Unix".into(),
        })
    }

    /// The cache directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// File name of the entry for the component with content hash `hash`.
    pub fn file_name(&self, hash: &str) -> String {
        format!("{hash}-{}.cwasm", self.engine_key)
    }

    /// The compiled component for the component bytes with SHA-256 `hash`:
    /// `Ok(None)` when there is no entry, `Err(reason)` when an entry exists
    /// but is not loaded (it is then to be recompiled and replaced).
    #[cfg(unix)]
    pub fn load(&self, engine: &Engine, hash: &str) -> Result<Option<Component>, String> {
        match self.check_entry(hash)? {
            Some(checked) => self.load_checked(engine, checked).map(Some),
            None => Ok(None),
        }
    }

    /// The bytes of the entry `name`, read only when it is a file this host
    /// could have written: a regular file (not followed through a link) of
    /// ours, with one link, not writable by group or others, at most `max`
    /// bytes; `Ok(None)` when there is none, `Err(why)` when it is refused.
    #[cfg(unix)]
    pub(super) fn read_trusted(&self, name: &str, max: u64) -> Result<Option<Vec<u8>>, String> {
        use std::io::Read;
        let Some((file, size)) = self.open_trusted(name, max)? else {
            return Ok(None);
        };
        let mut bytes = Vec::with_capacity(usize::try_from(size).unwrap_or(0));
        file.take(max)
            .read_to_end(&mut bytes)
            .map_err(|e| e.to_string())?;
        Ok(Some(bytes))
    }

    /// The entry `name`, opened when it is a file this host could have
    /// written (as [`CompiledCache::read_trusted`]), with its size in bytes.
    #[cfg(unix)]
    pub(super) fn open_trusted(
        &self,
        name: &str,
        max: u64,
    ) -> Result<Option<(std::fs::File, u64)>, String> {
        let Some(file) = fs::open_file(&self.dirfd, name)? else {
            return Ok(None);
        };
        let st = rustix::fs::fstat(&file).map_err(|e| e.to_string())?;
        if rustix::fs::FileType::from_raw_mode(st.st_mode) != rustix::fs::FileType::RegularFile {
            return Err("it is not a regular file".into());
        }
        fs::check_owner(&st, "the file")?;
        if st.st_nlink != 1 {
            return Err(format!("it has {} hard links", st.st_nlink));
        }
        let size = u64::try_from(st.st_size).unwrap_or(u64::MAX);
        if size > max {
            return Err(format!("it is {size} bytes, over {max}"));
        }
        Ok(Some((file, size)))
    }

    /// Not available off Unix.
    ///
    /// # Errors
    /// Never called: [`CompiledCache::open`] fails there.
    #[cfg(not(unix))]
    pub fn load(&self, _engine: &Engine, _hash: &str) -> Result<Option<Component>, String> {
        Ok(None)
    }

    /// The compiled component for bytes with SHA-256 `hash`: loaded from the
    /// cache when a trusted entry exists, else compiled by `compile` and
    /// stored, by one process at a time (see the module's documentation):
    /// a process that waited for another's compilation loads its result
    /// (a [`CacheOutcome::Hit`]).
    ///
    /// # Errors
    /// What `compile` returns.
    pub fn load_or_compile<E>(
        &self,
        engine: &Engine,
        hash: &str,
        compile: impl FnOnce() -> Result<Component, E>,
    ) -> Result<(Component, CacheOutcome), E> {
        self.load_or_compile_waiting(engine, hash, COMPILE_WAIT, compile)
    }

    /// [`CompiledCache::load_or_compile`], waiting at most `wait` for
    /// another process's compilation; past it, this one compiles without
    /// the lock (and stores its result: both entries are the same bytes).
    ///
    /// # Errors
    /// What `compile` returns.
    pub fn load_or_compile_waiting<E>(
        &self,
        engine: &Engine,
        hash: &str,
        wait: std::time::Duration,
        compile: impl FnOnce() -> Result<Component, E>,
    ) -> Result<(Component, CacheOutcome), E> {
        let found = match self.load(engine, hash) {
            Ok(Some(c)) => return Ok((c, CacheOutcome::Hit)),
            found => found,
        };
        let lock = self.lock_compile(hash, wait);
        let found = if lock.is_some() {
            match self.load(engine, hash) {
                Ok(Some(c)) => return Ok((c, CacheOutcome::Hit)),
                // The entry another process stored is refused too: the
                // first reason is the one to report.
                again => found.and(again),
            }
        } else {
            found
        };
        let component = compile()?;
        self.store(hash, &component);
        drop(lock);
        let outcome = match found {
            Err(reason) => {
                tracing::warn!(
                    "compiled cache entry {} not loaded: {reason}; recompiled",
                    self.file_name(hash)
                );
                CacheOutcome::Rejected { reason }
            }
            Ok(_) => CacheOutcome::Miss,
        };
        Ok((component, outcome))
    }

    /// Take the exclusive lock on compiling the entry for `hash`, waiting up
    /// to `wait` for another process holding it. `None` when it cannot be
    /// had (the wait ran out, or the lock file is refused: then the caller
    /// compiles without it, as before the lock existed).
    #[cfg(unix)]
    pub fn lock_compile(&self, hash: &str, wait: std::time::Duration) -> Option<CompileLock> {
        if !is_hash(hash) {
            return None;
        }
        self.lock_entry(&self.file_name(hash), wait)
    }

    /// The exclusive lock on writing entry `entry` (`.<entry>.lock`), as
    /// [`CompiledCache::lock_compile`].
    #[cfg(unix)]
    pub(super) fn lock_entry(&self, entry: &str, wait: std::time::Duration) -> Option<CompileLock> {
        use rustix::fs::FlockOperation;
        let name = format!(".{entry}.lock");
        let fd = match fs::open_lock(&self.dirfd, &name) {
            Ok(fd) => fd,
            Err(e) => {
                tracing::warn!(
                    "compile lock {name} in {} not used: {e}",
                    self.dir.display()
                );
                return None;
            }
        };
        let started = std::time::Instant::now();
        let mut pause = std::time::Duration::from_millis(5);
        loop {
            match rustix::fs::flock(&fd, FlockOperation::NonBlockingLockExclusive) {
                Ok(()) => return Some(CompileLock { _fd: fd }),
                Err(rustix::io::Errno::WOULDBLOCK | rustix::io::Errno::INTR) => {}
                Err(e) => {
                    tracing::warn!("compile lock {name}: {e}; compiling without it");
                    return None;
                }
            }
            if started.elapsed() >= wait {
                tracing::warn!(
                    "another process has been writing {entry} for over {} s; writing it here too",
                    wait.as_secs()
                );
                return None;
            }
            std::thread::sleep(pause);
            pause = (pause * 2).min(std::time::Duration::from_millis(100));
        }
    }

    /// Not available off Unix: no lock.
    #[cfg(not(unix))]
    pub fn lock_compile(&self, _hash: &str, _wait: std::time::Duration) -> Option<CompileLock> {
        None
    }

    /// Store `component` (compiled from bytes with SHA-256 `hash`)
    /// atomically, replacing any entry. Failures only cost the next start a
    /// compilation, so they are logged, not returned.
    pub fn store(&self, hash: &str, component: &Component) {
        if let Err(e) = self.try_store(hash, component) {
            tracing::warn!(
                "cannot write the compiled component {} in {}: {e}",
                self.file_name(hash),
                self.dir.display()
            );
        }
    }

    #[cfg(unix)]
    fn try_store(&self, hash: &str, component: &Component) -> Result<(), String> {
        if !is_hash(hash) {
            return Err("not a content hash".into());
        }
        let mut file_bytes = component.serialize().map_err(|e| format!("{e:#}"))?;
        let trailer = entry::trailer(hash, &self.engine_key, &file_bytes);
        file_bytes.extend_from_slice(&trailer);
        self.write_atomic(&self.file_name(hash), &file_bytes)
    }

    /// Write `bytes` as `name` in the directory: under a temporary name
    /// (created exclusively, mode 0600), synced, renamed into place.
    #[cfg(unix)]
    fn write_atomic(&self, name: &str, bytes: &[u8]) -> Result<(), String> {
        use std::io::Write;
        let nonce = sha256_hex(
            format!(
                "{}-{:?}-{:?}",
                std::process::id(),
                std::thread::current().id(),
                std::time::SystemTime::now()
            )
            .as_bytes(),
        );
        let tmp = format!(".{name}.{}.tmp", &nonce[..16]);
        let res = (|| {
            let mut f = fs::create_exclusive(&self.dirfd, &tmp)?;
            f.write_all(bytes)?;
            f.sync_all()?;
            fs::rename(&self.dirfd, &tmp, name)
        })();
        if let Err(e) = res {
            fs::remove(&self.dirfd, &tmp);
            return Err(e.to_string());
        }
        Ok(())
    }

    #[cfg(not(unix))]
    fn try_store(&self, _hash: &str, _component: &Component) -> Result<(), String> {
        Ok(())
    }
}

#[cfg(unix)]
mod entry;
mod meta;
#[cfg(all(test, unix))]
mod tests;

/// Whether a line is printed on stderr while a component compiles (the CLI
/// turns it on: the first start on a fresh state directory reads every
/// tool's meta, and a tool's first call compiles it, which takes seconds).
static COMPILE_NOTICE: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// Print a progress line on stderr for every compilation from now on.
pub fn announce_compiles(on: bool) {
    COMPILE_NOTICE.store(on, std::sync::atomic::Ordering::Relaxed);
}

/// What a progress line announces.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Work {
    /// A Cranelift compilation, kept in the cache for calls.
    Compile,
    /// A meta read through the baseline compiler (`sandbox::meta`).
    Meta,
    /// The same without a compiled cache (the directory refused or off):
    /// nothing is kept, the next start reads it again.
    MetaUncached,
}

/// Work announced on stderr: its kind and start time (`None` when not
/// announced).
pub(crate) struct Notice(Option<(Work, std::time::Instant)>);

impl Notice {
    /// Start `work` on the component with content hash `hash` (`bytes`
    /// long): its line, when announcing.
    pub(crate) fn start(work: Work, hash: &str, bytes: usize) -> Notice {
        if !COMPILE_NOTICE.load(std::sync::atomic::Ordering::Relaxed) {
            return Notice(None);
        }
        let (short, kib) = (hash.get(..12).unwrap_or(hash), bytes / 1024);
        match work {
            Work::Compile => eprintln!(
                "capsaga: compiling component {short} ({kib} KiB); cached for the next start ..."
            ),
            Work::Meta => eprintln!(
                "capsaga: reading the meta of component {short} ({kib} KiB, baseline compiler); kept for the next start ..."
            ),
            Work::MetaUncached => eprintln!(
                "capsaga: reading the meta of component {short} ({kib} KiB, baseline compiler; no compiled cache, read again at every start) ..."
            ),
        }
        Notice(Some((work, std::time::Instant::now())))
    }

    /// The work is done: its time, when announced.
    pub(crate) fn end(self) {
        match self.0 {
            Some((Work::Compile, t)) => {
                eprintln!("capsaga:   compiled in {:.1} s", t.elapsed().as_secs_f64())
            }
            Some((Work::Meta | Work::MetaUncached, t)) => {
                eprintln!("capsaga:   read in {:.2} s", t.elapsed().as_secs_f64())
            }
            None => {}
        }
    }
}
