//! `flaky` (test component): fails with a retriable `network-error` until a
//! counter file reaches `fail_times`, for the host's retry tests.
//!
//! Args: `{"fail_times": 2, "state_path": "/granted/dir/flaky.count"}`. Each
//! `execute` increments the number in `state_path` (absent = 0); attempts 1 to
//! `fail_times` fail, the next one succeeds with `{"attempts": n, "key": k}`.
//! Every error's details and the output carry the call's idempotency key
//! (`key`), so a test can check that each retry saw the same key.
//! `compensate` removes the counter file (absent is fine). Needs `fs:write:*`.

use std::fs;
use std::io;
use std::path::Path;

use capsaga_sdk::prelude::*;

/// Arguments.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Args {
    /// How many attempts fail before one succeeds.
    pub fail_times: u32,
    /// Absolute path of the counter file, inside a directory granted for writing.
    pub state_path: String,
}

/// The component.
pub struct Flaky;

impl Tool for Flaky {
    type Args = Args;

    fn meta() -> Meta {
        Meta::new(
            "flaky",
            "Test component: fails with a retriable network error fail_times times, then succeeds.",
        )
        .side_effects(true)
        .idempotent(true)
        .risk(Risk::Medium)
        .capability("fs:write:*")
    }

    fn execute(ctx: &CallContext, args: Args) -> Result<Output, ToolError> {
        let path = Path::new(&args.state_path);
        let count = match fs::read_to_string(path) {
            Ok(text) => text.trim().parse::<u64>().map_err(|e| {
                ToolError::invalid_args(format!("{}: not a counter: {e}", args.state_path))
            })?,
            Err(e) if e.kind() == io::ErrorKind::NotFound => 0,
            Err(e) => return Err(ToolError::from_io(&e, path)),
        };
        let attempt = count + 1;
        fs::write(path, attempt.to_string()).map_err(|e| ToolError::from_io(&e, path))?;
        if attempt <= u64::from(args.fail_times) {
            return Err(ToolError::network(format!(
                "flaky: failure {attempt} of {}",
                args.fail_times
            ))
            .retriable(true)
            .hint("retry the same call")
            .details(json!({"attempt": attempt, "key": ctx.idempotency_key})));
        }
        Ok(Output::new(json!({"attempts": attempt, "key": ctx.idempotency_key})).effect(format!(
            "succeeded at attempt {attempt}, counter in {}",
            args.state_path
        )))
    }

    fn compensate(_ctx: &CallContext, args: Args, _output: &Output) -> Result<(), ToolError> {
        let path = Path::new(&args.state_path);
        match fs::remove_file(path) {
            Ok(()) => Ok(()),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
            Err(e) => Err(ToolError::from_io(&e, path)),
        }
    }
}

capsaga_sdk::export_tool!(Flaky);
