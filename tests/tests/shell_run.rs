//! `shell_run` through the real sandbox: a shell whose interpreter and
//! commands are one WebAssembly component. Hostile scripts are contained
//! with a clear error and change nothing outside (or inside) the grant; a
//! script's changes are applied when it ends, recorded with their
//! pre-images, and put back byte for byte by the saga's rollback.

use capsaga_core::error::ErrorKind;
use capsaga_host::dispatch::{Args, Call, Dispatcher, Outcome};
use capsaga_host::host::Host;
use capsaga_host::store::Origin;
use capsaga_tests::{TestWorkspace, snapshot};
use serde_json::{Value, json};
use std::sync::Arc;
use std::time::Instant;

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
    let mut saga = door.start(Origin::Call, "test", None).await.unwrap();
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

    let t0 = Instant::now();
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
    assert!(t0.elapsed().as_secs() < 10);

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
    let mut saga = door.start(Origin::Call, "test", None).await.unwrap();
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

/// Dry-runs `args` through the door: the real dry-run sandbox, with every
/// grant read-only. Returns the output's data.
async fn preview(host: &Arc<Host>, args: &Value) -> Value {
    let door = Dispatcher::new(host.clone());
    match door
        .dry_run(Call::new("shell_run", Args::Value(args)))
        .await
        .outcome
    {
        Outcome::Previewed {
            result: Ok(output), ..
        } => output.data,
        other => panic!("{args}: {other:?}"),
    }
}

/// Submits `tool` with `args` as a one-step saga, finished (or already
/// rolled back when the step failed); returns the outcome.
async fn submit(host: &Arc<Host>, tool: &str, args: &Value) -> Outcome {
    let door = Dispatcher::new(host.clone());
    let mut saga = door.start(Origin::Call, "test", None).await.unwrap();
    let out = door
        .submit(&mut saga, Call::new(tool, Args::Value(args)))
        .await
        .unwrap()
        .outcome;
    if matches!(out, Outcome::Committed { .. }) {
        door.finish(&mut saga).await.unwrap();
    }
    out
}

