//! Architecture rules, checked over the source (ARCHITECTURE.md lists them):
//!
//! 1. every SQL statement, and every use of a database crate, is in a
//!    storage layer: the `capsaga-store` crate (`host/store/`, the state
//!    database, with its test cluster `host/pg-harness/`) or the memory's
//!    store module (`host/memory/src/store/`, the memory database: one
//!    named place per crate);
//! 2. only the dispatch door (`host/door/src/dispatch/`) runs a tool: it
//!    alone builds a sandbox call request or names an export to run (the
//!    sandbox itself and `capsaga-bench`, which measures the sandbox layer
//!    below the door, are the named exceptions);
//! 3. only the door writes the write-ahead log or the approvals table (it
//!    alone calls the store's writing methods, besides the store itself);
//! 4. the top-level modules of each crate import each other without cycles
//!    (`crate::x` and, in a top-level module, `super::x`): no circle at all
//!    (the five the runtime's folders left were undone in issue 46);
//! 5. only the door depends on the sandbox crate (besides the benchmarks
//!    and the tests, which measure and test it below the door).
//! 6. every sink through which the host's text leaves the process (the log
//!    output, the span and metric exporters, the console, the command
//!    line's stderr) is built in one named place that scrubs it with
//!    `capsaga_telemetry::secrets` (issue 45 item 5);
//! 7. no function (tests included) is over `long_fns::MAX_FN_LINES` lines, unless
//!    a note just above it says why (`// Over 100 lines: <why>`, or a
//!    `clippy::too_many_lines` allowance with its `reason`: a table, one
//!    exhaustive match), or it is in `long_fns::KNOWN_LONG` (issue 46);
//! 8. each crate depends only on crates listed before it in the workspace's
//!    `members` (the layers, lowest first);
//! 9. the pure crates (`capsaga-core` and those split from it: the markers,
//!    the secrets, the net guard, the flow, the probes) depend on no I/O,
//!    Wasmtime or server crate;
//! 10. only the store's own tests turn on its `test-support` feature (what
//!     its both-backends suite reads past the traits).
//!
//! Each rule is also run against a planted violation, so that a scanner that
//! finds nothing cannot pass.

mod crates;
mod imports;
mod layers;
mod long_fns;
mod sinks;

use std::path::{Path, PathBuf};

fn root() -> PathBuf {
    capsaga_tests::repo_root()
}

/// Every `.rs` file under `dir`, with its path relative to `dir`.
fn sources(dir: &Path) -> Vec<(String, String)> {
    fn walk(base: &Path, dir: &Path, out: &mut Vec<(String, String)>) {
        let mut entries: Vec<_> = std::fs::read_dir(dir)
            .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
            .flatten()
            .map(|e| e.path())
            .collect();
        entries.sort();
        for p in entries {
            if p.is_dir() {
                walk(base, &p, out);
            } else if p.extension().is_some_and(|x| x == "rs") {
                let rel = p.strip_prefix(base).unwrap().to_string_lossy().into_owned();
                out.push((rel, std::fs::read_to_string(&p).unwrap()));
            }
        }
    }
    let mut out = Vec::new();
    walk(dir, dir, &mut out);
    assert!(!out.is_empty(), "no sources under {}", dir.display());
    out
}

/// The lines of `text` that are code (not comments), with their numbers.
fn code_lines(text: &str) -> impl Iterator<Item = (usize, &str)> {
    text.lines()
        .enumerate()
        .map(|(i, l)| (i + 1, l))
        .filter(|(_, l)| !l.trim_start().starts_with("//"))
}

/// Where `text` uses one of `needles` in code: `file:line: line`.
fn hits(file: &str, text: &str, needles: &[&str]) -> Vec<String> {
    code_lines(text)
        .filter(|(_, l)| needles.iter().any(|n| l.contains(n)))
        .map(|(n, l)| format!("{file}:{n}: {}", l.trim()))
        .collect()
}

/// Sources of every crate of the host and the guest side.
fn crates() -> Vec<(&'static str, PathBuf)> {
    let r = root();
    vec![
        ("types", r.join("types/src")),
        ("sdk", r.join("sdk/src")),
        ("untrusted", r.join("host/untrusted/src")),
        ("secrets", r.join("host/secrets/src")),
        ("core", r.join("host/core/src")),
        ("net-guard", r.join("host/net-guard/src")),
        ("flow", r.join("host/flow/src")),
        ("check", r.join("host/check/src")),
        ("store", r.join("host/store/src")),
        ("pg-harness", r.join("host/pg-harness/src")),
        ("memory", r.join("host/memory/src")),
        ("guest-fs", r.join("host/guest-fs/src")),
        ("sandbox", r.join("host/sandbox/src")),
        ("door", r.join("host/door/src")),
        ("agent", r.join("host/agent/src")),
        ("server", r.join("host/server/src")),
        ("conformance", r.join("host/conformance/src")),
        ("cli", r.join("host/cli/src")),
        ("bench", r.join("host/bench/src")),
    ]
}

/// Every crate of the host and the guest side, with those the rules about
/// SQL, tool runs and the log do not concern (the path guard, telemetry,
/// the console): for the rules that hold in every crate.
fn all_crates() -> Vec<(&'static str, PathBuf)> {
    let r = root();
    let mut all = crates();
    all.extend([
        ("path-guard", r.join("host/path-guard/src")),
        ("telemetry", r.join("host/telemetry/src")),
        ("console", r.join("host/console/src")),
        // The store's both-backends suite, an integration test since issue
        // 46 moved it out of the product crate: its functions are held to
        // rule 7 as when it was a module of the store.
        ("store-suite", r.join("host/store/tests")),
    ]);
    all
}

fn violations(needles: &[&str], allowed: impl Fn(&str, &str) -> bool) -> Vec<String> {
    let mut out = Vec::new();
    for (krate, dir) in crates() {
        for (file, text) in sources(&dir) {
            if !allowed(krate, &file) {
                out.extend(hits(&format!("{krate}/{file}"), &text, needles));
            }
        }
    }
    out
}

fn in_the_door(krate: &str, file: &str) -> bool {
    krate == "door" && file.starts_with("dispatch/")
}
