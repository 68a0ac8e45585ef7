//! The records of the memory (seed 004 §9), as the store returns them.
//! Timestamps are RFC 3339 UTC strings, importance and scores lie in [0, 1].

use serde::Serialize;

/// One closed turn, remembered (episodic memory).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Episode {
    /// `e-` and 32 hex digits of SHA-256 of what the exchange is (see
    /// [`crate::episode_id`]): the same conversation indexed twice has the
    /// same ids (older databases hold `e-<uuid>` ids).
    pub episode_id: String,
    /// The trace it was made from.
    pub trace_id: String,
    /// The session the turn belonged to (metadata: retrieval is by sender).
    pub session_id: String,
    /// Who asked (the retrieval key).
    pub sender: String,
    /// The memory namespace (`mem:<namespace>`).
    pub namespace: String,
    /// When the exchange happened (the turn's start, or the imported
    /// exchange's own time), RFC 3339 UTC with milliseconds
    /// ([`crate::canonical_time`]): recency and "the later value wins" use
    /// this date, never the time the episode was indexed.
    pub started_at: String,
    /// The exchange's position in its session, from 1 (0: unknown).
    pub seq: u64,
    /// What the user wrote.
    pub user_message: String,
    /// The agent's answer, if any.
    pub final_response: Option<String>,
    /// The trace's outcome (`success`, `policy_denied`, ...; an imported
    /// exchange with an answer is a `success`).
    pub outcome: String,
    /// A summary of a long turn, written by the model.
    pub summary: Option<String>,
    /// Importance in [0, 1] (see [`crate::score::importance`]).
    pub importance: f64,
    /// Already used by a reflection.
    pub reflected: bool,
    /// Moved out of the index by retention (kept, never deleted silently).
    pub archived: bool,
}

/// What an episode is made from: the closed trace's parts.
#[derive(Debug, Clone, Default)]
pub struct NewEpisode {
    /// The trace id.
    pub trace_id: String,
    /// The session id.
    pub session_id: String,
    /// Who asked.
    pub sender: String,
    /// The namespace written to.
    pub namespace: String,
    /// RFC 3339 start of the turn.
    pub started_at: String,
    /// What the user wrote.
    pub user_message: String,
    /// The answer.
    pub final_response: Option<String>,
    /// The outcome.
    pub outcome: String,
    /// A summary (long turns).
    pub summary: Option<String>,
    /// How many steps the trace had.
    pub steps: usize,
    /// The turn's position in its session, from 1.
    pub turn_in_session: usize,
}

/// A fact of semantic memory, with its score when retrieved.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Fact {
    /// `f-<hash>`: the first 16 hex digits of SHA-256 of namespace and text.
    pub fact_id: String,
    /// The namespace.
    pub namespace: String,
    /// The fact.
    pub text: String,
    /// `manual` (MEMORY.md), `reflection:<proposal>` or `agent:<proposal>`.
    pub source: String,
    /// When it was added.
    pub created_at: String,
    /// Since when it holds: the latest date of the episodes it was
    /// distilled from, else when it was added. Of two facts on one
    /// subject, the one valid later wins.
    pub valid_at: String,
    /// The later fact that replaced it (then it is no longer retrieved).
    pub superseded_by: Option<String>,
    /// Importance in [0, 1].
    pub importance: f64,
    /// Times retrieved into a prompt or fetched.
    pub access_count: u64,
    /// Last retrieval.
    pub last_access: Option<String>,
    /// The retrieval score, when this fact was retrieved for a query.
    pub score: Option<f32>,
}

/// A proposed fact waiting for the operator (untrusted text until approved).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Proposal {
    /// `p-<uuid>`.
    pub proposal_id: String,
    /// The namespace it would enter.
    pub namespace: String,
    /// The proposed fact.
    pub text: String,
    /// `reflection` or `agent:<saga id>`.
    pub origin: String,
    /// The episodes it was distilled from (reflection).
    pub episode_ids: Vec<String>,
    /// When it was proposed.
    pub created_at: String,
    /// The latest date of the episodes it was distilled from (`None` for
    /// an agent's proposal: it holds from its approval).
    pub valid_at: Option<String>,
    /// `pending`, `approved`, `discarded` or `withdrawn` (compensated).
    pub status: String,
    /// Who decided (the principal), when decided.
    pub decided_by: Option<String>,
    /// The fact it became.
    pub fact_id: Option<String>,
}

/// One turn of a session's history (working memory across turns).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SessionTurn {
    /// The position in the session, from 1.
    pub seq: u64,
    /// What the user wrote.
    pub user_message: String,
    /// The agent's answer.
    pub final_response: Option<String>,
    /// The trace of the turn.
    pub trace_id: String,
    /// Who the turn was for.
    pub sender: String,
}

/// A session: its turns past the summary, and the summary of those before.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct SessionHistory {
    /// The model's summary of the turns up to `summarised_upto`.
    pub summary: Option<String>,
    /// The last turn the summary covers (0: none).
    pub summarised_upto: u64,
    /// Every turn after `summarised_upto`, oldest first.
    pub turns: Vec<SessionTurn>,
    /// The number of turns the session has had.
    pub total_turns: u64,
    /// Who the session is for (the sender of its first turn), if it has
    /// turns: a session belongs to one sender.
    pub sender: Option<String>,
}
