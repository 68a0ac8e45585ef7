//! `special_files` (test component): opens each path it is given in every
//! way a guest can (read, write, create, append, read-write, and read
//! through `std::fs::read`), and reports what the host answered. Pointed at
//! FIFOs, Unix sockets, device nodes and links to them, a host that opened
//! them blocking would hang in `open`; the host must refuse them at once.
//!
//! Args: `{"paths": ["/abs/path", ...]}`. Output: `{"results": [{"path",
//! "attempts": [{"how", "ok", "error"?, "os_error"?}]}]}`: one entry per
//! path, one attempt per way of opening. An attempt that opened something
//! reads at most 16 bytes from it (a regular file answers at once).
//! Needs `fs:read:*` and `fs:write:*`.

use std::fs::{File, OpenOptions};
use std::io::{self, Read};

use capsaga_sdk::prelude::*;
use capsaga_sdk::serde_json::Value;

/// Arguments.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Args {
    /// Absolute paths to open.
    pub paths: Vec<String>,
}

/// The component.
pub struct SpecialFiles;

/// One way of opening a path.
type Opener = fn(&str) -> io::Result<File>;

const OPENERS: &[(&str, Opener)] = &[
    ("read", |p| File::open(p)),
    ("write", |p| OpenOptions::new().write(true).open(p)),
    ("create", |p| OpenOptions::new().write(true).create(true).truncate(false).open(p)),
    ("append", |p| OpenOptions::new().append(true).open(p)),
    ("read_write", |p| OpenOptions::new().read(true).write(true).open(p)),
];

fn attempt(how: &str, r: io::Result<Value>) -> Value {
    match r {
        Ok(v) => json!({"how": how, "ok": true, "observed": v}),
        Err(e) => json!({
            "how": how,
            "ok": false,
            "error": e.to_string(),
            "io_kind": format!("{:?}", e.kind()),
            "os_error": e.raw_os_error(),
        }),
    }
}

impl Tool for SpecialFiles {
    type Args = Args;

    fn meta() -> Meta {
        Meta::new(
            "special_files",
            "Test component: opens FIFOs, sockets and devices in every way and reports the host's answer.",
        )
        .side_effects(true)
        .risk(Risk::High)
        .capability("fs:read:*")
        .capability("fs:write:*")
    }

    fn execute(_ctx: &CallContext, args: Args) -> Result<Output, ToolError> {
        let mut results = Vec::new();
        for path in &args.paths {
            let mut attempts = Vec::new();
            for (how, open) in OPENERS {
                attempts.push(attempt(how, open(path).map(|mut f| {
                    let mut buf = [0u8; 16];
                    let n = f.read(&mut buf).unwrap_or(0);
                    json!({"read_bytes": n})
                })));
            }
            attempts.push(attempt(
                "fs_read",
                std::fs::read(path).map(|b| json!({"len": b.len()})),
            ));
            attempts.push(attempt(
                "metadata",
                std::fs::metadata(path).map(|m| json!({"is_file": m.is_file(), "is_dir": m.is_dir()})),
            ));
            results.push(json!({"path": path, "attempts": attempts}));
        }
        Ok(Output::new(json!({ "results": results })))
    }
}

capsaga_sdk::export_tool!(SpecialFiles);
