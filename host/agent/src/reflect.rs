//! Reflection (seed 004 §6): unreflected episodes with importance over 0.5
//! grouped by embedding similarity (0.75), each group distilled by the
//! model into one proposed fact, queued for the operator. The model sees
//! only a group's current episodes: one a later episode of its sender
//! superseded (same subject, another value: issue 49) is never distilled. The source
//! episodes are marked reflected when the operator approves the proposal
//! (`Memory::approve`), so a discarded proposal leaves them for a later
//! reflection.
//!
//! A run either queues all its proposals or none: if the model or the
//! memory fails part-way, the proposals it already queued are withdrawn
//! (the run's compensation, in reverse order). Its writes are proposals
//! only; what enters semantic memory is the operator's approval, logged
//! with the principal. (Unlike the agent's `memory_propose`, a run is not
//! a saga of the state database: it needs no tool grant and no policy
//! section.)

use super::meter::Meter;
use super::provider::{ChatRequest, Message, Provider, Tier};
use capsaga_door::memory::HostMemory;
use capsaga_memory::reflect::REFLECTION_PROMPT;
use capsaga_memory::{MemoryError, Proposal, render};
use capsaga_untrusted::wrap;
use std::sync::Arc;

/// Most output tokens of one distillation.
pub const FACT_MAX_TOKENS: u32 = 200;

/// What one reflection did.
#[derive(Debug, Clone, Default, serde::Serialize)]
pub struct Reflection {
    /// Groups found.
    pub clusters: usize,
    /// Proposals queued.
    pub proposals: Vec<Proposal>,
}

/// Why reflection stopped.
#[derive(Debug, thiserror::Error)]
pub enum ReflectError {
    /// Memory failed.
    #[error(transparent)]
    Memory(#[from] MemoryError),
    /// The model failed; the proposals queued by this run were withdrawn.
    #[error("the model failed during reflection (nothing was queued): {0}")]
    Model(String),
}

/// Run reflection over `namespace` with `provider` (groups of at least
/// `min_size` episodes), each model call reserved and settled by `meter`
/// like every model call (a reservation the budget refuses sends nothing
/// and ends the run as a model failure).
///
/// # Errors
/// [`ReflectError`]; on a model failure the run's proposals are withdrawn.
pub async fn reflect(
    hm: &Arc<HostMemory>,
    provider: &dyn Provider,
    meter: &Meter<'_>,
    namespace: &str,
    min_size: usize,
) -> Result<Reflection, ReflectError> {
    let (h, ns) = (hm.clone(), namespace.to_string());
    let clusters = tokio::task::spawn_blocking(move || h.memory.reflection_clusters(&ns, min_size))
        .await
        .map_err(|e| MemoryError::Embed(e.to_string()))??;
    let mut out = Reflection {
        clusters: clusters.len(),
        proposals: Vec::new(),
    };
    for c in &clusters {
        let text: String = c
            .episodes
            .iter()
            .map(|e| format!("{}\n", render::episode(e)))
            .collect();
        let mut req = ChatRequest::new(
            REFLECTION_PROMPT,
            vec![Message::user(wrap(
                "memory:episodes",
                &capsaga_store::clock::now_rfc3339(),
                &text,
            ))],
            Vec::new(),
        );
        req.max_tokens = FACT_MAX_TOKENS;
        req.tier = Tier::Normal;
        req.role = Some("reflect".into());
        let answer = provider.complete_metered(&req, meter).await;
        // The ledger already holds what each try cost; a run keeps no trace.
        if let Err(e) = meter.take() {
            withdraw_all(hm, &out.proposals);
            return Err(ReflectError::Model(format!(
                "the budget ledger failed: {e}"
            )));
        }
        let answer = match answer {
            Ok(r) if !r.text.trim().is_empty() => r.text,
            Ok(_) => {
                withdraw_all(hm, &out.proposals);
                return Err(ReflectError::Model("an empty answer".into()));
            }
            Err(e) => {
                withdraw_all(hm, &out.proposals);
                return Err(ReflectError::Model(e.to_string()));
            }
        };
        // The superseded episodes go with the proposal (marked reflected
        // with the others when it is approved), never into the prompt.
        let ids = c
            .episodes
            .iter()
            .map(|e| e.episode_id.clone())
            .chain(c.superseded.iter().cloned())
            .collect();
        match hm.memory.propose(&c.namespace, &answer, "reflection", ids) {
            Ok(p) => out.proposals.push(p),
            Err(e) => {
                withdraw_all(hm, &out.proposals);
                return Err(e.into());
            }
        }
    }
    Ok(out)
}

/// The compensation of a reflection run: withdraw what it queued.
fn withdraw_all(hm: &HostMemory, proposals: &[Proposal]) {
    for p in proposals.iter().rev() {
        if let Err(e) = hm.memory.withdraw(&p.proposal_id) {
            tracing::warn!("reflection: proposal {} not withdrawn: {e}", p.proposal_id);
        }
    }
}
