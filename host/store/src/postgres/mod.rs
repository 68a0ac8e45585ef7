//! The PostgreSQL implementation of the store (feature `postgres`): one
//! database shared by several capsaga hosts (`store = "postgres://..."` in
//! `capsaga.toml`, or `CAPSAGA_STORE`). The same traits, records and
//! guarantees as [`crate::sqlite`], with what several machines need:
//!
//! - Pooled connections (deadpool-postgres over tokio-postgres); reads
//!   take any pooled connection and see only committed, hence durable,
//!   records.
//! - Every write goes through this host's batching writer ([`writer`]):
//!   one transaction for the writes waiting, this writer's chain head
//!   locked first, a savepoint per write, one durable commit for the batch.
//! - One hash chain per writer in one shared order, anchored to each other
//!   (`log`): hosts append side by side, and `capsaga audit verify`
//!   checks every chain, its head, the anchors and the replay in order.
//! - Saga ownership is a lease per host in `hosts` with a fencing token per
//!   saga ([`owners`]); a step write carrying a stale token is refused by a
//!   trigger in the database ([`schema`]).
//! - Forward-only numbered migrations at open, under an advisory lock, each
//!   in the transaction that records it ([`schema`]): a database of a newer
//!   schema, or another application's, is refused and left untouched.
//! - A server that cannot be reached, or a connection that breaks, is
//!   [`StoreError::Unreachable`]: the write did not happen (the server rolls
//!   an open transaction back), nothing partial is left. The password is
//!   never shown (`target`).
//!
//! One file per trait, as for SQLite: `sagas`, `steps`, `log`,
//! `approvals`, `traces`, `budget`, `audit`, `neurons`,
//! `tokens`, `keys`, `switch`, [`owners`].
//!
//! The traits whose logic is written once (`crate::logic`: keys, tokens,
//! tasks, the kill switch, traces, audit) are thin here: a write or a read opened
//! and handed to that logic through this dialect's side of the backend
//! seam (`seam.rs`). The migrations are numbered files in `migrations/`.

mod approvals;
mod audit;
mod budget;
mod keys;
mod log;
mod neurons;
pub mod owners;
mod sagas;
pub mod schema;
mod seam;
mod steps;
mod switch;
mod target;
mod tasks;
mod tokens;
mod traces;
pub mod writer;

use super::StoreError;
use deadpool_postgres::{Manager, ManagerConfig, Pool, RecyclingMethod};
use std::time::Duration;
use tokio_postgres::types::ToSql;

/// A connection of the pool, as the store's code uses it.
pub(crate) type Conn = deadpool_postgres::ClientWrapper;

/// How the store is opened.
#[derive(Debug, Clone)]
pub struct PgOptions {
    /// How long a host's lease on its sagas lasts without renewal
    /// (renewed every fifth of it); other hosts recover its sagas once it
    /// has expired. Default 10 s.
    pub lease: Duration,
    /// Most writes per transaction (1: no batching, one durable commit per
    /// write: the baseline of the benchmark). Default [`writer::MAX_BATCH`].
    pub max_batch: usize,
    /// Pooled connections (reads and the writer). Default 16.
    pub pool_size: usize,
    /// How long to wait for a connection (and for the server to answer a
    /// connection attempt). Default 5 s.
    pub connect_timeout: Duration,
    /// The chain of the log this store's writes append to: None (the
    /// default) for a fresh one (`w-` and a UUID), the design; a name (ASCII
    /// letters, digits, `-`, `_`; at most 64) to share one with other
    /// stores, whose batches then take turns on its head row: the
    /// one-chain baseline of `capsaga-bench --pg`.
    pub chain: Option<String>,
}

impl Default for PgOptions {
    fn default() -> Self {
        PgOptions {
            lease: Duration::from_secs(10),
            max_batch: writer::MAX_BATCH,
            pool_size: 16,
            connect_timeout: Duration::from_secs(5),
            chain: None,
        }
    }
}

/// The open PostgreSQL store.
pub struct PgStore {
    pool: Pool,
    /// One connection of its own for the lease's renewal, so that a pool
    /// busy with reads and writes never delays it past the lease.
    lease_pool: Pool,
    writer: writer::Writer,
    target: String,
    options: PgOptions,
}

impl std::fmt::Debug for PgStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PgStore")
            .field("target", &self.target)
            .finish()
    }
}

/// The error of a broken connection.
pub(crate) fn closed() -> StoreError {
    StoreError::Unreachable {
        target: "the PostgreSQL store".into(),
        detail: "the connection to the server broke".into(),
    }
}

