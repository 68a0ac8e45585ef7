//! The store test suite, run against both back ends: every test here is
//! written once, against the [`Store`] traits, and instantiated for SQLite
//! (a real file in a temp dir) and for PostgreSQL (a real server started by
//! [`capsaga_pg_harness`], a fresh database per test) by [`suite!`],
//! so the two implementations cannot drift apart. "Two hosts" are two
//! stores opened on the same file or database, as two processes would.
//!
//! Without PostgreSQL installed the PostgreSQL half of each test prints
//! `SKIPPED` and returns (CI installs it: `.ci/run`).
#![cfg(feature = "postgres")]

mod access;
mod budget;
mod claims;
mod doubt;
mod handles;
mod hosts;
mod neurons;
mod pg_chains;
mod pg_only;
mod pg_schema;
mod steps;
mod tasks;

use capsaga_pg_harness::Cluster;
use capsaga_store::postgres::{PgOptions, PgStore};
use capsaga_store::sqlite::SqliteStore;
use capsaga_store::{Store, test_support};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

/// One back end's database, and how to open more stores on it.
pub(crate) enum Db {
    Sqlite(tempfile::TempDir),
    Postgres(String),
}

impl Db {
    /// Another store (another "host") on the same database.
    pub async fn open(&self) -> Arc<dyn Store> {
        match self {
            Db::Sqlite(dir) => Arc::new(
                SqliteStore::open(&dir.path().join("state.db")).expect("the SQLite store opens"),
            ),
            Db::Postgres(url) => Arc::new(
                PgStore::open(url, &options())
                    .await
                    .expect("the PostgreSQL store opens"),
            ),
        }
    }

    /// The rows of `table` (a name the suite writes, never input), read
    /// past the traits: what no trait reports (e.g. swept rows).
    pub async fn count_rows(&self, table: &str) -> i64 {
        let sql = format!("SELECT count(*) FROM {table}");
        match self {
            Db::Sqlite(dir) => test_support::sqlite_read(
                &SqliteStore::open(&dir.path().join("state.db")).expect("the SQLite store opens"),
                |c| Ok(c.query_row(&sql, [], |r| r.get(0))?),
            )
            .expect("a count"),
            Db::Postgres(url) => {
                let s = PgStore::open(url, &options())
                    .await
                    .expect("the PostgreSQL store opens");
                let c = test_support::pg_conn(&s).await.expect("a connection");
                c.query_one(sql.as_str(), &[])
                    .await
                    .expect("a count")
                    .get(0)
            }
        }
    }

    /// Run `sql` (the suite's own statements, never input) past the
    /// traits and the log, as someone with write access to the database
    /// would: to tamper with a table.
    pub async fn tamper(&self, sql: &str) {
        match self {
            Db::Sqlite(dir) => rusqlite::Connection::open(dir.path().join("state.db"))
                .expect("the file opens")
                .execute_batch(sql)
                .expect("the statements run"),
            Db::Postgres(url) => {
                let s = PgStore::open(url, &options())
                    .await
                    .expect("the PostgreSQL store opens");
                let c = test_support::pg_conn(&s).await.expect("a connection");
                c.batch_execute(sql).await.expect("the statements run");
            }
        }
    }

    /// The SQLite file's bytes (what a thief of the file gets); `None` for
    /// PostgreSQL.
    pub fn sqlite_bytes(&self) -> Option<Vec<u8>> {
        match self {
            Db::Sqlite(dir) => Some(std::fs::read(dir.path().join("state.db")).expect("the file")),
            Db::Postgres(_) => None,
        }
    }

    /// Which back end.
    pub fn name(&self) -> &'static str {
        match self {
            Db::Sqlite(_) => "sqlite",
            Db::Postgres(_) => "postgres",
        }
    }
}

/// The options of the suite's PostgreSQL stores: a 2 s lease.
pub(crate) fn options() -> PgOptions {
    PgOptions {
        lease: Duration::from_secs(2),
        ..PgOptions::default()
    }
}

/// The cluster of this test binary, started on first use (stopped and
/// removed when the binary exits, by the harness's guardian).
pub(crate) fn cluster() -> Option<&'static Cluster> {
    static CLUSTER: OnceLock<Option<Cluster>> = OnceLock::new();
    CLUSTER
        .get_or_init(|| match Cluster::start() {
            Ok(c) => c,
            Err(e) => panic!("PostgreSQL is installed but did not start: {e}"),
        })
        .as_ref()
}

/// A fresh SQLite database.
pub(crate) fn sqlite() -> Db {
    Db::Sqlite(tempfile::tempdir().expect("tempdir"))
}

/// A fresh PostgreSQL database, or None (said SKIPPED) without PostgreSQL.
pub(crate) fn postgres(test: &str) -> Option<Db> {
    let Some(c) = cluster() else {
        eprintln!(
            "SKIPPED {test} on PostgreSQL: PostgreSQL is not installed (apt-get install postgresql; CI does)"
        );
        return None;
    };
    Some(Db::Postgres(c.fresh_database().expect("a fresh database")))
}

/// A multi-threaded runtime for one test (the PostgreSQL store's writer and
/// lease renewal are tasks on it).
pub(crate) fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("a runtime")
}

/// Instantiate `async fn name(db: &Db)` tests for both back ends, as
/// `name::sqlite` and `name::postgres`.
macro_rules! suite {
    ($($name:ident),* $(,)?) => {
        $(
            mod $name {
                #[test]
                fn sqlite() {
                    let db = crate::sqlite();
                    crate::runtime().block_on(super::$name(&db));
                }

                #[test]
                fn postgres() {
                    if let Some(db) = crate::postgres(concat!(module_path!())) {
                        crate::runtime().block_on(super::$name(&db));
                    }
                }
            }
        )*
    };
}
pub(crate) use suite;

/// Poll `cond` every 20 ms until it holds, at most `within`.
pub(crate) async fn eventually<F, Fut>(within: Duration, what: &str, mut cond: F)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let t0 = std::time::Instant::now();
    while !cond().await {
        assert!(t0.elapsed() < within, "not within {within:?}: {what}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

pub(crate) use capsaga_store::test_support::{pre_upgrade_rows, pre_upgrade_rows_are_kept};
