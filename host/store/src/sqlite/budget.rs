//! `budget_days`: model spend per UTC day; `budget_reservations`: the
//! maximum estimates of calls in flight (schema version 6), checked against
//! the day's hard cap and recorded in one write transaction;
//! `budget_ratios` (schema version 12): what providers' reports cost
//! beyond the estimates, per provider, model and day, recorded with each
//! settlement (`capsaga_core::budget::learn`).

use super::super::{
    BudgetStore, DayRow, GapRow, Learnt, NewReservation, Reserved, StoreError, ledger_usd,
};
use super::Cached;
use super::SqliteStore;
use super::seam::Lite;
use crate::clock::{now_rfc3339, rfc3339_after};
use crate::decode;
use crate::logic::budget;
use async_trait::async_trait;
use capsaga_core::budget::learn::{Ratios, overrun};
use capsaga_core::budget::reserve::admits;
use rusqlite::{Connection, OptionalExtension, params};

fn spent(c: &Connection, day: &str) -> Result<f64, rusqlite::Error> {
    Ok(c.row(
        "SELECT spent_usd FROM budget_days WHERE day = ?1",
        params![day],
        |r| r.get::<_, f64>(0),
    )
    .optional()?
    .unwrap_or(0.0))
}

fn reserved(c: &Connection, day: &str, now: &str) -> Result<f64, rusqlite::Error> {
    c.row(
        "SELECT COALESCE(SUM(usd), 0) FROM budget_reservations WHERE day = ?1 AND expires_at > ?2",
        params![day, now],
        |r| r.get::<_, f64>(0),
    )
}

#[async_trait]
impl BudgetStore for SqliteStore {
    async fn settle_spend_learnt(
        &self,
        id: &str,
        day: &str,
        usd: f64,
        (input_tokens, output_tokens): (u64, u64),
        learnt: Option<&Learnt<'_>>,
    ) -> Result<(), StoreError> {
        let now = now_rfc3339();
        let (id, day) = (id.to_owned(), day.to_owned());
        let usd = ledger_usd(usd);
        let learnt = learnt.map(Learnt::stored);
        self.write(move |tx| {
            // Charged when it expired (`reserve_spend`): corrected to the cost.
            let charged = crate::seam::now(budget::charged(&Lite::write(tx), &id))?;
            tx.exec("DELETE FROM budget_reservations WHERE id = ?1", params![id])?;
            if let Some(estimate) = charged {
                add(tx, &day, (usd - estimate, 0), input_tokens, output_tokens, &now)?;
            } else if usd > 0.0 || input_tokens > 0 || output_tokens > 0 {
                add(tx, &day, (usd, 1), input_tokens, output_tokens, &now)?;
            }
            if let Some(l) = &learnt {
                tx.exec(
                    "INSERT INTO budget_ratios (provider, model, day, calls, reserved_usd, charged_usd, over_usd, input_ratio, output_ratio, updated_at)
                     VALUES (?1, ?2, ?3, 1, ?4, ?5, ?6, ?7, ?8, ?9)
                     ON CONFLICT(provider, model, day) DO UPDATE SET calls = calls + 1,
                       reserved_usd = reserved_usd + ?4, charged_usd = charged_usd + ?5, over_usd = over_usd + ?6,
                       input_ratio = max(input_ratio, ?7), output_ratio = max(output_ratio, ?8), updated_at = ?9",
                    params![
                        l.provider,
                        l.model,
                        day,
                        l.reserved_usd,
                        usd,
                        overrun(l.reserved_usd, usd),
                        l.ratios.input,
                        l.ratios.output,
                        now
                    ],
                )?;
            }
            Ok(())
        })
        .await
    }

    async fn day_spent(&self, day: &str) -> Result<f64, StoreError> {
        self.read(|c| Ok(spent(c, day)?))
    }

    async fn day_reserved(&self, day: &str) -> Result<f64, StoreError> {
        let now = now_rfc3339();
        self.read(|c| Ok(reserved(c, day, &now)?))
    }

