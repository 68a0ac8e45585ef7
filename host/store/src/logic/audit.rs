//! The tables' current values, which `audit verify` replays the log
//! against (sagas, steps, approvals, MCP tasks). On PostgreSQL the log, the head and the tables are read one
//! after the other: hosts writing meanwhile can make a run report a row
//! that moved after the log was read (run it again, or when the hosts are
//! quiet).

use crate::decode::Cells;
use crate::seam::Tx;
use crate::{StepStatus, StoreError, TableStates};
use std::collections::BTreeMap;

async fn pairs<X: Tx>(tx: &X, sql: &str) -> Result<BTreeMap<String, String>, StoreError> {
    tx.rows(sql, &[])
        .await?
        .iter()
        .map(|r| Ok((r.cell(0)?, r.cell(1)?)))
        .collect()
}

/// The sagas' states, the steps' statuses (`saga#seq`) and the approvals'
/// statuses, as stored.
///
/// # Errors
/// The dialect's.
pub(crate) async fn table_states<X: Tx>(tx: &X) -> Result<TableStates, StoreError> {
    let sagas = pairs(tx, "SELECT saga_id, state FROM saga_state").await?;
    let mut steps = BTreeMap::new();
    for r in tx
        .rows("SELECT saga_id, step_seq, status FROM saga_steps", &[])
        .await?
    {
        let (saga, seq, status): (String, i64, String) = (r.cell(0)?, r.cell(1)?, r.cell(2)?);
        // Keep the stored name even if it does not parse: a mismatch is a
        // finding, not an error.
        let status = StepStatus::parse(&status)
            .map(|s| s.as_str().to_string())
            .unwrap_or(status);
        steps.insert(format!("{saga}#{seq}"), status);
    }
    let approvals = pairs(tx, "SELECT approval_id, status FROM approvals").await?;
    let mut tasks = BTreeMap::new();
    let sql = format!(
        "SELECT {}, chained FROM mcp_tasks",
        crate::decode::TASK_COLUMNS
    );
    for r in tx.rows(&sql, &[]).await? {
        let t = crate::decode::task(&r)?;
        let chained: bool = r.cell(11)?;
        let pin = if chained {
            crate::records::task_pin(&t)
        } else {
            crate::UNCHAINED_TASK.to_string()
        };
        tasks.insert(t.task_id, pin);
    }
    Ok(TableStates {
        sagas,
        steps,
        approvals,
        tasks,
    })
}
