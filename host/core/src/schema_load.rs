//! Admission of a JSON Schema at load: a tool's args schema is compiled as
//! written, or refused with the reason, never half-understood.
//!
//! [`compile`] is the one place where capsaga turns a schema into a
//! validator ([`crate::validate::ArgsValidator`] and `capsaga check args`
//! both go through it). Its rules:
//!
//! - **The draft is the schema's own.** `$schema` selects the dialect
//!   (draft 4, 6, 7, 2019-09, 2020-12; so draft-07's tuple `items: [...]` and
//!   `additionalItems` mean what they mean there); without `$schema` the
//!   schema is read as 2020-12. A `$schema` naming an unknown meta-schema is
//!   refused (it would have to be fetched).
//! - **`format` asserts.** Every format of the draft is checked, the
//!   internationalised ones too (`idn-hostname`, `idn-email`, `iri`,
//!   `iri-reference`: the `jsonschema` crate's `idna` feature), and a format
//!   the validator does not know (`"hostnmae"`) refuses the schema: an
//!   author's typo must not switch validation off silently. The numeric
//!   formats `schemars` writes (`uint64`, `int32`, `double`, ...) are known.
//! - **Nothing is fetched.** A `$ref` must resolve inside the document
//!   (a JSON pointer, an anchor, or an embedded `$id`); a remote or
//!   unresolvable `$ref` refuses the schema. The crate is built without its
//!   HTTP and file resolvers.
//! - **No same-instance cycle.** A chain of keywords that apply a schema to
//!   the *same* value (`$ref`, `$dynamicRef`, `$recursiveRef`, `allOf`,
//!   `anyOf`, `oneOf`, `not`, `if`/`then`/`else`, `dependentSchemas`,
//!   draft-07 `dependencies`) that comes back to where it started never
//!   terminates by itself; the validator cuts such a loop by answering
//!   "valid" for it, so `a → b → a` validates anything. Such a schema is
//!   refused ([`same_instance_cycle`]). Recursion through a child value
//!   (`properties`, `items`, ...) is fine: the value is finite.
//!
//! Source of the rules: JSON Schema Core and Validation 2020-12 (§7.7
//! "Applicators", §8.2.3 `$ref`, Validation §7 `format`), draft-07 §8.3 and
//! §9; the official JSON-Schema-Test-Suite runs against [`compile`] in
//! `tests/tests/json_schema_suite.rs`, where the cases capsaga decides
//! differently are listed and justified.

use serde_json::Value;
use std::collections::BTreeMap;

/// Why a schema was refused at load.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct SchemaError(pub String);

/// The base URI of a document without `$id`: only used to resolve relative
/// references inside the document, never fetched.
const DOCUMENT_BASE: &str = "https://capsaga.invalid/schema.json";

/// Compile `schema` under the rules of the module documentation.
///
/// # Errors
/// [`SchemaError`] naming the first rule broken: a same-instance cycle, an
/// unknown format, a remote or unresolvable `$ref`, an unknown `$schema`, or
/// anything else the `jsonschema` crate refuses (a malformed keyword).
pub fn compile(schema: &Value) -> Result<jsonschema::Validator, SchemaError> {
    if let Some(cycle) = same_instance_cycle(schema) {
        return Err(SchemaError(format!(
            "the schema applies itself to the same value in a cycle ({}), which validates anything; \
             put a constraint that descends into a property or an item on the way, or remove the cycle",
            cycle.join(" → ")
        )));
    }
    let mut options = jsonschema::options()
        .should_validate_formats(true)
        .should_ignore_unknown_formats(false);
    for (name, check) in NUMERIC_FORMATS {
        options = options.with_format(*name, *check);
    }
    options
        .build(schema)
        .map_err(|e| SchemaError(explain(&e.to_string())))
}

/// The numeric formats `schemars` writes on integer and number fields (the
/// SDK derives tools' schemas with it): known, and checked on strings (a
/// decimal number in the type's range); on numbers `format` does not apply.
type FormatCheck = fn(&str) -> bool;
const NUMERIC_FORMATS: &[(&str, FormatCheck)] = &[
    ("int8", |s| s.parse::<i8>().is_ok()),
    ("int16", |s| s.parse::<i16>().is_ok()),
    ("int32", |s| s.parse::<i32>().is_ok()),
    ("int64", |s| s.parse::<i64>().is_ok()),
    ("int128", |s| s.parse::<i128>().is_ok()),
    ("int", |s| s.parse::<i64>().is_ok()),
    ("uint8", |s| s.parse::<u8>().is_ok()),
    ("uint16", |s| s.parse::<u16>().is_ok()),
    ("uint32", |s| s.parse::<u32>().is_ok()),
    ("uint64", |s| s.parse::<u64>().is_ok()),
    ("uint128", |s| s.parse::<u128>().is_ok()),
    ("uint", |s| s.parse::<u64>().is_ok()),
    ("float", |s| s.parse::<f32>().is_ok_and(f32::is_finite)),
    ("double", |s| s.parse::<f64>().is_ok_and(f64::is_finite)),
];