    async fn reserve_spend(&self, r: &NewReservation<'_>) -> Result<Reserved, StoreError> {
        let id = r.id.to_owned();
        let day = r.day.to_owned();
        let holder = r.holder.chars().take(200).collect::<String>();
        let (usd, cap) = (r.usd, r.day_hard_usd);
        let ttl_ms = r.ttl_ms;
        self.write(move |tx| {
            // The clock is read under the write turn, so an expiry another
            // writer just checked is not seen as live again.
            let now = now_rfc3339();
            for (day, usd) in crate::seam::now(budget::charge_expired(&Lite::write(tx), &now))? {
                add(tx, &day, (usd, 1), 0, 0, &now)?;
            }
            let spent_usd = spent(tx, &day)?;
            let reserved_usd = reserved(tx, &day, &now)?;
            if !admits(cap, spent_usd, reserved_usd, usd) {
                return Ok(Reserved::Refused {
                    spent_usd,
                    reserved_usd,
                });
            }
            tx.exec(
                "INSERT INTO budget_reservations (id, day, usd, holder, created_at, expires_at)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
                params![id, day, usd, holder, now, rfc3339_after(ttl_ms)],
            )?;
            Ok(Reserved::Made)
        })
        .await
    }

    async fn usage_ratios(
        &self,
        provider: &str,
        model: &str,
        since_day: &str,
    ) -> Result<Ratios, StoreError> {
        self.read(|c| {
            Ok(c.row(
                "SELECT COALESCE(MAX(input_ratio), 0), COALESCE(MAX(output_ratio), 0)
                 FROM budget_ratios WHERE provider = ?1 AND model = ?2 AND day >= ?3",
                params![provider, model, since_day],
                |r| {
                    Ok(Ratios {
                        input: r.get(0)?,
                        output: r.get(1)?,
                    })
                },
            )?)
        })
    }

    async fn budget_gaps(&self, since_day: &str) -> Result<Vec<GapRow>, StoreError> {
        self.read(|c| {
            super::all(
                c,
                "SELECT day, provider, model, calls, reserved_usd, charged_usd, over_usd, input_ratio, output_ratio
                 FROM budget_ratios WHERE day >= ?1 ORDER BY day DESC, provider, model",
                params![since_day],
                |r| decode::gap(r),
            )
        })
    }

    async fn record_spend(
        &self,
        day: &str,
        usd: f64,
        input_tokens: u64,
        output_tokens: u64,
    ) -> Result<(), StoreError> {
        let now = now_rfc3339();
        let day = day.to_owned();
        self.write(move |tx| {
            add(tx, &day, (usd, 1), input_tokens, output_tokens, &now)?;
            Ok(())
        })
        .await
    }

    async fn budget_days(&self, limit: usize) -> Result<Vec<DayRow>, StoreError> {
        let now = now_rfc3339();
        self.read(|c| {
            super::all(
                c,
                "SELECT d.day, d.spent_usd, d.calls, d.input_tokens, d.output_tokens,
                   (SELECT COALESCE(SUM(r.usd), 0) FROM budget_reservations r
                     WHERE r.day = d.day AND r.expires_at > ?2)
                 FROM budget_days d ORDER BY d.day DESC LIMIT ?1",
                params![i64::try_from(limit).unwrap_or(i64::MAX), now],
                |r| decode::day(r),
            )
        })
    }
}

/// Add `usd` (a cost, or a correction of a charged estimate: negative when
/// the cost was lower) and `calls` calls, and their tokens, to `day`'s
/// counters.
fn add(
    tx: &Connection,
    day: &str,
    (usd, calls): (f64, i64),
    input_tokens: u64,
    output_tokens: u64,
    now: &str,
) -> Result<(), rusqlite::Error> {
    tx.exec(
        "INSERT INTO budget_days (day, spent_usd, calls, input_tokens, output_tokens, updated_at)
         VALUES (?1, ?2, ?6, ?3, ?4, ?5)
         ON CONFLICT(day) DO UPDATE SET spent_usd = spent_usd + ?2, calls = calls + ?6,
           input_tokens = input_tokens + ?3, output_tokens = output_tokens + ?4, updated_at = ?5",
        params![
            day,
            usd,
            i64::try_from(input_tokens).unwrap_or(i64::MAX),
            i64::try_from(output_tokens).unwrap_or(i64::MAX),
            now,
            calls
        ],
    )?;
    Ok(())
}
