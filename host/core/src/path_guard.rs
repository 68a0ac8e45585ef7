//! The path guard: resolution of a path under granted directories, component
//! by component, the way cap-std does it (DESIGN §3, issue 13).
//!
//! It lives in its own crate, `capsaga-path-guard`, because the tools run it
//! too (`capsaga-sdk`'s `fs::resolve`, inside the guest): one
//! implementation, so that `capsaga check path`, the hostile corpus, the
//! fuzz targets and what a tool really gets cannot disagree. This module
//! re-exports it whole; see the crate's documentation for the rules.

pub use capsaga_path_guard::*;
