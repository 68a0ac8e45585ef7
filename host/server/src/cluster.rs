//! A server among several hosts sharing one store: it recovers the sagas
//! of hosts that died ([`recover_loop`]), rolls back its own sagas left in
//! doubt by a store failure ([`doubt_loop`], with any store), ends the
//! sagas of abandoned handles ([`expire_loop`], with any store) and reports, in `/healthz`, its
//! policy hash next to the other live hosts' ([`health`]), so that a policy
//! reloaded on one host and not the others is seen, not silently divergent.

use super::live::Live;
use capsaga_door::dispatch::AbandonedEnd;
use serde_json::{Value, json};
use std::sync::Weak;
use std::time::Duration;

/// Every [`capsaga_store::OwnerStore::recovery_interval`] (only for a store
/// whose owners can die while others run: PostgreSQL), recover the sagas
/// whose owner's lease expired, through the door of the current generation
/// ([`capsaga_door::dispatch::Dispatcher::recover_dead`]: in-doubt steps
/// compensated, committed ones rolled back, as at start-up). Ends with the
/// server.
pub async fn recover_loop(live: Weak<Live>) {
    let every = match live.upgrade() {
        Some(l) => l.host().store.recovery_interval(),
        None => return,
    };
    let Some(every) = every else {
        return;
    };
    loop {
        tokio::time::sleep(every).await;
        let Some(l) = live.upgrade() else {
            return;
        };
        let door = l.door();
        drop(l);
        match door.recover_dead().await {
            Ok(done) => {
                for r in done {
                    tracing::warn!(
                        saga = %r.saga_id,
                        "recovered a saga left {} by a host whose lease expired: now {}",
                        r.state_before,
                        r.report.final_state
                    );
                }
            }
            Err(e) => tracing::warn!("recovery of dead hosts' sagas failed (retried): {e}"),
        }
    }
}

/// Roll back the sagas this process let go of in doubt (a store failure
/// while a step's outcome was written; `capsaga_door::saga::InDoubt`), through the
/// door of the current generation
/// ([`capsaga_door::dispatch::Dispatcher::settle_left_in_doubt`]): woken when one
/// is left, then tried again after 100 ms, doubling to at most 5 s, until
/// the store answers and none is left. Ends with the server.
pub async fn doubt_loop(live: Weak<Live>) {
    const FIRST: Duration = Duration::from_millis(100);
    const MOST: Duration = Duration::from_secs(5);
    let list = match live.upgrade() {
        Some(l) => l.host().in_doubt.clone(),
        None => return,
    };
    loop {
        // Woken by a saga left, or every 30 s to notice the server ended.
        let _ = tokio::time::timeout(Duration::from_secs(30), list.wait()).await;
        let mut pause = FIRST;
        while !list.is_empty() {
            let Some(l) = live.upgrade() else {
                return;
            };
            let door = l.door();
            drop(l);
            door.settle_left_in_doubt().await;
            if list.is_empty() {
                break;
            }
            tokio::time::sleep(pause).await;
            pause = (pause * 2).min(MOST);
        }
        if live.strong_count() == 0 {
            return;
        }
    }
}

/// Every quarter of `idle` (at most every 30 s), end the sagas released
/// between requests whose handle has not been used for `idle`
/// ([`capsaga_door::dispatch::Dispatcher::expire_released`], by `end`), through the
/// door of the current generation; with a shared store every host sweeps,
/// and the first to claim an abandoned saga ends it. Ends with the server.
pub async fn expire_loop(live: Weak<Live>, idle: Duration, end: AbandonedEnd) {
    let every = (idle / 4).clamp(Duration::from_millis(100), Duration::from_secs(30));
    let idle_ms = u64::try_from(idle.as_millis()).unwrap_or(u64::MAX);
    loop {
        tokio::time::sleep(every).await;
        let Some(l) = live.upgrade() else {
            return;
        };
        let door = l.door();
        drop(l);
        match door.expire_released(idle_ms, end).await {
            Ok(done) => {
                for e in done {
                    tracing::warn!(
                        saga = %e.saga_id,
                        "ended a saga whose handle was abandoned ({} ms unused): {} -> {}",
                        idle_ms,
                        e.state_before,
                        e.final_state
                    );
                }
            }
            Err(e) => tracing::warn!("sweep of abandoned saga handles failed (retried): {e}"),
        }
    }
}

/// The `/healthz` fields about the store and the hosts sharing it:
/// `store`, `owner`, `policy_sha256`, and for a shared store the live
/// hosts' policy hashes and whether they differ (`policy_diverged`, which
/// makes the status `degraded`).
pub async fn health(live: &Live) -> (Value, bool) {
    let host = live.host();
    let mine = host.config.policy_sha256.clone();
    let mut fields = json!({
        "store": if host.config.store.shared() { "postgres" } else { "sqlite" },
        "owner": host.owner.id(),
        "policy_sha256": mine,
    });
    if !host.config.store.shared() {
        return (fields, false);
    }
    match host.store.live_owners().await {
        Ok(hosts) => {
            let mut hashes: Vec<String> = hosts
                .iter()
                .filter_map(|h| h.policy_sha256.clone())
                .collect();
            hashes.sort();
            hashes.dedup();
            let diverged = hashes.iter().any(|h| *h != mine);
            fields["hosts"] = json!(hosts.len());
            fields["policy_hashes"] = json!(hashes);
            fields["policy_diverged"] = json!(diverged);
            (fields, diverged)
        }
        Err(e) => {
            fields["store_error"] = json!(e.to_string());
            (fields, true)
        }
    }
}
