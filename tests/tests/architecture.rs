//! Architecture rules, checked over the source (ARCHITECTURE.md lists them):
//!
//! 1. every SQL statement, and every use of a database crate, is in a
//!    storage layer: the `capsaga-store` crate (`host/store/`, the state
//!    database) or the memory's store module (`host/memory/src/store/`, the
//!    memory database: one named place per crate);
//! 2. only the dispatch door (`host/runtime/src/dispatch/`) runs a tool: it
//!    alone builds a sandbox call request or names an export to run (the
//!    sandbox itself and `capsaga bench`, which measures the sandbox layer
//!    below the door, are the named exceptions);
//! 3. only the door writes the write-ahead log or the approvals table (it
//!    alone calls the store's writing methods, besides the store itself);
//! 4. the top-level modules of each crate import each other without cycles;
//! 5. every sink through which the host's text leaves the process (the log
//!    output, the span and metric exporters, the console, the command
//!    line's stderr) is built in one named place that scrubs it with
//!    `capsaga_telemetry::secrets` (issue 45 item 5).
//!
//! Each rule is also run against a planted violation, so that a scanner that
//! finds nothing cannot pass.

use std::collections::{BTreeMap, BTreeSet};
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

/// SQL statements and the SQLite crate, as they appear in Rust code.
const SQL: &[&str] = &[
    "rusqlite",
    "\"SELECT ",
    "SELECT count(",
    " FROM saga_",
    "INSERT INTO",
    "INSERT OR ",
    "UPDATE saga_",
    "UPDATE approvals",
    "UPDATE wal_",
    "DELETE FROM",
    "CREATE TABLE",
    "CREATE INDEX",
    "ALTER TABLE",
    "DROP TABLE",
    "PRAGMA ",
    "execute_batch",
];

/// Building a sandbox call or naming an export to run.
const RUNS_A_TOOL: &[&str] = &[
    "CallRequest {",
    "Op::Execute",
    "Op::DryRun",
    "Op::Compensate(",
];

/// The store's writing methods (the write-ahead log, sagas, approvals).
const WRITES_THE_LOG: &[&str] = &[
    ".create_saga(",
    ".take_over(",
    ".release_saga(",
    ".claim_released(",
    ".set_state(",
    ".begin_step(",
    ".commit_step(",
    ".fail_step(",
    ".retry_attempt(",
    ".compensated(",
    ".compensation_failed(",
    ".fs_restored(",
    ".request_approval(",
    ".decide_approval(",
];

