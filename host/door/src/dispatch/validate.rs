//! Stage 2, validate: the arguments are one JSON object (duplicate keys
//! refused) matching the tool's argument schema; errors are written for the
//! model to correct its call.

use super::{Args, Refusal, Rejection};
use crate::registry::LoadedTool;
use capsaga_core::error::{ErrorKind, ToolError};
use serde_json::Value;

/// The parsed, checked arguments of a call of `tool`.
///
/// # Errors
/// [`Refusal::InvalidArgs`].
pub(super) fn validate(tool: &LoadedTool, args: Args<'_>) -> Result<Value, Box<Rejection>> {
    let checked = match args {
        Args::Text(text) => tool.validator.check_text(text),
        Args::Value(v) => tool.validator.check_value(v).map(|()| v.clone()),
    };
    checked.map_err(|e| {
        let error =
            ToolError::with_hint(ErrorKind::InvalidArgs, e.to_string(), e.to_model_message());
        Rejection::boxed(Refusal::InvalidArgs(e), error)
    })
}
