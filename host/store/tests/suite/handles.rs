//! Sagas released between requests (issue 26, MCP 2026-07-28 saga
//! handles), on both back ends: a release is fenced by the owner's token
//! and moves it; a released saga is not taken over by recovery's
//! `take_over`, is claimed by exactly one of two hosts claiming it at
//! once, and only when released long enough with an idle time; every
//! change is an `OWNER` record and the log verifies.

use super::steps::{key, out, saga, step};
use super::{Db, suite};
use capsaga_store::*;
use serde_json::json;

/// Release, a refused stale release, two concurrent claims (one wins),
/// and the winner writes under its new token while the releaser's is
/// refused.
async fn a_released_saga_is_claimed_once(db: &Db) {
    let a = db.open().await;
    let b = db.open().await;
    saga(&*a, "h", "host-a").await;
    let args = json!({});
    a.begin_step(&step("h", 0, "h-0", &args, FIRST_FENCE))
        .await
        .unwrap();
    a.commit_step(key("h", FIRST_FENCE, 0), &out(json!(0)))
        .await
        .unwrap();
    // Not its owner, or a stale token: nothing released.
    assert_eq!(b.release_saga("h", "host-b", 1).await.unwrap(), None);
    assert_eq!(a.release_saga("h", "host-a", 7).await.unwrap(), None);
    assert_eq!(a.release_saga("h", "host-a", 1).await.unwrap(), Some(2));
    let row = b.saga("h").await.unwrap().unwrap();
    assert_eq!(
        (row.owner.as_deref(), row.fence),
        (None, 2),
        "{}",
        db.name()
    );
    let released_at = row.released_at.clone().expect("released_at");
    assert_eq!(released_at.len(), 24, "{released_at}");
    // The releaser's token is spent.
    assert!(matches!(
        a.begin_step(&step("h", 1, "h-1", &args, 1)).await,
        Err(StoreError::Fenced { .. })
    ));
    // Recovery's take-over of an ownerless saga does not take a released
    // one.
    assert_eq!(
        b.take_over("h", None, "recoverer", "recovery")
            .await
            .unwrap(),
        None,
        "{}",
        db.name()
    );
    // Not released for an hour yet: the sweep of abandoned handles leaves it.
    assert_eq!(
        b.claim_released("h", "sweeper", "expired", Some(3_600_000))
            .await
            .unwrap(),
        None
    );
    // Two hosts claim it at once: one gets it.
    let (ra, rb) = tokio::join!(
        a.claim_released("h", "host-a", "claim", None),
        b.claim_released("h", "host-b", "claim", None)
    );
    let (ra, rb) = (ra.unwrap(), rb.unwrap());
    assert!(
        ra.is_some() != rb.is_some(),
        "{}: exactly one claim: {ra:?} {rb:?}",
        db.name()
    );
    let (winner, store, token) = match (ra, rb) {
        (Some(t), _) => ("host-a", &a, t),
        (_, Some(t)) => ("host-b", &b, t),
        _ => unreachable!(),
    };
    assert_eq!(token, 3);
    let row = a.saga("h").await.unwrap().unwrap();
    assert_eq!(
        (row.owner.as_deref(), row.fence, row.released_at),
        (Some(winner), 3, None)
    );
    store
        .begin_step(&step("h", 1, "h-1", &args, token))
        .await
        .unwrap();
    store
        .commit_step(key("h", token, 1), &out(json!(1)))
        .await
        .unwrap();
    // Released again, then swept once idle (0 ms: released at least now).
    assert_eq!(
        store.release_saga("h", winner, token).await.unwrap(),
        Some(4)
    );
    assert_eq!(
        b.claim_released("h", "sweeper", "expired", Some(0))
            .await
            .unwrap(),
        Some(5)
    );
    let log = b.log(Some("h")).await.unwrap();
    let owners: Vec<_> = log.iter().filter(|r| r.record == "OWNER").collect();
    assert_eq!(owners.len(), 4, "{}: {owners:#?}", db.name());
    assert_eq!(owners[0].detail["released"], true);
    assert_eq!(owners[0].detail["owner"], serde_json::Value::Null);
    assert_eq!(owners[0].detail["why"], RELEASED_WHY);
    assert_eq!(owners[3].detail["owner"], "sweeper");
    assert_eq!(owners[3].detail["why"], "expired");
    let report = audit::verify(&*b, None).await.unwrap();
    assert!(report.ok(), "{}: {report:?}", db.name());
}

suite!(a_released_saga_is_claimed_once);
