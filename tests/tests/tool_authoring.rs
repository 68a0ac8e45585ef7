//! Tool authors' path (issue 16), through the real `capsaga` binary: the
//! scaffold generated, built into a real component, called without a policy
//! file and undone; `test-tool` in the real sandbox, catching a broken
//! compensate; and the diagnostics an author or operator meets on the way.

use capsaga_tests::{TestWorkspace, capsaga_bin, component, repo_root};
use serde_json::Value;
use std::path::Path;
use std::process::{Command, Output};

fn run(mut c: Command) -> (i32, String, String) {
    let Output {
        status,
        stdout,
        stderr,
    } = c.stdin(std::process::Stdio::null()).output().unwrap();
    (
        status.code().unwrap_or(-1),
        String::from_utf8_lossy(&stdout).into_owned(),
        String::from_utf8_lossy(&stderr).into_owned(),
    )
}

/// `capsaga` without a policy file, in `dir`.
fn bare(dir: &Path, args: &[&str]) -> (i32, String, String) {
    let mut c = Command::new(capsaga_bin());
    c.current_dir(dir)
        .args(args)
        .env_remove("CAPSAGA_CONFIG")
        .env_remove("CI");
    run(c)
}

/// The one test that builds a real component from the scaffold: generate
/// (out of tree, SDK by path), build with the project's guest toolchain,
/// round trip in the real sandbox, call without a policy file, undo.
#[test]
fn scaffold_generates_builds_calls_and_round_trips() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().canonicalize().unwrap();
    let crate_dir = root.join("append_probe");
    let crate_s = crate_dir.to_str().unwrap();
    let repo = repo_root();
    let (code, out, err) = bare(
        &root,
        &[
            "new",
            "tool",
            "append_probe",
            "--side-effects",
            "--path",
            crate_s,
            "--repo",
            repo.to_str().unwrap(),
        ],
    );
    assert_eq!(code, 0, "{out}{err}");
    for f in [
        "Cargo.toml",
        "src/lib.rs",
        "src/tests.rs",
        "policy.toml",
        "README.md",
    ] {
        assert!(crate_dir.join(f).is_file(), "{f} missing: {out}");
    }
    let cargo = std::fs::read_to_string(crate_dir.join("Cargo.toml")).unwrap();
    assert!(cargo.contains("opt-level = \"s\""), "{cargo}");
    assert!(
        cargo.contains(&format!("{}", repo.join("sdk").display())),
        "{cargo}"
    );

    let mut build = Command::new(repo.join("scripts/build-components"));
    build.args(["--path", crate_s]);
    let (code, out, err) = run(build);
    assert_eq!(code, 0, "build failed:\n{out}\n{err}");
    let release = crate_dir.join("target/wasm32-wasip2/release");
    let wasm = release.join("append_probe.wasm");
    assert!(wasm.is_file(), "{err}");

    let ws = root.join("ws");
    std::fs::create_dir(&ws).unwrap();
    std::fs::write(ws.join("notes.txt"), "first\n").unwrap();
    let grant = format!("fs:write:{}/**", ws.display());
    let notes = ws.join("notes.txt");
    let args = format!(r#"{{"path":"{}","line":"hello"}}"#, notes.display());

    // The round trip through the real sandbox and the door.
    let (code, out, err) = bare(
        &root,
        &[
            "test-tool",
            wasm.to_str().unwrap(),
            "--grant",
            &grant,
            "--args",
            &args,
            "--roundtrip",
        ],
    );
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.contains("ok      dry-run"), "{out}");
    assert!(out.contains("byte-identical"), "{out}");
    assert!(out.contains("ok      third party: unrevertible"), "{out}");
    assert_eq!(std::fs::read(&notes).unwrap(), b"first\n", "restored");

    // A quick call without a policy file, then its undo.
    let tools_dir = release.to_str().unwrap();
    let (code, out, err) = bare(
        &root,
        &[
            "--json",
            "call",
            "append_probe",
            &args,
            "--tools-dir",
            tools_dir,
            "--grant",
            &grant,
        ],
    );
    assert_eq!(code, 0, "{out}{err}");
    assert_eq!(std::fs::read(&notes).unwrap(), b"first\nhello\n");
    let v: Value = serde_json::from_str(&out).unwrap();
    let saga = v["saga_id"].as_str().unwrap().to_string();
    let (code, out, err) = bare(&root, &["undo", "--saga", &saga, "--tools-dir", tools_dir]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.contains("compensated step 0 (append_probe)"), "{out}");
    assert_eq!(std::fs::read(&notes).unwrap(), b"first\n");
    // A second undo is refused: the saga is no longer Done.
    let (code, _, err) = bare(&root, &["undo", "--saga", &saga, "--tools-dir", tools_dir]);
    assert_eq!(code, 3, "{err}");
    assert!(err.contains("only a Done saga"), "{err}");
}

#[test]
fn test_tool_catches_a_broken_compensate() {
    let tmp = tempfile::tempdir().unwrap();
    let wasm = component("compensate_trap");
    let (code, out, err) = bare(
        tmp.path(),
        &["test-tool", wasm.to_str().unwrap(), "--roundtrip"],
    );
    assert_eq!(code, 7, "{out}{err}");
    assert!(out.contains("FAILED  undo (compensate)"), "{out}");
    assert!(out.contains("round trip compensate_trap: FAILED"), "{out}");
}

