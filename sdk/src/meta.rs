//! [`Meta`]: what a tool says about itself (WIT `tool-meta`).

use capsaga_types::meta::{MAX_DESCRIPTION_LEN, is_valid_tool_name};
use capsaga_types::{FieldIntegrity, OutputField, Risk, ToolMetaRecord};
use std::fmt;

/// What a tool says about itself, built with [`Meta::new`] and the chained
/// setters, returned by [`Tool::meta`](crate::Tool::meta).
///
/// Two fields are filled by the SDK, never by hand:
/// [`Meta::args_schema`] is derived from `Tool::Args` with schemars (JSON
/// Schema draft 2020-12), and [`Meta::version`] defaults to the tool crate's
/// `CARGO_PKG_VERSION` (passed in by [`export_tool!`](crate::export_tool)).
/// [`crate::describe`] shows the finished value, e.g. in a unit test.
///
/// Defaults: no side effects, [`Risk::Low`], output trusted, not idempotent,
/// no dry-run support, no capabilities.
///
/// The fields are public to read; the type is `#[non_exhaustive]`, so build
/// it with [`Meta::new`].
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub struct Meta {
    /// Identifier used by the model and the operator: `[a-z][a-z0-9_]*`,
    /// 1 to 64 characters (checked by [`Meta::check`]).
    pub name: String,
    /// One or two sentences for the model's tool catalog.
    pub description: String,
    /// JSON Schema (draft 2020-12) of the arguments. `None` until
    /// [`crate::describe`] derives it from `Tool::Args`.
    pub args_schema: Option<serde_json::Value>,
    /// True when `execute` changes anything outside the call.
    pub has_side_effects: bool,
    /// See [`Risk`].
    pub risk: Risk,
    /// True when the output carries content from outside the operator's
    /// trust (files, web pages); the host wraps it in `<untrusted>` markers.
    pub returns_untrusted: bool,
    /// True when running `execute` twice with the same arguments has the same
    /// effect as running it once.
    pub idempotent: bool,
    /// True when `dry-run` describes the effect without causing it.
    pub supports_dry_run: bool,
    /// Capability strings the tool needs, e.g. `fs:write:*`.
    pub capabilities: Vec<String>,
    /// Semantic version, e.g. `1.2.0`. `None` means "the tool crate's
    /// `CARGO_PKG_VERSION`", filled in by [`crate::describe`].
    pub version: Option<String>,
    /// Labels of fields of the output ([`Meta::trusted_field`],
    /// [`Meta::untrusted_field`]); empty: the output is labelled whole, as
    /// [`Meta::returns_untrusted`] says.
    pub output_fields: Vec<OutputField>,
}

/// A [`Meta`] that the host would refuse; returned by [`Meta::check`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MetaError {
    /// The offending field, e.g. `name`.
    pub field: &'static str,
    /// What is wrong with it.
    pub problem: String,
}

impl fmt::Display for MetaError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "invalid tool meta: {}: {}", self.field, self.problem)
    }
}

impl std::error::Error for MetaError {}

impl Meta {
    /// Starts a description with the tool's `name` (lowercase_snake) and a
    /// one- or two-sentence `description` for the model.
    pub fn new(name: impl Into<String>, description: impl Into<String>) -> Meta {
        Meta {
            name: name.into(),
            description: description.into(),
            args_schema: None,
            has_side_effects: false,
            risk: Risk::Low,
            returns_untrusted: false,
            idempotent: false,
            supports_dry_run: false,
            capabilities: Vec::new(),
            version: None,
            output_fields: Vec::new(),
        }
    }

    /// Declares whether `execute` changes anything outside the call (default
    /// false). Side-effecting calls run as compensable saga steps.
    #[must_use]
    pub fn side_effects(mut self, yes: bool) -> Meta {
        self.has_side_effects = yes;
        self
    }

    /// Sets the [`Risk`] (default [`Risk::Low`]).
    #[must_use]
    pub fn risk(mut self, risk: Risk) -> Meta {
        self.risk = risk;
        self
    }

    /// Declares that the output carries untrusted content (default false).
    #[must_use]
    pub fn returns_untrusted(mut self, yes: bool) -> Meta {
        self.returns_untrusted = yes;
        self
    }

    /// Declares that repeating `execute` with the same arguments is harmless
    /// (default false).
    #[must_use]
    pub fn idempotent(mut self, yes: bool) -> Meta {
        self.idempotent = yes;
        self
    }

    /// Declares that [`Tool::dry_run`](crate::Tool::dry_run) is implemented
    /// and has no side effects (default false).
    #[must_use]
    pub fn dry_run(mut self, yes: bool) -> Meta {
        self.supports_dry_run = yes;
        self
    }

    /// Adds one required capability string, e.g. `fs:read:*`.
    #[must_use]
    pub fn capability(mut self, capability: impl Into<String>) -> Meta {
        self.capabilities.push(capability.into());
        self
    }

