//! `budget_days`: model spend per UTC day.

use super::super::{BudgetStore, DayRow, StoreError};
use super::SqliteStore;
use crate::clock::now_rfc3339;
use async_trait::async_trait;
use rusqlite::{OptionalExtension, params};

#[async_trait]
impl BudgetStore for SqliteStore {
    async fn day_spent(&self, day: &str) -> Result<f64, StoreError> {
        self.read(|c| {
            Ok(c.query_row(
                "SELECT spent_usd FROM budget_days WHERE day = ?1",
                params![day],
                |r| r.get::<_, f64>(0),
            )
            .optional()?
            .unwrap_or(0.0))
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
            tx.execute(
                "INSERT INTO budget_days (day, spent_usd, calls, input_tokens, output_tokens, updated_at)
                 VALUES (?1, ?2, 1, ?3, ?4, ?5)
                 ON CONFLICT(day) DO UPDATE SET spent_usd = spent_usd + ?2, calls = calls + 1,
                   input_tokens = input_tokens + ?3, output_tokens = output_tokens + ?4, updated_at = ?5",
                params![day, usd, input_tokens as i64, output_tokens as i64, now],
            )?;
            Ok(())
        })
        .await
    }

    async fn budget_days(&self, limit: usize) -> Result<Vec<DayRow>, StoreError> {
        self.read(|c| {
            let mut st = c.prepare(
                "SELECT day, spent_usd, calls, input_tokens, output_tokens FROM budget_days ORDER BY day DESC LIMIT ?1",
            )?;
            let rows = st
                .query_map(params![limit as i64], |r| {
                    Ok(DayRow {
                        day: r.get(0)?,
                        spent_usd: r.get(1)?,
                        calls: r.get::<_, i64>(2)? as u64,
                        input_tokens: r.get::<_, i64>(3)? as u64,
                        output_tokens: r.get::<_, i64>(4)? as u64,
                    })
                })?
                .collect::<Result<Vec<_>, _>>()?;
            Ok(rows)
        })
    }
}
