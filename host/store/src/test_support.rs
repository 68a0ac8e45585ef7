//! What the both-backends suite (`host/store/tests/suite/`) reads past the
//! store traits: raw connections (rows no trait reports, databases as an
//! older capsaga left them), the migrations' SQL and scope-less rows.
//! Compiled in the store's unit tests and under the `test-support`
//! feature, which the store's own tests enable (the store is its own
//! dev-dependency) and no product crate does (checked by
//! `tests/tests/architecture/`).

use crate::StoreError;
use crate::sqlite::SqliteStore;
use rusqlite::Connection;

pub use crate::rows::scopeless;

/// Run `f` on `store`'s reading connection (see `SqliteStore::read`: no
/// read transaction may outlive `f`).
///
/// # Errors
/// Whatever `f` returns; [`StoreError::Backend`] for a transaction left
/// open.
pub fn sqlite_read<T>(
    store: &SqliteStore,
    f: impl FnOnce(&Connection) -> Result<T, StoreError>,
) -> Result<T, StoreError> {
    store.read(f)
}

/// A pooled connection of `store`, past the traits.
///
/// # Errors
/// [`StoreError`] when the pool gives none.
#[cfg(feature = "postgres")]
pub async fn pg_conn(
    store: &crate::postgres::PgStore,
) -> Result<deadpool_postgres::Object, StoreError> {
    store.conn().await
}

/// The versions of the migrations this capsaga knows, in order.
#[cfg(feature = "postgres")]
pub fn versions() -> Vec<i64> {
    crate::postgres::schema::migrations()
        .into_iter()
        .map(|(v, _)| v)
        .collect()
}

/// The SQL of migrations 1 to `version`, and the table that records them,
/// for tests that need a database as an older capsaga left it.
#[cfg(feature = "postgres")]
pub fn up_to(version: usize) -> String {
    let mut sql = String::from(
        "CREATE TABLE capsaga_schema (version BIGINT PRIMARY KEY, applied_at TIMESTAMPTZ NOT NULL DEFAULT clock_timestamp());\n",
    );
    for (v, m) in crate::postgres::schema::migrations()
        .into_iter()
        .filter(|(v, _)| *v <= version as i64)
    {
        sql.push_str(&m);
        sql.push_str(&format!(
            "\nINSERT INTO capsaga_schema (version) VALUES ({v});\n"
        ));
    }
    sql
}

/// Rows an older schema held (SQLite 14, PostgreSQL migration 8: before
/// issue 48's `chained` and `charged`), inserted by the upgrade tests
/// before the store opens: a task `old` and a reservation of $0.50 on
/// 2026-12-01 already expired (`expired`: the dialect's expiry value).
pub fn pre_upgrade_rows(expired: &str) -> String {
    let at = "2026-12-01T00:00:00.000Z";
    format!(
        "INSERT INTO mcp_tasks (task_id, principal, status, created_at, updated_at) VALUES ('old', 'token:bob', 'working', '{at}', '{at}');
         INSERT INTO budget_reservations (id, day, usd, holder, created_at, expires_at) VALUES ('r', '2026-12-01', 0.5, 'p/m', '{at}', {expired});"
    )
}

/// What the upgrade keeps of [`pre_upgrade_rows`]: the log verifies (the
/// task is left out of the replay), the task joins the log at its next
/// change and still verifies, and the expired reservation is charged as
/// spent by the next reservation (which it then refuses under a $1 cap).
///
/// # Panics
/// When the upgrade lost or changed what it should keep (a test's failure).
pub async fn pre_upgrade_rows_are_kept(s: &dyn crate::Store) {
    use crate::{NewReservation, Reserved, audit};
    assert!(audit::verify(s, None).await.unwrap().ok());
    let mut t = s.task("old").await.unwrap().unwrap();
    t.status = "completed".into();
    assert!(s.put_task(&t).await.unwrap());
    let r = audit::verify(s, None).await.unwrap();
    assert!(r.ok(), "{r:?}");
    let next = NewReservation {
        id: "n",
        day: "2026-12-01",
        usd: 0.6,
        day_hard_usd: Some(1.0),
        ttl_ms: 60_000,
        holder: "p/m",
    };
    assert!(matches!(
        s.reserve_spend(&next).await.unwrap(),
        Reserved::Refused { .. }
    ));
    assert!((s.day_spent("2026-12-01").await.unwrap() - 0.5).abs() < 1e-12);
}
