//! Episodes: insert, retrieval (the sender's latest, FTS5 matches),
//! reflection's selection and marks, retention, forget.

use super::Store;
use crate::error::{MemoryError, Result};
use crate::types::Episode;
use rusqlite::{OptionalExtension, Row, params};

pub(super) const COLS: &str = "episode_id, trace_id, session_id, sender, namespace, started_at, user_message, final_response, outcome, summary, importance, reflected, archived, seq";

/// The scope tokens of an episode, indexed in the FTS5 table's `scope`
/// column: one for its namespace and one for its namespace and sender
/// (`n` or `k` and 16 hex digits of SHA-256), so that a search is
/// restricted to them inside FTS5 (an AND with the scope's short posting
/// list) instead of ranking every match of the whole database.
pub(super) fn scope_tokens(namespace: &str, sender: &str) -> String {
    format!(
        "{} {}",
        ns_token(namespace),
        sender_token(namespace, sender)
    )
}

fn hash16(text: &str) -> String {
    use sha2::Digest as _;
    hex::encode(&sha2::Sha256::digest(text.as_bytes())[..8])
}

fn ns_token(namespace: &str) -> String {
    format!("n{}", hash16(namespace))
}

pub(super) fn sender_token(namespace: &str, sender: &str) -> String {
    format!("k{}", hash16(&format!("{namespace}\n{sender}")))
}

pub(super) fn row(r: &Row<'_>) -> rusqlite::Result<Episode> {
    Ok(Episode {
        episode_id: r.get(0)?,
        trace_id: r.get(1)?,
        session_id: r.get(2)?,
        sender: r.get(3)?,
        namespace: r.get(4)?,
        started_at: r.get(5)?,
        user_message: r.get(6)?,
        final_response: r.get(7)?,
        outcome: r.get(8)?,
        summary: r.get(9)?,
        importance: r.get(10)?,
        reflected: r.get::<_, i64>(11)? != 0,
        archived: r.get::<_, i64>(12)? != 0,
        seq: r.get::<_, i64>(13)?.max(0) as u64,
    })
}

/// A filter of episodes for listing.
#[derive(Debug, Clone, Default)]
pub struct EpisodeQuery {
    /// Only this namespace.
    pub namespace: Option<String>,
    /// Only this sender.
    pub sender: Option<String>,
    /// Also archived ones.
    pub include_archived: bool,
    /// Most rows.
    pub limit: usize,
}

impl Store {
    /// Insert an episode (its FTS5 entry follows by trigger), indexed at
    /// `indexed_at`; an episode with the same id is left as it is. True
    /// when inserted.
    ///
    /// # Errors
    /// [`MemoryError::Sql`].
    pub fn insert_episode(&self, e: &Episode, indexed_at: &str) -> Result<bool> {
        self.with(|c| {
            let mut st = c.prepare_cached(INSERT)?;
            let n = insert_one(&mut st, e, None, indexed_at)?;
            Ok(n == 1)
        })
    }

    /// The episode with this id.
    ///
    /// # Errors
    /// [`MemoryError::NotFound`], [`MemoryError::Sql`].
    pub fn episode(&self, id: &str) -> Result<Episode> {
        self.with(|c| {
            c.query_row(
                &format!("SELECT {COLS} FROM episodes WHERE episode_id = ?1"),
                [id],
                row,
            )
            .optional()?
            .ok_or_else(|| MemoryError::NotFound {
                what: "episode",
                id: id.to_string(),
            })
        })
    }

    /// The episode made from a trace, if any (indexing is idempotent).
    ///
    /// # Errors
    /// [`MemoryError::Sql`].
    pub fn episode_of_trace(&self, trace_id: &str) -> Result<Option<Episode>> {
        self.with(|c| {
            Ok(c.query_row(
                &format!("SELECT {COLS} FROM episodes WHERE trace_id = ?1"),
                [trace_id],
                row,
            )
            .optional()?)
        })
    }

