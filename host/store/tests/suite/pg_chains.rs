//! The PostgreSQL log's chains from the attacker's side: one chain per
//! writer, anchored to each other, and what `audit verify` reports when
//! someone with write access to the database deletes, truncates, moves or
//! reorders rows. Against a real server; SKIPPED without PostgreSQL.

use super::steps::{key, out, saga, step};
use super::{cluster, runtime};
use capsaga_store::audit::{self, AuditReport};
use capsaga_store::postgres::{PgOptions, PgStore};
use capsaga_store::*;
use serde_json::json;
use std::sync::Arc;

/// Saga `id` on `s`: created, `n` steps begun and committed, done.
async fn run_saga(s: &PgStore, id: &str, n: u64) {
    saga(s, id, "o").await;
    for i in 0..n {
        let args = json!({"i": i});
        let k = format!("{id}-{i}");
        s.begin_step(&step(id, i, &k, &args, 1)).await.unwrap();
        s.commit_step(key(id, 1, i), &out(json!(i))).await.unwrap();
    }
}

/// Two hosts' chains on a fresh database: `a` wrote two sagas, then `b`
/// (whose first batch anchors `a`'s head) one. The SQL connection is `a`'s.
async fn two_chains(url: &str) -> (Arc<PgStore>, Arc<PgStore>) {
    let a = Arc::new(PgStore::open(url, &PgOptions::default()).await.unwrap());
    run_saga(&a, "a1", 3).await;
    run_saga(&a, "a2", 2).await;
    let b = Arc::new(PgStore::open(url, &PgOptions::default()).await.unwrap());
    run_saga(&b, "b1", 1).await;
    let r = audit::verify(&*b, None).await.unwrap();
    assert!(r.ok(), "{r:?}");
    (a, b)
}

async fn sql(s: &PgStore, q: &str) {
    capsaga_store::test_support::pg_conn(s)
        .await
        .unwrap()
        .batch_execute(q)
        .await
        .unwrap();
}

fn checks(r: &AuditReport) -> Vec<&'static str> {
    r.findings.iter().map(|f| f.check).collect()
}

fn skip(test: &str) -> Option<String> {
    let Some(c) = cluster() else {
        eprintln!(
            "SKIPPED {test}: PostgreSQL is not installed (apt-get install postgresql; CI does)"
        );
        return None;
    };
    Some(c.fresh_database().unwrap())
}

#[test]
fn each_host_appends_to_its_own_chain_and_anchors_the_others() {
    let Some(url) = skip("each_host_appends_to_its_own_chain") else {
        return;
    };
    runtime().block_on(async {
        let (a, b) = two_chains(&url).await;
        assert_ne!(a.chain(), b.chain());
        let chains = b.chains().await.unwrap();
        let names: Vec<&str> = chains.iter().map(|c| c.name.as_str()).collect();
        assert!(
            names.contains(&a.chain()) && names.contains(&b.chain()),
            "{names:?}"
        );
        let of_a = chains.iter().find(|c| c.name == a.chain()).unwrap();
        assert!(of_a.rows.iter().all(|r| r.saga_id.starts_with("a")));
        assert_eq!(
            of_a.head.as_ref().map(|h| h.0),
            of_a.rows.last().map(|r| r.seq)
        );
        // b's first batch anchored a's head.
        let of_b = chains.iter().find(|c| c.name == b.chain()).unwrap();
        let anchor = of_b
            .rows
            .iter()
            .find(|r| r.record == audit::ANCHOR)
            .expect("an anchor in b's chain");
        assert_eq!(anchor.detail["heads"][0]["chain"], a.chain());
        assert_eq!(
            anchor.detail["heads"][0]["seq"],
            json!(of_a.rows.last().unwrap().seq)
        );
    });
}

#[test]
fn a_row_deleted_from_one_hosts_chain_is_found() {
    let Some(url) = skip("a_row_deleted_from_one_hosts_chain_is_found") else {
        return;
    };
    runtime().block_on(async {
        let (a, b) = two_chains(&url).await;
        let middle = a
            .log(Some("a1"))
            .await
            .unwrap()
            .into_iter()
            .nth(2)
            .unwrap()
            .seq;
        sql(&a, &format!("DELETE FROM wal_log WHERE seq = {middle}")).await;
        let r = audit::verify(&*b, None).await.unwrap();
        assert!(checks(&r).contains(&"chain"), "{r:?}");
        let f = r.findings.iter().find(|f| f.check == "chain").unwrap();
        assert!(f.reason.contains(a.chain()), "{f:?}");
    });
}

#[test]
fn a_chain_cut_short_with_its_head_moved_back_is_found_by_the_anchor() {
    let Some(url) = skip("a_chain_cut_short") else {
        return;
    };
    runtime().block_on(async {
        let (a, b) = two_chains(&url).await;
        // The newest row of a's chain deleted and a's head moved back to
        // the row before: a's chain alone verifies.
        let rows = &b
            .chains()
            .await
            .unwrap()
            .into_iter()
            .find(|c| c.name == a.chain())
            .unwrap()
            .rows;
        let (last, before) = (&rows[rows.len() - 1], &rows[rows.len() - 2]);
        sql(
            &a,
            &format!(
                "DELETE FROM wal_log WHERE seq = {}; UPDATE wal_chains SET seq = {}, hash = '{}' WHERE chain = '{}'",
                last.seq,
                before.seq,
                before.hash,
                a.chain()
            ),
        )
        .await;
        let r = audit::verify(&*b, None).await.unwrap();
        assert!(!checks(&r).contains(&"chain"), "{r:?}");
        let f = r.findings.iter().find(|f| f.check == "anchor").expect("found by the anchor");
        assert_eq!(f.seq, Some(last.seq), "{f:?}");
    });
}

