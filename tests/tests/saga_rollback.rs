//! Sagas over real fs_write components, real files and a real SQLite file:
//! a failing step rolls back exactly, compensation is idempotent and tolerates
//! an execute that never happened, and a retried idempotency key does not
//! execute twice.

use capsaga_core::error::ErrorKind;
use capsaga_core::fsm::State;
use capsaga_core::tool::CallContext;
use capsaga_door::dispatch::Dispatcher;
use capsaga_door::plan::{self, Plan, PlanStep};
use capsaga_sandbox::{CallRequest, Op};
use capsaga_store::StepStatus;
use capsaga_tests::{FS_POLICY, TestWorkspace, snapshot};
use serde_json::json;

fn write(path: &str, content: &str) -> PlanStep {
    PlanStep {
        tool: "fs_write".into(),
        args: json!({"path": path, "content": content}),
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn write_write_fail_rolls_back_exactly() {
    let ws = TestWorkspace::new(&["fs_read", "fs_write"], FS_POLICY);
    std::fs::write(ws.ws().join("a.txt"), "original A\n").unwrap();
    std::fs::create_dir(ws.ws().join("sub")).unwrap();
    std::fs::write(ws.ws().join("sub/keep.bin"), [0u8, 159, 146, 150, 255]).unwrap();
    let before = snapshot(&ws.ws());
    let outside = ws.root.join("outside.txt");
    let host = ws.host().await;

    let plan = Plan {
        description: "write, write, fail".into(),
        steps: vec![
            write(&ws.ws_path("a.txt"), "changed A\n"),
            write(&ws.ws_path("b.txt"), "new file B\n"),
            write(&outside.to_string_lossy(), "must never be written\n"),
        ],
    };
    let door = Dispatcher::new(host.clone());
    plan.validate(&door).unwrap();
    let report = plan::run(&door, &plan, None).await.unwrap();

    assert_eq!(report.final_state, State::FailedRolledBack);
    assert_eq!(report.steps.len(), 3);
    assert_eq!(report.steps[0].status, "committed");
    assert_eq!(report.steps[1].status, "committed");
    let err = report.steps[2].error.as_ref().unwrap();
    assert_eq!(err.kind, ErrorKind::PermissionDenied, "{err:?}");
    assert!(
        !outside.exists(),
        "the refused write reached the host filesystem"
    );
    assert_eq!(
        snapshot(&ws.ws()),
        before,
        "workspace not restored byte for byte"
    );

    // The WAL holds the whole story, compensations in reverse order.
    let steps = host.store.steps(&report.saga_id).await.unwrap();
    let statuses: Vec<StepStatus> = steps.iter().map(|s| s.status).collect();
    assert_eq!(
        statuses,
        [
            StepStatus::Compensated,
            StepStatus::Compensated,
            StepStatus::Fail
        ]
    );
    let records: Vec<(Option<u64>, String)> = host
        .store
        .log(Some(&report.saga_id))
        .await
        .unwrap()
        .into_iter()
        .filter(|r| r.record != "STATE")
        .map(|r| (r.step_seq, r.record))
        .collect();
    let expect: Vec<(Option<u64>, String)> = [
        (0, "BEGIN"),
        (0, "COMMIT"),
        // The label of what the step brought into the saga (issue 47).
        (0, "LABEL"),
        (1, "BEGIN"),
        (1, "COMMIT"),
        (1, "LABEL"),
        (2, "BEGIN"),
        (2, "FAIL"),
        // fs_write's own compensate, then the host's restore of the files
        // it journaled (issue 28), per step.
        (1, "FS_RESTORE"),
        (1, "COMPENSATED"),
        (0, "FS_RESTORE"),
        (0, "COMPENSATED"),
        // The failed step's message, labelled once its rollback is done.
        (2, "LABEL"),
    ]
    .into_iter()
    .map(|(s, r)| (Some(s), r.to_string()))
    .collect();
    assert_eq!(records, expect);
    // Every step row carries the component hash and the effective grants.
    let grant = format!("fs:write:{}/**", ws.ws().display());
    for s in &steps {
        assert_eq!(s.tool_hash.len(), 64);
        assert_eq!(s.grants, std::slice::from_ref(&grant));
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn committed_idempotency_key_is_not_executed_twice() {
    let ws = TestWorkspace::new(&["fs_write"], FS_POLICY);
    let host = ws.host().await;
    let a = ws.ws_path("a.txt");
    let plan = Plan {
        description: "two writes".into(),
        steps: vec![
            write(&a, "first\n"),
            write(&ws.ws_path("b.txt"), "second\n"),
        ],
    };
    let door = Dispatcher::new(host.clone());
    let first = plan::run(&door, &plan, None).await.unwrap();
    assert_eq!(first.final_state, State::Done);

    // Someone changes the file after the saga; a replay of the same saga must
    // return the logged outputs without running fs_write again.
    std::fs::write(&a, "changed by someone else\n").unwrap();
    let log_rows = host.store.log(Some(&first.saga_id)).await.unwrap().len();
    let again = plan::run(&door, &plan, Some(&first.saga_id)).await.unwrap();
    assert_eq!(again.saga_id, first.saga_id);
    assert!(
        again.steps.iter().all(|s| s.status == "replayed"),
        "{:?}",
        again.steps
    );
    assert_eq!(again.steps[0].output, first.steps[0].output);
    assert_eq!(
        std::fs::read_to_string(&a).unwrap(),
        "changed by someone else\n"
    );
    assert_eq!(
        host.store.log(Some(&first.saga_id)).await.unwrap().len(),
        log_rows,
        "a replay must not log new steps"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn compensate_is_idempotent_and_tolerates_no_execute() {
    let ws = TestWorkspace::new(&["fs_write"], FS_POLICY);
    std::fs::write(ws.ws().join("a.txt"), "before\n").unwrap();
    let host = ws.host().await;
    let t = host.registry.get("fs_write").unwrap();
    let grants = t.grants.clone().unwrap();
    let args = json!({"path": ws.ws_path("a.txt"), "content": "after\n"}).to_string();
    let new_args = json!({"path": ws.ws_path("new.txt"), "content": "x"}).to_string();
    let ctx = CallContext {
        saga_id: "test".into(),
        step_seq: 0,
        idempotency_key: "k".into(),
        deadline_ms: u64::MAX / 2,
        dry_run: false,
    };
    let run = |args: String, op: Op| {
        let host = &host;
        let t = t.clone();
        let grants = grants.clone();
        let ctx = ctx.clone();
        async move {
            host.sandbox
                .call(CallRequest {
                    tool: "fs_write",
                    prepared: t.component().unwrap(),
                    bindings: &host.sandbox.factors().configure(&grants),
                    limits: &t.limits,
                    ctx: &ctx,
                    args_json: &args,
                    op: &op,
                })
                .await
                .0
        }
    };
    // Compensation with only the dry-run output, execute never ran: no change.
    let dry = run(args.clone(), Op::DryRun).await.unwrap().unwrap();
    run(args.clone(), Op::Compensate(dry.clone()))
        .await
        .unwrap();
    assert_eq!(
        std::fs::read_to_string(ws.ws().join("a.txt")).unwrap(),
        "before\n"
    );
    let dry_new = run(new_args.clone(), Op::DryRun).await.unwrap().unwrap();
    run(new_args.clone(), Op::Compensate(dry_new))
        .await
        .unwrap();
    assert!(!ws.ws().join("new.txt").exists());

    // Execute, then compensate twice: restored once, the second is a no-op.
    let out = run(args.clone(), Op::Execute).await.unwrap().unwrap();
    assert_eq!(
        std::fs::read_to_string(ws.ws().join("a.txt")).unwrap(),
        "after\n"
    );
    run(args.clone(), Op::Compensate(out.clone()))
        .await
        .unwrap();
    assert_eq!(
        std::fs::read_to_string(ws.ws().join("a.txt")).unwrap(),
        "before\n"
    );
    run(args.clone(), Op::Compensate(out.clone()))
        .await
        .unwrap();
    assert_eq!(
        std::fs::read_to_string(ws.ws().join("a.txt")).unwrap(),
        "before\n"
    );

    // A created file is removed, once; a second compensate is fine.
    let out_new = run(new_args.clone(), Op::Execute).await.unwrap().unwrap();
    assert!(ws.ws().join("new.txt").exists());
    run(new_args.clone(), Op::Compensate(out_new.clone()))
        .await
        .unwrap();
    run(new_args.clone(), Op::Compensate(out_new))
        .await
        .unwrap();
    assert!(!ws.ws().join("new.txt").exists());

    // A third party's change is never destroyed: compensation refuses.
    let out = run(args.clone(), Op::Execute).await.unwrap().unwrap();
    std::fs::write(ws.ws().join("a.txt"), "someone else\n").unwrap();
    let err = run(args, Op::Compensate(out)).await.unwrap_err();
    assert_eq!(err.kind, ErrorKind::Unrevertible, "{err:?}");
    assert_eq!(
        std::fs::read_to_string(ws.ws().join("a.txt")).unwrap(),
        "someone else\n"
    );
}
