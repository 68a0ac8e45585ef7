//! [`ToolError`] and [`ErrorKind`]: failures written for a human and a model
//! (WIT `tool-error` and `error-kind`), used both for errors a tool returns
//! and for errors the host produces on a tool's behalf (sandbox traps,
//! limits, denied grants, refused calls).

use serde::{Deserialize, Serialize};
use std::fmt;
use std::io;
use std::path::Path;

/// Classes of failure (WIT `error-kind`). The model and the saga engine act on
/// the kind: `InvalidArgs` asks the model to fix its call, `Unrevertible`
/// stops a rollback for the operator, retriable kinds may be retried.
///
/// Serialised (in the write-ahead log, in JSON output) in snake case, e.g.
/// `permission_denied`; displayed with the WIT name, e.g. `permission-denied`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ErrorKind {
    /// The arguments are wrong; the model should fix them.
    InvalidArgs,
    /// A named file or resource does not exist.
    NotFound,
    /// The sandbox or a remote service refused access.
    PermissionDenied,
    /// Transport failure: DNS, connection, timeout talking to a remote, 5xx.
    NetworkError,
    /// A remote service answered with an error (e.g. HTTP 4xx with a body).
    ExternalError,
    /// A quota or size limit was exceeded.
    QuotaExceeded,
    /// Valid arguments, but a combination the tool does not support.
    Unsupported,
    /// The call ran out of time.
    Timeout,
    /// `compensate` cannot undo the effect.
    Unrevertible,
    /// Anything else.
    Unknown,
}

impl ErrorKind {
    /// Every kind, in WIT order.
    pub const ALL: [ErrorKind; 10] = [
        ErrorKind::InvalidArgs,
        ErrorKind::NotFound,
        ErrorKind::PermissionDenied,
        ErrorKind::NetworkError,
        ErrorKind::ExternalError,
        ErrorKind::QuotaExceeded,
        ErrorKind::Unsupported,
        ErrorKind::Timeout,
        ErrorKind::Unrevertible,
        ErrorKind::Unknown,
    ];

    /// The WIT name, e.g. `invalid-args`.
    pub fn as_str(self) -> &'static str {
        match self {
            ErrorKind::InvalidArgs => "invalid-args",
            ErrorKind::NotFound => "not-found",
            ErrorKind::PermissionDenied => "permission-denied",
            ErrorKind::NetworkError => "network-error",
            ErrorKind::ExternalError => "external-error",
            ErrorKind::QuotaExceeded => "quota-exceeded",
            ErrorKind::Unsupported => "unsupported",
            ErrorKind::Timeout => "timeout",
            ErrorKind::Unrevertible => "unrevertible",
            ErrorKind::Unknown => "unknown",
        }
    }

    /// The hint used when the tool gives none: a generic "what to try next".
    pub fn default_hint(self) -> &'static str {
        match self {
            ErrorKind::InvalidArgs => {
                "fix the arguments so that they match the tool's argument schema, then call again"
            }
            ErrorKind::NotFound => {
                "check the name or path; list the parent directory to see what exists"
            }
            ErrorKind::PermissionDenied => {
                "access was refused; use a path or resource inside what this tool was granted"
            }
            ErrorKind::NetworkError => {
                "a transient network failure; the same call may succeed if retried later"
            }
            ErrorKind::ExternalError => {
                "the remote service rejected the request; read the message and change the request"
            }
            ErrorKind::QuotaExceeded => {
                "a size or quota limit was hit; ask for less (a smaller range, fewer items)"
            }
            ErrorKind::Unsupported => {
                "the tool does not support this; try a different approach or another tool"
            }
            ErrorKind::Timeout => "the call ran out of time; try a smaller request, or retry later",
            ErrorKind::Unrevertible => {
                "the effect cannot be undone automatically; report it to the operator"
            }
            ErrorKind::Unknown => "an unexpected failure; do not repeat the same call unchanged",
        }
    }

    /// Whether errors of this kind are retriable unless the tool says
    /// otherwise: true for `NetworkError` and `Timeout`, false for the rest.
    pub fn retriable_by_default(self) -> bool {
        matches!(self, ErrorKind::NetworkError | ErrorKind::Timeout)
    }
}

