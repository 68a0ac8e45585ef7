//! A tool's self-description (WIT `tool-meta`), checked before the tool is
//! registered. A component whose meta is malformed is refused at load with a
//! [`MetaError`]; it never reaches the model's catalog.

use crate::capability::{Capability, CapabilityError};
use crate::json::{JsonError, parse_strict};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::fmt;

/// Largest accepted args schema, in bytes.
pub const MAX_SCHEMA_LEN: usize = 256 * 1024;
/// Largest accepted description, in bytes.
pub const MAX_DESCRIPTION_LEN: usize = 4096;

/// How much harm a wrong call can do (WIT `risk`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Risk {
    /// Reads or computes.
    Low,
    /// Changes state that `compensate` can undo.
    Medium,
    /// Hard or impossible to undo.
    High,
}

impl fmt::Display for Risk {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Risk::Low => "low",
            Risk::Medium => "medium",
            Risk::High => "high",
        })
    }
}

/// The meta exactly as the component returned it (strings not yet checked).
#[derive(Debug, Clone, PartialEq)]
pub struct RawToolMeta {
    /// WIT `name`.
    pub name: String,
    /// WIT `description`.
    pub description: String,
    /// WIT `args-schema` (JSON text).
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
    /// WIT `capabilities`.
    pub capabilities: Vec<String>,
    /// WIT `version`.
    pub version: String,
}

/// A checked tool meta.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ToolMeta {
    /// `[a-z][a-z0-9_]{0,63}`.
    pub name: String,
    /// For the model's catalog.
    pub description: String,
    /// The args JSON Schema (an object schema).
    pub args_schema: Value,
    /// Changes anything outside the call.
    pub has_side_effects: bool,
    /// See [`Risk`].
    pub risk: Risk,
    /// Output wrapped in `<untrusted>` markers for the model.
    pub returns_untrusted: bool,
    /// Safe to repeat.
    pub idempotent: bool,
    /// `dry-run` previews without effect.
    pub supports_dry_run: bool,
    /// Parsed required capabilities.
    pub capabilities: Vec<Capability>,
    /// The tool's version string.
    pub version: String,
}

/// Why a tool meta was refused.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum MetaError {
    /// Name not `[a-z][a-z0-9_]{0,63}`.
    #[error("tool name `{0}` must match [a-z][a-z0-9_]{{0,63}}")]
    BadName(String),
    /// Empty or oversized description.
    #[error("tool `{0}`: description must be 1 to {MAX_DESCRIPTION_LEN} bytes")]
    BadDescription(String),
    /// Schema text is not JSON.
    #[error("tool `{tool}`: args schema is not valid JSON: {error}")]
    SchemaJson {
        /// Tool name.
        tool: String,
        /// Parse error.
        error: JsonError,
    },
    /// Schema is JSON but not a usable schema.
    #[error("tool `{tool}`: args schema is not a valid JSON Schema: {error}")]
    SchemaInvalid {
        /// Tool name.
        tool: String,
        /// Why.
        error: String,
    },
    /// A capability string did not parse.
    #[error("tool `{tool}`: {error}")]
    Capability {
        /// Tool name.
        tool: String,
        /// The parse error.
        error: CapabilityError,
    },
    /// Empty or oversized version.
    #[error("tool `{0}`: version must be 1 to 64 printable characters")]
    BadVersion(String),
}

/// Check a name: `[a-z][a-z0-9_]{0,63}`.
pub fn is_valid_tool_name(name: &str) -> bool {
    let mut b = name.bytes();
    matches!(b.next(), Some(c) if c.is_ascii_lowercase())
        && name.len() <= 64
        && b.all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == b'_')
}

impl ToolMeta {
    /// Check a raw meta.
    ///
    /// # Errors
    /// [`MetaError`] for the first problem found.
    pub fn from_raw(raw: RawToolMeta) -> Result<ToolMeta, MetaError> {
        if !is_valid_tool_name(&raw.name) {
            return Err(MetaError::BadName(raw.name.chars().take(80).collect()));
        }
        let tool = raw.name.clone();
        if raw.description.trim().is_empty() || raw.description.len() > MAX_DESCRIPTION_LEN {
            return Err(MetaError::BadDescription(tool));
        }
        if raw.version.is_empty()
            || raw.version.len() > 64
            || raw
                .version
                .chars()
                .any(|c| c.is_control() || c.is_whitespace())
        {
            return Err(MetaError::BadVersion(tool));
        }
        let args_schema = parse_strict(&raw.args_schema, MAX_SCHEMA_LEN).map_err(|error| {
            MetaError::SchemaJson {
                tool: tool.clone(),
                error,
            }
        })?;
        crate::validate::ArgsValidator::new(&tool, &args_schema).map_err(|e| {
            MetaError::SchemaInvalid {
                tool: tool.clone(),
                error: e.to_string(),
            }
        })?;
        let mut capabilities = Vec::with_capacity(raw.capabilities.len());
        for c in &raw.capabilities {
            capabilities.push(Capability::parse(c).map_err(|error| MetaError::Capability {
                tool: tool.clone(),
                error,
            })?);
        }
        capabilities.sort();
        capabilities.dedup();
        Ok(ToolMeta {
            name: raw.name,
            description: raw.description,
            args_schema,
            has_side_effects: raw.has_side_effects,
            risk: raw.risk,
            returns_untrusted: raw.returns_untrusted,
            idempotent: raw.idempotent,
            supports_dry_run: raw.supports_dry_run,
            capabilities,
            version: raw.version,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn raw() -> RawToolMeta {
        RawToolMeta {
            name: "fs_read".into(),
            description: "Reads a file.".into(),
            args_schema:
                r#"{"type":"object","properties":{"path":{"type":"string"}},"required":["path"]}"#
                    .into(),
            has_side_effects: false,
            risk: Risk::Low,
            returns_untrusted: true,
            idempotent: true,
            supports_dry_run: true,
            capabilities: vec!["fs:read:*".into()],
            version: "0.1.0".into(),
        }
    }

    #[test]
    fn good_meta_passes() {
        let m = ToolMeta::from_raw(raw()).unwrap();
        assert_eq!(m.capabilities[0].to_string(), "fs:read:*");
    }

    #[test]
    fn bad_metas_refused() {
        for name in ["", "FsRead", "1abc", "fs-read", "a".repeat(65).as_str()] {
            let mut r = raw();
            r.name = name.into();
            assert!(
                matches!(ToolMeta::from_raw(r), Err(MetaError::BadName(_))),
                "{name}"
            );
        }
        let mut r = raw();
        r.args_schema = "{not json".into();
        assert!(matches!(
            ToolMeta::from_raw(r),
            Err(MetaError::SchemaJson { .. })
        ));
        let mut r = raw();
        r.args_schema = r#"{"type":"object","type":"array"}"#.into();
        assert!(matches!(
            ToolMeta::from_raw(r),
            Err(MetaError::SchemaJson { .. })
        ));
        let mut r = raw();
        r.args_schema = r#"{"type":"no-such-type"}"#.into();
        assert!(matches!(
            ToolMeta::from_raw(r),
            Err(MetaError::SchemaInvalid { .. })
        ));
        let mut r = raw();
        r.capabilities = vec!["fs:read:/x/*.md".into()];
        assert!(matches!(
            ToolMeta::from_raw(r),
            Err(MetaError::Capability { .. })
        ));
        let mut r = raw();
        r.description = " ".into();
        assert!(matches!(
            ToolMeta::from_raw(r),
            Err(MetaError::BadDescription(_))
        ));
    }
}
