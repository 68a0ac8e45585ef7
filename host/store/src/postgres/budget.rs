//! `budget_days`: model spend per UTC day, shared by every host. A spend
//! is one atomic `INSERT ... ON CONFLICT DO UPDATE` adding to the row, so
//! concurrent hosts never lose each other's spend. An atomic reservation
//! (reserve the estimate before a model call, settle after) is one more
//! conditional update of the same row in [`PgStore::write`]: `UPDATE ...
//! SET reserved_usd = reserved_usd + $2 WHERE day = $1 AND spent_usd +
//! reserved_usd + $2 <= $cap`.

use super::super::{BudgetStore, DayRow, StoreError};
use super::{PgStore, execute, get, get_u64, i64_of, query, query_opt};
use crate::clock::now_rfc3339;
use async_trait::async_trait;

#[async_trait]
impl BudgetStore for PgStore {
    async fn day_spent(&self, day: &str) -> Result<f64, StoreError> {
        let c = self.conn().await?;
        let row = query_opt(
            &c,
            "SELECT spent_usd FROM budget_days WHERE day = $1",
            &[&day],
        )
        .await?;
        row.map_or(Ok(0.0), |r| get(&r, 0))
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
        let (input, output) = (i64_of(input_tokens), i64_of(output_tokens));
        self.write(move |c| {
            Box::pin(async move {
                execute(
                    c,
                    "INSERT INTO budget_days (day, spent_usd, calls, input_tokens, output_tokens, updated_at)
                     VALUES ($1, $2, 1, $3, $4, $5)
                     ON CONFLICT (day) DO UPDATE SET spent_usd = budget_days.spent_usd + $2, calls = budget_days.calls + 1,
                       input_tokens = budget_days.input_tokens + $3, output_tokens = budget_days.output_tokens + $4, updated_at = $5",
                    &[&day, &usd, &input, &output, &now],
                )
                .await?;
                Ok(())
            })
        })
        .await
    }

    async fn budget_days(&self, limit: usize) -> Result<Vec<DayRow>, StoreError> {
        let c = self.conn().await?;
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        let rows = query(
            &c,
            "SELECT day, spent_usd, calls, input_tokens, output_tokens FROM budget_days ORDER BY day DESC LIMIT $1",
            &[&limit],
        )
        .await?;
        rows.iter()
            .map(|r| {
                Ok(DayRow {
                    day: get(r, 0)?,
                    spent_usd: get(r, 1)?,
                    calls: get_u64(r, 2)?,
                    input_tokens: get_u64(r, 3)?,
                    output_tokens: get_u64(r, 4)?,
                })
            })
            .collect()
    }
}
