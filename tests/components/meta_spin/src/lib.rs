//! `meta_spin` (test component): `meta` loops forever, burning CPU, so that
//! reading a hostile component's meta at load (through the baseline
//! compiler or Cranelift: `sandbox::meta`) is shown to end at its limits
//! and the host to load the other tools. Never loads as a tool.

use capsaga_sdk::prelude::*;

/// No arguments.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Args {}

/// The component.
pub struct MetaSpin;

impl Tool for MetaSpin {
    type Args = Args;

    fn meta() -> Meta {
        let mut n: u64 = 0;
        loop {
            // black_box keeps the loop from being optimised into something else.
            n = std::hint::black_box(n.wrapping_add(1));
        }
    }

    fn execute(_ctx: &CallContext, _args: Args) -> Result<Output, ToolError> {
        Ok(Output::new(json!({})))
    }
}

capsaga_sdk::export_tool!(MetaSpin);
