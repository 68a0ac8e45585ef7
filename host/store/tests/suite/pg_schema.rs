//! The PostgreSQL schema's migrations: the numbered files exactly what each
//! released migration was, and a database left at every older migration
//! brought at open to the schema of a new one. Against a real server
//! ([`capsaga_pg_harness`]); SKIPPED without PostgreSQL.

use super::{cluster, runtime};
use capsaga_store::postgres::schema::PG_SCHEMA_VERSION;
use capsaga_store::postgres::{PgOptions, PgStore};
use capsaga_store::test_support::up_to;
use sha2::{Digest, Sha256};

/// SHA-256 of [`up_to`]`(8)`: migrations 1 to 8 as released (main fa6d0bf,
/// before they moved into numbered files). A released migration never
/// changes; a new one is a new file.
const RELEASED_1_TO_8: &str = "d676bdf2495e231ae1898ac34b9450cb9800d90bec63a4ac34fe4ab691584460";

/// SHA-256 of [`up_to`]`(9)`: with migration 9 (issue 48, `charged` of
/// `budget_reservations`, `chained` of `mcp_tasks`) as released.
const RELEASED_1_TO_9: &str = "3b9428ca39ba04fd7d0fdbb63ce9a639047c8ce30df43d863b746293312616c2";

#[test]
fn the_released_migrations_are_unchanged() {
    assert_eq!(
        hex::encode(Sha256::digest(up_to(8).as_bytes())),
        RELEASED_1_TO_8
    );
    assert_eq!(
        hex::encode(Sha256::digest(up_to(9).as_bytes())),
        RELEASED_1_TO_9
    );
}

/// The catalog of the database's `public` schema: columns, indexes,
/// triggers, functions and sequences, sorted.
async fn catalog(c: &tokio_postgres::Client) -> Vec<String> {
    let mut out = Vec::new();
    for sql in [
        "SELECT table_name || '.' || column_name || ' ' || data_type || ' ' || is_nullable || ' ' || coalesce(column_default, '') FROM information_schema.columns WHERE table_schema = 'public' AND table_name <> 'capsaga_schema' ORDER BY 1",
        "SELECT indexdef FROM pg_indexes WHERE schemaname = 'public' ORDER BY 1",
        "SELECT pg_get_triggerdef(oid) FROM pg_trigger WHERE NOT tgisinternal ORDER BY 1",
        "SELECT p.proname || ' ' || md5(p.prosrc) FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace WHERE n.nspname = 'public' ORDER BY 1",
        "SELECT sequence_name FROM information_schema.sequences WHERE sequence_schema = 'public' ORDER BY 1",
        "SELECT conname || ' ' || pg_get_constraintdef(oid) FROM pg_constraint WHERE connamespace = 'public'::regnamespace ORDER BY 1",
    ] {
        for r in c.query(sql, &[]).await.unwrap() {
            out.push(r.get::<_, String>(0));
        }
    }
    out
}

async fn connect(url: &str) -> (tokio_postgres::Client, tokio::task::JoinHandle<()>) {
    let (client, connection) = tokio_postgres::connect(url, tokio_postgres::NoTls)
        .await
        .unwrap();
    let driver = tokio::spawn(async move {
        let _ = connection.await;
    });
    (client, driver)
}

#[test]
fn a_database_of_every_older_migration_upgrades_to_the_current_schema() {
    let Some(c) = cluster() else {
        eprintln!(
            "SKIPPED a_database_of_every_older_migration_upgrades_to_the_current_schema: PostgreSQL is not installed"
        );
        return;
    };
    runtime().block_on(async {
        let fresh = c.fresh_database().unwrap();
        drop(PgStore::open(&fresh, &PgOptions::default()).await.unwrap());
        let (client, _driver) = connect(&fresh).await;
        let want = catalog(&client).await;
        assert!(want.iter().any(|l| l.starts_with("mcp_tasks.")), "{want:?}");
        for v in 1..PG_SCHEMA_VERSION {
            let url = c.fresh_database().unwrap();
            // As the store's own role (it must own the tables it migrates).
            let (client, _driver) = connect(&url).await;
            client
                .batch_execute(&up_to(usize::try_from(v).unwrap()))
                .await
                .unwrap();
            drop(PgStore::open(&url, &PgOptions::default()).await.unwrap());
            assert_eq!(
                catalog(&client).await,
                want,
                "a database of migration {v} upgraded"
            );
        }
    });
}

/// A task of a database at migration 8 (before the tasks joined the log)
/// is left out of `audit verify`'s replay after the upgrade and joins the
/// log at its next change; an unsettled reservation of that database is
/// charged once it expired, as any other.
#[test]
fn a_task_and_a_reservation_of_migration_8_are_kept_by_the_upgrade() {
    use super::{pre_upgrade_rows, pre_upgrade_rows_are_kept};
    let Some(c) = cluster() else {
        eprintln!(
            "SKIPPED a_task_and_a_reservation_of_migration_8_are_kept_by_the_upgrade: PostgreSQL is not installed"
        );
        return;
    };
    runtime().block_on(async {
        let url = c.fresh_database().unwrap();
        let (client, _driver) = connect(&url).await;
        let rows = pre_upgrade_rows("clock_timestamp()");
        client
            .batch_execute(&format!("{}\n{rows}", up_to(8)))
            .await
            .unwrap();
        let s = PgStore::open(&url, &PgOptions::default()).await.unwrap();
        pre_upgrade_rows_are_kept(&s).await;
    });
}
