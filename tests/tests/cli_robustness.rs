//! The command line never panics and says the same thing in text and JSON
//! (issue 13, item 10): every command exits quietly when its stdout is a
//! closed pipe (`capsaga --json tools list | head -1`), saga and approval
//! ids accept a unique prefix, `approve --note` is shown by `log` and
//! `approvals --all`, error kinds are spelt the same in text and JSON, `call
//! <tool>` without arguments is a usage error and an unknown tool exits
//! with the not-found code (9).

use capsaga_tests::TestWorkspace;
use serde_json::{Value, json};
use std::process::{Output, Stdio};

const POLICY: &str = r#"
[tools.fs_write]
grants = ["fs:write:~/ws/**"]
[tools.ledger]
grants = ["fs:write:~/ws/**"]
approval = "always"
"#;

fn ws() -> TestWorkspace {
    TestWorkspace::new(&["fs_write", "ledger"], POLICY)
}

fn json_of(o: &Output) -> Value {
    serde_json::from_slice(&o.stdout).unwrap_or_else(|e| panic!("not JSON ({e}): {o:?}"))
}

/// Run `capsaga <args>` with its stdout a pipe whose read end is closed
/// before the command writes.
fn with_closed_stdout(ws: &TestWorkspace, args: &[&str]) -> Output {
    let mut child = ws
        .capsaga(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    drop(child.stdout.take());
    child.wait_with_output().unwrap()
}

#[test]
fn every_command_exits_quietly_on_a_closed_pipe() {
    let ws = ws();
    let p = ws.root.join("p.json");
    let step = json!({"tool": "fs_write", "args": {"path": ws.ws_path("a.txt"), "content": "A"}});
    std::fs::write(&p, json!({"description": "p", "steps": [step]}).to_string()).unwrap();
    let p = p.to_string_lossy().into_owned();
    let args = json!({"path": ws.ws_path("b.txt"), "content": "B"}).to_string();
    let commands: Vec<Vec<&str>> = vec![
        vec!["--json", "tools", "list"],
        vec!["tools", "list"],
        vec!["run", "--plan", &p],
        vec!["--json", "run", "--plan", &p],
        vec!["call", "fs_write", &args],
        vec!["call", "nope", "{}"],
        vec!["sagas"],
        vec!["--json", "sagas"],
        vec!["log"],
        vec!["approvals", "--all"],
        vec!["audit", "verify"],
        vec!["fsm", "--show"],
        vec!["budget"],
        vec!["--help"],
    ];
    for c in &commands {
        let o = with_closed_stdout(&ws, c);
        let stderr = String::from_utf8_lossy(&o.stderr);
        assert!(!stderr.contains("panicked"), "{c:?}: {stderr}");
        assert_ne!(o.status.code(), Some(101), "{c:?}: {stderr}");
        assert!(o.status.code().is_some(), "{c:?} exits, not killed: {o:?}");
    }
    // The work was still done: the plan ran (twice) and the call wrote.
    assert_eq!(std::fs::read_to_string(ws.ws().join("b.txt")).unwrap(), "B");
}

#[test]
fn ids_by_prefix_notes_kinds_and_usage() {
    let ws = ws();
    let p = ws.root.join("pay.json");
    let step = json!({"tool": "ledger", "args": {"path": ws.ws_path("l.txt"), "entry": "pay"}});
    std::fs::write(
        &p,
        json!({"description": "pay", "steps": [step]}).to_string(),
    )
    .unwrap();
    let parked = ws
        .capsaga(&["--json", "run", "--plan", &p.to_string_lossy()])
        .output()
        .unwrap();
    let parked = json_of(&parked);
    let saga = parked["saga_id"].as_str().unwrap().to_string();
    let id = parked["awaiting_approval"]["approval_id"]
        .as_str()
        .unwrap()
        .to_string();

    // Approval and saga ids by unique prefix; the note is kept and shown.
    let ok = ws
        .capsaga(&["approve", &id[..8], "--note", "ticket OPS-42"])
        .output()
        .unwrap();
    assert!(ok.status.success(), "{ok:?}");
    let all = ws.capsaga(&["approvals", "--all"]).output().unwrap();
    assert!(String::from_utf8_lossy(&all.stdout).contains("ticket OPS-42"));
    let all = json_of(
        &ws.capsaga(&["--json", "approvals", "--all"])
            .output()
            .unwrap(),
    );
    assert_eq!(all["approvals"][0]["note"], "ticket OPS-42");
    let log = ws.capsaga(&["log", "--saga", &saga[..8]]).output().unwrap();
    assert!(log.status.success(), "{log:?}");
    assert!(String::from_utf8_lossy(&log.stdout).contains("ticket OPS-42"));
    let resumed = ws
        .capsaga(&["--json", "resume", "--saga", &saga[..10]])
        .output()
        .unwrap();
    assert_eq!(resumed.status.code(), Some(0), "{resumed:?}");
    for bad in ["", "ab", "zzzzzzzz"] {
        let o = ws.capsaga(&["log", "--saga", bad]).output().unwrap();
        assert_eq!(o.status.code(), Some(9), "{bad:?}: {o:?}");
        assert!(String::from_utf8_lossy(&o.stderr).contains("no saga"));
        let o = ws.capsaga(&["resume", "--saga", bad]).output().unwrap();
        assert_eq!(o.status.code(), Some(9), "{bad:?}: {o:?}");
    }

    // Error kinds: the same spelling in text and JSON.
    let outside = json!({"path": "/etc/capsaga-test", "content": "x"}).to_string();
    let text = ws
        .capsaga(&["call", "fs_write", &outside])
        .output()
        .unwrap();
    let json = ws
        .capsaga(&["--json", "call", "fs_write", &outside])
        .output()
        .unwrap();
    let kind = json_of(&json)["result"]["error"]["kind"]
        .as_str()
        .unwrap_or_else(|| panic!("{json:?}"))
        .to_string();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&text.stdout),
        String::from_utf8_lossy(&text.stderr)
    );
    assert!(text.contains(&kind), "text says {text}, JSON says {kind}");

    // Usage and not-found codes.
    let no_args = ws.capsaga(&["call", "fs_write"]).output().unwrap();
    assert_eq!(no_args.status.code(), Some(2), "{no_args:?}");
    for extra in [&[][..], &["--dry-run"][..]] {
        let mut a = vec!["call", "no_such_tool", "{}"];
        a.extend_from_slice(extra);
        let o = ws.capsaga(&a).output().unwrap();
        assert_eq!(o.status.code(), Some(9), "{a:?}: {o:?}");
    }
}
