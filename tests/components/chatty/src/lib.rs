//! `chatty` (test component): floods every channel whose volume the host
//! caps, so that the log cap, the stdout/stderr capture cap and the cap on a
//! guest error's size can be tested. `execute` sends `log_count` log messages
//! of `log_bytes` bytes each, writes `stdout_bytes` bytes to stdout and
//! `stderr_bytes` to stderr, then succeeds with a small output, or, when
//! `error_bytes` is set, fails with a tool error whose message and details
//! are that many bytes each.
//! Args (all optional, default 0): `{"log_count": 1000, "log_bytes": 1000000,
//! "stdout_bytes": 1000000, "stderr_bytes": 0, "error_bytes": 0}`.

use std::io::Write;

use capsaga_sdk::prelude::*;

/// Arguments.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Args {
    /// Number of log messages.
    #[serde(default)]
    pub log_count: u32,
    /// Size of each log message, bytes (at most 200 MB).
    #[serde(default)]
    #[schemars(range(max = 200_000_000))]
    pub log_bytes: u32,
    /// Bytes written to stdout (at most 200 MB).
    #[serde(default)]
    #[schemars(range(max = 200_000_000))]
    pub stdout_bytes: u32,
    /// Bytes written to stderr (at most 200 MB).
    #[serde(default)]
    #[schemars(range(max = 200_000_000))]
    pub stderr_bytes: u32,
    /// When non-zero, fail with an error whose message and details are this
    /// many bytes each (at most 200 MB).
    #[serde(default)]
    #[schemars(range(max = 200_000_000))]
    pub error_bytes: u32,
}

/// The component.
pub struct Chatty;

fn filler(len: u32, byte: char) -> String {
    std::iter::repeat_n(byte, len.min(200_000_000) as usize).collect()
}

impl Tool for Chatty {
    type Args = Args;

    fn meta() -> Meta {
        Meta::new(
            "chatty",
            "Test component: floods the log, stdout and stderr, or returns a huge error.",
        )
    }

    fn execute(_ctx: &CallContext, args: Args) -> Result<Output, ToolError> {
        let message = filler(args.log_bytes, 'l');
        for _ in 0..args.log_count {
            capsaga_sdk::log::info(&message);
        }
        drop(message);
        // print!/eprint! panic when a write fails: a host that stops
        // accepting output would make an ordinary chatty tool crash.
        let out = filler(args.stdout_bytes, 'o');
        print!("{out}");
        let _ = std::io::stdout().flush();
        drop(out);
        let err = filler(args.stderr_bytes, 'e');
        eprint!("{err}");
        drop(err);
        if args.error_bytes > 0 {
            let text = filler(args.error_bytes, 'E');
            return Err(ToolError::unknown(text.clone()).details(json!({ "blob": text })));
        }
        Ok(Output::new(json!({
            "logged": u64::from(args.log_count) * u64::from(args.log_bytes),
            "stdout": args.stdout_bytes,
            "stderr": args.stderr_bytes,
        })))
    }
}

capsaga_sdk::export_tool!(Chatty);
