//! The tables' current values, which `audit verify` replays the log
//! against. The log, the head and the tables are read one after the other:
//! hosts writing meanwhile can make a run report a row that moved after the
//! log was read (run it again, or when the hosts are quiet).

use super::super::{AuditStore, StepStatus, StoreError, TableStates};
use super::{PgStore, get};
use async_trait::async_trait;
use std::collections::BTreeMap;

#[async_trait]
impl AuditStore for PgStore {
    async fn table_states(&self) -> Result<TableStates, StoreError> {
        let c = self.conn().await?;
        let pairs =
            |rows: Vec<tokio_postgres::Row>| -> Result<BTreeMap<String, String>, StoreError> {
                rows.iter().map(|r| Ok((get(r, 0)?, get(r, 1)?))).collect()
            };
        let sagas = pairs(
            c.query("SELECT saga_id, state FROM saga_state", &[])
                .await?,
        )?;
        let mut steps = BTreeMap::new();
        for r in c
            .query("SELECT saga_id, step_seq, status FROM saga_steps", &[])
            .await?
        {
            let (saga, seq, status): (String, i64, String) =
                (get(&r, 0)?, get(&r, 1)?, get(&r, 2)?);
            let status = StepStatus::parse(&status)
                .map(|s| s.as_str().to_string())
                .unwrap_or(status);
            steps.insert(format!("{saga}#{seq}"), status);
        }
        let approvals = pairs(
            c.query("SELECT approval_id, status FROM approvals", &[])
                .await?,
        )?;
        Ok(TableStates {
            sagas,
            steps,
            approvals,
        })
    }
}
