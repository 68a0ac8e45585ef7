//! Hostile compensations: one that does nothing, one that writes garbage,
//! one step that fails after writing; the workspace is byte-identical after
//! the rollback.

use super::*;
use capsaga_core::error::ErrorKind;
use capsaga_core::fsm::State;
use capsaga_tests::snapshot;

/// Every kind of change a guest can make through WASI.
fn churn(ws: &TestWorkspace) -> Value {
    ops(json!([
        {"op": "write", "path": p(ws, "a.txt"), "content": "changed A"},
        {"op": "write", "path": p(ws, "new.txt"), "content": "brand new"},
        {"op": "append", "path": p(ws, "sub/b.txt"), "content": "more"},
        {"op": "truncate", "path": p(ws, "big.bin"), "size": 3},
        {"op": "touch", "path": p(ws, "sub/deeper/c.txt")},
        {"op": "mkdir", "path": p(ws, "made")},
        {"op": "write", "path": p(ws, "made/inside.txt"), "content": "in a new dir"},
        {"op": "rename", "from": p(ws, "sub/deeper"), "to": p(ws, "moved")},
        {"op": "write", "path": p(ws, "moved/c.txt"), "content": "changed after the move"},
        {"op": "unlink", "path": p(ws, "link")},
        {"op": "symlink", "target": "new.txt", "path": p(ws, "link")},
        {"op": "rmdir", "path": p(ws, "empty")},
        {"op": "link", "from": p(ws, "new.txt"), "path": p(ws, "hard.txt")},
        {"op": "write", "path": p(ws, "tmp"), "content": "replacement"},
        {"op": "rename", "from": p(ws, "tmp"), "to": p(ws, "a.txt")},
    ]))
}

