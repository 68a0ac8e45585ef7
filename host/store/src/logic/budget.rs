//! `budget_reservations` (issue 48): what both dialects do alike with a
//! reservation that expired unsettled (its process died, or lost the
//! database, after its call was sent, and the provider may have answered
//! and billed it): it is charged to its day at its estimate, once (marked
//! `charged`: SQLite schema 15, PostgreSQL migration 9), and a late
//! settlement corrects the charge to the cost. The spend itself is added by
//! each dialect (`budget_days`, amounts in USD as floating point).

use crate::StoreError;
use crate::clock::rfc3339_before;
use crate::decode::Cells;
use crate::seam::{Dialect, Tx};

/// Mark every reservation that expired uncharged as charged; each one's
/// day and estimate (USD), for the caller to add to its day's spend in the
/// same transaction. Charged rows a day past their expiry are deleted.
/// SQLite compares with `now` (RFC 3339, read under the write turn);
/// PostgreSQL with the database's clock. Two writers at once: the row's
/// lock (PostgreSQL) or the write turn (SQLite) makes the second see it
/// charged.
///
/// # Errors
/// The dialect's.
pub(crate) async fn charge_expired<X: Tx>(
    tx: &X,
    now: &str,
) -> Result<Vec<(String, f64)>, StoreError> {
    let (charge, args, day_old) = match tx.dialect() {
        Dialect::Sqlite => (
            "UPDATE budget_reservations SET charged = $2 WHERE expires_at <= $1 AND charged = 0 RETURNING day, usd",
            vec![now.into(), true.into()],
            format!("expires_at <= '{}'", rfc3339_before(86_400_000)),
        ),
        Dialect::Postgres => (
            "UPDATE budget_reservations SET charged = $1 WHERE expires_at <= clock_timestamp() AND NOT charged RETURNING day, usd",
            vec![true.into()],
            "expires_at <= clock_timestamp() - interval '1 day'".to_string(),
        ),
    };
    let charged = tx
        .rows(charge, &args)
        .await?
        .iter()
        .map(|r| Ok((r.cell::<String>(0)?, r.cell::<f64>(1)?)))
        .collect::<Result<Vec<_>, StoreError>>()?;
    tx.exec(
        &format!("DELETE FROM budget_reservations WHERE charged = $1 AND {day_old}"),
        &[true.into()],
    )
    .await?;
    Ok(charged)
}

/// The estimate (USD) reservation `id` was charged at when it expired, if
/// it was (its settlement then corrects the charge instead of adding).
///
/// # Errors
/// The dialect's.
pub(crate) async fn charged<X: Tx>(tx: &X, id: &str) -> Result<Option<f64>, StoreError> {
    let rows = tx
        .rows(
            "SELECT usd FROM budget_reservations WHERE id = $1 AND charged = $2",
            &[id.into(), true.into()],
        )
        .await?;
    rows.first().map(|r| r.cell::<f64>(0)).transpose()
}
