//! The error record of the tool world (`capsaga:tool/types.tool-error`), used
//! both for errors a tool returns and for errors the host produces on a tool's
//! behalf (sandbox traps, limits, denied grants).

use serde::{Deserialize, Serialize};
use std::fmt;

/// Classes of failure, mirroring the WIT enum `error-kind` one to one. The
/// model and the saga engine act on the kind: `invalid-args` asks the model to
/// fix its call, a `retriable` error may be retried, `unrevertible` stops a
/// rollback and calls the operator.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ErrorKind {
    /// The arguments are wrong; the model should fix them.
    InvalidArgs,
    /// A named file or resource does not exist.
    NotFound,
    /// The sandbox, the policy or a remote service refused access.
    PermissionDenied,
    /// Transport failure: DNS, connection, a remote's 5xx.
    NetworkError,
    /// A remote service answered with an error.
    ExternalError,
    /// A quota or size limit was exceeded (memory, output, fuel).
    QuotaExceeded,
    /// Valid arguments, but a combination the tool does not support.
    Unsupported,
    /// The call ran out of time.
    Timeout,
    /// `compensate` cannot undo the effect.
    Unrevertible,
    /// Anything else, including a guest trap.
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

    /// The kind's name as written in WIT and in logs, e.g. `permission-denied`.
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
}

impl fmt::Display for ErrorKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A failure written for two readers: the operator (`message`) and the model
/// (`llm_hint`: what to try next). Mirrors WIT `tool-error`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, thiserror::Error)]
#[error("{kind}: {message}")]
pub struct ToolError {
    /// The class of failure.
    pub kind: ErrorKind,
    /// Short description for the human operator.
    pub message: String,
    /// What the model should try next.
    pub llm_hint: String,
    /// Optional structured details (boxed: most errors have none, and the
    /// error travels in `Result`s).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub details: Option<Box<serde_json::Value>>,
    /// True when the same call may succeed if retried unchanged.
    #[serde(default)]
    pub retriable: bool,
}

impl ToolError {
    /// A non-retriable error of `kind` with a message and a hint for the model.
    pub fn new(kind: ErrorKind, message: impl Into<String>, llm_hint: impl Into<String>) -> Self {
        ToolError {
            kind,
            message: message.into(),
            llm_hint: llm_hint.into(),
            details: None,
            retriable: false,
        }
    }

    /// Attach structured details.
    pub fn with_details(mut self, details: serde_json::Value) -> Self {
        self.details = Some(Box::new(details));
        self
    }

    /// Mark the error retriable (or not).
    pub fn retriable(mut self, retriable: bool) -> Self {
        self.retriable = retriable;
        self
    }

    /// Render the error as the text the model sees: kind, message and hint.
    pub fn to_model_text(&self) -> String {
        format!(
            "tool error ({}): {}\nhint: {}",
            self.kind, self.message, self.llm_hint
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kinds_serialize_as_snake_case_and_display_as_wit_names() {
        assert_eq!(
            serde_json::to_string(&ErrorKind::PermissionDenied).unwrap(),
            "\"permission_denied\""
        );
        assert_eq!(ErrorKind::PermissionDenied.to_string(), "permission-denied");
        assert_eq!(ErrorKind::ALL.len(), 10);
    }

    #[test]
    fn model_text_has_kind_message_and_hint() {
        let e = ToolError::new(ErrorKind::NotFound, "no /a", "list the directory first");
        let t = e.to_model_text();
        assert!(t.contains("not-found") && t.contains("no /a") && t.contains("list the directory"));
    }
}
