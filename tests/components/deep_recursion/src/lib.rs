//! `deep_recursion` (test component): `execute` recurses `depth` times (by
//! default without bound) with a 256-byte frame, so that the host's handling
//! of stack exhaustion can be tested. Args: `{"depth": 1000}` (optional).

use capsaga_sdk::prelude::*;

/// Arguments.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Args {
    /// How deep to recurse; absent means without bound (until the stack runs out).
    #[serde(default)]
    pub depth: Option<u64>,
}

/// The component.
pub struct DeepRecursion;

impl Tool for DeepRecursion {
    type Args = Args;

    fn meta() -> Meta {
        Meta::new(
            "deep_recursion",
            "Test component: recurses until the stack runs out (or to depth).",
        )
    }

    fn execute(_ctx: &CallContext, args: Args) -> Result<Output, ToolError> {
        let depth = args.depth.unwrap_or(u64::MAX);
        let sum = recurse(0, depth, [0u8; 256]);
        Ok(Output::new(json!({"depth": depth, "sum": sum})))
    }
}

/// Not a tail call: the frame (and its padding) stays live until the return.
#[inline(never)]
fn recurse(level: u64, depth: u64, pad: [u8; 256]) -> u64 {
    if level >= depth {
        return 0;
    }
    let mut frame = std::hint::black_box(pad);
    frame[usize::from(level as u8)] = level as u8;
    let below = recurse(level + 1, depth, frame);
    below + u64::from(std::hint::black_box(frame)[1])
}

capsaga_sdk::export_tool!(DeepRecursion);
