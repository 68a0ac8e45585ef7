//! Strict JSON parsing and the canonical form used for hashing.
//!
//! [`parse_strict`] is what the host uses for anything a model or a tool wrote:
//! it refuses duplicate object keys (RFC 8259 §4 leaves their meaning to the
//! parser, so two parsers may disagree on which value wins: a classic way to
//! smuggle an argument past a validator), nesting deeper than
//! [`MAX_DEPTH`], and input over a size limit.
//!
//! It also refuses what two consumers may read differently or what turns
//! into an attack on a consumer downstream: an integer literal that does not
//! fit 64 bits (serde_json would keep it as a rounded float: `2^64 + 1`
//! becomes `2^64`; RFC 8259 §6 and I-JSON, RFC 7493 §2.2, warn that such
//! numbers are not interoperable), a number out of the float range, a
//! string with a lone UTF-16 surrogate escape (`"\ud800"`: not Unicode text;
//! RFC 8259 §8.2), a byte-order mark, and the keys that pollute a
//! JavaScript consumer's prototypes: `__proto__` anywhere, and
//! `constructor` whose value holds `prototype` (the rule of Fastify's
//! `secure-json-parse`).
//!
//! [`check_value`] applies the same depth, size and key rules to a value
//! already parsed elsewhere (a plan's step, arguments handed over by a
//! library), so every entry point of the door is held to one rule.
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
    /// `too_deep`, `reserved_key`, `number_range` or `syntax`.
    pub fn kind(&self) -> &'static str {
        match self {
            JsonError::TooLarge { .. } => "too_large",
            JsonError::Syntax(m) if m.starts_with(DUPLICATE_KEY) => "duplicate_key",
            JsonError::Syntax(m) if m.starts_with(TOO_DEEP) => "too_deep",
            JsonError::Syntax(m) if m.starts_with(RESERVED_KEY) => "reserved_key",
            JsonError::Syntax(m) if m.starts_with(NUMBER_RANGE) => "number_range",
            JsonError::Syntax(_) => "syntax",
        }
    }
}

/// How the messages of the structural refusals start (see [`JsonError::kind`]).
const DUPLICATE_KEY: &str = "duplicate key `";
const TOO_DEEP: &str = "nesting deeper than ";
const RESERVED_KEY: &str = "key refused: ";
const NUMBER_RANGE: &str = "number out of range: ";

/// The refusal of a key that pollutes JavaScript prototypes, if `key` (with
/// its value `value`) is one.
fn reserved_key(key: &str, value: &Value) -> Option<String> {
    if key == "__proto__" {
        return Some(format!(
            "{RESERVED_KEY}`__proto__` (it rewrites a JavaScript consumer's prototype)"
        ));
    }
    if key == "constructor"
        && value
            .as_object()
            .is_some_and(|o| o.contains_key("prototype"))
    {
        return Some(format!(
            "{RESERVED_KEY}`constructor` holding `prototype` (it rewrites a JavaScript consumer's prototype)"
        ));
    }
    None
}

/// The first integer literal of a JSON text that does not fit 64 bits
/// (signed or unsigned), if any. `text` is valid JSON (already parsed).
fn oversized_integer(text: &str) -> Option<&str> {
    let b = text.as_bytes();
    let mut i = 0;
    while i < b.len() {
        match b[i] {
            b'"' => {
                i += 1;
                while i < b.len() && b[i] != b'"' {
                    i += if b[i] == b'\\' { 2 } else { 1 };
                }
                i += 1;
            }
            b'-' | b'0'..=b'9' => {
                let start = i;
                while i < b.len() && matches!(b[i], b'-' | b'+' | b'.' | b'e' | b'E' | b'0'..=b'9')
                {
                    i += 1;
                }
                let n = &text[start..i];
                let integer = !n.contains(['.', 'e', 'E']);
                if integer && n.parse::<i64>().is_err() && n.parse::<u64>().is_err() {
                    return Some(n);
                }
            }
            _ => i += 1,
        }
    }
    None
}

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
    parse_strict_within(text, limit, MAX_DEPTH)
}

/// [`parse_strict`] with another nesting limit (an envelope around
/// arguments, e.g. a JSON-RPC message, is allowed its own levels on top of
/// [`MAX_DEPTH`]).
///
/// # Errors
/// As [`parse_strict`].
pub fn parse_strict_within(text: &str, limit: usize, depth: usize) -> Result<Value, JsonError> {
    if text.len() > limit {
        return Err(JsonError::TooLarge {
            len: text.len(),
            limit,
        });
    }
    let mut de = serde_json::Deserializer::from_str(text);
    let value = StrictSeed {
        depth: 0,
        max: depth,
    }
    .deserialize(&mut de)
    .map_err(|e| JsonError::Syntax(e.to_string()))?;
    de.end().map_err(|e| JsonError::Syntax(e.to_string()))?;
    if let Some(n) = oversized_integer(text) {
        return Err(JsonError::Syntax(format!(
            "{NUMBER_RANGE}the integer {} does not fit 64 bits (send it as a string)",
            n.chars().take(40).collect::<String>()
        )));
    }
    Ok(value)
}