impl From<tokio_postgres::Error> for StoreError {
    fn from(e: tokio_postgres::Error) -> Self {
        use tokio_postgres::error::SqlState;
        if let Some(db) = e.as_db_error() {
            let code = db.code();
            if *code == SqlState::T_R_SERIALIZATION_FAILURE
                || *code == SqlState::T_R_DEADLOCK_DETECTED
                || *code == SqlState::LOCK_NOT_AVAILABLE
                || *code == SqlState::QUERY_CANCELED
            {
                return StoreError::Busy(db.message().to_string());
            }
            let class = &code.code()[..2];
            if matches!(class, "08" | "57" | "53") {
                return StoreError::Unreachable {
                    target: "the PostgreSQL store".into(),
                    detail: db.message().to_string(),
                };
            }
            return StoreError::Backend(format!("{} ({})", db.message(), code.code()));
        }
        if e.is_closed() || std::error::Error::source(&e).is_some_and(|s| s.is::<std::io::Error>())
        {
            return StoreError::Unreachable {
                target: "the PostgreSQL store".into(),
                detail: e.to_string(),
            };
        }
        StoreError::Backend(e.to_string())
    }
}

/// A pool error: no connection could be had.
pub(crate) fn pool_error(e: deadpool_postgres::PoolError) -> StoreError {
    match e {
        deadpool_postgres::PoolError::Backend(e) => StoreError::from(e),
        other => StoreError::Unreachable {
            target: "the PostgreSQL store".into(),
            detail: other.to_string(),
        },
    }
}

/// Set the target of an [`StoreError::Unreachable`] to `target`.
fn at(target: &str, e: StoreError) -> StoreError {
    match e {
        StoreError::Unreachable { detail, .. } => StoreError::Unreachable {
            target: target.to_string(),
            detail,
        },
        other => other,
    }
}

/// Rows of a prepared (cached) statement.
pub(crate) async fn query(
    c: &Conn,
    sql: &str,
    params: &[&(dyn ToSql + Sync)],
) -> Result<Vec<tokio_postgres::Row>, StoreError> {
    let st = c.prepare_cached(sql).await?;
    Ok(c.query(&st, params).await?)
}

/// At most one row of a prepared (cached) statement.
pub(crate) async fn query_opt(
    c: &Conn,
    sql: &str,
    params: &[&(dyn ToSql + Sync)],
) -> Result<Option<tokio_postgres::Row>, StoreError> {
    let st = c.prepare_cached(sql).await?;
    Ok(c.query_opt(&st, params).await?)
}

/// Rows changed by a prepared (cached) statement.
pub(crate) async fn execute(
    c: &Conn,
    sql: &str,
    params: &[&(dyn ToSql + Sync)],
) -> Result<u64, StoreError> {
    let st = c.prepare_cached(sql).await?;
    Ok(c.execute(&st, params).await?)
}

/// A column that should decode as `T`.
pub(crate) fn get<'a, T: tokio_postgres::types::FromSql<'a>>(
    r: &'a tokio_postgres::Row,
    i: usize,
) -> Result<T, StoreError> {
    r.try_get(i)
        .map_err(|e| StoreError::Decode(format!("column {i}: {e}")))
}

impl crate::decode::Cells for tokio_postgres::Row {
    fn cell<T: crate::decode::Column>(&self, i: usize) -> Result<T, StoreError> {
        get(self, i)
    }
}

/// A `u64` stored as BIGINT.
pub(crate) fn get_u64(r: &tokio_postgres::Row, i: usize) -> Result<u64, StoreError> {
    let v: i64 = get(r, i)?;
    u64::try_from(v).map_err(|_| StoreError::Decode(format!("negative value {v} in column {i}")))
}

/// A `u64` as BIGINT (saturating).
pub(crate) fn i64_of(v: u64) -> i64 {
    i64::try_from(v).unwrap_or(i64::MAX)
}

