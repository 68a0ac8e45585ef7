//! `deep_recursion` (test component): `execute` recurses `depth` times (by
//! default without bound), so that the host's handling of stack exhaustion
//! can be tested. With `pad` (the default) every level keeps a 256-byte array
//! on the guest's own stack in linear memory (the shadow stack, 1 MiB for a
//! Rust guest), which runs out first: the guest then writes below address 0,
//! an out-of-bounds trap. Without `pad` a level holds only wasm locals, so the
//! wasm call stack the host limits (`max_wasm_stack`) runs out first.
//! Args: `{"depth": 1000, "pad": true}` (both optional).

use capsaga_sdk::prelude::*;

/// Arguments.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Args {
    /// How deep to recurse; absent means without bound (until the stack runs out).
    #[serde(default)]
    pub depth: Option<u64>,
    /// Keep a 256-byte array per level on the guest's stack (default true).
    #[serde(default = "yes")]
    pub pad: bool,
}

fn yes() -> bool {
    true
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
        let sum = if args.pad {
            recurse(0, depth, [0u8; 256])
        } else {
            recurse_lean(0, depth)
        };
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

/// Not a tail call, and nothing on the shadow stack: only the wasm call
/// stack grows.
#[inline(never)]
fn recurse_lean(level: u64, depth: u64) -> u64 {
    if level >= depth {
        return 0;
    }
    let below = recurse_lean(std::hint::black_box(level + 1), depth);
    std::hint::black_box(below.wrapping_mul(31).wrapping_add(level))
}

capsaga_sdk::export_tool!(DeepRecursion);
