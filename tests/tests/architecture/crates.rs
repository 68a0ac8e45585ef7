//! Rules 8-10: the crates' layers, read from their manifests. Each crate
//! depends only on crates listed before it in the workspace's `members`
//! (the layer order of ARCHITECTURE.md's map); the pure crates (`capsaga-core`
//! and the crates split from it) depend on no I/O, Wasmtime or server
//! crate; only the store's own tests enable its `test-support` feature.

use super::*;
use std::collections::BTreeMap;

/// The crates of pure logic: no I/O but through a trait, no Wasmtime.
const PURE: &[&str] = &[
    "capsaga-types",
    "capsaga-path-guard",
    "capsaga-untrusted",
    "capsaga-secrets",
    "capsaga-core",
    "capsaga-net-guard",
    "capsaga-flow",
    "capsaga-check",
];

/// Crates that do I/O, run Wasm or serve: never under a pure crate.
const IMPURE: &[&str] = &[
    "tokio",
    "rusqlite",
    "tokio-postgres",
    "deadpool-postgres",
    "wasmtime",
    "wasmtime-wasi",
    "wasmtime-wasi-http",
    "hyper",
    "hyper-util",
    "reqwest",
    "axum",
    "rmcp",
];

/// The tables of a manifest that build its product (not its tests).
const PRODUCT_TABLES: &[&str] = &["dependencies", "build-dependencies"];

/// Each dependency of the manifest `doc` in the `tables` (per target too),
/// with its entry.
fn entries<'a>(doc: &'a toml::Table, tables: &[&str]) -> Vec<(&'a str, &'a toml::Value)> {
    let mut scopes: Vec<&toml::Table> = vec![doc];
    if let Some(targets) = doc.get("target").and_then(toml::Value::as_table) {
        scopes.extend(targets.values().filter_map(toml::Value::as_table));
    }
    let mut out = Vec::new();
    for scope in scopes {
        for t in tables {
            if let Some(deps) = scope.get(*t).and_then(toml::Value::as_table) {
                out.extend(deps.iter().map(|(k, v)| (k.as_str(), v)));
            }
        }
    }
    out
}

fn package_name(doc: &toml::Table) -> String {
    doc["package"]["name"].as_str().unwrap().to_string()
}

/// The manifests of the workspace's members, in `members` order.
fn manifests() -> Vec<toml::Table> {
    let r = root();
    let workspace: toml::Table = std::fs::read_to_string(r.join("Cargo.toml"))
        .unwrap()
        .parse()
        .unwrap();
    workspace["workspace"]["members"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| {
            let path = r.join(m.as_str().unwrap()).join("Cargo.toml");
            std::fs::read_to_string(path).unwrap().parse().unwrap()
        })
        .collect()
}

/// `crate -> dependency` edges of `manifests` that do not point to a crate
/// listed earlier.
fn upward(manifests: &[toml::Table]) -> Vec<String> {
    let rank: BTreeMap<String, usize> = manifests
        .iter()
        .enumerate()
        .map(|(i, d)| (package_name(d), i))
        .collect();
    let mut bad = Vec::new();
    for (i, doc) in manifests.iter().enumerate() {
        for (dep, _) in entries(doc, PRODUCT_TABLES) {
            if rank.get(dep).is_some_and(|&j| j >= i) {
                bad.push(format!("{} -> {dep}", package_name(doc)));
            }
        }
    }
    bad
}

#[test]
fn each_crate_depends_only_on_those_before_it() {
    let all = manifests();
    let bad = upward(&all);
    assert!(
        bad.is_empty(),
        "a crate depends on one listed after it in the workspace's members (reorder or move the code down): {bad:?}"
    );
    // The split of the pure logic is seen: the flow over core, core over
    // the markers and the secrets.
    let names: Vec<String> = all.iter().map(package_name).collect();
    let at = |n: &str| names.iter().position(|m| m == n).unwrap();
    assert!(at("capsaga-untrusted") < at("capsaga-core"));
    assert!(at("capsaga-secrets") < at("capsaga-core"));
    assert!(at("capsaga-core") < at("capsaga-flow"));
    assert!(at("capsaga-net-guard") < at("capsaga-check"));
    // A planted upward dependency (core on the flow) is seen.
    let mut planted = all.clone();
    let core = planted
        .iter_mut()
        .find(|d| package_name(d) == "capsaga-core")
        .unwrap();
    core["dependencies"]
        .as_table_mut()
        .unwrap()
        .insert("capsaga-flow".into(), toml::Value::Boolean(true));
    assert_eq!(upward(&planted), ["capsaga-core -> capsaga-flow"]);
}

