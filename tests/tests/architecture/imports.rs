//! Rules 4 and 5: no import circle between the top-level modules of a
//! crate; only the door depends on the sandbox crate.

use super::*;
use std::collections::{BTreeMap, BTreeSet};

/// The names the paths of `text` give after `prefix` (`crate::x` → `x`).
fn names_after(text: &str, prefix: &str) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    for (_, line) in code_lines(text) {
        let mut at = 0;
        while let Some(i) = line[at..].find(prefix).map(|i| at + i) {
            // `super::super::x` is not `super::x` preceded by `super::`.
            let whole = !line[..i].ends_with("super::");
            let tail = &line[i + prefix.len()..];
            let name: String = tail
                .chars()
                .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                .collect();
            if whole && !name.is_empty() && name != "super" {
                out.insert(name);
            }
            at = i + prefix.len();
        }
    }
    out
}

/// The top-level module a `crate::x` path names.
fn crate_refs(text: &str) -> BTreeSet<String> {
    names_after(text, "crate::")
}

/// The top-level modules the file `file` (a path under a crate's `src/`)
/// refers to: every `crate::x`, and every `super::x` (`super::super::x`
/// one level down, ...) that climbs to the crate's root, up to the file's
/// first `#[cfg(test)]` (an inline test module's `super` is its file).
fn module_refs(file: &str, text: &str) -> BTreeSet<String> {
    let mut out = crate_refs(text);
    let parts: Vec<&str> = file.split('/').collect();
    let depth = parts.len() - usize::from(parts.last() == Some(&"mod.rs"));
    let before_tests = text.split("#[cfg(test)]").next().unwrap_or_default();
    out.extend(names_after(before_tests, &"super::".repeat(depth)));
    out
}

/// Module → the other top-level modules it refers to.
fn module_graph(dir: &Path) -> BTreeMap<String, BTreeSet<String>> {
    let mut graph: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for (file, text) in sources(dir) {
        let module = file
            .split('/')
            .next()
            .unwrap()
            .trim_end_matches(".rs")
            .to_string();
        if module == "lib" || module == "main" {
            continue;
        }
        let refs = module_refs(&file, &text);
        let entry = graph.entry(module.clone()).or_default();
        entry.extend(refs.into_iter().filter(|r| *r != module));
    }
    // Only the crate's own modules (`crate::x` may name an item of lib.rs).
    let modules: BTreeSet<String> = graph.keys().cloned().collect();
    for refs in graph.values_mut() {
        refs.retain(|r| modules.contains(r));
    }
    graph
}

/// The circles of `graph`: its strongly connected sets of two modules or
/// more (every module of one reaches every other).
fn circles(graph: &BTreeMap<String, BTreeSet<String>>) -> Vec<BTreeSet<String>> {
    let reach = |from: &str| {
        let mut seen = BTreeSet::new();
        let mut todo = vec![from.to_string()];
        while let Some(n) = todo.pop() {
            for m in graph.get(&n).into_iter().flatten() {
                if seen.insert(m.clone()) {
                    todo.push(m.clone());
                }
            }
        }
        seen
    };
    let reached: BTreeMap<&String, BTreeSet<String>> =
        graph.keys().map(|n| (n, reach(n))).collect();
    let mut out: Vec<BTreeSet<String>> = Vec::new();
    for (n, r) in &reached {
        let circle: BTreeSet<String> = r
            .iter()
            .filter(|m| reached.get(m).is_some_and(|back| back.contains(*n)))
            .cloned()
            .collect();
        if circle.len() > 1 && !out.contains(&circle) {
            out.push(circle);
        }
    }
    out
}

#[test]
fn top_level_modules_have_no_import_cycles() {
    let mut unexpected = Vec::new();
    for (krate, dir) in all_crates() {
        for c in circles(&module_graph(&dir)) {
            unexpected.push(format!("{krate}: import circle {c:?}"));
        }
    }
    assert!(unexpected.is_empty(), "{}", unexpected.join("\n"));
    // The detector finds a planted cycle, and nothing in a line.
    let mut g: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    g.insert("host".into(), ["ownership".to_string()].into());
    g.insert("ownership".into(), ["saga".to_string()].into());
    g.insert("saga".into(), ["host".to_string()].into());
    g.insert("plan".into(), ["host".to_string()].into());
    assert_eq!(
        circles(&g),
        vec![BTreeSet::from(
            ["host", "ownership", "saga"].map(String::from)
        )]
    );
    g.remove("saga");
    assert!(circles(&g).is_empty());
    assert_eq!(
        crate_refs("use crate::host::Host;\n// crate::saga\nlet x = crate::store::Scope::Plan;"),
        ["host".to_string(), "store".to_string()].into()
    );
    // `super::` climbs to the root from a top-level module's file only.
    let text = "use super::net::Hooks;\nuse super::super::cache;\n#[cfg(test)]\nmod tests { use super::helper; }";
    assert_eq!(module_refs("factors.rs", text), ["net".to_string()].into());
    assert_eq!(
        module_refs("factors/mod.rs", text),
        ["net".to_string()].into()
    );
    assert_eq!(
        module_refs("factors/fs.rs", text),
        ["cache".to_string()].into()
    );
}

/// The package named by the manifest `text` when it lists `dependency` in
/// any of its dependency tables (normal, dev, build, per target).
fn depends_on(text: &str, dependency: &str) -> Option<String> {
    let doc: toml::Table = text.parse().unwrap();
    let name = doc.get("package")?.get("name")?.as_str()?.to_string();
    let tables = ["dependencies", "dev-dependencies", "build-dependencies"];
    let mut found = tables
        .iter()
        .any(|t| doc.get(*t).and_then(|d| d.get(dependency)).is_some());
    if let Some(targets) = doc.get("target").and_then(toml::Value::as_table) {
        found |= targets.values().any(|t| {
            tables
                .iter()
                .any(|k| t.get(*k).and_then(|d| d.get(dependency)).is_some())
        });
    }
    found.then_some(name)
}

#[test]
fn only_the_door_depends_on_the_sandbox() {
    let r = root();
    let workspace: toml::Table = std::fs::read_to_string(r.join("Cargo.toml"))
        .unwrap()
        .parse()
        .unwrap();
    let members = workspace["workspace"]["members"].as_array().unwrap();
    let mut dependents = BTreeSet::new();
    let manifests = members
        .iter()
        .map(|m| m.as_str().unwrap().to_string())
        .chain(["fuzz".to_string()]);
    for m in manifests {
        let text = std::fs::read_to_string(r.join(&m).join("Cargo.toml")).unwrap();
        dependents.extend(depends_on(&text, "capsaga-sandbox"));
    }
    // The benchmarks measure it below the door, the tests test it there.
    let allowed = ["capsaga-door", "capsaga-bench", "capsaga-tests"];
    let bad: Vec<&String> = dependents
        .iter()
        .filter(|d| !allowed.contains(&d.as_str()))
        .collect();
    assert!(
        bad.is_empty(),
        "only the door may depend on capsaga-sandbox: {bad:?}"
    );
    assert!(dependents.contains("capsaga-door"), "{dependents:?}");
    // A planted dependency is seen, in every kind of table.
    for table in [
        "dependencies",
        "dev-dependencies",
        "target.'cfg(unix)'.dependencies",
    ] {
        let planted = format!(
            "[package]\nname = \"capsaga-agent\"\n[{table}]\ncapsaga-sandbox.workspace = true\n"
        );
        assert_eq!(
            depends_on(&planted, "capsaga-sandbox").as_deref(),
            Some("capsaga-agent")
        );
    }
}
