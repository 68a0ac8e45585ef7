//! Tool-call validation before dispatch (seed 000 §4): unknown tools and
//! arguments that do not match the tool's JSON Schema are answered with a
//! message written for the model, naming the field, what was expected and the
//! valid choices, so that it can correct itself instead of starting over.
//!
//! Arguments are parsed with [`crate::json::parse_strict`] (duplicate keys
//! refused) and checked with the `jsonschema` crate, compiled by
//! [`crate::schema_load::compile`]: the schema's own draft, `format`
//! asserted (unknown formats refused), nothing fetched, no same-instance
//! `$ref` cycle.

use crate::json::{JsonError, check_value, parse_strict};
use serde_json::Value;
use std::fmt::Write as _;

/// Largest accepted arguments text, in bytes.
pub const MAX_ARGS_LEN: usize = 1024 * 1024;

/// The one rule for the arguments of a tool call written as JSON text,
/// whatever surface they came in by (command line, model, MCP, REST, a
/// plan): [`parse_strict`] within [`MAX_ARGS_LEN`] bytes (duplicate keys
/// at any depth, more than 64 levels, integers past 64 bits, lone
/// surrogates, prototype-polluting keys refused).
///
/// # Errors
/// [`JsonError`].
pub fn parse_args(text: &str) -> Result<Value, JsonError> {
    parse_strict(text, MAX_ARGS_LEN)
}

/// The same rule for arguments already parsed (a plan's step, a library
/// caller): [`check_value`] within [`MAX_ARGS_LEN`] bytes.
///
/// # Errors
/// [`JsonError`].
pub fn check_args_value(value: &Value) -> Result<(), JsonError> {
    check_value(value, MAX_ARGS_LEN)
}

/// A compiled args schema.
pub struct ArgsValidator {
    tool: String,
    schema: Value,
    validator: jsonschema::Validator,
}

impl std::fmt::Debug for ArgsValidator {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ArgsValidator")
            .field("tool", &self.tool)
            .finish()
    }
}

/// The schema itself is unusable.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct SchemaError(pub String);

/// One problem with one argument.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct FieldProblem {
    /// JSON pointer of the argument (`/path`, `/items/0`), empty for the root.
    pub pointer: String,
    /// What is wrong, for the model.
    pub problem: String,
}

/// Why a tool call was refused before dispatch.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CallError {
    /// The tool is not in the catalog.
    #[error("unknown tool `{name}`")]
    UnknownTool {
        /// The name the model used.
        name: String,
        /// The catalog's names, sorted.
        available: Vec<String>,
        /// The closest catalog name, if any is close.
        suggestion: Option<String>,
    },
    /// The arguments are not JSON (or have duplicate keys).
    #[error("arguments of `{tool}` are not valid JSON: {error}")]
    NotJson {
        /// The tool.
        tool: String,
        /// The parse error.
        error: JsonError,
        /// Summary of the expected arguments.
        expected: String,
    },
    /// The arguments do not match the schema.
    #[error("arguments of `{tool}` do not match its schema")]
    Schema {
        /// The tool.
        tool: String,
        /// Each problem found (at most 10).
        problems: Vec<FieldProblem>,
        /// Summary of the expected arguments.
        expected: String,
    },
}

impl CallError {
    /// The `tool_error` message for the model (seed 000 §4).
    pub fn to_model_message(&self) -> String {
        let mut m = String::from("The tool call was not valid and was not executed.\n");
        match self {
            CallError::UnknownTool {
                name,
                available,
                suggestion,
            } => {
                let _ = writeln!(m, "- tool \"{}\": does not exist", clip(name, 80));
                if let Some(s) = suggestion {
                    let _ = writeln!(m, "- did you mean \"{s}\"?");
                }
                let _ = writeln!(m, "- available tools: {}", available.join(", "));
                m.push_str("Call one of the available tools by its exact name.");
            }
            CallError::NotJson {
                tool,
                error,
                expected,
            } => {
                let _ = writeln!(m, "- tool \"{tool}\": exists");
                let _ = writeln!(m, "- arguments: not valid JSON ({error})");
                let _ = writeln!(m, "- expected arguments: {expected}");
                m.push_str("Retry with a single JSON object of arguments, each key once.");
            }
            CallError::Schema {
                tool,
                problems,
                expected,
            } => {
                let _ = writeln!(m, "- tool \"{tool}\": exists");
                for p in problems {
                    if p.pointer.is_empty() {
                        let _ = writeln!(m, "- arguments: {}", p.problem);
                    } else {
                        let _ = writeln!(
                            m,
                            "- argument \"{}\": {}",
                            pointer_to_name(&p.pointer),
                            p.problem
                        );
                    }
                }
                let _ = writeln!(m, "- expected arguments: {expected}");
                m.push_str("Retry with the fields corrected, or choose a different tool.");
            }
        }
        m
    }
}

