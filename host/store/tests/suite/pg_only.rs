//! What only the PostgreSQL store has: its migrations and their refusals,
//! its connection errors, the batching writer, the lease. Against a real
//! server ([`capsaga_pg_harness`]); SKIPPED without PostgreSQL.

use super::{cluster, eventually, runtime};
use capsaga_store::postgres::schema::PG_SCHEMA_VERSION;
use capsaga_store::postgres::{PgOptions, PgStore};
use capsaga_store::*;
use std::sync::Arc;
use std::time::Duration;

fn skip(test: &str) -> Option<&'static capsaga_pg_harness::Cluster> {
    let c = cluster();
    if c.is_none() {
        eprintln!(
            "SKIPPED {test}: PostgreSQL is not installed (apt-get install postgresql; CI does)"
        );
    }
    c
}

fn db_name(url: &str) -> &str {
    url.rsplit('/').next().unwrap_or_default()
}

#[test]
fn many_hosts_migrate_one_fresh_database_once() {
    let Some(c) = skip("many_hosts_migrate_one_fresh_database_once") else {
        return;
    };
    let url = c.fresh_database().unwrap();
    runtime().block_on(async {
        let opens: Vec<_> = (0..6)
            .map(|_| {
                let url = url.clone();
                tokio::spawn(async move { PgStore::open(&url, &PgOptions::default()).await })
            })
            .collect();
        for o in opens {
            o.await.unwrap().expect("every host opens");
        }
        let s = PgStore::open(&url, &PgOptions::default()).await.unwrap();
        let conn = capsaga_store::test_support::pg_conn(&s).await.unwrap();
        let versions: Vec<i64> = conn
            .query("SELECT version FROM capsaga_schema ORDER BY version", &[])
            .await
            .unwrap()
            .iter()
            .map(|r| r.get(0))
            .collect();
        assert_eq!(versions, capsaga_store::test_support::versions());
        assert_eq!(versions.last(), Some(&PG_SCHEMA_VERSION));
    });
}

/// A database of migration 4 is brought to migration 5 (issue 45): each
/// saga gets the scope its origin tells for sure, the others none.
#[test]
fn migration_4_sagas_get_the_scope_their_origin_tells() {
    let Some(c) = skip("migration_4_sagas_get_the_scope_their_origin_tells") else {
        return;
    };
    let url = c.fresh_database().unwrap();
    let mut sql = capsaga_store::test_support::up_to(4);
    sql.push_str(capsaga_store::test_support::scopeless::ROWS);
    runtime().block_on(async {
        // As the store's own role (it must own the tables it migrates).
        let (client, connection) = tokio_postgres::connect(&url, tokio_postgres::NoTls)
            .await
            .unwrap();
        let driver = tokio::spawn(connection);
        client.batch_execute(&sql).await.unwrap();
        drop(client);
        let _ = driver.await;
        let s = PgStore::open(&url, &PgOptions::default()).await.unwrap();
        capsaga_store::test_support::scopeless::check(&s).await;
    });
}

#[test]
fn a_newer_or_foreign_database_is_refused_and_left_untouched() {
    let Some(c) = skip("a_newer_or_foreign_database_is_refused_and_left_untouched") else {
        return;
    };
    let newer = c.fresh_database().unwrap();
    let foreign = c.fresh_database().unwrap();
    c.psql(
        db_name(&foreign),
        "CREATE TABLE customers (id INT); INSERT INTO customers VALUES (1)",
    )
    .unwrap();
    runtime().block_on(async {
        drop(PgStore::open(&newer, &PgOptions::default()).await.unwrap());
    });
    c.psql(
        db_name(&newer),
        "INSERT INTO capsaga_schema (version) VALUES (99)",
    )
    .unwrap();
    runtime().block_on(async {
        let e = PgStore::open(&newer, &PgOptions::default())
            .await
            .unwrap_err();
        assert!(matches!(e, StoreError::TooNew { found: 99, .. }), "{e}");
        assert!(e.to_string().contains("upgrade capsaga"), "{e}");
        let e = PgStore::open(&foreign, &PgOptions::default())
            .await
            .unwrap_err();
        assert!(matches!(e, StoreError::Foreign { .. }), "{e}");
        assert!(!e.to_string().contains(c.password()), "{e}");
    });
    // Nothing was added to the foreign database.
    c.psql(
        db_name(&foreign),
        "DO $$ BEGIN IF (SELECT count(*) FROM information_schema.tables WHERE table_schema = 'public') <> 1 THEN RAISE EXCEPTION 'touched'; END IF; END $$",
    )
    .unwrap();
}

