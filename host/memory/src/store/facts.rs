//! Semantic facts with their embeddings, and fact proposals.

use super::Store;
use crate::error::{MemoryError, Result};
use crate::types::{Fact, Proposal};
use rusqlite::{OptionalExtension, Row, params};

const FACT_COLS: &str = "fact_id, namespace, text, source, created_at, importance, access_count, last_access, valid_at, superseded_by";

fn fact_row(r: &Row<'_>) -> rusqlite::Result<Fact> {
    Ok(Fact {
        fact_id: r.get(0)?,
        namespace: r.get(1)?,
        text: r.get(2)?,
        source: r.get(3)?,
        created_at: r.get(4)?,
        importance: r.get(5)?,
        access_count: r.get::<_, i64>(6)?.max(0) as u64,
        last_access: r.get(7)?,
        // Written by every insert since schema 2, and set by its migration.
        valid_at: match r.get::<_, Option<String>>(8)? {
            Some(v) => v,
            None => r.get(4)?,
        },
        superseded_by: r.get(9)?,
        score: None,
    })
}

const PROP_COLS: &str = "proposal_id, namespace, text, origin, episode_ids, created_at, status, decided_by, fact_id, valid_at";

fn prop_row(r: &Row<'_>) -> rusqlite::Result<Proposal> {
    let ids: String = r.get(4)?;
    Ok(Proposal {
        proposal_id: r.get(0)?,
        namespace: r.get(1)?,
        text: r.get(2)?,
        origin: r.get(3)?,
        // Written by this module as a JSON array of strings; anything else
        // reads as no episodes.
        episode_ids: serde_json::from_str(&ids).unwrap_or_default(),
        created_at: r.get(5)?,
        status: r.get(6)?,
        decided_by: r.get(7)?,
        fact_id: r.get(8)?,
        valid_at: r.get(9)?,
    })
}

impl Store {
    /// Insert a fact with its embedding (little-endian f32s); an existing
    /// fact with the same id is left as it is. True when inserted.
    ///
    /// # Errors
    /// [`MemoryError::Sql`].
    pub fn insert_fact(&self, f: &Fact, embedding: &[u8]) -> Result<bool> {
        self.with(|c| {
            let n = c.execute(
                &format!("INSERT OR IGNORE INTO semantic_facts ({FACT_COLS}, embedding) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11)"),
                params![
                    f.fact_id,
                    f.namespace,
                    f.text,
                    f.source,
                    f.created_at,
                    f.importance,
                    f.access_count as i64,
                    f.last_access,
                    f.valid_at,
                    f.superseded_by,
                    embedding
                ],
            )?;
            Ok(n == 1)
        })
    }

    /// The fact with this id.
    ///
    /// # Errors
    /// [`MemoryError::NotFound`], [`MemoryError::Sql`].
    pub fn fact(&self, id: &str) -> Result<Fact> {
        self.with(|c| {
            c.query_row(
                &format!("SELECT {FACT_COLS} FROM semantic_facts WHERE fact_id = ?1"),
                [id],
                fact_row,
            )
            .optional()?
            .ok_or_else(|| MemoryError::NotFound {
                what: "fact",
                id: id.to_string(),
            })
        })
    }

    /// Whether a fact with this id is stored (superseded or not).
    ///
    /// # Errors
    /// [`MemoryError::Sql`].
    pub fn fact_exists(&self, id: &str) -> Result<bool> {
        self.with(|c| {
            Ok(
                c.prepare_cached("SELECT 1 FROM semantic_facts WHERE fact_id = ?1")?
                    .exists([id])?,
            )
        })
    }

    /// Every fact (of `namespace`, when given), oldest first.
    ///
    /// # Errors
    /// [`MemoryError::Sql`].
    pub fn facts(&self, namespace: Option<&str>) -> Result<Vec<Fact>> {
        self.with(|c| {
            let mut st = c.prepare(&format!(
                "SELECT {FACT_COLS} FROM semantic_facts WHERE (?1 IS NULL OR namespace = ?1) ORDER BY created_at, fact_id"
            ))?;
            let v = st
                .query_map([namespace], fact_row)?
                .collect::<rusqlite::Result<Vec<_>>>()?;
            Ok(v)
        })
    }

