//! An approval binds to the saga that asked, still describes what will run
//! (stale when the world changed), and expires (issue 13, items 1 and 2).

use super::*;
use crate::agent::scripted;

fn run_plan(ws: &TestWorkspace, p: &str) -> Value {
    let o = ws
        .capsaga(&["--json", "run", "--plan", p])
        .output()
        .unwrap();
    json_of(&o)
}

fn resume(ws: &TestWorkspace, saga: &str) -> (Option<i32>, Value) {
    let o = ws
        .capsaga(&["--json", "resume", "--saga", saga])
        .output()
        .unwrap();
    (o.status.code(), json_of(&o))
}

fn approve(ws: &TestWorkspace, id: &str) {
    let ok = ws.capsaga(&["approve", id]).output().unwrap();
    assert!(ok.status.success(), "{ok:?}");
}

#[tokio::test(flavor = "multi_thread")]
async fn only_the_parked_saga_claims_its_approval() {
    let ws = ws();
    let p1 = plan(&ws, "pay1.json", json!([ledger_step(&ws, "pay 10")]));
    let parked = run_plan(&ws, &p1);
    let saga = parked["saga_id"].as_str().unwrap().to_string();
    let id = parked["awaiting_approval"]["approval_id"]
        .as_str()
        .unwrap()
        .to_string();
    approve(&ws, &id);

    // Another plan making the byte-identical call parks on its own approval.
    let p2 = plan(&ws, "pay2.json", json!([ledger_step(&ws, "pay 10")]));
    let other = run_plan(&ws, &p2);
    assert_eq!(other["final_state"], "AwaitingApproval", "{other}");
    assert_ne!(other["awaiting_approval"]["approval_id"], id.as_str());
    // So does a `capsaga call` process.
    let args = ledger_step(&ws, "pay 10")["args"].to_string();
    let call = ws
        .capsaga(&["--json", "call", "ledger", &args])
        .output()
        .unwrap();
    assert_eq!(call.status.code(), Some(10), "{call:?}");
    let own = &json_of(&call)["result"]["awaiting_approval"]["approval_id"];
    assert!(own.is_string() && own != id.as_str(), "{own}");
    // And an agent turn (no terminal): it ends without running the call.
    let host = ws.host().await;
    let script = json!({"turns": [
        {"text": "pay", "tool_calls": [{"name": "ledger", "arguments": ledger_step(&ws, "pay 10")["args"]}]},
        {"text": "Paid."}
    ]});
    let p = scripted(&ws, "same_call.json", &script);
    let tr = run_turn(&host, &p, "pay", &TurnOptions::default())
        .await
        .unwrap();
    assert_eq!(tr.outcome, Outcome::UserAborted, "{tr:#?}");
    assert_eq!(
        executes(&ws),
        0,
        "nobody consumed the parked saga's approval"
    );
    let a = host.store.approval(&id).await.unwrap();
    assert_eq!(a.status, ApprovalStatus::Approved);

    // The parked plan resumes and runs once.
    let (code, r) = resume(&ws, &saga);
    assert_eq!(code, Some(0), "{r}");
    assert_eq!(r["final_state"], "Done");
    assert_eq!(executes(&ws), 1);
    let a = host.store.approval(&id).await.unwrap();
    assert_eq!(a.status, ApprovalStatus::Claimed);
    assert_eq!(a.claimed_saga.as_deref(), Some(saga.as_str()));
    let audit = ws.capsaga(&["audit", "verify"]).output().unwrap();
    assert!(audit.status.success(), "{audit:?}");
}

const WRITE_POLICY: &str = r#"
[tools.fs_write]
grants = ["fs:write:~/ws/**"]
approval = "always"
"#;