#[test]
fn connection_errors_are_clear_and_never_show_the_password() {
    let Some(c) = skip("connection_errors_are_clear_and_never_show_the_password") else {
        return;
    };
    let quick = PgOptions {
        connect_timeout: Duration::from_secs(2),
        ..PgOptions::default()
    };
    let closed_port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    runtime().block_on(async {
        // No server there.
        let e = PgStore::open(
            &format!("postgres://capsaga:hunter2-secret@127.0.0.1:{closed_port}/x"),
            &quick,
        )
        .await
        .unwrap_err();
        assert!(matches!(e, StoreError::Unreachable { .. }), "{e}");
        assert!(!e.to_string().contains("hunter2-secret"), "{e}");
        assert!(e.to_string().contains("127.0.0.1"), "{e}");
        // A wrong password: a setting, not the network.
        let e = PgStore::open(
            &format!(
                "postgres://capsaga:hunter2-secret@127.0.0.1:{}/postgres",
                c.port()
            ),
            &quick,
        )
        .await
        .unwrap_err();
        assert!(matches!(e, StoreError::BadUrl { .. }), "{e}");
        assert!(!e.to_string().contains("hunter2-secret"), "{e}");
        // A database that does not exist.
        let e = PgStore::open(&c.url("no_such_db"), &quick)
            .await
            .unwrap_err();
        assert!(matches!(e, StoreError::BadUrl { .. }), "{e}");
        assert!(!e.to_string().contains(c.password()), "{e}");
        // A string that does not parse.
        let e = PgStore::open("postgres://capsaga:hunter2-secret@[::1/x", &quick)
            .await
            .unwrap_err();
        assert!(matches!(e, StoreError::BadUrl { .. }), "{e}");
        assert!(!e.to_string().contains("hunter2-secret"), "{e}");
    });
}

#[test]
fn concurrent_writes_share_commits_and_a_failed_one_is_rolled_back_alone() {
    let Some(c) = skip("concurrent_writes_share_commits") else {
        return;
    };
    let url = c.fresh_database().unwrap();
    runtime().block_on(async {
        let batched = Arc::new(PgStore::open(&url, &PgOptions::default()).await.unwrap());
        let before = batched.commits();
        let writes: Vec<_> = (0..200)
            .map(|i| {
                let s = batched.clone();
                tokio::spawn(async move {
                    let saga = format!("g{i}");
                    s.create_saga(&NewSaga {
                        saga_id: &saga,
                        scope: Scope::Call,
                        label: "",
                        state: capsaga_core::fsm::State::Planning,
                        owner: "o",
                        plan: None,
                        principal: None,
                    })
                    .await
                })
            })
            .collect();
        for w in writes {
            w.await.unwrap().unwrap();
        }
        let used = batched.commits() - before;
        assert!(used < 200, "200 concurrent writes took {used} commits");
        // A duplicate saga id fails alone; the writes batched with it stay.
        let dup = batched.clone();
        let (a, b) = tokio::join!(
            dup.create_saga(&NewSaga {
                saga_id: "g0",
                scope: Scope::Call,
                label: "",
                state: capsaga_core::fsm::State::Planning,
                owner: "o",
                plan: None,
                principal: None,
            }),
            batched.record_spend("2026-03-03", 1.0, 1, 1)
        );
        assert!(a.is_err());
        b.unwrap();
        assert_eq!(batched.sagas(1000).await.unwrap().len(), 200);
        assert!(audit::verify(&*batched, None).await.unwrap().ok());
        // Without batching every write is its own commit.
        let single = PgStore::open(
            &url,
            &PgOptions {
                max_batch: 1,
                ..PgOptions::default()
            },
        )
        .await
        .unwrap();
        let before = single.commits();
        for i in 0..5 {
            single
                .record_spend(&format!("d{i}"), 1.0, 0, 0)
                .await
                .unwrap();
        }
        assert_eq!(single.commits() - before, 5);
    });
}

