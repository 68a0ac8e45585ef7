//! `fs_write`: writes a UTF-8 text file, atomically, and can undo it.
//!
//! Arguments: `{"path": "/abs/dir/a.txt", "content": "...", "create_dirs":
//! false}`.
//!
//! `execute` captures the pre-image of the file (did it exist, its content as
//! UTF-8 text or base64, its SHA-256), creates missing parent directories when
//! `create_dirs` is true, then writes a temporary file in the same directory
//! and renames it over the path, so a reader sees the old or the new content,
//! never a mix. Output data ([`WriteData`]):
//!
//! ```json
//! {"path": "/w/a.txt", "bytes_written": 5, "created": true, "created_dirs": [],
//!  "previous": {"existed": false, "content": null, "encoding": null, "sha256": null},
//!  "written_sha256": "2cf2…", "dry_run": false}
//! ```
//!
//! `dry_run` returns the same data (with `"dry_run": true`) without writing;
//! the host logs it as the pre-image for crash recovery.
//!
//! `compensate` compares the file as it is now with the pre-image and what
//! was written ([`decide`]): still the previous content (or still absent) →
//! nothing to do; exactly what this step wrote → restore the previous content
//! atomically, or remove the file this step created (and the directories it
//! created, when empty); anything else → `unrevertible`, naming the
//! conflict, because a third party changed the file since.
//!
//! Limits: pre-images over 4 MiB are refused (`unsupported`); symbolic links
//! are not written through (`unsupported`); file permissions of a replaced
//! file are not preserved (WASI has no chmod).
//!
//! Side effects, risk medium, idempotent, supports dry-run. The output holds
//! the previous content of the file, so it is marked untrusted. Needs
//! `fs:write:*`.

use std::fs::{self, File};
use std::io::{self, Write};
use std::path::{Path, PathBuf};

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as BASE64;
use capsaga_sdk::prelude::*;
use sha2::{Digest, Sha256};

/// Largest pre-image (existing file) that `fs_write` captures: 4 MiB.
pub const MAX_PRE_IMAGE_BYTES: u64 = 4 * 1024 * 1024;

/// Arguments of `fs_write`.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Args {
    /// Absolute path of the file to write, inside a directory granted for writing.
    pub path: String,
    /// The complete new content of the file, as UTF-8 text.
    pub content: String,
    /// Create missing parent directories (default false).
    #[serde(default)]
    pub create_dirs: bool,
}

/// How [`Previous::content`] is encoded.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum Encoding {
    /// The content is the file's text as is.
    Utf8,
    /// The file was not UTF-8: standard base64 of its bytes.
    Base64,
}

/// The file before the write: what `compensate` restores.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct Previous {
    /// Whether the file existed.
    pub existed: bool,
    /// Its content (`null` when it did not exist).
    pub content: Option<String>,
    /// Encoding of `content` (`null` when it did not exist).
    pub encoding: Option<Encoding>,
    /// Lowercase hex SHA-256 of its bytes (`null` when it did not exist).
    pub sha256: Option<String>,
}

/// Output data of `execute` and `dry_run`.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct WriteData {
    /// The path as given.
    pub path: String,
    /// Bytes written (for a dry run: that would be written).
    pub bytes_written: u64,
    /// True when the file did not exist before.
    pub created: bool,
    /// Parent directories created (for a dry run: missing), outermost first.
    pub created_dirs: Vec<String>,
    /// The pre-image.
    pub previous: Previous,
    /// Lowercase hex SHA-256 of the new content.
    pub written_sha256: String,
    /// True when this came from `dry_run` and nothing was written.
    pub dry_run: bool,
}

/// The file as `compensate` finds it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Current {
    /// Nothing at the path.
    Absent,
    /// A regular file with this lowercase hex SHA-256.
    File {
        /// Hash of its bytes.
        sha256: String,
    },
    /// Something that is not a regular file (directory, symbolic link...).
    Other,
}

