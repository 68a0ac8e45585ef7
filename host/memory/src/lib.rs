//! The memory of capsaga's agents (seed 004), in the CoALA vocabulary:
//!
//! - **working** memory is the turn's trace, and across the turns of a
//!   session their messages and answers with a running summary
//!   ([`Memory::record_turn`], [`Memory::history`]; the runtime's agent loop
//!   applies seed 000 §3's rules with [`needs_summary`]);
//! - **episodic** memory: every closed trace indexed as an episode in
//!   SQLite FTS5, keyed by sender ([`Memory::index_episode`]), scored for
//!   importance, retrieved as the sender's last N plus the top K matches
//!   ([`Memory::bundle_for_turn`]), archived by retention;
//! - **semantic** memory: facts with all-MiniLM-L6-v2 embeddings
//!   ([`embed`]), retrieved by the seed's score above a threshold within a
//!   byte budget, reinforced on access; facts enter only by the operator's
//!   approval of a proposal ([`Memory::approve`]) or MEMORY.md;
//! - **core** memory: the operator's files ([`core_files`]).
//!
//! Reflection ([`Memory::reflection_clusters`], [`reflect`]) groups
//! important unreflected episodes by embedding similarity; the runtime has
//! the model distil each group and queues the result as a proposal.
//!
//! This crate has no async and no model provider: the runtime owns the
//! model calls (summaries, reflection) and the dispatch door (memory tools,
//! grants, saga steps). Every SQL statement of the crate is in [`store`].

pub mod core_files;
pub mod embed;
pub mod error;
pub mod eval;
pub mod memory_md;
pub mod reflect;
pub mod render;
pub mod score;
pub mod store;
pub mod types;

pub use embed::{Embedder, MiniLm};
pub use error::{MemoryError, Result};
pub use store::{EpisodeQuery, Store};
pub use types::{Episode, Fact, NewEpisode, Proposal, SessionHistory, SessionTurn};

use jiff::Timestamp;
use sha2::{Digest, Sha256};
use std::path::PathBuf;
use std::sync::{Arc, RwLock};

/// Settings of the memory (the runtime fills them from `[memory]`).
#[derive(Debug, Clone)]
pub struct MemoryConfig {
    /// The memory database (`episodes.db`).
    pub db_path: PathBuf,
    /// The operator's workspace holding the core files and MEMORY.md.
    pub core: core_files::CoreFiles,
    /// The namespace the agent's own turns are written to.
    pub namespace: String,
    /// Latest episodes of the sender in the prompt (seed: N = 5).
    pub recent_n: usize,
    /// Best FTS5 matches in the prompt (seed: K = 3).
    pub relevant_k: usize,
    /// Most facts in the prompt (seed: M = 5).
    pub fact_top_m: usize,
    /// Least fact score that enters the prompt (seed: 0.7).
    pub fact_threshold: f32,
    /// Retention: importance under which old episodes are archived (0.3).
    pub archive_below: f64,
    /// Retention: age in days past which (60).
    pub archive_after_days: i64,
}

impl MemoryConfig {
    /// The seed's defaults for a database and a workspace directory.
    pub fn new(db_path: PathBuf, workspace: PathBuf) -> MemoryConfig {
        MemoryConfig {
            db_path,
            core: core_files::CoreFiles {
                dir: workspace,
                files: core_files::DEFAULT_CORE_FILES
                    .iter()
                    .map(|s| s.to_string())
                    .collect(),
                required: vec!["SOUL.md".into()],
            },
            namespace: "default".into(),
            recent_n: 5,
            relevant_k: 3,
            fact_top_m: 5,
            fact_threshold: 0.7,
            archive_below: 0.3,
            archive_after_days: 60,
        }
    }

    /// `<workspace>/MEMORY.md`.
    pub fn memory_md(&self) -> PathBuf {
        self.core.dir.join("MEMORY.md")
    }
}

/// Candidates each ranking gives to the fusion of episode retrieval.
pub const FUSION_POOL: usize = 20;
/// The constant of reciprocal rank fusion (Cormack, Clarke, Büttcher 2009).
pub const RRF_K: f64 = 60.0;
/// Most episode vectors scanned per search (newest first).
pub const SEMANTIC_SCAN: usize = 5000;

/// Longest fact, in characters.
pub const MAX_FACT_CHARS: usize = 500;

