//! The host's file rollback (issue 28) of a saga another host recovers:
//! host 0 is killed (-9) with a step in doubt after it changed files under
//! its journal; the host that takes the saga over (a new fencing token)
//! reopens the dead host's journals (the state directory is shared here)
//! and restores every file, writing the `FS_RESTORE` records under its own
//! token: the files are as before the saga, the steps COMPENSATED.

use super::rig::{LEASE_MS, Rig, eventually, runtime};
use capsaga_store::{StepStatus, audit};
use capsaga_tests::mcp_rig::{call_ok, connect};
use rmcp::model::{CallToolRequestParams, ClientConfig};
use serde_json::json;
use std::sync::Arc;
use std::time::Duration;

#[test]
fn a_dead_hosts_files_are_restored_by_the_host_that_recovers_its_saga() {
    // The ledger's host rollback on: its file and journal are the files.
    let policy = format!(
        "store_lease_ms = {LEASE_MS}\n[tools.ledger]\ngrants = [\"fs:write:~/ws/**\"]\nlimits = {{ deadline_ms = 60000 }}\n"
    );
    let Some(mut rig) = Rig::with_policy("multi_host::files", 2, &policy) else {
        return;
    };
    let (ledger, journal) = rig.ledger("ledger.txt");
    let rt = runtime();
    rt.block_on(async {
        let store = rig.store().await;
        let client = Arc::new(connect(rig.mcp(0), ClientConfig::default()).await);
        call_ok(&client, "ledger", &json!({"path": ledger, "entry": "one"})).await;
        let spinning = {
            let client = client.clone();
            let args = json!({"path": ledger, "entry": "two", "after": "spin"});
            tokio::spawn(async move {
                client
                    .call_tool(
                        CallToolRequestParams::new("ledger")
                            .with_arguments(args.as_object().cloned().unwrap_or_default()),
                    )
                    .await
            })
        };
        eventually(
            Duration::from_secs(60),
            "the second entry is written",
            || {
                let ledger = ledger.clone();
                async move { std::fs::read_to_string(&ledger).is_ok_and(|t| t.contains("two")) }
            },
        )
        .await;
        let saga = store
            .unfinished_sagas()
            .await
            .unwrap()
            .into_iter()
            .find(|s| s.origin == "mcp")
            .expect("the session's saga");
        rig.kill(0);
        spinning.abort();
        eventually(
            Duration::from_millis(LEASE_MS) + Duration::from_secs(30),
            "host 1 recovers the saga",
            || {
                let store = store.clone();
                let id = saga.saga_id.clone();
                async move {
                    store
                        .saga(&id)
                        .await
                        .unwrap()
                        .is_some_and(|s| s.state.to_string() == "FailedRolledBack")
                }
            },
        )
        .await;
        let row = store.saga(&saga.saga_id).await.unwrap().unwrap();
        assert_eq!(row.fence, 2, "taken over once");
        let steps = store.steps(&saga.saga_id).await.unwrap();
        assert!(
            steps.iter().all(|s| s.status == StepStatus::Compensated),
            "{steps:?}"
        );
        // Every file the saga touched is as it was before: neither the
        // ledger nor its journal existed.
        for p in [std::path::PathBuf::from(&ledger), journal.clone()] {
            let left = std::fs::read_to_string(&p).unwrap_or_default();
            assert!(left.is_empty(), "{}: {left:?}", p.display());
        }
        // The restores were logged by the new owner, after its take-over.
        let log = store.log(Some(&saga.saga_id)).await.unwrap();
        let owner_at = log
            .iter()
            .position(|r| r.record == "OWNER")
            .expect("an OWNER record");
        let restores: Vec<_> = log
            .iter()
            .enumerate()
            .filter(|(_, r)| r.record == "FS_RESTORE")
            .collect();
        assert_eq!(restores.len(), 2, "one per step: {log:#?}");
        assert!(restores.iter().all(|(i, _)| *i > owner_at));
        let report = audit::verify(&*store, None).await.unwrap();
        assert!(report.ok(), "{report:?}");
    });
}