/// The crate's message, with what capsaga means by it.
fn explain(message: &str) -> String {
    let m: String = message.chars().take(300).collect();
    if m.contains("Unknown format") {
        format!(
            "{m}; capsaga refuses a schema whose format it cannot check (a misspelt format would switch validation off)"
        )
    } else if m.contains("Resource") || m.contains("retriev") || m.contains("resolve") {
        format!(
            "{m}; capsaga never fetches a schema: every `$ref` and `$schema` must resolve inside the document or name a known draft"
        )
    } else {
        m
    }
}

/// Keywords whose value is a schema applied to the same instance.
const SAME_INSTANCE_ONE: &[&str] = &["not", "if", "then", "else"];
/// Keywords whose value is an array of schemas applied to the same instance.
const SAME_INSTANCE_ARRAY: &[&str] = &["allOf", "anyOf", "oneOf"];
/// Keywords whose value is an object of schemas applied to the same instance
/// (draft-07 `dependencies` also holds arrays of names: only schemas count).
const SAME_INSTANCE_MAP: &[&str] = &["dependentSchemas", "dependencies"];
/// Other keywords whose value is an object of named schemas.
const SCHEMA_MAP: &[&str] = &["properties", "patternProperties", "$defs", "definitions"];
/// Reference keywords.
const REFS: &[&str] = &["$ref", "$dynamicRef", "$recursiveRef"];
/// Keywords whose values are data, not schemas: never walked.
const DATA: &[&str] = &["const", "enum", "examples", "default"];

/// One schema object of the document, by JSON pointer.
#[derive(Debug, Default)]
struct Node {
    /// Pointers of the schemas applied to the same instance.
    edges: Vec<String>,
    /// References, already resolved to absolute URIs.
    refs: Vec<String>,
}

/// What the walk learns about the document.
#[derive(Debug, Default)]
struct Index {
    nodes: BTreeMap<String, Node>,
    /// Resource URI (no fragment) → pointer of its root.
    resources: BTreeMap<String, String>,
    /// `resource#anchor` → pointer.
    anchors: BTreeMap<String, String>,
}

/// The first same-instance cycle of `schema`, as the JSON pointers of its
/// members (`#` for the root), or `None`. References are resolved inside the
/// document (JSON pointers, `$anchor`, `$dynamicAnchor`, draft-07 `$id`
/// fragments, embedded `$id` resources); one that does not resolve adds no
/// edge (the compiler refuses it on its own).
pub fn same_instance_cycle(schema: &Value) -> Option<Vec<String>> {
    let base = url::Url::parse(DOCUMENT_BASE).ok()?;
    let mut index = Index::default();
    walk(schema, "", &base, &mut index);
    // Resolve references into edges.
    let resolved: Vec<(String, Vec<String>)> = index
        .nodes
        .iter()
        .map(|(ptr, node)| {
            let targets = node
                .refs
                .iter()
                .filter_map(|r| resolve(&index, schema, r))
                .collect();
            (ptr.clone(), targets)
        })
        .collect();
    for (ptr, targets) in resolved {
        if let Some(n) = index.nodes.get_mut(&ptr) {
            n.edges.extend(targets);
        }
    }
    find_cycle(&index.nodes)
}

