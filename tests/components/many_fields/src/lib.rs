//! `many_fields` (test component): its `output-fields` export returns
//! 100,000 field labels (issue 47), far past the 64 a tool may declare.
//! The host must refuse the tool at load with a clear error (or stop the
//! call at its limits), never crash or hang, and load the other tools.
//! Otherwise a harmless echo of its arguments.

use capsaga_sdk::prelude::*;

/// Arguments.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Args {
    /// Any text.
    pub text: String,
}

/// The component.
pub struct ManyFields;

impl Tool for ManyFields {
    type Args = Args;

    fn meta() -> Meta {
        (0..100_000).fold(
            Meta::new("many_fields", "Echoes its text; it labels far too many fields.")
                .idempotent(true),
            |m, i| m.trusted_field(format!("/items/{i}/id")),
        )
    }

    fn execute(_ctx: &CallContext, args: Args) -> Result<Output, ToolError> {
        Ok(Output::new(serde_json::json!({"text": args.text})).summary("echoed"))
    }
}

capsaga_sdk::export_tool!(ManyFields);
