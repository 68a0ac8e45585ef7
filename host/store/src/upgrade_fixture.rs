//! Rows of an older schema and what an upgrade must keep of them, shared by
//! the SQLite upgrade test (`sqlite::schema_tests`) and the PostgreSQL one
//! (the suite's `pg_schema`, through `test_support`).

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
