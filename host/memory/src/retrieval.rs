//! Retrieval and indexing of the memory (seed 004 §4, §7): episodes
//! indexed and scored, facts and episodes searched, access reinforcement,
//! retention, reflection's selection.

use crate::error::{MemoryError, Result};
use crate::types::{Episode, Fact, NewEpisode};
use crate::{
    Cluster, FUSION_POOL, Memory, NOVELTY_POOL, RRF_K, SEMANTIC_SCAN, days_since, embed, reflect,
    rfc3339, score,
};
use jiff::Timestamp;

impl Memory {
    /// Index a closed trace as an episode (idempotent per trace): importance
    /// from novelty against the sender's [`NOVELTY_POOL`] latest episodes
    /// sharing a word with the message, engagement and the outcome.
    ///
    /// # Errors
    /// [`MemoryError::Sql`].
    pub fn index_episode(&self, n: &NewEpisode) -> Result<Episode> {
        if let Some(e) = self.store.episode_of_trace(&n.trace_id)? {
            return Ok(e);
        }
        let earlier = match score::fts_query(&n.user_message) {
            Some(q) => self
                .store
                .newest_matches(&n.namespace, &n.sender, &q, NOVELTY_POOL)?,
            None => Vec::new(),
        };
        let novelty = score::novelty(
            &n.user_message,
            earlier.iter().map(|e| e.user_message.as_str()),
        );
        let words = score::words(&n.user_message).count();
        let importance = score::importance(
            novelty,
            score::engagement(words, n.turn_in_session),
            score::outcome_quality(&n.outcome),
        );
        let e = Episode {
            episode_id: format!("e-{}", uuid::Uuid::new_v4()),
            trace_id: n.trace_id.clone(),
            session_id: n.session_id.clone(),
            sender: n.sender.clone(),
            namespace: n.namespace.clone(),
            started_at: n.started_at.clone(),
            user_message: n.user_message.clone(),
            final_response: n.final_response.clone(),
            outcome: n.outcome.clone(),
            summary: n.summary.clone(),
            importance,
            reflected: false,
            archived: false,
        };
        self.store.insert_episode(&e)?;
        Ok(e)
    }

    /// Facts of `namespaces` scored against `query` (seed 004 §7), best
    /// first, at most `m`, with score at least `threshold`.
    ///
    /// # Errors
    /// [`MemoryError::Embed`], [`MemoryError::Sql`].
    pub fn search_facts(
        &self,
        namespaces: &[&str],
        query: &str,
        m: usize,
        threshold: f32,
    ) -> Result<Vec<Fact>> {
        let q = self.embedder.embed_one(query)?;
        self.search_facts_vec(namespaces, &q, m, threshold, Timestamp::now())
    }

    /// [`Memory::search_facts`] with the query's vector and the time given.
    ///
    /// # Errors
    /// [`MemoryError::Dimension`] when `q` is not the embedder's dimension,
    /// [`MemoryError::Sql`].
    pub fn search_facts_vec(
        &self,
        namespaces: &[&str],
        q: &[f32],
        m: usize,
        threshold: f32,
        now: Timestamp,
    ) -> Result<Vec<Fact>> {
        // Cosine first over the in-memory index; the full score needs the
        // rows, fetched for the best candidates only (the other terms add at
        // most 0.5, so a fact whose relevance cannot reach the threshold is
        // skipped).
        if q.len() != self.embedder.dim() {
            return Err(MemoryError::Dimension {
                what: "the query's vector".into(),
                expected: self.embedder.dim(),
                found: q.len(),
            });
        }
        let q = embed::normalise(q.to_vec());
        let mut cands: Vec<(f32, String)> = {
            let idx = self
                .index
                .read()
                .map_err(|_| MemoryError::Sql("fact index lock poisoned".into()))?;
            idx.iter()
                .filter(|(_, ns, _)| namespaces.contains(&ns.as_str()))
                .filter_map(|(id, _, v)| {
                    // Both unit vectors (the index's are normalised at
                    // load): the dot product is their cosine.
                    let c = score::dot(&q, v);
                    (score::W_RELEVANCE * c + 0.5 >= threshold).then(|| (c, id.clone()))
                })
                .collect()
        };
        cands.sort_by(|a, b| b.0.total_cmp(&a.0));
        cands.truncate(m.saturating_mul(8).max(32));
        let ids: Vec<&str> = cands.iter().map(|(_, id)| id.as_str()).collect();
        let rows = self.store.facts_by_id(&ids)?;
        let mut scored: Vec<Fact> = rows
            .into_iter()
            .zip(cands.iter())
            .map(|(mut f, (cos, _))| {
                let since = f
                    .last_access
                    .clone()
                    .unwrap_or_else(|| f.created_at.clone());
                f.score = Some(score::fact_score(
                    *cos,
                    days_since(&since, now),
                    f.importance,
                    f.access_count,
                ));
                f
            })
            .filter(|f| f.score.unwrap_or(0.0) >= threshold)
            .collect();
        scored.sort_by(|a, b| b.score.unwrap_or(0.0).total_cmp(&a.score.unwrap_or(0.0)));
        scored.truncate(m);
        Ok(scored)
    }

