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
pub mod rank;
pub mod reflect;
pub mod render;
pub mod score;
pub mod store;
pub mod supersede;
pub mod transfer;
pub mod types;
pub mod when;

mod reflection;
mod retrieval;
mod semantic;

pub use embed::{Embedder, MiniLm};
pub use error::{MemoryError, Result};
pub use retrieval::RecallQuery;
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
    /// The weights of the episodes' ranking.
    pub rank: rank::Params,
    /// Threads an import embeds with at once (default
    /// [`embed::import_workers`]).
    pub import_workers: usize,
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
            rank: rank::Params::default(),
            import_workers: embed::import_workers(),
        }
    }

    /// `<workspace>/MEMORY.md`.
    pub fn memory_md(&self) -> PathBuf {
        self.core.dir.join("MEMORY.md")
    }
}

/// Candidates each ranking (the FTS5 match of the words, the cosine of the
/// vectors) gives to the ranking of episodes ([`rank`]).
pub const FUSION_POOL: usize = 60;

/// The most relevant episodes by cosine whose later neighbours join the
/// candidates ([`LINK_EXTRA`]).
pub const LINK_SEEDS: usize = 8;

/// Most episodes that join the candidates of a search as the later
/// neighbours of its [`LINK_SEEDS`] best (a cosine to one of them at least
/// the ranking's subject threshold) although neither their words nor their
/// meaning put them among the best: a change of value said in other words
/// ("we're in: Via Garibaldi 5") than the question's and the first
/// statement's, for the later-value rule to compare.
pub const LINK_EXTRA: usize = 20;

/// Earlier episodes a new one's novelty is measured against: the sender's
/// most recently indexed that share a word with it (word-set Jaccard; see
/// [`score::novelty`]).
pub const NOVELTY_POOL: usize = 20;
/// Most episode vectors scanned per search (newest first).
pub const SEMANTIC_SCAN: usize = 5000;

/// Longest fact, in characters.
pub const MAX_FACT_CHARS: usize = 500;

/// What memory gives a turn (seed 004 `MemoryBundle`).
#[derive(Debug, Clone, Default)]
pub struct Bundle {
    /// Facts above the threshold, best first.
    pub facts: Vec<Fact>,
    /// The best matches in ranking order (one per session first), then
    /// the sender's latest episodes not among them, newest first.
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
    /// Its current episodes, most important first: what the model
    /// distils.
    pub episodes: Vec<Episode>,
    /// The ids of its episodes a later value superseded (never shown to
    /// the model; marked reflected with the others when the proposal is
    /// approved).
    pub superseded: Vec<String>,
}

/// The memory: the store, the embedder and the in-memory vector index of
/// the facts (brute force; 10k facts of 384 floats is 15 MB). The index
/// holds unit vectors (normalised when loaded), so a fact's cosine to a
/// normalised query is one dot product.
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

/// The stored form of an episode's date: RFC 3339 in UTC with
/// milliseconds (`2025-03-01T09:12:00.000Z`), whatever offset or precision
/// it was given in, so that dates compare as text in time order.
///
/// # Errors
/// [`MemoryError::Invalid`] when `at` is not an RFC 3339 date-time.
pub fn canonical_time(at: &str) -> Result<String> {
    let t: Timestamp = at
        .parse()
        .map_err(|e| MemoryError::Invalid(format!("`{at}` is not an RFC 3339 date-time: {e}")))?;
    Ok(t.strftime("%Y-%m-%dT%H:%M:%S%.3fZ").to_string())
}

/// An episode's id: `e-` and the first 32 hex digits of SHA-256 of what
/// the exchange is: namespace, sender, session, date (as
/// [`canonical_time`] writes it), user message, answer, and `occurrence`:
/// how many identical exchanges (same date and texts) come before it in
/// its session (0 but for repeats within one instant). The same exchange
/// imported or indexed twice has one id (the import's idempotency,
/// ranking's tie-breaker); its position in the session is not part of it,
/// so that an export of live turns imported again adds nothing.
pub fn episode_id(
    namespace: &str,
    sender: &str,
    session_id: &str,
    started_at: &str,
    user_message: &str,
    final_response: Option<&str>,
    occurrence: u64,
) -> String {
    let mut h = Sha256::new();
    let occurrence = occurrence.to_string();
    for part in [
        namespace,
        sender,
        session_id,
        started_at,
        user_message,
        &occurrence,
    ] {
        // Length-prefixed: no two tuples of parts hash the same bytes.
        h.update((part.len() as u64).to_le_bytes());
        h.update(part.as_bytes());
    }
    match final_response {
        Some(a) => {
            h.update([1]);
            h.update((a.len() as u64).to_le_bytes());
            h.update(a.as_bytes());
        }
        None => h.update([0]),
    }
    format!("e-{}", &hex::encode(h.finalize())[..32])
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
            index.push((id, ns, embed::normalise(v)));
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

    /// The core memory text and its warnings (seed 004 `ensure_core`).
    ///
    /// # Errors
    /// [`MemoryError::CoreMissing`].
    pub fn ensure_core(&self) -> Result<(String, Vec<String>)> {
        self.cfg.core.ensure_core()
    }

    /// What memory gives a turn of `sender` (seed 004 §7): episodes and
    /// facts of the configured namespace; the facts given are reinforced.
    ///
    /// # Errors
    /// [`MemoryError::Embed`], [`MemoryError::Sql`].
    pub fn bundle_for_turn(&self, sender: &str, message: &str) -> Result<Bundle> {
        self.recall(&RecallQuery {
            namespace: &self.cfg.namespace,
            sender: Some(sender),
            message,
            facts: self.cfg.fact_top_m,
            fact_threshold: self.cfg.fact_threshold,
            relevant: self.cfg.relevant_k,
            recent: self.cfg.recent_n,
            reinforce: true,
            now: Timestamp::now(),
        })
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
