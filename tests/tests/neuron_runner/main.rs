//! The neuron runner (`tools/neuron_runner/`, world `neuron` of
//! `wit/neuron.wit`) through real Wasmtime: one engine and one compiled
//! runner shared by every test of this binary (compiled once, then loaded
//! from the on-disk cache under `target/`), a fresh instance per call with
//! the neuron's definition handed over by the `neuron-host` import.
//!
//! Shown here: a neuron computing statistics over a CSV in a preopened
//! directory; `meta` from the definition; `dry-run` and `compensate`
//! dispatch; a `code_run` script with named inputs and a scratch directory;
//! HTTP only through `wasi:http` and the net guard; Python exceptions mapped
//! to typed tool errors; and hostile sources (infinite loop, memory bomb, deep
//! recursion, 100 MB of output, `/etc/passwd`, writes outside the scratch
//! directory, sockets, processes, the host environment, the host's files, a
//! source that is not Python), each contained with a clear tool error while
//! the host keeps serving calls; the `neuron-compiler` export and the
//! bytecode the host hands later calls (`bytecode`).

use capsaga_core::capability::Capability;
use capsaga_core::error::{ErrorKind, ToolError};
use capsaga_core::policy::{Limits, PolicyFile};
use capsaga_sandbox::Factors;
use capsaga_sandbox::bindings::WitToolOutput;
use capsaga_tests::http_server::TestServer;
use capsaga_tests::neuron_rig::{
    Called, NamedFile, NeuronDefinition, Op, Rig, SourceKind, cache_dir, neuron, runner_wasm,
};
use serde_json::{Value, json};
use std::path::Path;
use std::sync::OnceLock;

/// The rig shared by every test of this binary, or `None` when the runner
/// is not built and `CAPSAGA_SKIP_RUNNER` is set.
fn rig() -> Option<&'static Rig> {
    static RIG: OnceLock<Option<Rig>> = OnceLock::new();
    RIG.get_or_init(|| {
        let wasm = runner_wasm()?;
        let rig = Rig::load(&wasm, &cache_dir());
        eprintln!("neuron runner {}: {:?}", rig.runner_hash, rig.loaded);
        Some(rig)
    })
    .as_ref()
}

macro_rules! rig {
    () => {
        match rig() {
            Some(r) => r,
            None => return,
        }
    };
}

fn caps(list: &[String]) -> Vec<Capability> {
    list.iter()
        .map(|s| Capability::parse(s).expect("capability"))
        .collect()
}

fn read_grant(dir: &Path) -> String {
    format!("fs:read:{}/**", dir.display())
}

fn write_grant(dir: &Path) -> String {
    format!("fs:write:{}/**", dir.display())
}

fn tempdir() -> (tempfile::TempDir, std::path::PathBuf) {
    let d = tempfile::tempdir().expect("tempdir");
    let p = d.path().canonicalize().expect("canonical");
    (d, p)
}

async fn exec(rig: &Rig, def: &NeuronDefinition, grants: &[Capability], args: Value) -> Called {
    rig.call(
        def,
        &Op::Execute,
        grants,
        &Limits::DEFAULT,
        &args.to_string(),
    )
    .await
}

async fn exec_src(rig: &Rig, source: &str) -> Called {
    exec(rig, &neuron("probe", source), &[], json!({})).await
}

/// A hostile call failed with `kind`, and the host still serves a normal call.
async fn contained(rig: &Rig, c: &Called, kind: ErrorKind) -> ToolError {
    let e = c.err().clone();
    assert_eq!(e.kind, kind, "{e:#?}\nstdio: {}", c.stdio);
    assert!(!e.message.is_empty() && !e.llm_hint.is_empty(), "{e:#?}");
    let ok = exec_src(rig, "def execute(args):\n    return {'alive': True}\n").await;
    assert_eq!(
        ok.data(),
        json!({"alive": true}),
        "the host stopped serving calls"
    );
    e
}

const CSV_STATS: &str = r#"
import csv
import statistics
from capsaga import ToolError, ToolOutput