/// What `compensate` must do, decided by [`decide`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Plan {
    /// The file is as before the write (or the write never happened).
    Nothing,
    /// The file holds what we wrote and did not exist before: remove it.
    Remove,
    /// The file holds what we wrote: put the previous content back.
    Restore,
    /// The file holds something else: a third party changed it; refuse.
    Conflict,
}

/// The compensation decision (pure): compare the file as it is now with the
/// pre-image and with what was written.
pub fn decide(previous: &Previous, written_sha256: &str, current: &Current) -> Plan {
    match current {
        Current::Absent if !previous.existed => Plan::Nothing,
        Current::Absent | Current::Other => Plan::Conflict,
        Current::File { sha256 } => {
            if previous.existed && previous.sha256.as_deref() == Some(sha256.as_str()) {
                Plan::Nothing
            } else if sha256 == written_sha256 {
                if previous.existed {
                    Plan::Restore
                } else {
                    Plan::Remove
                }
            } else {
                Plan::Conflict
            }
        }
    }
}

/// The tool.
pub struct FsWrite;

impl Tool for FsWrite {
    type Args = Args;

    fn meta() -> Meta {
        Meta::new(
            "fs_write",
            "Writes a UTF-8 text file (creating or replacing it) at an absolute path inside a \
             directory granted for writing; the write is atomic and can be undone.",
        )
        .side_effects(true)
        .risk(Risk::Medium)
        .returns_untrusted(true)
        .idempotent(true)
        .dry_run(true)
        .capability("fs:write:*")
    }

    fn execute(ctx: &CallContext, args: Args) -> Result<Output, ToolError> {
        let plan = prepare(&args)?;
        let path = Path::new(&args.path);
        let unchanged = plan.previous.sha256.as_deref() == Some(plan.written_sha256.as_str());
        let created_dirs: Vec<String> = plan
            .missing_dirs
            .iter()
            .map(|d| d.display().to_string())
            .collect();
        if !plan.missing_dirs.is_empty()
            && let Some(parent) = path.parent()
            && let Err(e) = fs::create_dir_all(parent)
        {
            remove_empty_dirs(&created_dirs);
            return Err(ToolError::from_io(&e, parent));
        }
        if !unchanged && let Err(e) = atomic_write(path, args.content.as_bytes(), ctx, "execute") {
            // A failed step is not compensated: leave no empty directories behind.
            remove_empty_dirs(&created_dirs);
            return Err(e);
        }
        let bytes = args.content.len();
        let mut out = Output::new(plan.data(&args, false));
        for dir in &plan.missing_dirs {
            out = out.effect(format!("created directory {}", dir.display()));
        }
        let (effect, summary) = if unchanged {
            (
                format!("left {} unchanged (same content, {bytes} bytes)", args.path),
                format!("{} already had this content", args.path),
            )
        } else if plan.previous.existed {
            (
                format!("wrote {} ({bytes} bytes)", args.path),
                format!("Replaced {} with {bytes} bytes", args.path),
            )
        } else {
            (
                format!("wrote {} ({bytes} bytes)", args.path),
                format!("Created {} with {bytes} bytes", args.path),
            )
        };
        crate_log(&effect);
        Ok(out.effect(effect).summary(summary))
    }

    fn dry_run(_ctx: &CallContext, args: Args) -> Result<Output, ToolError> {
        let plan = prepare(&args)?;
        let bytes = args.content.len();
        let mut out = Output::new(plan.data(&args, true));
        for dir in &plan.missing_dirs {
            out = out.effect(format!("would create directory {}", dir.display()));
        }
        let verb = if plan.previous.existed {
            "replace"
        } else {
            "create"
        };
        Ok(out
            .effect(format!("would write {} ({bytes} bytes)", args.path))
            .summary(format!("Would {verb} {} with {bytes} bytes", args.path)))
    }