/// Approve a write of `out.txt`, let `meanwhile` change the world, resume:
/// the approval is stale, the step parks again showing the difference
/// (`expect` in the new summary), nothing is written; approving the new
/// approval then runs the write once.
fn stale_case(before: Option<&str>, meanwhile: impl FnOnce(&std::path::Path), expect: &str) {
    let ws = TestWorkspace::new(&["fs_write"], WRITE_POLICY);
    let out = ws.ws().join("out.txt");
    if let Some(b) = before {
        std::fs::write(&out, b).unwrap();
    }
    let step =
        json!({"tool": "fs_write", "args": {"path": ws.ws_path("out.txt"), "content": "ours"}});
    let p = plan(&ws, "w.json", json!([step]));
    let parked = run_plan(&ws, &p);
    let saga = parked["saga_id"].as_str().unwrap().to_string();
    let id = parked["awaiting_approval"]["approval_id"]
        .as_str()
        .unwrap()
        .to_string();
    approve(&ws, &id);
    meanwhile(&out);
    let after_change = std::fs::read(&out).ok();

    let (code, r) = resume(&ws, &saga);
    assert_eq!(code, Some(10), "stale: parked again: {r}");
    let new = &r["awaiting_approval"];
    let new_id = new["approval_id"].as_str().unwrap().to_string();
    assert_ne!(new_id, id);
    let summary = new["summary"].as_str().unwrap();
    assert!(summary.contains("stale"), "{summary}");
    assert!(summary.contains(expect), "{summary}");
    assert_eq!(new["replaces"], id.as_str());
    assert_eq!(std::fs::read(&out).ok(), after_change, "nothing written");
    let old = block_on(db(&ws).approval(&id)).unwrap();
    assert_eq!(old.status, ApprovalStatus::Stale);

    approve(&ws, &new_id);
    let (code, r) = resume(&ws, &saga);
    assert_eq!(code, Some(0), "{r}");
    assert_eq!(std::fs::read_to_string(&out).unwrap(), "ours");
    let audit = ws.capsaga(&["audit", "verify"]).output().unwrap();
    assert!(audit.status.success(), "{audit:?}");
}

#[test]
fn an_approval_goes_stale_when_the_file_is_created_changed_or_deleted() {
    stale_case(
        None,
        |p| std::fs::write(p, "theirs").unwrap(),
        "Would replace",
    );
    stale_case(
        Some("v1"),
        |p| std::fs::write(p, "v2").unwrap(),
        "pre-image",
    );
    stale_case(
        Some("v1"),
        |p| std::fs::remove_file(p).unwrap(),
        "Would create",
    );
}

/// Wait until the clock is past `at` (an RFC 3339 UTC timestamp as the
/// store writes them, which sort as text).
fn past(at: &str) {
    capsaga_tests::wait_until(&format!("the clock past {at}"), || {
        capsaga_store::clock::now_rfc3339().as_str() > at
    });
}

#[test]
fn approvals_expire_and_cannot_be_claimed_or_decided_after() {
    let ws = TestWorkspace::new(
        &["fs_write"],
        &format!("{WRITE_POLICY}\n[approvals]\nttl = \"4s\"\n"),
    );
    let step = json!({"tool": "fs_write", "args": {"path": ws.ws_path("out.txt"), "content": "x"}});
    // Approved in time, resumed too late: asked again, nothing written.
    let p = plan(&ws, "a.json", json!([step]));
    let parked = run_plan(&ws, &p);
    let saga = parked["saga_id"].as_str().unwrap().to_string();
    let id = parked["awaiting_approval"]["approval_id"]
        .as_str()
        .unwrap()
        .to_string();
    let expires = parked["awaiting_approval"]["expires_at"]
        .as_str()
        .expect("expires_at")
        .to_string();
    approve(&ws, &id);
    let listed = ws.capsaga(&["approvals", "--all"]).output().unwrap();
    assert!(String::from_utf8_lossy(&listed.stdout).contains("expires at"));
    past(&expires);
    let (code, r) = resume(&ws, &saga);
    assert_eq!(code, Some(10), "{r}");
    assert!(!ws.ws().join("out.txt").exists());
    assert_eq!(
        block_on(db(&ws).approval(&id)).unwrap().status,
        ApprovalStatus::Expired
    );
    // Pending, then too late to approve: refused, and recorded as expired.
    let late = r["awaiting_approval"]["approval_id"]
        .as_str()
        .unwrap()
        .to_string();
    past(
        r["awaiting_approval"]["expires_at"]
            .as_str()
            .expect("expires_at"),
    );
    let refused = ws.capsaga(&["approve", &late]).output().unwrap();
    assert_eq!(refused.status.code(), Some(7), "{refused:?}");
    assert!(String::from_utf8_lossy(&refused.stderr).contains("expired"));
    assert_eq!(
        block_on(db(&ws).approval(&late)).unwrap().status,
        ApprovalStatus::Expired
    );
    assert!(!ws.ws().join("out.txt").exists());
    let audit = ws.capsaga(&["audit", "verify"]).output().unwrap();
    assert!(audit.status.success(), "{audit:?}");
}
