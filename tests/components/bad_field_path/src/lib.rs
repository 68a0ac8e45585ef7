//! `bad_field_path` (test component): declares malformed field labels in
//! its `output-fields` export (issue 47): a JSON Pointer with an escape
//! RFC 6901 does not have (`~2`), beside a good one (the SDK refuses it in
//! the guest: `meta` traps). The host must refuse the tool at load, never crash, and load
//! the other tools. Otherwise a harmless echo of its arguments.

use capsaga_sdk::prelude::*;

/// Arguments.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Args {
    /// Any text.
    pub text: String,
}

/// The component.
pub struct BadFieldPath;

impl Tool for BadFieldPath {
    type Args = Args;

    fn meta() -> Meta {
        Meta::new("bad_field_path", "Echoes its text; its field labels are malformed.")
            .idempotent(true)
            .trusted_field("/records/*/id")
            .untrusted_field("/records/~2/note")
    }

    fn execute(_ctx: &CallContext, args: Args) -> Result<Output, ToolError> {
        Ok(Output::new(serde_json::json!({"text": args.text})).summary("echoed"))
    }
}

capsaga_sdk::export_tool!(BadFieldPath);