#[tokio::test(flavor = "multi_thread")]
async fn a_compensate_that_does_nothing_still_leaves_the_workspace_byte_identical() {
    let ws = workspace("");
    let before = snapshot(&ws.ws());
    let host = ws.host().await;
    let (door, mut saga) = saga(&host).await;
    let out = submit(&door, &mut saga, "fs_churn", churn(&ws)).await;
    assert!(matches!(out, Outcome::Committed { .. }), "{out:?}");
    assert_ne!(snapshot(&ws.ws()), before);
    let report = door.abort(&mut saga).await.unwrap();
    assert_eq!(report.final_state, State::FailedRolledBack, "{report:#?}");
    assert_eq!(snapshot(&ws.ws()), before, "{report:#?}");
    let files = report.undone[0].files.as_ref().expect("a host restore");
    assert!(files.clean && files.paths.len() >= 15, "{files:#?}");
    assert_eq!(
        statuses(&host, saga.id()).await,
        vec![StepStatus::Compensated]
    );
    let logged = restores(&host, saga.id()).await;
    assert_eq!(logged.len(), 1);
    assert!(
        logged[0]["paths"]
            .as_array()
            .unwrap()
            .iter()
            .any(|r| r["path"] == json!(p(&ws, "a.txt"))),
        "{:#}",
        logged[0]
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_compensate_that_writes_garbage_is_undone_with_the_step() {
    let ws = workspace("");
    let before = snapshot(&ws.ws());
    let host = ws.host().await;
    let (door, mut saga) = saga(&host).await;
    for tool in ["undo_garbage", "fs_churn"] {
        let args = ops(json!([
            {"op": "write", "path": p(&ws, "a.txt"), "content": format!("by {tool}")},
            {"op": "write", "path": p(&ws, &format!("{tool}.txt")), "content": "new"},
            {"op": "rename", "from": p(&ws, "sub/b.txt"), "to": p(&ws, &format!("{tool}-b.txt"))},
            {"op": "write", "path": p(&ws, "sub/b.txt"), "content": "replaced"},
        ]));
        let out = submit(&door, &mut saga, tool, args).await;
        assert!(matches!(out, Outcome::Committed { .. }), "{out:?}");
    }
    let report = door.abort(&mut saga).await.unwrap();
    assert_eq!(report.final_state, State::FailedRolledBack, "{report:#?}");
    assert!(
        !ws.ws().join("garbage.txt").exists(),
        "the lie's own file is gone"
    );
    assert_eq!(snapshot(&ws.ws()), before, "{report:#?}");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_step_that_fails_or_traps_after_writing_is_restored_too() {
    for after in ["fail", "trap"] {
        let ws = workspace("");
        let before = snapshot(&ws.ws());
        let host = ws.host().await;
        let (door, mut saga) = saga(&host).await;
        let first = ops(json!([{"op": "write", "path": p(&ws, "first.txt"), "content": "1"}]));
        assert!(matches!(
            submit(&door, &mut saga, "fs_churn", first).await,
            Outcome::Committed { .. }
        ));
        let mut args = churn(&ws);
        args["after"] = json!(after);
        let out = submit(&door, &mut saga, "fs_churn", args).await;
        let Outcome::Failed {
            rollback, error, ..
        } = out
        else {
            panic!("{out:?}");
        };
        assert_eq!(
            rollback.final_state,
            State::FailedRolledBack,
            "{after}: {rollback:#?}"
        );
        assert_eq!(
            snapshot(&ws.ws()),
            before,
            "{after}: {error:?} {rollback:#?}"
        );
        let st = statuses(&host, saga.id()).await;
        assert_eq!(
            st,
            vec![StepStatus::Compensated, StepStatus::Compensated],
            "{after}"
        );
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_path_someone_else_changed_since_the_step_is_reported_not_clobbered() {
    let ws = workspace("");
    let host = ws.host().await;
    let (door, mut saga) = saga(&host).await;
    let args = ops(json!([
        {"op": "write", "path": p(&ws, "a.txt"), "content": "by the step"},
        {"op": "write", "path": p(&ws, "new.txt"), "content": "new"},
    ]));
    assert!(matches!(
        submit(&door, &mut saga, "fs_churn", args).await,
        Outcome::Committed { .. }
    ));
    std::fs::write(ws.ws().join("a.txt"), "a human's edit afterwards").unwrap();
    let report = door.abort(&mut saga).await.unwrap();
    assert_eq!(
        report.final_state,
        State::FailedRollbackPartial,
        "{report:#?}"
    );
    assert_eq!(
        std::fs::read_to_string(ws.ws().join("a.txt")).unwrap(),
        "a human's edit afterwards"
    );
    assert!(!ws.ws().join("new.txt").exists(), "the rest is restored");
    let e = report.undone[0].result.as_ref().unwrap_err();
    assert_eq!(e.kind, ErrorKind::Unrevertible);
    assert!(
        e.message.contains("a.txt") && e.message.contains("someone else"),
        "{e:?}"
    );
    assert_eq!(
        statuses(&host, saga.id()).await,
        vec![StepStatus::CompensationFailed]
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn past_the_journal_cap_the_call_fails_quota_exceeded_before_changing_the_file() {
    let ws = workspace("[fs]\njournal_call_bytes = 4096\n");
    let before = snapshot(&ws.ws());
    let host = ws.host().await;
    let (door, mut saga) = saga(&host).await;
    let args = ops(json!([
        {"op": "write", "path": p(&ws, "small.txt"), "content": "fits"},
        {"op": "write", "path": p(&ws, "big.bin"), "content": "would destroy 10 KB"},
        {"op": "write", "path": p(&ws, "after.txt"), "content": "never"},
    ]));
    let out = submit(&door, &mut saga, "fs_churn", args).await;
    let Outcome::Failed {
        error, rollback, ..
    } = out
    else {
        panic!("{out:?}");
    };
    assert_eq!(error.kind, ErrorKind::QuotaExceeded, "{error:?}");
    assert!(error.message.contains("journal_call_bytes"), "{error:?}");
    assert_eq!(rollback.final_state, State::FailedRolledBack);
    assert_eq!(snapshot(&ws.ws()), before);
}

#[tokio::test(flavor = "multi_thread")]
async fn with_the_host_rollback_off_for_a_tool_only_its_compensate_undoes() {
    let ws = TestWorkspace::new(
        &["fs_churn"],
        "[tools.fs_churn]\ngrants = [\"fs:write:~/ws/**\"]\nhost_rollback = false\n",
    );
    let host = ws.host().await;
    let (door, mut saga) = saga(&host).await;
    let args = ops(json!([{"op": "write", "path": p(&ws, "kept.txt"), "content": "x"}]));
    assert!(matches!(
        submit(&door, &mut saga, "fs_churn", args).await,
        Outcome::Committed { .. }
    ));
    let report = door.abort(&mut saga).await.unwrap();
    assert!(report.undone[0].files.is_none());
    assert!(
        ws.ws().join("kept.txt").exists(),
        "fs_churn's compensate does nothing and the host was told not to journal"
    );
    assert!(!ws.root.join(".capsaga/fs-journal").join(saga.id()).exists());
}

#[tokio::test(flavor = "multi_thread")]
async fn shell_run_changes_are_restored_by_the_host_after_its_own_undo() {
    let ws = TestWorkspace::new(
        &["shell_run"],
        "[tools.shell_run]\ngrants = [\"fs:write:~/ws/**\"]\n",
    );
    let w = ws.ws();
    std::fs::write(w.join("a.txt"), "original A\n").unwrap();
    std::fs::create_dir(w.join("sub")).unwrap();
    std::fs::write(w.join("sub/b.txt"), "B\n").unwrap();
    std::fs::write(w.join("gone.txt"), "gone\n").unwrap();
    let before = snapshot(&w);
    let host = ws.host().await;
    let (door, mut saga) = saga(&host).await;
    let script = "echo changed > a.txt; mv sub/b.txt moved.txt; rm gone.txt; mkdir made; echo x > made/x.txt";
    let out = submit(
        &door,
        &mut saga,
        "shell_run",
        json!({"script": script, "cwd": p(&ws, "")}),
    )
    .await;
    assert!(matches!(out, Outcome::Committed { .. }), "{out:?}");
    assert_ne!(snapshot(&w), before);
    let report = door.abort(&mut saga).await.unwrap();
    assert_eq!(report.final_state, State::FailedRolledBack, "{report:#?}");
    assert_eq!(snapshot(&w), before, "{report:#?}");
    assert!(report.undone[0].files.as_ref().is_some_and(|f| f.clean));
    assert_eq!(restores(&host, saga.id()).await.len(), 1);
}
