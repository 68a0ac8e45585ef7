//! # capsaga-host
//!
//! The capsaga runtime and the `capsaga` binary. One module per mechanism
//! (see `ARCHITECTURE.md` at the repository root for how they fit):
//!
//! - [`config`]: loading `capsaga.toml` (the policy itself is parsed and
//!   checked in `capsaga_core::policy`).
//! - [`sandbox`]: the Wasmtime engine, a fresh instance per call, the
//!   capability factors that bind grants into it, limits, traps mapped to
//!   typed errors.
//! - [`registry`]: the tools (components, host built-ins), their metas and
//!   bindings.
//! - [`store`]: the state store, re-exported from the `capsaga-store` crate
//!   (`host/store/`): the traits, the row types and the SQLite
//!   implementation (the write-ahead log, approvals, traces, budgets). Every
//!   SQL statement is there.
//! - [`ownership`]: which process drives a saga, and whether it is alive.
//! - [`saga`]: a saga as its driver holds it.
//! - [`switch`]: the operator's kill switch (running, read-only, paused)
//!   as this process sees it, from the store.
//! - [`host`]: everything above wired together, shared by `Arc`.
//! - [`dispatch`]: the one door every tool call goes through (resolve,
//!   validate, policy, approval, guardrail, WAL, sandbox, compensation).
//! - [`neurons`]: tools the agent writes for itself: the runner, `neuron_create`,
//!   the operator's decisions, fitness.
//! - [`memory`]: the agent's memory (the `capsaga-memory` crate, seed 004)
//!   opened from `[memory]`, its built-in tools and reflection.
//! - [`plan`]: sagas driven by a list of calls instead of a model.
//! - [`agent`]: the ReAct loop, providers and execution traces.
//! - [`serve`]: capsaga as a server: MCP over stdio and Streamable HTTP,
//!   and the runtime REST API.
//! - [`cli`]: the `capsaga` command line.
//! - [`clock`]: timestamps and deadlines (re-exported from `capsaga-store`,
//!   whose rows they stamp).

pub mod agent;
pub mod cli;
/// Timestamps of stored rows (`capsaga_store::clock`) and call deadlines.
pub mod clock {
    pub use capsaga_sandbox::deadline_from_now;
    pub use capsaga_store::clock::*;
}
pub mod config;
pub mod dispatch;
pub mod host;
pub mod memory;
pub mod neurons;
pub mod ownership;
pub mod plan;
pub mod registry;
pub mod saga;
pub use capsaga_sandbox as sandbox;
pub mod serve;
pub mod store_choice;
pub use capsaga_store as store;
pub mod switch;