    fn compensate(ctx: &CallContext, args: Args, output: &Output) -> Result<(), ToolError> {
        let data: WriteData = output.data_as()?;
        if data.path != args.path {
            return Err(ToolError::invalid_args(format!(
                "the output is for {}, the arguments for {}",
                data.path, args.path
            ))
            .hint("pass compensate the arguments and output of the same step"));
        }
        let path = Path::new(&args.path);
        // A crash between execute's write and its rename leaves its temporary file.
        if let Some(tmp) = temp_path(path, ctx, "execute") {
            remove_if_present(&tmp)?;
        }
        let current = observe(path)?;
        match decide(&data.previous, &data.written_sha256, &current) {
            Plan::Nothing => {}
            Plan::Remove => match fs::remove_file(path) {
                Ok(()) => crate_log(&format!("removed {}", args.path)),
                Err(e) if e.kind() == io::ErrorKind::NotFound => {}
                Err(e) => return Err(ToolError::from_io(&e, path)),
            },
            Plan::Restore => {
                let bytes = decode_previous(&data.previous)?;
                atomic_write(path, &bytes, ctx, "compensate")?;
                crate_log(&format!("restored {} ({} bytes)", args.path, bytes.len()));
            }
            Plan::Conflict => {
                let found = match &current {
                    Current::Absent => "no file".to_owned(),
                    Current::File { sha256 } => format!("content with sha256 {sha256}"),
                    Current::Other => "something that is not a regular file".to_owned(),
                };
                let expected = data
                    .previous
                    .sha256
                    .as_deref()
                    .map_or("no file".to_owned(), |s| format!("sha256 {s}"));
                return Err(ToolError::unrevertible(format!(
                    "{} was changed by someone else since it was written: found {found}, \
                     expected {expected} (before) or sha256 {} (written)",
                    args.path, data.written_sha256
                ))
                .hint("do not overwrite it; tell the operator that the file changed meanwhile")
                .details(json!({
                    "path": args.path,
                    "found": match &current {
                        Current::Absent => json!(null),
                        Current::File { sha256 } => json!(sha256),
                        Current::Other => json!("not-a-regular-file"),
                    },
                    "previous_sha256": data.previous.sha256,
                    "written_sha256": data.written_sha256,
                })));
            }
        }
        remove_empty_dirs(&data.created_dirs);
        Ok(())
    }
}

capsaga_sdk::export_tool!(FsWrite);

fn crate_log(message: &str) {
    capsaga_sdk::log::info(message);
}

/// Everything `execute` and `dry_run` learn before writing.
struct Prepared {
    previous: Previous,
    written_sha256: String,
    missing_dirs: Vec<PathBuf>,
}

impl Prepared {
    fn data(&self, args: &Args, dry_run: bool) -> WriteData {
        WriteData {
            path: args.path.clone(),
            bytes_written: args.content.len() as u64,
            created: !self.previous.existed,
            created_dirs: self
                .missing_dirs
                .iter()
                .map(|d| d.display().to_string())
                .collect(),
            previous: self.previous.clone(),
            written_sha256: self.written_sha256.clone(),
            dry_run,
        }
    }
}

