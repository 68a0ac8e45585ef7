//! Tool metas kept next to the compiled components: a host that finds a
//! component's meta here loads the tool without compiling it, and compiles
//! it at its first call (`sandbox::prepared`). Same trust rules as the
//! compiled files (a regular file of ours, one link, not writable by
//! others, written atomically); the file names the component's content
//! hash and the engine key, and says so inside, so a meta is only ever used
//! for the exact bytes it was read from, on the engine that linked them.

use super::{CompiledCache, is_hash};
use capsaga_core::meta::RawToolMeta;

/// Largest meta file read, bytes.
const MAX_META_BYTES: u64 = 1024 * 1024;
/// Format of a meta file (2: with the output's field labels; a file of
/// format 1 never read them and is read again).
const FORMAT: &str = "capsaga-meta-2";

#[derive(serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct MetaFile {
    format: String,
    hash: String,
    engine: String,
    meta: RawToolMeta,
}

impl CompiledCache {
    fn meta_name(&self, hash: &str) -> String {
        format!("{hash}-{}.meta.json", self.engine_key)
    }

    /// The meta stored for the component with content hash `hash`; `None`
    /// when there is none or it is not trusted (then the component is
    /// compiled at load and the file replaced).
    #[cfg(unix)]
    pub fn load_meta(&self, hash: &str) -> Option<RawToolMeta> {
        if !is_hash(hash) {
            return None;
        }
        let name = self.meta_name(hash);
        let refused = |why: String| {
            tracing::warn!("cached meta {name} not used: {why}");
            None
        };
        let text = match self.read_trusted(&name, MAX_META_BYTES) {
            Ok(Some(t)) => t,
            Ok(None) => return None,
            Err(e) => return refused(e),
        };
        let value = match capsaga_core::json::parse_strict(
            &String::from_utf8_lossy(&text),
            MAX_META_BYTES as usize,
        ) {
            Ok(v) => v,
            Err(e) => return refused(e.to_string()),
        };
        match serde_json::from_value::<MetaFile>(value) {
            Ok(m) if m.format == FORMAT && m.hash == hash && m.engine == self.engine_key => {
                Some(m.meta)
            }
            Ok(_) => refused("written for other bytes, another engine or format".into()),
            Err(e) => refused(e.to_string()),
        }
    }

    /// Not available off Unix.
    #[cfg(not(unix))]
    pub fn load_meta(&self, _hash: &str) -> Option<RawToolMeta> {
        None
    }

    /// The lock on computing the meta of the component with content hash
    /// `hash`: one process reads it (compiling the component with the
    /// baseline compiler), the others wait and load what it stored. `None`
    /// as [`CompiledCache::lock_compile`].
    #[cfg(unix)]
    pub fn lock_meta(&self, hash: &str, wait: std::time::Duration) -> Option<super::CompileLock> {
        if !is_hash(hash) {
            return None;
        }
        self.lock_entry(&self.meta_name(hash), wait)
    }

    /// Not available off Unix: no lock.
    #[cfg(not(unix))]
    pub fn lock_meta(&self, _hash: &str, _wait: std::time::Duration) -> Option<super::CompileLock> {
        None
    }

    /// Store `meta` for the component with content hash `hash` (atomically;
    /// a failure is logged: the next start compiles again).
    #[cfg(unix)]
    pub fn store_meta(&self, hash: &str, meta: &RawToolMeta) {
        if !is_hash(hash) {
            return;
        }
        let file = MetaFile {
            format: FORMAT.into(),
            hash: hash.into(),
            engine: self.engine_key.clone(),
            meta: meta.clone(),
        };
        let res = serde_json::to_vec(&file)
            .map_err(|e| e.to_string())
            .and_then(|bytes| self.write_atomic(&self.meta_name(hash), &bytes));
        if let Err(e) = res {
            tracing::warn!("cannot write the cached meta {}: {e}", self.meta_name(hash));
        }
    }

    /// Not available off Unix.
    #[cfg(not(unix))]
    pub fn store_meta(&self, _hash: &str, _meta: &RawToolMeta) {}
}
