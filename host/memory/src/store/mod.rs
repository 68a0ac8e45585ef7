//! The memory's storage layer: every SQL statement of `capsaga-memory` is
//! in this module (the architecture test names it as the crate's one place
//! for SQL, beside `host/store/` for the state database).
//!
//! One SQLite file, `episodes.db` (WAL mode), holds the episodes and their
//! FTS5 index (`episodes`, `episodes_fts` as seed 004 §4, plus the
//! namespace, the reflected and archived flags), the semantic facts with
//! their embeddings (`semantic_facts`, seed 004 §5), the fact proposals
//! waiting for the operator, the sessions' turns and summaries, and a log
//! of what `forget` and retention did. It is a separate file from the state
//! database: memory can be moved aside or rebuilt without touching a saga.
//!
//! The file is stamped with an application id and a schema version: a
//! foreign SQLite file, a damaged one, one written by a newer capsaga or
//! filled by another embedding model is refused at open with a clear error,
//! and nothing in it is changed.

mod episodes;
mod facts;
mod labels;
mod schema;
mod sessions;
mod transfer;
mod vectors;
mod words;

pub use episodes::EpisodeQuery;
pub use vectors::{ScopeVectors, VECTOR_CACHE_BYTES};
pub use words::MatchedText;

use crate::error::{MemoryError, Result};
use rusqlite::{Connection, OpenFlags};
use std::path::{Path, PathBuf};
use std::sync::Mutex;

impl From<rusqlite::Error> for MemoryError {
    fn from(e: rusqlite::Error) -> Self {
        MemoryError::Sql(e.to_string())
    }
}

/// How much of the memory database is read through a memory map
/// (`PRAGMA mmap_size`): 1 GiB, about 600k episodes with their vectors.
pub const MMAP_BYTES: i64 = 1 << 30;

/// SQLite's page cache of the memory database, KiB (`PRAGMA cache_size`;
/// SQLite's default is 2000).
pub const CACHE_KIB: i64 = 32 * 1024;

/// The memory database.
pub struct Store {
    conn: Mutex<Connection>,
    path: PathBuf,
    dim: usize,
    /// The vectors searches scan, held between searches.
    vectors: Mutex<vectors::VectorCache>,
}

impl std::fmt::Debug for Store {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Store").field("path", &self.path).finish()
    }
}

impl Store {
    /// Open (creating it when absent) the memory database at `path` for
    /// vectors of `dim` floats made by `model_id`.
    ///
    /// # Errors
    /// [`MemoryError::Database`] for a file that is not SQLite, is damaged,
    /// belongs to another application or a newer schema;
    /// [`MemoryError::Dimension`] when it holds vectors of another model.
    pub fn open(path: &Path, model_id: &str, dim: usize) -> Result<Store> {
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir).map_err(|e| MemoryError::File {
                path: dir.to_path_buf(),
                reason: e.to_string(),
            })?;
        }
        let db_err = |reason: String| MemoryError::Database {
            path: path.to_path_buf(),
            reason,
        };
        let conn = Connection::open_with_flags(
            path,
            OpenFlags::SQLITE_OPEN_READ_WRITE
                | OpenFlags::SQLITE_OPEN_CREATE
                | OpenFlags::SQLITE_OPEN_NO_MUTEX,
        )
        .map_err(|e| db_err(e.to_string()))?;
        schema::prepare(&conn, model_id, dim).map_err(|e| match e {
            MemoryError::Sql(reason) => db_err(reason),
            MemoryError::Database { reason, .. } => db_err(reason),
            other => other,
        })?;
        // A search reads a sender's whole history (vectors, FTS5 posting
        // lists): mapped pages instead of a read() copy of each page into
        // a 2 MB cache (a third of a search at 100k episodes was the
        // kernel copying pages, `perf`).
        conn.pragma_update(None, "mmap_size", MMAP_BYTES)
            .and_then(|_| conn.pragma_update(None, "cache_size", -CACHE_KIB))
            .map_err(|e| db_err(e.to_string()))?;
        Ok(Store {
            conn: Mutex::new(conn),
            path: path.to_path_buf(),
            dim,
            vectors: Mutex::new(vectors::VectorCache::default()),
        })
    }

    /// The file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The vector dimension.
    pub fn dim(&self) -> usize {
        self.dim
    }

    fn with<T>(&self, f: impl FnOnce(&mut Connection) -> Result<T>) -> Result<T> {
        let mut c = self
            .conn
            .lock()
            .map_err(|_| MemoryError::Sql("the memory connection lock is poisoned".into()))?;
        f(&mut c)
    }

    /// Append a line to the memory's log (what `forget`, retention and the
    /// operator's decisions did).
    ///
    /// # Errors
    /// [`MemoryError::Sql`].
    pub fn log(&self, at: &str, action: &str, target: &str, detail: &str) -> Result<()> {
        self.with(|c| {
            c.execute(
                "INSERT INTO memory_log (at, action, target, detail) VALUES (?1, ?2, ?3, ?4)",
                (at, action, target, detail),
            )?;
            Ok(())
        })
    }

    /// The memory's log, newest first: `(at, action, target, detail)`.
    ///
    /// # Errors
    /// [`MemoryError::Sql`].
    pub fn log_lines(&self, limit: usize) -> Result<Vec<(String, String, String, String)>> {
        self.with(|c| {
            let mut st = c.prepare(
                "SELECT at, action, target, detail FROM memory_log ORDER BY id DESC LIMIT ?1",
            )?;
            let rows = st
                .query_map([limit as i64], |r| {
                    Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?))
                })?
                .collect::<rusqlite::Result<Vec<_>>>()?;
            Ok(rows)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_database_is_read_through_a_memory_map_and_a_larger_cache() {
        let d = tempfile::tempdir().unwrap();
        let store = Store::open(&d.path().join("episodes.db"), "m", 4).unwrap();
        let (mmap, cache): (i64, i64) = store
            .with(|c| {
                Ok((
                    c.query_row("PRAGMA mmap_size", [], |r| r.get(0))?,
                    c.query_row("PRAGMA cache_size", [], |r| r.get(0))?,
                ))
            })
            .unwrap();
        assert_eq!((mmap, cache), (MMAP_BYTES, -CACHE_KIB));
    }
}