def execute(args):
    path = args["path"]
    column = args["column"]
    with open(path, newline="") as f:
        rows = list(csv.DictReader(f))
    if not rows:
        raise ToolError.invalid_args(f"{path} has no data rows",
                                     llm_hint="pass a CSV with a header row and data rows")
    if column not in rows[0]:
        raise ToolError.invalid_args(f"{path} has no column {column!r}",
                                     llm_hint="use one of the columns in the details",
                                     details={"columns": list(rows[0])})
    values = [float(r[column]) for r in rows]
    return ToolOutput(
        data={
            "column": column,
            "n": len(values),
            "mean": statistics.fmean(values),
            "median": statistics.median(values),
            "stdev": statistics.stdev(values),
            "min": min(values),
            "max": max(values),
        },
        summary=f"statistics of {column} over {len(values)} rows",
    )
"#;

#[tokio::test]
async fn csv_statistics_over_a_preopened_directory() {
    let rig = rig!();
    let (_d, root) = tempdir();
    let mut csv = String::from("city,x,y\n");
    for i in 1..=10 {
        csv.push_str(&format!("c{i},{i},{}\n", i * i));
    }
    std::fs::write(root.join("data.csv"), csv).expect("write csv");
    let def = neuron("csv_stats", CSV_STATS);
    let grants = caps(&[read_grant(&root)]);
    let path = root.join("data.csv").display().to_string();

    let c = exec(rig, &def, &grants, json!({"path": path, "column": "x"})).await;
    let d = c.data();
    assert_eq!(d["n"], 10);
    assert_eq!(d["mean"], 5.5);
    assert_eq!(d["median"], 5.5);
    assert_eq!(d["min"], 1.0);
    assert_eq!(d["max"], 10.0);
    let stdev = d["stdev"].as_f64().expect("stdev");
    assert!((stdev - 3.027_650_354_097_491_7).abs() < 1e-12, "{stdev}");
    let out = c
        .result
        .as_ref()
        .ok()
        .and_then(Option::as_ref)
        .expect("output");
    assert_eq!(out.summary, "statistics of x over 10 rows");

    // The neuron's own ToolError: kind, hint and details reach the host.
    let c = exec(rig, &def, &grants, json!({"path": path, "column": "nope"})).await;
    let e = c.err();
    assert_eq!(e.kind, ErrorKind::InvalidArgs, "{e:#?}");
    assert_eq!(e.llm_hint, "use one of the columns in the details");
    assert_eq!(
        e.details.as_deref(),
        Some(&json!({"columns": ["city", "x", "y"]}))
    );

    // The same neuron without the grant: the file does not exist for it.
    let c = exec(rig, &def, &[], json!({"path": path, "column": "x"})).await;
    let e = c.err();
    assert_eq!(e.kind, ErrorKind::PermissionDenied, "{e:#?}");
    assert!(e.llm_hint.contains("no fs: grant"), "{e:#?}");
}

#[tokio::test]
async fn meta_comes_from_the_definition() {
    let rig = rig!();
    let mut def = neuron("csv_stats", CSV_STATS);
    def.meta.description = "Statistics of one numeric column of a CSV file.".into();
    def.meta.args_schema = r#"{"type":"object","required":["path","column"]}"#.into();
    def.meta.capabilities = vec!["fs:read:*".into()];
    def.meta.version = "3.1.4".into();
    def.meta.has_side_effects = true;
    let m = rig.meta(&def).await;
    assert_eq!(m.name, "csv_stats");
    assert_eq!(m.description, def.meta.description);
    assert_eq!(m.args_schema, def.meta.args_schema);
    assert_eq!(m.capabilities, vec!["fs:read:*".to_string()]);
    assert_eq!(m.version, "3.1.4");
    assert!(m.has_side_effects);
    // The source is not even compiled for meta.
    let broken = neuron("broken", "this is not python at all (");
    assert_eq!(rig.meta(&broken).await.name, "broken");
}

const EFFECTFUL: &str = r#"
import os
from capsaga import ToolError, ToolOutput


def execute(args, ctx):
    with open(args["path"], "w") as f:
        f.write(args["text"])
    return ToolOutput(data={"path": args["path"], "saga": ctx.saga_id},
                      effects=[f"wrote {args['path']}"], summary="wrote it")


