//! Neurons: tools the agent writes for itself (DESIGN §8), the pure part.
//!
//! A neuron is *source + meta*, run by one shared runner component. This
//! module holds what needs no Wasmtime and no I/O:
//! - its life ([`Status`], [`Status::can_become`]): `proposed → tested →
//!   awaiting_operator → active → retired`, and `rejected`;
//! - its identity ([`identity`]): `sha256(runner hash ‖ source ‖ meta)`, so a
//!   changed description, schema or source is a new version;
//! - the operator's `[neurons]` policy section ([`NeuronsFile`],
//!   [`NeuronsPolicy`]);
//! - the checks of a submission ([`proposal`]) and of its name ([`name`]);
//! - fitness from the log of its calls ([`fitness`]).

pub mod code_run;
pub mod fitness;
pub mod name;
pub mod proposal;
mod section;
#[cfg(test)]
mod tests;

pub use section::{NeuronsFile, NeuronsPolicy, RetireBelow};

use crate::idempotency::sha256_hex;
use crate::meta::RawToolMeta;
use serde::{Deserialize, Serialize};

/// Where a neuron version is in its life.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Status {
    /// Submitted by the model; its examples have not all passed.
    Proposed,
    /// Its examples passed in a runner instance with no grants.
    Tested,
    /// Waiting for the operator (`capsaga neurons approve|reject`).
    AwaitingOperator,
    /// Callable: in the catalog, with the grants the operator gave.
    Active,
    /// No longer callable (the operator, a newer active version, or the
    /// fitness threshold retired it).
    Retired,
    /// The operator refused it.
    Rejected,
}

impl Status {
    /// Every status, in life order.
    pub const ALL: [Status; 6] = [
        Status::Proposed,
        Status::Tested,
        Status::AwaitingOperator,
        Status::Active,
        Status::Retired,
        Status::Rejected,
    ];

    /// The stored name (`proposed`, `tested`, `awaiting_operator`, ...).
    pub fn as_str(self) -> &'static str {
        match self {
            Status::Proposed => "proposed",
            Status::Tested => "tested",
            Status::AwaitingOperator => "awaiting_operator",
            Status::Active => "active",
            Status::Retired => "retired",
            Status::Rejected => "rejected",
        }
    }

    /// Parse a stored name.
    pub fn parse(s: &str) -> Option<Status> {
        Status::ALL.into_iter().find(|st| st.as_str() == s)
    }

    /// Whether a version may move from `self` to `to`:
    /// - proposed → tested (its examples passed);
    /// - tested → awaiting_operator, or → active (auto-activation of a pure
    ///   neuron, when the policy allows it);
    /// - awaiting_operator → active (approved) or → rejected;
    /// - proposed or tested → rejected (the operator refuses early);
    /// - active → retired. Retired and rejected are terminal: a neuron
    ///   comes back only as a new submission, approved again.
    pub fn can_become(self, to: Status) -> bool {
        use Status::*;
        matches!(
            (self, to),
            (Proposed, Tested)
                | (Tested, AwaitingOperator | Active | Rejected)
                | (AwaitingOperator, Active | Rejected)
                | (Proposed, Rejected)
                | (Active, Retired)
        )
    }

    /// Versions a compensation of their `neuron_create` step may remove
    /// (never approved: nothing can depend on them).
    pub fn is_pending(self) -> bool {
        matches!(
            self,
            Status::Proposed | Status::Tested | Status::AwaitingOperator
        )
    }
}

impl std::fmt::Display for Status {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The identity of a neuron version, lowercase hex:
/// `sha256("capsaga-neuron-v1\0" ‖ runner hash ‖ "\0" ‖ source ‖ "\0" ‖
/// canonical JSON of the meta without its version string)`.
///
/// The version string is left out because the host numbers versions itself
/// (the same content submitted twice is the same version). Everything the
/// model reads (name, description, schema) or that decides what the
/// neuron may do (capabilities, risk, side effects, dry-run support) is in
/// the hash: changing any of it is a new version that needs activation
/// again (the "rug-pull" of a tool description).
pub fn identity(runner_hash: &str, source: &str, meta: &RawToolMeta) -> String {
    let mut m = meta.clone();
    m.version = String::new();
    let meta_json = serde_json::to_value(&m)
        .map(|v| crate::json::canonical(&v))
        .unwrap_or_default();
    let mut bytes = Vec::with_capacity(runner_hash.len() + source.len() + meta_json.len() + 32);
    bytes.extend_from_slice(b"capsaga-neuron-v1\0");
    bytes.extend_from_slice(runner_hash.as_bytes());
    bytes.push(0);
    bytes.extend_from_slice(source.as_bytes());
    bytes.push(0);
    bytes.extend_from_slice(meta_json.as_bytes());
    sha256_hex(&bytes)
}
