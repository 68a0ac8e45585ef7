//! Steps, the log and fencing, on both back ends.

use super::{Db, suite};
use capsaga_core::error::{ErrorKind, ToolError};
use capsaga_core::fsm::State;
use capsaga_core::tool::ToolOutput;
use capsaga_store::*;
use serde_json::{Value, json};

pub(crate) fn out(v: Value) -> ToolOutput {
    ToolOutput {
        data: v,
        effects: vec![],
        next_hint: None,
        summary: String::new(),
    }
}

pub(crate) async fn saga(db: &dyn Store, id: &str, owner: &str) {
    db.create_saga(&NewSaga {
        saga_id: id,
        scope: Scope::Plan,
        label: "test",
        state: State::Planning,
        owner,
        plan: Some("{\"calls\":[]}"),
        principal: None,
    })
    .await
    .unwrap();
}

pub(crate) fn step<'a>(
    saga_id: &'a str,
    seq: u64,
    key: &'a str,
    args: &'a Value,
    fence: u64,
) -> NewStep<'a> {
    NewStep {
        saga_id,
        step_seq: seq,
        tool_id: "t",
        tool_hash: "h",
        grants: &[],
        has_side_effects: true,
        idempotency_key: key,
        args,
        preimage: None,
        approval: None,
        fence,
    }
}

pub(crate) fn key(saga_id: &str, fence: u64, step_seq: u64) -> StepKey<'_> {
    StepKey {
        saga_id,
        fence,
        step_seq,
    }
}

async fn begin_commit_and_replay(db: &Db) {
    let s = db.open().await;
    saga(&*s, "s1", "me").await;
    let row = s.saga("s1").await.unwrap().unwrap();
    assert_eq!((row.state, row.fence), (State::Planning, FIRST_FENCE));
    assert_eq!(
        s.saga_plan("s1").await.unwrap().as_deref(),
        Some("{\"calls\":[]}")
    );
    let args = json!({"a": 1});
    let st = step("s1", 0, "k0", &args, FIRST_FENCE);
    assert_eq!(s.begin_step(&st).await.unwrap(), BeginOutcome::Started);
    assert_eq!(
        s.begin_step(&st).await.unwrap(),
        BeginOutcome::Exists(StepStatus::Begin)
    );
    s.commit_step(key("s1", 1, 0), &out(json!({"ok": true})))
        .await
        .unwrap();
    assert_eq!(
        s.begin_step(&st).await.unwrap(),
        BeginOutcome::AlreadyCommitted(out(json!({"ok": true})))
    );
    // A committed step cannot fail afterwards.
    let e = ToolError::with_hint(ErrorKind::Unknown, "x", "y");
    assert!(s.fail_step(key("s1", 1, 0), &e).await.is_err());
    s.compensated(key("s1", 1, 0)).await.unwrap();
    let steps = s.steps("s1").await.unwrap();
    assert_eq!(steps[0].status, StepStatus::Compensated);
    assert_eq!(steps[0].args, args);
    assert_eq!(
        s.step_by_key("k0").await.unwrap().unwrap().status,
        StepStatus::Compensated
    );
    assert!(s.step_at("s1", 1).await.unwrap().is_none());
    s.set_state(
        "s1",
        1,
        State::FailedRolledBack,
        "Abort",
        Some(&json!({"actor": "test"})),
    )
    .await
    .unwrap();
    let log = s.log(Some("s1")).await.unwrap();
    let records: Vec<&str> = log.iter().map(|l| l.record.as_str()).collect();
    assert_eq!(
        records,
        ["STATE", "BEGIN", "COMMIT", "COMPENSATED", "STATE"]
    );
    assert_eq!(log[4].detail["actor"], "test");
    for c in s.chains().await.unwrap() {
        assert!(capsaga_core::wal_row::verify_chain(&c.rows, &c.name).is_none());
    }
    assert_eq!(s.head().await.unwrap().unwrap().0, log[4].seq);
    assert!(s.unfinished_sagas().await.unwrap().is_empty());
    assert_eq!(s.saga_ids_starting("s", 10).await.unwrap(), ["s1"]);
    let report = audit::verify(&*s, None).await.unwrap();
    assert!(report.ok(), "{}: {report:?}", db.name());
}