#[test]
fn a_hosts_chain_deleted_whole_is_found_by_the_anchor() {
    let Some(url) = skip("a_hosts_chain_deleted_whole") else {
        return;
    };
    runtime().block_on(async {
        let (a, b) = two_chains(&url).await;
        sql(
            &a,
            &format!(
                "DELETE FROM wal_log WHERE chain = '{0}'; DELETE FROM wal_chains WHERE chain = '{0}'",
                a.chain()
            ),
        )
        .await;
        let r = audit::verify(&*b, None).await.unwrap();
        assert!(checks(&r).contains(&"anchor"), "{r:?}");
    });
}

#[test]
fn rows_moved_between_chains_or_reordered_are_found() {
    let Some(url) = skip("rows_moved_between_chains_or_reordered") else {
        return;
    };
    runtime().block_on(async {
        // A row of a's chain relabelled as b's.
        let (a, b) = two_chains(&url).await;
        let first = a.log(Some("a2")).await.unwrap()[0].seq;
        sql(
            &a,
            &format!("UPDATE wal_log SET chain = '{}' WHERE seq = {first}", b.chain()),
        )
        .await;
        let r = audit::verify(&*b, None).await.unwrap();
        assert!(checks(&r).contains(&"chain"), "{r:?}");

        // Two rows of different chains swapped in the shared order (so that
        // replay would read another last state): their hashes cover it.
        let url = cluster().unwrap().fresh_database().unwrap();
        let (a, b) = two_chains(&url).await;
        let x = a.log(Some("a2")).await.unwrap().last().unwrap().seq;
        let y = b.log(Some("b1")).await.unwrap()[0].seq;
        sql(
            &a,
            &format!(
                "UPDATE wal_log SET seq = -1 WHERE seq = {x}; UPDATE wal_log SET seq = {x} WHERE seq = {y}; UPDATE wal_log SET seq = {y} WHERE seq = -1"
            ),
        )
        .await;
        let r = audit::verify(&*b, None).await.unwrap();
        assert!(checks(&r).contains(&"chain"), "{r:?}");
    });
}

/// A database an older capsaga (PostgreSQL migration 2: one chain, its head
/// in `wal_head`) wrote to is brought to migration 3: its rows become the
/// chain `''`, verified as before (numbered without a gap), beside the new
/// writers' chains; a row deleted from it is still found.
#[test]
fn a_one_chain_log_of_migration_2_verifies_beside_the_new_chains() {
    let Some(url) = skip("a_one_chain_log_of_migration_2") else {
        return;
    };
    runtime().block_on(async {
        let (client, connection) = tokio_postgres::connect(&url, tokio_postgres::NoTls)
            .await
            .unwrap();
        let driver = tokio::spawn(connection);
        client
            .batch_execute(&capsaga_store::test_support::up_to(2))
            .await
            .unwrap();
        // Three records as migration 2's writer chained them: a saga
        // created, nothing else (so the replay agrees with the tables).
        let mut prev = capsaga_core::wal_row::GENESIS.to_string();
        let at = "2026-12-01T00:00:00.000Z";
        client
            .execute(
                "INSERT INTO saga_state (saga_id, state, origin, created_at, updated_at) VALUES ('old', 'Done', 'call', $1, $1)",
                &[&at],
            )
            .await
            .unwrap();
        for (seq, state) in [(1i64, "Planning"), (2, "Acting"), (3, "Done")] {
            let detail = json!({ "state": state });
            let hash =
                capsaga_core::wal_row::row_hash(&prev, seq, "old", None, "STATE", &detail, at);
            client
                .execute(
                    "INSERT INTO wal_log (seq, saga_id, step_seq, record, detail, at, prev_hash, hash) VALUES ($1, 'old', NULL, 'STATE', $2, $3, $4, $5)",
                    &[&seq, &detail.to_string(), &at, &prev, &hash],
                )
                .await
                .unwrap();
            client
                .execute("UPDATE wal_head SET seq = $1, hash = $2 WHERE id = 1", &[&seq, &hash])
                .await
                .unwrap();
            prev = hash;
        }
        drop(client);
        let _ = driver.await;

        let s = PgStore::open(&url, &PgOptions::default()).await.unwrap();
        run_saga(&s, "new", 2).await;
        let r = audit::verify(&s, None).await.unwrap();
        assert!(r.ok(), "{r:?}");
        let chains = s.chains().await.unwrap();
        let old = chains.iter().find(|c| c.name.is_empty()).expect("the old chain");
        assert_eq!(old.rows.iter().map(|r| r.seq).collect::<Vec<_>>(), [1, 2, 3]);
        assert_eq!(old.head.as_ref().map(|h| h.0), Some(3));
        // The new rows come after the old ones in the shared order.
        let new = chains.iter().find(|c| c.name == s.chain()).unwrap();
        assert!(new.rows.iter().all(|r| r.seq > 3));
        // Tampering with the old chain is found as before.
        sql(&s, "DELETE FROM wal_log WHERE seq = 2").await;
        let r = audit::verify(&s, None).await.unwrap();
        let f = r.findings.iter().find(|f| f.check == "chain").expect("found");
        assert_eq!(f.seq, Some(2), "{f:?}");
    });
}
