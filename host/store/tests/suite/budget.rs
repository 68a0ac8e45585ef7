//! Budget reservations (issue 24) on both back ends: admission against the
//! day's hard cap counting reservations in flight, settlement, expiry (an
//! expired unsettled reservation charged at its estimate, issue 48), the
//! ledger surviving a reopen, and the cap held when several hosts (store
//! handles on one database) reserve at once.

use super::{Db, suite};
use capsaga_store::*;

const DAY: &str = "2026-12-01";

fn res<'a>(id: &'a str, usd: f64, cap: Option<f64>) -> NewReservation<'a> {
    NewReservation {
        id,
        day: DAY,
        usd,
        day_hard_usd: cap,
        ttl_ms: 60_000,
        holder: "test/model",
    }
}

async fn reserve_refuse_settle_and_survive_a_reopen(db: &Db) {
    let s = db.open().await;
    let cap = Some(1.0);
    assert_eq!(
        s.reserve_spend(&res("a", 0.6, cap)).await.unwrap(),
        Reserved::Made
    );
    // Spent 0, reserved 0.6: 0.5 more would pass the cap.
    assert_eq!(
        s.reserve_spend(&res("b", 0.5, cap)).await.unwrap(),
        Reserved::Refused {
            spent_usd: 0.0,
            reserved_usd: 0.6
        }
    );
    assert_eq!(
        s.reserve_spend(&res("c", 0.4, cap)).await.unwrap(),
        Reserved::Made
    );
    assert!((s.day_reserved(DAY).await.unwrap() - 1.0).abs() < 1e-12);
    // At the cap: even a call estimated at nothing is refused.
    assert!(matches!(
        s.reserve_spend(&res("z", 0.0, cap)).await.unwrap(),
        Reserved::Refused { .. }
    ));
    // Settled below the estimate: the difference is free again.
    s.settle_spend("a", DAY, 0.1, 1000, 10).await.unwrap();
    s.settle_spend("c", DAY, 0.05, 500, 5).await.unwrap();
    assert!((s.day_spent(DAY).await.unwrap() - 0.15).abs() < 1e-12);
    assert_eq!(s.day_reserved(DAY).await.unwrap(), 0.0);
    assert_eq!(
        s.reserve_spend(&res("d", 0.85, cap)).await.unwrap(),
        Reserved::Made
    );
    // A call that sent nothing releases its reservation, uncounted; a
    // cost that is not a number counts as nothing.
    s.settle_spend("d", DAY, 0.0, 0, 0).await.unwrap();
    // No cap: always.
    assert_eq!(
        s.reserve_spend(&res("e", 1e9, None)).await.unwrap(),
        Reserved::Made
    );
    s.settle_spend("e", DAY, f64::NAN, 0, 0).await.unwrap();
    // A duplicate id is an error, not a second reservation.
    assert_eq!(
        s.reserve_spend(&res("f", 0.1, cap)).await.unwrap(),
        Reserved::Made
    );
    assert!(s.reserve_spend(&res("f", 0.1, cap)).await.is_err());
    assert!((s.day_reserved(DAY).await.unwrap() - 0.1).abs() < 1e-12);
    drop(s);
    let s = db.open().await;
    let days = s.budget_days(5).await.unwrap();
    assert_eq!(days.len(), 1, "{}", db.name());
    assert_eq!((days[0].calls, days[0].input_tokens), (2, 1500));
    assert!((days[0].spent_usd - 0.15).abs() < 1e-12);
    assert!((days[0].reserved_usd - 0.1).abs() < 1e-12, "{days:?}");
    // The ledger survived: 0.15 spent + 0.1 reserved, 0.8 more passes 1.0.
    assert!(matches!(
        s.reserve_spend(&res("g", 0.8, Some(1.0))).await.unwrap(),
        Reserved::Refused { .. }
    ));
}

