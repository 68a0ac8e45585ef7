//! # capsaga-door
//!
//! The one door every tool call goes through, and what it stands on
//! (ARCHITECTURE.md, "The one door"): the configuration, the tools, the
//! saga engine, the neurons and the agent's memory tools. Every surface
//! above it (the agent loop in `capsaga-agent`, the servers in
//! `capsaga-server`, the command line in `capsaga`) submits its calls here;
//! nothing above runs a tool or writes the write-ahead log itself.
//!
//! It depends on `capsaga-core` (the pure rules), `capsaga-store` (every
//! record), `capsaga-memory`, `capsaga-guest-fs`, `capsaga-telemetry` and
//! `capsaga-sandbox`, and it is the only crate that depends on the sandbox:
//! what the layers above need of it is re-exported here ([`SubModel`] and
//! its answers, [`announce_compiles`], [`confirm_path`]). It must not
//! depend on the agent, the servers or the binary.
//!
//! One module per mechanism:
//!
//! - [`config`]: loading `capsaga.toml` (the policy itself is parsed and
//!   checked in `capsaga_core::policy`).
//! - [`registry`]: the tools (components, host built-ins), their metas and
//!   bindings.
//! - [`ownership`]: which process drives a saga, and whether it is alive.
//! - [`saga`]: a saga as its driver holds it.
//! - [`switch`]: the operator's kill switch (running, read-only, paused)
//!   as this process sees it, from the store.
//! - [`host`]: everything above wired together, shared by `Arc`.
//! - [`dispatch`]: the one door every tool call goes through (resolve,
//!   validate, policy, approval, guardrail, WAL, sandbox, compensation).
//! - [`scope`]: a saga's life across requests: the saga of an MCP
//!   session, of a stateless request (its handle), of a task, with open,
//!   call and close, the owner and principal checks, busy marks and
//!   cancellation (the MCP handlers are adapters of it).
//! - [`neurons`]: tools the agent writes for itself: the runner, `neuron_create`,
//!   the operator's decisions, fitness.
//! - [`memory`]: the agent's memory (the `capsaga-memory` crate, seed 004)
//!   opened from `[memory]`, and its built-in tools.
//! - [`plan`]: sagas driven by a list of calls instead of a model.
//! - [`store_choice`]: which store the configuration names.
//!
//! Inside the door, `crate::store` is the `capsaga-store` crate,
//! `crate::sandbox` the `capsaga-sandbox` crate and `crate::clock` the
//! store's timestamps with the sandbox's call deadlines.

#![warn(missing_docs)]

pub mod config;
pub mod dispatch;
pub mod host;
pub mod memory;
pub mod neurons;
pub(crate) mod ownership;
pub mod plan;
pub mod registry;
pub mod saga;
pub mod scope;
pub mod store_choice;
pub mod switch;

use capsaga_sandbox as sandbox;
use capsaga_store as store;

/// Timestamps of stored rows (`capsaga_store::clock`) and call deadlines
/// (`capsaga_sandbox::deadline_from_now`).
mod clock {
    pub use capsaga_sandbox::deadline_from_now;
    pub use capsaga_store::clock::*;
}

/// A model lent to a call's `llm` imports ([`dispatch::Call::with_sub_model`]),
/// with its requests and answers.
pub use capsaga_sandbox::{SubAnswer, SubModel, SubRequest};

/// Print a line on stderr for every component compiled from now on (the
/// command line turns it on).
pub use capsaga_sandbox::cache::announce_compiles;

/// `capsaga check path`: the path guard's verdict checked against the
/// sandbox's own resolver (cap-std beneath the granted directory).
pub use capsaga_sandbox::factors::fs::resolve::confirm as confirm_path;