/// The I/O crates each pure crate of `manifests` depends on.
fn impure(manifests: &[toml::Table]) -> Vec<String> {
    let mut bad = Vec::new();
    for doc in manifests {
        let name = package_name(doc);
        if !PURE.contains(&name.as_str()) {
            continue;
        }
        for (dep, _) in entries(doc, PRODUCT_TABLES) {
            if IMPURE.contains(&dep) {
                bad.push(format!("{name} -> {dep}"));
            }
        }
    }
    bad
}

#[test]
fn the_pure_crates_do_no_io() {
    let all = manifests();
    let names: Vec<String> = all.iter().map(package_name).collect();
    for p in PURE {
        assert!(names.iter().any(|n| n == p), "{p} is not a member");
    }
    let bad = impure(&all);
    assert!(
        bad.is_empty(),
        "a pure crate depends on an I/O, Wasmtime or server crate: {bad:?}"
    );
    let planted: toml::Table = "[package]\nname = \"capsaga-flow\"\n[target.'cfg(unix)'.dependencies]\ntokio.workspace = true\n"
        .parse()
        .unwrap();
    assert_eq!(impure(&[planted]), ["capsaga-flow -> tokio"]);
}

/// The crates of `manifests` (and fuzz/) whose tables turn on the store's
/// `test-support` feature, with the table.
fn test_support_users(manifests: &[toml::Table]) -> Vec<String> {
    let mut out = Vec::new();
    for doc in manifests {
        for table in ["dependencies", "dev-dependencies", "build-dependencies"] {
            for (dep, entry) in entries(doc, &[table]) {
                let on = entry
                    .get("features")
                    .and_then(toml::Value::as_array)
                    .is_some_and(|f| f.iter().any(|f| f.as_str() == Some("test-support")));
                if dep == "capsaga-store" && on {
                    out.push(format!("{} {table}", package_name(doc)));
                }
            }
        }
        // A feature of the crate's own that turns it on.
        if let Some(features) = doc.get("features").and_then(toml::Value::as_table) {
            for (f, list) in features {
                let on = list.as_array().is_some_and(|l| {
                    l.iter()
                        .any(|x| x.as_str().is_some_and(|x| x.ends_with("/test-support")))
                });
                let default_on = package_name(doc) == "capsaga-store"
                    && f == "default"
                    && list
                        .as_array()
                        .is_some_and(|l| l.iter().any(|x| x.as_str() == Some("test-support")));
                if on || default_on {
                    out.push(format!("{} features.{f}", package_name(doc)));
                }
            }
        }
    }
    out
}

#[test]
fn only_the_stores_own_tests_enable_its_test_support() {
    let mut all = manifests();
    let fuzz = std::fs::read_to_string(root().join("fuzz/Cargo.toml")).unwrap();
    all.push(fuzz.parse().unwrap());
    assert_eq!(
        test_support_users(&all),
        ["capsaga-store dev-dependencies"],
        "only the store's own tests may read past its traits (host/store/src/test_support.rs)"
    );
    let planted: toml::Table = "[package]\nname = \"capsaga-door\"\n[dependencies]\ncapsaga-store = { workspace = true, features = [\"test-support\"] }\n[features]\nx = [\"capsaga-store/test-support\"]\n"
        .parse()
        .unwrap();
    assert_eq!(
        test_support_users(&[planted]),
        ["capsaga-door dependencies", "capsaga-door features.x"]
    );
}
