//! A submission of `neuron_create`: its arguments, their checks, the
//! examples and how an example's result is judged.

use super::NeuronsPolicy;
use super::name::{self, NameError};
use crate::capability::Capability;
use crate::error::ErrorKind;
use crate::grant::intersect;
use crate::meta::{RawToolMeta, Risk, ToolMeta};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::collections::BTreeMap;

/// The JSON Schema of `neuron_create`'s arguments.
pub const ARGS_SCHEMA: &str = r#"{
  "type": "object",
  "additionalProperties": false,
  "required": ["name", "description", "args_schema", "source", "examples"],
  "properties": {
    "name": {"type": "string", "description": "lower_snake_case, not the name of an existing tool", "maxLength": 64},
    "description": {"type": "string", "description": "what the tool does, for the catalog", "maxLength": 2000},
    "args_schema": {"type": "object", "description": "JSON Schema of the tool's arguments (an object schema)"},
    "capabilities": {"type": "array", "items": {"type": "string"}, "maxItems": 16, "description": "capabilities requested, e.g. fs:read:/data/**; the operator decides"},
    "risk": {"enum": ["low", "medium", "high"]},
    "has_side_effects": {"type": "boolean"},
    "idempotent": {"type": "boolean"},
    "supports_dry_run": {"type": "boolean"},
    "returns_untrusted": {"type": "boolean"},
    "source": {"type": "string", "description": "Python: def execute(args) returning a JSON value; raise capsaga.ToolError(kind, message, llm_hint) on failure"},
    "examples": {"type": "array", "minItems": 1, "maxItems": 64, "items": {
      "type": "object", "additionalProperties": false, "required": ["args"],
      "properties": {
        "args": {"type": "object"},
        "expect": {"description": "the expected output data (JSON)"},
        "expect_error": {"type": "string", "description": "the expected error kind, e.g. invalid-args"},
        "files": {"type": "object", "additionalProperties": {"type": "string"}, "description": "files written to a scratch directory first; $SCRATCH in args names it"}
      }
    }}
  }
}"#;

/// Placeholder in an example's arguments for its scratch directory.
pub const SCRATCH_VAR: &str = "$SCRATCH";

/// The arguments of one `neuron_create` call.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Proposal {
    /// The neuron's name.
    pub name: String,
    /// For the catalog.
    pub description: String,
    /// Its arguments' JSON Schema.
    pub args_schema: Value,
    /// Capability strings requested.
    #[serde(default)]
    pub capabilities: Vec<String>,
    /// Risk (default low).
    #[serde(default)]
    pub risk: Risk,
    /// Default false.
    #[serde(default)]
    pub has_side_effects: bool,
    /// Default true.
    #[serde(default = "yes")]
    pub idempotent: bool,
    /// Default false.
    #[serde(default)]
    pub supports_dry_run: bool,
    /// Default false.
    #[serde(default)]
    pub returns_untrusted: bool,
    /// Python source.
    pub source: String,
    /// At least one.
    pub examples: Vec<Example>,
}

fn yes() -> bool {
    true
}

/// One example: arguments and what should come out.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Example {
    /// Arguments (validated against the neuron's schema first).
    pub args: Value,
    /// The expected output data; absent: any success.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expect: Option<Value>,
    /// The expected error kind (`invalid-args`, ...).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expect_error: Option<String>,
    /// Files written into the example's scratch directory, by plain name.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub files: BTreeMap<String, String>,
}

/// One problem of a submission, for the model.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Problem {
    /// Which field.
    pub field: String,
    /// What is wrong.
    pub message: String,
    /// What to do.
    pub llm_hint: String,
}

fn problem(field: &str, message: impl Into<String>, hint: &str) -> Problem {
    Problem {
        field: field.into(),
        message: message.into(),
        llm_hint: hint.into(),
    }
}

