//! Several hosts on one database (two or more stores opened on the same
//! file or PostgreSQL database, as separate processes would): idempotency
//! keys, approvals, budgets and ownership hold across them.

use super::steps::{key, out, saga, step};
use super::{Db, eventually, suite};
use capsaga_core::approval::{ApprovalStatus, Binding};
use capsaga_store::*;
use serde_json::json;
use std::time::Duration;

/// The same idempotency key begun by two hosts at once: one BEGIN.
async fn idempotency_keys_are_unique_across_hosts(db: &Db) {
    let a = db.open().await;
    let b = db.open().await;
    saga(&*a, "s", "o").await;
    let args = json!({});
    for i in 0..20u64 {
        let k = format!("key-{i}");
        let st = step("s", i, &k, &args, 1);
        let (ra, rb) = tokio::join!(a.begin_step(&st), b.begin_step(&st));
        let mut outcomes = [ra.unwrap(), rb.unwrap()];
        outcomes.sort_by_key(|o| matches!(o, BeginOutcome::Started));
        assert_eq!(
            outcomes,
            [
                BeginOutcome::Exists(StepStatus::Begin),
                BeginOutcome::Started
            ],
            "{} key {i}",
            db.name()
        );
    }
    let begins = a
        .log(Some("s"))
        .await
        .unwrap()
        .iter()
        .filter(|r| r.record == "BEGIN")
        .count();
    assert_eq!(begins, 20);
    assert!(audit::verify(&*b, None).await.unwrap().ok());
}

fn binding() -> Binding {
    Binding {
        tool_id: "t".into(),
        tool_hash: "h".into(),
        args_hash: capsaga_core::idempotency::args_hash(&json!({"x": 1})),
    }
}

/// Two hosts deciding one approval at once: one decides, the other is told
/// it is no longer pending; two sagas claiming it at once: one runs.
async fn an_approval_is_decided_and_claimed_once_across_hosts(db: &Db) {
    let a = db.open().await;
    let b = db.open().await;
    let args = json!({"x": 1});
    let binding = binding();
    for round in 0..5 {
        let id = format!("s-{round}");
        saga(&*a, &id, "o").await;
        let req = a
            .request_approval(&NewApproval {
                saga_id: &id,
                step_seq: 0,
                binding: &binding,
                args: &args,
                reason: "r",
                summary: "s",
                preview: None,
                ttl_s: 600,
                replaces: None,
                fence: 1,
            })
            .await
            .unwrap();
        let (ra, rb) = tokio::join!(
            a.decide_approval(&req.approval_id, true, "cli:alice", None),
            b.decide_approval(&req.approval_id, false, "cli:bob", None),
        );
        let won = [ra.is_ok(), rb.is_ok()];
        assert_eq!(
            won.iter().filter(|w| **w).count(),
            1,
            "{} round {round}: {ra:?} {rb:?}",
            db.name()
        );
        let lost = if ra.is_ok() { rb } else { ra };
        assert!(matches!(lost, Err(ApprovalOpError::Refused(_))), "{lost:?}");
        let row = b.approval(&req.approval_id).await.unwrap();
        if row.status == ApprovalStatus::Approved {
            // The requesting saga ended: any saga may claim the approval.
            // Two sagas on two hosts race for it: one runs.
            a.set_state(
                &id,
                1,
                capsaga_core::fsm::State::FailedRolledBack,
                "X",
                None,
            )
            .await
            .unwrap();
            let other = format!("other-{round}");
            saga(&*b, &other, "o2").await;
            a.set_state(&other, 1, capsaga_core::fsm::State::Acting, "X", None)
                .await
                .unwrap();
            let mut s1 = step(&id, 0, "", &args, 1);
            let k1 = format!("{id}-k");
            s1.idempotency_key = &k1;
            s1.approval = Some(&req.approval_id);
            let mut s2 = step(&other, 0, "", &args, 1);
            let k2 = format!("{other}-k");
            s2.idempotency_key = &k2;
            s2.approval = Some(&req.approval_id);
            let (r1, r2) = tokio::join!(a.begin_step(&s1), b.begin_step(&s2));
            let mut both = [r1.unwrap(), r2.unwrap()];
            let winner = if both[0] == BeginOutcome::Started {
                &id
            } else {
                &other
            };
            both.sort_by_key(|o| matches!(o, BeginOutcome::Started));
            assert_eq!(
                both,
                [BeginOutcome::ApprovalUnavailable, BeginOutcome::Started],
                "{}",
                db.name()
            );
            let row = b.approval(&req.approval_id).await.unwrap();
            assert_eq!(row.status, ApprovalStatus::Claimed);
            assert_eq!(row.claimed_saga.as_deref(), Some(winner.as_str()));
        }
    }
    assert!(audit::verify(&*a, None).await.unwrap().ok());
}