/// Validates the path, captures the pre-image and finds missing parents.
fn prepare(args: &Args) -> Result<Prepared, ToolError> {
    let path = Path::new(&args.path);
    if !path.is_absolute() || args.path.contains('\0') {
        return Err(ToolError::invalid_args(format!(
            "path {:?} is not an absolute path",
            args.path
        ))
        .hint("give the absolute path of a file inside a directory granted for writing"));
    }
    let Some(parent) = path.parent().filter(|_| path.file_name().is_some()) else {
        return Err(
            ToolError::invalid_args(format!("path {:?} does not name a file", args.path))
                .hint("end the path with a file name, e.g. /dir/notes.txt"),
        );
    };
    let missing_dirs = missing_ancestors(parent)?;
    if missing_dirs.first().is_some_and(|d| d.parent().is_none()) {
        // Not even "/" exists: in the sandbox that means no granted directory
        // contains the path (WASI answers "not found" outside the preopens).
        return Err(ToolError::permission_denied(format!(
            "{} is outside the directories granted to this tool",
            args.path
        ))
        .hint("write to an absolute path inside a directory granted for writing"));
    }
    if !missing_dirs.is_empty() && !args.create_dirs {
        return Err(ToolError::not_found(format!(
            "the directory {} does not exist",
            parent.display()
        ))
        .hint("set create_dirs to true to create it, or write into an existing directory"));
    }
    let previous = if missing_dirs.is_empty() {
        capture_previous(path)?
    } else {
        Previous {
            existed: false,
            content: None,
            encoding: None,
            sha256: None,
        }
    };
    Ok(Prepared {
        previous,
        written_sha256: sha256_hex(args.content.as_bytes()),
        missing_dirs,
    })
}

/// Ancestors of `dir` (itself included) that do not exist, outermost first.
fn missing_ancestors(dir: &Path) -> Result<Vec<PathBuf>, ToolError> {
    let mut missing = Vec::new();
    for ancestor in dir.ancestors() {
        match fs::metadata(ancestor) {
            Ok(meta) if meta.is_dir() => break,
            Ok(_) => {
                return Err(ToolError::invalid_args(format!(
                    "{} is not a directory",
                    ancestor.display()
                ))
                .hint("a component of the path is a file; choose another path"));
            }
            Err(e) if e.kind() == io::ErrorKind::NotFound => missing.push(ancestor.to_path_buf()),
            Err(e) => return Err(ToolError::from_io(&e, ancestor)),
        }
    }
    missing.reverse();
    Ok(missing)
}

/// Reads the file at `path` (if any) as the pre-image.
fn capture_previous(path: &Path) -> Result<Previous, ToolError> {
    let meta = match fs::symlink_metadata(path) {
        Ok(meta) => meta,
        Err(e) if e.kind() == io::ErrorKind::NotFound => {
            return Ok(Previous {
                existed: false,
                content: None,
                encoding: None,
                sha256: None,
            });
        }
        Err(e) => return Err(ToolError::from_io(&e, path)),
    };
    let shown = path.display();
    if meta.file_type().is_symlink() {
        return Err(
            ToolError::unsupported(format!("{shown} is a symbolic link")).hint(
                "fs_write does not write through symbolic links; write to the link's target path",
            ),
        );
    }
    if meta.is_dir() {
        return Err(ToolError::invalid_args(format!("{shown} is a directory"))
            .hint("give the path of a file, e.g. a new name inside this directory"));
    }
    if !meta.is_file() {
        return Err(ToolError::unsupported(format!(
            "{shown} is not a regular file"
        )));
    }
    let too_big = |size: u64| {
        ToolError::unsupported(format!(
            "{shown} has {size} bytes; fs_write keeps at most {MAX_PRE_IMAGE_BYTES} bytes of \
             previous content to be able to undo the write"
        ))
        .hint("fs_write cannot replace files over 4 MiB; write a new file instead")
        .details(
            json!({"path": shown.to_string(), "size_bytes": size, "limit": MAX_PRE_IMAGE_BYTES}),
        )
    };
    if meta.len() > MAX_PRE_IMAGE_BYTES {
        return Err(too_big(meta.len()));
    }
    let bytes = fs::read(path).map_err(|e| ToolError::from_io(&e, path))?;
    if bytes.len() as u64 > MAX_PRE_IMAGE_BYTES {
        return Err(too_big(bytes.len() as u64));
    }
    let sha256 = sha256_hex(&bytes);
    let (content, encoding) = match String::from_utf8(bytes) {
        Ok(text) => (text, Encoding::Utf8),
        Err(e) => (BASE64.encode(e.into_bytes()), Encoding::Base64),
    };
    Ok(Previous {
        existed: true,
        content: Some(content),
        encoding: Some(encoding),
        sha256: Some(sha256),
    })
}