fn clip(s: &str, n: usize) -> String {
    s.chars().take(n).collect()
}

fn pointer_to_name(p: &str) -> String {
    p.trim_start_matches('/')
        .replace('/', ".")
        .replace("~1", "/")
        .replace("~0", "~")
}

impl ArgsValidator {
    /// Compile `schema` (which must describe an object) with
    /// [`crate::schema_load::compile`].
    ///
    /// # Errors
    /// [`SchemaError`] when the schema is not an object schema or is refused
    /// at load (see [`crate::schema_load`]).
    pub fn new(tool: &str, schema: &Value) -> Result<ArgsValidator, SchemaError> {
        if schema.get("type").and_then(Value::as_str) != Some("object") {
            return Err(SchemaError(
                "the root of an args schema must have \"type\": \"object\"".into(),
            ));
        }
        let validator = crate::schema_load::compile(schema).map_err(|e| SchemaError(e.0))?;
        Ok(ArgsValidator {
            tool: tool.to_string(),
            schema: schema.clone(),
            validator,
        })
    }

    /// Parse and check `args_text`. Returns the parsed arguments.
    ///
    /// # Errors
    /// [`CallError::NotJson`] or [`CallError::Schema`].
    pub fn check_text(&self, args_text: &str) -> Result<Value, CallError> {
        let value = parse_args(args_text).map_err(|error| CallError::NotJson {
            tool: self.tool.clone(),
            error,
            expected: self.expected(),
        })?;
        self.check_schema(&value)?;
        Ok(value)
    }

    /// Check already parsed arguments: [`check_args_value`], then the
    /// schema.
    ///
    /// # Errors
    /// [`CallError::NotJson`] (too deep, too large, a refused key) or
    /// [`CallError::Schema`] listing up to 10 problems.
    pub fn check_value(&self, value: &Value) -> Result<(), CallError> {
        check_args_value(value).map_err(|error| CallError::NotJson {
            tool: self.tool.clone(),
            error,
            expected: self.expected(),
        })?;
        self.check_schema(value)
    }

    /// Check parsed arguments against the schema only.
    ///
    /// # Errors
    /// [`CallError::Schema`] listing up to 10 problems.
    fn check_schema(&self, value: &Value) -> Result<(), CallError> {
        let problems: Vec<FieldProblem> = self
            .validator
            .iter_errors(value)
            .take(10)
            .map(|e| describe(&e, &self.schema))
            .collect();
        if problems.is_empty() {
            Ok(())
        } else {
            Err(CallError::Schema {
                tool: self.tool.clone(),
                problems,
                expected: self.expected(),
            })
        }
    }

    /// A one-line summary of the expected arguments, e.g.
    /// `{ "path": string (required), "max_bytes": integer }`.
    pub fn expected(&self) -> String {
        summarize_object(&self.schema)
    }
}

fn describe(e: &jsonschema::ValidationError<'_>, schema: &Value) -> FieldProblem {
    use jsonschema::error::ValidationErrorKind as K;
    let pointer = e.instance_path().to_string();
    let got = describe_value(e.instance());
    let problem = match e.kind() {
        K::Required { property } => {
            let name = property.as_str().unwrap_or("?").to_string();
            let ptr = if pointer.is_empty() {
                format!("/{name}")
            } else {
                format!("{pointer}/{name}")
            };
            let expected = property_schema(schema, &ptr)
                .map(summarize_type)
                .unwrap_or_else(|| "a value".into());
            return FieldProblem {
                pointer: ptr,
                problem: format!("missing (required, expected {expected})"),
            };
        }
        K::AdditionalProperties { unexpected } => {
            let allowed = allowed_properties(schema, &pointer);
            return FieldProblem {
                pointer,
                problem: format!(
                    "unexpected field(s) {}; allowed fields: {}",
                    unexpected
                        .iter()
                        .map(|u| format!("\"{}\"", clip(u, 60)))
                        .collect::<Vec<_>>()
                        .join(", "),
                    if allowed.is_empty() {
                        "none".into()
                    } else {
                        allowed.join(", ")
                    }
                ),
            };
        }
        K::Type { .. } => {
            let expected = property_schema(schema, &pointer)
                .map(summarize_type)
                .unwrap_or_else(|| "another type".into());
            format!("expected {expected}, got {got}")
        }
        K::Enum { options } => format!("got {got}; valid choices: {}", options),
        K::Constant { expected_value } => format!("got {got}; must be {expected_value}"),
        K::Format { format } => format!("got {got}, which is not a valid `{format}`"),
        _ => format!("{e}"),
    };
    FieldProblem { pointer, problem }
}

fn describe_value(v: &Value) -> String {
    let t = match v {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(n) if n.is_i64() || n.is_u64() => "integer",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    };
    let text = v.to_string();
    if text.len() <= 40 {
        format!("{t} {text}")
    } else {
        t.to_string()
    }
}

