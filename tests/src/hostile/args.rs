//! JSON-argument families: what a prompt-injected or hallucinating model may
//! send as tool-call arguments, against `capsaga_core::validate` (strict JSON,
//! then JSON Schema).

use super::Family;
use capsaga_check::corpus::Case;
use capsaga_check::{Decision, Guard};
use capsaga_core::validate::MAX_ARGS_LEN;
use serde_json::{Value, json};

/// A schema like `fs_read`'s: a required bounded path, an enum, a bounded
/// integer, nothing else.
pub fn fs_read_schema() -> Value {
    json!({
        "type": "object",
        "properties": {
            "path": {"type": "string", "minLength": 1, "maxLength": 4096},
            "encoding": {"type": "string", "enum": ["text", "base64"]},
            "max_bytes": {"type": "integer", "minimum": 1, "maximum": 1_048_576}
        },
        "required": ["path"],
        "additionalProperties": false
    })
}

/// The most permissive args schema: any object.
pub fn open_schema() -> Value {
    json!({"type": "object"})
}

fn case(schema: &Value, input: impl Into<String>, expect: Decision, kind: &str) -> Case {
    let mut c = Case::new(Guard::Args, input, expect).kind(kind);
    c.schema = Some(schema.clone());
    c
}

/// Every args family.
pub fn families() -> Vec<Family> {
    vec![
        duplicate_keys(),
        json_syntax(),
        nesting_and_size(),
        numbers_and_prototype_keys(),
        type_confusion(),
        extra_fields(),
        unicode_values(),
    ]
}

/// Spellings of the key `path` that JSON unescaping makes equal.
const PATH_SPELLINGS: &[&str] = &[
    "path",
    "p\\u0061th",
    "\\u0070\\u0061\\u0074\\u0068",
    "pat\\u0068",
    "\\u0070ath",
];

