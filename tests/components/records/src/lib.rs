//! `records` (test component): a records service's search, for the host's
//! field-label tests (issue 47). Reads a JSON file of records (`{"records":
//! [{"id": "rec_…", "note": "…"}]}`, the service's state) from a granted
//! directory and returns it as its output, declaring field labels: each
//! record's `id` is trusted (the service assigns it), its `note` untrusted
//! (anyone writes it). The output as a whole is untrusted (`fs:read`), so
//! the ids count as trusted only where the operator confirms the path.
//!
//! Args: `{"path": "/granted/dir/records.json"}`. No side effects. Needs
//! `fs:read:*`.

use capsaga_sdk::prelude::*;
use std::path::Path;

/// Arguments.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Args {
    /// Absolute path of the records file, inside a directory granted for
    /// reading.
    pub path: String,
}

/// The component.
pub struct Records;

impl Tool for Records {
    type Args = Args;

    fn meta() -> Meta {
        Meta::new(
            "records",
            "Searches the records service; returns every record with its id and note.",
        )
        .returns_untrusted(true)
        .idempotent(true)
        .capability("fs:read:*")
        .trusted_field("/records/*/id")
        .untrusted_field("/records/*/note")
    }

    fn execute(_ctx: &CallContext, args: Args) -> Result<Output, ToolError> {
        let path = Path::new(&args.path);
        let text = std::fs::read_to_string(path).map_err(|e| ToolError::from_io(&e, path))?;
        let value: serde_json::Value = serde_json::from_str(&text)
            .map_err(|e| ToolError::invalid_args(format!("the records file is not JSON: {e}")))?;
        Ok(Output::new(value).summary("read the records"))
    }
}

capsaga_sdk::export_tool!(Records);