#[test]
fn a_lease_that_expired_is_lost_and_never_renewed() {
    let Some(c) = skip("a_lease_that_expired_is_lost_and_never_renewed") else {
        return;
    };
    let url = c.fresh_database().unwrap();
    runtime().block_on(async {
        let o = PgOptions {
            lease: Duration::from_millis(1000),
            ..PgOptions::default()
        };
        let s = Arc::new(PgStore::open(&url, &o).await.unwrap());
        let lease = s.register_owner().await.unwrap();
        lease.set_policy_hash("abc");
        let id = lease.id().to_string();
        eventually(Duration::from_secs(10), "the policy hash is published", || {
            let s = s.clone();
            async move {
                s.live_owners()
                    .await
                    .unwrap()
                    .iter()
                    .any(|h| h.policy_sha256.as_deref() == Some("abc"))
            }
        })
        .await;
        // Alive across several lease periods: it is renewed.
        let t0 = std::time::Instant::now();
        while t0.elapsed() < Duration::from_millis(2500) {
            assert!(s.owner_alive(&id).await.unwrap());
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        // Expire it behind its back (as a host cut off for longer than its
        // lease finds it): the holder learns it lost it, and never renews.
        let conn = capsaga_store::test_support::pg_conn(&s).await.unwrap();
        conn.execute(
            "UPDATE hosts SET expires_at = clock_timestamp() - interval '1 second' WHERE owner_id = $1",
            &[&id],
        )
        .await
        .unwrap();
        let mut lost = lease.lost();
        tokio::time::timeout(Duration::from_secs(10), lost.wait_for(|l| *l))
            .await
            .expect("the lease is lost within a renewal period")
            .unwrap();
        tokio::time::sleep(Duration::from_millis(500)).await;
        assert!(!s.owner_alive(&id).await.unwrap(), "an expired lease stays expired");
    });
}

/// A host frozen past its lease (SIGSTOP, a frozen VM: here its runtime's
/// one thread blocked) gives its lease up as soon as it runs again, from
/// its own clock, before any round trip: even when the database would
/// still renew it (its row pushed an hour ahead before the freeze), it
/// cannot know whether another host took its sagas meanwhile (issue 48).
#[test]
fn a_host_frozen_past_its_lease_gives_it_up_on_waking_without_asking_the_database() {
    let Some(c) =
        skip("a_host_frozen_past_its_lease_gives_it_up_on_waking_without_asking_the_database")
    else {
        return;
    };
    let url = c.fresh_database().unwrap();
    let o = PgOptions {
        lease: Duration::from_millis(1000),
        ..PgOptions::default()
    };
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a runtime");
    rt.block_on(async {
        let s = PgStore::open(&url, &o).await.unwrap();
        let lease = s.register_owner().await.unwrap();
        let conn = capsaga_store::test_support::pg_conn(&s).await.unwrap();
        conn.execute(
            "UPDATE hosts SET expires_at = clock_timestamp() + interval '1 hour' WHERE owner_id = $1",
            &[&lease.id()],
        )
        .await
        .unwrap();
        // Frozen: nothing of this runtime runs for longer than the lease.
        std::thread::sleep(o.lease * 2);
        let mut lost = lease.lost();
        tokio::time::timeout(Duration::from_secs(30), lost.wait_for(|l| *l))
            .await
            .expect("the lease is lost on waking")
            .unwrap();
    });
}