fn walk(v: &Value, ptr: &str, base: &url::Url, index: &mut Index) {
    let Value::Object(m) = v else { return };
    let mut base = base.clone();
    if let Some(id) = m.get("$id").and_then(Value::as_str) {
        if let Some(anchor) = id.strip_prefix('#') {
            // draft-07 and earlier: `"$id": "#name"` is an anchor.
            index
                .anchors
                .insert(anchor_key(&base, anchor), ptr.to_string());
        } else if let Ok(u) = base.join(id) {
            base = u;
            let mut doc = base.clone();
            doc.set_fragment(None);
            index.resources.insert(doc.to_string(), ptr.to_string());
        }
    }
    if ptr.is_empty() {
        let mut doc = base.clone();
        doc.set_fragment(None);
        index.resources.entry(doc.to_string()).or_default();
    }
    for key in ["$anchor", "$dynamicAnchor"] {
        if let Some(a) = m.get(key).and_then(Value::as_str) {
            index.anchors.insert(anchor_key(&base, a), ptr.to_string());
        }
    }
    let mut node = Node::default();
    for key in REFS {
        if let Some(r) = m.get(*key).and_then(Value::as_str) {
            // `$recursiveRef: "#"` (2019-09) points at the resource root.
            if let Ok(u) = base.join(r) {
                node.refs.push(u.to_string());
            }
        }
    }
    for (k, sub) in m {
        let k = k.as_str();
        if DATA.contains(&k) {
            continue;
        }
        let child = format!("{ptr}/{}", escape(k));
        let named = SCHEMA_MAP.contains(&k) || SAME_INSTANCE_MAP.contains(&k);
        match sub {
            Value::Object(inner) if named => {
                for (name, s) in inner {
                    let at = format!("{child}/{}", escape(name));
                    if SAME_INSTANCE_MAP.contains(&k) && s.is_object() {
                        node.edges.push(at.clone());
                    }
                    walk(s, &at, &base, index);
                }
            }
            Value::Object(_) => {
                if SAME_INSTANCE_ONE.contains(&k) {
                    node.edges.push(child.clone());
                }
                walk(sub, &child, &base, index);
            }
            Value::Array(items) => {
                for (i, s) in items.iter().enumerate() {
                    let at = format!("{child}/{i}");
                    if SAME_INSTANCE_ARRAY.contains(&k) && s.is_object() {
                        node.edges.push(at.clone());
                    }
                    walk(s, &at, &base, index);
                }
            }
            _ => {}
        }
    }
    index.nodes.insert(ptr.to_string(), node);
}

fn anchor_key(base: &url::Url, anchor: &str) -> String {
    let mut u = base.clone();
    u.set_fragment(None);
    format!("{u}#{anchor}")
}

/// RFC 6901 escaping of one reference token.
fn escape(token: &str) -> String {
    token.replace('~', "~0").replace('/', "~1")
}

/// The pointer a resolved reference names, if it is in the document.
fn resolve(index: &Index, schema: &Value, uri: &str) -> Option<String> {
    let (doc, fragment) = uri.split_once('#').unwrap_or((uri, ""));
    let root = index.resources.get(doc)?;
    if fragment.is_empty() {
        return Some(root.clone());
    }
    if fragment.starts_with('/') {
        let decoded = percent_decode(fragment);
        let ptr = format!("{root}{decoded}");
        return schema.pointer(&ptr).is_some().then_some(ptr);
    }
    index.anchors.get(&format!("{doc}#{fragment}")).cloned()
}

fn percent_decode(s: &str) -> String {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%'
            && i + 3 <= bytes.len()
            && let Some(b) = std::str::from_utf8(&bytes[i + 1..i + 3])
                .ok()
                .and_then(|h| u8::from_str_radix(h, 16).ok())
        {
            out.push(b);
            i += 3;
            continue;
        }
        out.push(bytes[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// A cycle of the graph, by depth-first search (iterative: a deep schema
/// must not exhaust the stack).
fn find_cycle(nodes: &BTreeMap<String, Node>) -> Option<Vec<String>> {
    #[derive(Clone, Copy, PartialEq)]
    enum Mark {
        Open,
        Done,
    }
    let mut mark: BTreeMap<&str, Mark> = BTreeMap::new();
    for start in nodes.keys() {
        if mark.contains_key(start.as_str()) {
            continue;
        }
        // Stack of (node, index of the next edge to follow).
        let mut stack: Vec<(&str, usize)> = vec![(start.as_str(), 0)];
        mark.insert(start.as_str(), Mark::Open);
        while let Some((at, next)) = stack.last().copied() {
            let edges = nodes.get(at).map_or(&[][..], |n| n.edges.as_slice());
            if next >= edges.len() {
                mark.insert(at, Mark::Done);
                stack.pop();
                continue;
            }
            if let Some(top) = stack.last_mut() {
                top.1 += 1;
            }
            let to = edges[next].as_str();
            match mark.get(to) {
                Some(Mark::Open) => {
                    let from = stack.iter().position(|(p, _)| *p == to).unwrap_or(0);
                    let mut cycle: Vec<String> =
                        stack[from..].iter().map(|(p, _)| format!("#{p}")).collect();
                    cycle.push(format!("#{to}"));
                    return Some(cycle);
                }
                Some(Mark::Done) => {}
                None => {
                    if nodes.contains_key(to) {
                        mark.insert(to, Mark::Open);
                        stack.push((to, 0));
                    }
                }
            }
        }
    }
    None
}

#[cfg(test)]
mod tests;
