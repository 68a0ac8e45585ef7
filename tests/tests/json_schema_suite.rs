//! The official JSON-Schema-Test-Suite (json-schema-org, vendored in
//! `tests/json-schema-test-suite/`, MIT) against the compiler of tools'
//! argument schemas, `capsaga_core::schema_load::compile` (issue 13 item 8).
//!
//! Run: every case of the required files of draft 2020-12 and draft-07, and
//! of their `optional/format/` files (capsaga asserts formats). A draft-07
//! schema gets the suite's `$schema` for draft-07 when it has none, so the
//! draft is the schema's own, as for a tool author.
//!
//! Where capsaga decides otherwise, the case is in [`DIFFERENCES`] with the
//! reason; the test fails on any other disagreement, and on a listed
//! difference that no longer happens.

use capsaga_core::schema_load::compile;
use serde_json::Value;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// A case or a group where capsaga differs from the suite: (draft, file,
/// group description, test description), `*` matching anything, and why.
/// A test description of `refused` means the group's schema is refused at
/// load (so none of its tests runs).
type Difference = (
    &'static str,
    &'static str,
    &'static str,
    &'static str,
    &'static str,
);

/// The one place where capsaga's differences from the suite are listed and
/// justified.
const DIFFERENCES: &[Difference] = &[
    // Nothing is ever fetched: a `$ref` to another document that the schema
    // does not embed refuses the schema at load (the suite serves these
    // from localhost:1234; a tool's schema must be self-contained).
    (
        "*",
        "refRemote.json",
        "*",
        "refused",
        "remote $ref: never fetched, refused at load",
    ),
    (
        "2020-12",
        "dynamicRef.json",
        "*",
        "refused",
        "remote $ref (localhost:1234): never fetched, refused at load",
    ),
    // A custom meta-schema would have to be fetched: refused at load.
    (
        "2020-12",
        "vocabulary.json",
        "*",
        "refused",
        "remote meta-schema: never fetched, refused at load",
    ),
    // capsaga asserts `format` (the suite's default is annotation only):
    // an argument that is not what its format says is refused.
    (
        "2020-12",
        "format.json",
        "*",
        "* is only an annotation by default",
        "format asserted, not only annotated",
    ),
    // A format capsaga cannot check refuses the schema: a misspelt format
    // would silently switch validation off (issue 13 item 8).
    (
        "*",
        "optional/format/unknown.json",
        "*",
        "refused",
        "unknown format: refused at load",
    ),
];

fn suite_dir() -> PathBuf {
    capsaga_tests::repo_root().join("tests/json-schema-test-suite")
}

fn files(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut push = |d: &Path| {
        if let Ok(rd) = std::fs::read_dir(d) {
            for e in rd.flatten() {
                let p = e.path();
                if p.extension().is_some_and(|x| x == "json") {
                    out.push(p);
                }
            }
        }
    };
    push(dir);
    push(&dir.join("optional/format"));
    out.sort();
    out
}

/// `*` matches anything, `* tail` anything ending with `tail`.
fn matches(pattern: &str, value: &str) -> bool {
    pattern == "*"
        || pattern == value
        || pattern
            .strip_prefix("* ")
            .is_some_and(|tail| value.ends_with(tail))
}

fn listed(draft: &str, file: &str, group: &str, test: &str) -> Option<usize> {
    DIFFERENCES.iter().position(|(d, f, g, t, _)| {
        matches(d, draft) && matches(f, file) && matches(g, group) && matches(t, test)
    })
}

#[test]
fn json_schema_test_suite_2020_12_and_draft_07() {
    let mut used = vec![0usize; DIFFERENCES.len()];
    let mut unexpected: Vec<String> = Vec::new();
    let mut tally: BTreeMap<String, (usize, usize, usize)> = BTreeMap::new();
    for (draft, dir, meta) in [
        (
            "2020-12",
            "draft2020-12",
            "https://json-schema.org/draft/2020-12/schema",
        ),
        ("7", "draft7", "http://json-schema.org/draft-07/schema#"),
    ] {
        let base = suite_dir().join(dir);
        let found = files(&base);
        assert!(found.len() > 40, "{dir}: only {} files", found.len());
        for path in found {
            let file = path
                .strip_prefix(&base)
                .unwrap_or(&path)
                .to_string_lossy()
                .into_owned();
            let text = std::fs::read_to_string(&path).expect("read suite file");
            let groups: Vec<Value> = serde_json::from_str(&text).expect("suite JSON");
            for group in groups {
                let gdesc = group["description"].as_str().unwrap_or("").to_string();
                let mut schema = group["schema"].clone();
                if let Some(m) = schema.as_object_mut() {
                    m.entry("$schema")
                        .or_insert_with(|| Value::String(meta.into()));
                }
                let tests = group["tests"].as_array().cloned().unwrap_or_default();
                let t = tally.entry(draft.to_string()).or_default();
                match compile(&schema) {
                    Err(e) => match listed(draft, &file, &gdesc, "refused") {
                        Some(i) => {
                            used[i] += 1;
                            t.2 += tests.len();
                        }
                        None => unexpected
                            .push(format!("[{draft}] {file} / {gdesc}: schema refused ({e})")),
                    },
                    Ok(v) => {
                        for test in tests {
                            let tdesc = test["description"].as_str().unwrap_or("");
                            let want = test["valid"].as_bool().expect("valid flag");
                            let got = v.is_valid(&test["data"]);
                            t.0 += 1;
                            if got == want {
                                continue;
                            }
                            match listed(draft, &file, &gdesc, tdesc) {
                                Some(i) => {
                                    used[i] += 1;
                                    t.1 += 1;
                                }
                                None => unexpected.push(format!(
                                    "[{draft}] {file} / {gdesc} / {tdesc}: suite says valid={want}, capsaga {got}"
                                )),
                            }
                        }
                    }
                }
            }
        }
    }
    for (draft, (run, differ, refused)) in &tally {
        eprintln!(
            "JSON-Schema-Test-Suite draft {draft}: {run} cases run, {differ} listed differences, {refused} cases in schemas refused at load"
        );
    }
    let stale: Vec<String> = DIFFERENCES
        .iter()
        .zip(&used)
        .filter(|(_, n)| **n == 0)
        .map(|((d, f, g, t, why), _)| format!("[{d}] {f} / {g} / {t} ({why})"))
        .collect();
    assert!(
        unexpected.is_empty() && stale.is_empty(),
        "{} unexpected disagreements:\n{}\n{} listed differences that no longer happen:\n{}",
        unexpected.len(),
        unexpected.join("\n"),
        stale.len(),
        stale.join("\n")
    );
}
