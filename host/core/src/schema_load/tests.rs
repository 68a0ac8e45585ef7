//! Schema admission from the tool author's and the attacker's side: each rule
//! with several inputs.

use super::*;
use serde_json::json;

fn refused(schema: Value) -> String {
    match compile(&schema) {
        Ok(_) => panic!("accepted: {schema}"),
        Err(e) => e.0,
    }
}

fn valid(schema: &Value, instance: Value) -> bool {
    compile(schema)
        .unwrap_or_else(|e| panic!("{schema}: {e}"))
        .is_valid(&instance)
}

#[test]
fn idn_formats_are_checked() {
    for (format, good, bad) in [
        ("idn-hostname", "bücher.example", "-> $1.00 <--"),
        ("idn-hostname", "例え.テスト", "a..b"),
        ("idn-email", "user@bücher.example", "not an address"),
        ("idn-email", "ü@例え.テスト", "@example.com"),
        ("hostname", "api.example.com", "-bad-.example"),
        ("email", "a@example.com", "a@@example.com"),
        ("iri", "https://例え.テスト/パス", "not an iri"),
        ("ipv4", "10.0.0.1", "010.0.0.1"),
        (
            "uuid",
            "2eb8aa08-aa98-11ea-b4aa-73b441d16380",
            "2eb8aa08aa98",
        ),
    ] {
        let s = json!({"type": "object", "properties": {"h": {"format": format}}});
        assert!(valid(&s, json!({ "h": good })), "{format}: {good}");
        assert!(!valid(&s, json!({ "h": bad })), "{format}: {bad}");
    }
}

#[test]
fn schemars_numeric_formats_are_known() {
    let s = json!({"type": "object", "properties": {
        "n": {"type": "integer", "format": "uint64", "minimum": 0},
        "i": {"type": "integer", "format": "int32"},
        "f": {"type": "number", "format": "double"},
        "u": {"type": "integer", "format": "uint"},
        "t": {"type": "string", "format": "uint8"}
    }});
    assert!(valid(
        &s,
        json!({"n": 5, "i": -3, "f": 1.5, "u": 7, "t": "255"})
    ));
    assert!(!valid(&s, json!({"t": "256"})));
    assert!(!valid(&s, json!({"n": "5"})));
}

#[test]
fn unknown_or_misspelt_formats_refuse_the_schema() {
    for format in [
        "hostnmae",
        "e-mail",
        "uri_reference",
        "HOSTNAME",
        "",
        "date-tim",
    ] {
        let e = refused(json!({"type": "object", "properties": {"h": {"format": format}}}));
        assert!(e.contains("format"), "{format}: {e}");
    }
    // Deep inside, and under a draft-07 `$schema`, too.
    let e = refused(json!({
        "$schema": "http://json-schema.org/draft-07/schema#",
        "type": "object",
        "definitions": {"x": {"items": {"format": "ipv5"}}},
        "properties": {"a": {"$ref": "#/definitions/x"}}
    }));
    assert!(e.contains("format"), "{e}");
}

#[test]
fn draft_07_is_honoured() {
    let s = json!({
        "$schema": "http://json-schema.org/draft-07/schema#",
        "type": "object",
        "properties": {
            "pair": {
                "type": "array",
                "items": [{"type": "string"}, {"type": "integer"}],
                "additionalItems": false
            },
            "v": {"dependencies": {"a": ["b"]}}
        }
    });
    assert!(valid(&s, json!({"pair": ["a", 1]})));
    assert!(!valid(&s, json!({"pair": [1, "a"]})));
    assert!(!valid(&s, json!({"pair": ["a", 1, 2]})));
    assert!(!valid(&s, json!({"v": {"a": 1}})));
    // In 2020-12 (the default), `prefixItems` is the tuple form.
    let s = json!({"type": "object", "properties": {"pair": {"prefixItems": [{"type": "string"}], "items": false}}});
    assert!(valid(&s, json!({"pair": ["a"]})));
    assert!(!valid(&s, json!({"pair": ["a", 1]})));
    // A meta-schema nobody can fetch is refused.
    refused(json!({"$schema": "https://example.com/my-meta", "type": "object"}));
}

#[test]
fn remote_and_unresolvable_refs_refuse_the_schema() {
    for r in [
        "https://example.com/schema.json",
        "http://json-schema.org/draft-07/schema#/definitions/x",
        "file:///etc/passwd",
        "other.json",
        "#/definitions/missing",
        "#nowhere",
    ] {
        let e = refused(json!({"type": "object", "properties": {"a": {"$ref": r}}}));
        assert!(!e.is_empty(), "{r}");
    }
    // Local references resolve.
    let s = json!({
        "type": "object",
        "$defs": {"n": {"type": "integer"}, "a": {"$anchor": "named", "type": "string"}},
        "properties": {"x": {"$ref": "#/$defs/n"}, "y": {"$ref": "#named"}}
    });
    assert!(valid(&s, json!({"x": 1, "y": "s"})));
    assert!(!valid(&s, json!({"x": "1"})));
}

