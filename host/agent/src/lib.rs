//! # capsaga-agent
//!
//! The agent: a ReAct loop over a model provider, whose tool calls run as
//! saga steps (DESIGN §7). It depends on the door (`capsaga-door`: every
//! tool call goes through `Dispatcher::submit`), the store (traces, budgets,
//! sealed keys), the memory and `capsaga-core`; it never depends on the
//! sandbox (the model it lends to a tool's `llm` calls is the door's
//! [`capsaga_door::SubModel`]) nor on the servers or the binary above it.
//!
//! - [`chat`]: the provider-neutral chat records.
//! - [`provider`]: the provider trait (the records re-exported).
//! - [`scripted`]: the scripted provider (the embedded default).
//! - [`openai`], [`anthropic`]: the HTTP providers, over their wire formats
//!   ([`http`] holds what they share).
//! - [`router`]: failover across providers, allowlists, retries.
//! - [`select`]: choosing the provider of a turn from config, env, request.
//! - [`budget`]: price table, spend counters in SQLite.
//! - [`meter`]: every model call's maximum estimate reserved before it is
//!   sent and settled after (per-request and per-day hard caps).
//! - [`options`]: what a turn is given, and why it could not run.
//! - [`runner`]: the loop itself (the model exchange); `answer` records
//!   each call's outcome and answers the model.
//! - [`subcall`]: the turn's model lent to the `llm` import: a tool's
//!   sub-question, budget-checked, priced and traced like a Thought.
//! - [`reply`]: one model exchange in the trace, and what the loop does
//!   next (truncated, refused, paused, malformed answers).
//! - [`wire`]: the quirks of real servers both wire formats absorb, and the
//!   well-formed history they send back.
//! - [`approval`]: calls that need a human: the prompt, or the end of the
//!   turn.
//! - [`trace`]: the ExecutionTrace and its persistence.
//! - [`remember`]: the session's history, core and retrieved memory in the
//!   prompt, the hot blocks kept under 16k tokens, the turn remembered.
//! - [`reflect`]: reflection, episodes distilled by the model into fact
//!   proposals for the operator.

#![warn(missing_docs)]

mod answer;
pub mod anthropic;
pub mod approval;
pub mod budget;
pub mod chat;
pub mod first_report;
pub(crate) mod forced;
pub(crate) mod http;
pub mod keys;
pub mod meter;
mod observe;
pub mod openai;
pub mod options;
#[cfg(test)]
mod parse_damage_tests;
pub mod provider;
pub mod reflect;
pub mod remember;
pub(crate) mod reply;
pub mod router;
pub mod runner;
mod scope;
pub mod scripted;
pub mod select;
pub mod subcall;
pub mod trace;
pub(crate) mod wire;