    /// Adds several required capability strings.
    #[must_use]
    pub fn capabilities<I, S>(mut self, capabilities: I) -> Meta
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        self.capabilities
            .extend(capabilities.into_iter().map(Into::into));
        self
    }

    /// Labels a field of the output trusted: a value the system the tool
    /// talks to assigned or computed (an event id, a file id, a size), that
    /// nobody outside the operator's trust chose. `path` is a JSON Pointer
    /// (RFC 6901) into the output's JSON, with `*` for any array index or
    /// key: `/events/*/id`; a bare name (`id`) is the top-level field `/id`.
    ///
    /// In an output the host holds untrusted (the tool declares
    /// [`Meta::returns_untrusted`], or it reaches files or the network), the
    /// label counts only when the operator confirms the same path in the
    /// policy (`[tools.<name>] trusted_fields = ["/events/*/id"]`), and only
    /// for a number or a string of at most 128 characters there, as a whole
    /// value: an id the agent copies from that field into a side-effecting
    /// call is then not asked about. See `docs/writing-a-tool.md`.
    #[must_use]
    pub fn trusted_field(self, path: impl Into<String>) -> Meta {
        self.field(path.into(), FieldIntegrity::Trusted)
    }

    /// Labels a field of the output (and everything under it) untrusted:
    /// text someone else may have written (a title, a description, a
    /// sender's address), even in an output that is otherwise trusted.
    /// Paths as for [`Meta::trusted_field`].
    #[must_use]
    pub fn untrusted_field(self, path: impl Into<String>) -> Meta {
        self.field(path.into(), FieldIntegrity::Untrusted)
    }

    fn field(mut self, path: String, integrity: FieldIntegrity) -> Meta {
        self.output_fields.push(OutputField { path, integrity });
        self
    }

    /// Overrides the version (default: the tool crate's `CARGO_PKG_VERSION`).
    #[must_use]
    pub fn version(mut self, version: impl Into<String>) -> Meta {
        self.version = Some(version.into());
        self
    }

    /// Checks the rules of the WIT contract (`wit/tool.wit`), which the host
    /// enforces at load: the name grammar, a non-empty description, a `MAJOR.MINOR.PATCH[-pre][+build]` version (when set),
    /// capability strings without whitespace, and that a tool with side
    /// effects does not claim [`Risk::Low`].
    ///
    /// # Errors
    /// The first problem found, as a [`MetaError`].
    pub fn check(&self) -> Result<(), MetaError> {
        let err = |field, problem: String| Err(MetaError { field, problem });
        if !is_valid_tool_name(&self.name) {
            return err(
                "name",
                format!(
                    "{:?} must match [a-z][a-z0-9_]* and be 1 to 64 characters",
                    self.name
                ),
            );
        }
        if self.description.trim().is_empty() {
            return err("description", "must not be empty".to_owned());
        }
        if self.description.len() > MAX_DESCRIPTION_LEN {
            return err(
                "description",
                format!("is longer than {MAX_DESCRIPTION_LEN} bytes"),
            );
        }
        if let Some(version) = &self.version
            && !is_semver(version)
        {
            return err(
                "version",
                format!("{version:?} is not MAJOR.MINOR.PATCH[-pre][+build]"),
            );
        }
        for cap in &self.capabilities {
            if cap.is_empty() || cap.chars().any(char::is_whitespace) {
                return err(
                    "capabilities",
                    format!("{cap:?} is empty or contains whitespace"),
                );
            }
        }
        if self.output_fields.len() > MAX_OUTPUT_FIELDS {
            return err(
                "output_fields",
                format!("at most {MAX_OUTPUT_FIELDS} labelled fields"),
            );
        }
        for (i, f) in self.output_fields.iter().enumerate() {
            if let Some(problem) = field_path_problem(&f.path) {
                return err("output_fields", format!("{:?}: {problem}", f.path));
            }
            if self.output_fields[..i]
                .iter()
                .any(|g| same_path(&g.path, &f.path))
            {
                return err("output_fields", format!("{:?} is labelled twice", f.path));
            }
        }
        if self.has_side_effects && self.risk == Risk::Low {
            return err(
                "risk",
                "a tool with side effects must declare Risk::Medium or Risk::High".to_owned(),
            );
        }
        Ok(())
    }
}

impl Meta {
    /// The record the component's `meta` export returns (WIT `tool-meta`,
    /// shared with the host as [`ToolMetaRecord`]): the schema as JSON text
    /// (`{}` when not derived yet), the version defaulted to
    /// `default_version`.
    pub fn into_record(self, default_version: &str) -> ToolMetaRecord {
        ToolMetaRecord {
            args_schema: self
                .args_schema
                .map_or_else(|| "{}".to_owned(), |s| s.to_string()),
            version: self.version.unwrap_or_else(|| default_version.to_owned()),
            name: self.name,
            description: self.description,
            has_side_effects: self.has_side_effects,
            risk: self.risk,
            returns_untrusted: self.returns_untrusted,
            idempotent: self.idempotent,
            supports_dry_run: self.supports_dry_run,
            capabilities: self.capabilities,
            output_fields: self.output_fields,
        }
    }
}

/// Most labelled output fields (the host's limit).
const MAX_OUTPUT_FIELDS: usize = 64;