    /// Episodes for a message (see [`Memory::search_episodes_vec`]), the
    /// message embedded here.
    ///
    /// # Errors
    /// [`MemoryError::Embed`], [`MemoryError::Sql`].
    pub fn search_episodes(
        &self,
        namespace: &str,
        sender: Option<&str>,
        message: &str,
        n: usize,
        k: usize,
        now: Timestamp,
    ) -> Result<Vec<Episode>> {
        let q = self.embedder.embed_one(message)?;
        self.search_episodes_vec(namespace, sender, message, Some(&q), n, k, now)
    }

    /// Episodes for a message: the sender's latest `n`, plus the best `k`
    /// others by relevance, ordered by importance × recency (seed 004 §7).
    /// Relevance fuses two rankings by reciprocal rank fusion (Cormack et
    /// al. 2009, `1/(60 + rank)`): the FTS5 match of the message's words
    /// (BM25) and, when `query` is given, the cosine of the episodes'
    /// stored vectors (episodes not embedded yet take part by words only).
    ///
    /// # Errors
    /// [`MemoryError::Dimension`], [`MemoryError::Sql`].
    #[allow(clippy::too_many_arguments)]
    pub fn search_episodes_vec(
        &self,
        namespace: &str,
        sender: Option<&str>,
        message: &str,
        query: Option<&[f32]>,
        n: usize,
        k: usize,
        now: Timestamp,
    ) -> Result<Vec<Episode>> {
        let mut out = match sender {
            Some(s) if n > 0 => self.store.recent_episodes(namespace, s, n)?,
            _ => Vec::new(),
        };
        let mut fused: std::collections::HashMap<String, f64> = std::collections::HashMap::new();
        let mut fetched: std::collections::HashMap<String, Episode> =
            std::collections::HashMap::new();
        if let Some(q) = score::fts_query(message) {
            for (rank, e) in self
                .store
                .match_episodes(namespace, sender, &q, FUSION_POOL)?
                .into_iter()
                .enumerate()
            {
                *fused.entry(e.episode_id.clone()).or_default() +=
                    1.0 / (RRF_K + rank as f64 + 1.0);
                fetched.insert(e.episode_id.clone(), e);
            }
        }
        if let Some(q) = query {
            let mut sims: Vec<(f32, String)> = Vec::new();
            for (id, blob) in self
                .store
                .episode_vectors(namespace, sender, SEMANTIC_SCAN)?
            {
                let v = embed::from_blob(&format!("episode {id}"), &blob, self.embedder.dim())?;
                sims.push((score::cosine(q, &v), id));
            }
            sims.sort_by(|a, b| b.0.total_cmp(&a.0));
            for (rank, (_, id)) in sims.into_iter().take(FUSION_POOL).enumerate() {
                *fused.entry(id).or_default() += 1.0 / (RRF_K + rank as f64 + 1.0);
            }
        }
        let mut ranked: Vec<(f64, String)> = fused
            .into_iter()
            .filter(|(id, _)| !out.iter().any(|o| &o.episode_id == id))
            .map(|(id, s)| (s, id))
            .collect();
        ranked.sort_by(|a, b| b.0.total_cmp(&a.0).then_with(|| a.1.cmp(&b.1)));
        ranked.truncate(k);
        let missing: Vec<&str> = ranked
            .iter()
            .filter(|(_, id)| !fetched.contains_key(id))
            .map(|(_, id)| id.as_str())
            .collect();
        for e in self.store.episodes_by_id(&missing)? {
            fetched.insert(e.episode_id.clone(), e);
        }
        out.extend(ranked.iter().filter_map(|(_, id)| fetched.remove(id)));
        let key = |e: &Episode| e.importance * score::recency(days_since(&e.started_at, now));
        out.sort_by(|a, b| key(b).total_cmp(&key(a)));
        Ok(out)
    }

