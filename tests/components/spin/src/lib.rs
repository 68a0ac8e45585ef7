//! `spin` (test component): `execute` loops forever, burning CPU, so that the
//! host's wall-clock deadline (epoch interruption) and fuel limits can be
//! tested. No arguments.

use capsaga_sdk::prelude::*;

/// No arguments.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Args {}

/// The component.
pub struct Spin;

impl Tool for Spin {
    type Args = Args;

    fn meta() -> Meta {
        Meta::new("spin", "Test component: loops forever in execute.")
    }

    fn execute(_ctx: &CallContext, _args: Args) -> Result<Output, ToolError> {
        let mut n: u64 = 0;
        loop {
            // black_box keeps the loop from being optimised into something else.
            n = std::hint::black_box(n.wrapping_add(1));
        }
    }
}

capsaga_sdk::export_tool!(Spin);
