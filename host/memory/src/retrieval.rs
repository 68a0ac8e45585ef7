//! Retrieval and indexing of the memory (seed 004 §4, §7): episodes
//! indexed and scored, facts and episodes searched, access reinforcement,
//! retention, reflection's selection.

use crate::error::{MemoryError, Result};
use crate::types::{Episode, Fact, NewEpisode};
use crate::{
    FUSION_POOL, LINK_EXTRA, LINK_SEEDS, Memory, NOVELTY_POOL, SEMANTIC_SCAN, days_since, embed,
    rank, rfc3339, score, when,
};
use jiff::Timestamp;

impl Memory {
    /// Index a closed trace as an episode (idempotent per trace, and per
    /// exchange: see [`crate::episode_id`]), dated by the turn's start:
    /// importance from novelty against the sender's [`NOVELTY_POOL`] latest
    /// episodes sharing a word with the message, engagement and the
    /// outcome.
    ///
    /// # Errors
    /// [`MemoryError::Invalid`] when `started_at` is not an RFC 3339
    /// date-time, [`MemoryError::Sql`].
    pub fn index_episode(&self, n: &NewEpisode) -> Result<Episode> {
        if let Some(e) = self.store.episode_of_trace(&n.trace_id)? {
            return Ok(e);
        }
        let started_at = crate::canonical_time(&n.started_at)?;
        let seq = n.turn_in_session as u64;
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
            episode_id: crate::episode_id(
                &n.namespace,
                &n.sender,
                &n.session_id,
                &started_at,
                &n.user_message,
                n.final_response.as_deref(),
                0,
            ),
            trace_id: n.trace_id.clone(),
            session_id: n.session_id.clone(),
            sender: n.sender.clone(),
            namespace: n.namespace.clone(),
            started_at,
            seq,
            user_message: n.user_message.clone(),
            final_response: n.final_response.clone(),
            outcome: n.outcome.clone(),
            summary: n.summary.clone(),
            importance,
            reflected: false,
            archived: false,
        };
        if !self.store.insert_episode(&e, &rfc3339(Timestamp::now()))? {
            // The same exchange was indexed already (an import of it).
            return self.store.episode(&e.episode_id);
        }
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

    /// One recall (issue 46): facts and episodes for `q.message`, the
    /// message embedded **once** and its vector used by both searches. What
    /// a turn is given ([`Memory::bundle_for_turn`]), what the agent's
    /// `memory_fetch` and `capsaga memory search` answer: one ranking for
    /// the three. The facts returned are reinforced (seed 004 `access`)
    /// when `q.reinforce`. Nothing is embedded when neither search needs
    /// the vector (no fact wanted or none stored, no relevant episode
    /// wanted).
    ///
    /// # Errors
    /// [`MemoryError::Embed`], [`MemoryError::Sql`].
    pub fn recall(&self, q: &RecallQuery<'_>) -> Result<crate::Bundle> {
        let facts_wanted = q.facts > 0
            && !self
                .index
                .read()
                .map_err(|_| MemoryError::Sql("fact index lock poisoned".into()))?
                .is_empty();
        let vector = if facts_wanted || q.relevant > 0 {
            Some(self.embedder.embed_one(q.message)?)
        } else {
            None
        };
        let facts = match &vector {
            Some(v) if facts_wanted => {
                let f =
                    self.search_facts_vec(&[q.namespace], v, q.facts, q.fact_threshold, q.now)?;
                if q.reinforce {
                    self.access(&f)?;
                }
                f
            }
            _ => Vec::new(),
        };
        let episodes = self.search_episodes_vec(
            q.namespace,
            q.sender,
            q.message,
            vector.as_deref(),
            q.recent,
            q.relevant,
            q.now,
        )?;
        Ok(crate::Bundle { facts, episodes })
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

    /// Episodes for a message: the best `k` by [`rank`] (relevance; the
    /// first ones from different sessions; the later value of a subject
    /// first; a time the message names preferred), then the sender's
    /// latest `n` not among them, newest first. Relevance is the cosine of
    /// the episodes' stored vectors to `query` (when given: episodes not
    /// embedded yet, and every episode without `query`, count by their
    /// words) and the BM25 score of the message's words; the candidates are
    /// the [`FUSION_POOL`] best of each among the sender's unarchived
    /// episodes (the namespace's when `sender` is `None`). `now` is when
    /// the question is asked (for "last week").
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
        let mut out = self.rank_episodes(namespace, sender, message, query, k, now)?;
        if let Some(s) = sender.filter(|_| n > 0) {
            for e in self.store.recent_episodes(namespace, s, n)? {
                if !out.iter().any(|o| o.episode_id == e.episode_id) {
                    out.push(e);
                }
            }
        }
        Ok(out)
    }

