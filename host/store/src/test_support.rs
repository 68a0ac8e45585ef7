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

pub use crate::upgrade_fixture::{pre_upgrade_rows, pre_upgrade_rows_are_kept};