    /// The latest `n` unarchived episodes of `sender` in `namespace`, newest
    /// first.
    ///
    /// # Errors
    /// [`MemoryError::Sql`].
    pub fn recent_episodes(&self, namespace: &str, sender: &str, n: usize) -> Result<Vec<Episode>> {
        self.with(|c| {
            let mut st = c.prepare_cached(&format!(
                "SELECT {COLS} FROM episodes WHERE namespace = ?1 AND sender = ?2 AND archived = 0 ORDER BY started_at DESC, id DESC LIMIT ?3"
            ))?;
            let v = st
                .query_map(params![namespace, sender, n as i64], row)?
                .collect::<rusqlite::Result<Vec<_>>>()?;
            Ok(v)
        })
    }

    /// The best `k` FTS5 matches of `fts_query` among the unarchived
    /// episodes of `sender` (of the whole namespace when `None`) in
    /// `namespace`, best first (equal scores by id, so that the same
    /// conversations give the same candidates): `(episode id, BM25
    /// score)`, the score positive (FTS5's `bm25()` negated: larger is
    /// better). `fts_query`
    /// must come from [`crate::score::fts_query`] (quoted words only).
    ///
    /// # Errors
    /// [`MemoryError::Sql`].
    pub fn match_scores(
        &self,
        namespace: &str,
        sender: Option<&str>,
        fts_query: &str,
        k: usize,
    ) -> Result<Vec<(String, f64)>> {
        self.with(|c| {
            let scope = match sender {
                Some(s) => sender_token(namespace, s),
                None => ns_token(namespace),
            };
            let expr = format!(
                "scope:\"{scope}\" AND {{user_message final_response summary}}: ({fts_query})"
            );
            let mut st = c.prepare_cached(
                "SELECT e.episode_id, episodes_fts.rank FROM episodes_fts JOIN episodes e ON e.id = episodes_fts.rowid
                 WHERE episodes_fts MATCH ?1 AND e.namespace = ?2 AND (?3 IS NULL OR e.sender = ?3) AND e.archived = 0
                 ORDER BY episodes_fts.rank, e.episode_id LIMIT ?4",
            )?;
            let v = st
                .query_map(params![expr, namespace, sender, k as i64], |r| {
                    Ok((r.get::<_, String>(0)?, -r.get::<_, f64>(1)?))
                })?
                .collect::<rusqlite::Result<Vec<_>>>()?;
            Ok(v)
        })
    }

    /// The `k` most recently indexed episodes of `sender` in `namespace`
    /// that share a word with `fts_query` (from [`crate::score::fts_query`]),
    /// latest first.
    /// No BM25: ranking asks FTS5 for every term's document count over the
    /// whole index (it walks each term's posting list), which is most of
    /// the time of a ranked match; walking the sender's matches by rowid,
    /// latest first, stops after `k`.
    ///
    /// # Errors
    /// [`MemoryError::Sql`].
    pub fn newest_matches(
        &self,
        namespace: &str,
        sender: &str,
        fts_query: &str,
        k: usize,
    ) -> Result<Vec<Episode>> {
        self.with(|c| {
            let cols = COLS
                .split(", ")
                .map(|x| format!("e.{x}"))
                .collect::<Vec<_>>()
                .join(", ");
            // The scope first: FTS5 intersects its short posting list with
            // the words' instead of visiting every match in the database.
            let expr = format!(
                "scope:\"{}\" AND {{user_message final_response summary}}: ({fts_query})",
                sender_token(namespace, sender)
            );
            let mut st = c.prepare_cached(&format!(
                "SELECT {cols} FROM episodes_fts JOIN episodes e ON e.id = episodes_fts.rowid
                 WHERE episodes_fts MATCH ?1 AND e.namespace = ?2 AND e.sender = ?3 AND e.archived = 0
                 ORDER BY episodes_fts.rowid DESC LIMIT ?4"
            ))?;
            let v = st
                .query_map(params![expr, namespace, sender, k as i64], row)?
                .collect::<rusqlite::Result<Vec<_>>>()?;
            Ok(v)
        })
    }

    /// Episodes for listing.
    ///
    /// # Errors
    /// [`MemoryError::Sql`].
    pub fn list_episodes(&self, q: &EpisodeQuery) -> Result<Vec<Episode>> {
        self.with(|c| {
            let mut st = c.prepare(&format!(
                "SELECT {COLS} FROM episodes WHERE (?1 IS NULL OR namespace = ?1) AND (?2 IS NULL OR sender = ?2) AND (?3 OR archived = 0)
                 ORDER BY started_at DESC, id DESC LIMIT ?4"
            ))?;
            let v = st
                .query_map(
                    params![q.namespace, q.sender, q.include_archived, q.limit.max(1) as i64],
                    row,
                )?
                .collect::<rusqlite::Result<Vec<_>>>()?;
            Ok(v)
        })
    }

