//! # capsaga-types
//!
//! What the guest side (`capsaga-sdk`, compiled into every tool component)
//! and the host (`capsaga-core`, `capsaga-sandbox`, `capsaga-door`) both
//! speak, defined once so that the two cannot drift:
//!
//! - [`error`]: the error kinds of the tool world (WIT `error-kind`) and the
//!   tool error record (WIT `tool-error`);
//! - [`context`]: the call context (WIT `call-context`);
//! - [`meta`]: the tool meta record (WIT `tool-meta`), the risk levels and the
//!   rules the host enforces on a meta (name grammar, sizes);
//! - [`names`]: path components that are special on some operating system
//!   (DOS device names, `:` streams, trailing dots), refused by the host's
//!   path guard and by the SDK's.
//!
//! No Wasmtime, no I/O, two dependencies (serde, serde_json): it builds for
//! wasm32-wasip2 on both guest toolchain routes.

pub mod context;
pub mod error;
pub mod meta;
pub mod names;

pub use context::CallContext;
pub use error::{ErrorKind, ToolError};
pub use meta::{FieldIntegrity, OutputField, Risk, ToolMetaRecord, is_valid_tool_name};
pub use names::is_special_name;
