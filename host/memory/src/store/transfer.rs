//! Episodes in bulk: a batch of an import inserted in one transaction, the
//! ids already stored (so a re-run embeds nothing twice), and the episodes
//! read back session by session for an export.

use super::Store;
use super::episodes::{COLS, INSERT, insert_one, row};
use crate::error::Result;
use crate::types::Episode;
use rusqlite::params;
use std::collections::HashSet;

impl Store {
    /// Insert episodes with their vectors (little-endian f32s) in one
    /// transaction, indexed at `indexed_at`: all of them or, on an error,
    /// none. An episode whose id is stored already is left as it is.
    /// Returns how many were inserted.
    ///
    /// # Errors
    /// [`crate::MemoryError::Sql`].
    pub fn insert_episodes(
        &self,
        es: &[(Episode, Option<Vec<u8>>)],
        indexed_at: &str,
    ) -> Result<usize> {
        self.with(|c| {
            let tx = c.transaction()?;
            let mut n = 0;
            {
                let mut st = tx.prepare_cached(INSERT)?;
                for (e, v) in es {
                    n += insert_one(&mut st, e, v.as_deref(), indexed_at)?;
                }
            }
            tx.commit()?;
            Ok(n)
        })
    }

    /// Which of `ids` are stored.
    ///
    /// # Errors
    /// [`crate::MemoryError::Sql`].
    pub fn known_episodes(&self, ids: &[&str]) -> Result<HashSet<String>> {
        self.with(|c| {
            let mut st = c.prepare_cached("SELECT 1 FROM episodes WHERE episode_id = ?1")?;
            let mut out = HashSet::new();
            for id in ids {
                if st.exists([id])? {
                    out.insert((*id).to_string());
                }
            }
            Ok(out)
        })
    }

    /// Every episode of `namespace` (of `sender` when given), archived ones
    /// included, session by session: ordered by sender, session, position
    /// in the session and date. Each is handed to `f` as it is read (the
    /// memory holds one row at a time); an error of `f` stops the walk.
    /// Returns how many were handed.
    ///
    /// # Errors
    /// [`crate::MemoryError::Sql`], or `f`'s.
    pub fn each_episode(
        &self,
        namespace: &str,
        sender: Option<&str>,
        mut f: impl FnMut(Episode) -> Result<()>,
    ) -> Result<u64> {
        self.with(|c| {
            let mut st = c.prepare(&format!(
                "SELECT {COLS} FROM episodes WHERE namespace = ?1 AND (?2 IS NULL OR sender = ?2)
                 ORDER BY sender, session_id, seq, started_at, id"
            ))?;
            let mut rows = st.query(params![namespace, sender])?;
            let mut n = 0;
            while let Some(r) = rows.next()? {
                f(row(r)?)?;
                n += 1;
            }
            Ok(n)
        })
    }
}
