//! `budget_days`: model spend per UTC day, shared by every host;
//! `budget_reservations`: the maximum estimates of calls in flight, checked
//! against the day's hard cap (`capsaga_core::budget::reserve::admits`).
//!
//! A spend is one atomic `INSERT ... ON CONFLICT DO UPDATE` adding to the
//! row, so concurrent hosts never lose each other's spend. A reservation is
//! admitted and recorded in one transaction of this host's writer under a
//! transaction-scoped advisory lock of its day: every host's reservations
//! of one day are serialised there, so the cap holds across hosts (what is
//! spent plus what is reserved is read after the previous reservation of
//! the day committed). Expiry is the database's clock, as leases are; a
//! reservation that expired unsettled is charged to its day's spend at its
//! estimate (its host may have died after the provider billed the call).

use super::super::{
    BudgetStore, DayRow, GapRow, Learnt, NewReservation, Reserved, StoreError, ledger_usd,
};
use super::seam::Pg;
use super::{Conn, PgStore, execute, get, i64_of, query, query_opt};
use crate::clock::now_rfc3339;
use crate::decode;
use crate::logic::budget;
use async_trait::async_trait;
use capsaga_core::budget::learn::{Ratios, overrun};
use capsaga_core::budget::reserve::admits;

/// The advisory lock of a day's reservations: one key per day, in a key
/// space of its own (the first argument of the two-key form).
const BUDGET_LOCK_SPACE: i32 = 0x4341_5042; // "CAPB"

async fn spent(c: &Conn, day: &str) -> Result<f64, StoreError> {
    let row = query_opt(
        c,
        "SELECT spent_usd FROM budget_days WHERE day = $1",
        &[&day],
    )
    .await?;
    row.map_or(Ok(0.0), |r| get(&r, 0))
}

async fn reserved(c: &Conn, day: &str) -> Result<f64, StoreError> {
    let row = query(
        c,
        "SELECT COALESCE(SUM(usd), 0)::float8 FROM budget_reservations WHERE day = $1 AND expires_at > clock_timestamp()",
        &[&day],
    )
    .await?;
    row.first().map_or(Ok(0.0), |r| get(r, 0))
}

/// Add `usd` (a cost, or a correction of a charged estimate: negative when
/// the cost was lower) and `calls` calls, and their tokens, to `day`'s
/// counters.
async fn add(
    c: &Conn,
    day: &str,
    (usd, calls): (f64, i64),
    (input_tokens, output_tokens): (u64, u64),
    now: &str,
) -> Result<(), StoreError> {
    let (input, output) = (i64_of(input_tokens), i64_of(output_tokens));
    execute(
        c,
        "INSERT INTO budget_days (day, spent_usd, calls, input_tokens, output_tokens, updated_at)
         VALUES ($1, $2, $6, $3, $4, $5)
         ON CONFLICT (day) DO UPDATE SET spent_usd = budget_days.spent_usd + $2, calls = budget_days.calls + $6,
           input_tokens = budget_days.input_tokens + $3, output_tokens = budget_days.output_tokens + $4, updated_at = $5",
        &[&day, &usd, &input, &output, &now, &calls],
    )
    .await?;
    Ok(())
}

