//! What the both-backends suite (`host/store/tests/suite/`) reads past the
//! store traits: raw connections (rows no trait reports, databases as an
//! older capsaga left them) and the migrations' SQL. Compiled in the
//! store's unit tests and with
//! the `test-support` feature, which the store's own tests enable (the
//! store is its own dev-dependency) and no product crate does (checked by
//! `tests/tests/architecture/`).

use crate::StoreError;
use crate::sqlite::SqliteStore;
use rusqlite::Connection;

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

/// Sagas as a store without scopes recorded them, and the scope each one
/// gets from the migration that adds them (SQLite 11, PostgreSQL 5): the
/// tests of both back ends' migrations.
pub mod scopeless {
    use crate::SagaStore;
    use capsaga_core::scope::Scope;

    /// The rows, as SQL both back ends take.
    pub const ROWS: &str = "INSERT INTO saga_state (saga_id, state, origin, created_at, updated_at, released_at) VALUES
        ('p', 'AwaitingApproval', 'plan', 't', 't', NULL),
        ('c', 'Done', 'call', 't', 't', NULL),
        ('h', 'Acting', 'mcp', 't', 't', 't'),
        ('s', 'Acting', 'mcp', 't', 't', NULL),
        ('a', 'Done', 'agent', 't', 't', NULL);";

    /// Check the scopes `store` reads back for [`ROWS`].
    pub async fn check(store: &dyn SagaStore) {
        for (id, scope) in [
            ("p", Some(Scope::Plan)),
            ("c", Some(Scope::Call)),
            ("h", Some(Scope::Handle)),
            ("s", None),
            ("a", None),
        ] {
            let row = store.saga(id).await.expect("the saga reads back");
            assert_eq!(row.expect("the saga").scope, scope, "{id}");
        }
    }
}
