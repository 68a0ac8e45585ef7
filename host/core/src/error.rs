//! The error record of the tool world (`capsaga:tool/types.tool-error`), used
//! both for errors a tool returns and for errors the host produces on a tool's
//! behalf (sandbox traps, limits, denied grants). Defined once, in
//! `capsaga-types`, for the SDK and the host alike; the host builds its own
//! errors with [`ToolError::with_hint`] (never retriable).

pub use capsaga_types::error::{ErrorKind, ToolError};
