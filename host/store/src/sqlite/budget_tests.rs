//! Reservations over a real SQLite file: admission against the day's hard
//! cap counting reservations in flight, settlement, expiry, concurrent
//! callers on several store handles (as several processes hold them), and
//! the ledger surviving a reopen.

use super::super::*;
use super::*;

fn block<F: std::future::Future>(f: F) -> F::Output {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime")
        .block_on(f)
}

fn res<'a>(id: &'a str, usd: f64, cap: Option<f64>) -> NewReservation<'a> {
    NewReservation {
        id,
        day: "2026-12-01",
        usd,
        day_hard_usd: cap,
        ttl_ms: 60_000,
        holder: "test/model",
    }
}

#[test]
fn reserve_refuse_settle_and_survive_a_reopen() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("state.db");
    let db = SqliteStore::open(&p).unwrap();
    block(async {
        let cap = Some(1.0);
        assert_eq!(
            db.reserve_spend(&res("a", 0.6, cap)).await.unwrap(),
            Reserved::Made
        );
        // Spent 0, reserved 0.6: 0.5 more would pass the cap.
        assert_eq!(
            db.reserve_spend(&res("b", 0.5, cap)).await.unwrap(),
            Reserved::Refused {
                spent_usd: 0.0,
                reserved_usd: 0.6
            }
        );
        assert_eq!(
            db.reserve_spend(&res("c", 0.4, cap)).await.unwrap(),
            Reserved::Made
        );
        assert!((db.day_reserved("2026-12-01").await.unwrap() - 1.0).abs() < 1e-12);
        // Settled below the estimate: the difference is free again.
        db.settle_spend("a", "2026-12-01", 0.1, 1000, 10)
            .await
            .unwrap();
        db.settle_spend("c", "2026-12-01", 0.05, 500, 5)
            .await
            .unwrap();
        assert!((db.day_spent("2026-12-01").await.unwrap() - 0.15).abs() < 1e-12);
        assert_eq!(db.day_reserved("2026-12-01").await.unwrap(), 0.0);
        assert_eq!(
            db.reserve_spend(&res("d", 0.85, cap)).await.unwrap(),
            Reserved::Made
        );
        // A call that sent nothing releases its reservation, uncounted.
        db.settle_spend("d", "2026-12-01", 0.0, 0, 0).await.unwrap();
        // No cap: always.
        assert_eq!(
            db.reserve_spend(&res("e", 1e9, None)).await.unwrap(),
            Reserved::Made
        );
        db.settle_spend("e", "2026-12-01", 0.0, 0, 0).await.unwrap();
        // A duplicate id is an error, not a second reservation.
        assert_eq!(
            db.reserve_spend(&res("f", 0.1, cap)).await.unwrap(),
            Reserved::Made
        );
        assert!(db.reserve_spend(&res("f", 0.1, cap)).await.is_err());
    });
    drop(db);
    let db = SqliteStore::open(&p).unwrap();
    block(async {
        let days = db.budget_days(5).await.unwrap();
        assert_eq!(days.len(), 1);
        assert_eq!((days[0].calls, days[0].input_tokens), (2, 1500));
        assert!((days[0].spent_usd - 0.15).abs() < 1e-12);
        assert!((days[0].reserved_usd - 0.1).abs() < 1e-12, "{days:?}");
        // The ledger survived: 0.15 spent + 0.1 reserved, 0.8 more passes 1.0.
        assert!(matches!(
            db.reserve_spend(&res("g", 0.8, Some(1.0))).await.unwrap(),
            Reserved::Refused { .. }
        ));
    });
}

#[test]
fn an_expired_reservation_stops_counting_and_is_swept() {
    let dir = tempfile::tempdir().unwrap();
    let db = SqliteStore::open(&dir.path().join("state.db")).unwrap();
    block(async {
        let mut dead = res("dead", 0.9, Some(1.0));
        dead.ttl_ms = 0;
        assert_eq!(db.reserve_spend(&dead).await.unwrap(), Reserved::Made);
        // Its process died: it has expired already, so it neither counts
        // nor blocks the next call, and the next reservation deletes it.
        assert_eq!(db.day_reserved("2026-12-01").await.unwrap(), 0.0);
        assert_eq!(
            db.reserve_spend(&res("next", 0.9, Some(1.0)))
                .await
                .unwrap(),
            Reserved::Made
        );
        let rows: i64 = db
            .read(
                |c| Ok(c.query_row("SELECT count(*) FROM budget_reservations", [], |r| r.get(0))?),
            )
            .unwrap();
        assert_eq!(rows, 1);
        // A late settlement of the expired one still records what it cost.
        db.settle_spend("dead", "2026-12-01", 0.3, 10, 10)
            .await
            .unwrap();
        assert!((db.day_spent("2026-12-01").await.unwrap() - 0.3).abs() < 1e-12);
    });
}

#[test]
fn concurrent_reservations_on_several_handles_never_commit_past_the_cap() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("state.db");
    let handles: Vec<std::sync::Arc<SqliteStore>> = (0..4)
        .map(|_| std::sync::Arc::new(SqliteStore::open(&p).unwrap()))
        .collect();
    block(async {
        let mut tasks = Vec::new();
        for i in 0..64 {
            let db = handles[i % handles.len()].clone();
            tasks.push(tokio::spawn(async move {
                let id = format!("r{i}");
                db.reserve_spend(&res(&id, 0.07, Some(1.0))).await.unwrap()
            }));
        }
        let mut made = 0;
        for t in tasks {
            if t.await.unwrap() == Reserved::Made {
                made += 1;
            }
        }
        assert_eq!(made, 14, "1.0 / 0.07 = 14 reservations fit");
        let held = handles[0].day_reserved("2026-12-01").await.unwrap();
        assert!(held <= 1.0 + 1e-9, "{held}");
    });
}