/// What is at `path` now, hashing a file in a streaming way.
fn observe(path: &Path) -> Result<Current, ToolError> {
    match fs::symlink_metadata(path) {
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(Current::Absent),
        Err(e) => Err(ToolError::from_io(&e, path)),
        Ok(meta) if !meta.is_file() => Ok(Current::Other),
        Ok(_) => {
            let mut file = File::open(path).map_err(|e| ToolError::from_io(&e, path))?;
            let mut hasher = Sha256::new();
            io::copy(&mut file, &mut hasher).map_err(|e| ToolError::from_io(&e, path))?;
            Ok(Current::File {
                sha256: hex(&hasher.finalize()),
            })
        }
    }
}

/// The previous content as bytes, checked against its hash.
fn decode_previous(previous: &Previous) -> Result<Vec<u8>, ToolError> {
    let bad = |why: &str| {
        ToolError::invalid_args(format!("the pre-image in the output is unusable: {why}"))
            .hint("pass compensate the output that execute or dry-run returned, unchanged")
    };
    let content = previous
        .content
        .as_deref()
        .ok_or_else(|| bad("no content"))?;
    let bytes = match previous.encoding {
        Some(Encoding::Utf8) => content.as_bytes().to_vec(),
        Some(Encoding::Base64) => BASE64
            .decode(content)
            .map_err(|e| bad(&format!("bad base64: {e}")))?,
        None => return Err(bad("no encoding")),
    };
    if previous.sha256.as_deref() != Some(sha256_hex(&bytes).as_str()) {
        return Err(bad("content does not match its sha256"));
    }
    Ok(bytes)
}

/// Writes `bytes` to a temporary file next to `path`, then renames it over
/// `path`. The temporary file is removed if anything fails.
///
/// The temporary name is derived from the step's idempotency key and the
/// operation ([`temp_path`]): a process killed between the write and the
/// rename leaves a file that the step's own compensation (or its next
/// attempt) finds and removes, so a crash never leaves litter behind. A stale
/// file of that name is removed first (never followed if it is a symlink).
fn atomic_write(path: &Path, bytes: &[u8], ctx: &CallContext, op: &str) -> Result<(), ToolError> {
    let Some(tmp) = temp_path(path, ctx, op) else {
        return Err(ToolError::invalid_args(format!(
            "{} does not name a file",
            path.display()
        )));
    };
    remove_if_present(&tmp)?;
    let written = (|| -> io::Result<()> {
        let mut file = fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&tmp)?;
        file.write_all(bytes)?;
        file.sync_all()?;
        Ok(())
    })();
    let result = written
        .map_err(|e| ToolError::from_io(&e, &tmp))
        .and_then(|()| fs::rename(&tmp, path).map_err(|e| ToolError::from_io(&e, path)));
    if result.is_err() {
        let _ = fs::remove_file(&tmp);
    }
    result
}

/// `<dir>/.<name>.<16 hex digits>.capsaga-tmp`, the digits from the SHA-256
/// of the idempotency key and `op` (`execute` or `compensate`): stable for
/// one step, different between steps.
fn temp_path(path: &Path, ctx: &CallContext, op: &str) -> Option<PathBuf> {
    let (parent, name) = (path.parent()?, path.file_name()?);
    let mut hasher = Sha256::new();
    hasher.update(ctx.idempotency_key.as_bytes());
    hasher.update([0u8]);
    hasher.update(op.as_bytes());
    Some(parent.join(format!(
        ".{}.{}.capsaga-tmp",
        name.to_string_lossy(),
        hex(&hasher.finalize()[..8])
    )))
}

/// Remove `path` if it exists (a symlink is removed, not followed).
fn remove_if_present(path: &Path) -> Result<(), ToolError> {
    match fs::remove_file(path) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(ToolError::from_io(&e, path)),
    }
}

