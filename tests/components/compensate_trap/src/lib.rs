//! `compensate_trap` (test component): `execute` succeeds (it changes
//! nothing, but claims side effects), `compensate` panics, which traps, so
//! that the host's handling of a failed compensation can be tested.
//! No arguments.

use capsaga_sdk::prelude::*;

/// No arguments.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Args {}

/// The component.
pub struct CompensateTrap;

impl Tool for CompensateTrap {
    type Args = Args;

    fn meta() -> Meta {
        Meta::new(
            "compensate_trap",
            "Test component: execute succeeds, compensate traps.",
        )
        .side_effects(true)
        .risk(Risk::Medium)
    }

    fn execute(_ctx: &CallContext, _args: Args) -> Result<Output, ToolError> {
        Ok(Output::new(json!({"ok": true})).effect("pretended to change something"))
    }

    fn compensate(_ctx: &CallContext, _args: Args, _output: &Output) -> Result<(), ToolError> {
        panic!("compensate_trap: deliberate panic in compensate");
    }
}

capsaga_sdk::export_tool!(CompensateTrap);