async fn retries_in_doubt_and_failed_compensation(db: &Db) {
    let s = db.open().await;
    saga(&*s, "s2", "me").await;
    let args = json!({"b": 2});
    let e = ToolError::with_hint(ErrorKind::Timeout, "slow", "wait");
    s.begin_step(&step("s2", 0, "k", &args, 1)).await.unwrap();
    s.retry_attempt(key("s2", 1, 0), 1, 50, &e).await.unwrap();
    s.in_doubt(key("s2", 1, 0), &e).await.unwrap();
    let row = s.step_at("s2", 0).await.unwrap().unwrap();
    assert_eq!(row.status, StepStatus::Begin);
    assert_eq!(row.error.unwrap()["kind"], "timeout");
    s.compensation_failed(key("s2", 1, 0), &e).await.unwrap();
    s.set_state("s2", 1, State::FailedRollbackPartial, "X", None)
        .await
        .unwrap();
    let ops = s.needs_operator().await.unwrap();
    assert_eq!(ops.len(), 1);
    assert_eq!(ops[0].failed[0].step_seq, 0);
    s.compensated(key("s2", 1, 0)).await.unwrap();
    // In doubt and retry only for a step in BEGIN.
    assert!(s.in_doubt(key("s2", 1, 0), &e).await.is_err());
    let records: Vec<String> = s
        .log(Some("s2"))
        .await
        .unwrap()
        .into_iter()
        .map(|r| r.record)
        .collect();
    assert_eq!(
        records,
        [
            "STATE",
            "BEGIN",
            "RETRY",
            "IN_DOUBT",
            "COMPENSATION_FAILED",
            "STATE",
            "COMPENSATED"
        ]
    );
    // Traces and budgets live beside the log.
    s.save_trace(&TraceRecord {
        trace_id: "0123abcd-0000-4000-8000-000000000000",
        saga_id: Some("s2"),
        task: "t",
        outcome: "success",
        started_at: "2026-01-01T00:00:00.000Z",
        finished_at: None,
        wall_ms: 5,
        json: "{\"steps\":[]}",
    })
    .await
    .unwrap();
    assert_eq!(
        s.load_trace("0123abcd").await.unwrap().as_deref(),
        Some("{\"steps\":[]}")
    );
    assert!(s.load_trace("last").await.unwrap().is_some());
    assert_eq!(
        s.trace_of_saga("s2").await.unwrap().as_deref(),
        Some("0123abcd-0000-4000-8000-000000000000")
    );
    assert_eq!(s.trace_of_saga("s1").await.unwrap(), None);
    assert_eq!(s.trace_of_saga("' OR 1=1 --").await.unwrap(), None);
    assert!(
        s.load_trace("'; DROP TABLE traces; --")
            .await
            .unwrap()
            .is_none()
    );
    s.record_spend("2026-01-01", 0.5, 10, 20).await.unwrap();
    s.record_spend("2026-01-01", 0.25, 1, 2).await.unwrap();
    assert!((s.day_spent("2026-01-01").await.unwrap() - 0.75).abs() < 1e-9);
    let days = s.budget_days(7).await.unwrap();
    assert_eq!(
        (days.len(), days[0].calls, days[0].output_tokens),
        (1, 2, 22)
    );
    assert!(audit::verify(&*s, None).await.unwrap().ok());
}