def dry_run(args, ctx):
    return {"would_write": len(args["text"]), "dry": ctx.dry_run,
            "exists": os.path.exists(args["path"])}


def compensate(args, output):
    if output.data.get("path") != args["path"]:
        raise ToolError.unrevertible("the output does not name the file")
    if os.path.exists(args["path"]):
        os.remove(args["path"])
"#;

#[tokio::test]
async fn dry_run_and_compensate_dispatch() {
    let rig = rig!();
    let (_d, root) = tempdir();
    let mut def = neuron("note_writer", EFFECTFUL);
    def.meta.has_side_effects = true;
    let target = root.join("note.txt");
    let args = json!({"path": target.display().to_string(), "text": "hello"}).to_string();
    let rw = caps(&[write_grant(&root)]);
    let ro = caps(&[read_grant(&root)]);
    let limits = Limits::DEFAULT;

    let c = rig.call(&def, &Op::DryRun, &ro, &limits, &args).await;
    assert_eq!(
        c.data(),
        json!({"would_write": 5, "dry": true, "exists": false})
    );
    assert!(!target.exists());

    let c = rig.call(&def, &Op::Execute, &rw, &limits, &args).await;
    assert_eq!(c.data()["saga"], "neuron-test");
    assert_eq!(std::fs::read_to_string(&target).expect("written"), "hello");
    let out = c.result.expect("execute").expect("an output");
    assert_eq!(out.effects, vec![format!("wrote {}", target.display())]);

    let c = rig
        .call(&def, &Op::Compensate(out.clone()), &rw, &limits, &args)
        .await;
    assert!(matches!(c.result, Ok(None)), "{:?}", c.result);
    assert!(!target.exists(), "compensate removed the file");
    // Idempotent: a second compensate succeeds too.
    let c = rig
        .call(&def, &Op::Compensate(out), &rw, &limits, &args)
        .await;
    assert!(matches!(c.result, Ok(None)), "{:?}", c.result);

    // Without dry_run/compensate: a neuron with side effects cannot preview or
    // undo; a pure one previews with execute and has nothing to undo.
    let bare = "def execute(args):\n    return {'n': args['n'] * 2}\n";
    let mut effectful = neuron("bare", bare);
    effectful.meta.has_side_effects = true;
    let nothing = WitToolOutput {
        data: "null".into(),
        effects: vec![],
        next_hint: None,
        summary: String::new(),
    };
    let c = rig
        .call(&effectful, &Op::DryRun, &[], &limits, r#"{"n":2}"#)
        .await;
    assert_eq!(c.err().kind, ErrorKind::Unsupported);
    let c = rig
        .call(
            &effectful,
            &Op::Compensate(nothing.clone()),
            &[],
            &limits,
            r#"{"n":2}"#,
        )
        .await;
    assert_eq!(c.err().kind, ErrorKind::Unrevertible);
    let pure = neuron("bare", bare);
    let c = rig
        .call(&pure, &Op::DryRun, &[], &limits, r#"{"n":2}"#)
        .await;
    assert_eq!(c.data(), json!({"n": 4}));
    let c = rig
        .call(&pure, &Op::Compensate(nothing), &[], &limits, r#"{"n":2}"#)
        .await;
    assert!(matches!(c.result, Ok(None)), "{:?}", c.result);
}

#[tokio::test]
async fn python_failures_become_typed_tool_errors() {
    let rig = rig!();
    // An ordinary bug: unknown, naming the exception and the line.
    let c = exec_src(rig, "def execute(args):\n    x = 1\n    return x / 0\n").await;
    let e = c.err();
    assert_eq!(e.kind, ErrorKind::Unknown, "{e:#?}");
    assert!(e.message.contains("ZeroDivisionError"), "{e:#?}");
    assert!(e.message.contains("line 3"), "{e:#?}");
    let tb = e.details.as_deref().expect("details")["traceback"]
        .as_str()
        .expect("traceback")
        .to_string();
    assert!(tb.contains("<neuron probe>"), "{tb}");

    // A syntax error: invalid-args with the line.
    let c = exec_src(rig, "def execute(args):\n    return [1, 2\n").await;
    let e = c.err();
    assert_eq!(e.kind, ErrorKind::InvalidArgs, "{e:#?}");
    assert!(e.message.contains("not valid Python"), "{e:#?}");
    assert!(e.details.as_deref().expect("details")["line"].is_u64());

    // No execute: invalid-args saying what to define.
    let c = exec_src(rig, "def run(args):\n    return 1\n").await;
    let e = c.err();
    assert_eq!(e.kind, ErrorKind::InvalidArgs);
    assert!(e.llm_hint.contains("def execute(args)"), "{e:#?}");

    // Every kind a neuron raises arrives as that kind, with retriable.
    for kind in [
        "not-found",
        "permission_denied",
        "network-error",
        "quota-exceeded",
        "timeout",
    ] {
        let src = format!(
            "from capsaga import ToolError\ndef execute(args):\n    raise ToolError({kind:?}, 'm', llm_hint='h')\n"
        );
        let e = exec_src(rig, &src).await.err().clone();
        assert_eq!(e.kind.as_str(), kind.replace('_', "-"));
        assert_eq!((e.message.as_str(), e.llm_hint.as_str()), ("m", "h"));
        assert_eq!(e.retriable, kind == "network-error" || kind == "timeout");
    }

    // A result that is not JSON (NaN) is refused by the runner.
    let c = exec_src(rig, "def execute(args):\n    return float('nan')\n").await;
    assert_eq!(c.err().kind, ErrorKind::Unknown);
    // Sets and dates are converted.
    let c = exec_src(
        rig,
        "import datetime\ndef execute(args):\n    return {'s': {3, 1}, 'd': datetime.date(2025, 1, 2)}\n",
    )
    .await;
    assert_eq!(c.data(), json!({"s": [1, 3], "d": "2025-01-02"}));
    // exit() is not a way out either.
    let c = exec_src(rig, "import sys\ndef execute(args):\n    sys.exit(3)\n").await;
    assert_eq!(c.err().kind, ErrorKind::Unknown);
    assert!(c.err().llm_hint.contains("ToolError"));
}

#[tokio::test]
async fn prints_are_logged_and_nothing_survives_a_call() {
    let rig = rig!();
    let src = "import capsaga\nimport random\ncapsaga.calls = getattr(capsaga, 'calls', 0) + 1\n\
               def execute(args):\n    print('computing', args['n'])\n    \
               return {'calls': capsaga.calls, 'r': random.random()}\n";
    let def = neuron("stateful", src);
    let a = exec(rig, &def, &[], json!({"n": 1})).await;
    let b = exec(rig, &def, &[], json!({"n": 2})).await;
    assert_eq!(a.data()["calls"], 1);
    assert_eq!(b.data()["calls"], 1, "module state survived a call");
    assert_ne!(
        a.data()["r"],
        b.data()["r"],
        "random starts from the same build-time state in every instance"
    );
    assert!(
        b.logs
            .iter()
            .any(|(level, m)| level == "info" && m.contains("computing 2")),
        "{:?}",
        b.logs
    );
}

#[tokio::test]
async fn the_snapshots_objects_are_immortal_and_what_a_call_changes_in_them_does_not_survive() {
    // The build's post-pass (tools/neuron_runner/immortalize.py) made every
    // object of the interpreter snapshot immortal, so that calls write no
    // reference counts to the snapshot's pages. A call may still change
    // those objects; the next call, in a fresh instance, sees none of it.
    let rig = rig!();
    let src = "import sys, json, csv, capsaga\n\
               def execute(args):\n    \
                   snap = [json, json.loads, csv.DictReader, capsaga.ToolError, sys.modules, execute.__globals__['__builtins__']]\n    \
                   before = {'seen': getattr(json, 'seen', None), 'has_loads': hasattr(json, 'loads')}\n    \
                   json.seen = args['n']\n    \
                   del json.loads\n    \
                   return {'snapshot': [sys._is_immortal(o) for o in snap],\n            \
                           'new': sys._is_immortal([args['n']]), 'before': before,\n            \
                           'dumps': json.dumps({'n': args['n']})}\n";
    let def = neuron("immortal", src);
    let a = exec(rig, &def, &[], json!({"n": 1})).await;
    let b = exec(rig, &def, &[], json!({"n": 2})).await;
    for c in [&a, &b] {
        assert_eq!(
            c.data()["snapshot"],
            json!([true, true, true, true, true, true]),
            "{:?}",
            c.data()
        );
        assert_eq!(c.data()["new"], false, "{:?}", c.data());
    }
    assert_eq!(b.data()["before"], json!({"seen": null, "has_loads": true}));
    assert_eq!(b.data()["dumps"], "{\"n\": 2}");
}

#[tokio::test]
async fn code_run_script_with_named_inputs_and_a_scratch_directory() {
    let rig = rig!();
    let (_d, root) = tempdir();
    let inputs = root.join("inputs");
    let scratch = root.join("scratch");
    std::fs::create_dir_all(&inputs).expect("mkdir");
    std::fs::create_dir_all(&scratch).expect("mkdir");
    std::fs::write(inputs.join("s1.csv"), "amount\n10\n20.5\n30\n").expect("write");
    let code = r#"
import csv, os, capsaga
with open(capsaga.inputs["sales.csv"], newline="") as f:
    rows = list(csv.DictReader(f))
total = sum(float(r["amount"]) for r in rows)
with open(os.path.join(capsaga.scratch_dir, "report.txt"), "w") as out:
    out.write(f"total={total}\n")
print("rows:", len(rows))
result = {"total": total, "label": args["label"]}
"#;
    let mut def = neuron("code_run", code);
    def.kind = SourceKind::Script;
    def.inputs = vec![NamedFile {
        name: "sales.csv".into(),
        path: inputs.join("s1.csv").display().to_string(),
    }];
    def.scratch_dir = Some(scratch.display().to_string());
    let grants = caps(&[read_grant(&inputs), write_grant(&scratch)]);
    let c = exec(rig, &def, &grants, json!({"label": "Q1"})).await;
    assert_eq!(
        c.data(),
        json!({"result": {"total": 60.5, "label": "Q1"}, "stdout": "rows: 3\n"})
    );
    assert_eq!(
        std::fs::read_to_string(scratch.join("report.txt")).expect("report"),
        "total=60.5\n"
    );
    // The inputs are read-only for the script.
    def.source = format!(
        "open({:?}, 'w').write('tampered')\n",
        inputs.join("s1.csv").display().to_string()
    );
    let c = exec(rig, &def, &grants, json!({})).await;
    assert_eq!(c.err().kind, ErrorKind::PermissionDenied, "{:#?}", c.err());
    // sys.exit(0) ends a script normally; a script has no dry run.
    def.source = "import sys\nprint('done')\nsys.exit(0)\n".into();
    let c = exec(rig, &def, &grants, json!({})).await;
    assert_eq!(c.data(), json!({"result": null, "stdout": "done\n"}));
    let c = rig
        .call(&def, &Op::DryRun, &grants, &Limits::DEFAULT, "{}")
        .await;
    assert_eq!(c.err().kind, ErrorKind::Unsupported);
}

#[tokio::test]
async fn http_goes_through_wasi_http_and_the_net_guard() {
    let rig = rig!();
    let srv = TestServer::start().await;
    let src = "from capsaga import http\ndef execute(args):\n    r = http.get(args['url'])\n    \
               return {'status': r.status, 'body': r.text()}\n";
    let def = neuron("fetch", src);
    let url = srv.url("/hello");
    // No grant: the net guard refuses, nothing reaches the server.
    let c = exec(rig, &def, &[], json!({"url": url})).await;
    let e = contained(rig, &c, ErrorKind::PermissionDenied).await;
    assert!(e.message.contains("refused"), "{e:#?}");
    assert_eq!(srv.count(), 0);
    // The literal address granted: the request goes through.
    let grant = format!("net:http:127.0.0.1:{}", srv.addr.port());
    let c = exec(rig, &def, &caps(&[grant]), json!({"url": url})).await;
    let d = c.data();
    assert_eq!(d["status"], 200);
    assert!(
        d["body"].as_str().unwrap_or("").contains("hello world"),
        "{d}"
    );
    assert_eq!(srv.count(), 1);
}

// ---- hostile sources ---------------------------------------------------------

// After `rig!`: macros are in scope only below their definition.
mod bytecode;
mod containment;