async fn an_expired_unsettled_reservation_is_charged_and_a_late_settlement_corrects_it(db: &Db) {
    let s = db.open().await;
    let cap = Some(1.0);
    let mut dead = res("dead", 0.9, cap);
    dead.ttl_ms = 0;
    assert_eq!(s.reserve_spend(&dead).await.unwrap(), Reserved::Made);
    // Its host died after sending the call (the provider may have answered
    // and billed it): expired, it holds nothing in flight, but it counts
    // as spent at its estimate, so a call that would pass the cap with it
    // is refused.
    assert_eq!(s.day_reserved(DAY).await.unwrap(), 0.0);
    assert_eq!(
        s.reserve_spend(&res("next", 0.9, cap)).await.unwrap(),
        Reserved::Refused {
            spent_usd: 0.9,
            reserved_usd: 0.0
        },
        "{}",
        db.name()
    );
    // Charged once: later reservations do not charge it again.
    assert_eq!(
        s.reserve_spend(&res("small", 0.05, cap)).await.unwrap(),
        Reserved::Made
    );
    assert!((s.day_spent(DAY).await.unwrap() - 0.9).abs() < 1e-12);
    let days = s.budget_days(1).await.unwrap();
    assert_eq!(days[0].calls, 1, "{days:?}");
    // A late settlement of the charged one corrects the charge to what it
    // cost (0.3), as one call.
    s.settle_spend("dead", DAY, 0.3, 10, 10).await.unwrap();
    assert!((s.day_spent(DAY).await.unwrap() - 0.3).abs() < 1e-12);
    let days = s.budget_days(1).await.unwrap();
    assert_eq!((days[0].calls, days[0].input_tokens), (1, 10), "{days:?}");
    assert_eq!(
        db.count_rows("budget_reservations").await,
        1,
        "{}: the charged one deleted with its settlement",
        db.name()
    );
    // A ttl past any clock is held, not an error.
    let mut long = res("long", 0.01, None);
    long.ttl_ms = u64::MAX;
    assert_eq!(s.reserve_spend(&long).await.unwrap(), Reserved::Made);
    assert!(s.day_reserved(DAY).await.unwrap() > 0.05);
}

/// The cap held across hosts: 64 reservations racing from 4 hosts (store
/// handles on one database, each with its own writer), then settlements
/// racing with new reservations: what is committed never passes the cap.
async fn concurrent_reservations_on_several_hosts_never_commit_past_the_cap(db: &Db) {
    let mut hosts = Vec::new();
    for _ in 0..4 {
        hosts.push(db.open().await);
    }
    let mut tasks = Vec::new();
    for i in 0..64 {
        let h = hosts[i % hosts.len()].clone();
        tasks.push(tokio::spawn(async move {
            let id = format!("r{i}");
            h.reserve_spend(&res(&id, 0.07, Some(1.0))).await.unwrap()
        }));
    }
    let mut made = Vec::new();
    for (i, t) in tasks.into_iter().enumerate() {
        if t.await.unwrap() == Reserved::Made {
            made.push(i);
        }
    }
    assert_eq!(made.len(), 14, "{}: 1.0 / 0.07 = 14 fit", db.name());
    let held = hosts[0].day_reserved(DAY).await.unwrap();
    assert!(held <= 1.0 + 1e-9, "{held}");
    // Settle each at its full estimate while others try to reserve: the
    // day's spend plus what is held stays at or under the cap throughout.
    let mut tasks = Vec::new();
    for (n, i) in made.iter().enumerate() {
        let h = hosts[n % hosts.len()].clone();
        let id = format!("r{i}");
        tasks.push(tokio::spawn(async move {
            h.settle_spend(&id, DAY, 0.07, 10, 10).await.unwrap();
            None
        }));
        let h = hosts[(n + 1) % hosts.len()].clone();
        let id = format!("late{n}");
        tasks.push(tokio::spawn(async move {
            Some(h.reserve_spend(&res(&id, 0.07, Some(1.0))).await.unwrap())
        }));
    }
    let mut late = 0;
    for t in tasks {
        if t.await.unwrap() == Some(Reserved::Made) {
            late += 1;
        }
    }
    let spent = hosts[1].day_spent(DAY).await.unwrap();
    let reserved = hosts[2].day_reserved(DAY).await.unwrap();
    assert!(spent + reserved <= 1.0 + 1e-9, "{spent} + {reserved}");
    // A settlement moves a reservation into the spend in one transaction:
    // 0.98 is committed throughout, so no late call ever fits.
    assert_eq!(late, 0, "{}", db.name());
}

