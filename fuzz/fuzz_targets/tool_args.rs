//! Tool-call arguments against args schemas: `capsaga_core::json` (strict
//! parsing) and `capsaga_core::validate` (JSON Schema), as the host runs them
//! on every call the model makes.
//!
//! The input is a schema (one of four realistic ones, or arbitrary text that
//! must pass the registry's checks: strict JSON and a compilable object
//! schema) and an arguments text.
//!
//! Properties:
//! 1. No panic on any schema the meta checker accepts, whatever the
//!    arguments; the model message of a refusal renders.
//! 2. Accepted arguments re-validate: the parsed value passes
//!    `check_value` (unless its serialised form is over the size limit:
//!    values are measured as serialised), and its canonical form parses to
//!    the same value and passes `check_text`.
//! 3. Duplicate keys are never accepted: the canonical form of accepted
//!    arguments with any one object's first key written twice is refused as
//!    `duplicate_key`, by the strict parser and by the validator.
//! 4. The strict parser and serde_json's default parser (an independent
//!    reading) agree: what the strict parser accepts, serde_json accepts with
//!    the same value; what the strict parser calls a syntax error, serde_json
//!    refuses too (the strict parser refuses more on purpose: duplicate
//!    keys, depth, integers past 64 bits, prototype-polluting keys, each
//!    with its own kind).
#![no_main]

use capsaga_core::json::{canonical, parse_strict};
use capsaga_core::meta::MAX_SCHEMA_LEN;
use capsaga_core::validate::{ArgsValidator, MAX_ARGS_LEN};
use libfuzzer_sys::fuzz_target;
use serde_json::{Value, json};

fn schemas() -> [Value; 4] {
    [
        json!({"type": "object"}),
        json!({
            "type": "object",
            "properties": {
                "path": {"type": "string", "minLength": 1, "maxLength": 64},
                "encoding": {"type": "string", "enum": ["text", "base64"]},
                "max_bytes": {"type": "integer", "minimum": 1, "maximum": 1048576}
            },
            "required": ["path"],
            "additionalProperties": false
        }),
        json!({
            "type": "object",
            "properties": {
                "items": {"type": "array", "items": {"type": "object",
                    "properties": {"k": {"type": "string"}, "v": {"type": ["number", "null"]}},
                    "required": ["k"]}, "maxItems": 8},
                "when": {"type": "string", "format": "date-time"},
                "mode": {"oneOf": [{"const": "a"}, {"const": "b"}]}
            },
            "additionalProperties": {"type": "boolean"}
        }),
        json!({
            "type": "object",
            "properties": {
                "url": {"type": "string", "format": "uri"},
                "headers": {"type": "object", "additionalProperties": {"type": "string"},
                    "propertyNames": {"pattern": "^[A-Za-z-]{1,32}$"}},
                "body": {}
            },
            "required": ["url"]
        }),
    ]
}

/// Canonical text of `v` with the first key of the `at`-th object (depth
/// first) written twice, or None when there is no such object.
fn with_duplicate(v: &Value, at: usize) -> Option<String> {
    fn go(v: &Value, at: usize, seen: &mut usize, out: &mut String) -> bool {
        match v {
            Value::Object(m) => {
                let me = *seen;
                *seen += 1;
                let mut keys: Vec<&String> = m.keys().collect();
                keys.sort();
                let mut hit = false;
                out.push('{');
                if me == at
                    && let Some(k) = keys.first()
                {
                    out.push_str(&Value::String((*k).clone()).to_string());
                    out.push_str(":0,");
                    hit = true;
                }
                for (i, k) in keys.iter().enumerate() {
                    if i > 0 {
                        out.push(',');
                    }
                    out.push_str(&Value::String((*k).clone()).to_string());
                    out.push(':');
                    hit |= go(&m[*k], at, seen, out);
                }
                out.push('}');
                hit
            }
            Value::Array(a) => {
                let mut hit = false;
                out.push('[');
                for (i, x) in a.iter().enumerate() {
                    if i > 0 {
                        out.push(',');
                    }
                    hit |= go(x, at, seen, out);
                }
                out.push(']');
                hit
            }
            other => {
                out.push_str(&other.to_string());
                false
            }
        }
    }
    let mut out = String::new();
    let mut seen = 0;
    go(v, at, &mut seen, &mut out).then_some(out)
}

fuzz_target!(|data: &[u8]| {
    let Some((&pick, rest)) = data.split_first() else {
        return;
    };
    let Ok(text) = std::str::from_utf8(rest) else {
        return;
    };
    let (schema, args) = if pick < 200 {
        (schemas()[pick as usize % 4].clone(), text)
    } else {
        let (s, a) = text.split_once('\u{1}').unwrap_or((text, "{}"));
        let Ok(schema) = parse_strict(s, MAX_SCHEMA_LEN) else {
            return;
        };
        (schema, a)
    };
    // Property 4 on the arguments text, whatever the schema.
    let strict = parse_strict(args, MAX_ARGS_LEN);
    let loose = serde_json::from_str::<Value>(args);
    match (&strict, &loose) {
        (Ok(a), Ok(b)) => assert_eq!(
            a, b,
            "the strict and serde_json readings differ for {args:?}"
        ),
        (Ok(a), Err(e)) => panic!("strict accepts {args:?} as {a}, serde_json refuses it: {e}"),
        (Err(e), Ok(_)) if e.kind() == "syntax" => {
            panic!("strict calls {args:?} a syntax error ({e}), serde_json accepts it")
        }
        _ => {}
    }
    // The meta checker's gate: only schemas the registry would accept.
    let Ok(v) = ArgsValidator::new("fuzz", &schema) else {
        return;
    };
    let _ = v.expected();
    match v.check_text(args) {
        Err(e) => {
            let _ = e.to_model_message();
        }
        Ok(value) => {
            let canon = canonical(&value);
            // A value is measured as serialised (serde's number forms:
            // `1e9` is `1000000000.0`), so it may only be refused as too
            // large, and only when that form is.
            if let Err(e) = v.check_value(&value) {
                assert!(
                    matches!(e, capsaga_core::validate::CallError::NotJson { ref error, .. } if error.kind() == "too_large")
                        && canon.len() > MAX_ARGS_LEN,
                    "accepted {args:?}, check_value refuses: {e}"
                );
                return;
            }
            let again = v.check_text(&canon).unwrap_or_else(|e| {
                panic!("accepted {args:?}, its canonical form {canon:?} is refused: {e}")
            });
            assert_eq!(again, value, "canonical form changed the value");
            for at in 0..8 {
                let Some(dup) = with_duplicate(&value, at) else {
                    break;
                };
                let e =
                    parse_strict(&dup, usize::MAX).expect_err("a duplicated key must be refused");
                assert_eq!(e.kind(), "duplicate_key", "{dup}: {e}");
                assert!(v.check_text(&dup).is_err(), "{dup} validated");
            }
        }
    }
});
