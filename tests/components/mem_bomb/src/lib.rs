//! `mem_bomb` (test component): `execute` allocates and touches 1 MiB chunks
//! without bound, so that the host's linear-memory cap can be tested. When an
//! allocation fails the guest aborts (a trap). No arguments.

use capsaga_sdk::prelude::*;

/// No arguments.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Args {}

/// The component.
pub struct MemBomb;

impl Tool for MemBomb {
    type Args = Args;

    fn meta() -> Meta {
        Meta::new(
            "mem_bomb",
            "Test component: grows its memory without bound.",
        )
    }

    fn execute(_ctx: &CallContext, _args: Args) -> Result<Output, ToolError> {
        let mut hoard: Vec<Vec<u8>> = Vec::new();
        loop {
            let mut chunk = vec![0u8; 1 << 20];
            for i in (0..chunk.len()).step_by(4096) {
                chunk[i] = 1;
            }
            hoard.push(std::hint::black_box(chunk));
        }
    }
}

capsaga_sdk::export_tool!(MemBomb);
