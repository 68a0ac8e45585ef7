//! Filesystem confinement from the attacker's side, with real components and
//! real files: `..`, absolute paths outside the grant, and symlinks planted
//! inside the grant that point outside all get permission-denied, and nothing
//! outside the grant is read or written. A tool that loops forever is stopped
//! at its deadline and the host carries on.

use capsaga_core::error::ErrorKind;
use capsaga_door::dispatch::Outcome;
use capsaga_door::host::Host;
use capsaga_tests::{FS_POLICY, TestWorkspace};
use serde_json::{Value, json};
use std::sync::Arc;

const SECRET: &str = "TOP-SECRET-outside-the-grant";

async fn step(host: &Arc<Host>, tool: &str, args: Value) -> Outcome {
    capsaga_tests::call_once(host, tool, args).await
}

fn denied(out: &Outcome) -> bool {
    let err = match out {
        Outcome::ReadFailed { error, .. } | Outcome::Failed { error, .. } => error,
        Outcome::Committed { output, .. } => panic!("call succeeded: {:?}", output.data),
        Outcome::Refused { error, .. } => panic!("refused before running: {error:?}"),
        Outcome::AwaitingApproval { approval, .. } => {
            panic!("parked for approval: {approval:?}")
        }
        Outcome::Previewed { .. } => panic!("a dry-run"),
    };
    let text = serde_json::to_string(err).unwrap();
    assert!(!text.contains(SECRET), "secret leaked in error: {text}");
    err.kind == ErrorKind::PermissionDenied
}

fn setup() -> TestWorkspace {
    let ws = TestWorkspace::new(&["fs_read", "fs_write", "fs_list"], FS_POLICY);
    std::fs::write(ws.root.join("secret.txt"), SECRET).unwrap();
    std::fs::write(ws.ws().join("inside.txt"), "inside").unwrap();
    std::os::unix::fs::symlink(ws.root.join("secret.txt"), ws.ws().join("abs_link")).unwrap();
    std::os::unix::fs::symlink("../secret.txt", ws.ws().join("rel_link")).unwrap();
    std::os::unix::fs::symlink(&ws.root, ws.ws().join("dir_link")).unwrap();
    ws
}

#[tokio::test(flavor = "multi_thread")]
async fn reads_outside_the_grant_are_denied() {
    let ws = setup();
    let host = ws.host().await;
    let ws_s = ws.ws().to_string_lossy().into_owned();
    let root = ws.root.to_string_lossy().into_owned();
    for path in [
        format!("{ws_s}/../secret.txt"),
        format!("{ws_s}/sub/../../secret.txt"),
        format!("{root}/secret.txt"),
        "/etc/passwd".to_string(),
        format!("{ws_s}/abs_link"),
        format!("{ws_s}/rel_link"),
        format!("{ws_s}/dir_link/secret.txt"),
    ] {
        let out = step(&host, "fs_read", json!({"path": path})).await;
        assert!(denied(&out), "fs_read {path}: {out:?}");
    }
    for path in [
        format!("{ws_s}/.."),
        format!("{ws_s}/dir_link"),
        root.clone(),
    ] {
        let out = step(&host, "fs_list", json!({"path": path})).await;
        assert!(denied(&out), "fs_list {path}: {out:?}");
    }
    // The legitimate file is readable.
    match step(
        &host,
        "fs_read",
        json!({"path": format!("{ws_s}/inside.txt")}),
    )
    .await
    {
        Outcome::Committed { output, .. } => assert_eq!(output.data["content"], "inside"),
        other => panic!("{other:?}"),
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn writes_outside_the_grant_are_denied_and_change_nothing() {
    let ws = setup();
    let host = ws.host().await;
    let ws_s = ws.ws().to_string_lossy().into_owned();
    let root = ws.root.to_string_lossy().into_owned();
    for path in [
        format!("{ws_s}/../secret.txt"),
        format!("{ws_s}/../new_outside.txt"),
        format!("{root}/secret.txt"),
        format!("{ws_s}/abs_link"),
        format!("{ws_s}/rel_link"),
        format!("{ws_s}/dir_link/secret.txt"),
        format!("{ws_s}/dir_link/new_outside.txt"),
    ] {
        let out = step(&host, "fs_write", json!({"path": path, "content": "pwned"})).await;
        assert!(denied(&out), "fs_write {path}: {out:?}");
    }
    assert_eq!(
        std::fs::read_to_string(ws.root.join("secret.txt")).unwrap(),
        SECRET
    );
    assert!(!ws.root.join("new_outside.txt").exists());
    // The links themselves are still links to the same place.
    assert_eq!(
        std::fs::read_link(ws.ws().join("abs_link")).unwrap(),
        ws.root.join("secret.txt")
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_tool_without_grants_is_not_callable() {
    // Not listed in the policy at all: default deny.
    let ws = TestWorkspace::new(&["fs_read"], "");
    let host = ws.host().await;
    match step(&host, "fs_read", json!({"path": ws.ws_path("x")})).await {
        Outcome::Refused { error, .. } => {
            assert_eq!(error.kind, ErrorKind::PermissionDenied);
            assert!(
                error.message.contains("not in the operator's policy"),
                "{}",
                error.message
            );
        }
        other => panic!("{other:?}"),
    }
    // Listed, but its requirement is not granted: the error lists what is missing.
    ws.write_policy("[tools.fs_read]\ngrants = []\n");
    let host = ws.host().await;
    match step(&host, "fs_read", json!({"path": ws.ws_path("x")})).await {
        Outcome::Refused { error, .. } => {
            assert_eq!(error.kind, ErrorKind::PermissionDenied);
            assert!(
                error.message.contains("missing grants fs:read:*"),
                "{}",
                error.message
            );
        }
        other => panic!("{other:?}"),
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn infinite_loop_stopped_at_deadline_and_host_carries_on() {
    let ws = TestWorkspace::new(
        &["spin", "fs_read"],
        &format!("{FS_POLICY}\n[tools.spin]\nlimits = {{ deadline_ms = 300 }}\n"),
    );
    std::fs::write(ws.ws().join("inside.txt"), "still here").unwrap();
    let host = ws.host().await;
    let out = step(&host, "spin", json!({})).await;
    match out {
        Outcome::ReadFailed { error, .. } | Outcome::Failed { error, .. } => {
            assert_eq!(error.kind, ErrorKind::Timeout, "{error:?}");
            // Stopped by its own 300 ms deadline, not the default 10 s
            // (said by the error, not guessed from a wall clock).
            assert!(
                error.message.contains("deadline of 300 ms"),
                "{}",
                error.message
            );
        }
        other => panic!("{other:?}"),
    }
    match step(&host, "fs_read", json!({"path": ws.ws_path("inside.txt")})).await {
        Outcome::Committed { output, .. } => assert_eq!(output.data["content"], "still here"),
        other => panic!("{other:?}"),
    }
}