/// Walk `properties` along a JSON pointer of the instance.
fn property_schema<'a>(schema: &'a Value, pointer: &str) -> Option<&'a Value> {
    let mut cur = schema;
    for seg in pointer.split('/').skip(1) {
        cur = if let Some(p) = cur.get("properties").and_then(|p| p.get(seg)) {
            p
        } else if seg.bytes().all(|b| b.is_ascii_digit()) {
            cur.get("items")?
        } else {
            return None;
        };
    }
    Some(cur)
}

fn allowed_properties(schema: &Value, pointer: &str) -> Vec<String> {
    property_schema(schema, pointer)
        .and_then(|s| s.get("properties"))
        .and_then(Value::as_object)
        .map(|m| m.keys().map(|k| format!("\"{k}\"")).collect())
        .unwrap_or_default()
}

fn summarize_type(s: &Value) -> String {
    if let Some(choices) = s.get("enum").and_then(Value::as_array) {
        let c: Vec<String> = choices.iter().map(Value::to_string).collect();
        return format!("one of {}", c.join(", "));
    }
    match s.get("type") {
        Some(Value::String(t)) => t.clone(),
        Some(Value::Array(ts)) => ts
            .iter()
            .filter_map(Value::as_str)
            .collect::<Vec<_>>()
            .join(" or "),
        _ => "a value".into(),
    }
}

fn summarize_object(schema: &Value) -> String {
    let required: Vec<&str> = schema
        .get("required")
        .and_then(Value::as_array)
        .map(|r| r.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    let Some(props) = schema.get("properties").and_then(Value::as_object) else {
        return "{ }".into();
    };
    let fields: Vec<String> = props
        .iter()
        .map(|(k, v)| {
            let req = if required.contains(&k.as_str()) {
                " (required)"
            } else {
                ""
            };
            format!("\"{k}\": {}{req}", summarize_type(v))
        })
        .collect();
    format!("{{ {} }}", fields.join(", "))
}

/// Build the [`CallError::UnknownTool`] for `name` given the catalog.
pub fn unknown_tool(name: &str, catalog: &[&str]) -> CallError {
    let mut available: Vec<String> = catalog.iter().map(|s| s.to_string()).collect();
    available.sort();
    let suggestion = available
        .iter()
        .map(|c| (strsim::normalized_levenshtein(name, c), c))
        .filter(|(score, _)| *score >= 0.5)
        .max_by(|a, b| a.0.total_cmp(&b.0))
        .map(|(_, c)| c.clone());
    CallError::UnknownTool {
        name: clip(name, 80),
        available,
        suggestion,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn v() -> ArgsValidator {
        ArgsValidator::new(
            "fs_read",
            &json!({
                "type": "object",
                "properties": {
                    "path": {"type": "string"},
                    "max_bytes": {"type": "integer"},
                    "mode": {"enum": ["text", "base64"]}
                },
                "required": ["path"],
                "additionalProperties": false
            }),
        )
        .unwrap()
    }

    #[test]
    fn missing_field_named_with_type() {
        let m = v().check_text("{}").unwrap_err().to_model_message();
        assert!(
            m.contains("- argument \"path\": missing (required, expected string)"),
            "{m}"
        );
        assert!(
            m.contains("expected arguments: { \"path\": string (required)"),
            "{m}"
        );
    }

    #[test]
    fn wrong_type_named() {
        let m = v()
            .check_text(r#"{"path":"a","max_bytes":"10"}"#)
            .unwrap_err()
            .to_model_message();
        assert!(
            m.contains("- argument \"max_bytes\": expected integer, got string \"10\""),
            "{m}"
        );
    }

    #[test]
    fn enum_choices_listed() {
        let m = v()
            .check_text(r#"{"path":"a","mode":"hex"}"#)
            .unwrap_err()
            .to_model_message();
        assert!(m.contains("valid choices: [\"text\",\"base64\"]"), "{m}");
    }

    #[test]
    fn extra_field_and_duplicate_key() {
        let m = v()
            .check_text(r#"{"path":"a","colour":1}"#)
            .unwrap_err()
            .to_model_message();
        assert!(m.contains("unexpected field(s) \"colour\""), "{m}");
        let m = v()
            .check_text(r#"{"path":"a","path":"b"}"#)
            .unwrap_err()
            .to_model_message();
        assert!(m.contains("duplicate key `path`"), "{m}");
    }

    #[test]
    fn unknown_tool_suggests() {
        let e = unknown_tool("fs_reed", &["fs_write", "fs_read", "time_now"]);
        let m = e.to_model_message();
        assert!(m.contains("did you mean \"fs_read\""), "{m}");
        assert!(
            m.contains("available tools: fs_read, fs_write, time_now"),
            "{m}"
        );
    }

    #[test]
    fn non_object_schema_refused() {
        assert!(ArgsValidator::new("t", &json!({"type": "string"})).is_err());
    }
}
