//! A stale approval in the console: the file the call would write changed
//! after the approval was asked, so approving it does not write; the step
//! parks again on a new approval that says which one it replaces, and the
//! decided page lists the old one as stale with why.

use super::{ALICE, no_script_ran, parked_plan, server, shot, sign_in, ws};
use capsaga_core::approval::ApprovalStatus;
use capsaga_tests::webdriver::Browser;
use serde_json::json;

#[tokio::test(flavor = "multi_thread")]
async fn approving_a_stale_approval_parks_the_step_again_and_says_why() {
    let Some(b) = Browser::start().await else {
        return;
    };
    let ws = ws();
    let path = ws.ws().join("p.txt");
    let (_, old) = parked_plan(
        &ws,
        "stale.json",
        json!([{"tool": "fs_write", "args": {"path": ws.ws_path("p.txt"), "content": "ours\n"}}]),
    );
    // Someone creates the file after the approval was asked: the dry run
    // the operator would approve no longer says what the write would do.
    std::fs::write(&path, "theirs\n").unwrap();
    let (host, srv) = server(&ws, "hi").await;
    sign_in(&b, &srv, ALICE).await;
    b.wait_text("#pending", "1 pending").await;
    let old_sel = format!("section[data-approval=\"{old}\"]");
    b.click(&b.get(&format!("{old_sel} button.approve")).await)
        .await;
    // The step parked again on a new approval naming the one it replaces.
    b.wait_text("section.approval p.stale", "Replaces approval")
        .await;
    assert!(
        b.text("section.approval p.stale")
            .await
            .contains(&old[..12]),
        "{}",
        b.text("body").await
    );
    assert!(
        b.find(&old_sel).await.is_none(),
        "the stale one left the queue"
    );
    assert_eq!(
        std::fs::read_to_string(&path).unwrap(),
        "theirs\n",
        "not written"
    );
    assert_eq!(
        host.store.approval(&old).await.unwrap().status,
        ApprovalStatus::Stale
    );
    no_script_ran(&b, "stale approval").await;
    b.screenshot(&shot("approvals-stale")).await;
    // The decided page: the old approval, stale, and why.
    b.click(&b.get("#decided-link").await).await;
    let row = b.text(&format!("tr[data-approval=\"{old}\"]")).await;
    assert!(
        row.contains("stale") && row.contains("dry-run changed"),
        "{row}"
    );
}
