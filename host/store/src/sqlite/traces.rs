//! `traces`: execution traces of agent turns.

use super::super::{StoreError, TraceRecord, TraceStore};
use super::Cached;
use super::SqliteStore;
use async_trait::async_trait;
use rusqlite::{OptionalExtension, params};

#[async_trait]
impl TraceStore for SqliteStore {
    async fn save_trace(&self, t: &TraceRecord<'_>) -> Result<(), StoreError> {
        let (trace_id, saga_id, task, outcome, started_at, finished_at, wall_ms, json) = (
            t.trace_id.to_owned(),
            t.saga_id.map(str::to_owned),
            t.task.to_owned(),
            t.outcome.to_owned(),
            t.started_at.to_owned(),
            t.finished_at.map(str::to_owned),
            t.wall_ms,
            t.json.to_owned(),
        );
        self.write(move |tx| {
            tx.exec(
                "INSERT OR REPLACE INTO traces (trace_id, saga_id, task, outcome, started_at, finished_at, wall_ms, trace)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)",
                params![
                    trace_id,
                    saga_id,
                    task,
                    outcome,
                    started_at,
                    finished_at,
                    wall_ms as i64,
                    json
                ],
            )?;
            Ok(())
        })
        .await
    }

    async fn load_trace(&self, id: &str) -> Result<Option<String>, StoreError> {
        if id != "last" && !id.bytes().all(|b| b.is_ascii_hexdigit() || b == b'-') {
            return Ok(None);
        }
        self.read(|c| {
            let sql = if id == "last" {
                "SELECT trace FROM traces ORDER BY started_at DESC, rowid DESC LIMIT 1"
            } else {
                "SELECT trace FROM traces WHERE trace_id = ?1 OR (length(?1) >= 4 AND trace_id LIKE ?1 || '%') ORDER BY started_at DESC LIMIT 1"
            };
            let mut st = c.prepare_cached(sql)?;
            let r = if id == "last" {
                st.query_row([], |r| r.get(0)).optional()?
            } else {
                st.query_row(params![id], |r| r.get(0)).optional()?
            };
            Ok(r)
        })
    }

    async fn trace_of_saga(&self, saga_id: &str) -> Result<Option<String>, StoreError> {
        let saga_id = saga_id.to_owned();
        self.read(move |c| {
            Ok(c.row(
                "SELECT trace_id FROM traces WHERE saga_id = ?1 ORDER BY started_at DESC, rowid DESC LIMIT 1",
                params![saga_id],
                |r| r.get(0),
            )
            .optional()?)
        })
    }
}