/// What is wrong with a field path, as the host would say it at load
/// (`capsaga_core::field::FieldPath::parse`): `None` when it is fine.
fn field_path_problem(path: &str) -> Option<&'static str> {
    if path.is_empty() {
        return Some("empty (label the whole output with returns_untrusted)");
    }
    if path.len() > 256 || path.split('/').count() > 17 {
        return Some("longer than 16 segments or 256 bytes");
    }
    if path.chars().any(char::is_control) {
        return Some("a control character");
    }
    let Some(rest) = path.strip_prefix('/') else {
        let bare = path == "*"
            || path
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-'));
        return (!bare).then_some("neither a JSON Pointer (/a/b) nor a bare field name");
    };
    for seg in rest.split('/') {
        if seg.is_empty() {
            return Some("an empty segment");
        }
        let mut it = seg.chars();
        while let Some(c) = it.next() {
            if c == '~' && !matches!(it.next(), Some('0' | '1')) {
                return Some("`~` must be followed by 0 or 1 (RFC 6901)");
            }
        }
    }
    None
}

/// Whether two paths name the same fields (`id` is `/id`).
fn same_path(a: &str, b: &str) -> bool {
    let norm = |p: &str| {
        if p.starts_with('/') {
            p.to_owned()
        } else {
            format!("/{p}")
        }
    };
    norm(a) == norm(b)
}

/// `MAJOR.MINOR.PATCH` with optional `-pre` and `+build` suffixes.
fn is_semver(version: &str) -> bool {
    let core = version
        .split_once('+')
        .map_or(version, |(core, _build)| core);
    let core = core.split_once('-').map_or(core, |(core, _pre)| core);
    let parts: Vec<&str> = core.split('.').collect();
    parts.len() == 3
        && parts
            .iter()
            .all(|p| !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn builder_sets_every_field() {
        let m = Meta::new("fs_write", "Writes a file.")
            .side_effects(true)
            .risk(Risk::Medium)
            .returns_untrusted(true)
            .idempotent(true)
            .dry_run(true)
            .capability("fs:write:*")
            .capabilities(["net:https:*"])
            .version("1.2.3");
        assert_eq!(m.name, "fs_write");
        assert!(m.has_side_effects && m.returns_untrusted && m.idempotent && m.supports_dry_run);
        assert_eq!(m.risk, Risk::Medium);
        assert_eq!(m.capabilities, ["fs:write:*", "net:https:*"]);
        assert_eq!(m.version.as_deref(), Some("1.2.3"));
        assert_eq!(m.check(), Ok(()));
    }

    #[test]
    fn field_labels_are_declared_and_checked() {
        let m = Meta::new("calendar_search", "Searches the calendar.")
            .returns_untrusted(true)
            .trusted_field("/events/*/id")
            .untrusted_field("/events/*/description");
        assert_eq!(m.check(), Ok(()));
        let r = m.clone().into_record("0.1.0");
        assert_eq!(r.output_fields.len(), 2);
        assert_eq!(r.output_fields[0].path, "/events/*/id");
        assert_eq!(r.output_fields[0].integrity, FieldIntegrity::Trusted);
        for bad in [
            "",
            "/a//b",
            "/a/~2",
            "a b",
            &format!("/{}", "x".repeat(300)),
        ] {
            let e = m.clone().trusted_field(bad).check().unwrap_err();
            assert_eq!(e.field, "output_fields", "{bad}");
        }
        let e = m.clone().trusted_field("/events/*/id").check().unwrap_err();
        assert!(e.problem.contains("twice"), "{e}");
        let e = Meta::new("a", "b")
            .trusted_field("id")
            .untrusted_field("/id")
            .check()
            .unwrap_err();
        assert!(e.problem.contains("twice"), "{e}");
    }

    #[test]
    fn defaults_are_conservative() {
        let m = Meta::new("time_now", "Tells the time.");
        assert!(!m.has_side_effects && !m.idempotent && !m.supports_dry_run);
        assert_eq!(m.risk, Risk::Low);
        assert!(m.capabilities.is_empty() && m.version.is_none() && m.args_schema.is_none());
    }

    #[test]
    fn check_reports_the_field() {
        let e = Meta::new("Bad", "d").check().err();
        assert_eq!(e.map(|e| e.field), Some("name"));
        let e = Meta::new("ok", " ").check().err();
        assert_eq!(e.map(|e| e.field), Some("description"));
        let e = Meta::new("ok", "d").version("1.2").check().err();
        assert_eq!(e.map(|e| e.field), Some("version"));
        let e = Meta::new("ok", "d").capability("fs:read: x").check().err();
        assert_eq!(e.map(|e| e.field), Some("capabilities"));
        let e = Meta::new("ok", "d").side_effects(true).check().err();
        assert_eq!(e.map(|e| e.field), Some("risk"));
    }

    #[test]
    fn semver_forms() {
        for ok in ["0.1.0", "1.2.3-alpha.1", "1.2.3+b5", "10.20.30-rc1+x"] {
            assert!(is_semver(ok), "{ok}");
        }
        for bad in ["1", "1.2", "1.2.x", "1..3", "v1.2.3", ""] {
            assert!(!is_semver(bad), "{bad}");
        }
    }
}