    /// Embed up to `limit` episodes that have no vector yet (new ones: the
    /// runtime calls this after indexing a turn, so indexing itself stays
    /// an FTS5 insert). Returns how many were embedded.
    ///
    /// # Errors
    /// [`MemoryError::Embed`], [`MemoryError::Sql`].
    pub fn embed_pending(&self, limit: usize) -> Result<usize> {
        let todo = self.store.episodes_without_vector(limit)?;
        for chunk in todo.chunks(16) {
            let texts: Vec<&str> = chunk.iter().map(|(_, t)| t.as_str()).collect();
            let vs = self.embedder.embed(&texts)?;
            for ((id, _), v) in chunk.iter().zip(vs) {
                self.store.set_episode_embedding(id, &embed::to_blob(&v))?;
            }
        }
        Ok(todo.len())
    }

    /// Reinforce facts (seed 004 `access`).
    ///
    /// # Errors
    /// [`MemoryError::Sql`].
    pub fn access(&self, facts: &[Fact]) -> Result<()> {
        if facts.is_empty() {
            return Ok(());
        }
        let ids: Vec<&str> = facts.iter().map(|f| f.fact_id.as_str()).collect();
        self.store.access_facts(&ids, &rfc3339(Timestamp::now()))
    }

    /// Reflection's selection (seed 004 §6.1): unreflected episodes of
    /// `namespace` with importance over 0.5, embedded (once, stored),
    /// grouped at cosine 0.75; groups of at least `min_size`.
    ///
    /// # Errors
    /// [`MemoryError::Embed`], [`MemoryError::Dimension`], [`MemoryError::Sql`].
    pub fn reflection_clusters(&self, namespace: &str, min_size: usize) -> Result<Vec<Cluster>> {
        let cands = self.store.reflection_candidates(namespace, 0.5, 500)?;
        let mut eps = Vec::with_capacity(cands.len());
        let mut vecs = Vec::with_capacity(cands.len());
        for (e, blob) in cands {
            let v = match blob {
                Some(b) => embed::from_blob(
                    &format!("episode {}", e.episode_id),
                    &b,
                    self.embedder.dim(),
                )?,
                None => {
                    let text = format!(
                        "{}\n{}",
                        e.user_message,
                        e.final_response.as_deref().unwrap_or("")
                    );
                    let v = self.embedder.embed_one(&text)?;
                    self.store
                        .set_episode_embedding(&e.episode_id, &embed::to_blob(&v))?;
                    v
                }
            };
            eps.push(e);
            vecs.push(v);
        }
        Ok(
            reflect::cluster(&vecs, reflect::CLUSTER_THRESHOLD, min_size)
                .into_iter()
                .map(|g| Cluster {
                    namespace: namespace.to_string(),
                    episodes: g.into_iter().map(|i| eps[i].clone()).collect(),
                })
                .collect(),
        )
    }

    /// Retention (seed 004 §4.4): archive out of the index the episodes
    /// under the importance floor older than the age limit, as of `now`;
    /// logged. Returns their ids.
    ///
    /// # Errors
    /// [`MemoryError::Sql`].
    pub fn retention(&self, now: Timestamp) -> Result<Vec<String>> {
        let before = now
            .checked_sub(jiff::SignedDuration::from_hours(
                24 * self.cfg.archive_after_days,
            ))
            .unwrap_or(now);
        let ids = self
            .store
            .archive_old(self.cfg.archive_below, &rfc3339(before))?;
        if !ids.is_empty() {
            self.store.log(
                &rfc3339(now),
                "archive",
                &format!("{} episode(s)", ids.len()),
                &ids.join(" "),
            )?;
        }
        Ok(ids)
    }
}
