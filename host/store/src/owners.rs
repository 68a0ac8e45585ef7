//! [`OwnerStore`]: which process drives each saga, and whether it is alive.
//!
//! Every process that drives sagas registers as an owner
//! ([`OwnerStore::register_owner`]) and holds the returned [`OwnerLease`]
//! for its life; `saga_state.owner` names the owner of each saga. Crash
//! recovery takes over the sagas of owners that are not alive, never those
//! of a live one. How "alive" is known is the backend's:
//!
//! - SQLite (one machine): an exclusive advisory lock on
//!   `<state dir>/owners/<id>.lock`, released by the kernel when the
//!   process exits however it exits (SIGKILL included). Exact: never lost
//!   while the process lives, so [`OwnerStore::recovery_interval`] is None
//!   (recovery runs when a command starts).
//! - PostgreSQL (several hosts): a lease in the `hosts` table, renewed by
//!   the holder; the owner is alive while its lease has not expired by the
//!   database's clock. A lease that expired is never renewed again (the
//!   holder learns it lost it, [`OwnerLease::lost`], and must stop), so
//!   "not alive" is final, as with a lock file. Other hosts look for the
//!   sagas of expired owners every [`OwnerStore::recovery_interval`].
//!
//! Fencing ([`crate::SagaRow::fence`]) makes a take-over safe even when a
//! host that is not dead but cut off still believes it owns a saga.

use super::StoreError;
use async_trait::async_trait;
use serde::Serialize;
use std::time::Duration;

/// A registered owner, alive while held. Dropping it ends the ownership
/// (the lock file is removed, or the lease row deleted by the renewal task,
/// if the process lives long enough to run it); a process that exits calls
/// [`OwnerLease::retire`] first, so that it is dead at once for every other
/// process sharing the store.
#[async_trait]
pub trait OwnerLease: Send + Sync + std::fmt::Debug {
    /// The owner id (a UUID v4), as stored in `saga_state.owner`.
    fn id(&self) -> &str;

    /// A receiver that becomes `true` once the lease is lost (it expired
    /// before it could be renewed: another host may take over this owner's
    /// sagas). Never for a lock file. The holder must then stop running
    /// tools for its sagas: their writes are refused anyway (fencing).
    fn lost(&self) -> tokio::sync::watch::Receiver<bool>;

    /// Publish the SHA-256 of the policy this owner runs under (shown by
    /// `/healthz` of every host sharing the store). Nothing for SQLite.
    fn set_policy_hash(&self, sha256: &str);

    /// End this ownership now, before the process exits: from when this
    /// returns, [`OwnerStore::owner_alive`] is false for this owner in
    /// every process sharing the store, so its sagas are at once
    /// resumable (a parked one), taken over (an unfinished one, by
    /// recovery) or re-opened by an operator, anywhere. The holder must
    /// not drive a saga afterwards (its writes would be refused once
    /// another process took the saga over). SQLite: the lock file is
    /// removed (the kernel releases its lock at exit anyway); PostgreSQL:
    /// the renewal stops and the lease row is deleted, waiting at most the
    /// lease for the database (an unreachable one lets the lease expire,
    /// as for a killed process). Idempotent. Never fails: what it cannot
    /// do is logged, and the lease then ends by expiry.
    async fn retire(&self);
}

/// A live owner, as [`OwnerStore::live_owners`] lists them.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct OwnerRow {
    /// The owner id.
    pub owner_id: String,
    /// The SHA-256 of its policy, when published.
    pub policy_sha256: Option<String>,
    /// When it registered (RFC 3339).
    pub started_at: String,
}

/// Owners of sagas (see the module doc).
#[async_trait]
pub trait OwnerStore: Send + Sync {
    /// Register this process as a new owner, alive until the lease is
    /// dropped.
    ///
    /// # Errors
    /// [`StoreError`] (for SQLite [`StoreError::Dir`] when the lock file
    /// cannot be created).
    async fn register_owner(&self) -> Result<std::sync::Arc<dyn OwnerLease>, StoreError>;

    /// Whether owner `id` is alive. An id that is not a UUID (an edited
    /// row) is not alive; when aliveness cannot be known (a lock file that
    /// cannot be opened) the owner counts as alive, so that recovery never
    /// compensates a saga that may still be running.
    ///
    /// # Errors
    /// [`StoreError`].
    async fn owner_alive(&self, id: &str) -> Result<bool, StoreError>;

    /// The owners alive now (PostgreSQL: the hosts with a current lease;
    /// SQLite: empty, lock files carry no policy).
    ///
    /// # Errors
    /// [`StoreError`].
    async fn live_owners(&self) -> Result<Vec<OwnerRow>, StoreError>;

    /// How often a long-running host looks for sagas whose owner died
    /// (None: ownership cannot be lost while a process lives, recovery at
    /// start is enough).
    fn recovery_interval(&self) -> Option<Duration>;
}
