//! Writes of semantic memory: MEMORY.md's bullets indexed, proposals
//! queued, withdrawn, approved (a fact, MEMORY.md, the source episodes
//! marked reflected) or discarded, and `forget`.

use crate::error::{MemoryError, Result};
use crate::types::{Fact, Proposal};
use crate::{Forgotten, MAX_FACT_CHARS, Memory, embed, fact_id, memory_md, rfc3339};
use jiff::Timestamp;

impl Memory {
    /// Index MEMORY.md's bullets that are not facts yet.
    pub(crate) fn sync_memory_md(&self) -> Result<()> {
        let text = memory_md::read(&self.cfg.memory_md())?;
        let ns = self.cfg.namespace.clone();
        let known: std::collections::BTreeSet<String> = self
            .index
            .read()
            .map(|i| i.iter().map(|(id, _, _)| id.clone()).collect())
            .unwrap_or_default();
        for b in memory_md::bullets(&text) {
            let t = memory_md::one_line(&b.text, MAX_FACT_CHARS);
            let id = b.fact_id.clone().unwrap_or_else(|| fact_id(&ns, &t));
            if !known.contains(&id) && !self.store.fact_exists(&id)? {
                self.insert_fact(&ns, &t, &id, "manual", 0.5, None)?;
            }
        }
        Ok(())
    }

    /// Insert a fact valid from `valid_at` (now when `None`), embedded and
    /// indexed; a fact with this id is left as it is.
    pub(crate) fn insert_fact(
        &self,
        ns: &str,
        text: &str,
        id: &str,
        source: &str,
        importance: f64,
        valid_at: Option<&str>,
    ) -> Result<Fact> {
        let v = self.embedder.embed_one(text)?;
        let now = Timestamp::now();
        let f = Fact {
            fact_id: id.to_string(),
            namespace: ns.to_string(),
            text: text.to_string(),
            source: source.to_string(),
            created_at: rfc3339(now),
            valid_at: match valid_at {
                Some(v) => crate::canonical_time(v)?,
                None => crate::canonical_time(&now.to_string())?,
            },
            superseded_by: None,
            importance,
            access_count: 0,
            last_access: None,
            score: None,
        };
        if self.store.insert_fact(&f, &embed::to_blob(&v))?
            && let Ok(mut i) = self.index.write()
        {
            i.push((f.fact_id.clone(), ns.to_string(), embed::normalise(v)));
        }
        Ok(f)
    }

    /// Queue a proposed fact for the operator. The text is untrusted until
    /// approved: it is stored as one line (see [`memory_md::one_line`]) and
    /// never enters a prompt before approval.
    ///
    /// # Errors
    /// [`MemoryError::Invalid`] for an empty text, [`MemoryError::Sql`].
    pub fn propose(
        &self,
        namespace: &str,
        text: &str,
        origin: &str,
        episode_ids: Vec<String>,
    ) -> Result<Proposal> {
        let t = memory_md::one_line(text, MAX_FACT_CHARS);
        if t.is_empty() {
            return Err(MemoryError::Invalid(
                "a proposed fact must have some text".into(),
            ));
        }
        // Valid from the latest of its episodes (none: from approval).
        let valid_at = {
            let ids: Vec<&str> = episode_ids.iter().map(String::as_str).collect();
            self.store
                .episodes_by_id(&ids)?
                .into_iter()
                .map(|e| e.started_at)
                .max()
        };
        let p = Proposal {
            proposal_id: format!("p-{}", uuid::Uuid::new_v4()),
            namespace: namespace.to_string(),
            text: t,
            origin: origin.to_string(),
            episode_ids,
            created_at: rfc3339(Timestamp::now()),
            valid_at,
            status: "pending".into(),
            decided_by: None,
            fact_id: None,
        };
        self.store.insert_proposal(&p)?;
        Ok(p)
    }

    /// Withdraw a pending proposal (the compensation of a propose step).
    /// True when it was pending.
    ///
    /// # Errors
    /// [`MemoryError::Sql`].
    pub fn withdraw(&self, proposal_id: &str) -> Result<bool> {
        self.store.decide_proposal(
            proposal_id,
            "pending",
            "withdrawn",
            None,
            &rfc3339(Timestamp::now()),
            None,
        )
    }