/// The changed paths of a shell_run output, relative, with their new kind.
fn changed(d: &Value, ws: &std::path::Path) -> Vec<String> {
    let ws = ws.to_string_lossy();
    d["changes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| {
            let p = c["path"].as_str().unwrap();
            format!(
                "{} {}",
                p.strip_prefix(&*ws).unwrap_or(p),
                c["after"]["kind"]
            )
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread")]
async fn the_dry_run_runs_every_script_and_sees_what_execute_sees() {
    // The dry-run sandbox has read-only preopens; the script must not be able
    // to tell, and the dry run must list every write execute then makes.
    let ws = setup();
    let host = ws.host().await;
    let notes = ws.ws().join("notes.txt");
    let writers = [
        "if [ -w . ]; then rm notes.txt; echo EXEC; else echo DRY; fi",
        "[ -w notes.txt ] || exit 0; sed -i s/alpha/PWNED/ notes.txt",
        "sed --in-place=x s/alpha/PWNED/ notes.txt",
        "[[ -n $(rm notes.txt) ]]",
        "(( $(rm notes.txt) 1 ))",
        "case x in $(rm notes.txt)) ;; esac",
        "for (( i=$(rm notes.txt); i<1; i++ )); do :; done",
        "echo x > notes.txt 2>/dev/null && echo wrote || echo refused",
        "touch probe && rm probe && rm notes.txt",
        "eval 'r''m notes.txt'",
    ];
    for script in writers {
        std::fs::write(&notes, "alpha\nbeta\ngamma\n").unwrap();
        let _ = std::fs::remove_file(ws.ws().join("notes.txtx"));
        let before = snapshot(&ws.ws());
        let args = json!({ "script": script });
        let dry = preview(&host, &args).await;
        assert_eq!(snapshot(&ws.ws()), before, "{script}: the dry run wrote");
        assert_eq!(dry["ran"], true, "{script}");
        assert!(
            changed(&dry, &ws.ws())
                .iter()
                .any(|c| c.starts_with("/notes.txt ")),
            "{script}: {dry}"
        );
        let exec = run(&host, script).await;
        assert_ne!(
            snapshot(&ws.ws()),
            before,
            "{script}: execute changed nothing"
        );
        assert_eq!(
            changed(&dry, &ws.ws()),
            changed(&exec, &ws.ws()),
            "{script}"
        );
        for k in ["exit_code", "stdout", "stderr", "refused"] {
            assert_eq!(dry[k], exec[k], "{script}: {k}");
        }
    }
    // What a script observes is the same in both modes.
    let probes = [
        "for t in -e -r -w -x -d -f; do [ $t . ] && echo \"$t yes\" || echo \"$t no\"; done",
        "[[ -w notes.txt ]] && echo w; test -w /; echo $?",
        "ls -l; ls -la .",
        "env | sort; pwd; echo \"$HOME\"",
        "echo x > ../secret.txt; echo $?; echo x > /etc/x; echo $?",
        "mkdir d && echo made; echo x > d/f; echo $?; ls d",
    ];
    for script in probes {
        std::fs::write(&notes, "alpha\nbeta\ngamma\n").unwrap();
        let _ = std::fs::remove_dir_all(ws.ws().join("d"));
        let args = json!({ "script": script });
        let dry = preview(&host, &args).await;
        let exec = run(&host, script).await;
        for k in ["exit_code", "stdout", "stderr", "refused"] {
            assert_eq!(dry[k], exec[k], "{script}: {k}");
        }
        assert_eq!(
            changed(&dry, &ws.ws()),
            changed(&exec, &ws.ws()),
            "{script}"
        );
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_write_under_a_read_only_grant_changes_nothing() {
    let ws = TestWorkspace::new(
        &["shell_run"],
        "[tools.shell_run]\ngrants = [\"fs:write:~/ws/**\", \"fs:read:~/ro/**\"]\n",
    );
    std::fs::create_dir(ws.root.join("ro")).unwrap();
    std::fs::write(ws.root.join("ro/keep.txt"), "keep\n").unwrap();
    std::fs::write(ws.ws().join("a.txt"), "a\n").unwrap();
    let (ro_before, ws_before) = (snapshot(&ws.root.join("ro")), snapshot(&ws.ws()));
    let host = ws.host().await;
    let ro = ws.root.join("ro").to_string_lossy().into_owned();
    for script in [
        format!("rm a.txt; echo x > {ro}/new.txt"),
        format!("[ -w {ro} ] && rm {ro}/keep.txt; echo more >> a.txt"),
        format!("echo new > b.txt; sed -i s/keep/K/ {ro}/keep.txt"),
        format!("mkdir {ro}/d"),
    ] {
        let args = json!({ "script": script, "cwd": ws.ws().to_string_lossy() });
        let dry = preview(&host, &args).await;
        assert!(
            changed(&dry, &ws.root)
                .iter()
                .any(|c| c.starts_with("/ro/")),
            "{script}: the dry run lists the write: {dry}"
        );
        match submit(&host, "shell_run", &args).await {
            Outcome::Failed { error, .. } => {
                assert_eq!(
                    error.kind,
                    ErrorKind::PermissionDenied,
                    "{script}: {error:?}"
                );
                assert!(error.message.contains("read-only"), "{}", error.message);
            }
            other => panic!("{script}: {other:?}"),
        }
        assert_eq!(snapshot(&ws.root.join("ro")), ro_before, "{script}");
        assert_eq!(snapshot(&ws.ws()), ws_before, "{script}");
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn unsupported_redirections_and_overlay_directories() {
    let ws = setup();
    let host = ws.host().await;
    let before = snapshot(&ws.ws());
    for script in [
        "echo hi 3>notes.txt",
        "exec 3>made.txt",
        "echo hi >made.txt 4>notes.txt",
        "echo hi >made.txt 2>&5",
        "x=7; echo hi >made.txt 1>&$x",
        "{ echo hi; } 9>>notes.txt",
    ] {
        let args = json!({ "script": script });
        let dry = preview(&host, &args).await;
        assert_eq!(dry["changes"], json!([]), "{script}: {dry}");
        let exec = run(&host, script).await;
        assert_eq!(exec["changes"], json!([]), "{script}: {exec}");
        assert_ne!(exec["exit_code"], 0, "{script}");
        assert_eq!(snapshot(&ws.ws()), before, "{script}");
    }
    // A directory made by the script lists like any other.
    let d = preview(
        &host,
        &json!({"script": "mkdir nd; ls nd; echo $?; touch nd/f; ls nd"}),
    )
    .await;
    assert_eq!(d["stdout"], "0\nf\n", "{d}");
    assert_eq!(d["stderr"], "", "{d}");
}

#[tokio::test(flavor = "multi_thread")]
async fn output_over_the_host_cap_is_cut_or_refused_before_any_change() {
    let ws = setup();
    let host = ws.host().await;
    // Control characters grow six-fold as JSON: 1 MiB of stdout is 6 MiB,
    // over the 4 MiB cap. stdout is cut to fit; the removal is made and
    // recorded (the step commits, so its rollback can undo it).
    let script = "if [ -w . ]; then rm notes.txt; yes '\u{1}' | head -c 3000000 | tr -d '\\n'; fi";
    let args = json!({ "script": script, "max_output_bytes": 1_048_576 });
    let output = match submit(&host, "shell_run", &args).await {
        Outcome::Committed { output, .. } => output,
        other => panic!("{other:?}"),
    };
    assert!(!ws.ws().join("notes.txt").exists());
    assert!(output.data["stdout_truncated_bytes"].as_u64().unwrap() > 0);
    assert!(output.data.to_string().len() < 4 * 1024 * 1024);
    assert_eq!(changed(&output.data, &ws.ws()), ["/notes.txt \"absent\""]);
    // Pre-images too large to travel back: quota-exceeded, nothing changed.
    std::fs::write(ws.ws().join("ctl.txt"), "\u{1}".repeat(1 << 20)).unwrap();
    let before = snapshot(&ws.ws());
    for script in ["rm ctl.txt", "echo new > new.txt; rm ctl.txt; mkdir d"] {
        let args = json!({ "script": script });
        match submit(&host, "shell_run", &args).await {
            Outcome::Failed { error, .. } => {
                assert_eq!(error.kind, ErrorKind::QuotaExceeded, "{script}: {error:?}");
            }
            other => panic!("{script}: {other:?}"),
        }
        assert_eq!(snapshot(&ws.ws()), before, "{script}");
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn writes_and_their_undo_keep_permission_bits_and_hard_links() {
    use std::os::unix::fs::{MetadataExt, PermissionsExt};
    let policy = "[tools.shell_run]\ngrants = [\"fs:write:~/ws/**\"]\n\
                  [tools.fs_write]\ngrants = [\"fs:write:~/ws/**\"]\n\
                  [tools.fs_edit]\ngrants = [\"fs:write:~/ws/**\"]\n";
    let ws = TestWorkspace::new(&["shell_run", "fs_write", "fs_edit"], policy);
    let host = ws.host().await;
    let p = |n: &str| ws.ws().join(n);
    let mode = |n: &str| std::fs::metadata(p(n)).unwrap().permissions().mode() & 0o777;
    let calls: Vec<(&str, Value)> = vec![
        (
            "shell_run",
            json!({"script": "sed -i s/secret/S/ .env; echo more >> run.sh"}),
        ),
        (
            "fs_write",
            json!({"path": ws.ws_path(".env"), "content": "TOKEN=new\n"}),
        ),
        (
            "fs_edit",
            json!({"path": ws.ws_path(".env"), "old_string": "TOKEN", "new_string": "KEY"}),
        ),
        (
            "fs_write",
            json!({"path": ws.ws_path("run.sh"), "content": "#!/bin/sh\n"}),
        ),
    ];
    for (tool, args) in calls {
        std::fs::write(p(".env"), "TOKEN=secret\n").unwrap();
        std::fs::set_permissions(p(".env"), std::fs::Permissions::from_mode(0o600)).unwrap();
        std::fs::write(p("run.sh"), "#!/bin/sh\necho hi\n").unwrap();
        std::fs::set_permissions(p("run.sh"), std::fs::Permissions::from_mode(0o755)).unwrap();
        let _ = std::fs::remove_file(p("link.sh"));
        std::fs::hard_link(p("run.sh"), p("link.sh")).unwrap();
        let before = snapshot(&ws.ws());
        let ino = std::fs::metadata(p(".env")).unwrap().ino();
        let door = Dispatcher::new(host.clone());
        let mut saga = door.start(Origin::Call, "test", None).await.unwrap();
        let out = door
            .submit(&mut saga, Call::new(tool, Args::Value(&args)))
            .await
            .unwrap()
            .outcome;
        assert!(matches!(out, Outcome::Committed { .. }), "{tool}: {out:?}");
        assert_ne!(snapshot(&ws.ws()), before, "{tool}: nothing written");
        assert_eq!((mode(".env"), mode("run.sh")), (0o600, 0o755), "{tool}");
        assert_eq!(std::fs::metadata(p(".env")).unwrap().ino(), ino, "{tool}");
        assert_eq!(std::fs::metadata(p("run.sh")).unwrap().nlink(), 2, "{tool}");
        assert_eq!(
            std::fs::read(p("run.sh")).unwrap(),
            std::fs::read(p("link.sh")).unwrap()
        );
        let report = door.abort(&mut saga).await.unwrap();
        assert!(report.all_compensated(), "{tool}: {report:?}");
        assert_eq!(snapshot(&ws.ws()), before, "{tool}: undo");
        assert_eq!(
            (mode(".env"), mode("run.sh")),
            (0o600, 0o755),
            "{tool}: undo"
        );
        assert_eq!(
            std::fs::metadata(p("run.sh")).unwrap().nlink(),
            2,
            "{tool}: undo"
        );
    }
}