/// A host whose saga was taken over cannot write to it any more: every
/// kind of write carrying the old token is refused by the database, and
/// nothing of it is written.
async fn a_stale_fencing_token_is_refused_by_the_database(db: &Db) {
    let a = db.open().await;
    let b = db.open().await;
    // The first owner's id is not a registered owner: dead for both back
    // ends (no lock file, no lease).
    let dead = uuid::Uuid::new_v4().to_string();
    saga(&*a, "s3", &dead).await;
    let args = json!({"c": 3});
    a.begin_step(&step("s3", 0, "k3-0", &args, 1))
        .await
        .unwrap();
    a.set_state("s3", 1, State::Acting, "PlanReady", None)
        .await
        .unwrap();
    let taken = b
        .take_over("s3", Some(&dead), "b-owner", "recovery")
        .await
        .unwrap();
    assert_eq!(taken, Some(2));
    // A second take-over expecting the old owner fails (compare and set).
    assert_eq!(
        a.take_over("s3", Some(&dead), "a-again", "recovery")
            .await
            .unwrap(),
        None
    );
    let before = a.log(None).await.unwrap().len();
    let e = ToolError::with_hint(ErrorKind::Unknown, "x", "y");
    let refused: Vec<Result<(), StoreError>> = vec![
        a.commit_step(key("s3", 1, 0), &out(json!(1))).await,
        a.fail_step(key("s3", 1, 0), &e).await,
        a.in_doubt(key("s3", 1, 0), &e).await,
        a.retry_attempt(key("s3", 1, 0), 1, 1, &e).await,
        a.compensated(key("s3", 1, 0)).await,
        a.compensation_failed(key("s3", 1, 0), &e).await,
        a.fs_restored(key("s3", 1, 0), &json!({"paths": []})).await,
        a.label_step(key("s3", 1, 0), &json!({"integrity": "untrusted"}))
            .await,
        a.set_state("s3", 1, State::Done, "X", None).await,
        a.begin_step(&step("s3", 1, "k3-1", &args, 1))
            .await
            .map(|_| ()),
        a.request_approval(&NewApproval {
            saga_id: "s3",
            step_seq: 1,
            binding: &capsaga_core::approval::Binding {
                tool_id: "t".into(),
                tool_hash: "h".into(),
                args_hash: "a".into(),
            },
            args: &args,
            reason: "r",
            summary: "s",
            preview: None,
            ttl_s: 60,
            replaces: None,
            fence: 1,
        })
        .await
        .map(|_| ()),
    ];
    for (i, r) in refused.iter().enumerate() {
        assert!(
            matches!(r, Err(StoreError::Fenced { held: 1, .. })),
            "{} write {i}: {r:?}",
            db.name()
        );
    }
    assert_eq!(
        a.log(None).await.unwrap().len(),
        before,
        "nothing was logged"
    );
    let row = b.saga("s3").await.unwrap().unwrap();
    assert_eq!(
        (row.state, row.fence, row.owner.as_deref()),
        (State::Acting, 2, Some("b-owner"))
    );
    assert_eq!(
        b.step_at("s3", 0).await.unwrap().unwrap().status,
        StepStatus::Begin
    );
    assert!(b.step_at("s3", 1).await.unwrap().is_none());
    // A stale BEGIN that claims an approval is refused after the claim and
    // its log record were written in its transaction: both are rolled back
    // (with the writes batched beside it kept), and the chain stays whole.
    let binding = capsaga_core::approval::Binding {
        tool_id: "t".into(),
        tool_hash: "h".into(),
        args_hash: capsaga_core::idempotency::args_hash(&args),
    };
    let req = b
        .request_approval(&NewApproval {
            saga_id: "s3",
            step_seq: 1,
            binding: &binding,
            args: &args,
            reason: "r",
            summary: "s",
            preview: None,
            ttl_s: 60,
            replaces: None,
            fence: 2,
        })
        .await
        .unwrap();
    b.decide_approval(&req.approval_id, true, "cli:op", None)
        .await
        .unwrap();
    let mut stale = step("s3", 1, "k3-claim", &args, 1);
    stale.approval = Some(&req.approval_id);
    let (refused, kept) = tokio::join!(
        a.begin_step(&stale),
        a.record_spend("2026-04-04", 1.0, 1, 1)
    );
    assert!(
        matches!(refused, Err(StoreError::Fenced { .. })),
        "{refused:?}"
    );
    kept.unwrap();
    assert_eq!(
        b.approval(&req.approval_id).await.unwrap().status,
        capsaga_core::approval::ApprovalStatus::Approved
    );
    assert!(audit::verify(&*b, None).await.unwrap().ok());
    b.set_state("s3", 2, State::Acting, "ApprovalGranted", None)
        .await
        .unwrap();
    // The new owner's token works, from either store.
    b.compensated(key("s3", 2, 0)).await.unwrap();
    a.set_state("s3", 2, State::FailedRolledBack, "ToolFailed", None)
        .await
        .unwrap();
    let log = b.log(Some("s3")).await.unwrap();
    let owner = log.iter().find(|r| r.record == "OWNER").unwrap();
    assert_eq!(owner.detail["fence"], 2);
    assert!(audit::verify(&*b, None).await.unwrap().ok());
}

