//! From the attacker's side: a guest (or a later step) plants links, hard
//! links and swapped directories to make the host journal or restore
//! outside its grant.

use super::*;
use capsaga_core::fsm::State;
use capsaga_tests::snapshot;

fn outside(ws: &TestWorkspace) -> std::path::PathBuf {
    let o = ws.root.join("outside");
    std::fs::create_dir_all(&o).unwrap();
    std::fs::write(o.join("secret"), "secret\n").unwrap();
    o
}

#[tokio::test(flavor = "multi_thread")]
async fn a_hard_link_to_a_file_outside_the_grant_is_never_written() {
    let ws = workspace("");
    let out = outside(&ws);
    std::fs::hard_link(out.join("secret"), ws.ws().join("hl")).unwrap();
    let host = ws.host().await;
    for op in [
        json!({"op": "write", "path": p(&ws, "hl"), "content": "pwned"}),
        json!({"op": "append", "path": p(&ws, "hl"), "content": "pwned"}),
        json!({"op": "truncate", "path": p(&ws, "hl"), "size": 0}),
        json!({"op": "touch", "path": p(&ws, "hl")}),
    ] {
        let (door, mut saga) = saga(&host).await;
        let r = submit(&door, &mut saga, "fs_churn", ops(json!([op.clone()]))).await;
        assert!(matches!(r, Outcome::Failed { .. }), "{op}: {r:?}");
        assert_eq!(
            std::fs::read_to_string(out.join("secret")).unwrap(),
            "secret\n"
        );
    }
    // Unlinking the name is fine (and undone), the outside file untouched.
    let (door, mut saga) = saga(&host).await;
    let r = submit(
        &door,
        &mut saga,
        "fs_churn",
        ops(json!([{"op": "unlink", "path": p(&ws, "hl")}])),
    )
    .await;
    assert!(matches!(r, Outcome::Committed { .. }), "{r:?}");
    let report = door.abort(&mut saga).await.unwrap();
    assert_eq!(report.final_state, State::FailedRolledBack, "{report:#?}");
    std::fs::write(ws.ws().join("hl"), "written after the restore").unwrap();
    assert_eq!(
        std::fs::read_to_string(out.join("secret")).unwrap(),
        "secret\n",
        "the restored name is a file of its own"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn links_out_of_the_grant_are_neither_journaled_nor_followed() {
    let ws = workspace("");
    let out = outside(&ws);
    std::os::unix::fs::symlink(&out, ws.ws().join("abs-out")).unwrap();
    std::os::unix::fs::symlink("../outside/secret", ws.ws().join("rel-out")).unwrap();
    let host = ws.host().await;
    for op in [
        json!({"op": "write", "path": p(&ws, "abs-out/secret"), "content": "x"}),
        json!({"op": "write", "path": p(&ws, "rel-out"), "content": "x"}),
        json!({"op": "write", "path": p(&ws, "sub/../../outside/secret"), "content": "x"}),
        json!({"op": "unlink", "path": p(&ws, "abs-out/secret")}),
        json!({"op": "rename", "from": p(&ws, "a.txt"), "to": p(&ws, "abs-out/stolen")}),
        json!({"op": "symlink", "target": "/etc/passwd", "path": p(&ws, "abs-out/planted")}),
        json!({"op": "touch", "path": p(&ws, "rel-out")}),
    ] {
        let (door, mut saga) = saga(&host).await;
        let r = submit(&door, &mut saga, "fs_churn", ops(json!([op.clone()]))).await;
        assert!(matches!(r, Outcome::Failed { .. }), "{op}: {r:?}");
    }
    assert_eq!(
        std::fs::read_to_string(out.join("secret")).unwrap(),
        "secret\n"
    );
    assert_eq!(
        std::fs::read_dir(&out).unwrap().count(),
        1,
        "nothing planted outside"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_later_step_swapping_a_directory_for_a_link_out_cannot_redirect_the_restore() {
    let ws = workspace("");
    let out = outside(&ws);
    let before = snapshot(&ws.ws());
    let host = ws.host().await;
    let (door, mut saga) = saga(&host).await;
    // Step 1 writes inside sub/; step 2 moves sub away and puts a link to
    // the outside directory in its place, then writes "through" it (refused).
    let step1 = ops(json!([
        {"op": "write", "path": p(&ws, "sub/b.txt"), "content": "step 1"},
        {"op": "write", "path": p(&ws, "sub/secret"), "content": "step 1 created"},
    ]));
    assert!(matches!(
        submit(&door, &mut saga, "fs_churn", step1).await,
        Outcome::Committed { .. }
    ));
    let step2 = ops(json!([
        {"op": "rename", "from": p(&ws, "sub"), "to": p(&ws, "sub.away")},
        {"op": "symlink", "target": "../outside", "path": p(&ws, "sub")},
    ]));
    assert!(matches!(
        submit(&door, &mut saga, "fs_churn", step2).await,
        Outcome::Committed { .. }
    ));
    let report = door.abort(&mut saga).await.unwrap();
    assert_eq!(report.final_state, State::FailedRolledBack, "{report:#?}");
    assert_eq!(snapshot(&ws.ws()), before, "{report:#?}");
    assert_eq!(
        std::fs::read_to_string(out.join("secret")).unwrap(),
        "secret\n"
    );
    assert_eq!(std::fs::read_dir(&out).unwrap().count(), 1);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_directory_swapped_for_a_link_between_step_and_rollback_is_not_crossed() {
    let ws = workspace("");
    let out = outside(&ws);
    let host = ws.host().await;
    let (door, mut saga) = saga(&host).await;
    let step = ops(json!([
        {"op": "write", "path": p(&ws, "sub/b.txt"), "content": "step"},
        {"op": "write", "path": p(&ws, "sub/secret"), "content": "created by the step"},
    ]));
    assert!(matches!(
        submit(&door, &mut saga, "fs_churn", step).await,
        Outcome::Committed { .. }
    ));
    // Someone (not the step) swaps sub for a link outside before the rollback.
    std::fs::rename(ws.ws().join("sub"), ws.ws().join("sub.old")).unwrap();
    std::os::unix::fs::symlink(&out, ws.ws().join("sub")).unwrap();
    let report = door.abort(&mut saga).await.unwrap();
    assert_eq!(
        report.final_state,
        State::FailedRollbackPartial,
        "{report:#?}"
    );
    assert_eq!(
        std::fs::read_to_string(out.join("secret")).unwrap(),
        "secret\n"
    );
    assert_eq!(std::fs::read_dir(&out).unwrap().count(), 1);
    let e = report.undone[0].result.as_ref().unwrap_err();
    assert!(e.message.contains("sub/"), "{e:?}");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_write_through_a_link_inside_the_grant_is_journaled_as_its_target() {
    let ws = workspace("");
    let before = snapshot(&ws.ws());
    let host = ws.host().await;
    let (door, mut saga) = saga(&host).await;
    let step = ops(json!([{"op": "write", "path": p(&ws, "link"), "content": "through the link"}]));
    assert!(matches!(
        submit(&door, &mut saga, "fs_churn", step).await,
        Outcome::Committed { .. }
    ));
    assert_eq!(
        std::fs::read_to_string(ws.ws().join("a.txt")).unwrap(),
        "through the link"
    );
    let report = door.abort(&mut saga).await.unwrap();
    assert_eq!(report.final_state, State::FailedRolledBack, "{report:#?}");
    assert_eq!(snapshot(&ws.ws()), before);
}
