//! The words of a sender's episodes for BM25 over that sender's own
//! history ([`Store::sender_matches`], issue 49).

use super::Store;
use super::episodes::sender_token;
use crate::error::Result;
use rusqlite::params;

/// An episode's searchable words ([`Store::sender_matches`]).
#[derive(Debug, Clone)]
pub struct MatchedText {
    /// Its id.
    pub episode_id: String,
    /// The user's message.
    pub user_message: String,
    /// The answer, when there was one.
    pub final_response: Option<String>,
    /// Its summary, when it has one.
    pub summary: Option<String>,
}

impl Store {
    /// The words of every unarchived episode of `sender` in `namespace`
    /// that matches `fts_query` (from [`crate::score::fts_query`]), the
    /// `limit` most recently indexed: `(episode id, user message, final
    /// response, summary)`; and how many episodes the sender has (archived
    /// ones included), the collection [`crate::score::bm25`] ranks in.
    /// No FTS5 ranking: FTS5's `bm25()` asks for every term's document
    /// count over the whole index (each term's posting list walked, every
    /// query); the sender's matches, intersected with the scope's short
    /// posting list, are all a sender's BM25 needs.
    ///
    /// # Errors
    /// [`MemoryError::Sql`].
    pub fn sender_matches(
        &self,
        namespace: &str,
        sender: &str,
        fts_query: &str,
        limit: usize,
    ) -> Result<(Vec<MatchedText>, usize)> {
        self.with(|c| {
            let expr = format!(
                "scope:\"{}\" AND {{user_message final_response summary}}: ({fts_query})",
                sender_token(namespace, sender)
            );
            let mut st = c.prepare_cached(
                "SELECT e.episode_id, e.user_message, e.final_response, e.summary
                 FROM episodes_fts JOIN episodes e ON e.id = episodes_fts.rowid
                 WHERE episodes_fts MATCH ?1 AND e.namespace = ?2 AND e.sender = ?3 AND e.archived = 0
                 ORDER BY episodes_fts.rowid DESC LIMIT ?4",
            )?;
            let v = st
                .query_map(params![expr, namespace, sender, limit as i64], |r| {
                    Ok(MatchedText {
                        episode_id: r.get(0)?,
                        user_message: r.get(1)?,
                        final_response: r.get(2)?,
                        summary: r.get(3)?,
                    })
                })?
                .collect::<rusqlite::Result<Vec<_>>>()?;
            let n: i64 = c
                .prepare_cached("SELECT count(*) FROM episodes WHERE namespace = ?1 AND sender = ?2")?
                .query_row(params![namespace, sender], |r| r.get(0))?;
            Ok((v, usize::try_from(n).unwrap_or(0)))
        })
    }
}
