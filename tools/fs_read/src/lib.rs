//! `fs_read`: reads a UTF-8 text file inside a granted directory.
//!
//! Arguments: `{"path": "/abs/file.txt", "max_bytes": 65536}` (`max_bytes`
//! optional, 1 to 1048576). Output: `{"path", "size_bytes", "content",
//! "truncated"}`, where `content` is at most `max_bytes` bytes of the file,
//! cut back to a whole UTF-8 character, and `truncated` tells whether the file
//! is longer. A file that is not UTF-8 text fails with `unsupported`.
//!
//! The path is checked with [`capsaga_sdk::fs::resolve`] before anything is
//! opened: `..` walks and absolute paths outside the granted directories, and
//! symbolic links that lead outside them, fail with `permission-denied`;
//! symbolic links inside them are followed.
//!
//! No side effects, risk low, idempotent; the content is untrusted. Needs
//! `fs:read:*` (each granted directory is mounted at its own absolute path).

use std::fs::File;
use std::io::Read;
use std::path::Path;

use capsaga_sdk::fs::{Follow, resolve};
use capsaga_sdk::prelude::*;

/// Default for [`Args::max_bytes`]: 64 KiB.
pub const DEFAULT_MAX_BYTES: u64 = 65_536;
/// Upper bound of [`Args::max_bytes`]: 1 MiB.
pub const LIMIT_MAX_BYTES: u64 = 1_048_576;

/// Arguments of `fs_read`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Args {
    /// Absolute path of the file, inside a directory granted for reading.
    pub path: String,
    /// Read at most this many bytes from the start of the file (default 65536).
    #[serde(default = "default_max_bytes")]
    #[schemars(range(min = 1, max = 1_048_576))]
    pub max_bytes: u64,
}

fn default_max_bytes() -> u64 {
    DEFAULT_MAX_BYTES
}

/// What `fs_read` returns.
#[derive(Debug, Serialize, Deserialize, PartialEq, Eq)]
pub struct ReadOutput {
    /// The path as given.
    pub path: String,
    /// Size of the whole file in bytes.
    pub size_bytes: u64,
    /// The text read (at most `max_bytes` bytes).
    pub content: String,
    /// True when the file has more bytes than `content`.
    pub truncated: bool,
}

/// The tool.
pub struct FsRead;

impl Tool for FsRead {
    type Args = Args;

    fn meta() -> Meta {
        Meta::new(
            "fs_read",
            "Reads a UTF-8 text file and returns its content (the first max_bytes bytes; \
             truncated tells whether there is more). The path must be absolute and inside a \
             directory granted to the tool.",
        )
        .returns_untrusted(true)
        .idempotent(true)
        .dry_run(true)
        .capability("fs:read:*")
        // Field labels: see docs/information-flow.md (first-party tools).
        .trusted_field("/size_bytes")
        .trusted_field("/truncated")
        .untrusted_field("/path")
        .untrusted_field("/content")
    }

    fn execute(_ctx: &CallContext, args: Args) -> Result<Output, ToolError> {
        if !(1..=LIMIT_MAX_BYTES).contains(&args.max_bytes) {
            return Err(ToolError::invalid_args(format!(
                "max_bytes {} is out of range",
                args.max_bytes
            ))
            .hint(format!("use a max_bytes between 1 and {LIMIT_MAX_BYTES}")));
        }
        // Refuse `..` walks, paths outside the grants and symbolic links
        // leading out with one precise error, then open the resolved path.
        let resolved = resolve(&args.path, Follow::Final)?;
        let path = Path::new(&args.path);
        let file = File::open(&resolved).map_err(|e| ToolError::from_io(&e, path))?;
        let meta = file.metadata().map_err(|e| ToolError::from_io(&e, path))?;
        if meta.is_dir() {
            return Err(
                ToolError::invalid_args(format!("{} is a directory", args.path))
                    .hint("list it with fs_list and read one of its files"),
            );
        }
        let mut bytes = Vec::new();
        file.take(args.max_bytes)
            .read_to_end(&mut bytes)
            .map_err(|e| ToolError::from_io(&e, path))?;
        let size_bytes = meta.len().max(bytes.len() as u64);
        let truncated = size_bytes > bytes.len() as u64;
        let content = utf8_prefix(bytes, truncated).map_err(|valid_up_to| {
            ToolError::unsupported(format!(
                "{} is not UTF-8 text (invalid byte at offset {valid_up_to})",
                args.path
            ))
            .hint("fs_read only returns text files; this looks like a binary file")
            .details(json!({"path": args.path, "size_bytes": size_bytes}))
        })?;
        let summary = if truncated {
            format!(
                "Read the first {} of {size_bytes} bytes of {}",
                content.len(),
                args.path
            )
        } else {
            format!("Read {size_bytes} bytes from {}", args.path)
        };
        Ok(Output::new(ReadOutput {
            path: args.path,
            size_bytes,
            content,
            truncated,
        })
        .summary(summary))
    }
}

capsaga_sdk::export_tool!(FsRead);

