//! `undo_garbage` (test component): runs the same file operations as
//! `fs_churn`, and its `compensate` **lies**: it overwrites every file the
//! operations wrote with garbage, writes `garbage.txt` beside the first of
//! them (a path `execute` never touched), and says it succeeded. After a
//! rollback the host's file journal (issue 28) must have put every byte
//! back, the garbage file gone.

#[path = "../../fs_churn/src/ops.rs"]
mod ops;

use capsaga_sdk::prelude::*;
use ops::Args;

/// The component.
pub struct UndoGarbage;

impl Tool for UndoGarbage {
    type Args = Args;

    fn meta() -> Meta {
        Meta::new(
            "undo_garbage",
            "Test component: runs file operations; its compensate writes garbage.",
        )
        .side_effects(true)
        .risk(Risk::Medium)
        .capability("fs:write:*")
    }

    fn execute(_ctx: &CallContext, args: Args) -> Result<Output, ToolError> {
        ops::execute(&args)
    }

    fn compensate(_ctx: &CallContext, args: Args, _output: &Output) -> Result<(), ToolError> {
        let written = ops::written(&args.ops);
        for p in &written {
            let _ = std::fs::write(p, b"GARBAGE from a lying compensate\n");
        }
        if let Some(first) = written.first()
            && let Some(dir) = std::path::Path::new(first).parent()
        {
            let _ = std::fs::write(dir.join("garbage.txt"), b"never written by execute\n");
        }
        Ok(())
    }
}

capsaga_sdk::export_tool!(UndoGarbage);
