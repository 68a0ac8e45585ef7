//! The flow rules of a policy text, for the tests: parsed and checked by
//! the policy itself (`capsaga_core::policy`), as the door gets them.

use capsaga_core::policy::sink::FlowRules;
use capsaga_core::policy::{PolicyError, PolicyFile};

/// The checked flow rules of a policy text.
pub(crate) fn rules(text: &str) -> Result<FlowRules, PolicyError> {
    Ok(PolicyFile::parse(text)?.check("/home/test")?.flow)
}
