//! A step in doubt (issue 45, item 6) on both back ends: a saga holding a
//! step without an outcome (BEGIN only) cannot be moved to Done by the
//! store's state transition, whatever the caller believes; and `audit
//! verify` reports a log whose saga ends Done with such a step.

use super::steps::{key, out, saga, step};
use super::{Db, suite};
use capsaga_core::error::{ErrorKind, ToolError};
use capsaga_core::fsm::State;
use capsaga_store::audit;
use capsaga_store::*;
use serde_json::json;

async fn done_is_refused_while_a_step_is_in_doubt(db: &Db) {
    let s = db.open().await;
    saga(&*s, "d1", "me").await;
    s.set_state("d1", FIRST_FENCE, State::Acting, "PlanReady", None)
        .await
        .unwrap();
    let args = json!({"n": 0});
    s.begin_step(&step("d1", 0, "d1-0", &args, FIRST_FENCE))
        .await
        .unwrap();
    s.commit_step(key("d1", FIRST_FENCE, 0), &out(json!({})))
        .await
        .unwrap();
    // Step 1 began; its outcome was never written.
    let args1 = json!({"n": 1});
    s.begin_step(&step("d1", 1, "d1-1", &args1, FIRST_FENCE))
        .await
        .unwrap();
    let records = |s: std::sync::Arc<dyn Store>| async move {
        s.log(Some("d1"))
            .await
            .unwrap()
            .into_iter()
            .filter(|r| r.record == "STATE")
            .count()
    };
    let before = records(s.clone()).await;
    let e = s
        .set_state("d1", FIRST_FENCE, State::Done, "ValidationPassed", None)
        .await
        .unwrap_err();
    assert!(
        matches!(&e, StoreError::InDoubt { saga, step: 1 } if saga == "d1"),
        "{}: {e}",
        db.name()
    );
    assert!(e.to_string().contains("step 1"), "{e}");
    // Nothing was written: the state and the log are as they were.
    assert_eq!(s.saga("d1").await.unwrap().unwrap().state, State::Acting);
    assert_eq!(records(s.clone()).await, before, "{}", db.name());
    // Another host's store (another process) is refused the same way.
    let other = db.open().await;
    assert!(matches!(
        other
            .set_state("d1", FIRST_FENCE, State::Done, "ValidationPassed", None)
            .await,
        Err(StoreError::InDoubt { step: 1, .. })
    ));
    // Every other state may still be reached: the rollback goes on.
    s.set_state("d1", FIRST_FENCE, State::Compensating, "ToolFailed", None)
        .await
        .unwrap();
    // Once the step has an outcome (here compensated), Done is no longer
    // refused by this rule (the guardrail decides what may follow).
    s.compensated(key("d1", FIRST_FENCE, 1)).await.unwrap();
    s.set_state("d1", FIRST_FENCE, State::Done, "test", None)
        .await
        .unwrap();
    // A FAIL is an outcome too.
    saga(&*s, "d2", "me").await;
    let args2 = json!({"n": 2});
    s.begin_step(&step("d2", 0, "d2-0", &args2, FIRST_FENCE))
        .await
        .unwrap();
    s.fail_step(
        key("d2", FIRST_FENCE, 0),
        &ToolError::new(ErrorKind::Unknown, "no"),
    )
    .await
    .unwrap();
    s.set_state("d2", FIRST_FENCE, State::Done, "test", None)
        .await
        .unwrap();
    // A stale token is refused as fenced, not as in doubt.
    saga(&*s, "d3", "me").await;
    let args3 = json!({"n": 3});
    s.begin_step(&step("d3", 0, "d3-0", &args3, FIRST_FENCE))
        .await
        .unwrap();
    assert!(matches!(
        s.set_state("d3", FIRST_FENCE + 7, State::Done, "x", None)
            .await,
        Err(StoreError::Fenced { .. })
    ));
    let report = audit::verify(&*s, None).await.unwrap();
    assert!(report.ok(), "{}: {report:#?}", db.name());
}

async fn audit_reports_a_done_saga_holding_a_begin_only_step(db: &Db) {
    let s = db.open().await;
    // What an older capsaga could leave: a saga committed (Done) while a
    // step had no outcome. Written here in the one order the store still
    // accepts (the BEGIN after the Done).
    saga(&*s, "a1", "me").await;
    s.set_state("a1", FIRST_FENCE, State::Done, "ValidationPassed", None)
        .await
        .unwrap();
    let args = json!({"n": 0});
    s.begin_step(&step("a1", 0, "a1-0", &args, FIRST_FENCE))
        .await
        .unwrap();
    // A saga still running with a BEGIN step is not a finding.
    saga(&*s, "a2", "me").await;
    s.begin_step(&step("a2", 0, "a2-0", &args, FIRST_FENCE))
        .await
        .unwrap();
    let report = audit::verify(&*s, None).await.unwrap();
    assert_eq!(report.findings.len(), 1, "{}: {report:#?}", db.name());
    let f = &report.findings[0];
    assert_eq!(f.check, "outcome");
    assert!(
        f.reason.contains("saga a1 is Done") && f.reason.contains("step 0 has no outcome"),
        "{}",
        f.reason
    );
    let done_row = s
        .log(Some("a1"))
        .await
        .unwrap()
        .into_iter()
        .find(|r| r.record == "STATE" && r.detail["state"] == "Done")
        .map(|r| r.seq);
    assert_eq!(f.seq, done_row);
    assert_eq!(report.first_bad_row(), done_row);
}

suite!(
    done_is_refused_while_a_step_is_in_doubt,
    audit_reports_a_done_saga_holding_a_begin_only_step,
);