/// What memory gives a turn (seed 004 `MemoryBundle`).
#[derive(Debug, Clone, Default)]
pub struct Bundle {
    /// Facts above the threshold, best first.
    pub facts: Vec<Fact>,
    /// The sender's latest episodes and the best matches, without
    /// duplicates, ordered by importance × recency.
    pub episodes: Vec<Episode>,
}

impl Bundle {
    /// The prompt's memory block (see [`render::retrieved`]).
    pub fn render(&self) -> String {
        render::retrieved(&self.facts, &self.episodes)
    }
}

/// What `forget` removed.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Forgotten {
    /// `fact` or `episode`.
    pub what: &'static str,
    /// Its id.
    pub id: String,
    /// Its text (the fact, or the episode's user message).
    pub text: String,
    /// Whether a MEMORY.md line was removed too.
    pub memory_md_line: bool,
}

/// A group of episodes for reflection.
#[derive(Debug, Clone)]
pub struct Cluster {
    /// The namespace.
    pub namespace: String,
    /// Its episodes, most important first.
    pub episodes: Vec<Episode>,
}

/// The memory: the store, the embedder and the in-memory vector index of
/// the facts (brute-force cosine; 10k facts of 384 floats is 15 MB).
pub struct Memory {
    store: Store,
    embedder: Arc<dyn Embedder>,
    cfg: MemoryConfig,
    index: RwLock<Vec<(String, String, Vec<f32>)>>,
}

impl std::fmt::Debug for Memory {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Memory")
            .field("db", &self.cfg.db_path)
            .finish()
    }
}

/// RFC 3339 of a timestamp, seconds precision.
pub fn rfc3339(t: Timestamp) -> String {
    t.round(jiff::Unit::Second)
        .map(|t| t.to_string())
        .unwrap_or_else(|_| t.to_string())
}

/// Days from `at` (RFC 3339; unparsable counts as very old) to `now`.
fn days_since(at: &str, now: Timestamp) -> f64 {
    match at.parse::<Timestamp>() {
        Ok(t) => (now.as_second() - t.as_second()) as f64 / 86_400.0,
        Err(_) => 3650.0,
    }
}

/// A fact's id: `f-` and the first 16 hex digits of SHA-256 of its
/// namespace and text.
pub fn fact_id(namespace: &str, text: &str) -> String {
    let h = Sha256::digest(format!("{namespace}\n{text}").as_bytes());
    format!("f-{}", &hex::encode(h)[..16])
}

/// Seed 000 §3: whether a session's history needs summarising before the
/// next turn: more than `keep_after` (20) turns past the summary. The
/// summary then covers all but the last `verbatim` (5).
pub fn needs_summary(h: &SessionHistory, keep_after: usize) -> bool {
    h.turns.len() > keep_after
}

impl Memory {
    /// Open the memory: the database (created when absent), the vector
    /// index of its facts, and MEMORY.md's bullets not yet indexed (added as
    /// `manual` facts: the operator wrote them).
    ///
    /// # Errors
    /// [`MemoryError::Database`] (foreign, damaged, newer file),
    /// [`MemoryError::Dimension`] (another model's vectors),
    /// [`MemoryError::Embed`], [`MemoryError::File`].
    pub fn open(cfg: MemoryConfig, embedder: Arc<dyn Embedder>) -> Result<Memory> {
        let store = Store::open(&cfg.db_path, embedder.model_id(), embedder.dim())?;
        let mut index = Vec::new();
        for (id, ns, blob) in store.fact_vectors()? {
            let v = embed::from_blob(&format!("fact {id}"), &blob, embedder.dim())?;
            index.push((id, ns, v));
        }
        let me = Memory {
            store,
            embedder,
            cfg,
            index: RwLock::new(index),
        };
        me.sync_memory_md()?;
        Ok(me)
    }

    /// The settings.
    pub fn config(&self) -> &MemoryConfig {
        &self.cfg
    }

    /// The store (listing, counts).
    pub fn store(&self) -> &Store {
        &self.store
    }

    /// The embedder.
    pub fn embedder(&self) -> &Arc<dyn Embedder> {
        &self.embedder
    }

