//! Who may claim an approval (issue 45 item 1), on both back ends and from
//! two stores on one database ("two hosts"): the rule is checked by the
//! claim itself, in the transaction of the step's BEGIN, whatever the door
//! of the claiming host believed.

use super::steps::step;
use super::{Db, suite};
use capsaga_core::approval::{ApprovalStatus, Binding};
use capsaga_core::fsm::State;
use capsaga_store::*;
use serde_json::json;

async fn saga_of(db: &dyn Store, id: &str, principal: Option<&str>, scope: Scope) {
    db.create_saga(&NewSaga {
        saga_id: id,
        scope,
        label: "claims",
        state: State::Acting,
        owner: "o",
        plan: None,
        principal,
    })
    .await
    .unwrap();
}

/// Saga `id` of `principal` asks for an approval of `args` at step 0, which
/// an operator approves on the other store; its id.
async fn approved(
    asks: &dyn Store,
    decides: &dyn Store,
    id: &str,
    principal: Option<&str>,
    args: &serde_json::Value,
) -> String {
    saga_of(asks, id, principal, Scope::Handle).await;
    let binding = Binding::new("t", "h", args);
    let a = asks
        .request_approval(&NewApproval {
            saga_id: id,
            step_seq: 0,
            binding: &binding,
            args,
            reason: "r",
            summary: "s",
            preview: None,
            ttl_s: 600,
            replaces: None,
            fence: FIRST_FENCE,
        })
        .await
        .unwrap();
    decides
        .decide_approval(&a.approval_id, true, "token:alice (operator)", None)
        .await
        .unwrap();
    a.approval_id
}

/// Whether saga `claimant` finds approval `id` claimable and, trying to
/// claim it with its BEGIN whatever it found, gets it.
async fn try_claim(
    db: &dyn Store,
    claimant: &str,
    id: &str,
    args: &serde_json::Value,
    key: &str,
) -> (bool, BeginOutcome) {
    let binding = Binding::new("t", "h", args);
    let found = db
        .find_approved(&binding, &clock::now_rfc3339(), claimant)
        .await
        .unwrap()
        .iter()
        .any(|a| a.approval.approval_id == id);
    let mut s = step(claimant, 0, key, args, FIRST_FENCE);
    s.approval = Some(id);
    (found, db.begin_step(&s).await.unwrap())
}

async fn an_approval_is_claimed_only_by_its_saga_then_only_by_its_principal(db: &Db) {
    let (a, b) = (db.open().await, db.open().await);
    let args = json!({"to": "acct-9", "amount": 10});
    let id = approved(&*a, &*b, "bob-1", Some("token:bob"), &args).await;
    // While the saga that asked is open, even its principal's other saga
    // does not get it.
    saga_of(&*b, "bob-2", Some("token:bob"), Scope::Session).await;
    let (found, got) = try_claim(&*b, "bob-2", &id, &args, "k-bob-2").await;
    assert!(!found, "{}", db.name());
    assert_eq!(got, BeginOutcome::ApprovalUnavailable, "{}", db.name());
    // The saga that asked ends (rolled back, as a turn that stopped for the
    // human is).
    a.set_state("bob-1", FIRST_FENCE, State::FailedRolledBack, "Abort", None)
        .await
        .unwrap();
    // Every other principal's byte-identical call, on either host: refused
    // where the door looks and where the claim is written.
    let others = [
        ("mal", Some("token:mallory")),
        ("case", Some("token:Bob")),
        ("space", Some("token:bob ")),
        ("op", Some("token:alice")),
        ("cli", Some("cli:bob")),
        ("env", Some("env:CAPSAGA_TOKEN")),
        ("loop", Some("loopback")),
        ("anon", None),
    ];
    for (i, (claimant, principal)) in others.iter().enumerate() {
        let s = if i % 2 == 0 { &a } else { &b };
        saga_of(&**s, claimant, *principal, Scope::RestTurn).await;
        let (found, got) = try_claim(&**s, claimant, &id, &args, &format!("k-{claimant}")).await;
        assert!(!found, "{} {principal:?}", db.name());
        assert_eq!(
            got,
            BeginOutcome::ApprovalUnavailable,
            "{} {principal:?}",
            db.name()
        );
        assert!(
            a.step_at(claimant, 0).await.unwrap().is_none(),
            "nothing written"
        );
    }
    assert_eq!(
        b.approval(&id).await.unwrap().status,
        ApprovalStatus::Approved
    );
    // Two claims at once, the other principal's and bob's, from two
    // hosts: bob's saga gets it, once.
    saga_of(&*a, "mal-2", Some("token:mallory"), Scope::Handle).await;
    let ((_, theirs), (found, mine)) = tokio::join!(
        try_claim(&*a, "mal-2", &id, &args, "k-mal-2"),
        try_claim(&*b, "bob-2", &id, &args, "k-bob-2b"),
    );
    assert_eq!(theirs, BeginOutcome::ApprovalUnavailable, "{}", db.name());
    assert!(found, "{}", db.name());
    assert_eq!(mine, BeginOutcome::Started, "{}", db.name());
    let row = a.approval(&id).await.unwrap();
    assert_eq!(row.status, ApprovalStatus::Claimed);
    assert_eq!(row.claimed_saga.as_deref(), Some("bob-2"));
    assert!(audit::verify(&*a, None).await.unwrap().ok());
}

async fn an_approval_of_a_saga_without_a_principal_is_that_sagas_alone(db: &Db) {
    let (a, b) = (db.open().await, db.open().await);
    let args = json!({"n": 1});
    let id = approved(&*a, &*b, "old", None, &args).await;
    a.set_state("old", FIRST_FENCE, State::FailedRolledBack, "Abort", None)
        .await
        .unwrap();
    for (claimant, principal) in [("other", None), ("bob", Some("token:bob"))] {
        saga_of(&*b, claimant, principal, Scope::Plan).await;
        let (found, got) = try_claim(&*b, claimant, &id, &args, &format!("k-{claimant}")).await;
        assert!(!found, "{} {principal:?}", db.name());
        assert_eq!(got, BeginOutcome::ApprovalUnavailable, "{}", db.name());
    }
    // The saga that asked still claims it (a plan resumed after its
    // rollback would not, being ended; the rule is the store's).
    let (found, got) = try_claim(&*a, "old", &id, &args, "k-old").await;
    assert!(found, "{}", db.name());
    assert_eq!(got, BeginOutcome::Started, "{}", db.name());
}

async fn the_scope_of_a_saga_is_recorded_and_logged(db: &Db) {
    let (a, b) = (db.open().await, db.open().await);
    for (i, scope) in Scope::ALL.into_iter().enumerate() {
        let id = format!("scoped-{i}");
        saga_of(&*a, &id, Some("token:bob"), scope).await;
        let row = b.saga(&id).await.unwrap().unwrap();
        assert_eq!(row.scope, Some(scope), "{}", db.name());
        assert_eq!(row.origin, scope.origin(), "{}", db.name());
        let log = b.log(Some(&id)).await.unwrap();
        assert_eq!(log[0].detail["scope"], scope.as_str(), "{}", db.name());
    }
    assert!(audit::verify(&*b, None).await.unwrap().ok());
}

suite!(
    an_approval_is_claimed_only_by_its_saga_then_only_by_its_principal,
    an_approval_of_a_saga_without_a_principal_is_that_sagas_alone,
    the_scope_of_a_saga_is_recorded_and_logged,
);