impl Proposal {
    /// The meta the runner returns for it (version `version`).
    pub fn meta(&self, version: &str) -> RawToolMeta {
        RawToolMeta {
            name: self.name.clone(),
            description: self.description.clone(),
            args_schema: crate::json::canonical(&self.args_schema),
            has_side_effects: self.has_side_effects,
            risk: self.effective_risk(),
            returns_untrusted: self.returns_untrusted,
            idempotent: self.idempotent,
            supports_dry_run: self.supports_dry_run,
            capabilities: self.capabilities.clone(),
            version: version.into(),
            output_fields: Vec::new(),
        }
    }

    /// The risk the host records: a neuron with side effects and no dry-run
    /// is high risk (seed 002: a human approves each call), whatever it
    /// claimed.
    pub fn effective_risk(&self) -> Risk {
        if self.has_side_effects && !self.supports_dry_run {
            Risk::High
        } else {
            self.risk
        }
    }

    /// Check everything that needs no runner: the name against `taken`
    /// names, the meta (description, schema compiles), the capability
    /// grammar, the requests within the policy's `max_grants`, the source
    /// size, the examples (count, arguments valid under the schema, plain
    /// file names, known error kinds). Every problem is returned, not only
    /// the first.
    pub fn check<'a>(
        &self,
        policy: &NeuronsPolicy,
        taken: impl IntoIterator<Item = &'a str>,
    ) -> Vec<Problem> {
        let mut out = Vec::new();
        if let Err(e) = name::check(&self.name, taken) {
            let hint = match e {
                NameError::Rule(_) => "Use lower_snake_case ASCII, starting with a letter.",
                _ => "Choose a distinct name that cannot be mistaken for an existing tool.",
            };
            out.push(problem("name", e.to_string(), hint));
        }
        let validator = match ToolMeta::from_raw(self.meta("1")) {
            Ok(m) => crate::validate::ArgsValidator::new(&m.name, &m.args_schema).ok(),
            Err(e) => {
                out.push(problem(
                    "meta",
                    e.to_string(),
                    "Fix the description, args_schema or capabilities as the message says.",
                ));
                None
            }
        };
        out.extend(check_capabilities(&self.capabilities, &policy.max_grants));
        if self.source.len() > policy.max_source_bytes {
            out.push(problem(
                "source",
                format!(
                    "the source is {} bytes, over the limit of {}",
                    self.source.len(),
                    policy.max_source_bytes
                ),
                "Write a shorter source.",
            ));
        }
        if self.source.contains('\0') {
            out.push(problem(
                "source",
                "the source contains a NUL byte",
                "Send Python source text.",
            ));
        }
        if self.examples.is_empty() || self.examples.len() > policy.max_examples {
            out.push(problem(
                "examples",
                format!("give 1 to {} examples", policy.max_examples),
                "Add examples that show the tool works.",
            ));
        }
        for (i, ex) in self.examples.iter().enumerate() {
            out.extend(check_example(i, ex, validator.as_ref()));
        }
        out
    }
}

/// Each capability must parse and lie within the ceiling.
fn check_capabilities(caps: &[String], ceiling: &[Capability]) -> Vec<Problem> {
    let mut out = Vec::new();
    for c in caps {
        match Capability::parse(c) {
            Err(e) => out.push(problem(
                "capabilities",
                e.to_string(),
                "Write capabilities as fs:read:/dir/**, fs:write:/dir/**, net:https:host, env:NAME.",
            )),
            Ok(cap) if !ceiling.iter().any(|g| intersect(&cap, g).is_some()) => {
                let allowed: Vec<String> = ceiling.iter().map(ToString::to_string).collect();
                out.push(problem(
                    "capabilities",
                    format!(
                        "`{c}` is beyond what the operator allows neurons ({})",
                        if allowed.is_empty() {
                            "nothing: only pure neurons".to_string()
                        } else {
                            allowed.join(", ")
                        }
                    ),
                    "Request only capabilities within the operator's limit, or none.",
                ))
            }
            Ok(_) => {}
        }
    }
    out
}

