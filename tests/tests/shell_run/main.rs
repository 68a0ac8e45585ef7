//! `shell_run` through the real sandbox: a shell whose interpreter and
//! commands are one WebAssembly component. Hostile scripts are contained
//! with a clear error and change nothing outside (or inside) the grant; a
//! script's changes are applied when it ends, recorded with their
//! pre-images, and put back byte for byte by the saga's rollback.

use capsaga_door::dispatch::{Args, Call, Dispatcher, Outcome};
use capsaga_door::host::Host;
use capsaga_store::Scope;
use capsaga_tests::{TestWorkspace, snapshot};
use serde_json::{Value, json};
use std::sync::Arc;

mod redteam;

const SECRET: &str = "TOP-SECRET-outside-the-grant";

const POLICY: &str = r#"
[tools.shell_run]
grants = ["fs:write:~/ws/**"]
"#;

fn setup() -> TestWorkspace {
    let ws = TestWorkspace::new(&["shell_run"], POLICY);
    std::fs::write(ws.root.join("secret.txt"), SECRET).unwrap();
    std::fs::write(ws.ws().join("notes.txt"), "alpha\nbeta\ngamma\n").unwrap();
    std::os::unix::fs::symlink(ws.root.join("secret.txt"), ws.ws().join("planted")).unwrap();
    std::os::unix::fs::symlink(&ws.root, ws.ws().join("up")).unwrap();
    ws
}