    /// The id, namespace and embedding blob of every fact not superseded
    /// (to build the in-memory vector index: a superseded fact is no longer
    /// retrieved).
    ///
    /// # Errors
    /// [`MemoryError::Sql`].
    pub fn fact_vectors(&self) -> Result<Vec<(String, String, Vec<u8>)>> {
        self.with(|c| {
            let mut st = c.prepare(
                "SELECT fact_id, namespace, embedding FROM semantic_facts WHERE superseded_by IS NULL ORDER BY rowid",
            )?;
            let v = st
                .query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))?
                .collect::<rusqlite::Result<Vec<_>>>()?;
            Ok(v)
        })
    }

    /// Facts by id, in the order given (ids not found are skipped).
    ///
    /// # Errors
    /// [`MemoryError::Sql`].
    pub fn facts_by_id(&self, ids: &[&str]) -> Result<Vec<Fact>> {
        self.with(|c| {
            let mut st = c.prepare_cached(&format!(
                "SELECT {FACT_COLS} FROM semantic_facts WHERE fact_id = ?1"
            ))?;
            let mut out = Vec::with_capacity(ids.len());
            for id in ids {
                if let Some(f) = st.query_row([id], fact_row).optional()? {
                    out.push(f);
                }
            }
            Ok(out)
        })
    }

    /// Reinforce facts (seed 004 `access`): `access_count + 1`,
    /// `last_access = at`.
    ///
    /// # Errors
    /// [`MemoryError::Sql`].
    pub fn access_facts(&self, ids: &[&str], at: &str) -> Result<()> {
        self.with(|c| {
            let tx = c.transaction()?;
            for id in ids {
                tx.execute(
                    "UPDATE semantic_facts SET access_count = access_count + 1, last_access = ?2 WHERE fact_id = ?1",
                    params![id, at],
                )?;
            }
            tx.commit()?;
            Ok(())
        })
    }

    /// Mark fact `id` superseded by the later fact `by` (kept, listed, no
    /// longer retrieved). False when it was already superseded.
    ///
    /// # Errors
    /// [`MemoryError::Sql`].
    pub fn supersede_fact(&self, id: &str, by: &str) -> Result<bool> {
        self.with(|c| {
            let n = c.execute(
                "UPDATE semantic_facts SET superseded_by = ?2 WHERE fact_id = ?1 AND superseded_by IS NULL",
                params![id, by],
            )?;
            Ok(n == 1)
        })
    }

    /// Remove a fact. Returns it.
    ///
    /// # Errors
    /// [`MemoryError::NotFound`], [`MemoryError::Sql`].
    pub fn delete_fact(&self, id: &str) -> Result<Fact> {
        let f = self.fact(id)?;
        self.with(|c| {
            c.execute("DELETE FROM semantic_facts WHERE fact_id = ?1", [id])?;
            Ok(())
        })?;
        Ok(f)
    }

    /// Queue a proposal.
    ///
    /// # Errors
    /// [`MemoryError::Sql`].
    pub fn insert_proposal(&self, p: &Proposal) -> Result<()> {
        let ids = serde_json::to_string(&p.episode_ids).unwrap_or_else(|_| "[]".into());
        self.with(|c| {
            c.execute(
                &format!("INSERT INTO fact_proposals ({PROP_COLS}) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10)"),
                params![
                    p.proposal_id,
                    p.namespace,
                    p.text,
                    p.origin,
                    ids,
                    p.created_at,
                    p.status,
                    p.decided_by,
                    p.fact_id,
                    p.valid_at
                ],
            )?;
            Ok(())
        })
    }

    /// The proposal with this id.
    ///
    /// # Errors
    /// [`MemoryError::NotFound`], [`MemoryError::Sql`].
    pub fn proposal(&self, id: &str) -> Result<Proposal> {
        self.with(|c| {
            c.query_row(
                &format!("SELECT {PROP_COLS} FROM fact_proposals WHERE proposal_id = ?1"),
                [id],
                prop_row,
            )
            .optional()?
            .ok_or_else(|| MemoryError::NotFound {
                what: "proposal",
                id: id.to_string(),
            })
        })
    }

    /// Proposals with `status` (all when `None`), oldest first.
    ///
    /// # Errors
    /// [`MemoryError::Sql`].
    pub fn proposals(&self, status: Option<&str>) -> Result<Vec<Proposal>> {
        self.with(|c| {
            let mut st = c.prepare(&format!(
                "SELECT {PROP_COLS} FROM fact_proposals WHERE (?1 IS NULL OR status = ?1) ORDER BY created_at, proposal_id"
            ))?;
            let v = st
                .query_map([status], prop_row)?
                .collect::<rusqlite::Result<Vec<_>>>()?;
            Ok(v)
        })
    }

    /// Move a proposal from `from` to `to` (a decision, or a withdrawal by
    /// compensation), recording who decided and the fact it became. False
    /// when it was not in state `from` (decided once).
    ///
    /// # Errors
    /// [`MemoryError::Sql`].
    pub fn decide_proposal(
        &self,
        id: &str,
        from: &str,
        to: &str,
        by: Option<&str>,
        at: &str,
        fact_id: Option<&str>,
    ) -> Result<bool> {
        self.with(|c| {
            let n = c.execute(
                "UPDATE fact_proposals SET status = ?3, decided_by = ?4, decided_at = ?5, fact_id = ?6 WHERE proposal_id = ?1 AND status = ?2",
                params![id, from, to, by, at, fact_id],
            )?;
            Ok(n == 1)
        })
    }
}