#[async_trait]
impl BudgetStore for PgStore {
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
        self.write(move |c| {
            Box::pin(async move {
                // Under the day's lock too: a reservation admitted meanwhile
                // sees either the reservation or the spend (and what it
                // taught), never neither.
                execute(
                    c,
                    "SELECT pg_advisory_xact_lock($1, hashtext($2))",
                    &[&BUDGET_LOCK_SPACE, &day],
                )
                .await?;
                // Charged when it expired (`reserve_spend`): corrected to the cost.
                let charged = budget::charged(&Pg(c), &id).await?;
                execute(c, "DELETE FROM budget_reservations WHERE id = $1", &[&id]).await?;
                if let Some(estimate) = charged {
                    add(c, &day, (usd - estimate, 0), (input_tokens, output_tokens), &now).await?;
                } else if usd > 0.0 || input_tokens > 0 || output_tokens > 0 {
                    add(c, &day, (usd, 1), (input_tokens, output_tokens), &now).await?;
                }
                if let Some(l) = &learnt {
                    let over = overrun(l.reserved_usd, usd);
                    execute(
                        c,
                        "INSERT INTO budget_ratios (provider, model, day, calls, reserved_usd, charged_usd, over_usd, input_ratio, output_ratio, updated_at)
                         VALUES ($1, $2, $3, 1, $4, $5, $6, $7, $8, $9)
                         ON CONFLICT (provider, model, day) DO UPDATE SET calls = budget_ratios.calls + 1,
                           reserved_usd = budget_ratios.reserved_usd + $4, charged_usd = budget_ratios.charged_usd + $5,
                           over_usd = budget_ratios.over_usd + $6,
                           input_ratio = GREATEST(budget_ratios.input_ratio, $7),
                           output_ratio = GREATEST(budget_ratios.output_ratio, $8), updated_at = $9",
                        &[&l.provider, &l.model, &day, &l.reserved_usd, &usd, &over, &l.ratios.input, &l.ratios.output, &now],
                    )
                    .await?;
                }
                Ok(())
            })
        })
        .await
    }

    async fn day_spent(&self, day: &str) -> Result<f64, StoreError> {
        let c = self.conn().await?;
        spent(&c, day).await
    }

    async fn day_reserved(&self, day: &str) -> Result<f64, StoreError> {
        let c = self.conn().await?;
        reserved(&c, day).await
    }

    async fn reserve_spend(&self, r: &NewReservation<'_>) -> Result<Reserved, StoreError> {
        let id = r.id.to_owned();
        let day = r.day.to_owned();
        let holder = r.holder.chars().take(200).collect::<String>();
        let (usd, cap) = (r.usd, r.day_hard_usd);
        let ttl_ms = i64_of(r.ttl_ms);
        let now = now_rfc3339();
        self.write(move |c| {
            Box::pin(async move {
                // Every host's reservations of this day wait here for the
                // one before to commit (the lock is held to the batch's
                // commit), so each reads what the others reserved.
                execute(
                    c,
                    "SELECT pg_advisory_xact_lock($1, hashtext($2))",
                    &[&BUDGET_LOCK_SPACE, &day],
                )
                .await?;
                for (day, usd) in budget::charge_expired(&Pg(c), &now).await? {
                    add(c, &day, (usd, 1), (0, 0), &now).await?;
                }
                let spent_usd = spent(c, &day).await?;
                let reserved_usd = reserved(c, &day).await?;
                if !admits(cap, spent_usd, reserved_usd, usd) {
                    return Ok(Reserved::Refused {
                        spent_usd,
                        reserved_usd,
                    });
                }
                // The ttl in ms, capped so the interval cannot overflow.
                execute(
                    c,
                    "INSERT INTO budget_reservations (id, day, usd, holder, created_at, expires_at)
                     VALUES ($1, $2, $3, $4, $5, clock_timestamp() + make_interval(secs => LEAST($6::bigint, 3153600000000)::float8 / 1000.0))",
                    &[&id, &day, &usd, &holder, &now, &ttl_ms],
                )
                .await?;
                Ok(Reserved::Made)
            })
        })
        .await
    }

    async fn usage_ratios(
        &self,
        provider: &str,
        model: &str,
        since_day: &str,
    ) -> Result<Ratios, StoreError> {
        let c = self.conn().await?;
        let rows = query(
            &c,
            "SELECT COALESCE(MAX(input_ratio), 0)::float8, COALESCE(MAX(output_ratio), 0)::float8
             FROM budget_ratios WHERE provider = $1 AND model = $2 AND day >= $3",
            &[&provider, &model, &since_day],
        )
        .await?;
        rows.first().map_or(Ok(Ratios::default()), |r| {
            Ok(Ratios {
                input: get(r, 0)?,
                output: get(r, 1)?,
            })
        })
    }

    async fn budget_gaps(&self, since_day: &str) -> Result<Vec<GapRow>, StoreError> {
        let c = self.conn().await?;
        let rows = query(
            &c,
            "SELECT day, provider, model, calls, reserved_usd, charged_usd, over_usd, input_ratio, output_ratio
             FROM budget_ratios WHERE day >= $1 ORDER BY day DESC, provider, model",
            &[&since_day],
        )
        .await?;
        rows.iter().map(decode::gap).collect()
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
        self.write(move |c| {
            Box::pin(
                async move { add(c, &day, (usd, 1), (input_tokens, output_tokens), &now).await },
            )
        })
        .await
    }

    async fn budget_days(&self, limit: usize) -> Result<Vec<DayRow>, StoreError> {
        let c = self.conn().await?;
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        let rows = query(
            &c,
            "SELECT d.day, d.spent_usd, d.calls, d.input_tokens, d.output_tokens,
               (SELECT COALESCE(SUM(r.usd), 0)::float8 FROM budget_reservations r
                 WHERE r.day = d.day AND r.expires_at > clock_timestamp())
             FROM budget_days d ORDER BY d.day DESC LIMIT $1",
            &[&limit],
        )
        .await?;
        rows.iter().map(decode::day).collect()
    }
}