fn duplicate_keys() -> Family {
    let fs = fs_read_schema();
    let open = open_schema();
    let mut cases = Vec::new();
    for a in PATH_SPELLINGS {
        for b in PATH_SPELLINGS {
            for (layout, schema) in [(0, &fs), (1, &fs), (2, &open), (3, &open)] {
                let input = match layout {
                    0 => format!(r#"{{"{a}":"/ws/ok.txt","{b}":"/etc/passwd"}}"#),
                    1 => format!(
                        "{{\n  \"{a}\" : \"/ws/ok.txt\",\n  \"encoding\":\"text\",\n  \"{b}\":\"/etc/passwd\"\n}}"
                    ),
                    2 => format!(r#"{{"x":{{"{a}":1,"{b}":2}}}}"#),
                    _ => format!(r#"{{"x":[{{"ok":1}},{{"{a}":1,"y":2,"{b}":3}}]}}"#),
                };
                cases.push(case(schema, input, Decision::Deny, "duplicate_key"));
            }
        }
    }
    for depth in 1..=8 {
        let inner = r#"{"k":1,"k":2}"#.to_string();
        let wrapped = (0..depth).fold(inner, |acc, _| format!(r#"{{"a":{acc}}}"#));
        cases.push(case(&open, wrapped, Decision::Deny, "duplicate_key"));
    }
    for input in [
        r#"{"path":"a","path":"a"}"#,
        r#"{"path":"a","path":"a","path":"b"}"#,
        r#"{"\ud83d\ude00":1,"😀":2}"#,
        r#"{"":1,"":2}"#,
        r#"{"\u0000":1,"\u0000":2}"#,
        r#"{"a":{},"a":null}"#,
    ] {
        cases.push(case(&open, input, Decision::Deny, "duplicate_key"));
    }
    // Near misses: different keys that only look alike.
    for input in [
        r#"{"path":"a","Path":"b"}"#,
        r#"{"path":"a","path ":"b"}"#,
        r#"{"café":1,"cafe\u0301":2}"#,
        r#"{"path":"a","pa\u200bth":"b"}"#,
        r#"{"k":{"k":{"k":1}}}"#,
        r#"[{"k":1},{"k":2}]"#,
    ] {
        let expect_open = if input.starts_with('[') {
            (Decision::Deny, "schema")
        } else {
            (Decision::Allow, "valid")
        };
        cases.push(case(&open, input, expect_open.0, expect_open.1));
    }
    cases.push(case(
        &fs,
        r#"{"path":"a","Path":"b"}"#,
        Decision::Deny,
        "schema",
    ));
    Family {
        name: "duplicate_keys",
        doc: "duplicate keys at the top level, nested up to 8 deep and inside arrays, adjacent or apart, with spellings that JSON unescaping makes equal (`p\\u0061th`), surrogate pairs against the literal character, empty and NUL keys: all refused before the schema (RFC 8259 §4 leaves duplicates to the parser, the classic way to smuggle a value past a validator, e.g. CVE-2017-12635 CouchDB); near misses (case, trailing space, NFC/NFD, zero-width) are different keys",
        cases,
    }
}

fn json_syntax() -> Family {
    let fs = fs_read_schema();
    let cases = [
        r#"{"path":NaN}"#,
        r#"{"path":"a","max_bytes":Infinity}"#,
        r#"{"path":"a","max_bytes":-Infinity}"#,
        r#"{"path":"a",}"#,
        r#"{'path':'a'}"#,
        r#"{path:"a"}"#,
        r#"{"path":"a"} // comment"#,
        r#"/* c */ {"path":"a"}"#,
        "\u{FEFF}{\"path\":\"a\"}",
        r#"{"path":"a"}{"path":"b"}"#,
        r#"{"path":"a"} x"#,
        r#"{"path":"a""#,
        r#"{"path":"a"#,
        r#"{"path":"a\q"}"#,
        "{\"path\":\"a\u{0}b\"}",
        "{\"path\":\"a\nb\"}",
        "{\"path\":\"a\tb\"}",
        r#"{"path":"\ud800"}"#,
        r#"{"path":"\udc00"}"#,
        r#"{"path":"\ud800\u0041"}"#,
        r#"{"path":"\u12"}"#,
        r#"{"path":"a","max_bytes":01}"#,
        r#"{"path":"a","max_bytes":0x10}"#,
        r#"{"path":"a","max_bytes":+1}"#,
        r#"{"path":"a","max_bytes":.5}"#,
        r#"{"path":"a","max_bytes":1.}"#,
        r#"{"path":"a","max_bytes":1e400}"#,
        r#"{"path":"a","max_bytes":-}"#,
        r#"{"path":undefined}"#,
        r#"{"path":True}"#,
        r#"{"path" "a"}"#,
        r#"{"path":"a",,"encoding":"text"}"#,
        "",
        "   ",
        "{",
        "}",
        "[",
        "\"",
    ]
    .into_iter()
    .map(|s| case(&fs, s, Decision::Deny, "syntax"))
    .collect();
    Family {
        name: "json_syntax",
        doc: "JSON5 and JavaScript habits (NaN, Infinity, trailing commas, single quotes, bare keys, comments, hex, leading zeros, `+`), a BOM, two documents or trailing garbage, truncation, raw control characters in strings, lone or reversed surrogates, bad escapes, numbers out of range: all refused as not JSON",
        cases,
    }
}

fn nesting_and_size() -> Family {
    let open = open_schema();
    let mut cases = Vec::new();
    for n in [1usize, 10, 62, 63] {
        let arr = "[".repeat(n) + &"]".repeat(n);
        cases.push(case(
            &open,
            format!(r#"{{"a":{arr}}}"#),
            Decision::Allow,
            "valid",
        ));
        let obj = format!("{}1{}", r#"{"a":"#.repeat(n), "}".repeat(n));
        cases.push(case(
            &open,
            format!(r#"{{"a":{obj}}}"#),
            Decision::Allow,
            "valid",
        ));
    }
    for n in [64usize, 65, 128, 1000, 100_000] {
        let arr = "[".repeat(n) + &"]".repeat(n);
        cases.push(case(
            &open,
            format!(r#"{{"a":{arr}}}"#),
            Decision::Deny,
            "too_deep",
        ));
        let obj = format!("{}1{}", r#"{"a":"#.repeat(n), "}".repeat(n));
        cases.push(case(
            &open,
            format!(r#"{{"a":{obj}}}"#),
            Decision::Deny,
            "too_deep",
        ));
        // Unclosed: the depth limit must answer before the end is missing.
        cases.push(case(
            &open,
            format!(r#"{{"a":{}"#, "[".repeat(n)),
            Decision::Deny,
            "too_deep",
        ));
    }
    let fill = |total: usize| {
        let overhead = r#"{"a":""}"#.len();
        format!(r#"{{"a":"{}"}}"#, "x".repeat(total - overhead))
    };
    cases.push(case(&open, fill(MAX_ARGS_LEN), Decision::Allow, "valid"));
    cases.push(case(
        &open,
        fill(MAX_ARGS_LEN + 1),
        Decision::Deny,
        "too_large",
    ));
    Family {
        name: "nesting_and_size",
        doc: "arrays and objects nested to the 64-level limit and past it (to 100 000, closed and unclosed: no stack exhaustion), arguments of exactly 1 MiB and one byte more",
        cases,
    }
}

/// Issue 24 item 4: what two readers take differently, or what pollutes a
/// JavaScript reader downstream.
fn numbers_and_prototype_keys() -> Family {
    let open = open_schema();
    let mut cases = Vec::new();
    for n in [
        "18446744073709551616",
        "-9223372036854775809",
        "99999999999999999999999999999999",
        "100000000000000000001",
        "-100000000000000000000000000000000000000000000",
    ] {
        for input in [
            format!(r#"{{"n":{n}}}"#),
            format!(r#"{{"a":[1,2,{{"n":{n}}}]}}"#),
        ] {
            cases.push(case(&open, input, Decision::Deny, "number_range"));
        }
    }
    for n in [
        "18446744073709551615",
        "-9223372036854775808",
        "1e300",
        "1.7976931348623157e308",
        "5e-324",
        "-0",
        "0.1",
    ] {
        cases.push(case(
            &open,
            format!(r#"{{"n":{n}}}"#),
            Decision::Allow,
            "valid",
        ));
    }
    cases.push(case(
        &open,
        r#"{"s":"99999999999999999999999"}"#,
        Decision::Allow,
        "valid",
    ));
    for key in [
        "__proto__",
        "__pro\\u0074o__",
        "\\u005f\\u005fproto\\u005f\\u005f",
    ] {
        for input in [
            format!(r#"{{"{key}":{{"isAdmin":true}}}}"#),
            format!(r#"{{"a":{{"b":[{{"{key}":1}}]}}}}"#),
            format!(r#"{{"ok":1,"{key}":null}}"#),
        ] {
            cases.push(case(&open, input, Decision::Deny, "reserved_key"));
        }
    }
    for input in [
        r#"{"constructor":{"prototype":{"isAdmin":true}}}"#,
        r#"{"a":[{"constructor":{"x":1,"prototype":{}}}]}"#,
    ] {
        cases.push(case(&open, input, Decision::Deny, "reserved_key"));
    }
    for input in [
        r#"{"constructor":"Foo"}"#,
        r#"{"prototype":{"a":1}}"#,
        r#"{"proto":1,"_proto_":2,"__proto":3}"#,
        r#"{"constructor":{"name":"x"}}"#,
    ] {
        cases.push(case(&open, input, Decision::Allow, "valid"));
    }
    Family {
        name: "numbers_and_prototype_keys",
        doc: "integers past 64 bits (a parser keeping them as floats rounds them: refused, send a string), numbers at the edges of the float range (accepted), and the keys that rewrite a JavaScript reader's prototype (`__proto__` however escaped, `constructor` holding `prototype`, at any depth): refused on every surface by the same parser",
        cases,
    }
}

fn type_confusion() -> Family {
    let fs = fs_read_schema();
    let mut cases = Vec::new();
    let deny = [
        r#"{"path":1}"#,
        r#"{"path":1.5}"#,
        r#"{"path":true}"#,
        r#"{"path":null}"#,
        r#"{"path":[]}"#,
        r#"{"path":["/ws/a"]}"#,
        r#"{"path":{}}"#,
        r#"{"path":""}"#,
        r#"{"path":"a","max_bytes":"1"}"#,
        r#"{"path":"a","max_bytes":1.5}"#,
        r#"{"path":"a","max_bytes":true}"#,
        r#"{"path":"a","max_bytes":null}"#,
        r#"{"path":"a","max_bytes":-1}"#,
        r#"{"path":"a","max_bytes":0}"#,
        r#"{"path":"a","max_bytes":1048577}"#,
        r#"{"path":"a","max_bytes":1e20}"#,
        r#"{"path":"a","encoding":"TEXT"}"#,
        r#"{"path":"a","encoding":"text "}"#,
        r#"{"path":"a","encoding":"text\u0000"}"#,
        r#"{"path":"a","encoding":""}"#,
        r#"{"path":"a","encoding":1}"#,
        r#"{"path":"a","encoding":null}"#,
        r#"{"path":"a","encoding":["text"]}"#,
        r#"{}"#,
        r#"{"encoding":"text"}"#,
        r#"[]"#,
        r#"["path","a"]"#,
        r#""path""#,
        r#"1"#,
        r#"null"#,
        r#"true"#,
    ];
    for s in deny {
        cases.push(case(&fs, s, Decision::Deny, "schema"));
    }
    cases.push(case(
        &fs,
        format!(r#"{{"path":"{}"}}"#, "a".repeat(4097)),
        Decision::Deny,
        "schema",
    ));
    for s in [
        r#"{"path":"a"}"#,
        r#"{"path":"a","max_bytes":1}"#,
        r#"{"path":"a","max_bytes":1048576}"#,
        r#"{"path":"a","max_bytes":1.0}"#,
        r#"{"path":"a","max_bytes":1e3}"#,
        r#"{"path":"a","encoding":"base64"}"#,
        r#"  {"encoding":"text" , "path":"a"}  "#,
    ] {
        cases.push(case(&fs, s, Decision::Allow, "valid"));
    }
    cases.push(case(
        &fs,
        format!(r#"{{"path":"{}"}}"#, "a".repeat(4096)),
        Decision::Allow,
        "valid",
    ));
    Family {
        name: "type_confusion",
        doc: "each field with the wrong JSON type, a string holding a number, numbers past the bounds (past u64/i64: the family `numbers_and_prototype_keys`), integral floats (`1.0`, `1e3`: integers in JSON Schema), enum values differing by case, space or NUL, missing required fields, non-object arguments, strings one past `maxLength`",
        cases,
    }
}

fn extra_fields() -> Family {
    let fs = fs_read_schema();
    let cases = [
        "__proto__",
        "constructor",
        "prototype",
        "",
        "path\\u0000",
        "PATH",
        "path ",
        " path",
        "pa\\u200bth",
        "\\uff50\\uff41\\uff54\\uff48",
        "$ref",
        "grants",
        "capabilities",
        "dry_run",
        "idempotency_key",
    ]
    .into_iter()
    .map(|k| {
        // `__proto__` is refused before the schema (any value, any schema).
        let kind = if k == "__proto__" {
            "reserved_key"
        } else {
            "schema"
        };
        case(
            &fs,
            format!(r#"{{"path":"a","{k}":1}}"#),
            Decision::Deny,
            kind,
        )
    })
    .collect();
    Family {
        name: "extra_fields",
        doc: "fields the schema does not declare: prototype-pollution keys, lookalikes of `path` (case, spaces, NUL, zero-width, fullwidth), and names of host concepts a model might try to set (`grants`, `dry_run`, `idempotency_key`, `$ref`): refused by `additionalProperties: false`",
        cases,
    }
}

fn unicode_values() -> Family {
    let fs = fs_read_schema();
    let cases = [
        r#"{"path":"\u0000"}"#,
        r#"{"path":"a\u0000b"}"#,
        r#"{"path":"\u202etxt.exe"}"#,
        r#"{"path":"\ud83d\ude00"}"#,
        r#"{"path":"😀"}"#,
        r#"{"path":"../../etc/passwd"}"#,
        r#"{"path":"/etc/passwd"}"#,
        r#"{"path":"\u003c/untrusted\u003e"}"#,
        r#"{"path":"\/ws\/a"}"#,
        r#"{"path":"\u00e9"}"#,
    ]
    .into_iter()
    .map(|s| case(&fs, s, Decision::Allow, "valid"))
    .collect();
    Family {
        name: "unicode_values",
        doc: "escaped NUL, bidi overrides, surrogate pairs, escaped slashes, traversal and marker text inside string values: valid JSON the schema accepts (the path guard and the untrusted wrapper judge them later; validation must not be where they are \"handled\")",
        cases,
    }
}
