//! Field labels of a tool's JSON output (issue 47): which fields of its
//! output a tool says are trusted (a system assigned them) or untrusted
//! (someone else wrote them), named by [`FieldPath`]s. Only the paths and
//! their checks live here (the tool's meta holds them, `crate::meta`);
//! what the host makes of them is `capsaga_flow::label`.
//!
//! A field is named by a [`FieldPath`]: a JSON Pointer (RFC 6901: `/a/b`,
//! `~0` for `~`, `~1` for `/`) whose segment `*` stands for any array index
//! or object key; a bare name (`id`) is the top-level field `/id`. At most
//! 16 segments, 256 bytes, 64 paths per tool ([`FieldLabels::parse`]
//! refuses anything else with a [`FieldPathError`]).

use serde::{Deserialize, Serialize};
use std::fmt;

/// Whether a source's values may flow into a sink that needs trusted
/// values.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Integrity {
    /// The user, the operator, or an operator's endorsement.
    Trusted,
    /// Anything someone else may have written.
    Untrusted,
}

/// Most segments of a field path.
pub const MAX_SEGMENTS: usize = 16;
/// Longest field path, bytes.
pub const MAX_PATH_BYTES: usize = 256;
/// Most labelled fields per tool.
pub const MAX_FIELDS: usize = 64;
/// Longest string a trusted field vouches for, characters.
pub const MAX_TRUSTED_CHARS: usize = 128;

/// Whether a string can be vouched for by a trusted field: one token of 1
/// to [`MAX_TRUSTED_CHARS`] characters (surrounding whitespace aside), no
/// whitespace or control character inside: an id, a number, a word. Prose
/// in a field labelled trusted stays untrusted (a sentence is someone's
/// writing, not a value a system assigned).
pub fn is_token(s: &str) -> bool {
    let t = s.trim();
    !t.is_empty()
        && t.chars().count() <= MAX_TRUSTED_CHARS
        && !t.chars().any(|c| c.is_whitespace() || c.is_control())
}

/// Why a field path or a set of field labels was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FieldPathError {
    /// The empty string (the whole output is labelled by the tool's meta).
    #[error("an empty field path: label the whole output with returns-untrusted instead")]
    Empty,
    /// Over [`MAX_PATH_BYTES`] or [`MAX_SEGMENTS`].
    #[error(
        "field path `{0}` is too long (at most {MAX_SEGMENTS} segments, {MAX_PATH_BYTES} bytes)"
    )]
    TooLong(String),
    /// A `~` not followed by `0` or `1`.
    #[error("field path `{0}`: `~` must be followed by 0 or 1 (RFC 6901)")]
    BadEscape(String),
    /// An empty segment (`/a//b`) or a control character.
    #[error("field path `{0}`: empty segment or control character")]
    BadSegment(String),
    /// A bare name that is not `[A-Za-z0-9_-]+`.
    #[error("field path `{0}` is neither a JSON Pointer (/a/b) nor a bare field name")]
    NotAPath(String),
    /// The same path twice.
    #[error("field path `{0}` is labelled twice")]
    Duplicate(String),
    /// More than [`MAX_FIELDS`] paths.
    #[error("at most {MAX_FIELDS} labelled fields")]
    TooMany,
}

/// One segment of a [`FieldPath`].
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Segment {
    /// An object key or an array index (as written).
    Key(String),
    /// `*`: any key or index.
    Any,
}

/// A field of a JSON document: a JSON Pointer with `*` segments (see the
/// module documentation).
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct FieldPath {
    segments: Vec<Segment>,
}

