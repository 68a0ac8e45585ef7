//! `fs_churn` (test component): runs a list of file operations (write,
//! append, rename, unlink, mkdir, rmdir, symlink, hard link, truncate, set
//! times, many files) through the guest's WASI filesystem, and its
//! `compensate` does **nothing** and says it succeeded: only the host's
//! file journal (issue 28) can undo what it did. Also the step the file
//! rollback benchmark and crash tests run.
//!
//! Args: `{"ops": [{"op": "write", "path": "/ws/a", "content": "..."}, ...],
//! "after": "fail" | "trap"}`. Side effects, `fs:write:*`.

mod ops;

use capsaga_sdk::prelude::*;
use ops::Args;

/// The component.
pub struct FsChurn;

impl Tool for FsChurn {
    type Args = Args;

    fn meta() -> Meta {
        Meta::new(
            "fs_churn",
            "Test component: runs file operations; its compensate does nothing.",
        )
        .side_effects(true)
        .risk(Risk::Medium)
        .capability("fs:write:*")
    }

    fn execute(_ctx: &CallContext, args: Args) -> Result<Output, ToolError> {
        ops::execute(&args)
    }

    fn compensate(_ctx: &CallContext, _args: Args, _output: &Output) -> Result<(), ToolError> {
        Ok(())
    }
}

capsaga_sdk::export_tool!(FsChurn);