/// Runs `script` as a one-step saga and keeps the step (no rollback).
async fn run(host: &Arc<Host>, script: &str) -> Value {
    let door = Dispatcher::new(host.clone());
    let mut saga = door.start(Scope::Call, "test", None).await.unwrap();
    let args = json!({"script": script});
    let out = door
        .submit(&mut saga, Call::new("shell_run", Args::Value(&args)))
        .await
        .unwrap()
        .outcome;
    door.finish(&mut saga).await.unwrap();
    match out {
        Outcome::Committed { output, .. } => output.data,
        other => panic!("{script}: {other:?}"),
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn hostile_scripts_are_contained_with_a_clear_error() {
    let ws = setup();
    let host = ws.host().await;
    let ws_before = snapshot(&ws.ws());
    let names = |dir: &std::path::Path| {
        let mut v: Vec<String> = std::fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        v.sort();
        v
    };
    let root_before = names(&ws.root);
    // (script, what stderr must say)
    let cases: &[(&str, &str)] = &[
        (
            "cat /etc/passwd",
            "/etc/passwd: permission denied: outside the directories granted",
        ),
        (
            "cat ../secret.txt",
            "permission denied: outside the directories granted",
        ),
        ("cd .. && cat secret.txt", "cd: ..: permission denied"),
        ("cd / ; ls", "cd: /: permission denied"),
        ("ln -s / x; cat x/etc/passwd", "ln: command not found"),
        (
            "echo $(cat /etc/passwd)",
            "cat: /etc/passwd: permission denied",
        ),
        ("echo `cat ../secret.txt`", "permission denied"),
        ("x=$(cat up/secret.txt); echo \"$x\"", "permission denied"),
        ("rm -rf /", "permission denied"),
        ("rm -rf .", "is a granted directory itself"),
        ("echo pwned > planted", "planted: permission denied"),
        ("sed -i s/T/X/ planted", "permission denied"),
        ("cp planted copy.txt", "permission denied"),
        ("/bin/sh -c 'cat /etc/passwd'", "cannot run programs"),
        ("exec /bin/sh", "there is no exec"),
        ("curl http://169.254.169.254/", "curl: command not found"),
    ];
    for (script, says) in cases {
        let d = run(&host, script).await;
        let stderr = d["stderr"].as_str().unwrap();
        let stdout = d["stdout"].as_str().unwrap();
        assert!(stderr.contains(says), "{script}: stderr {stderr:?}");
        assert!(
            !stdout.contains(SECRET) && !stdout.contains("root:"),
            "{script}: {stdout}"
        );
        assert!(!stderr.contains(SECRET), "{script}: {stderr}");
        assert_eq!(d["changes"], json!([]), "{script}");
        assert!(
            d["exit_code"] != 0 || !d["refused"].as_array().unwrap().is_empty(),
            "{script}: {d}"
        );
    }
    // An unknown command names the available ones.
    let d = run(&host, "ln -s / x").await;
    assert_eq!(d["exit_code"], 127);
    let stderr = d["stderr"].as_str().unwrap();
    assert!(
        stderr.contains("only its own commands") && stderr.contains("grep, head"),
        "{d}"
    );
    // Nothing changed, inside the grant or outside it (the state database
    // under .capsaga changes with every saga, so the root is compared by name).
    assert_eq!(snapshot(&ws.ws()), ws_before);
    assert_eq!(names(&ws.root), root_before);
    assert_eq!(
        std::fs::read_to_string(ws.root.join("secret.txt")).unwrap(),
        SECRET
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn floods_bombs_and_loops_hit_limits_and_the_host_carries_on() {
    let ws = setup();
    let host = ws.host().await;
    let before = snapshot(&ws.ws());

    let d = run(&host, "yes | head -c 100000000").await;
    assert_eq!(d["exit_code"], 0, "{}", d["stderr"]);
    assert_eq!(d["stdout"].as_str().unwrap().len(), 65536);
    assert!(
        d["stdout_truncated_bytes"].as_u64().unwrap() > 1_000_000,
        "{d}"
    );
    assert!(
        d["stderr"].as_str().unwrap().contains("pipe limit"),
        "{}",
        d["stderr"]
    );

    // A fork-bomb-shaped function: the nesting limit, inside the shell.
    let d = run(&host, "echo x > bomb.txt; :(){ :|:& };:").await;
    assert_eq!(d["exit_code"], 124);
    assert!(
        d["stopped"]
            .as_str()
            .unwrap()
            .contains("nested deeper than 64"),
        "{d}"
    );
    assert!(
        d["stderr"]
            .as_str()
            .unwrap()
            .contains("nothing was changed")
    );

    // An endless loop: the shell's step limit or its stop time.
    let d = run(&host, "echo x > loop.txt; while true; do :; done").await;
    assert_eq!(d["exit_code"], 124, "{d}");
    assert_eq!(d["changes"], json!([]));

    assert_eq!(
        snapshot(&ws.ws()),
        before,
        "a stopped script changes nothing"
    );
    // The host still works.
    let d = run(&host, "grep -c a notes.txt").await;
    assert_eq!(d["stdout"], "3\n");
}

#[tokio::test(flavor = "multi_thread")]
async fn changes_are_recorded_then_rolled_back_byte_for_byte() {
    let ws = setup();
    std::fs::create_dir(ws.ws().join("old")).unwrap();
    std::fs::write(ws.ws().join("old/keep.bin"), [0u8, 159, 146, 150]).unwrap();
    let before = snapshot(&ws.ws());
    let host = ws.host().await;
    let door = Dispatcher::new(host.clone());
    let mut saga = door.start(Scope::Call, "test", None).await.unwrap();
    let script = "set -e\n\
        mkdir -p out/deep\n\
        grep -v beta notes.txt | sort -r | tr a-z A-Z > out/deep/summary.txt\n\
        sed -i 's/beta/BETA/' notes.txt\n\
        echo appended >> notes.txt\n\
        mv old moved\n\
        for i in 1 2 3; do echo \"line $i\" >> out/list.txt; done\n\
        wc -l < out/list.txt";
    let args = json!({"script": script});
    let out = door
        .submit(&mut saga, Call::new("shell_run", Args::Value(&args)))
        .await
        .unwrap()
        .outcome;
    let Outcome::Committed { output, .. } = out else {
        panic!("{out:?}")
    };
    let d = &output.data;
    assert_eq!(d["exit_code"], 0, "{d}");
    assert_eq!(d["stdout"], "3\n");
    assert_eq!(d["applied"], true);
    let read = |p: &str| std::fs::read_to_string(ws.ws().join(p)).unwrap();
    assert_eq!(read("out/deep/summary.txt"), "GAMMA\nALPHA\n");
    assert_eq!(read("notes.txt"), "alpha\nBETA\ngamma\nappended\n");
    assert!(ws.ws().join("moved/keep.bin").exists() && !ws.ws().join("old").exists());
    // Every change carries its pre-image: notes.txt's previous content.
    let notes = d["changes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["path"].as_str().unwrap().ends_with("/notes.txt"))
        .unwrap();
    assert_eq!(notes["before"]["content"], "alpha\nbeta\ngamma\n");
    assert!(
        output.effects.iter().any(|e| e.starts_with("wrote ")),
        "{:?}",
        output.effects
    );

    // A later failure rolls the saga back: shell_run's compensate runs.
    let report = door.abort(&mut saga).await.unwrap();
    assert!(report.all_compensated(), "{report:?}");
    assert_eq!(snapshot(&ws.ws()), before, "byte-identical after rollback");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_dry_run_reports_the_writes_and_changes_nothing() {
    let ws = setup();
    let before = snapshot(&ws.ws());
    let out = ws
        .capsaga(&[
            "--json",
            "call",
            "shell_run",
            r#"{"script": "echo new > made.txt; rm notes.txt; mkdir d"}"#,
            "--dry-run",
        ])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("would create"), "{text}");
    assert!(text.contains("would remove"), "{text}");
    assert!(text.contains("made.txt"), "{text}");
    assert_eq!(snapshot(&ws.ws()), before);
}