fn check_example(
    i: usize,
    ex: &Example,
    validator: Option<&crate::validate::ArgsValidator>,
) -> Vec<Problem> {
    let field = format!("examples[{i}]");
    let mut out = Vec::new();
    if ex.expect.is_some() && ex.expect_error.is_some() {
        out.push(problem(
            &field,
            "give either expect or expect_error, not both",
            "Keep one.",
        ));
    }
    if let Some(k) = &ex.expect_error
        && parse_kind(k).is_none()
    {
        out.push(problem(
            &field,
            format!(
                "unknown error kind `{}`",
                k.chars().take(40).collect::<String>()
            ),
            "Use invalid-args, not-found, permission-denied, unsupported, quota-exceeded, ...",
        ));
    }
    // The seed files are written by the host before the example runs: more
    // than its scratch directory may hold is refused here, before anything
    // is written (the same bounds the running code is held to).
    let seed_bytes: usize = ex.files.values().map(String::len).sum();
    if ex.files.len() > super::code_run::MAX_SCRATCH_ENTRIES
        || seed_bytes as u64 > super::code_run::MAX_SCRATCH_BYTES
    {
        out.push(problem(
            &field,
            format!(
                "{} seed files of {seed_bytes} bytes: more than a scratch directory holds ({} files, {} bytes)",
                ex.files.len(),
                super::code_run::MAX_SCRATCH_ENTRIES,
                super::code_run::MAX_SCRATCH_BYTES
            ),
            "Seed an example with a few small files.",
        ));
    }
    for name in ex.files.keys() {
        if !is_plain_file_name(name) {
            out.push(problem(
                &field,
                format!(
                    "file name `{}` is not a plain name",
                    name.chars().take(80).collect::<String>()
                ),
                "Use names like data.csv: no slashes, no leading dot.",
            ));
        }
    }
    if let Some(v) = validator
        && ex.expect_error.as_deref() != Some("invalid-args")
        && let Err(e) = v.check_value(&substitute(&ex.args, "/scratch"))
    {
        out.push(problem(
            &field,
            format!("the example's args do not match args_schema: {e}"),
            "Make the example's args valid under the schema (or expect invalid-args).",
        ));
    }
    out
}

/// A plain file name: 1-128 bytes of `[A-Za-z0-9._-]`, not starting with a
/// dot.
pub fn is_plain_file_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 128
        && !name.starts_with('.')
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'))
}

/// An error kind by its WIT name (`invalid-args`) or snake case name.
pub fn parse_kind(s: &str) -> Option<ErrorKind> {
    let s = s.replace('_', "-");
    ErrorKind::ALL.into_iter().find(|k| k.as_str() == s)
}

/// `args` with every occurrence of [`SCRATCH_VAR`] in its strings replaced
/// by `dir`.
pub fn substitute(args: &Value, dir: &str) -> Value {
    match args {
        Value::String(s) => Value::String(s.replace(SCRATCH_VAR, dir)),
        Value::Array(a) => Value::Array(a.iter().map(|v| substitute(v, dir)).collect()),
        Value::Object(o) => Value::Object(
            o.iter()
                .map(|(k, v)| (k.clone(), substitute(v, dir)))
                .collect(),
        ),
        other => other.clone(),
    }
}

/// Whether an example's outcome is what it expected: an error of the
/// expected kind, or a success whose data equals `expect` (numbers equal
/// within a relative 1e-9; any success when `expect` is absent).
pub fn judge(ex: &Example, outcome: Result<&Value, ErrorKind>) -> bool {
    match (&ex.expect_error, outcome) {
        (Some(k), Err(kind)) => parse_kind(k) == Some(kind),
        (Some(_), Ok(_)) | (None, Err(_)) => false,
        (None, Ok(data)) => ex.expect.as_ref().is_none_or(|e| same(e, data)),
    }
}

/// JSON equality with a relative tolerance of 1e-9 on numbers.
pub fn same(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => match (x.as_f64(), y.as_f64()) {
            (Some(x), Some(y)) => (x - y).abs() <= 1e-9 * x.abs().max(y.abs()).max(1.0),
            _ => x == y,
        },
        (Value::Array(x), Value::Array(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|(a, b)| same(a, b))
        }
        (Value::Object(x), Value::Object(y)) => {
            x.len() == y.len() && x.iter().all(|(k, v)| y.get(k).is_some_and(|w| same(v, w)))
        }
        _ => a == b,
    }
}
