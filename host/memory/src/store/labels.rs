//! Labels of what memory recalls (issue 47): whether an episode, or a turn
//! of a session, was recorded from a turn that read untrusted data. A row
//! without a label (written before schema 3, or imported) is untrusted.

use super::Store;
use crate::error::Result;
use rusqlite::params;
use std::collections::HashMap;

impl Store {
    /// Set the label (`trusted` or `untrusted`) of episode `episode_id`.
    ///
    /// # Errors
    /// [`crate::MemoryError::Sql`].
    pub fn set_episode_label(&self, episode_id: &str, label: &str) -> Result<()> {
        self.with(|c| {
            c.execute(
                "UPDATE episodes SET label = ?2 WHERE episode_id = ?1",
                params![episode_id, label],
            )?;
            Ok(())
        })
    }

    /// The labels of the episodes `ids` that have one.
    ///
    /// # Errors
    /// [`crate::MemoryError::Sql`].
    pub fn episode_labels(&self, ids: &[&str]) -> Result<HashMap<String, String>> {
        self.with(|c| {
            let mut st = c.prepare_cached(
                "SELECT label FROM episodes WHERE episode_id = ?1 AND label IS NOT NULL",
            )?;
            let mut out = HashMap::new();
            for id in ids {
                let mut rows = st.query([id])?;
                if let Some(r) = rows.next()? {
                    out.insert((*id).to_string(), r.get::<_, String>(0)?);
                }
            }
            Ok(out)
        })
    }

    /// Set the label of turn `seq` of session `session_id`.
    ///
    /// # Errors
    /// [`crate::MemoryError::Sql`].
    pub fn set_turn_label(&self, session_id: &str, seq: u64, label: &str) -> Result<()> {
        self.with(|c| {
            c.execute(
                "UPDATE session_turns SET label = ?3 WHERE session_id = ?1 AND seq = ?2",
                params![session_id, seq as i64, label],
            )?;
            Ok(())
        })
    }

    /// The positions of the turns of session `session_id` up to `upto`
    /// (all when `None`) that are not labelled `trusted`.
    ///
    /// # Errors
    /// [`crate::MemoryError::Sql`].
    pub fn untrusted_turns(&self, session_id: &str, upto: Option<u64>) -> Result<Vec<u64>> {
        self.with(|c| {
            let mut st = c.prepare_cached(
                "SELECT seq FROM session_turns WHERE session_id = ?1 AND seq <= ?2 AND (label IS NULL OR label <> 'trusted') ORDER BY seq",
            )?;
            let upto = upto.map_or(i64::MAX, |u| i64::try_from(u).unwrap_or(i64::MAX));
            let rows = st.query_map(params![session_id, upto], |r| r.get::<_, i64>(0))?;
            let mut out = Vec::new();
            for r in rows {
                out.push(r?.max(0) as u64);
            }
            Ok(out)
        })
    }
}

#[cfg(test)]
mod tests {
    use crate::store::Store;

    #[test]
    fn labels_are_kept_and_an_unlabelled_turn_counts_as_untrusted() {
        let d = tempfile::tempdir().unwrap();
        let s = Store::open(&d.path().join("m.db"), "m", 4).unwrap();
        for (msg, label) in [
            ("one", Some("trusted")),
            ("two", None),
            ("three", Some("untrusted")),
        ] {
            let seq = s
                .append_turn("s", "u", msg, None, "t", "2026-01-01T00:00:00Z")
                .unwrap();
            if let Some(l) = label {
                s.set_turn_label("s", seq, l).unwrap();
            }
        }
        assert_eq!(s.untrusted_turns("s", None).unwrap(), vec![2, 3]);
        assert_eq!(s.untrusted_turns("s", Some(2)).unwrap(), vec![2]);
        assert!(s.untrusted_turns("other", None).unwrap().is_empty());
        assert!(s.episode_labels(&["e-none"]).unwrap().is_empty());
    }
}
