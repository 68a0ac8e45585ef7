//! # capsaga-host
//!
//! What is left of the runtime while it is split into crates (issue 46):
//! the agent loop, the servers and the command line, over the door
//! (`capsaga-door`), whose modules are re-exported under their old names.

pub use capsaga_agent as agent;
pub mod cli;
pub use capsaga_server as serve;

pub use capsaga_door::{
    config, dispatch, host, memory, neurons, ownership, plan, registry, saga, store_choice, switch,
};
pub use capsaga_sandbox as sandbox;
pub use capsaga_store as store;

/// Timestamps of stored rows and call deadlines.
pub mod clock {
    pub use capsaga_sandbox::deadline_from_now;
    pub use capsaga_store::clock::*;
}
