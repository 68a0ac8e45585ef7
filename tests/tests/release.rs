//! Release hygiene (seed 001 §5): the version the binary reports, the MCP
//! plugin manifest, the changelog.
//!
//! - `capsaga --version` prints the crate version and the commit it was
//!   built from (`host/cli/build.rs`).
//! - `.claude-plugin/marketplace.json` is valid JSON with the keys a
//!   marketplace needs; every plugin's version is the crate's; the MCP
//!   configuration it points to parses and names a command the binary has.
//! - `CHANGELOG.md` has an Unreleased section and one for the crate's
//!   version, in Keep a Changelog form.

use capsaga_tests::{capsaga_bin, repo_root};
use serde_json::Value;
use std::process::Command;

/// The workspace's version, read from the root `Cargo.toml`.
fn crate_version() -> String {
    let text = std::fs::read_to_string(repo_root().join("Cargo.toml")).unwrap();
    let doc: toml::Table = text.parse().unwrap();
    doc["workspace"]["package"]["version"]
        .as_str()
        .expect("workspace.package.version")
        .to_string()
}

fn json_file(rel: &str) -> Value {
    let path = repo_root().join(rel);
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{rel}: {e}"));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{rel} is not valid JSON: {e}"))
}

#[test]
fn the_binary_reports_its_version_and_commit() {
    let out = Command::new(capsaga_bin())
        .arg("--version")
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let line = String::from_utf8(out.stdout).unwrap();
    let line = line.trim();
    let want = format!("capsaga {} (", crate_version());
    assert!(line.starts_with(&want), "{line}");
    // The commit: 12 hex digits (maybe -dirty), or `unknown` outside git.
    let inner = line
        .strip_prefix(&want)
        .and_then(|r| r.strip_suffix(')'))
        .unwrap_or_else(|| panic!("{line}"));
    let commit = inner.split([',', '-']).next().unwrap_or_default();
    assert!(
        commit == "unknown"
            || (commit.len() == 12 && commit.chars().all(|c| c.is_ascii_hexdigit())),
        "{line}"
    );
    // In a git checkout, a commit of this repository.
    if commit != "unknown" {
        let known = Command::new("git")
            .args(["cat-file", "-e", &format!("{commit}^{{commit}}")])
            .current_dir(repo_root())
            .status();
        if let Ok(s) = known {
            assert!(s.success(), "{commit} is not a commit of this repository");
        }
    }
}

#[test]
fn the_plugin_manifest_is_valid_and_matches_the_crate() {
    let m = json_file(".claude-plugin/marketplace.json");
    let name = m["name"].as_str().expect("name");
    assert!(
        !name.is_empty() && name.chars().all(|c| c.is_ascii_lowercase() || c == '-'),
        "a kebab-case name: {name}"
    );
    assert!(m["owner"]["name"].as_str().is_some_and(|s| !s.is_empty()));
    let version = crate_version();
    assert_eq!(m["metadata"]["version"], version.as_str());
    let plugins = m["plugins"].as_array().expect("plugins");
    assert!(!plugins.is_empty());
    for p in plugins {
        assert!(p["name"].as_str().is_some_and(|s| !s.is_empty()), "{p}");
        assert!(
            p["description"].as_str().is_some_and(|s| !s.is_empty()),
            "{p}"
        );
        assert_eq!(p["version"], version.as_str(), "{p}");
        let source = p["source"].as_str().expect("source");
        assert!(repo_root().join(source).is_dir(), "{source}");
        // The MCP configuration it points to, and the command it runs.
        let mcp = p["mcpServers"].as_str().expect("mcpServers");
        let cfg = json_file(mcp.trim_start_matches("./"));
        let servers = cfg["mcpServers"].as_object().expect("mcpServers");
        assert!(!servers.is_empty());
        for (_, s) in servers {
            assert_eq!(s["command"], "capsaga", "{s}");
            let args: Vec<&str> = s["args"]
                .as_array()
                .expect("args")
                .iter()
                .filter_map(Value::as_str)
                .collect();
            let help = Command::new(capsaga_bin())
                .args(&args)
                .arg("--help")
                .output()
                .unwrap();
            assert!(help.status.success(), "capsaga {args:?} --help: {help:?}");
        }
    }
}