impl fmt::Display for ErrorKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A failure of `execute`, `dry_run` or `compensate` (WIT `tool-error`).
///
/// A tool builds one with a kind constructor ([`ToolError::not_found`], ...),
/// then refines it with [`ToolError::hint`], [`ToolError::details`] and
/// [`ToolError::retriable`]; the host, which always writes its own hint and
/// never marks its refusals retriable, uses [`ToolError::with_hint`]:
///
/// ```
/// use capsaga_types::ToolError;
/// let e = ToolError::not_found("no such file: /w/a.txt")
///     .hint("list /w with fs_list and pick an existing file")
///     .details(serde_json::json!({"path": "/w/a.txt"}));
/// assert_eq!(e.kind.as_str(), "not-found");
/// ```
///
/// The fields are public to read; the type is `#[non_exhaustive]`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct ToolError {
    /// See [`ErrorKind`].
    pub kind: ErrorKind,
    /// Short description for the human operator.
    pub message: String,
    /// What the model should try next. Defaults to
    /// [`ErrorKind::default_hint`].
    pub llm_hint: String,
    /// Optional structured details (sent to the host as JSON text). Boxed to
    /// keep `Result<_, ToolError>` small.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub details: Option<Box<serde_json::Value>>,
    /// True when the same call may succeed if retried unchanged. Defaults to
    /// [`ErrorKind::retriable_by_default`].
    #[serde(default)]
    pub retriable: bool,
}

impl ToolError {
    /// An error of `kind` with `message` for the human, the kind's default
    /// hint and default retriability.
    pub fn new(kind: ErrorKind, message: impl Into<String>) -> ToolError {
        ToolError {
            kind,
            message: message.into(),
            llm_hint: kind.default_hint().to_owned(),
            details: None,
            retriable: kind.retriable_by_default(),
        }
    }

    /// An error of `kind` with `message` for the human and `llm_hint` for the
    /// model, not retriable: what the host writes when it refuses or fails a
    /// call on a tool's behalf.
    pub fn with_hint(
        kind: ErrorKind,
        message: impl Into<String>,
        llm_hint: impl Into<String>,
    ) -> ToolError {
        ToolError {
            kind,
            message: message.into(),
            llm_hint: llm_hint.into(),
            details: None,
            retriable: false,
        }
    }

    /// [`ErrorKind::InvalidArgs`]: the model should fix its arguments.
    pub fn invalid_args(message: impl Into<String>) -> ToolError {
        ToolError::new(ErrorKind::InvalidArgs, message)
    }

    /// [`ErrorKind::NotFound`]: a named file or resource does not exist.
    pub fn not_found(message: impl Into<String>) -> ToolError {
        ToolError::new(ErrorKind::NotFound, message)
    }

    /// [`ErrorKind::PermissionDenied`]: the sandbox or a remote refused access.
    pub fn permission_denied(message: impl Into<String>) -> ToolError {
        ToolError::new(ErrorKind::PermissionDenied, message)
    }

    /// [`ErrorKind::NetworkError`]: transport failure (retriable by default).
    pub fn network(message: impl Into<String>) -> ToolError {
        ToolError::new(ErrorKind::NetworkError, message)
    }

    /// [`ErrorKind::ExternalError`]: a remote service answered with an error.
    pub fn external(message: impl Into<String>) -> ToolError {
        ToolError::new(ErrorKind::ExternalError, message)
    }

    /// [`ErrorKind::QuotaExceeded`]: a quota or size limit was exceeded.
    pub fn quota_exceeded(message: impl Into<String>) -> ToolError {
        ToolError::new(ErrorKind::QuotaExceeded, message)
    }

    /// [`ErrorKind::Unsupported`]: valid arguments the tool does not support.
    pub fn unsupported(message: impl Into<String>) -> ToolError {
        ToolError::new(ErrorKind::Unsupported, message)
    }

    /// [`ErrorKind::Timeout`]: the call ran out of time (retriable by default).
    pub fn timeout(message: impl Into<String>) -> ToolError {
        ToolError::new(ErrorKind::Timeout, message)
    }

    /// [`ErrorKind::Unrevertible`]: `compensate` cannot undo the effect.
    pub fn unrevertible(message: impl Into<String>) -> ToolError {
        ToolError::new(ErrorKind::Unrevertible, message)
    }

    /// [`ErrorKind::Unknown`]: anything else.
    pub fn unknown(message: impl Into<String>) -> ToolError {
        ToolError::new(ErrorKind::Unknown, message)
    }

    /// Replaces the hint for the model (what to try next).
    #[must_use]
    pub fn hint(mut self, hint: impl Into<String>) -> ToolError {
        self.llm_hint = hint.into();
        self
    }

