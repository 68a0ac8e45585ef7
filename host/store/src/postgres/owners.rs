//! Owners across hosts: a lease per host in `hosts`, by the database's
//! clock.
//!
//! - Registering inserts the row with `expires_at = now + lease`.
//! - A task renews it every fifth of the lease, only while it has not
//!   expired (`... WHERE expires_at > clock_timestamp()`): an expired lease
//!   is never renewed again, so "not alive" is final, as for a lock file,
//!   and the compare and set of [`super::super::SagaStore::take_over`] can
//!   trust it.
//! - The holder counts its lease from when it *sent* the last successful
//!   renewal (before the database stamped it): when that is older than
//!   the lease (checked before each renewal too, so a process woken from a
//!   pause learns it without a round trip), or a renewal finds it expired,
//!   the lease is lost
//!   ([`OwnerLease::lost`]): the host must stop driving its sagas (others
//!   may be recovering them; their fencing tokens have moved).
//! - Retiring the lease ([`OwnerLease::retire`], what a process does
//!   before it exits) stops the renewal and deletes the row, and returns
//!   once it is deleted: a host that exits cleanly is dead at once for
//!   every other host (its parked sagas resumable, its unfinished ones
//!   recovered). Dropping the lease asks the renewal task for the same
//!   without waiting (it happens if the runtime lives long enough). A
//!   killed host's row expires. Rows expired for an hour are deleted when
//!   a host registers (a missing row is as dead as an expired one).

use super::super::{OwnerLease, OwnerRow, OwnerStore, StoreError};
use super::{PgStore, get, i64_of, query, query_opt};
use async_trait::async_trait;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// A host's lease.
#[derive(Debug)]
pub struct PgLease {
    id: String,
    lost: tokio::sync::watch::Sender<bool>,
    policy: Arc<Mutex<Option<String>>>,
    /// Tells the renewal task to delete the row and stop; it answers on
    /// the channel sent once the row is deleted.
    stop: Mutex<Option<tokio::sync::oneshot::Sender<Done>>>,
    lease: Duration,
}

/// What the renewal task answers once the lease row is deleted.
type Done = tokio::sync::oneshot::Sender<()>;

#[async_trait]
impl OwnerLease for PgLease {
    fn id(&self) -> &str {
        &self.id
    }

    fn lost(&self) -> tokio::sync::watch::Receiver<bool> {
        self.lost.subscribe()
    }

    fn set_policy_hash(&self, sha256: &str) {
        if let Ok(mut p) = self.policy.lock() {
            *p = Some(sha256.to_string());
        }
    }

    async fn retire(&self) {
        let Some(stop) = self.stop.lock().ok().and_then(|mut s| s.take()) else {
            return;
        };
        let (done, deleted) = tokio::sync::oneshot::channel();
        if stop.send(done).is_err() {
            // The renewal task ended: the lease was lost (expired).
            return;
        }
        match tokio::time::timeout(self.lease, deleted).await {
            Ok(Ok(())) => tracing::info!(owner = %self.id, "this host's lease is released"),
            _ => {
                tracing::warn!(owner = %self.id, "could not release this host's lease: it ends when it expires")
            }
        }
    }
}

impl Drop for PgLease {
    fn drop(&mut self) {
        // The sender dropped: the renewal task deletes the row and stops.
        if let Ok(mut s) = self.stop.lock() {
            s.take();
        }
    }
}

const RENEW: &str = "UPDATE hosts SET expires_at = clock_timestamp() + $2::bigint * interval '1 millisecond', policy_sha256 = COALESCE($3, policy_sha256)
     WHERE owner_id = $1 AND expires_at > clock_timestamp()";

