//! The flow keys of a policy text, parsed for the flow module's tests
//! without the policy module (which depends on this one).

use super::sink::{FlowError, FlowFile, FlowRules, OnUntrusted, SinkLevel, ToolFlowKeys};
use serde::Deserialize;
use std::collections::BTreeMap;

#[derive(Deserialize)]
struct File {
    #[serde(default)]
    flow: FlowFile,
    #[serde(default)]
    tools: BTreeMap<String, Tool>,
}

#[derive(Deserialize)]
struct Tool {
    sinks: Option<BTreeMap<String, SinkLevel>>,
    on_untrusted: Option<OnUntrusted>,
    #[serde(default)]
    trusted_fields: Vec<String>,
    strict: Option<bool>,
}

/// Why a text was refused.
#[derive(Debug, thiserror::Error)]
pub(crate) enum RulesError {
    /// Not TOML of that shape.
    #[error("{0}")]
    Toml(String),
    /// A bad flow key.
    #[error(transparent)]
    Flow(FlowError),
}

/// The checked flow rules of a policy text.
pub(crate) fn rules(text: &str) -> Result<FlowRules, RulesError> {
    let f: File = toml::from_str(text).map_err(|e| RulesError::Toml(e.to_string()))?;
    f.flow
        .check(f.tools.iter().map(|(n, t)| {
            (
                n,
                ToolFlowKeys {
                    sinks: t.sinks.as_ref(),
                    on_untrusted: t.on_untrusted,
                    trusted_fields: &t.trusted_fields,
                    strict: t.strict,
                },
            )
        }))
        .map_err(RulesError::Flow)
}