    /// Attaches structured details, e.g. `serde_json::json!({"path": p})`.
    #[must_use]
    pub fn details(mut self, details: serde_json::Value) -> ToolError {
        self.details = Some(Box::new(details));
        self
    }

    /// Same as [`ToolError::details`].
    #[must_use]
    pub fn with_details(self, details: serde_json::Value) -> ToolError {
        self.details(details)
    }

    /// Overrides whether the same call may succeed if retried unchanged.
    #[must_use]
    pub fn retriable(mut self, yes: bool) -> ToolError {
        self.retriable = yes;
        self
    }

    /// The error as the model reads it: kind, message and hint.
    pub fn to_model_text(&self) -> String {
        format!(
            "tool error ({}): {}\nhint: {}",
            self.kind, self.message, self.llm_hint
        )
    }

    /// Turns an I/O error on `path` into a `ToolError` with the right kind and
    /// a hint for the model. Mapping (by [`io::ErrorKind`]):
    ///
    /// | I/O | kind | note |
    /// | --- | --- | --- |
    /// | `PermissionDenied`, WASI "capabilities insufficient" (errno 76) | permission-denied | hint: path outside the granted directories |
    /// | `ReadOnlyFilesystem` | permission-denied | hint: read-only grant or dry run |
    /// | `NotFound` | not-found | hint: also the answer for paths outside every granted directory |
    /// | `AlreadyExists`, `IsADirectory`, `NotADirectory`, `DirectoryNotEmpty`, `InvalidInput`, `InvalidFilename`, `InvalidData`, `TooManyLinks` | invalid-args | |
    /// | `StorageFull`, `QuotaExceeded`, `FileTooLarge`, `OutOfMemory` | quota-exceeded | |
    /// | `TimedOut` | timeout | retriable |
    /// | `Interrupted`, `WouldBlock`, `ResourceBusy`, `ExecutableFileBusy` | unknown | retriable |
    /// | `Unsupported`, `CrossesDevices` | unsupported | |
    /// | anything else | unknown | |
    ///
    /// The message is `"<path>: <OS message>"` without the raw error number
    /// (a WASI errno such as `os error 44` means nothing to a reader: WASI
    /// numbers differ from Linux's); the number stays in the details,
    /// `{"path", "io_kind", "os_error"}`. The hint (what the model should try
    /// next) is set per kind as in the table.
    pub fn from_io(err: &io::Error, path: impl AsRef<Path>) -> ToolError {
        let path = path.as_ref();
        let raw = err.raw_os_error();
        let not_capable = cfg!(target_os = "wasi") && raw == Some(WASI_ENOTCAPABLE);
        let (kind, hint, retriable) = classify_io(err.kind(), not_capable);
        ToolError::new(
            kind,
            format!("{}: {}", path.display(), io_message(err, not_capable)),
        )
        .hint(hint)
        .retriable(retriable)
        .details(serde_json::json!({
            "path": path.display().to_string(),
            "io_kind": format!("{:?}", err.kind()),
            "os_error": raw,
        }))
    }
}

/// The OS message of `err` without its ` (os error N)` suffix.
fn io_message(err: &io::Error, not_capable: bool) -> String {
    if not_capable {
        return "not within the directories granted to this tool (or not allowed by the grant)"
            .into();
    }
    let text = err.to_string();
    match text.rfind(" (os error ") {
        Some(i) if text.ends_with(')') => text[..i].to_string(),
        _ => text,
    }
}

/// WASI's `ENOTCAPABLE`: the path is outside every preopened directory, or
/// the preopen lacks the right (std maps it to `Uncategorized`).
const WASI_ENOTCAPABLE: i32 = 76;

const HINT_OUTSIDE_GRANT: &str = "the path is outside the directories granted to this tool \
     (or the grant does not allow this access); use an absolute path inside a granted directory";