    /// Unreflected, unarchived episodes of `namespace` with importance over
    /// `min_importance`, with their stored embedding when they have one.
    ///
    /// # Errors
    /// [`MemoryError::Sql`].
    pub fn reflection_candidates(
        &self,
        namespace: &str,
        min_importance: f64,
        limit: usize,
    ) -> Result<Vec<(Episode, Option<Vec<u8>>)>> {
        self.with(|c| {
            let mut st = c.prepare(&format!(
                "SELECT {COLS}, embedding FROM episodes WHERE namespace = ?1 AND reflected = 0 AND archived = 0 AND importance > ?2
                 ORDER BY importance DESC, started_at DESC LIMIT ?3"
            ))?;
            let v = st
                .query_map(params![namespace, min_importance, limit as i64], |r| {
                    Ok((row(r)?, r.get::<_, Option<Vec<u8>>>(14)?))
                })?
                .collect::<rusqlite::Result<Vec<_>>>()?;
            Ok(v)
        })
    }

    /// Store an episode's embedding (computed by reflection, once).
    ///
    /// # Errors
    /// [`MemoryError::Sql`].
    pub fn set_episode_embedding(&self, id: &str, blob: &[u8]) -> Result<()> {
        self.with(|c| {
            c.execute(
                "UPDATE episodes SET embedding = ?2 WHERE episode_id = ?1",
                params![id, blob],
            )?;
            Ok(())
        })
    }

    /// Set or clear the reflected mark of episodes (clearing is reflection's
    /// compensation).
    ///
    /// # Errors
    /// [`MemoryError::Sql`].
    pub fn mark_reflected(&self, ids: &[String], reflected: bool) -> Result<()> {
        self.with(|c| {
            let tx = c.transaction()?;
            for id in ids {
                tx.execute(
                    "UPDATE episodes SET reflected = ?2 WHERE episode_id = ?1",
                    params![id, reflected as i64],
                )?;
            }
            tx.commit()?;
            Ok(())
        })
    }

    /// Retention (seed 004 §4.4): archive, out of the FTS5 index, every
    /// unarchived episode with importance under `min_importance` that
    /// started before `before` (RFC 3339). The rows stay. Returns the ids.
    ///
    /// # Errors
    /// [`MemoryError::Sql`].
    pub fn archive_old(&self, min_importance: f64, before: &str) -> Result<Vec<String>> {
        self.with(|c| {
            let tx = c.transaction()?;
            let ids = {
                let mut st = tx.prepare(
                    "SELECT episode_id FROM episodes WHERE archived = 0 AND importance < ?1 AND started_at < ?2",
                )?;
                st.query_map(params![min_importance, before], |r| r.get::<_, String>(0))?
                    .collect::<rusqlite::Result<Vec<_>>>()?
            };
            tx.execute(
                "UPDATE episodes SET archived = 1 WHERE archived = 0 AND importance < ?1 AND started_at < ?2",
                params![min_importance, before],
            )?;
            tx.commit()?;
            Ok(ids)
        })
    }

    /// Remove an episode everywhere (row, FTS5 entry, embedding, its
    /// session turn). Returns it.
    ///
    /// # Errors
    /// [`MemoryError::NotFound`], [`MemoryError::Sql`].
    pub fn delete_episode(&self, id: &str) -> Result<Episode> {
        let e = self.episode(id)?;
        self.with(|c| {
            let tx = c.transaction()?;
            tx.execute("DELETE FROM episodes WHERE episode_id = ?1", [id])?;
            tx.execute(
                "DELETE FROM session_turns WHERE trace_id = ?1",
                [&e.trace_id],
            )?;
            tx.commit()?;
            Ok(())
        })?;
        Ok(e)
    }

