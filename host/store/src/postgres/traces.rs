//! `traces`: execution traces of agent turns.

use super::super::{StoreError, TraceRecord, TraceStore};
use super::{PgStore, execute, get, i64_of, query_opt};
use async_trait::async_trait;

#[async_trait]
impl TraceStore for PgStore {
    async fn save_trace(&self, t: &TraceRecord<'_>) -> Result<(), StoreError> {
        let (trace_id, saga_id, task, outcome, started_at, finished_at, wall_ms, json) = (
            t.trace_id.to_owned(),
            t.saga_id.map(str::to_owned),
            t.task.to_owned(),
            t.outcome.to_owned(),
            t.started_at.to_owned(),
            t.finished_at.map(str::to_owned),
            i64_of(t.wall_ms),
            t.json.to_owned(),
        );
        self.write(move |c| {
            Box::pin(async move {
                execute(
                    c,
                    "INSERT INTO traces (trace_id, saga_id, task, outcome, started_at, finished_at, wall_ms, trace)
                     VALUES ($1, $2, $3, $4, $5, $6, $7, $8)
                     ON CONFLICT (trace_id) DO UPDATE SET saga_id = EXCLUDED.saga_id, task = EXCLUDED.task,
                       outcome = EXCLUDED.outcome, started_at = EXCLUDED.started_at, finished_at = EXCLUDED.finished_at,
                       wall_ms = EXCLUDED.wall_ms, trace = EXCLUDED.trace",
                    &[&trace_id, &saga_id, &task, &outcome, &started_at, &finished_at, &wall_ms, &json],
                )
                .await?;
                Ok(())
            })
        })
        .await
    }

    async fn load_trace(&self, id: &str) -> Result<Option<String>, StoreError> {
        if id != "last" && !id.bytes().all(|b| b.is_ascii_hexdigit() || b == b'-') {
            return Ok(None);
        }
        let c = self.conn().await?;
        let row = if id == "last" {
            query_opt(
                &c,
                "SELECT trace FROM traces ORDER BY started_at DESC, ord DESC LIMIT 1",
                &[],
            )
            .await?
        } else {
            query_opt(
                &c,
                "SELECT trace FROM traces WHERE trace_id = $1 OR (length($1) >= 4 AND left(trace_id, length($1)) = $1) ORDER BY started_at DESC LIMIT 1",
                &[&id],
            )
            .await?
        };
        row.map(|r| get(&r, 0)).transpose()
    }

    async fn trace_of_saga(&self, saga_id: &str) -> Result<Option<String>, StoreError> {
        let c = self.conn().await?;
        let row = query_opt(
            &c,
            "SELECT trace_id FROM traces WHERE saga_id = $1 ORDER BY started_at DESC, ord DESC LIMIT 1",
            &[&saga_id],
        )
        .await?;
        row.map(|r| get(&r, 0)).transpose()
    }
}
