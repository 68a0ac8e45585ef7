//! The file format of a compiled-cache entry (format 02).
//!
//! An entry is the bytes `Component::serialize` produced, unchanged (so that
//! Wasmtime can map the file itself, `Component::deserialize_file`, instead
//! of copying it into memory), followed by a trailer of [`TRAILER_LEN`]
//! bytes: [`MAGIC`], the component's content hash (64 hex digits), the
//! engine key (32 hex digits), the BLAKE3 hash of the payload (32 bytes),
//! the payload's length (u64, little-endian). Wasmtime locates an ELF's
//! parts from its header and ignores bytes after them.
//!
//! Format 01 put a header with a SHA-256 before the payload, which forced a
//! copy at every load: checking it and copying the runner's 41 MB took about
//! 60 ms of a cold start (README "Performance"). An entry of format 01 is
//! refused as written by an older capsaga, and recompiled.

use super::{CompiledCache, MAX_FILE_BYTES, is_hash};
use std::fs::File;
use std::os::unix::fs::FileExt;
use std::path::PathBuf;
use wasmtime::Engine;
use wasmtime::component::Component;

/// The trailer's first bytes.
pub(super) const MAGIC: &[u8; 16] = b"CAPSAGA-CWASM-02";
/// The first bytes of a format 01 entry.
const MAGIC_01: &[u8; 16] = b"CAPSAGA-CWASM-01";
use super::{ENGINE_KEY_HEX, HASH_HEX};
const SUM_LEN: usize = 32;
/// Bytes of the trailer.
pub(super) const TRAILER_LEN: usize = MAGIC.len() + HASH_HEX + ENGINE_KEY_HEX + SUM_LEN + 8;
/// Bytes hashed per read.
const CHUNK: usize = 1 << 20;

/// An entry whose trailer and checksum were checked, still open: what
/// [`CompiledCache::load_checked`] loads.
#[derive(Debug)]
pub struct Checked {
    file: File,
    size: u64,
    name: String,
    hash: String,
}

/// Name of the file holding a hint ([`CompiledCache::hint`]).
fn hint_name(key: &str) -> String {
    format!("{key}.hint")
}

impl CompiledCache {
    /// The entry for the component with content hash `hash`, opened and
    /// checked (trusted file, trailer, BLAKE3 sum): `Ok(None)` when there
    /// is none, `Err(reason)` when it is refused.
    ///
    /// # Errors
    /// Why the entry is refused.
    pub fn check_entry(&self, hash: &str) -> Result<Option<Checked>, String> {
        if !is_hash(hash) {
            return Err("not a content hash".into());
        }
        let name = self.file_name(hash);
        let Some((file, size)) = self.open_trusted(&name, MAX_FILE_BYTES)? else {
            return Ok(None);
        };
        verify(&file, size, hash, &self.engine_key)?;
        Ok(Some(Checked {
            file,
            size,
            name,
            hash: hash.to_string(),
        }))
    }

    /// Load a checked entry: mapped by Wasmtime from the descriptor the
    /// checks were made on, or, where the file system refuses to map it
    /// executable (`noexec`), from a copy read and checked again.
    ///
    /// # Errors
    /// Wasmtime's refusal (an entry of another Wasmtime version or
    /// configuration), or why the copy was refused.
    pub fn load_checked(&self, engine: &Engine, c: Checked) -> Result<Component, String> {
        let Checked {
            file,
            size,
            name,
            hash,
        } = c;
        // The file the checks were made on, not whatever the name points to
        // by now (where /proc is mounted; else the name, in our directory).
        let by_fd = PathBuf::from(format!(
            "/proc/self/fd/{}",
            std::os::fd::AsRawFd::as_raw_fd(&file)
        ));
        let path = if by_fd.exists() {
            by_fd
        } else {
            self.dir.join(&name)
        };
        // SAFETY: the file was written by `Component::serialize` in this
        // host and is never modified in place (entries are replaced by
        // renaming a new file over them): it is in our 0700 directory, a
        // regular file of ours with one link, not writable by group or
        // others, whose BLAKE3 sum matches its trailer; `file` stays open
        // while Wasmtime maps it. Wasmtime itself refuses bytes from another
        // version or configuration. A process running as this user could
        // change the file under the mapping; it is out of scope (module
        // documentation).
        let mapped = unsafe { Component::deserialize_file(engine, &path) };
        let loaded = match mapped {
            Ok(c) => Ok(c),
            // A file system mounted `noexec` refuses to map the file
            // executable: load a checked copy from memory instead (what
            // format 01 always did). An entry Wasmtime refuses as stale is
            // refused again there.
            Err(e) => {
                tracing::debug!("compiled cache entry {name} not mapped ({e:#}); loading a copy");
                let payload = read_verified(&file, size, &hash, &self.engine_key)?;
                // SAFETY: as above; `payload` is a copy in this process's
                // memory, checked against the trailer after it was read.
                unsafe { Component::deserialize(engine, &payload) }
            }
        };
        drop(file);
        loaded.map_err(|e| format!("Wasmtime refused it (stale or incompatible): {e:#}"))
    }