/// Issue 28 on both back ends: a FAIL step whose file changes the host
/// restored becomes COMPENSATED, with its `FS_RESTORE` record; the record
/// is refused for a step that does not exist and, like every step write,
/// for a stale token (after a take-over) with nothing logged.
async fn a_failed_step_restored_from_its_journal_is_compensated(db: &Db) {
    let s = db.open().await;
    let dead = uuid::Uuid::new_v4().to_string();
    saga(&*s, "fs", &dead).await;
    let args = json!({"f": 1});
    for seq in 0..2 {
        s.begin_step(&step("fs", seq, &format!("kfs-{seq}"), &args, 1))
            .await
            .unwrap();
        let e = ToolError::with_hint(ErrorKind::Unknown, "wrote, then failed", "y");
        s.fail_step(key("fs", 1, seq), &e).await.unwrap();
    }
    let report = json!({"paths": [{"path": "/w/a.txt", "done": "restored"}]});
    s.fs_restored(key("fs", 1, 0), &report).await.unwrap();
    s.compensated(key("fs", 1, 0)).await.unwrap();
    assert_eq!(
        s.step_at("fs", 0).await.unwrap().unwrap().status,
        StepStatus::Compensated
    );
    assert!(matches!(
        s.fs_restored(key("fs", 1, 9), &report).await,
        Err(StoreError::Decode(_))
    ));
    let log = s.log(Some("fs")).await.unwrap();
    let restored: Vec<_> = log.iter().filter(|r| r.record == "FS_RESTORE").collect();
    assert_eq!(restored.len(), 1, "{}", db.name());
    assert_eq!(restored[0].step_seq, Some(0));
    assert_eq!(restored[0].detail, report);
    // Another host takes the saga over: the old token writes nothing more,
    // not even a restore record; the new one does.
    let b = db.open().await;
    let fence = b
        .take_over("fs", Some(&dead), "b", "recovery")
        .await
        .unwrap()
        .unwrap();
    let before = s.log(None).await.unwrap().len();
    assert!(matches!(
        s.fs_restored(key("fs", 1, 1), &report).await,
        Err(StoreError::Fenced { held: 1, .. })
    ));
    assert!(matches!(
        s.compensated(key("fs", 1, 1)).await,
        Err(StoreError::Fenced { held: 1, .. })
    ));
    assert_eq!(s.log(None).await.unwrap().len(), before);
    b.fs_restored(key("fs", fence, 1), &report).await.unwrap();
    b.compensated(key("fs", fence, 1)).await.unwrap();
    assert!(audit::verify(&*b, None).await.unwrap().ok());
}