#[test]
fn the_changelog_keeps_a_changelog() {
    let text = std::fs::read_to_string(repo_root().join("CHANGELOG.md")).unwrap();
    assert!(text.starts_with("# Changelog"), "a title first");
    assert!(text.contains("## [Unreleased]"), "an Unreleased section");
    let version = crate_version();
    let heading = format!("## [{version}] - ");
    let at = text
        .find(&heading)
        .expect("a section for the crate's version");
    let date = &text[at + heading.len()..][..10];
    assert!(
        date.len() == 10 && date.as_bytes()[4] == b'-' && date.as_bytes()[7] == b'-',
        "an ISO date: {date}"
    );
    for l in text.lines().filter(|l| l.starts_with("### ")) {
        let kind = &l[4..];
        assert!(
            [
                "Added",
                "Changed",
                "Deprecated",
                "Removed",
                "Fixed",
                "Security"
            ]
            .contains(&kind),
            "not a Keep a Changelog category: {l}"
        );
    }
    assert!(
        text.contains(&format!("[{version}]: ")),
        "a link for {version}"
    );
    assert!(text.contains("[Unreleased]: "), "a link for Unreleased");
}

/// The feature sets `cargo tree` resolves for `args` (normal dependencies,
/// this machine's target), by `name version`: a package built twice (for a
/// proc macro's dependencies and for the code) has two.
fn resolved_features(
    args: &[&str],
) -> std::collections::BTreeMap<String, std::collections::BTreeSet<String>> {
    let out = Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()))
        .current_dir(repo_root())
        .args([
            "tree",
            "--offline",
            "--locked",
            "-e",
            "normal",
            "--prefix",
            "none",
        ])
        .args(["-f", "{p}|{f}"])
        .args(args)
        .output()
        .unwrap();
    assert!(out.status.success(), "cargo tree {args:?}: {out:?}");
    let mut map = std::collections::BTreeMap::<_, std::collections::BTreeSet<_>>::new();
    for l in String::from_utf8(out.stdout).unwrap().lines() {
        let Some((p, f)) = l.trim_end_matches(" (*)").split_once('|') else {
            continue;
        };
        let mut words = p.split_whitespace();
        if let (Some(name), Some(version)) = (words.next(), words.next()) {
            map.entry(format!("{name} {version}"))
                .or_default()
                .insert(f.to_string());
        }
    }
    map
}

/// A developer's `cargo build -p capsaga --bin capsaga` builds the
/// binary alone, `scripts/test` every target: every package the binary alone builds must be built with
/// the same features by the test build, or the second build compiles it and
/// all above it again (host/cli/Cargo.toml says which features are
/// turned on only for this).
#[test]
fn the_binary_alone_resolves_the_test_builds_features() {
    let bin = resolved_features(&["-p", "capsaga"]);
    let all = resolved_features(&["--workspace", "-e", "dev"]);
    // The store's `test-support` (its own tests read past the traits) is
    // turned on in the test build only and must never reach the product
    // (tests/tests/architecture/crates.rs): the binary alone rebuilds
    // capsaga-store and the crates above it for that one feature.
    let without_test_support = |f: &String| {
        f.split(',')
            .filter(|x| *x != "test-support")
            .collect::<Vec<_>>()
            .join(",")
    };
    let differ: Vec<String> = bin
        .iter()
        .filter_map(|(p, f)| {
            let g = all.get(p)?;
            let g: std::collections::BTreeSet<String> =
                g.iter().map(without_test_support).collect();
            (!f.is_subset(&g)).then(|| format!("{p}: alone {f:?}, with the tests {g:?}"))
        })
        .collect();
    assert!(
        differ.is_empty(),
        "turn these features on in host/cli/Cargo.toml:\n{}",
        differ.join("\n")
    );
}