/// Removes the directories this step created, innermost first, if empty.
/// Failures (not empty, already gone) are ignored: never remove others' files.
fn remove_empty_dirs(dirs: &[String]) {
    for dir in dirs.iter().rev() {
        if fs::remove_dir(dir).is_ok() {
            crate_log(&format!("removed empty directory {dir}"));
        }
    }
}

/// Lowercase hex SHA-256 of `bytes`.
pub fn sha256_hex(bytes: &[u8]) -> String {
    hex(&Sha256::digest(bytes))
}

fn hex(bytes: &[u8]) -> String {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut s = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        s.push(char::from(DIGITS[usize::from(b >> 4)]));
        s.push(char::from(DIGITS[usize::from(b & 0x0f)]));
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    fn prev(existed: bool, sha: Option<&str>) -> Previous {
        Previous {
            existed,
            content: sha.map(|_| "x".into()),
            encoding: sha.map(|_| Encoding::Utf8),
            sha256: sha.map(str::to_owned),
        }
    }

    fn file(sha: &str) -> Current {
        Current::File { sha256: sha.into() }
    }

    #[test]
    fn decide_covers_every_case() {
        let new = prev(false, None);
        let old = prev(true, Some("old"));
        // Created a file.
        assert_eq!(decide(&new, "w", &Current::Absent), Plan::Nothing);
        assert_eq!(decide(&new, "w", &file("w")), Plan::Remove);
        assert_eq!(decide(&new, "w", &file("x")), Plan::Conflict);
        assert_eq!(decide(&new, "w", &Current::Other), Plan::Conflict);
        // Replaced a file.
        assert_eq!(decide(&old, "w", &file("old")), Plan::Nothing);
        assert_eq!(decide(&old, "w", &file("w")), Plan::Restore);
        assert_eq!(decide(&old, "w", &file("x")), Plan::Conflict);
        assert_eq!(decide(&old, "w", &Current::Absent), Plan::Conflict);
        assert_eq!(decide(&old, "w", &Current::Other), Plan::Conflict);
        // Wrote the same content it had.
        assert_eq!(decide(&old, "old", &file("old")), Plan::Nothing);
    }

    #[test]
    fn sha_and_hex() {
        assert_eq!(
            sha256_hex(b"abc"),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
        assert_eq!(hex(&[0x00, 0x0f, 0xf0, 0xff]), "000ff0ff");
    }

    #[test]
    fn meta_is_valid() {
        let meta = capsaga_sdk::describe::<FsWrite>(env!("CARGO_PKG_VERSION"));
        assert_eq!(meta.check(), Ok(()));
        assert!(meta.has_side_effects && meta.idempotent && meta.supports_dry_run);
        assert_eq!(meta.risk, Risk::Medium);
        assert_eq!(meta.capabilities, ["fs:write:*"]);
        let schema = meta.args_schema.unwrap_or_default();
        assert_eq!(schema["required"], json!(["path", "content"]));
        assert_eq!(schema["properties"]["create_dirs"]["default"], false);
    }

    // Native end-to-end tests on a scratch directory.

    struct Scratch(PathBuf);
    impl Scratch {
        fn new(name: &str) -> Scratch {
            let dir =
                std::env::temp_dir().join(format!("fs_write-test-{}-{name}", std::process::id()));
            let _ = fs::remove_dir_all(&dir);
            fs::create_dir_all(&dir).unwrap_or_else(|e| panic!("{e}"));
            Scratch(dir)
        }
        fn path(&self, rel: &str) -> String {
            self.0.join(rel).display().to_string()
        }
    }
    impl Drop for Scratch {
        fn drop(&mut self) {
            let _ = fs::remove_dir_all(&self.0);
        }
    }

    fn args(path: &str, content: &str, create_dirs: bool) -> Args {
        Args {
            path: path.into(),
            content: content.into(),
            create_dirs,
        }
    }

    fn run(a: &Args) -> Output {
        FsWrite::execute(&CallContext::default(), a.clone()).unwrap_or_else(|e| panic!("{e}"))
    }

    fn undo(a: &Args, out: &Output) -> Result<(), ToolError> {
        FsWrite::compensate(&CallContext::default(), a.clone(), out)
    }

    fn read(p: &str) -> Option<Vec<u8>> {
        fs::read(p).ok()
    }

    #[test]
    fn create_then_compensate_removes_file_and_dirs() {
        let s = Scratch::new("create");
        let p = s.path("sub/deeper/a.txt");
        let a = args(&p, "hello", true);
        let dry =
            FsWrite::dry_run(&CallContext::default(), a.clone()).unwrap_or_else(|e| panic!("{e}"));
        assert!(read(&p).is_none(), "dry run must not write");
        let out = run(&a);
        assert_eq!(read(&p).as_deref(), Some(&b"hello"[..]));
        let data: WriteData = out.data_as().unwrap_or_else(|e| panic!("{e}"));
        let dry_data: WriteData = dry.data_as().unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(data.previous, dry_data.previous);
        assert_eq!(data.written_sha256, dry_data.written_sha256);
        assert_eq!(data.created_dirs, dry_data.created_dirs);
        assert!(data.created && !data.dry_run && dry_data.dry_run);
        assert_eq!(data.created_dirs.len(), 2);
        assert!(
            out.effects
                .iter()
                .any(|e| e == &format!("wrote {p} (5 bytes)"))
        );

        undo(&a, &out).unwrap_or_else(|e| panic!("{e}"));
        assert!(read(&p).is_none());
        assert!(!s.0.join("sub").exists(), "created dirs removed");
        undo(&a, &out).unwrap_or_else(|e| panic!("idempotent: {e}"));
    }

    #[test]
    fn replace_then_compensate_restores_binary_content() {
        let s = Scratch::new("replace");
        let p = s.path("a.bin");
        let original = vec![0u8, 0xff, 0xfe, b'x'];
        fs::write(&p, &original).unwrap_or_else(|e| panic!("{e}"));
        let a = args(&p, "new text", false);
        let out = run(&a);
        let data: WriteData = out.data_as().unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(data.previous.encoding, Some(Encoding::Base64));
        assert!(!data.created);
        assert_eq!(read(&p).as_deref(), Some(&b"new text"[..]));
        undo(&a, &out).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(read(&p), Some(original.clone()));
        undo(&a, &out).unwrap_or_else(|e| panic!("idempotent: {e}"));
        assert_eq!(read(&p), Some(original));
    }

    #[test]
    fn compensate_with_dry_run_output_tolerates_never_executed() {
        let s = Scratch::new("indoubt");
        let p = s.path("a.txt");
        fs::write(&p, "before").unwrap_or_else(|e| panic!("{e}"));
        let a = args(&p, "after", false);
        let dry =
            FsWrite::dry_run(&CallContext::default(), a.clone()).unwrap_or_else(|e| panic!("{e}"));
        // Crash before execute: nothing to undo.
        undo(&a, &dry).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(read(&p).as_deref(), Some(&b"before"[..]));
        // Crash after execute: the dry-run pre-image is enough to restore.
        run(&a);
        undo(&a, &dry).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(read(&p).as_deref(), Some(&b"before"[..]));
    }

    #[test]
    fn compensate_removes_a_temp_file_left_by_a_crash() {
        let s = Scratch::new("crash-tmp");
        let p = s.path("a.txt");
        let ctx = CallContext {
            idempotency_key: "saga:0:fs_write:abc".into(),
            ..CallContext::default()
        };
        let a = args(&p, "after", false);
        let dry = FsWrite::dry_run(&ctx, a.clone()).unwrap_or_else(|e| panic!("{e}"));
        // The host was killed after the write, before the rename.
        let tmp = temp_path(Path::new(&p), &ctx, "execute").unwrap_or_default();
        fs::write(&tmp, "after").unwrap_or_else(|e| panic!("{e}"));
        FsWrite::compensate(&ctx, a.clone(), &dry).unwrap_or_else(|e| panic!("{e}"));
        assert!(!tmp.exists(), "temp file left behind");
        assert!(read(&p).is_none());
        // Another step's temp name differs; the same step's is stable.
        let other = CallContext {
            idempotency_key: "saga:1:fs_write:abc".into(),
            ..CallContext::default()
        };
        assert_ne!(temp_path(Path::new(&p), &other, "execute"), Some(tmp.clone()));
        assert_eq!(temp_path(Path::new(&p), &ctx, "execute"), Some(tmp));
    }

    #[test]
    fn third_party_change_is_unrevertible() {
        let s = Scratch::new("conflict");
        let p = s.path("a.txt");
        let a = args(&p, "ours", false);
        let out = run(&a);
        fs::write(&p, "theirs").unwrap_or_else(|e| panic!("{e}"));
        let e = undo(&a, &out).err();
        assert_eq!(e.as_ref().map(|e| e.kind), Some(ErrorKind::Unrevertible));
        assert!(e.is_some_and(|e| e.message.contains("changed by someone else")));
        assert_eq!(read(&p).as_deref(), Some(&b"theirs"[..]), "left alone");
    }

    #[test]
    fn same_content_is_left_unchanged() {
        let s = Scratch::new("same");
        let p = s.path("a.txt");
        fs::write(&p, "same").unwrap_or_else(|e| panic!("{e}"));
        let a = args(&p, "same", false);
        let out = run(&a);
        assert!(out.effects.iter().any(|e| e.contains("unchanged")));
        undo(&a, &out).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(read(&p).as_deref(), Some(&b"same"[..]));
    }

    #[test]
    fn refusals() {
        let s = Scratch::new("refuse");
        let kind = |a: Args| {
            FsWrite::execute(&CallContext::default(), a)
                .err()
                .map(|e| e.kind)
        };
        assert_eq!(
            kind(args("rel.txt", "x", false)),
            Some(ErrorKind::InvalidArgs)
        );
        assert_eq!(
            kind(args(&s.path("no/such/a.txt"), "x", false)),
            Some(ErrorKind::NotFound)
        );
        assert_eq!(
            kind(args(&s.path(""), "x", false)),
            Some(ErrorKind::InvalidArgs)
        );
        let big = s.path("big.txt");
        let size = usize::try_from(MAX_PRE_IMAGE_BYTES).unwrap_or(usize::MAX) + 1;
        fs::write(&big, vec![b'a'; size]).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(kind(args(&big, "x", false)), Some(ErrorKind::Unsupported));
        #[cfg(unix)]
        {
            let link = s.path("link");
            std::os::unix::fs::symlink(&big, &link).unwrap_or_else(|e| panic!("{e}"));
            assert_eq!(kind(args(&link, "x", false)), Some(ErrorKind::Unsupported));
        }
        // Nothing left behind by the refusals, no temp files.
        let names: Vec<String> = fs::read_dir(&s.0)
            .map(|rd| {
                rd.filter_map(Result::ok)
                    .map(|e| e.file_name().to_string_lossy().into_owned())
                    .collect()
            })
            .unwrap_or_default();
        assert!(
            names.iter().all(|n| !n.contains("capsaga-tmp")),
            "{names:?}"
        );
    }

    #[test]
    fn compensate_rejects_foreign_output() {
        let a = args("/w/a.txt", "x", false);
        let e = undo(&a, &Output::new(json!({"path": "/w/a.txt"}))).err();
        assert_eq!(e.map(|e| e.kind), Some(ErrorKind::InvalidArgs));
    }
}