    /// The best `k` episodes for a message by [`rank::rank`] with the
    /// configured [`crate::MemoryConfig::rank`] (see
    /// [`Memory::search_episodes_vec`]).
    ///
    /// # Errors
    /// [`MemoryError::Dimension`], [`MemoryError::Sql`].
    pub fn rank_episodes(
        &self,
        namespace: &str,
        sender: Option<&str>,
        message: &str,
        query: Option<&[f32]>,
        k: usize,
        now: Timestamp,
    ) -> Result<Vec<Episode>> {
        if k == 0 {
            return Ok(Vec::new());
        }
        let dim = self.embedder.dim();
        let query = match query {
            Some(q) if q.len() != dim => {
                return Err(MemoryError::Dimension {
                    what: "the query's vector".into(),
                    expected: dim,
                    found: q.len(),
                });
            }
            Some(q) => Some(embed::normalise(q.to_vec())),
            None => None,
        };
        let query = query.as_deref();
        // By meaning: the scope's vectors, read once into one matrix.
        let scan = match query {
            Some(q) => Scan::new(&self.store, namespace, sender, q)?,
            None => Scan::default(),
        };
        let mut ids: Vec<&str> = scan.pool().map(|r| scan.id(r)).collect();
        for r in scan.later_neighbours(&self.cfg.rank) {
            ids.push(scan.id(r));
        }
        // By words: BM25 over the sender's own episodes (see
        // [`Memory::words_of`]).
        let words = self.words_of(namespace, sender, message)?;
        for (id, _) in &words {
            if !ids.contains(&id.as_str()) {
                ids.push(id);
            }
        }
        let rows = self.store.episodes_with_vectors(&ids)?;
        let window = when::window(message, now);
        let mut cands = Vec::with_capacity(rows.len());
        let mut episodes = Vec::with_capacity(rows.len());
        for (e, blob) in rows {
            let vector = match (&blob, query) {
                (Some(b), Some(_)) => Some(embed::from_blob(
                    &format!("episode {}", e.episode_id),
                    b,
                    dim,
                )?),
                _ => None,
            };
            let at = e.started_at.parse::<Timestamp>().ok();
            cands.push(rank::Candidate {
                session: e.session_id.clone(),
                at: at.map_or(0, |t| t.as_second()),
                key: e.episode_id.clone(),
                cosine: match (query, &vector) {
                    (Some(q), Some(v)) => Some(score::dot(q, v)),
                    _ => None,
                },
                bm25: words
                    .iter()
                    .find(|(id, _)| *id == e.episode_id)
                    .map(|(_, s)| *s),
                vector,
                in_window: match (window, at) {
                    (Some(w), Some(t)) => w.contains(t),
                    _ => false,
                },
                states_change: crate::supersede::states_change(&e.user_message),
                sender: e.sender.clone(),
                values: crate::supersede::values(&e.user_message),
                subject: crate::supersede::subject_words(&e.user_message),
            });
            episodes.push(e);
        }
        let order = rank::rank(&cands, &self.cfg.rank, k);
        let mut rows: Vec<Option<Episode>> = episodes.into_iter().map(Some).collect();
        Ok(order.into_iter().filter_map(|i| rows[i].take()).collect())
    }