/// The renewal task: renews every `lease / 5` until stopped or lost.
async fn renew(
    pool: deadpool_postgres::Pool,
    id: String,
    lease: Duration,
    policy: Arc<Mutex<Option<String>>>,
    lost: tokio::sync::watch::Sender<bool>,
    mut stop: tokio::sync::oneshot::Receiver<Done>,
    registered: Instant,
) {
    let every = lease / 5;
    let ms = i64::try_from(lease.as_millis()).unwrap_or(i64::MAX);
    let mut held_since = registered;
    loop {
        tokio::select! {
            done = &mut stop => {
                let deleted = match pool.get().await {
                    Ok(c) => c.execute("DELETE FROM hosts WHERE owner_id = $1", &[&id]).await.is_ok(),
                    Err(_) => false,
                };
                if let (Ok(done), true) = (done, deleted) {
                    let _ = done.send(());
                }
                return;
            }
            () = tokio::time::sleep(every) => {}
        }
        if held_since.elapsed() >= lease {
            // The renewal did not run for a whole lease (the process was
            // paused, SIGSTOP or a frozen VM, or starved): another host may
            // have taken its sagas. Lost at once, before anything this
            // process runs on waking can reach the database or a tool.
            tracing::error!(owner = %id, "this host's lease ran out while it could not renew it (paused or starved): it is lost");
            let _ = lost.send(true);
            return;
        }
        let sent = Instant::now();
        let hash = policy.lock().ok().and_then(|p| p.clone());
        let result =
            match tokio::time::timeout(every.max(Duration::from_millis(200)), pool.get()).await {
                Ok(Ok(c)) => tokio::time::timeout(
                    every.max(Duration::from_millis(200)),
                    c.execute(RENEW, &[&id, &ms, &hash]),
                )
                .await
                .map_err(|_| "timed out".to_string())
                .and_then(|r| r.map_err(|e| e.to_string())),
                Ok(Err(e)) => Err(e.to_string()),
                Err(_) => Err("timed out".to_string()),
            };
        match result {
            Ok(1) => held_since = sent,
            Ok(_) => {
                tracing::error!(owner = %id, "this host's lease expired before it could be renewed: other hosts may recover its sagas");
                let _ = lost.send(true);
                return;
            }
            Err(e) => {
                if held_since.elapsed() >= lease {
                    tracing::error!(owner = %id, "this host could not renew its lease for {} ms ({e}): it is lost", lease.as_millis());
                    let _ = lost.send(true);
                    return;
                }
                tracing::warn!(owner = %id, "cannot renew this host's lease ({e}); retrying");
            }
        }
    }
}

#[async_trait]
impl OwnerStore for PgStore {
    async fn register_owner(&self) -> Result<Arc<dyn OwnerLease>, StoreError> {
        let id = uuid::Uuid::new_v4().to_string();
        let lease = self.options.lease;
        let ms = i64_of(u64::try_from(lease.as_millis()).unwrap_or(u64::MAX));
        let registered = Instant::now();
        let c = self.conn().await?;
        c.execute(
            "DELETE FROM hosts WHERE expires_at < clock_timestamp() - interval '1 hour'",
            &[],
        )
        .await?;
        c.execute(
            "INSERT INTO hosts (owner_id, started_at, expires_at) VALUES ($1, $2, clock_timestamp() + $3::bigint * interval '1 millisecond')",
            &[&id, &crate::clock::now_rfc3339(), &ms],
        )
        .await?;
        drop(c);
        let (lost, _) = tokio::sync::watch::channel(false);
        let policy = Arc::new(Mutex::new(None));
        let (stop, stop_rx) = tokio::sync::oneshot::channel();
        tokio::spawn(renew(
            self.lease_pool.clone(),
            id.clone(),
            lease,
            policy.clone(),
            lost.clone(),
            stop_rx,
            registered,
        ));
        Ok(Arc::new(PgLease {
            id,
            lost,
            policy,
            stop: Mutex::new(Some(stop)),
            lease,
        }))
    }

    async fn owner_alive(&self, id: &str) -> Result<bool, StoreError> {
        let c = self.conn().await?;
        let row = query_opt(
            &c,
            "SELECT expires_at > clock_timestamp() FROM hosts WHERE owner_id = $1",
            &[&id],
        )
        .await?;
        row.map_or(Ok(false), |r| get(&r, 0))
    }

    async fn live_owners(&self) -> Result<Vec<OwnerRow>, StoreError> {
        let c = self.conn().await?;
        let rows = query(
            &c,
            "SELECT owner_id, policy_sha256, started_at FROM hosts WHERE expires_at > clock_timestamp() ORDER BY started_at, owner_id",
            &[],
        )
        .await?;
        rows.iter()
            .map(|r| {
                Ok(OwnerRow {
                    owner_id: get(r, 0)?,
                    policy_sha256: get(r, 1)?,
                    started_at: get(r, 2)?,
                })
            })
            .collect()
    }

    fn recovery_interval(&self) -> Option<Duration> {
        Some((self.options.lease / 5).max(Duration::from_millis(100)))
    }
}