/// The console's sagas list (issue 29): pages without gaps or repeats,
/// each filter alone and together, values bound as data.
async fn saga_page_filters_and_pages(db: &Db) {
    let s = db.open().await;
    for (i, who) in ["a", "b", "a", "b", "a"].iter().enumerate() {
        let id = format!("p{i}");
        let principal = format!("token:{who}");
        s.create_saga(&NewSaga {
            saga_id: &id,
            scope: Scope::Plan,
            label: "test",
            state: State::Planning,
            owner: "me",
            plan: None,
            principal: Some(&principal),
        })
        .await
        .unwrap();
    }
    let args = json!({});
    for id in ["p1", "p3"] {
        s.begin_step(&step(id, 0, &format!("k-{id}"), &args, FIRST_FENCE))
            .await
            .unwrap();
    }
    s.set_state("p4", 1, State::FailedRolledBack, "Abort", None)
        .await
        .unwrap();
    let all = SagaQuery::default();
    let mut seen = Vec::new();
    let mut offset = 0;
    loop {
        let (rows, more) = s.saga_page(&all, offset, 2).await.unwrap();
        assert!(rows.len() <= 2);
        offset += rows.len();
        seen.extend(rows.into_iter().map(|r| r.saga_id));
        if !more {
            break;
        }
    }
    seen.sort();
    assert_eq!(seen, ["p0", "p1", "p2", "p3", "p4"], "{}", db.name());
    let ids = |v: (Vec<SagaRow>, bool)| {
        let mut ids: Vec<String> = v.0.into_iter().map(|r| r.saga_id).collect();
        ids.sort();
        ids
    };
    let q = |state: Option<&str>, principal: Option<&str>, tool: Option<&str>| SagaQuery {
        state: state.map(String::from),
        principal: principal.map(String::from),
        tool: tool.map(String::from),
        since: None,
    };
    assert_eq!(
        ids(s
            .saga_page(&q(None, Some("token:a"), None), 0, 50)
            .await
            .unwrap()),
        ["p0", "p2", "p4"]
    );
    assert_eq!(
        ids(s.saga_page(&q(None, None, Some("t")), 0, 50).await.unwrap()),
        ["p1", "p3"]
    );
    assert_eq!(
        ids(s
            .saga_page(&q(None, Some("token:a"), Some("t")), 0, 50)
            .await
            .unwrap()),
        Vec::<String>::new()
    );
    assert_eq!(
        ids(s
            .saga_page(&q(Some("FailedRolledBack"), None, None), 0, 50)
            .await
            .unwrap()),
        ["p4"]
    );
    // A filter value is data, never SQL.
    let hostile = q(Some("x' OR '1'='1"), None, Some("t') OR 1=1 --"));
    assert_eq!(
        ids(s.saga_page(&hostile, 0, 50).await.unwrap()),
        Vec::<String>::new()
    );
    let later = SagaQuery {
        since: Some("9999-01-01T00:00:00.000Z".into()),
        ..SagaQuery::default()
    };
    assert!(s.saga_page(&later, 0, 50).await.unwrap().0.is_empty());
    let (past_end, more) = s.saga_page(&all, 100, 50).await.unwrap();
    assert!(past_end.is_empty() && !more);
}

/// A step's label (issue 47) is kept with the step and in the log as a
/// `LABEL` record of its hash chain; an unknown step is an error.
async fn a_steps_label_is_kept_with_it_and_in_the_log(db: &Db) {
    let s = db.open().await;
    saga(&*s, "sl", "me").await;
    let args = json!({"url": "https://a.example"});
    s.begin_step(&step("sl", 0, "kl0", &args, FIRST_FENCE))
        .await
        .unwrap();
    s.commit_step(key("sl", FIRST_FENCE, 0), &out(json!("page")))
        .await
        .unwrap();
    let label = json!({"source": {"kind": "tool", "tool": "t", "component": "h", "saga": "sl", "step": 0}, "integrity": "untrusted"});
    s.label_step(key("sl", FIRST_FENCE, 0), &label)
        .await
        .unwrap();
    let steps = s.steps("sl").await.unwrap();
    assert_eq!(steps[0].label.as_ref(), Some(&label));
    let log = s.log(Some("sl")).await.unwrap();
    let last = log.last().unwrap();
    assert_eq!(last.record, "LABEL");
    assert_eq!(last.detail["label"], label);
    assert!(
        s.label_step(key("sl", FIRST_FENCE, 7), &label)
            .await
            .is_err()
    );
    // A step never labelled has none.
    s.begin_step(&step("sl", 1, "kl1", &args, FIRST_FENCE))
        .await
        .unwrap();
    assert_eq!(s.steps("sl").await.unwrap()[1].label, None);
}

suite!(
    a_steps_label_is_kept_with_it_and_in_the_log,
    saga_page_filters_and_pages,
    a_failed_step_restored_from_its_journal_is_compensated,
    begin_commit_and_replay,
    retries_in_doubt_and_failed_compensation,
    a_stale_fencing_token_is_refused_by_the_database,
);