#[test]
fn test_tool_runs_one_call_and_names_missing_grants() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().canonicalize().unwrap();
    std::fs::write(dir.join("a.txt"), "hi").unwrap();
    let wasm = component("fs_read");
    let path = dir.join("a.txt");
    let args = format!(r#"{{"path":"{}"}}"#, path.display());
    let grant = format!("fs:read:{}/**", dir.display());
    let (code, out, err) = bare(
        &dir,
        &[
            "test-tool",
            wasm.to_str().unwrap(),
            "--grant",
            &grant,
            "--args",
            &args,
        ],
    );
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.contains("hi"), "{out}");
    // No grant: refused before anything runs, naming the declaration.
    let (code, out, err) = bare(
        &dir,
        &["test-tool", wasm.to_str().unwrap(), "--args", &args],
    );
    assert_eq!(code, 3, "{out}{err}");
    assert!(err.contains("declares fs:read:*"), "{err}");
    assert!(err.contains("--grant"), "{err}");
}

#[test]
fn check_args_names_the_real_tool() {
    let ws = TestWorkspace::new(
        &["fs_read"],
        "[tools.fs_read]\ngrants = [\"fs:read:~/ws/**\"]",
    );
    let (code, out, err) =
        run(ws.capsaga(&["check", "args", r#"{"path":7}"#, "--tool", "fs_read"]));
    assert_eq!(code, 7, "{out}{err}");
    assert!(out.contains("fs_read"), "{out}");
    assert!(!out.contains("`check`"), "{out}");
}

fn saga_count(ws: &TestWorkspace) -> usize {
    let (code, out, err) = run(ws.capsaga(&["--json", "sagas"]));
    assert_eq!(code, 0, "{out}{err}");
    let v: Value = serde_json::from_str(&out).unwrap();
    v.as_array().map_or(0, Vec::len)
}

#[test]
fn a_grant_of_the_wrong_kind_is_refused_at_load_with_exit_3() {
    let ws = TestWorkspace::new(
        &["fs_write"],
        "[tools.fs_write]\ngrants = [\"fs:read:~/ws/**\"]",
    );
    let args = format!(r#"{{"path":"{}","content":"x"}}"#, ws.ws_path("a.txt"));
    let (code, out, err) = run(ws.capsaga(&["call", "fs_write", &args]));
    assert_eq!(code, 3, "{out}{err}");
    assert!(err.contains("declares fs:write:*"), "{err}");
    assert!(err.contains("fs:read:"), "{err}");
    assert!(err.contains("\"fs:write:~/workspace/**\""), "{err}");
    assert!(!ws.ws().join("a.txt").exists());
    // No saga was recorded (the host did not even start).
    ws.write_policy("");
    assert_eq!(saga_count(&ws), 0);
}

#[test]
fn a_tool_without_a_section_is_refused_before_any_saga() {
    let ws = TestWorkspace::new(
        &["fs_read", "fs_write"],
        "[tools.fs_write]\ngrants = [\"fs:write:~/ws/**\"]",
    );
    let args = format!(r#"{{"path":"{}"}}"#, ws.ws_path("a.txt"));
    let (code, out, err) = run(ws.capsaga(&["call", "fs_read", &args]));
    assert_eq!(code, 3, "{out}{err}");
    assert!(err.contains("[tools.fs_read]"), "{err}");
    assert!(err.contains("declares fs:read:*"), "{err}");
    assert_eq!(saga_count(&ws), 0);
}

#[test]
fn trace_and_agent_views_show_the_hint_the_model_got() {
    let ws = TestWorkspace::new(
        &["fs_read"],
        "[tools.fs_read]\ngrants = [\"fs:read:~/ws/**\"]",
    );
    let script = ws.root.join("script.json");
    std::fs::write(
        &script,
        r#"{"turns":[
            {"text":"read it","tool_calls":[{"name":"fs_read","arguments":{"path":"${home}/ws/missing.txt"}}]},
            {"text":"It does not exist."}
        ]}"#,
    )
    .unwrap();
    let (code, out, err) = run(ws.capsaga(&[
        "agent",
        "--script",
        script.to_str().unwrap(),
        "read the missing file",
    ]));
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.contains("hint to the model:"), "{out}");
    let (code, out, err) = run(ws.capsaga(&["trace", "last"]));
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.contains("hint to the model:"), "{out}");
    // The WASI errno is translated: no "os error 44" for the human.
    assert!(!out.contains("os error"), "{out}");
}

#[test]
fn the_first_start_says_that_components_compile() {
    // A cache of its own: the default, `<state_dir>/compiled`.
    let ws = TestWorkspace::new(
        &["time_now"],
        "compiled_cache = \".capsaga/compiled\"\n[tools.time_now]\ngrants = []",
    );
    let (code, out, err) = run(ws.capsaga(&["tools", "list"]));
    assert_eq!(code, 0, "{out}{err}");
    assert!(
        err.contains("capsaga: reading the meta of component"),
        "{err}"
    );
    let (code, out, err) = run(ws.capsaga(&["call", "time_now", "{}"]));
    assert_eq!(code, 0, "{out}{err}");
    assert!(err.contains("capsaga: compiling component"), "{err}");
    assert!(!err.contains("reading the meta"), "kept: {err}");
    let (code, out, err) = run(ws.capsaga(&["call", "time_now", "{}"]));
    assert_eq!(code, 0, "{out}{err}");
    assert!(
        !err.contains("compiling") && !err.contains("reading"),
        "cached on the third start: {err}"
    );
}
