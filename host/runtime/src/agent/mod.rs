//! The agent: a ReAct loop over a model provider, whose tool calls run as
//! saga steps (DESIGN §7).
//!
//! - [`provider`]: the provider trait and the provider-neutral chat records.
//! - [`scripted`]: the scripted provider (the embedded default).
//! - [`prompt`]: the system prompt in its fixed block order.
//! - [`runner`]: the loop itself.
//! - [`approval`]: calls that need a human: the prompt, or the end of the
//!   turn.
//! - [`trace`]: the ExecutionTrace and its persistence.

pub mod approval;
pub mod prompt;
pub mod provider;
pub mod runner;
pub mod scripted;
pub mod trace;
