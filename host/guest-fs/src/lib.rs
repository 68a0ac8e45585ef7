//! What the capsaga host does to a guest's files outside Wasmtime (issue 28).
//!
//! - [`beneath`]: paths opened beneath a granted directory: as the guest's
//!   resolver does (links followed while they stay beneath), or as the host
//!   restores (one plain name at a time, no link ever followed);
//! - [`capture`]: the pre-image of a path (its kind, mode, time, bytes or
//!   link target) and its fingerprint, never following it;
//! - [`journal`]: the journal of one step: each path's pre-image recorded
//!   before the step's first change to it, durable, bounded by the policy's
//!   caps, deduplicated;
//! - [`restore`]: a step's files rolled back from its journal, in reverse,
//!   leaving alone what someone else changed since, resumable;
//! - [`record`]: the journal's records and their framing.
//!
//! The runtime lends a [`journal::StepJournal`] to every call of a step
//! with an `fs:write` grant; its shadows of the `wasi:filesystem` functions
//! that change files call [`journal::StepJournal::before`] first (see
//! `capsaga_sandbox::factors::fs`). No Wasmtime here: this crate
//! builds and tests in seconds.

#![cfg(unix)]

pub mod beneath;
pub mod capture;
mod dirs;
pub mod journal;
mod located;
pub mod record;
pub mod restore;
mod undo;

pub use beneath::{Located, RelPath, Roots, Unlocated, locate, locate_open};
pub use capture::{Change, Refusal};
pub use journal::{JournalConfig, JournalError, StepJournal, SyncMode};
pub use record::{At, Fingerprint};
pub use restore::{Expected, Plan, RestoreReport, Restored, fold};

#[cfg(test)]
mod kill_tests;
#[cfg(test)]
mod link_tests;
#[cfg(test)]
mod tests;