    /// Counts: `(episodes, archived, facts, pending proposals)`.
    ///
    /// # Errors
    /// [`MemoryError::Sql`].
    pub fn counts(&self) -> Result<(u64, u64, u64, u64)> {
        self.with(|c| {
            Ok(c.query_row(
                "SELECT (SELECT count(*) FROM episodes), (SELECT count(*) FROM episodes WHERE archived = 1),
                        (SELECT count(*) FROM semantic_facts), (SELECT count(*) FROM fact_proposals WHERE status = 'pending')",
                [],
                |r| Ok((r.get::<_, i64>(0)? as u64, r.get::<_, i64>(1)? as u64, r.get::<_, i64>(2)? as u64, r.get::<_, i64>(3)? as u64)),
            )?)
        })
    }

    /// The stored vectors of the unarchived episodes of `namespace` (of
    /// `sender` when given), newest first, at most `limit`.
    ///
    /// # Errors
    /// [`MemoryError::Sql`].
    pub fn episode_vectors(
        &self,
        namespace: &str,
        sender: Option<&str>,
        limit: usize,
    ) -> Result<Vec<(String, Vec<u8>)>> {
        let mut v = Vec::new();
        self.each_episode_vector(namespace, sender, limit, |id, b| {
            v.push((id.to_string(), b.to_vec()));
            Ok(())
        })?;
        Ok(v)
    }

    /// Visit the stored vectors of the unarchived episodes of `namespace`
    /// (of `sender` when given), newest first, at most `limit`:
    /// `f(episode id, vector bytes)`, both borrowed from SQLite's row (no
    /// copy per episode: a search scans a sender's whole history).
    ///
    /// # Errors
    /// [`MemoryError::Sql`], or `f`'s error.
    pub fn each_episode_vector(
        &self,
        namespace: &str,
        sender: Option<&str>,
        limit: usize,
        mut f: impl FnMut(&str, &[u8]) -> Result<()>,
    ) -> Result<()> {
        self.with(|c| {
            let mut st = match sender {
                Some(_) => c.prepare_cached(VECTORS_OF_SENDER)?,
                None => c.prepare_cached(VECTORS_OF_NAMESPACE)?,
            };
            let mut rows = match sender {
                Some(s) => st.query(params![namespace, s, limit as i64])?,
                None => st.query(params![namespace, limit as i64])?,
            };
            while let Some(r) = rows.next()? {
                let id = r.get_ref(0)?.as_str().map_err(rusqlite::Error::from)?;
                let blob = r.get_ref(1)?.as_blob().map_err(rusqlite::Error::from)?;
                f(id, blob)?;
            }
            Ok(())
        })
    }

    /// Episodes by id with their stored vectors when they have one, in
    /// the order given (ids not found are skipped).
    ///
    /// # Errors
    /// [`MemoryError::Sql`].
    pub fn episodes_with_vectors(&self, ids: &[&str]) -> Result<Vec<(Episode, Option<Vec<u8>>)>> {
        self.with(|c| {
            let mut st = c.prepare_cached(&format!(
                "SELECT {COLS}, embedding FROM episodes WHERE episode_id = ?1"
            ))?;
            let mut out = Vec::with_capacity(ids.len());
            for id in ids {
                if let Some(e) = st
                    .query_row([id], |r| Ok((row(r)?, r.get::<_, Option<Vec<u8>>>(14)?)))
                    .optional()?
                {
                    out.push(e);
                }
            }
            Ok(out)
        })
    }

    /// Episodes by id, in the order given (ids not found are skipped).
    ///
    /// # Errors
    /// [`MemoryError::Sql`].
    pub fn episodes_by_id(&self, ids: &[&str]) -> Result<Vec<Episode>> {
        self.with(|c| {
            let mut st = c.prepare_cached(&format!(
                "SELECT {COLS} FROM episodes WHERE episode_id = ?1"
            ))?;
            let mut out = Vec::with_capacity(ids.len());
            for id in ids {
                if let Some(e) = st.query_row([id], row).optional()? {
                    out.push(e);
                }
            }
            Ok(out)
        })
    }

