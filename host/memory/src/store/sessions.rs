//! Sessions: each turn's message and answer, and the running summary of the
//! older turns (working memory across turns, seed 000 §3).

use super::Store;
use crate::error::Result;
use crate::types::{SessionHistory, SessionTurn};
use rusqlite::{OptionalExtension, params};

impl Store {
    /// Append a turn to a session; returns its position (from 1).
    ///
    /// # Errors
    /// [`crate::MemoryError::Sql`].
    pub fn append_turn(
        &self,
        session_id: &str,
        sender: &str,
        user_message: &str,
        final_response: Option<&str>,
        trace_id: &str,
        at: &str,
    ) -> Result<u64> {
        self.with(|c| {
            let tx = c.transaction()?;
            let seq: i64 = tx.query_row(
                "SELECT coalesce(max(seq), 0) + 1 FROM session_turns WHERE session_id = ?1",
                [session_id],
                |r| r.get(0),
            )?;
            tx.execute(
                "INSERT INTO session_turns (session_id, seq, sender, user_message, final_response, trace_id, at) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
                params![session_id, seq, sender, user_message, final_response, trace_id, at],
            )?;
            tx.commit()?;
            Ok(seq as u64)
        })
    }

    /// The session's summary and the turns after it.
    ///
    /// # Errors
    /// [`crate::MemoryError::Sql`].
    pub fn session(&self, session_id: &str) -> Result<SessionHistory> {
        self.with(|c| {
            let (summary, upto): (Option<String>, u64) = c
                .query_row(
                    "SELECT summary, upto_seq FROM session_summaries WHERE session_id = ?1",
                    [session_id],
                    |r| Ok((Some(r.get::<_, String>(0)?), r.get::<_, i64>(1)?.max(0) as u64)),
                )
                .optional()?
                .unwrap_or((None, 0));
            let mut st = c.prepare_cached(
                "SELECT seq, user_message, final_response, trace_id, sender FROM session_turns WHERE session_id = ?1 AND seq > ?2 ORDER BY seq",
            )?;
            let turns = st
                .query_map(params![session_id, upto as i64], |r| {
                    Ok(SessionTurn {
                        seq: r.get::<_, i64>(0)?.max(0) as u64,
                        user_message: r.get(1)?,
                        final_response: r.get(2)?,
                        trace_id: r.get(3)?,
                        sender: r.get(4)?,
                    })
                })?
                .collect::<rusqlite::Result<Vec<_>>>()?;
            let (total, first_sender): (i64, Option<String>) = c.query_row(
                "SELECT coalesce(max(seq), 0), (SELECT sender FROM session_turns WHERE session_id = ?1 ORDER BY seq LIMIT 1) FROM session_turns WHERE session_id = ?1",
                [session_id],
                |r| Ok((r.get(0)?, r.get(1)?)),
            )?;
            Ok(SessionHistory {
                summary,
                summarised_upto: upto,
                turns,
                total_turns: total.max(0) as u64,
                sender: first_sender,
            })
        })
    }

    /// Replace the session's summary, now covering turns up to `upto`.
    ///
    /// # Errors
    /// [`crate::MemoryError::Sql`].
    pub fn set_session_summary(&self, session_id: &str, summary: &str, upto: u64) -> Result<()> {
        self.with(|c| {
            c.execute(
                "INSERT INTO session_summaries (session_id, summary, upto_seq) VALUES (?1, ?2, ?3)
                 ON CONFLICT(session_id) DO UPDATE SET summary = excluded.summary, upto_seq = excluded.upto_seq",
                params![session_id, summary, upto as i64],
            )?;
            Ok(())
        })
    }
}
