//! Strict JSON parsing and the canonical form used for hashing.
//!
//! [`parse_strict`] is what the host uses for anything a model or a tool wrote:
//! it refuses duplicate object keys (RFC 8259 §4 leaves their meaning to the
//! parser, so two parsers may disagree on which value wins: a classic way to
//! smuggle an argument past a validator), nesting deeper than
//! [`MAX_DEPTH`], and input over a size limit.
//!
//! [`canonical`] renders a value with object keys sorted by code point and no
//! insignificant whitespace, so equal values hash equally whatever the key
//! order the model chose.

use serde::de::{self, DeserializeSeed, MapAccess, SeqAccess, Visitor};
use serde_json::{Map, Value};
use std::fmt;

/// Deepest nesting of arrays and objects accepted.
pub const MAX_DEPTH: usize = 64;

/// Why a JSON text was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum JsonError {
    /// Larger than the caller's limit.
    #[error("JSON text of {len} bytes exceeds the limit of {limit} bytes")]
    TooLarge {
        /// Size of the text, bytes.
        len: usize,
        /// The limit, bytes.
        limit: usize,
    },
    /// Not JSON, or a duplicate key, or too deep.
    #[error("{0}")]
    Syntax(String),
}

impl JsonError {
    /// A stable snake_case name of the refusal: `too_large`, `duplicate_key`,
    /// `too_deep` or `syntax`.
    pub fn kind(&self) -> &'static str {
        match self {
            JsonError::TooLarge { .. } => "too_large",
            JsonError::Syntax(m) if m.starts_with(DUPLICATE_KEY) => "duplicate_key",
            JsonError::Syntax(m) if m.starts_with(TOO_DEEP) => "too_deep",
            JsonError::Syntax(_) => "syntax",
        }
    }
}

/// How the messages of the two structural refusals start (see [`JsonError::kind`]).
const DUPLICATE_KEY: &str = "duplicate key `";
const TOO_DEEP: &str = "nesting deeper than ";

/// Parse `text` as one JSON value, refusing duplicate keys, nesting deeper than
/// [`MAX_DEPTH`] and texts over `limit` bytes.
///
/// # Errors
/// [`JsonError::TooLarge`] or [`JsonError::Syntax`] (with line and column).
pub fn parse_strict(text: &str, limit: usize) -> Result<Value, JsonError> {
    if text.len() > limit {
        return Err(JsonError::TooLarge {
            len: text.len(),
            limit,
        });
    }
    let mut de = serde_json::Deserializer::from_str(text);
    let value = StrictSeed { depth: 0 }
        .deserialize(&mut de)
        .map_err(|e| JsonError::Syntax(e.to_string()))?;
    de.end().map_err(|e| JsonError::Syntax(e.to_string()))?;
    Ok(value)
}

struct StrictSeed {
    depth: usize,
}

impl<'de> DeserializeSeed<'de> for StrictSeed {
    type Value = Value;
    fn deserialize<D: de::Deserializer<'de>>(self, d: D) -> Result<Value, D::Error> {
        d.deserialize_any(StrictVisitor { depth: self.depth })
    }
}

struct StrictVisitor {
    depth: usize,
}

impl<'de> Visitor<'de> for StrictVisitor {
    type Value = Value;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a JSON value")
    }
    fn visit_bool<E>(self, v: bool) -> Result<Value, E> {
        Ok(Value::Bool(v))
    }
    fn visit_i64<E>(self, v: i64) -> Result<Value, E> {
        Ok(Value::from(v))
    }
    fn visit_u64<E>(self, v: u64) -> Result<Value, E> {
        Ok(Value::from(v))
    }
    fn visit_f64<E: de::Error>(self, v: f64) -> Result<Value, E> {
        serde_json::Number::from_f64(v)
            .map(Value::Number)
            .ok_or_else(|| E::custom("non-finite number"))
    }
    fn visit_str<E>(self, v: &str) -> Result<Value, E> {
        Ok(Value::String(v.to_string()))
    }
    fn visit_string<E>(self, v: String) -> Result<Value, E> {
        Ok(Value::String(v))
    }
    fn visit_unit<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }
    fn visit_none<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Value, A::Error> {
        if self.depth >= MAX_DEPTH {
            return Err(de::Error::custom(format!("{TOO_DEEP}{MAX_DEPTH}")));
        }
        let mut out = Vec::new();
        while let Some(v) = seq.next_element_seed(StrictSeed {
            depth: self.depth + 1,
        })? {
            out.push(v);
        }
        Ok(Value::Array(out))
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Value, A::Error> {
        if self.depth >= MAX_DEPTH {
            return Err(de::Error::custom(format!("{TOO_DEEP}{MAX_DEPTH}")));
        }
        let mut out = Map::new();
        while let Some(key) = map.next_key::<String>()? {
            if out.contains_key(&key) {
                return Err(de::Error::custom(format!(
                    "{DUPLICATE_KEY}{}`",
                    key.chars().take(100).collect::<String>()
                )));
            }
            let v = map.next_value_seed(StrictSeed {
                depth: self.depth + 1,
            })?;
            out.insert(key, v);
        }
        Ok(Value::Object(out))
    }
}

/// Render `value` canonically: object keys sorted by Unicode code point,
/// no whitespace, serde_json's number and string escaping.
pub fn canonical(value: &Value) -> String {
    let mut out = String::new();
    write_canonical(value, &mut out);
    out
}

fn write_canonical(value: &Value, out: &mut String) {
    match value {
        Value::Object(m) => {
            let mut keys: Vec<&String> = m.keys().collect();
            keys.sort();
            out.push('{');
            for (i, k) in keys.into_iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                out.push_str(&Value::String(k.clone()).to_string());
                out.push(':');
                if let Some(v) = m.get(k) {
                    write_canonical(v, out);
                }
            }
            out.push('}');
        }
        Value::Array(a) => {
            out.push('[');
            for (i, v) in a.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_canonical(v, out);
            }
            out.push(']');
        }
        other => out.push_str(&other.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn duplicate_keys_refused_at_any_depth() {
        let e = parse_strict(r#"{"path":"a","path":"b"}"#, 1000).unwrap_err();
        assert!(e.to_string().contains("duplicate key `path`"), "{e}");
        assert!(parse_strict(r#"{"a":{"x":1,"x":2}}"#, 1000).is_err());
        assert!(parse_strict(r#"[{"x":1},{"x":2}]"#, 1000).is_ok());
        // Same key after JSON unescaping is still a duplicate.
        assert!(parse_strict(r#"{"path":1,"p\u0061th":2}"#, 1000).is_err());
    }

    #[test]
    fn limits() {
        assert!(matches!(
            parse_strict("[1]", 2),
            Err(JsonError::TooLarge { .. })
        ));
        let deep = "[".repeat(100) + &"]".repeat(100);
        assert!(parse_strict(&deep, 10_000).is_err());
        assert!(parse_strict("{} x", 100).is_err());
        assert!(parse_strict("", 100).is_err());
    }

    #[test]
    fn canonical_sorts_keys() {
        let a = parse_strict(r#"{"b":1,"a":{"d":[1,{"z":0,"y":1}],"c":"x"}}"#, 1000).unwrap();
        assert_eq!(
            canonical(&a),
            r#"{"a":{"c":"x","d":[1,{"y":1,"z":0}]},"b":1}"#
        );
    }
}