/// Pure mapping behind [`ToolError::from_io`]: (kind, hint, retriable).
fn classify_io(kind: io::ErrorKind, not_capable: bool) -> (ErrorKind, &'static str, bool) {
    use io::ErrorKind as Io;
    if not_capable {
        return (ErrorKind::PermissionDenied, HINT_OUTSIDE_GRANT, false);
    }
    match kind {
        Io::PermissionDenied => (ErrorKind::PermissionDenied, HINT_OUTSIDE_GRANT, false),
        Io::ReadOnlyFilesystem => (
            ErrorKind::PermissionDenied,
            "the directory is granted read-only here (or this is a dry run); writing is not allowed",
            false,
        ),
        // WASI answers ENOENT, not a permission error, for an absolute path that
        // lies outside every granted directory: say so.
        Io::NotFound => (
            ErrorKind::NotFound,
            "no such file or directory; check the path (list the parent directory), and note \
             that paths outside the directories granted to this tool do not exist for it",
            false,
        ),
        Io::AlreadyExists => (
            ErrorKind::InvalidArgs,
            "the path already exists; choose another path",
            false,
        ),
        Io::IsADirectory => (
            ErrorKind::InvalidArgs,
            "the path is a directory; give the path of a file inside it",
            false,
        ),
        Io::NotADirectory => (
            ErrorKind::InvalidArgs,
            "a component of the path is a file, not a directory; check the path",
            false,
        ),
        Io::DirectoryNotEmpty => (ErrorKind::InvalidArgs, "the directory is not empty", false),
        Io::InvalidInput | Io::InvalidFilename => (
            ErrorKind::InvalidArgs,
            "the path or an argument is not valid; check it",
            false,
        ),
        Io::InvalidData => (
            ErrorKind::InvalidArgs,
            "the data is not valid for this operation (for example not UTF-8 text)",
            false,
        ),
        Io::TooManyLinks => (
            ErrorKind::InvalidArgs,
            "the path runs into a symbolic link loop; use the link's target path",
            false,
        ),
        Io::StorageFull | Io::QuotaExceeded | Io::FileTooLarge | Io::OutOfMemory => (
            ErrorKind::QuotaExceeded,
            "a storage or size limit was hit; write or read less",
            false,
        ),
        Io::TimedOut => (
            ErrorKind::Timeout,
            "the operation timed out; retry later",
            true,
        ),
        Io::Interrupted | Io::WouldBlock | Io::ResourceBusy | Io::ExecutableFileBusy => (
            ErrorKind::Unknown,
            "the resource was busy; the same call may succeed if retried",
            true,
        ),
        Io::Unsupported | Io::CrossesDevices => (
            ErrorKind::Unsupported,
            "the sandbox does not support this operation here (for example opening a FIFO, \
             a socket or a device: only regular files and directories can be opened)",
            false,
        ),
        _ => (ErrorKind::Unknown, ErrorKind::Unknown.default_hint(), false),
    }
}

impl fmt::Display for ToolError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.kind, self.message)
    }
}

impl std::error::Error for ToolError {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn constructors_set_kind_and_defaults() {
        type Make = fn(&'static str) -> ToolError;
        let cases: [(Make, ErrorKind); 10] = [
            (|m| ToolError::invalid_args(m), ErrorKind::InvalidArgs),
            (|m| ToolError::not_found(m), ErrorKind::NotFound),
            (
                |m| ToolError::permission_denied(m),
                ErrorKind::PermissionDenied,
            ),
            (|m| ToolError::network(m), ErrorKind::NetworkError),
            (|m| ToolError::external(m), ErrorKind::ExternalError),
            (|m| ToolError::quota_exceeded(m), ErrorKind::QuotaExceeded),
            (|m| ToolError::unsupported(m), ErrorKind::Unsupported),
            (|m| ToolError::timeout(m), ErrorKind::Timeout),
            (|m| ToolError::unrevertible(m), ErrorKind::Unrevertible),
            (|m| ToolError::unknown(m), ErrorKind::Unknown),
        ];
        for (make, kind) in cases {
            let e = make("boom");
            assert_eq!(e.kind, kind);
            assert_eq!(e.message, "boom");
            assert_eq!(e.llm_hint, kind.default_hint());
            assert!(!e.llm_hint.is_empty());
            assert_eq!(e.details, None);
            assert_eq!(e.retriable, kind.retriable_by_default());
        }
        assert!(ToolError::network("x").retriable);
        assert!(ToolError::timeout("x").retriable);
        assert!(!ToolError::not_found("x").retriable);
    }

    #[test]
    fn kinds_serialize_as_snake_case_and_display_as_wit_names() {
        assert_eq!(
            serde_json::to_string(&ErrorKind::PermissionDenied).unwrap_or_default(),
            "\"permission_denied\""
        );
        assert_eq!(ErrorKind::PermissionDenied.to_string(), "permission-denied");
        assert_eq!(ErrorKind::ALL.len(), 10);
    }