/// Hold a value parsed elsewhere to the rules of [`parse_strict`]: at most
/// [`MAX_DEPTH`] levels, no prototype-polluting key, and at most `limit`
/// bytes once serialised (compactly).
///
/// # Errors
/// [`JsonError::TooLarge`] or [`JsonError::Syntax`].
pub fn check_value(value: &Value, limit: usize) -> Result<(), JsonError> {
    fn walk(v: &Value, depth: usize) -> Result<(), JsonError> {
        let children: Box<dyn Iterator<Item = &Value>> = match v {
            Value::Array(a) => Box::new(a.iter()),
            Value::Object(o) => {
                for (k, x) in o {
                    if let Some(e) = reserved_key(k, x) {
                        return Err(JsonError::Syntax(e));
                    }
                }
                Box::new(o.values())
            }
            _ => return Ok(()),
        };
        if depth >= MAX_DEPTH {
            return Err(JsonError::Syntax(format!("{TOO_DEEP}{MAX_DEPTH}")));
        }
        for c in children {
            walk(c, depth + 1)?;
        }
        Ok(())
    }
    walk(value, 0)?;
    /// Counts bytes, failing once past the limit (nothing is kept).
    struct Count {
        n: usize,
        limit: usize,
    }
    impl std::io::Write for Count {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.n += buf.len();
            if self.n > self.limit {
                return Err(std::io::Error::other("too large"));
            }
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let mut c = Count { n: 0, limit };
    if serde_json::to_writer(&mut c, value).is_err() {
        return Err(JsonError::TooLarge { len: c.n, limit });
    }
    Ok(())
}

struct StrictSeed {
    depth: usize,
    max: usize,
}

impl<'de> DeserializeSeed<'de> for StrictSeed {
    type Value = Value;
    fn deserialize<D: de::Deserializer<'de>>(self, d: D) -> Result<Value, D::Error> {
        d.deserialize_any(StrictVisitor {
            depth: self.depth,
            max: self.max,
        })
    }
}

struct StrictVisitor {
    depth: usize,
    max: usize,
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
        if self.depth >= self.max {
            return Err(de::Error::custom(format!("{TOO_DEEP}{}", self.max)));
        }
        let mut out = Vec::new();
        while let Some(v) = seq.next_element_seed(StrictSeed {
            depth: self.depth + 1,
            max: self.max,
        })? {
            out.push(v);
        }
        Ok(Value::Array(out))
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Value, A::Error> {
        if self.depth >= self.max {
            return Err(de::Error::custom(format!("{TOO_DEEP}{}", self.max)));
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
                max: self.max,
            })?;
            if let Some(e) = reserved_key(&key, &v) {
                return Err(de::Error::custom(e));
            }
            out.insert(key, v);
        }
        Ok(Value::Object(out))
    }
}

/// Render `value` canonically: object keys sorted by Unicode code point,
/// no whitespace, serde_json's number and string escaping.
pub fn canonical(value: &Value) -> String {
    let mut out = Vec::with_capacity(128);
    write_canonical(value, &mut out);
    // serde_json writes UTF-8, the rest is ASCII: the fallback never runs.
    String::from_utf8(out).unwrap_or_else(|e| String::from_utf8_lossy(e.as_bytes()).into_owned())
}

/// [`canonical`] appended to `out`, without a copy of `value` or of its
/// keys (the chained log hashes every record's detail this way).
pub fn write_canonical(value: &Value, out: &mut Vec<u8>) {
    match value {
        Value::Object(m) => {
            let mut entries: Vec<(&String, &Value)> = m.iter().collect();
            entries.sort_unstable_by(|a, b| a.0.cmp(b.0));
            out.push(b'{');
            for (i, (k, v)) in entries.into_iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                write_scalar(k, out);
                out.push(b':');
                write_canonical(v, out);
            }
            out.push(b'}');
        }
        Value::Array(a) => {
            out.push(b'[');
            for (i, v) in a.iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                write_canonical(v, out);
            }
            out.push(b']');
        }
        other => write_scalar(other, out),
    }
}