    /// The [`FUSION_POOL`] best episodes for the words of `message`,
    /// best first (equal scores by id): `(episode id, BM25 score)`. For a
    /// sender, BM25 over the sender's own episodes (their matches read
    /// from FTS5 unranked, the [`SEMANTIC_SCAN`] latest, scored here in a
    /// collection of the sender's episodes): a sender's words are ranked
    /// by how rare they are in that sender's history, and FTS5's
    /// `bm25()`, which walks every term's posting list over the whole
    /// database at each query, is not asked. For a namespace, FTS5's
    /// ranking.
    fn words_of(
        &self,
        namespace: &str,
        sender: Option<&str>,
        message: &str,
    ) -> Result<Vec<(String, f64)>> {
        let Some(f) = score::fts_query(message) else {
            return Ok(Vec::new());
        };
        let Some(sender) = sender else {
            return self.store.match_scores(namespace, None, &f, FUSION_POOL);
        };
        let (docs, n) = self
            .store
            .sender_matches(namespace, sender, &f, SEMANTIC_SCAN)?;
        let bags: Vec<score::Bag> = docs
            .iter()
            .map(|d| {
                score::bag(
                    [
                        Some(d.user_message.as_str()),
                        d.final_response.as_deref(),
                        d.summary.as_deref(),
                    ]
                    .into_iter()
                    .flatten(),
                )
            })
            .collect();
        let terms: Vec<String> = score::query_terms(message)
            .into_iter()
            .take(score::MAX_QUERY_TERMS)
            .collect();
        let scores = score::bm25(&bags, n, &terms);
        let mut out: Vec<(String, f64)> = docs
            .into_iter()
            .zip(scores)
            .map(|(d, s)| (d.episode_id, s))
            .collect();
        out.sort_by(|a, b| b.1.total_cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
        out.truncate(FUSION_POOL);
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
}

/// What one [`Memory::recall`] asks for.
#[derive(Debug, Clone, Copy)]
pub struct RecallQuery<'a> {
    /// The namespace searched (facts and episodes).
    pub namespace: &'a str,
    /// Whose episodes (`None`: the namespace's, every sender's).
    pub sender: Option<&'a str>,
    /// The message or question.
    pub message: &'a str,
    /// Most facts returned (0: none searched).
    pub facts: usize,
    /// Least fact score returned.
    pub fact_threshold: f32,
    /// Most episodes by relevance ([`Memory::rank_episodes`]).
    pub relevant: usize,
    /// The sender's latest episodes added after them (not among them).
    pub recent: usize,
    /// Whether the facts returned count as accesses.
    pub reinforce: bool,
    /// When the question is asked (for "last week", and fact recency).
    pub now: Timestamp,
}

/// The vectors of a search's scope (at most [`SEMANTIC_SCAN`], newest
/// first; held in memory by the store between searches:
/// [`crate::store::ScopeVectors`]) and their cosines to the query.
#[derive(Default)]
struct Scan {
    vs: std::sync::Arc<crate::store::ScopeVectors>,
    /// Rows by cosine to the query, best first (ties by id).
    order: Vec<usize>,
}

impl Scan {
    fn new(store: &crate::Store, namespace: &str, sender: Option<&str>, q: &[f32]) -> Result<Scan> {
        let vs = store.scan_vectors(namespace, sender, SEMANTIC_SCAN)?;
        let sims = vs.dots(q);
        let ids = &vs.ids;
        let mut order: Vec<usize> = (0..ids.len()).collect();
        let by = |a: &usize, b: &usize| {
            sims[*b]
                .total_cmp(&sims[*a])
                .then_with(|| ids[*a].cmp(&ids[*b]))
        };
        // Only the pool's order matters (and the rest's membership).
        if order.len() > FUSION_POOL {
            order.select_nth_unstable_by(FUSION_POOL, by);
            order[..FUSION_POOL].sort_unstable_by(by);
        } else {
            order.sort_unstable_by(by);
        }
        Ok(Scan { vs, order })
    }

    fn id(&self, r: usize) -> &str {
        &self.vs.ids[r]
    }

    /// The [`FUSION_POOL`] rows nearest the query, best first.
    fn pool(&self) -> impl Iterator<Item = usize> + '_ {
        self.order.iter().take(FUSION_POOL).copied()
    }

    /// The rows past the pool that are near one of the [`LINK_SEEDS`]
    /// best (a cosine at least the ranking's lowest subject threshold), the
    /// [`LINK_EXTRA`] nearest (ties by id): the candidates a change of
    /// value said in other words brings (see [`rank`]).
    fn later_neighbours(&self, p: &rank::Params) -> Vec<usize> {
        let least = p
            .same_subject
            .min(p.change_subject)
            .min(p.change_shared_word);
        if self.order.len() <= FUSION_POOL || least > 1.0 {
            return Vec::new();
        }
        let seeds: Vec<usize> = self.order.iter().take(LINK_SEEDS).copied().collect();
        let mut near: Vec<(f32, usize)> = self.order[FUSION_POOL..]
            .iter()
            .filter_map(|&r| {
                let best = seeds
                    .iter()
                    .map(|&s| self.vs.dot_rows(s, r))
                    .fold(f32::NEG_INFINITY, f32::max);
                (best >= least).then_some((best, r))
            })
            .collect();
        near.sort_by(|a, b| {
            b.0.total_cmp(&a.0)
                .then_with(|| self.id(a.1).cmp(self.id(b.1)))
        });
        near.into_iter().take(LINK_EXTRA).map(|(_, r)| r).collect()
    }
}