    /// The content hash last stored under `key` by
    /// [`CompiledCache::set_hint`] (`None` when absent or not a hash). A
    /// hint is only a guess of which entry will be wanted, so that its
    /// check can start before the component's own hash is known: an entry
    /// is still loaded only under the hash of the component's bytes.
    pub fn hint(&self, key: &str) -> Option<String> {
        let bytes = self.read_trusted(&hint_name(key), 256).ok()??;
        let text = String::from_utf8(bytes).ok()?;
        let hash = text.trim();
        is_hash(hash).then(|| hash.to_string())
    }

    /// Remember `hash` under `key` (failures are logged: a missing hint
    /// only costs the next start its head start).
    pub fn set_hint(&self, key: &str, hash: &str) {
        if let Err(e) = self.write_atomic(&hint_name(key), hash.as_bytes()) {
            tracing::debug!("cannot write the cache hint {key}: {e}");
        }
    }
}

/// The trailer of an entry holding `payload`, compiled from the component
/// with content hash `hash` by the engine with key `engine_key`.
pub(super) fn trailer(hash: &str, engine_key: &str, payload: &[u8]) -> Vec<u8> {
    let mut t = Vec::with_capacity(TRAILER_LEN);
    t.extend_from_slice(MAGIC);
    t.extend_from_slice(hash.as_bytes());
    t.extend_from_slice(engine_key.as_bytes());
    t.extend_from_slice(blake3::hash(payload).as_bytes());
    t.extend_from_slice(&(payload.len() as u64).to_le_bytes());
    t
}

/// Check the entry `file` (`size` bytes) against `hash` and `engine_key`,
/// reading it in full to check its BLAKE3 sum.
///
/// # Errors
/// Why it is refused: not an entry (or one of format 01), another
/// component's, another engine's, truncated or padded, corrupt, unreadable.
pub(super) fn verify(file: &File, size: u64, hash: &str, engine_key: &str) -> Result<(), String> {
    let (payload_len, sum) = trailer_of(file, size, hash, engine_key)?;
    let mut h = blake3::Hasher::new();
    let mut buf = vec![0u8; CHUNK];
    let mut at = 0u64;
    while at < payload_len {
        let n = usize::try_from((payload_len - at).min(CHUNK as u64)).unwrap_or(CHUNK);
        file.read_exact_at(&mut buf[..n], at).map_err(unreadable)?;
        h.update(&buf[..n]);
        at += n as u64;
    }
    same_sum(&h.finalize(), &sum)
}

/// The payload of the entry `file` (`size` bytes), read into memory and
/// checked against its trailer (the copy is what gets loaded, so the copy is
/// what is checked). For file systems that refuse to map a file executable
/// (`noexec`): the entry is then loaded from memory.
///
/// # Errors
/// As [`verify`].
pub(super) fn read_verified(
    file: &File,
    size: u64,
    hash: &str,
    engine_key: &str,
) -> Result<Vec<u8>, String> {
    let (payload_len, sum) = trailer_of(file, size, hash, engine_key)?;
    let len = usize::try_from(payload_len).map_err(|_| "it is too large to read".to_string())?;
    let mut payload = vec![0u8; len];
    file.read_exact_at(&mut payload, 0).map_err(unreadable)?;
    same_sum(&blake3::hash(&payload), &sum)?;
    Ok(payload)
}

fn unreadable(e: std::io::Error) -> String {
    format!("it cannot be read: {e}")
}

fn same_sum(found: &blake3::Hash, sum: &[u8; SUM_LEN]) -> Result<(), String> {
    if found.as_bytes() != sum {
        return Err("its checksum does not match (corrupt)".into());
    }
    Ok(())
}

/// The payload's length and BLAKE3 sum from the trailer of `file` (`size`
/// bytes), once the trailer names `hash` and `engine_key`.
fn trailer_of(
    file: &File,
    size: u64,
    hash: &str,
    engine_key: &str,
) -> Result<(u64, [u8; SUM_LEN]), String> {
    let not_ours = || -> String {
        let mut head = [0u8; 16];
        if file.read_exact_at(&mut head, 0).is_ok() && &head == MAGIC_01 {
            "it was written by an older capsaga (format 01)".into()
        } else {
            "it is not a capsaga compiled-component file".into()
        }
    };
    let Some(payload_len) = size.checked_sub(TRAILER_LEN as u64) else {
        return Err(not_ours());
    };
    let mut t = [0u8; TRAILER_LEN];
    file.read_exact_at(&mut t, payload_len)
        .map_err(unreadable)?;
    let (magic, rest) = t.split_at(MAGIC.len());
    if magic != MAGIC {
        return Err(not_ours());
    }
    let (named, rest) = rest.split_at(HASH_HEX);
    if named != hash.as_bytes() {
        return Err("it was compiled from other component bytes".into());
    }
    let (key, rest) = rest.split_at(ENGINE_KEY_HEX);
    if key != engine_key.as_bytes() {
        return Err("it was compiled for another engine configuration".into());
    }
    let (sum_bytes, len) = rest.split_at(SUM_LEN);
    let mut len_bytes = [0u8; 8];
    len_bytes.copy_from_slice(len);
    let len = u64::from_le_bytes(len_bytes);
    if len != payload_len {
        return Err(format!(
            "its length does not match its trailer: truncated, padded or corrupt ({payload_len} payload bytes, trailer says {len})"
        ));
    }
    let mut sum = [0u8; SUM_LEN];
    sum.copy_from_slice(sum_bytes);
    Ok((payload_len, sum))
}