async fn settlements_teach_the_largest_ratio_per_provider_and_model(db: &Db) {
    use capsaga_core::budget::learn::Ratios;
    let s = db.open().await;
    let learnt = |provider: &'static str, model: &'static str, reserved, input, output| Learnt {
        provider,
        model,
        reserved_usd: reserved,
        ratios: Ratios { input, output },
    };
    let none = s.usage_ratios("p", "m", "2026-11-01").await.unwrap();
    assert_eq!(none, Ratios::default(), "nothing learnt yet");
    // Three settlements of p/m on DAY: the largest ratio per side is kept,
    // and what each was charged beyond its reservation adds up.
    for (id, reserved, charged, input, output) in [
        ("r1", 0.1, 0.3, 3.0, 1.0),
        ("r2", 0.1, 0.05, 0.5, 0.5),
        ("r3", 0.2, 0.4, 1.5, 2.0),
    ] {
        assert_eq!(
            s.reserve_spend(&res(id, reserved, Some(100.0)))
                .await
                .unwrap(),
            Reserved::Made
        );
        s.settle_spend_learnt(
            id,
            DAY,
            charged,
            (10, 10),
            Some(&learnt("p", "m", reserved, input, output)),
        )
        .await
        .unwrap();
    }
    assert_eq!(s.day_reserved(DAY).await.unwrap(), 0.0, "settled");
    assert!((s.day_spent(DAY).await.unwrap() - 0.75).abs() < 1e-12);
    let r = s.usage_ratios("p", "m", "2026-11-01").await.unwrap();
    assert_eq!((r.input, r.output), (3.0, 2.0), "{}", db.name());
    // Per provider and model: another model, another provider learn
    // nothing from p/m.
    assert_eq!(
        s.usage_ratios("p", "other", "2026-11-01").await.unwrap(),
        Ratios::default()
    );
    assert_eq!(
        s.usage_ratios("q", "m", "2026-11-01").await.unwrap(),
        Ratios::default()
    );
    // Days before the window are forgotten.
    assert_eq!(
        s.usage_ratios("p", "m", "2026-12-02").await.unwrap(),
        Ratios::default()
    );
    // Another host (store handle) reads what this one learnt.
    let other = db.open().await;
    assert_eq!(
        other.usage_ratios("p", "m", DAY).await.unwrap(),
        Ratios {
            input: 3.0,
            output: 2.0
        }
    );
    let gaps = other.budget_gaps("2026-11-01").await.unwrap();
    assert_eq!(gaps.len(), 1, "{gaps:?}");
    let g = &gaps[0];
    assert_eq!(
        (
            g.day.as_str(),
            g.provider.as_str(),
            g.model.as_str(),
            g.calls
        ),
        (DAY, "p", "m", 3)
    );
    assert!((g.reserved_usd - 0.4).abs() < 1e-12, "{g:?}");
    assert!((g.charged_usd - 0.75).abs() < 1e-12, "{g:?}");
    // Beyond the reservations: 0.2 (r1) + 0.2 (r3); r2 stayed within.
    assert!((g.over_usd - 0.4).abs() < 1e-12, "{g:?}");
    // Nonsense is recorded as nothing.
    s.settle_spend_learnt(
        "gone",
        DAY,
        f64::NAN,
        (0, 0),
        Some(&learnt("p", "m", f64::NAN, 0.0, 0.0)),
    )
    .await
    .unwrap();
    let g = &s.budget_gaps(DAY).await.unwrap()[0];
    assert!((g.charged_usd - 0.75).abs() < 1e-12 && (g.over_usd - 0.4).abs() < 1e-12);
}

suite!(
    settlements_teach_the_largest_ratio_per_provider_and_model,
    reserve_refuse_settle_and_survive_a_reopen,
    an_expired_unsettled_reservation_is_charged_and_a_late_settlement_corrects_it,
    concurrent_reservations_on_several_hosts_never_commit_past_the_cap,
);