impl FieldPath {
    /// Parse `/a/*/b` or a bare name `b`.
    ///
    /// # Errors
    /// [`FieldPathError`] saying what is wrong.
    pub fn parse(s: &str) -> Result<FieldPath, FieldPathError> {
        let shown = || s.chars().take(80).collect::<String>();
        if s.is_empty() {
            return Err(FieldPathError::Empty);
        }
        if s.len() > MAX_PATH_BYTES {
            return Err(FieldPathError::TooLong(shown()));
        }
        if s.chars().any(char::is_control) {
            return Err(FieldPathError::BadSegment(shown()));
        }
        let Some(rest) = s.strip_prefix('/') else {
            if s == "*" {
                return Ok(FieldPath {
                    segments: vec![Segment::Any],
                });
            }
            if !s
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-'))
            {
                return Err(FieldPathError::NotAPath(shown()));
            }
            return Ok(FieldPath {
                segments: vec![Segment::Key(s.to_string())],
            });
        };
        let mut segments = Vec::new();
        for raw in rest.split('/') {
            if raw.is_empty() {
                return Err(FieldPathError::BadSegment(shown()));
            }
            if raw == "*" {
                segments.push(Segment::Any);
                continue;
            }
            let mut seg = String::with_capacity(raw.len());
            let mut it = raw.chars();
            while let Some(c) = it.next() {
                if c == '~' {
                    match it.next() {
                        Some('0') => seg.push('~'),
                        Some('1') => seg.push('/'),
                        _ => return Err(FieldPathError::BadEscape(shown())),
                    }
                } else {
                    seg.push(c);
                }
            }
            segments.push(Segment::Key(seg));
        }
        if segments.len() > MAX_SEGMENTS {
            return Err(FieldPathError::TooLong(shown()));
        }
        Ok(FieldPath { segments })
    }

    /// `*`: every field.
    pub fn everything() -> FieldPath {
        FieldPath {
            segments: vec![Segment::Any],
        }
    }

    /// The segments.
    pub fn segments(&self) -> &[Segment] {
        &self.segments
    }

    /// Whether the path matches the field at `at` exactly.
    pub fn matches(&self, at: &[String]) -> bool {
        self.segments.len() == at.len() && self.is_prefix_of(at)
    }

    /// Whether the path matches `at` or an ancestor of it.
    pub fn is_prefix_of(&self, at: &[String]) -> bool {
        self.segments.len() <= at.len()
            && self.segments.iter().zip(at).all(|(s, a)| match s {
                Segment::Any => true,
                Segment::Key(k) => k == a,
            })
    }
}

impl fmt::Display for FieldPath {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for s in &self.segments {
            match s {
                Segment::Any => f.write_str("/*")?,
                Segment::Key(k) => write!(f, "/{}", k.replace('~', "~0").replace('/', "~1"))?,
            }
        }
        Ok(())
    }
}

/// A JSON Pointer to the field at `at` (for reports).
pub fn pointer(at: &[String]) -> String {
    at.iter()
        .map(|k| format!("/{}", k.replace('~', "~0").replace('/', "~1")))
        .collect()
}

/// A tool's declared field labels (its meta), checked.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct FieldLabels {
    /// Each labelled path and its integrity, sorted by path.
    pub fields: Vec<(FieldPath, Integrity)>,
}

impl FieldLabels {
    /// No field labelled.
    pub fn is_empty(&self) -> bool {
        self.fields.is_empty()
    }

    /// Check a tool's declaration (path → `trusted`/`untrusted`).
    ///
    /// # Errors
    /// The first bad path, a duplicate (after parsing: `id` and `/id` are
    /// one path), or more than [`MAX_FIELDS`] paths.
    pub fn parse<'a>(
        decl: impl IntoIterator<Item = (&'a str, Integrity)>,
    ) -> Result<FieldLabels, FieldPathError> {
        let mut fields: Vec<(FieldPath, Integrity)> = Vec::new();
        for (p, i) in decl {
            if fields.len() == MAX_FIELDS {
                return Err(FieldPathError::TooMany);
            }
            let path = FieldPath::parse(p)?;
            if fields.iter().any(|(q, _)| *q == path) {
                return Err(FieldPathError::Duplicate(path.to_string()));
            }
            fields.push((path, i));
        }
        fields.sort();
        Ok(FieldLabels { fields })
    }
}

/// Shown as the tool declared it (`capsaga tools --json`, the console):
/// `[{"path": "/events/*/id", "integrity": "trusted"}]`.
impl Serialize for FieldLabels {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeSeq;
        #[derive(Serialize)]
        struct Field {
            path: String,
            integrity: Integrity,
        }
        let mut seq = s.serialize_seq(Some(self.fields.len()))?;
        for (path, integrity) in &self.fields {
            seq.serialize_element(&Field {
                path: path.to_string(),
                integrity: *integrity,
            })?;
        }
        seq.end()
    }
}

/// Parse a list of field paths (the operator's `trusted_fields`).
///
/// # Errors
/// As [`FieldLabels::parse`].
pub fn parse_paths(list: &[String]) -> Result<Vec<FieldPath>, FieldPathError> {
    FieldLabels::parse(list.iter().map(|p| (p.as_str(), Integrity::Trusted)))
        .map(|l| l.fields.into_iter().map(|(p, _)| p).collect())
}