/// Spend recorded by several hosts at once adds up exactly.
async fn budget_counters_are_shared_by_hosts(db: &Db) {
    let hosts = [db.open().await, db.open().await, db.open().await];
    let mut tasks = Vec::new();
    for h in &hosts {
        for _ in 0..20 {
            let h = h.clone();
            tasks.push(tokio::spawn(async move {
                h.record_spend("2026-02-02", 0.125, 3, 5).await
            }));
        }
    }
    for t in tasks {
        t.await.unwrap().unwrap();
    }
    for h in &hosts {
        assert!((h.day_spent("2026-02-02").await.unwrap() - 7.5).abs() < 1e-9);
    }
    let day = &hosts[0].budget_days(1).await.unwrap()[0];
    assert_eq!(
        (day.calls, day.input_tokens, day.output_tokens),
        (60, 180, 300)
    );
}

/// A saga whose owner is alive is never taken over; once the owner is gone
/// (its lock released, its lease ended) it is, once.
async fn a_live_owners_saga_is_not_taken_over(db: &Db) {
    let a = db.open().await;
    let b = db.open().await;
    let lease = a.register_owner().await.unwrap();
    let id = lease.id().to_string();
    assert!(b.owner_alive(&id).await.unwrap(), "{}", db.name());
    assert!(!b.owner_alive("not-an-owner").await.unwrap());
    saga(&*a, "owned", &id).await;
    assert_eq!(
        b.take_over("owned", Some(&id), "thief", "recovery")
            .await
            .unwrap(),
        None,
        "{}: a live owner keeps its saga",
        db.name()
    );
    let mut lost = lease.lost();
    assert!(!*lost.borrow_and_update());
    drop(lease);
    eventually(Duration::from_secs(10), "the owner is gone", || {
        let b = b.clone();
        let id = id.clone();
        async move { !b.owner_alive(&id).await.unwrap() }
    })
    .await;
    assert_eq!(
        b.take_over("owned", Some(&id), "heir", "recovery")
            .await
            .unwrap(),
        Some(2)
    );
    // The new owner's writes go through; the old token's do not.
    let args = json!({});
    b.begin_step(&step("owned", 0, "o-0", &args, 2))
        .await
        .unwrap();
    assert!(matches!(
        a.commit_step(key("owned", 1, 0), &out(json!(1))).await,
        Err(StoreError::Fenced { .. })
    ));
}

/// An owner that retires (a process about to exit, issue 48) is dead for
/// every other store as soon as `retire` returns, without waiting for its
/// lease to expire; its lease is not reported lost (it was given up, not
/// lost), and its saga is taken over at once.
async fn a_retired_owner_is_dead_at_once(db: &Db) {
    let a = db.open().await;
    let b = db.open().await;
    let lease = a.register_owner().await.unwrap();
    let id = lease.id().to_string();
    saga(&*a, "retired", &id).await;
    assert!(b.owner_alive(&id).await.unwrap(), "{}", db.name());
    let lost = lease.lost();
    lease.retire().await;
    assert!(!b.owner_alive(&id).await.unwrap(), "{}", db.name());
    assert!(
        b.live_owners()
            .await
            .unwrap()
            .iter()
            .all(|o| o.owner_id != id)
    );
    assert!(!*lost.borrow(), "{}: given up, not lost", db.name());
    assert_eq!(
        b.take_over("retired", Some(&id), "heir", "resume")
            .await
            .unwrap(),
        Some(2),
        "{}",
        db.name()
    );
    // Idempotent.
    lease.retire().await;
}

/// Writes from several hosts interleave into a log that verifies (one
/// chain on SQLite; on PostgreSQL a chain per host, anchored together).
async fn the_log_verifies_across_hosts(db: &Db) {
    let hosts = [db.open().await, db.open().await, db.open().await];
    let mut tasks = Vec::new();
    for (h, host) in hosts.iter().enumerate() {
        for s in 0..5 {
            let host = host.clone();
            tasks.push(tokio::spawn(async move {
                let id = format!("h{h}-s{s}");
                saga(&*host, &id, "o").await;
                for i in 0..4u64 {
                    let args = json!({"i": i});
                    let k = format!("{id}-{i}");
                    host.begin_step(&step(&id, i, &k, &args, 1)).await.unwrap();
                    host.commit_step(key(&id, 1, i), &out(json!(i)))
                        .await
                        .unwrap();
                }
                host.set_state(&id, 1, capsaga_core::fsm::State::Done, "X", None)
                    .await
                    .unwrap();
            }));
        }
    }
    for t in tasks {
        t.await.unwrap();
    }
    let report = audit::verify(&*hosts[2], None).await.unwrap();
    assert!(report.ok(), "{}: {report:?}", db.name());
    // 15 sagas: 1 + 4 × 2 + 1 records each (besides the anchors of
    // PostgreSQL's chains).
    let log = hosts[0].log(None).await.unwrap();
    let records = log.iter().filter(|r| r.record != audit::ANCHOR).count();
    assert_eq!(records, 15 * 10);
    assert_eq!(report.rows, log.len());
    assert_eq!(report.head.as_ref().map(|h| h.0), log.last().map(|r| r.seq));
}

suite!(
    idempotency_keys_are_unique_across_hosts,
    an_approval_is_decided_and_claimed_once_across_hosts,
    budget_counters_are_shared_by_hosts,
    a_live_owners_saga_is_not_taken_over,
    a_retired_owner_is_dead_at_once,
    the_log_verifies_across_hosts,
);
