//! The file before the write (its pre-image): captured by `execute` and
//! `dry_run`, decoded by `compensate`, and the SHA-256 both compare.

use std::path::Path;

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as BASE64;
use capsaga_sdk::fs::{Expect, FileError, FileId, open_file};
use capsaga_sdk::prelude::*;
use sha2::{Digest, Sha256};

use crate::MAX_PRE_IMAGE_BYTES;

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
    /// Which file it was and how many names it had (absent when it did not
    /// exist, and in outputs of older versions): the undo writes only to
    /// that file, never through a link put in its place.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<FileId>,
}

/// Reads the file at `path` (if any) as the pre-image, with its identity,
/// reached through the SDK's guarded file (no link followed).
pub(crate) fn capture_previous(path: &Path) -> Result<Previous, ToolError> {
    let shown = path.display();
    let file = match open_file(path, &Expect::Any) {
        Ok(Some(f)) => f,
        Ok(None) => {
            return Ok(Previous {
                existed: false,
                content: None,
                encoding: None,
                sha256: None,
                id: None,
            });
        }
        Err(FileError::Link) => {
            return Err(
                ToolError::unsupported(format!("{shown} is a symbolic link")).hint(
                    "fs_write does not write through symbolic links; write to the link's target path",
                ),
            );
        }
        Err(FileError::NotAFile { kind: "directory" }) => {
            return Err(ToolError::invalid_args(format!("{shown} is a directory"))
                .hint("give the path of a file, e.g. a new name inside this directory"));
        }
        Err(FileError::NotAFile { kind }) => {
            return Err(ToolError::unsupported(format!(
                "{shown} is not a regular file (a {kind})"
            )));
        }
        Err(e) => return Err(e.tool_error(path)),
    };
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
    if file.len() > MAX_PRE_IMAGE_BYTES {
        return Err(too_big(file.len()));
    }
    let bytes = file
        .read_at_most(MAX_PRE_IMAGE_BYTES)
        .map_err(|e| e.tool_error(path))?;
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
        id: Some(file.id().clone()),
    })
}

/// The previous content as bytes, checked against its hash.
pub(crate) fn decode_previous(previous: &Previous) -> Result<Vec<u8>, ToolError> {
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

/// Lowercase hex SHA-256 of `bytes`.
pub fn sha256_hex(bytes: &[u8]) -> String {
    hex(&Sha256::digest(bytes))
}

pub(crate) fn hex(bytes: &[u8]) -> String {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut s = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        s.push(char::from(DIGITS[usize::from(b >> 4)]));
        s.push(char::from(DIGITS[usize::from(b & 0x0f)]));
    }
    s
}