    /// The stored vectors of episodes by id (ids without one are skipped).
    ///
    /// # Errors
    /// [`MemoryError::Sql`].
    pub fn vectors_by_id(&self, ids: &[&str]) -> Result<Vec<(String, Vec<u8>)>> {
        self.with(|c| {
            let mut st = c.prepare_cached(
                "SELECT embedding FROM episodes WHERE episode_id = ?1 AND embedding IS NOT NULL",
            )?;
            let mut out = Vec::with_capacity(ids.len());
            for id in ids {
                if let Some(b) = st.query_row([id], |r| r.get::<_, Vec<u8>>(0)).optional()? {
                    out.push(((*id).to_string(), b));
                }
            }
            Ok(out)
        })
    }

    /// Unarchived episodes without a vector yet, oldest first: `(id, text)`.
    ///
    /// # Errors
    /// [`MemoryError::Sql`].
    pub fn episodes_without_vector(&self, limit: usize) -> Result<Vec<(String, String)>> {
        self.with(|c| {
            let mut st = c.prepare_cached(
                "SELECT episode_id, user_message, coalesce(final_response, '') FROM episodes
                 WHERE embedding IS NULL AND archived = 0 ORDER BY id LIMIT ?1",
            )?;
            let v = st
                .query_map([limit as i64], |r| {
                    let (id, u, a): (String, String, String) = (r.get(0)?, r.get(1)?, r.get(2)?);
                    Ok((id, format!("{u}\n{a}")))
                })?
                .collect::<rusqlite::Result<Vec<_>>>()?;
            Ok(v)
        })
    }
}

/// The insert of one episode (`INSERT OR IGNORE`: an episode id is what
/// the exchange is, so the same exchange is stored once).
pub(super) const INSERT: &str = "INSERT OR IGNORE INTO episodes (episode_id, trace_id, session_id, sender, namespace, started_at, user_message, final_response, outcome, summary, importance, reflected, archived, seq, embedding, scope, indexed_at)
     VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17)";

/// Run [`INSERT`] (prepared as `st`) for `e`; 1 when inserted, 0 when
/// the episode was there.
pub(super) fn insert_one(
    st: &mut rusqlite::Statement<'_>,
    e: &Episode,
    vector: Option<&[u8]>,
    indexed_at: &str,
) -> rusqlite::Result<usize> {
    st.execute(params![
        e.episode_id,
        e.trace_id,
        e.session_id,
        e.sender,
        e.namespace,
        e.started_at,
        e.user_message,
        e.final_response,
        e.outcome,
        e.summary,
        e.importance,
        e.reflected as i64,
        e.archived as i64,
        e.seq as i64,
        vector,
        scope_tokens(&e.namespace, &e.sender),
        indexed_at
    ])
}

/// The stored vectors of one sender's unarchived episodes, newest first.
/// Its own statement, not one with `(?2 IS NULL OR sender = ?2)`: with that
/// OR, SQLite's planner uses the index for the namespace only and walks every
/// episode of the namespace (100k rows instead of the sender's 1k in
/// `capsaga-bench --memory`).
const VECTORS_OF_SENDER: &str = "SELECT episode_id, embedding FROM episodes
     WHERE namespace = ?1 AND sender = ?2 AND archived = 0 AND embedding IS NOT NULL
     ORDER BY started_at DESC, id DESC LIMIT ?3";

/// The stored vectors of a namespace's unarchived episodes, newest first.
const VECTORS_OF_NAMESPACE: &str = "SELECT episode_id, embedding FROM episodes
     WHERE namespace = ?1 AND archived = 0 AND embedding IS NOT NULL
     ORDER BY started_at DESC, id DESC LIMIT ?2";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_senders_vectors_are_read_through_the_sender_index() {
        let d = tempfile::tempdir().unwrap();
        let store = Store::open(&d.path().join("episodes.db"), "m", 4).unwrap();
        let plan: Vec<String> = store
            .with(|c| {
                let mut st = c.prepare(&format!("EXPLAIN QUERY PLAN {VECTORS_OF_SENDER}"))?;
                let rows = st
                    .query_map(params!["default", "alice", 10], |r| r.get::<_, String>(3))?
                    .collect::<rusqlite::Result<Vec<_>>>()?;
                Ok(rows)
            })
            .unwrap();
        assert!(
            plan.iter()
                .any(|p| p.contains("idx_episodes_sender_time") && p.contains("sender=?")),
            "{plan:?}"
        );
    }
}
