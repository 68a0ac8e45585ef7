//! The tool meta record (WIT `tool-meta`) and the rules the host enforces on
//! it at load, shared with the SDK so that a tool author's `check` and the
//! host's agree.

use serde::{Deserialize, Serialize};
use std::fmt;

/// Largest accepted args schema (JSON text), bytes.
pub const MAX_SCHEMA_LEN: usize = 256 * 1024;
/// Largest accepted description, bytes.
pub const MAX_DESCRIPTION_LEN: usize = 4096;
/// Largest accepted version string, bytes.
pub const MAX_VERSION_LEN: usize = 64;
/// Longest tool name, bytes.
pub const MAX_NAME_LEN: usize = 64;

/// How much harm a wrong call can do (WIT `risk`). The operator's policy uses
/// it to choose between allow, deny and asking a human; `High` always asks.
#[derive(
    Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize,
)]
#[serde(rename_all = "snake_case")]
pub enum Risk {
    /// Reads or computes; nothing outside the call changes.
    #[default]
    Low,
    /// Changes state that the tool can undo with `compensate`.
    Medium,
    /// Changes state that is hard or impossible to undo (payments, e-mail).
    High,
}

impl Risk {
    /// The WIT name: `low`, `medium` or `high`.
    pub fn as_str(self) -> &'static str {
        match self {
            Risk::Low => "low",
            Risk::Medium => "medium",
            Risk::High => "high",
        }
    }
}

impl fmt::Display for Risk {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The meta exactly as a component returns it from `meta` (WIT `tool-meta`),
/// strings not yet checked. The host checks it into its own `ToolMeta`
/// (`capsaga_core::meta`); the SDK builds it from a tool's `Meta`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ToolMetaRecord {
    /// WIT `name`: `[a-z][a-z0-9_]{0,63}` ([`is_valid_tool_name`]).
    pub name: String,
    /// WIT `description`: 1 to [`MAX_DESCRIPTION_LEN`] bytes, for the model.
    pub description: String,
    /// WIT `args-schema`: JSON Schema of the arguments, as JSON text.
    pub args_schema: String,
    /// WIT `has-side-effects`.
    pub has_side_effects: bool,
    /// WIT `risk`.
    pub risk: Risk,
    /// WIT `returns-untrusted`.
    pub returns_untrusted: bool,
    /// WIT `idempotent`.
    pub idempotent: bool,
    /// WIT `supports-dry-run`.
    pub supports_dry_run: bool,
    /// WIT `capabilities`: capability strings the tool requires.
    pub capabilities: Vec<String>,
    /// WIT `version`: 1 to [`MAX_VERSION_LEN`] printable characters.
    pub version: String,
    /// Labels of fields of the output: the optional WIT export
    /// `output-fields` of the `labelled-tool` world (empty when the
    /// component does not have it: the output is labelled whole, as
    /// `returns_untrusted` says).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub output_fields: Vec<OutputField>,
}

/// Integrity of a field of a tool's output (WIT `field-integrity`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FieldIntegrity {
    /// Assigned or computed by the system the tool talks to (an id, a size).
    Trusted,
    /// Someone else may have written it (a title, a description).
    Untrusted,
}

impl FieldIntegrity {
    /// The WIT name: `trusted` or `untrusted`.
    pub fn as_str(self) -> &'static str {
        match self {
            FieldIntegrity::Trusted => "trusted",
            FieldIntegrity::Untrusted => "untrusted",
        }
    }
}

/// A label on fields of a tool's JSON output (WIT `output-field`): `path` is
/// an RFC 6901 JSON Pointer whose segment `*` stands for any array index or
/// object key (`/events/*/id`), or a bare top-level name (`id`). The host
/// checks the paths at load (`capsaga_core::field::FieldLabels`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct OutputField {
    /// The fields' path.
    pub path: String,
    /// Their integrity.
    pub integrity: FieldIntegrity,
}

/// Whether `name` is a valid tool name: `[a-z][a-z0-9_]*`, 1 to
/// [`MAX_NAME_LEN`] characters.
pub fn is_valid_tool_name(name: &str) -> bool {
    let bytes = name.as_bytes();
    !bytes.is_empty()
        && bytes.len() <= MAX_NAME_LEN
        && bytes[0].is_ascii_lowercase()
        && bytes
            .iter()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || *b == b'_')
}

/// Whether `description` is acceptable: not blank, at most
/// [`MAX_DESCRIPTION_LEN`] bytes.
pub fn is_valid_description(description: &str) -> bool {
    !description.trim().is_empty() && description.len() <= MAX_DESCRIPTION_LEN
}

/// Whether `version` is acceptable to the host: 1 to [`MAX_VERSION_LEN`]
/// bytes, no whitespace or control characters. (The SDK asks more of its
/// authors: `MAJOR.MINOR.PATCH`.)
pub fn is_valid_version(version: &str) -> bool {
    !version.is_empty()
        && version.len() <= MAX_VERSION_LEN
        && !version.chars().any(|c| c.is_control() || c.is_whitespace())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn name_grammar() {
        for ok in ["a", "fs_read", "x9_", &"a".repeat(64)] {
            assert!(is_valid_tool_name(ok), "{ok}");
        }
        for bad in [
            "",
            "Fs",
            "FsRead",
            "9a",
            "1abc",
            "_a",
            "fs-read",
            "fs read",
            "é",
            &"a".repeat(65),
        ] {
            assert!(!is_valid_tool_name(bad), "{bad}");
        }
    }

    #[test]
    fn description_and_version() {
        assert!(is_valid_description("Reads a file."));
        assert!(!is_valid_description(" "));
        assert!(!is_valid_description(&"x".repeat(MAX_DESCRIPTION_LEN + 1)));
        assert!(is_valid_version("0.1.0"));
        assert!(!is_valid_version(""));
        assert!(!is_valid_version("1 0"));
        assert!(!is_valid_version(&"1".repeat(65)));
    }

    #[test]
    fn risk_names_match_wit_and_serde() {
        assert_eq!(Risk::Low.to_string(), "low");
        assert_eq!(Risk::Medium.as_str(), "medium");
        assert_eq!(
            serde_json::to_string(&Risk::High).unwrap_or_default(),
            "\"high\""
        );
        assert!(Risk::Low < Risk::High);
    }
}