/// Decodes `bytes` as UTF-8. When `cut` is true (the read stopped before the
/// end of the file) an incomplete character at the very end is dropped.
///
/// # Errors
/// The offset of the first invalid byte.
pub fn utf8_prefix(mut bytes: Vec<u8>, cut: bool) -> Result<String, usize> {
    if let Err(e) = std::str::from_utf8(&bytes) {
        // `error_len() == None`: the input ends in the middle of a character.
        if cut && e.error_len().is_none() {
            bytes.truncate(e.valid_up_to());
        } else {
            return Err(e.valid_up_to());
        }
    }
    String::from_utf8(bytes).map_err(|e| e.utf8_error().valid_up_to())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::PathBuf;

    fn scratch(name: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("fs_read-test-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap_or_else(|e| panic!("{e}"));
        dir
    }

    fn read(path: &Path, max_bytes: u64) -> Result<ReadOutput, ToolError> {
        let args = Args {
            path: path.display().to_string(),
            max_bytes,
        };
        FsRead::execute(&CallContext::default(), args)?.data_as()
    }

    #[test]
    fn meta_is_valid() {
        let meta = capsaga_sdk::describe::<FsRead>(env!("CARGO_PKG_VERSION"));
        assert_eq!(meta.check(), Ok(()));
        assert_eq!(meta.capabilities, ["fs:read:*"]);
        assert!(meta.returns_untrusted && !meta.has_side_effects);
        let schema = meta.args_schema.unwrap_or_default();
        assert_eq!(schema["properties"]["max_bytes"]["maximum"], 1_048_576);
        assert_eq!(schema["properties"]["max_bytes"]["default"], 65_536);
        assert_eq!(schema["required"], json!(["path"]));
    }

    #[test]
    fn reads_whole_and_truncated() {
        let dir = scratch("basic");
        let f = dir.join("a.txt");
        std::fs::write(&f, "héllo wörld").unwrap_or_else(|e| panic!("{e}"));
        let whole = read(&f, DEFAULT_MAX_BYTES).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(whole.content, "héllo wörld");
        assert_eq!(whole.size_bytes, 13);
        assert!(!whole.truncated);
        // Byte 2 is inside 'é': the cut drops the half character.
        let part = read(&f, 2).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(part.content, "h");
        assert!(part.truncated);
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn errors_are_typed() {
        let dir = scratch("errors");
        let kind = |r: Result<ReadOutput, ToolError>| r.err().map(|e| e.kind);
        assert_eq!(
            kind(read(&dir.join("missing"), 10)),
            Some(ErrorKind::NotFound)
        );
        assert_eq!(kind(read(&dir, 10)), Some(ErrorKind::InvalidArgs));
        assert_eq!(
            kind(read(Path::new("rel.txt"), 10)),
            Some(ErrorKind::InvalidArgs)
        );
        assert_eq!(kind(read(&dir.join("x"), 0)), Some(ErrorKind::InvalidArgs));
        let bin = dir.join("bin");
        std::fs::write(&bin, [0x66, 0xff, 0x00]).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(kind(read(&bin, 10)), Some(ErrorKind::Unsupported));
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[cfg(unix)]
    #[test]
    fn outside_the_grant_is_permission_denied() {
        use capsaga_sdk::fs::with_granted_roots;
        use std::os::unix::fs::symlink;
        let base = scratch("confine");
        let ws = base.join("ws");
        std::fs::create_dir_all(ws.join("sub")).unwrap_or_else(|e| panic!("{e}"));
        let secret = base.join("secret.txt");
        std::fs::write(&secret, "TOP-SECRET").unwrap_or_else(|e| panic!("{e}"));
        std::fs::write(ws.join("inside.txt"), "inside").unwrap_or_else(|e| panic!("{e}"));
        symlink(&secret, ws.join("abs_link")).unwrap_or_else(|e| panic!("{e}"));
        symlink("../secret.txt", ws.join("rel_link")).unwrap_or_else(|e| panic!("{e}"));
        symlink(&base, ws.join("dir_link")).unwrap_or_else(|e| panic!("{e}"));
        symlink("inside.txt", ws.join("in_link")).unwrap_or_else(|e| panic!("{e}"));
        let w = ws.display().to_string();
        with_granted_roots([&ws], || {
            for p in [
                format!("{w}/../secret.txt"),
                format!("{w}/sub/../../secret.txt"),
                secret.display().to_string(),
                "/etc/passwd".to_owned(),
                format!("{w}/abs_link"),
                format!("{w}/rel_link"),
                format!("{w}/dir_link/secret.txt"),
            ] {
                let e = read(Path::new(&p), 100).err();
                assert_eq!(
                    e.as_ref().map(|e| e.kind),
                    Some(ErrorKind::PermissionDenied),
                    "{p}"
                );
                let text = format!("{e:?}");
                assert!(!text.contains("TOP-SECRET"), "{text}");
                assert!(text.contains(&w), "the hint names the grant: {text}");
            }
            // Inside the grant, links are followed.
            let out = read(&ws.join("in_link"), 100).unwrap_or_else(|e| panic!("{e}"));
            assert_eq!(out.content, "inside");
            let out = read(Path::new(&format!("{w}/sub/../inside.txt")), 100)
                .unwrap_or_else(|e| panic!("{e}"));
            assert_eq!(out.content, "inside");
        });
        let _ = std::fs::remove_dir_all(&base);
    }

    #[test]
    fn utf8_prefix_rules() {
        assert_eq!(utf8_prefix(b"abc".to_vec(), false), Ok("abc".into()));
        assert_eq!(utf8_prefix(vec![b'a', 0xc3], true), Ok("a".into()));
        assert_eq!(utf8_prefix(vec![b'a', 0xc3], false), Err(1));
        assert_eq!(utf8_prefix(vec![b'a', 0xff, b'b'], true), Err(1));
    }
}