impl PgStore {
    /// Connect to `url` (see [`PgOptions`]), check the database is ours and
    /// bring its schema up to date under an advisory lock, and start this
    /// host's writer. Must run inside a tokio runtime (the writer and the
    /// lease renewal are tasks of it).
    ///
    /// # Errors
    /// [`StoreError::BadUrl`] (the string, a wrong user or password, a
    /// missing database), [`StoreError::Unreachable`] (no server there),
    /// [`StoreError::Foreign`], [`StoreError::TooNew`], or
    /// [`StoreError::Backend`]. Nothing is left half-migrated.
    pub async fn open(url: &str, options: &PgOptions) -> Result<PgStore, StoreError> {
        let t = target::Target::parse(url, options.connect_timeout)?;
        let shown = t.shown.clone();
        if let Some(name) = &options.chain
            && (name.is_empty()
                || name.len() > 64
                || !name
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_'))
        {
            return Err(StoreError::BadUrl {
                target: shown,
                detail: format!("`{name}` is not a chain name (ASCII letters, digits, - and _)"),
            });
        }
        let pool_of = |size: usize, wait: Duration| {
            let manager = Manager::from_config(
                t.config.clone(),
                tokio_postgres::NoTls,
                ManagerConfig {
                    recycling_method: RecyclingMethod::Fast,
                },
            );
            Pool::builder(manager)
                .max_size(size)
                .runtime(deadpool_postgres::Runtime::Tokio1)
                .wait_timeout(Some(wait))
                .create_timeout(Some(options.connect_timeout))
                .recycle_timeout(Some(options.connect_timeout))
                .build()
                .map_err(|e| StoreError::BadUrl {
                    target: shown.clone(),
                    detail: e.to_string(),
                })
        };
        let pool = pool_of(options.pool_size.max(2), Duration::from_secs(60))?;
        let lease_pool = pool_of(1, options.lease)?;
        let conn = pool
            .get()
            .await
            .map_err(|e| at(&shown, classify_connect(&shown, pool_error(e))))?;
        schema::bring_up_to_date(&conn, &shown)
            .await
            .map_err(|e| at(&shown, e))?;
        drop(conn);
        let writer = writer::Writer::start(pool.clone(), options.max_batch, options.chain.clone());
        Ok(PgStore {
            pool,
            lease_pool,
            writer,
            target: shown,
            options: options.clone(),
        })
    }

    /// The connection string as shown (no password).
    pub fn target(&self) -> &str {
        &self.target
    }

    /// The name of this store's chain of the log (`wal_log.chain`): every
    /// write of this opening appends to it.
    pub fn chain(&self) -> &str {
        self.writer.chain()
    }

    /// Transactions this host's writer committed so far.
    pub fn commits(&self) -> u64 {
        self.writer.commits()
    }

    /// Run `f` in this host's next write batch (see [`writer`]); its value
    /// once the batch is durable.
    pub(crate) async fn write<T, F>(&self, f: F) -> Result<T, StoreError>
    where
        F: for<'a> FnOnce(&'a Conn) -> writer::BoxFut<'a, T> + Send + 'static,
        T: Send + 'static,
    {
        self.writer.write(f).await.map_err(|e| at(&self.target, e))
    }

    /// A pooled connection for reads.
    pub(crate) async fn conn(&self) -> Result<deadpool_postgres::Object, StoreError> {
        self.pool
            .get()
            .await
            .map_err(|e| at(&self.target, pool_error(e)))
    }

    /// Measure the floor of the benchmark: one durable commit of one small
    /// row (an UPDATE of a counter in its own transaction), `n` times one
    /// after the other; the mean, in microseconds.
    ///
    /// # Errors
    /// [`StoreError`].
    pub async fn commit_floor_us(&self, n: u32) -> Result<f64, StoreError> {
        let c = self.conn().await?;
        c.batch_execute(
            "CREATE TABLE IF NOT EXISTS bench_floor (id INT PRIMARY KEY, n BIGINT NOT NULL);
             INSERT INTO bench_floor VALUES (1, 0) ON CONFLICT DO NOTHING",
        )
        .await?;
        let st = c
            .prepare_cached("UPDATE bench_floor SET n = n + 1 WHERE id = 1")
            .await?;
        let t0 = std::time::Instant::now();
        for _ in 0..n.max(1) {
            c.execute(&st, &[]).await?;
        }
        Ok(t0.elapsed().as_secs_f64() * 1e6 / f64::from(n.max(1)))
    }
}

/// An authentication failure or a missing database is the operator's
/// setting, not the network.
fn classify_connect(shown: &str, e: StoreError) -> StoreError {
    match e {
        StoreError::Backend(m)
            if m.contains("(28P01)") || m.contains("(28000)") || m.contains("(3D000)") =>
        {
            StoreError::BadUrl {
                target: shown.to_string(),
                detail: m,
            }
        }
        other => other,
    }
}

/// JSON text of a value (`null` if it cannot be serialised, which the
/// host's types never are).
pub(crate) fn to_json<T: serde::Serialize>(v: &T) -> String {
    serde_json::to_string(v).unwrap_or_else(|_| "null".into())
}
