//! # capsaga-core
//!
//! The pure logic of capsaga, kept free of Wasmtime, SQLite and I/O so that it
//! builds in seconds, can be fuzzed alone, and each mechanism can be read on its
//! own:
//!
//! - [`capability`]: the capability-string grammar (`fs:read:/data/**`,
//!   `net:https:api.example.com`, ...), parsed into typed values.
//! - [`grant`]: effective grants = what a tool requires ∩ what the operator grants.
//! - [`path_guard`]: resolution of a path under a granted root, component by
//!   component, the way cap-std does it.
//! - [`fsm`]: the guardrail finite-state machine of the saga, and the
//!   operator's `fsm.toml` extra rows.
//! - [`approval`]: human approvals bound to one exact call, claimed once.
//! - [`confirm`]: which approvals an MCP client may confirm itself
//!   (`[approvals] client_confirm`; never `code_run`, irreversible or high
//!   risk).
//! - [`retry`]: retries of retriable errors with bounded backoff.
//! - [`policy`]: the operator's `capsaga.toml`, parsed and checked.
//! - [`meta`]: a tool's self-description, checked before the tool is registered.
//! - [`validate`]: tool-call arguments checked against the tool's JSON Schema,
//!   with messages written for the model.
//! - [`schema_load`]: admission of a JSON Schema at load (its own draft,
//!   formats asserted and known, nothing fetched, no same-instance cycle).
//! - [`json`]: strict JSON parsing (duplicate keys refused) and canonical form.
//! - [`jsonrpc`]: admission of a raw JSON-RPC message (MCP) under the same rules.
//! - [`routing_headers`]: the HTTP headers the server routes or authenticates
//!   on, each sent once and saying what the body says.
//! - [`idempotency`]: idempotency keys of saga steps.
//! - [`error`]: the error kinds of the tool world and the tool error record.
//! - [`tool`]: the call context and tool output records.
//! - [`output_trust`]: whose output is untrusted (the host's decision from
//!   a tool's effective grants); the `<untrusted>` markers themselves are
//!   the `capsaga-untrusted` crate's.
//! - [`field`]: field labels of a tool's output (paths, checks), held by
//!   its meta and read by `capsaga-flow`.
//! - [`policy::sink`]: the sink rules of information flow (what may flow
//!   into each argument), a part of the policy; the flow itself (labels,
//!   ledger, provenance, decision) is the `capsaga-flow` crate's.
//! - [`providers`] (= `policy::providers`): model provider configuration and
//!   the attempt order (failover, allowlists), a part of the policy.
//! - [`budget`]: price table, cost of a call, budget caps.
//! - [`prompt`]: the system prompt in its fixed block order.
//! - [`principal`]: principals (who made a request) and roles (client,
//!   operator), and what each may do.
//! - [`scope`]: which scope opened a saga (a session, a saga handle, a task,
//!   a turn, a plan) and which surface may continue, commit or roll it back.
//! - [`session_table`]: live server sessions bounded globally and per
//!   principal, idle ones evicted least recently used first.
//! - [`pause`]: the operator's kill switch (running, read-only, paused).
//! - [`wal_row`]: rows of the saga write-ahead log, stored and decoded, and
//!   the hash chain over them.

pub mod approval;
pub mod budget;
pub mod calendar;
pub mod capability;
pub mod confirm;
pub mod error;
pub mod field;
pub mod fsm;
pub mod grant;
pub mod idempotency;
pub mod ip_embedding;
pub mod json;
pub mod jsonrpc;
pub mod memory;
pub mod meta;
pub mod neuron;
pub mod output_trust;
pub mod path_guard;
pub mod pause;
pub mod policy;
pub mod principal;
pub mod prompt;
pub use policy::providers;
pub mod retry;
pub mod routing_headers;
pub mod schema_load;
pub mod scope;
pub mod session_table;
pub mod tool;
pub mod validate;
pub mod wal_row;