/// Library sources of every crate of the host and the guest side.
fn crates() -> Vec<(&'static str, PathBuf)> {
    let r = root();
    vec![
        ("types", r.join("types/src")),
        ("sdk", r.join("sdk/src")),
        ("core", r.join("host/core/src")),
        ("store", r.join("host/store/src")),
        ("memory", r.join("host/memory/src")),
        ("guest-fs", r.join("host/guest-fs/src")),
        ("runtime", r.join("host/runtime/src")),
    ]
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

fn in_runtime(krate: &str, file: &str, prefix: &str) -> bool {
    krate == "runtime" && file.starts_with(prefix)
}

#[test]
fn sql_only_in_the_storage_layer() {
    let bad = violations(SQL, |k, f| {
        k == "store" || (k == "memory" && f.starts_with("store/"))
    });
    assert!(
        bad.is_empty(),
        "SQL outside host/store/ (the capsaga-store crate) and host/memory/src/store/:\n{}",
        bad.join("\n")
    );
    // The scanner sees the storage layer's own SQL, and a planted statement.
    let dir = root().join("host/store/src/sqlite");
    let found: usize = sources(&dir)
        .iter()
        .map(|(f, t)| hits(f, t, SQL).len())
        .sum();
    assert!(
        found > 20,
        "the scanner found only {found} SQL lines in the store"
    );
    let dir = root().join("host/memory/src/store");
    let found: usize = sources(&dir)
        .iter()
        .map(|(f, t)| hits(f, t, SQL).len())
        .sum();
    assert!(
        found > 10,
        "the scanner found only {found} SQL lines in the memory's store"
    );
    let planted =
        "fn f(c: &rusqlite::Connection) {\n    c.execute(\"DELETE FROM wal_log\", []);\n}";
    assert_eq!(hits("planted.rs", planted, SQL).len(), 2);
}

#[test]
fn only_the_door_runs_a_tool() {
    let bad = violations(RUNS_A_TOOL, |k, f| {
        in_runtime(k, f, "dispatch/")
            || in_runtime(k, f, "sandbox/")
            // Measures the sandbox layer alone against bare Wasmtime: no
            // saga, no log, never a tool call of an agent or an operator.
            || (k == "runtime"
                && ["cli/bench/mod.rs", "cli/bench/floor.rs", "cli/bench/shell.rs"].contains(&f))
    });
    assert!(
        bad.is_empty(),
        "a tool run outside host/runtime/src/dispatch/:\n{}",
        bad.join("\n")
    );
    let door = root().join("host/runtime/src/dispatch");
    let found: usize = sources(&door)
        .iter()
        .map(|(f, t)| hits(f, t, RUNS_A_TOOL).len())
        .sum();
    assert!(found >= 3, "the scanner found {found} runs in the door");
    let planted = "let r = sandbox.call(CallRequest { op: &Op::Execute, ..req });";
    assert_eq!(hits("planted.rs", planted, RUNS_A_TOOL).len(), 1);
}

#[test]
fn only_the_door_writes_the_log_and_the_approvals() {
    let bad = violations(WRITES_THE_LOG, |k, f| {
        in_runtime(k, f, "dispatch/") || k == "store"
    });
    assert!(
        bad.is_empty(),
        "the write-ahead log or the approvals written outside the door:\n{}",
        bad.join("\n")
    );
    let door = root().join("host/runtime/src/dispatch");
    let found: usize = sources(&door)
        .iter()
        .map(|(f, t)| hits(f, t, WRITES_THE_LOG).len())
        .sum();
    assert!(found >= 10, "the scanner found {found} writes in the door");
}

/// Building a sink through which text leaves the process: a log layer, an
/// exporter, the console's router.
const SINKS: &[&str] = &[
    "tracing_subscriber::fmt",
    "fmt::layer(",
    "SpanExporter::builder",
    "MetricExporter::builder",
    "impl SpanExporter",
    "impl<E: SpanExporter> SpanExporter",
    "capsaga_console::router(",
];

/// Writing to stderr directly.
const STDERR: &[&str] = &["eprintln!", "eprint!(", "io::stderr()"];

#[test]
fn every_sink_leaves_through_the_scrubber() {
    let r = root();
    let dirs = [
        ("runtime", r.join("host/runtime/src")),
        ("telemetry", r.join("host/telemetry/src")),
        ("console", r.join("host/console/src")),
        ("core", r.join("host/core/src")),
        ("memory", r.join("host/memory/src")),
        ("guest-fs", r.join("host/guest-fs/src")),
    ];
    // Each place a sink is built, and why its text is scrubbed.
    let builds = |k: &str, f: &str| {
        matches!(
            (k, f),
            // The log layer, every event scrubbed.
            ("telemetry", "logs.rs")
            // The span exporter (every span scrubbed) and the metrics'
            // (labels scrubbed when made).
            | ("telemetry", "export.rs")
            | ("telemetry", "otlp_metrics.rs")
            // The console's router, behind `serve::scrubbed`.
            | ("runtime", "serve/console.rs")
        )
    };
    // Each place that writes to stderr itself, and why.
    let writes = |k: &str, f: &str| {
        matches!(
            (k, f),
            // The log layer's writer.
            ("telemetry", "logs.rs")
            // The command line's stderr (`errln!`), scrubbed.
            | ("runtime", "cli/pipe.rs")
            // Before any log exists: the runtime could not start, a
            // telemetry variable is wrong.
            | ("runtime", "main.rs")
            // The operator's own terminal, asked to approve a call (it
            // must show the call as it is).
            | ("runtime", "agent/approval.rs")
            // Compile progress (tool names, seconds) and benchmarks.
            | ("runtime", "sandbox/cache/mod.rs")
            | ("runtime", "cli/bench/console.rs")
            | ("runtime", "cli/bench/neurons.rs")
        )
    };
    let mut bad = Vec::new();
    for (k, dir) in &dirs {
        for (file, text) in sources(dir) {
            if file.ends_with("tests.rs") || file.contains("/tests/") {
                continue;
            }
            // A unit test module's own test doubles are not sinks.
            let code = text.split("#[cfg(test)]").next().unwrap_or_default();
            let name = format!("{k}/{file}");
            if !builds(k, &file) {
                bad.extend(hits(&name, code, SINKS));
            }
            if !writes(k, &file) {
                bad.extend(hits(&name, code, STDERR));
            }
        }
    }
    assert!(
        bad.is_empty(),
        "a sink built, or stderr written, outside its scrubbed place (see capsaga_telemetry::secrets):\n{}",
        bad.join("\n")
    );
    let console = std::fs::read_to_string(r.join("host/runtime/src/serve/console.rs")).unwrap();
    assert!(
        console.contains("scrubbed::responses"),
        "the console's router is not behind serve::scrubbed"
    );
    let planted = "let l = tracing_subscriber::fmt::layer().with_writer(|| std::io::stderr());";
    assert_eq!(hits("planted.rs", planted, SINKS).len(), 1);
    assert_eq!(hits("planted.rs", planted, STDERR).len(), 1);
}

/// The top-level module a `crate::x` path names.
fn crate_refs(text: &str) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    for (_, line) in code_lines(text) {
        let mut rest = line;
        while let Some(i) = rest.find("crate::") {
            let tail = &rest[i + "crate::".len()..];
            let name: String = tail
                .chars()
                .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                .collect();
            if !name.is_empty() {
                out.insert(name);
            }
            rest = tail;
        }
    }
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
        let refs = crate_refs(&text);
        let entry = graph.entry(module.clone()).or_default();
        entry.extend(refs.into_iter().filter(|r| *r != module));
    }
    graph
}