#[test]
fn same_instance_cycles_refuse_the_schema() {
    let cycles = [
        // a → b → a, the example.
        json!({"type": "object", "$defs": {"a": {"$ref": "#/$defs/b"}, "b": {"$ref": "#/$defs/a"}},
               "properties": {"x": {"$ref": "#/$defs/a"}}}),
        // A node referring to itself.
        json!({"type": "object", "$defs": {"a": {"$ref": "#/$defs/a"}}}),
        // The root through allOf.
        json!({"type": "object", "allOf": [{"$ref": "#"}]}),
        // anyOf: "a string, or a" is anything.
        json!({"type": "object", "$defs": {"a": {"anyOf": [{"type": "string"}, {"$ref": "#/$defs/a"}]}},
               "properties": {"x": {"$ref": "#/$defs/a"}}}),
        // not, if/then/else, oneOf, dependentSchemas.
        json!({"type": "object", "$defs": {"a": {"not": {"$ref": "#/$defs/a"}}}}),
        json!({"type": "object", "$defs": {"a": {"if": {"$ref": "#/$defs/b"}}, "b": {"else": {"$ref": "#/$defs/a"}}}}),
        json!({"type": "object", "$defs": {"a": {"oneOf": [{"$ref": "#/$defs/b"}]}, "b": {"then": {"$ref": "#/$defs/a"}}}}),
        json!({"type": "object", "dependentSchemas": {"k": {"$ref": "#"}}}),
        // Through an anchor and an embedded resource.
        json!({"type": "object", "$defs": {"a": {"$anchor": "A", "allOf": [{"$ref": "#A"}]}}}),
        json!({"type": "object", "$defs": {"a": {"$id": "a.json", "$ref": "b.json"},
                                            "b": {"$id": "b.json", "$ref": "a.json"}}}),
        // Draft-07: definitions, `$id` anchors, `dependencies`.
        json!({"$schema": "http://json-schema.org/draft-07/schema#", "type": "object",
               "definitions": {"a": {"$ref": "#/definitions/b"}, "b": {"$ref": "#/definitions/a"}}}),
        json!({"$schema": "http://json-schema.org/draft-07/schema#", "type": "object",
               "definitions": {"a": {"$id": "#A", "allOf": [{"$ref": "#A"}]}}}),
        json!({"$schema": "http://json-schema.org/draft-07/schema#", "type": "object",
               "dependencies": {"k": {"$ref": "#"}}}),
        // A longer chain with percent-encoded and escaped pointers.
        json!({"type": "object", "$defs": {"a b": {"$ref": "#/$defs/c~1d"}, "c/d": {"allOf": [{"$ref": "#/$defs/a%20b"}]}}}),
    ];
    for s in cycles {
        let e = refused(s.clone());
        assert!(e.contains("cycle"), "{s}: {e}");
    }
}

#[test]
fn recursion_through_children_is_fine() {
    // A tree: recursion descends into a child value each time.
    let tree = json!({
        "type": "object",
        "properties": {"value": {"type": "integer"}, "children": {"type": "array", "items": {"$ref": "#"}}},
        "additionalProperties": false
    });
    assert!(valid(
        &tree,
        json!({"value": 1, "children": [{"value": 2, "children": []}]})
    ));
    assert!(!valid(
        &tree,
        json!({"value": 1, "children": [{"value": "x"}]})
    ));
    // The same schema twice on the same value is no cycle.
    let twice = json!({
        "type": "object",
        "$defs": {"int": {"type": "integer"}},
        "allOf": [{"properties": {"foo": {"$ref": "#/$defs/int"}}}, {"additionalProperties": {"$ref": "#/$defs/int"}}]
    });
    assert!(valid(&twice, json!({"foo": 1})));
    assert!(!valid(&twice, json!({"foo": "a"})));
    // Linked list through a property; mutual recursion through items.
    let list = json!({
        "type": "object",
        "$defs": {"node": {"type": "object", "properties": {"next": {"$ref": "#/$defs/node"}}},
                  "a": {"type": "array", "items": {"$ref": "#/$defs/b"}},
                  "b": {"anyOf": [{"type": "integer"}, {"$ref": "#/$defs/a"}]}},
        "properties": {"head": {"$ref": "#/$defs/node"}, "nested": {"$ref": "#/$defs/a"}}
    });
    assert!(valid(
        &list,
        json!({"head": {"next": {"next": {}}}, "nested": [1, [2, [3]]]})
    ));
    assert!(!valid(&list, json!({"nested": [1, ["x"]]})));
    // Properties named like applicators are data of `properties`, not keywords.
    let named = json!({"type": "object", "properties": {"not": {"$ref": "#/properties"}}});
    assert!(same_instance_cycle(&named).is_none());
}
