//! A tool's self-description (WIT `tool-meta`), checked before the tool is
//! registered. A component whose meta is malformed is refused at load with a
//! [`MetaError`]; it never reaches the model's catalog.

use crate::capability::{Capability, CapabilityError};
use crate::field::{FieldLabels, FieldPathError, Integrity};
use crate::json::{JsonError, parse_strict};
use serde::Serialize;
use serde_json::Value;

/// How much harm a wrong call can do (WIT `risk`), shared with the SDK.
pub use capsaga_types::Risk;
/// The meta exactly as the component returned it (strings not yet checked),
/// shared with the SDK, which builds it.
pub use capsaga_types::ToolMetaRecord as RawToolMeta;
/// Check a name: `[a-z][a-z0-9_]{0,63}` (the rule the SDK checks too).
pub use capsaga_types::is_valid_tool_name;
pub use capsaga_types::meta::{MAX_DESCRIPTION_LEN, MAX_SCHEMA_LEN};
use capsaga_types::meta::{is_valid_description, is_valid_version};
/// A field label of the output as the component returned it (WIT
/// `output-field`), shared with the SDK.
pub use capsaga_types::{FieldIntegrity, OutputField};

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
    /// Labels of fields of the output (the optional WIT export
    /// `output-fields`), checked; empty: the output is labelled whole.
    #[serde(skip_serializing_if = "FieldLabels::is_empty")]
    pub field_labels: FieldLabels,
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
    /// A field label of the output (`output-fields`) is malformed.
    #[error("tool `{tool}`: output field labels: {error}")]
    FieldLabels {
        /// Tool name.
        tool: String,
        /// The first bad path.
        error: FieldPathError,
    },
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
        if !is_valid_description(&raw.description) {
            return Err(MetaError::BadDescription(tool));
        }
        if !is_valid_version(&raw.version) {
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
        let field_labels = FieldLabels::parse(raw.output_fields.iter().map(|f| {
            let integrity = match f.integrity {
                FieldIntegrity::Trusted => Integrity::Trusted,
                FieldIntegrity::Untrusted => Integrity::Untrusted,
            };
            (f.path.as_str(), integrity)
        }))
        .map_err(|error| MetaError::FieldLabels {
            tool: tool.clone(),
            error,
        })?;
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
            field_labels,
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
            output_fields: Vec::new(),
        }
    }

    #[test]
    fn field_labels_are_checked_at_load_and_none_means_whole() {
        use capsaga_types::{FieldIntegrity, OutputField};
        let m = ToolMeta::from_raw(raw()).unwrap();
        assert!(m.field_labels.fields.is_empty());
        let field = |path: &str, integrity| OutputField {
            path: path.into(),
            integrity,
        };
        let mut r = raw();
        r.output_fields = vec![
            field("/events/*/id", FieldIntegrity::Trusted),
            field("/events/*/description", FieldIntegrity::Untrusted),
        ];
        let m = ToolMeta::from_raw(r).unwrap();
        assert_eq!(m.field_labels.fields.len(), 2);
        assert_eq!(
            serde_json::to_value(&m.field_labels).unwrap()[1],
            serde_json::json!({"path": "/events/*/id", "integrity": "trusted"})
        );
        for bad in [
            vec![field("", FieldIntegrity::Trusted)],
            vec![field("/a//b", FieldIntegrity::Trusted)],
            vec![field("/a/~2", FieldIntegrity::Trusted)],
            vec![
                field("id", FieldIntegrity::Trusted),
                field("/id", FieldIntegrity::Untrusted),
            ],
            (0..65)
                .map(|i| field(&format!("/f{i}"), FieldIntegrity::Trusted))
                .collect(),
        ] {
            let mut r = raw();
            r.output_fields = bad;
            assert!(
                matches!(ToolMeta::from_raw(r), Err(MetaError::FieldLabels { .. })),
                "accepted"
            );
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