/// `v` as serde_json writes it compactly, appended to `out` (writing to a
/// `Vec` cannot fail, and a string, number, bool or null always
/// serialises).
pub fn write_scalar<T: serde::Serialize + ?Sized>(v: &T, out: &mut Vec<u8>) {
    let _ = serde_json::to_writer(out, v);
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
    fn numbers_surrogates_boms_and_prototype_keys() {
        let kind = |t: &str| parse_strict(t, 10_000).map_err(|e| e.kind());
        // Integers past 64 bits would be rounded: refused, at any depth.
        assert_eq!(kind("18446744073709551616"), Err("number_range"));
        assert_eq!(
            kind(r#"{"a":[1,-9223372036854775809]}"#),
            Err("number_range")
        );
        assert_eq!(
            kind(r#"{"n":123456789012345678901234567890}"#),
            Err("number_range")
        );
        assert!(kind("18446744073709551615").is_ok());
        assert!(kind("-9223372036854775808").is_ok());
        assert!(kind(r#"{"s":"123456789012345678901234567890"}"#).is_ok());
        assert!(kind(r#"{"s":"\"99999999999999999999999"}"#).is_ok());
        assert!(kind("1.5e300").is_ok() && kind("-0").is_ok());
        assert_eq!(kind("1e400"), Err("syntax"), "out of the float range");
        // Lone surrogates are not text.
        for t in [
            r#""\ud800""#,
            r#""\udc00""#,
            r#""\ud800\u0041""#,
            r#"{"\udfff":1}"#,
        ] {
            assert_eq!(kind(t), Err("syntax"), "{t}");
        }
        assert!(kind(r#""\ud83d\ude00""#).is_ok(), "a pair is fine");
        assert_eq!(kind("\u{FEFF}{}"), Err("syntax"), "byte-order mark");
        // Prototype pollution keys, at any depth, escaped or not.
        for t in [
            r#"{"__proto__":{"admin":true}}"#,
            r#"{"a":{"b":[{"__proto__":1}]}}"#,
            r#"{"__pro\u0074o__":{}}"#,
            r#"{"constructor":{"prototype":{"x":1}}}"#,
        ] {
            assert_eq!(kind(t), Err("reserved_key"), "{t}");
        }
        assert!(kind(r#"{"constructor":"Foo","prototype":1,"proto":2}"#).is_ok());
    }

    #[test]
    fn values_parsed_elsewhere_meet_the_same_rules() {
        let ok = serde_json::json!({"a": [1, 2, {"b": "c"}]});
        assert!(check_value(&ok, 1000).is_ok());
        assert!(matches!(
            check_value(&ok, 10),
            Err(JsonError::TooLarge { .. })
        ));
        let mut deep = serde_json::json!(1);
        for _ in 0..70 {
            deep = serde_json::json!([deep]);
        }
        assert_eq!(check_value(&deep, 1 << 20).unwrap_err().kind(), "too_deep");
        let mut at_limit = serde_json::json!(1);
        for _ in 0..MAX_DEPTH {
            at_limit = serde_json::json!([at_limit]);
        }
        assert!(check_value(&at_limit, 1 << 20).is_ok());
        let text = at_limit.to_string();
        assert!(
            parse_strict(&text, 1 << 20).is_ok(),
            "same limit as the parser"
        );
        let proto: Value = serde_json::from_str(r#"{"x":{"__proto__":{}}}"#).unwrap();
        assert_eq!(
            check_value(&proto, 1000).unwrap_err().kind(),
            "reserved_key"
        );
    }

    #[test]
    fn canonical_sorts_keys() {
        let a = parse_strict(r#"{"b":1,"a":{"d":[1,{"z":0,"y":1}],"c":"x"}}"#, 1000).unwrap();
        assert_eq!(
            canonical(&a),
            r#"{"a":{"c":"x","d":[1,{"y":1,"z":0}]},"b":1}"#
        );
    }

    /// The form every hash of the chained log was made with: escapes,
    /// numbers and key order exactly as before `write_canonical` wrote
    /// into a buffer (the expected text is what the earlier implementation,
    /// `Value::to_string` per scalar and per key, gave on 2026-12-05).
    #[test]
    fn canonical_text_is_unchanged() {
        let v = serde_json::json!({
            "é": "\u{1}\n\"\\/\u{7f}\u{2028}😀",
            "B": [1.5, -0.0, 1e300, 12345678901234567890u64, -9223372036854775808i64, null, true],
            "a": {"": {}, "\u{0}": []},
            "Z": 0.1,
        });
        assert_eq!(
            canonical(&v),
            "{\"B\":[1.5,-0.0,1e+300,12345678901234567890,-9223372036854775808,null,true],\"Z\":0.1,\"a\":{\"\":{},\"\\u0000\":[]},\"é\":\"\\u0001\\n\\\"\\\\/\u{7f}\u{2028}😀\"}"
        );
    }
}
