//! The saga engine over real components and a real SQLite file: retries of
//! retriable errors only, bounded, with the same idempotency key; the
//! operator's view of FailedRollbackPartial sagas and the retry that ends
//! them FailedRolledBack; a resumed saga refusing another plan; the guardrail
//! table with the operator's `fsm.toml`.

use capsaga_core::fsm::State;
use capsaga_core::retry::RetryPolicy;
use capsaga_door::dispatch::{Args, Call, Dispatcher, Outcome};
use capsaga_door::plan::{self, Plan, PlanStep};
use capsaga_store::sqlite::SqliteStore;
use capsaga_store::{LogStore, StepStatus};
use capsaga_tests::{TestWorkspace, block_on};
use serde_json::{Value, json};
use std::process::Stdio;
use std::time::{Duration, Instant};

const POLICY: &str = r#"
[tools.fs_write]
grants = ["fs:write:~/ws/**"]
[tools.flaky]
grants = ["fs:write:~/ws/**"]
# Its counter file counts executions: the host must not roll it back.
host_rollback = false
[tools.compensate_trap]
[tools.spin]
# The spin step's deadline is the window in which the test, as a third
# party, changes the file the saga wrote once its step committed: it ends
# that window, nothing waits for it to pass (issue 32).
limits = { deadline_ms = 10000 }
"#;

