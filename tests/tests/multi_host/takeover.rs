//! Kill -9 a host in the middle of a saga, with a step in doubt (its BEGIN
//! durable, its effect applied, no outcome): another host recovers the saga
//! once the dead host's lease expires: the in-doubt step and the committed
//! one are compensated, as local recovery does, and no step runs twice.

use super::rig::{LEASE_MS, Rig, eventually, lines, runtime};
use capsaga_store::{StepStatus, audit};
use capsaga_tests::mcp_rig::{call_ok, connect};
use rmcp::model::{CallToolRequestParams, ClientConfig};
use serde_json::json;
use std::sync::Arc;
use std::time::{Duration, Instant};

#[test]
fn a_killed_hosts_saga_is_recovered_by_another_host_and_no_step_runs_twice() {
    let Some(mut rig) = Rig::new("multi_host::takeover", 3) else {
        return;
    };
    let (ledger, journal) = rig.ledger("ledger.txt");
    let rt = runtime();
    rt.block_on(async {
        let store = rig.store().await;
        let client = Arc::new(connect(rig.mcp(0), ClientConfig::default()).await);
        call_ok(&client, "ledger", &json!({"path": ledger, "entry": "one"})).await;
        eprintln!("takeover: first step committed on host 0");
        // The second step writes its lines, then spins: in doubt.
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
        eventually(Duration::from_secs(60), "the second step ran", || {
            let journal = journal.clone();
            async move { lines(&journal).len() >= 2 }
        })
        .await;
        let saga = store
            .unfinished_sagas()
            .await
            .unwrap()
            .into_iter()
            .find(|s| s.origin == "mcp")
            .expect("the session's saga");
        let first_owner = saga.owner.clone().expect("an owner");
        let steps = store.steps(&saga.saga_id).await.unwrap();
        assert_eq!(
            steps.iter().map(|s| s.status).collect::<Vec<_>>(),
            [StepStatus::Commit, StepStatus::Begin]
        );
        rig.kill(0);
        let killed = Instant::now();
        eprintln!("takeover: host 0 killed with step 1 in doubt");
        // The client may try to reconnect to its dead host: not awaited.
        spinning.abort();
        // Recovered by host 1 or 2 once the lease (LEASE_MS) expired.
        let took = eventually(
            Duration::from_millis(LEASE_MS) + Duration::from_secs(30),
            "the saga is recovered",
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
        eprintln!(
            "takeover: saga recovered {:.2} s after kill -9 (lease {LEASE_MS} ms, renewed every {} ms; {:.2} s in all)",
            took.as_secs_f64(),
            LEASE_MS / 5,
            killed.elapsed().as_secs_f64()
        );
        let row = store.saga(&saga.saga_id).await.unwrap().unwrap();
        assert_ne!(row.owner.as_deref(), Some(first_owner.as_str()));
        assert_eq!(row.fence, 2, "taken over once");
        let steps = store.steps(&saga.saga_id).await.unwrap();
        assert!(
            steps.iter().all(|s| s.status == StepStatus::Compensated),
            "{steps:?}"
        );
        // Each step executed once and was compensated; the ledger is empty.
        let j = lines(&journal);
        for s in &steps {
            let executed = j
                .iter()
                .filter(|l| **l == format!("execute {}", s.idempotency_key))
                .count();
            assert_eq!(executed, 1, "step {} ran {executed} times: {j:?}", s.step_seq);
            assert!(
                j.iter()
                    .any(|l| *l == format!("compensate {}", s.idempotency_key)),
                "{j:?}"
            );
        }
        assert!(lines(std::path::Path::new(&ledger)).is_empty());
        let log = store.log(Some(&saga.saga_id)).await.unwrap();
        let owners: Vec<_> = log.iter().filter(|r| r.record == "OWNER").collect();
        assert_eq!(owners.len(), 1);
        assert_eq!(owners[0].detail["previous"], first_owner.as_str());
        let report = audit::verify(&*store, None).await.unwrap();
        assert!(report.ok(), "{report:?}");
        // The surviving hosts report one policy and two live hosts.
        let health: serde_json::Value = capsaga_tests::mcp_rig::http()
            .get(format!("{}/healthz", rig.base(1)))
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        assert_eq!(health["store"], "postgres", "{health}");
        assert_eq!(health["policy_diverged"], false, "{health}");
        assert_eq!(health["hosts"], 2, "{health}");
    });
}