    /// The operator approves proposals: each becomes a fact (embedded,
    /// indexed, appended to MEMORY.md under today's heading), its source
    /// episodes are marked reflected, and the decision is logged with `by`
    /// (the principal). A proposal already decided is skipped. The later
    /// value wins: a fact on the same subject with another value (see
    /// [`crate::supersede`]) valid earlier is marked superseded by the new
    /// one; valid later, it supersedes the new one at once (logged both
    /// ways).
    ///
    /// # Errors
    /// [`MemoryError::NotFound`], [`MemoryError::File`],
    /// [`MemoryError::Embed`], [`MemoryError::Sql`].
    pub fn approve(&self, ids: &[String], by: &str) -> Result<Vec<Fact>> {
        let now = Timestamp::now();
        let at = rfc3339(now);
        let date = now.strftime("%Y-%m-%d").to_string();
        let mut out = Vec::new();
        for id in ids {
            let p = self.store.proposal(id)?;
            if p.status != "pending" {
                continue;
            }
            let fid = fact_id(&p.namespace, &p.text);
            let source = if p.origin == "reflection" {
                format!("reflection:{id}")
            } else {
                format!("agent:{id}")
            };
            let mut f = self.insert_fact(
                &p.namespace,
                &p.text,
                &fid,
                &source,
                0.6,
                p.valid_at.as_deref(),
            )?;
            memory_md::append(
                &self.cfg.memory_md(),
                &date,
                &[(fid.clone(), p.text.clone())],
            )?;
            if self
                .store
                .decide_proposal(id, "pending", "approved", Some(by), &at, Some(&fid))?
            {
                self.store.mark_reflected(&p.episode_ids, true)?;
                self.store
                    .log(&at, "approve", id, &format!("by {by}: fact {fid}"))?;
                f.superseded_by = self.supersede(&f, &at)?;
            }
            out.push(f);
        }
        Ok(out)
    }

    /// The later value wins among `f` and the live facts of its namespace
    /// (see [`Memory::approve`]). Returns the fact that supersedes `f`, if
    /// one does.
    fn supersede(&self, f: &Fact, at: &str) -> Result<Option<String>> {
        let near: Vec<String> = {
            let idx = self
                .index
                .read()
                .map_err(|_| MemoryError::Sql("fact index lock poisoned".into()))?;
            let Some(v) = idx
                .iter()
                .find(|(id, _, _)| *id == f.fact_id)
                .map(|x| x.2.clone())
            else {
                return Ok(None);
            };
            idx.iter()
                .filter(|(id, ns, g)| {
                    *id != f.fact_id
                        && *ns == f.namespace
                        && crate::score::dot(&v, g) >= crate::supersede::FACT_SAME_SUBJECT
                })
                .map(|(id, _, _)| id.clone())
                .collect()
        };
        let when = |t: &str| t.parse::<Timestamp>().ok();
        let mut winner = None;
        for g in self
            .store
            .facts_by_id(&near.iter().map(String::as_str).collect::<Vec<_>>())?
        {
            if !crate::supersede::disagree(&g.text, &f.text) {
                continue;
            }
            let (old, new) = if when(&g.valid_at) <= when(&f.valid_at) {
                (&g.fact_id, &f.fact_id)
            } else {
                winner = Some(g.fact_id.clone());
                (&f.fact_id, &g.fact_id)
            };
            if self.store.supersede_fact(old, new)? {
                if let Ok(mut i) = self.index.write() {
                    i.retain(|(id, _, _)| id != old);
                }
                self.store
                    .log(at, "supersede", old, &format!("by the later fact {new}"))?;
            }
            if winner.is_some() {
                break;
            }
        }
        Ok(winner)
    }

    /// The operator discards proposals (logged with `by`). Returns how many
    /// were pending.
    ///
    /// # Errors
    /// [`MemoryError::Sql`].
    pub fn discard(&self, ids: &[String], by: &str) -> Result<usize> {
        let at = rfc3339(Timestamp::now());
        let mut n = 0;
        for id in ids {
            if self
                .store
                .decide_proposal(id, "pending", "discarded", Some(by), &at, None)?
            {
                self.store.log(&at, "discard", id, &format!("by {by}"))?;
                n += 1;
            }
        }
        Ok(n)
    }

    /// Remove a fact (`f-…`) or an episode (`e-…`) everywhere: the row, its
    /// FTS5 entry and embedding, the vector index, its MEMORY.md line; and
    /// log that it was done, by whom.
    ///
    /// # Errors
    /// [`MemoryError::NotFound`], [`MemoryError::File`], [`MemoryError::Sql`].
    pub fn forget(&self, id: &str, by: &str) -> Result<Forgotten> {
        let at = rfc3339(Timestamp::now());
        let out = if id.starts_with("e-") {
            let e = self.store.delete_episode(id)?;
            Forgotten {
                what: "episode",
                id: id.to_string(),
                text: e.user_message,
                memory_md_line: false,
            }
        } else {
            let f = self.store.fact(id)?;
            // MEMORY.md first: if the file cannot be written the fact stays,
            // so nothing is half-forgotten.
            let line = memory_md::remove(&self.cfg.memory_md(), id, &f.text)?;
            self.store.delete_fact(id)?;
            if let Ok(mut i) = self.index.write() {
                i.retain(|(fid, _, _)| fid != id);
            }
            Forgotten {
                what: "fact",
                id: id.to_string(),
                text: f.text,
                memory_md_line: line,
            }
        };
        self.store.log(
            &at,
            "forget",
            id,
            &format!("by {by}: {} {}", out.what, out.text),
        )?;
        Ok(out)
    }
}