    #[test]
    fn host_errors_and_model_text() {
        let e = ToolError::with_hint(ErrorKind::Timeout, "no /a", "list the directory first");
        assert!(!e.retriable, "the host's own errors are not retriable");
        let t = e.to_model_text();
        assert!(t.contains("timeout") && t.contains("no /a") && t.contains("list the directory"));
        // The stored form: details and retriable may be absent.
        let back: ToolError =
            serde_json::from_str(r#"{"kind":"not_found","message":"m","llm_hint":"h"}"#)
                .unwrap_or_else(|_| ToolError::unknown("x"));
        assert_eq!(back.kind, ErrorKind::NotFound);
        assert!(!back.retriable && back.details.is_none());
    }

    #[test]
    fn builders_override() {
        let e = ToolError::network("down")
            .hint("wait")
            .details(serde_json::json!({"a": 1}))
            .retriable(false);
        assert_eq!(e.llm_hint, "wait");
        assert_eq!(e.details.as_deref(), Some(&serde_json::json!({"a": 1})));
        assert!(!e.retriable);
        assert_eq!(e.to_string(), "network-error: down");
    }

    #[test]
    fn kind_names_match_wit() {
        let names: Vec<&str> = [
            ErrorKind::InvalidArgs,
            ErrorKind::NotFound,
            ErrorKind::PermissionDenied,
            ErrorKind::NetworkError,
            ErrorKind::ExternalError,
            ErrorKind::QuotaExceeded,
            ErrorKind::Unsupported,
            ErrorKind::Timeout,
            ErrorKind::Unrevertible,
            ErrorKind::Unknown,
        ]
        .iter()
        .map(|k| k.as_str())
        .collect();
        assert_eq!(
            names,
            [
                "invalid-args",
                "not-found",
                "permission-denied",
                "network-error",
                "external-error",
                "quota-exceeded",
                "unsupported",
                "timeout",
                "unrevertible",
                "unknown"
            ]
        );
    }

    #[test]
    fn io_mapping() {
        use io::ErrorKind as Io;
        let k = |io, nc| classify_io(io, nc).0;
        assert_eq!(k(Io::NotFound, false), ErrorKind::NotFound);
        assert_eq!(k(Io::PermissionDenied, false), ErrorKind::PermissionDenied);
        assert_eq!(k(Io::Other, true), ErrorKind::PermissionDenied);
        assert_eq!(
            k(Io::ReadOnlyFilesystem, false),
            ErrorKind::PermissionDenied
        );
        assert_eq!(k(Io::AlreadyExists, false), ErrorKind::InvalidArgs);
        assert_eq!(k(Io::IsADirectory, false), ErrorKind::InvalidArgs);
        assert_eq!(k(Io::StorageFull, false), ErrorKind::QuotaExceeded);
        assert_eq!(k(Io::TimedOut, false), ErrorKind::Timeout);
        assert_eq!(k(Io::Unsupported, false), ErrorKind::Unsupported);
        assert_eq!(k(Io::Other, false), ErrorKind::Unknown);
        assert!(classify_io(Io::TimedOut, false).2);
        assert!(classify_io(Io::Interrupted, false).2);
        assert!(
            classify_io(Io::PermissionDenied, false)
                .1
                .contains("outside the directories granted")
        );
    }

    #[test]
    fn from_io_names_path_and_details() {
        let err = io::Error::from(io::ErrorKind::NotFound);
        let e = ToolError::from_io(&err, "/w/missing.txt");
        assert_eq!(e.kind, ErrorKind::NotFound);
        assert!(e.message.starts_with("/w/missing.txt: "), "{}", e.message);
        let d = e.details.unwrap_or_default();
        let d = *d;
        assert_eq!(d["path"], "/w/missing.txt");
        assert_eq!(d["io_kind"], "NotFound");
        assert_eq!(d["os_error"], serde_json::Value::Null);

        let denied = io::Error::from_raw_os_error(13); // EACCES on Linux
        let e = ToolError::from_io(&denied, "/etc/shadow");
        assert!(!e.message.contains("os error"), "{}", e.message);
        assert_eq!(e.kind, ErrorKind::PermissionDenied);
        assert_eq!(e.details.unwrap_or_default()["os_error"], 13);
        assert!(
            std::mem::size_of::<ToolError>() <= 64,
            "keep Result<_, ToolError> small"
        );
    }
}
