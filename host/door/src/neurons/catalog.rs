//! Neurons in the model's catalog, within a token budget: however many
//! neurons accumulate, the catalog grows by at most
//! `[neurons] catalog_tokens` (default 4000). Tokens
//! are estimated as one per four bytes of a tool's name, description and
//! schema (the usual ratio for English text and JSON with BPE tokenizers);
//! the estimate only decides what fits, it bills nothing.

use super::is_neuron;
use crate::registry::LoadedTool;
use std::sync::Arc;

/// Estimated tokens of one catalog entry (name, description, schema).
pub fn entry_tokens(t: &LoadedTool) -> usize {
    let schema = t.meta.args_schema.to_string();
    (t.meta.name.len() + t.meta.description.len() + schema.len()).div_ceil(4) + 8
}

/// `tools` with the neurons cut to `budget` estimated tokens: every other
/// tool is kept; neurons are taken in name order while they fit (a neuron
/// left out stays callable by name, it is only not advertised).
pub fn within_budget(tools: Vec<Arc<LoadedTool>>, budget: usize) -> Vec<Arc<LoadedTool>> {
    let mut used = 0usize;
    tools
        .into_iter()
        .filter(|t| {
            if !is_neuron(t) {
                return true;
            }
            let cost = entry_tokens(t);
            if used + cost > budget {
                return false;
            }
            used += cost;
            true
        })
        .collect()
}
