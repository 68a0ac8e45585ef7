//! The tables' current values, which `audit verify` replays the log against.

use super::super::{AuditStore, StepStatus, StoreError, TableStates};
use super::SqliteStore;
use async_trait::async_trait;
use rusqlite::Connection;
use std::collections::BTreeMap;

fn pairs(c: &Connection, sql: &str) -> Result<BTreeMap<String, String>, StoreError> {
    let mut out = BTreeMap::new();
    let mut st = c.prepare_cached(sql)?;
    for r in st.query_map([], |r| Ok((r.get::<_, String>(0)?, r.get::<_, String>(1)?)))? {
        let (k, v) = r?;
        out.insert(k, v);
    }
    Ok(out)
}

#[async_trait]
impl AuditStore for SqliteStore {
    async fn table_states(&self) -> Result<TableStates, StoreError> {
        self.read(|c| {
            let sagas = pairs(c, "SELECT saga_id, state FROM saga_state")?;
            let mut steps = BTreeMap::new();
            let mut st = c.prepare_cached("SELECT saga_id, step_seq, status FROM saga_steps")?;
            for r in st.query_map([], |r| {
                Ok((
                    r.get::<_, String>(0)?,
                    r.get::<_, i64>(1)?,
                    r.get::<_, String>(2)?,
                ))
            })? {
                let (saga, seq, status) = r?;
                // Keep the stored name even if it does not parse: a mismatch
                // is a finding, not an error.
                let status = StepStatus::parse(&status)
                    .map(|s| s.as_str().to_string())
                    .unwrap_or(status);
                steps.insert(format!("{saga}#{seq}"), status);
            }
            let approvals = pairs(c, "SELECT approval_id, status FROM approvals")?;
            Ok(TableStates {
                sagas,
                steps,
                approvals,
            })
        })
    }
}