    /// Index MEMORY.md's bullets that are not facts yet.
    fn sync_memory_md(&self) -> Result<()> {
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
            if !known.contains(&id) {
                self.insert_fact(&ns, &t, &id, "manual", 0.5)?;
            }
        }
        Ok(())
    }

    fn insert_fact(
        &self,
        ns: &str,
        text: &str,
        id: &str,
        source: &str,
        importance: f64,
    ) -> Result<Fact> {
        let v = self.embedder.embed_one(text)?;
        let now = rfc3339(Timestamp::now());
        let f = Fact {
            fact_id: id.to_string(),
            namespace: ns.to_string(),
            text: text.to_string(),
            source: source.to_string(),
            created_at: now,
            importance,
            access_count: 0,
            last_access: None,
            score: None,
        };
        if self.store.insert_fact(&f, &embed::to_blob(&v))?
            && let Ok(mut i) = self.index.write()
        {
            i.push((f.fact_id.clone(), ns.to_string(), v));
        }
        Ok(f)
    }

    /// The core memory text and its warnings (seed 004 `ensure_core`).
    ///
    /// # Errors
    /// [`MemoryError::CoreMissing`].
    pub fn ensure_core(&self) -> Result<(String, Vec<String>)> {
        self.cfg.core.ensure_core()
    }

    /// Index a closed trace as an episode (idempotent per trace): importance
    /// from novelty against the sender's best matches, engagement and the
    /// outcome.
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
                .match_episodes(&n.namespace, Some(&n.sender), &q, 3)?,
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
        let mut cands: Vec<(f32, String)> = {
            let idx = self
                .index
                .read()
                .map_err(|_| MemoryError::Sql("fact index lock poisoned".into()))?;
            idx.iter()
                .filter(|(_, ns, _)| namespaces.contains(&ns.as_str()))
                .map(|(id, _, v)| (score::cosine(q, v), id.clone()))
                .filter(|(c, _)| score::W_RELEVANCE * c + 0.5 >= threshold)
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
        let mut fetched: std::collections::HashMap<String, Episode> = std::collections::HashMap::new();
        if let Some(q) = score::fts_query(message) {
            for (rank, e) in self.store.match_episodes(namespace, sender, &q, FUSION_POOL)?.into_iter().enumerate() {
                *fused.entry(e.episode_id.clone()).or_default() += 1.0 / (RRF_K + rank as f64 + 1.0);
                fetched.insert(e.episode_id.clone(), e);
            }
        }
        if let Some(q) = query {
            let mut sims: Vec<(f32, String)> = Vec::new();
            for (id, blob) in self.store.episode_vectors(namespace, sender, SEMANTIC_SCAN)? {
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

    /// What memory gives a turn of `sender` (seed 004 §7): episodes and
    /// facts of the configured namespace; the facts given are reinforced.
    ///
    /// # Errors
    /// [`MemoryError::Embed`], [`MemoryError::Sql`].
    pub fn bundle_for_turn(&self, sender: &str, message: &str) -> Result<Bundle> {
        let now = Timestamp::now();
        let ns = self.cfg.namespace.as_str();
        let episodes = self.search_episodes(
            ns,
            Some(sender),
            message,
            self.cfg.recent_n,
            self.cfg.relevant_k,
            now,
        )?;
        let facts = if self.index.read().map(|i| i.is_empty()).unwrap_or(true) {
            Vec::new()
        } else {
            let facts =
                self.search_facts(&[ns], message, self.cfg.fact_top_m, self.cfg.fact_threshold)?;
            self.access(&facts)?;
            facts
        };
        Ok(Bundle { facts, episodes })
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
        let p = Proposal {
            proposal_id: format!("p-{}", uuid::Uuid::new_v4()),
            namespace: namespace.to_string(),
            text: t,
            origin: origin.to_string(),
            episode_ids,
            created_at: rfc3339(Timestamp::now()),
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
    /// (the principal). A proposal already decided is skipped.
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
            let f = self.insert_fact(&p.namespace, &p.text, &fid, &source, 0.6)?;
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
            }
            out.push(f);
        }
        Ok(out)
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

    /// Record a finished turn in its session; returns its position.
    ///
    /// # Errors
    /// [`MemoryError::Sql`].
    pub fn record_turn(
        &self,
        session: &str,
        sender: &str,
        user: &str,
        answer: Option<&str>,
        trace_id: &str,
    ) -> Result<u64> {
        self.store.append_turn(
            session,
            sender,
            user,
            answer,
            trace_id,
            &rfc3339(Timestamp::now()),
        )
    }

    /// A session's history.
    ///
    /// # Errors
    /// [`MemoryError::Sql`].
    pub fn history(&self, session: &str) -> Result<SessionHistory> {
        self.store.session(session)
    }

    /// Store a session's new summary covering turns up to `upto`.
    ///
    /// # Errors
    /// [`MemoryError::Sql`].
    pub fn set_summary(&self, session: &str, summary: &str, upto: u64) -> Result<()> {
        self.store.set_session_summary(session, summary, upto)
    }
}