fn flaky(ws: &TestWorkspace, fail_times: u32, counter: &str) -> PlanStep {
    PlanStep {
        tool: "flaky".into(),
        args: json!({"fail_times": fail_times, "state_path": ws.ws_path(counter)}),
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn retriable_errors_are_retried_with_the_same_key_and_bounded() {
    let ws = TestWorkspace::new(&["flaky", "fs_write"], POLICY);
    let mut host = ws.host().await;
    std::sync::Arc::get_mut(&mut host)
        .expect("the only reference")
        .retry = RetryPolicy {
        max_attempts: 3,
        base_delay_ms: 10,
        max_delay_ms: 20,
    };
    let door = Dispatcher::new(host.clone());

    // Two failures, then success on the third attempt, same key throughout.
    let ok = plan::run(
        &door,
        &Plan {
            description: "flaky twice".into(),
            steps: vec![flaky(&ws, 2, "a.count")],
        },
        None,
    )
    .await
    .unwrap();
    assert_eq!(ok.final_state, State::Done, "{ok:#?}");
    let out = ok.steps[0].output.as_ref().unwrap();
    assert_eq!(out.data["attempts"], 3);
    let store = &host.store;
    let step = &store.steps(&ok.saga_id).await.unwrap()[0];
    assert_eq!(out.data["key"], step.idempotency_key.as_str());
    let retries: Vec<Value> = store
        .log(Some(&ok.saga_id))
        .await
        .unwrap()
        .into_iter()
        .filter(|r| r.record == "RETRY")
        .map(|r| r.detail)
        .collect();
    assert_eq!(retries.len(), 2);
    for (i, r) in retries.iter().enumerate() {
        assert_eq!(r["attempt"], i as u64 + 1);
        assert_eq!(r["error"]["retriable"], true);
        assert_eq!(
            r["error"]["details"]["key"],
            step.idempotency_key.as_str(),
            "every attempt saw the same key"
        );
    }
    assert_eq!(retries[0]["delay_ms"], 10);
    assert_eq!(retries[1]["delay_ms"], 20);

    // More failures than attempts: the step fails after max_attempts and the
    // saga rolls back (the counter file is compensated away).
    let failed = plan::run(
        &door,
        &Plan {
            description: "flaky too often".into(),
            steps: vec![
                PlanStep {
                    tool: "fs_write".into(),
                    args: json!({"path": ws.ws_path("before.txt"), "content": "x"}),
                },
                flaky(&ws, 5, "b.count"),
            ],
        },
        None,
    )
    .await
    .unwrap();
    assert_eq!(failed.final_state, State::FailedRolledBack);
    assert_eq!(
        std::fs::read_to_string(ws.ws().join("b.count")).unwrap(),
        "3",
        "exactly max_attempts executions"
    );
    assert!(!ws.ws().join("before.txt").exists());
    let log = host.store.log(Some(&failed.saga_id)).await.unwrap();
    assert_eq!(log.iter().filter(|r| r.record == "RETRY").count(), 2);

    // A non-retriable error is never retried.
    let refused = plan::run(
        &door,
        &Plan {
            description: "not retriable".into(),
            steps: vec![PlanStep {
                tool: "fs_write".into(),
                args: json!({"path": ws.root.join("outside.txt").to_string_lossy(), "content": "x"}),
            }],
        },
        None,
    )
    .await
    .unwrap();
    assert_eq!(refused.final_state, State::FailedRolledBack);
    let log = host.store.log(Some(&refused.saga_id)).await.unwrap();
    assert!(!log.iter().any(|r| r.record == "RETRY"));
}

#[test]
fn operator_sees_failed_compensations_and_a_repaired_retry_ends_rolled_back() {
    let ws = TestWorkspace::new(&["fs_write", "spin", "compensate_trap"], POLICY);
    let a = ws.ws_path("a.txt");
    let plan_path = ws.root.join("p.json");
    std::fs::write(
        &plan_path,
        json!({"description": "write then time out", "steps": [
            {"tool": "fs_write", "args": {"path": a, "content": "ours"}},
            {"tool": "spin", "args": {}},
        ]})
        .to_string(),
    )
    .unwrap();
    // The database exists before it is polled.
    let st = ws.capsaga(&["recover"]).output().unwrap();
    assert!(st.status.success(), "{st:?}");
    let db = SqliteStore::open(&ws.root.join(".capsaga/state.db")).unwrap();
    let child = ws
        .capsaga(&["--json", "run", "--plan", plan_path.to_str().unwrap()])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    // Once the write's step committed (its files' fingerprints recorded as
    // the step left them), while spin runs, a third party changes the file.
    // Not before: a change during the write's own call is the step's.
    let deadline = Instant::now() + capsaga_tests::wait_bound();
    while !block_on(db.log(None))
        .unwrap()
        .iter()
        .any(|r| r.record == "COMMIT" && r.step_seq == Some(0))
    {
        assert!(Instant::now() < deadline, "the write never committed");
        std::thread::sleep(Duration::from_millis(5));
    }
    assert_eq!(std::fs::read_to_string(&a).unwrap(), "ours");
    std::fs::write(&a, "theirs").unwrap();
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(6), "rollback partial");
    let report: Value = serde_json::from_slice(&out.stdout).unwrap();
    let saga = report["saga_id"].as_str().unwrap().to_string();
    assert_eq!(report["final_state"], "FailedRollbackPartial");
    assert_eq!(std::fs::read_to_string(&a).unwrap(), "theirs", "left alone");

    // The operator's list says which step failed and why.
    let list = ws
        .capsaga(&["--json", "sagas", "--needs-operator"])
        .output()
        .unwrap();
    let v: Value = serde_json::from_slice(&list.stdout).unwrap();
    let n = &v["needs_operator"];
    assert_eq!(n.as_array().unwrap().len(), 1, "{v:#}");
    assert_eq!(n[0]["saga"]["saga_id"], saga.as_str());
    assert_eq!(n[0]["failed"][0]["step_seq"], 0);
    assert_eq!(n[0]["failed"][0]["tool_id"], "fs_write");
    assert_eq!(n[0]["failed"][0]["error"]["kind"], "unrevertible");
    let why = n[0]["failed"][0]["error"]["message"].as_str().unwrap();
    assert!(why.contains("changed by someone else"), "{why}");
    let text = ws.capsaga(&["sagas", "--needs-operator"]).output().unwrap();
    let text = String::from_utf8_lossy(&text.stdout);
    assert!(text.contains("compensation failed: unrevertible"), "{text}");
    assert!(
        text.contains(&format!("capsaga rollback --saga {saga}")),
        "{text}"
    );

    // Retrying without repairing anything still fails and stays partial.
    let again = ws
        .capsaga(&["--json", "rollback", "--saga", &saga])
        .output()
        .unwrap();
    assert_eq!(again.status.code(), Some(6));
    let v: Value = serde_json::from_slice(&again.stdout).unwrap();
    assert_eq!(v["report"]["final_state"], "FailedRollbackPartial");

    // The operator puts back what capsaga wrote; the retry compensates and
    // the operator-only transition ends the saga FailedRolledBack.
    std::fs::write(&a, "ours").unwrap();
    let fixed = ws
        .capsaga(&["--json", "rollback", "--saga", &saga])
        .output()
        .unwrap();
    assert_eq!(fixed.status.code(), Some(0), "{fixed:?}");
    let v: Value = serde_json::from_slice(&fixed.stdout).unwrap();
    assert_eq!(v["state_before"], "FailedRollbackPartial");
    assert_eq!(v["report"]["final_state"], "FailedRolledBack");
    assert!(
        !std::path::Path::new(&a).exists(),
        "the created file is gone"
    );
    let log = ws
        .capsaga(&["--json", "log", "--saga", &saga])
        .output()
        .unwrap();
    let v: Value = serde_json::from_slice(&log.stdout).unwrap();
    let last = v["log"].as_array().unwrap().last().unwrap().clone();
    assert_eq!(last["detail"]["event"], "OperatorCompensationRetried");
    assert_eq!(last["detail"]["actor"], "operator");
    assert_eq!(last["detail"]["state"], "FailedRolledBack");
    let v: Value = serde_json::from_slice(
        &ws.capsaga(&["--json", "sagas", "--needs-operator"])
            .output()
            .unwrap()
            .stdout,
    )
    .unwrap();
    assert_eq!(v["needs_operator"], json!([]));
    // A second retry is refused by the guardrail: the operator row leaves
    // FailedRollbackPartial only.
    let done = ws.capsaga(&["rollback", "--saga", &saga]).output().unwrap();
    assert_eq!(done.status.code(), Some(0));
    assert!(String::from_utf8_lossy(&done.stdout).contains("nothing to compensate"));
    assert!(
        ws.capsaga(&["audit", "verify"])
            .output()
            .unwrap()
            .status
            .success()
    );

    // A compensation that keeps trapping keeps the saga partial.
    let trap = ws.root.join("trap.json");
    std::fs::write(
        &trap,
        json!({"description": "trap", "steps": [
            {"tool": "compensate_trap", "args": {}},
            {"tool": "fs_write", "args": {"path": ws.root.join("outside.txt").to_string_lossy(), "content": "x"}},
        ]})
        .to_string(),
    )
    .unwrap();
    let t = ws
        .capsaga(&["--json", "run", "--plan", trap.to_str().unwrap()])
        .output()
        .unwrap();
    assert_eq!(t.status.code(), Some(6));
    let id: Value = serde_json::from_slice(&t.stdout).unwrap();
    let id = id["saga_id"].as_str().unwrap();
    let r = ws.capsaga(&["rollback", "--saga", id]).output().unwrap();
    assert_eq!(r.status.code(), Some(6));
}

#[tokio::test(flavor = "multi_thread")]
async fn resume_refuses_another_plan_and_another_call_at_a_logged_step() {
    let ws = TestWorkspace::new(&["fs_write"], POLICY);
    let host = ws.host().await;
    let door = Dispatcher::new(host.clone());
    let w = |name: &str| PlanStep {
        tool: "fs_write".into(),
        args: json!({"path": ws.ws_path(name), "content": name}),
    };
    let p1 = Plan {
        description: "one".into(),
        steps: vec![w("a.txt"), w("b.txt")],
    };
    let r = plan::run(&door, &p1, None).await.unwrap();
    assert_eq!(r.final_state, State::Done);
    let p2 = Plan {
        description: "one".into(),
        steps: vec![w("a.txt"), w("c.txt")],
    };
    let err = plan::run(&door, &p2, Some(&r.saga_id)).await.err().unwrap();
    assert!(err.to_string().contains("another plan"), "{err}");
    assert!(!ws.ws().join("c.txt").exists());
    // The engine itself refuses a different call at a logged position.
    let mut saga = door.resume(&r.saga_id).await.unwrap();
    let (a, c) = (w("a.txt").args, w("c.txt").args);
    let _ = door
        .submit(&mut saga, Call::new("fs_write", Args::Value(&a)))
        .await
        .unwrap();
    let other = door
        .submit(&mut saga, Call::new("fs_write", Args::Value(&c)))
        .await
        .unwrap()
        .outcome;
    match other {
        Outcome::Refused { error, .. } => {
            assert!(error.message.contains("not the same plan"), "{error:?}")
        }
        o => panic!("{o:?}"),
    }
    assert!(!ws.ws().join("c.txt").exists());
    let steps = host.store.steps(&r.saga_id).await.unwrap();
    assert!(steps.iter().all(|s| s.status == StepStatus::Commit));
}

#[test]
fn fsm_show_prints_the_table_with_fsm_toml_rows() {
    let ws = TestWorkspace::new(&["fs_write"], POLICY);
    let out = ws.capsaga(&["fsm", "--show"]).output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success());
    assert!(text.contains("AwaitingApproval"), "{text}");
    assert!(text.contains("stateDiagram-v2"), "{text}");
    assert!(text.contains("OperatorCompensationRetried"), "{text}");
    std::fs::write(
        ws.root.join("fsm.toml"),
        "[[transition]]\nfrom = \"Validating\"\nevent = \"ToolFailed\"\nto = \"Compensating\"\n",
    )
    .unwrap();
    let v: Value = serde_json::from_slice(
        &ws.capsaga(&["--json", "fsm", "--show"])
            .output()
            .unwrap()
            .stdout,
    )
    .unwrap();
    let extra: Vec<&Value> = v["transitions"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| r["source"] == "fsm.toml")
        .collect();
    assert_eq!(extra.len(), 1, "{v:#}");
    // A row that would leave a terminal state refuses the whole file, for
    // every command.
    std::fs::write(
        ws.root.join("fsm.toml"),
        "[[transition]]\nfrom = \"Done\"\nevent = \"StartSaga\"\nto = \"Planning\"\n",
    )
    .unwrap();
    for args in [&["fsm", "--show"][..], &["sagas"][..]] {
        let out = ws.capsaga(args).output().unwrap();
        assert_eq!(out.status.code(), Some(3), "{args:?}");
        assert!(String::from_utf8_lossy(&out.stderr).contains("terminal"));
    }
}