/// A cycle in `graph`, if there is one.
fn cycle(graph: &BTreeMap<String, BTreeSet<String>>) -> Option<Vec<String>> {
    fn visit(
        n: &str,
        graph: &BTreeMap<String, BTreeSet<String>>,
        path: &mut Vec<String>,
        done: &mut BTreeSet<String>,
    ) -> Option<Vec<String>> {
        if let Some(i) = path.iter().position(|p| p == n) {
            let mut c = path[i..].to_vec();
            c.push(n.to_string());
            return Some(c);
        }
        if done.contains(n) {
            return None;
        }
        path.push(n.to_string());
        for m in graph.get(n).into_iter().flatten() {
            if let Some(c) = visit(m, graph, path, done) {
                return Some(c);
            }
        }
        path.pop();
        done.insert(n.to_string());
        None
    }
    let mut done = BTreeSet::new();
    for n in graph.keys() {
        if let Some(c) = visit(n, graph, &mut Vec::new(), &mut done) {
            return Some(c);
        }
    }
    None
}

#[test]
fn top_level_modules_have_no_import_cycles() {
    for (krate, dir) in crates() {
        let graph = module_graph(&dir);
        if let Some(c) = cycle(&graph) {
            panic!("{krate}: import cycle {}", c.join(" -> "));
        }
    }
    // The detector finds a planted cycle.
    let mut g: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    g.insert("host".into(), ["ownership".to_string()].into());
    g.insert("ownership".into(), ["saga".to_string()].into());
    g.insert("saga".into(), ["host".to_string()].into());
    assert!(cycle(&g).is_some());
    assert_eq!(
        crate_refs("use crate::host::Host;\n// crate::saga\nlet x = crate::store::Origin::Plan;"),
        ["host".to_string(), "store".to_string()].into()
    );
}
