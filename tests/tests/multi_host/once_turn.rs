//! A REST turn resumed k times at once (issue 48), on a real PostgreSQL
//! with three real `capsaga serve` hosts and the scripted model (`--script`,
//! read again by every turn: every turn makes the same call): a turn whose
//! call needs a human parks it and ends (nobody to ask: `user_aborted`,
//! the approval pending); an operator approves it on another host; then
//! eight turns of the same task at once (the client's retries, a load
//! balancer's duplicates), on one host and spread over three, each looking
//! for the approved approval of its principal's ended turn. One claims it
//! and runs the gated call once; the others find it claimed (refused, or
//! parked on an approval of their own). The effect is the `ledger`
//! component's: every execute leaves a line in its journal.

use super::once::executes;
use super::rig::{Rig, approve, lines, runtime};
use capsaga_core::fsm::State;
use capsaga_tests::mcp_rig::http;
use serde_json::{Value, json};

/// Concurrent resumes of one approved turn.
const K: usize = 8;

fn policy() -> String {
    // A lease longer than the test: nothing here waits for one to expire.
    "store_lease_ms = 60000\n[tools.ledger]\ngrants = [\"fs:write:~/ws/**\"]\napproval = \"always\"\nhost_rollback = false\nlimits = { deadline_ms = 60000 }\n".to_string()
}

/// The scripted model's turns: the ledger call with `args`, then done.
fn script(path: &std::path::Path, args: &Value) {
    let s = json!({"model": "scripted", "turns": [
        {"text": "on it", "tool_calls": [{"name": "ledger", "arguments": args}]},
        {"text": "Done."}]});
    std::fs::write(path, s.to_string()).expect("the script is written");
}

/// `POST /v1/turns` of the task on host `i` (loopback: the operator): its
/// answer.
async fn turn(rig: &Rig, i: usize) -> Value {
    let r = http()
        .post(format!("{}/v1/turns", rig.base(i)))
        .json(&json!({"task": "write the ledger entry"}))
        .send()
        .await
        .expect("the host answers");
    assert_eq!(r.status().as_u16(), 200);
    r.json().await.expect("a JSON answer")
}

#[test]
fn a_rest_turn_resumed_eight_times_at_once_runs_its_approved_call_once_on_one_host_and_over_three()
{
    let dir = tempfile::tempdir().expect("a temp dir");
    let script_path = dir.path().join("script.json");
    script(&script_path, &json!({}));
    let script_arg = script_path.to_string_lossy().into_owned();
    let Some(rig) = Rig::with_tools(
        "multi_host::once_turn",
        3,
        &["ledger"],
        &policy(),
        &["--script", &script_arg],
    ) else {
        return;
    };
    let rt = runtime();
    rt.block_on(async {
        let store = rig.store().await;
        for (round, spread) in [("one-host", 1usize), ("three-hosts", 3)] {
            let (ledger, journal) = rig.ledger(&format!("turn-{round}.txt"));
            let args = json!({"path": ledger, "entry": round});
            script(&script_path, &args);
            // The turn parks its call and ends; the approval waits.
            let first = turn(&rig, 0).await;
            assert_eq!(first["outcome"], "user_aborted", "{round}: {first}");
            assert_eq!(executes(&journal), 0, "{round}: ran without a human");
            let pending: Vec<_> = store
                .approvals(false)
                .await
                .unwrap()
                .into_iter()
                .filter(|a| a.args == args)
                .collect();
            assert_eq!(pending.len(), 1, "{round}: {pending:?}");
            let id = pending[0].approval_id.clone();
            approve(&rig, 2, &id).await;
            // K resumes of the turn at once.
            let resumes = (0..K).map(|k| turn(&rig, k % spread));
            let answers = futures::future::join_all(resumes).await;
            assert_eq!(
                executes(&journal),
                1,
                "{round}: the approved call ran {} times: {:?}",
                executes(&journal),
                lines(&journal)
            );
            assert_eq!(lines(std::path::Path::new(&ledger)).len(), 1, "{round}");
            // The one that ran is the saga that claimed the approval, Done.
            let row = store.approval(&id).await.unwrap();
            let claimer = row.claimed_saga.clone().expect("claimed");
            let ran: Vec<&Value> = answers
                .iter()
                .filter(|a| a["saga_id"] == claimer.as_str())
                .collect();
            assert_eq!(ran.len(), 1, "{round}: {answers:#?}");
            assert_eq!(ran[0]["outcome"], "success", "{round}: {}", ran[0]);
            let saga = store.saga(&claimer).await.unwrap().expect("its saga");
            assert_eq!(saga.state, State::Done, "{round}");
            let claims = store
                .log(None)
                .await
                .unwrap()
                .into_iter()
                .filter(|r| {
                    r.record == "APPROVAL_CLAIMED" && r.detail["approval_id"] == id.as_str()
                })
                .count();
            assert_eq!(claims, 1, "{round}: claimed {claims} times");
        }
        let report = capsaga_store::audit::verify(&*store, None).await.unwrap();
        assert!(report.ok(), "{report:?}");
    });
}
