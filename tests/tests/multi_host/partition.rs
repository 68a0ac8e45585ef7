//! A host cut off from PostgreSQL by a network partition (a TCP proxy the
//! test cuts, [`super::proxy`]): its in-flight write fails cleanly and
//! leaves nothing, it loses its lease, another host takes its saga over and
//! compensates it, and once the partition heals the first host's late
//! writes (a step's outcome, a new step, a state change) are refused by the
//! database's fencing; no step runs twice. First against the store, as a
//! host's door drives it; then with real `capsaga serve` processes.

use super::proxy::Proxy;
use super::rig::{LEASE_MS, Rig, eventually, lines, runtime};
use capsaga_core::fsm::State;
use capsaga_core::tool::ToolOutput;
use capsaga_pg_harness::Cluster;
use capsaga_store::postgres::{PgOptions, PgStore};
use capsaga_store::{
    NewSaga, NewStep, OwnerStore, SagaStore, Scope, StepKey, StepStatus, StepStore, StoreError,
    audit,
};
use capsaga_tests::mcp_rig::{call_ok, connect};
use rmcp::model::{CallToolRequestParams, ClientConfig};
use serde_json::json;
use std::sync::Arc;
use std::time::{Duration, Instant};

fn new_step<'a>(saga: &'a str, seq: u64, key: &'a str, args: &'a serde_json::Value) -> NewStep<'a> {
    NewStep {
        saga_id: saga,
        step_seq: seq,
        tool_id: "ledger",
        tool_hash: "h",
        grants: &[],
        has_side_effects: true,
        idempotency_key: key,
        args,
        preimage: None,
        approval: None,
        fence: 1,
    }
}

fn key(saga: &str, fence: u64, step_seq: u64) -> StepKey<'_> {
    StepKey {
        saga_id: saga,
        fence,
        step_seq,
    }
}

fn out() -> ToolOutput {
    ToolOutput {
        data: json!({"ok": true}),
        effects: vec![],
        next_hint: None,
        summary: String::new(),
    }
}

#[test]
fn a_partitioned_hosts_lease_is_lost_and_its_late_writes_are_fenced() {
    let cluster = match Cluster::start() {
        Ok(Some(c)) => c,
        Ok(None) => {
            eprintln!("SKIPPED multi_host::partition: PostgreSQL is not installed");
            return;
        }
        Err(e) => panic!("PostgreSQL is installed but did not start: {e}"),
    };
    let url = cluster.fresh_database().expect("a database");
    let rt = runtime();
    rt.block_on(async {
        let proxy = Proxy::start(cluster.port()).await;
        let options = PgOptions {
            lease: Duration::from_millis(LEASE_MS),
            connect_timeout: Duration::from_secs(2),
            ..PgOptions::default()
        };
        let a = PgStore::open(&proxy.url(&url, cluster.port()), &options)
            .await
            .expect("host a opens through the proxy");
        let b = PgStore::open(&url, &options).await.expect("host b opens");
        let lease_a = a.register_owner().await.unwrap();
        let lease_b = b.register_owner().await.unwrap();
        let mut lost = lease_a.lost();
        let saga = "partitioned";
        a.create_saga(&NewSaga {
            saga_id: saga,
            scope: Scope::Call,
            label: "",
            state: State::Acting,
            owner: lease_a.id(),
            plan: None,
            principal: None,
        })
        .await
        .unwrap();
        let args = json!({});
        a.begin_step(&new_step(saga, 0, "p-0", &args))
            .await
            .unwrap();
        a.commit_step(key(saga, 1, 0), &out()).await.unwrap();
        // Step 1 begun (durable), its tool "running" when the cut comes.
        a.begin_step(&new_step(saga, 1, "p-1", &args))
            .await
            .unwrap();

        proxy.cut();
        // A write during the partition fails cleanly (an error, no hang) and leaves
        // nothing: step 1 is still in BEGIN.
        let t0 = Instant::now();
        let r = tokio::time::timeout(
            Duration::from_secs(30),
            a.commit_step(key(saga, 1, 1), &out()),
        )
        .await
        .expect("the in-flight write must not hang");
        assert!(matches!(r, Err(StoreError::Unreachable { .. })), "{r:?}");
        eprintln!(
            "partition: the in-flight write failed in {:.2} s: {}",
            t0.elapsed().as_secs_f64(),
            r.unwrap_err()
        );
        let row = b.step_at(saga, 1).await.unwrap().unwrap();
        assert_eq!(row.status, StepStatus::Begin);

        // Host a loses its lease; host b sees it dead and takes the saga.
        tokio::time::timeout(Duration::from_secs(30), lost.wait_for(|l| *l))
            .await
            .expect("the lease is lost within the bound")
            .unwrap();
        let a_id = lease_a.id().to_string();
        eventually(Duration::from_secs(30), "host a is dead to host b", || {
            let (b, id) = (&b, a_id.clone());
            async move { !b.owner_alive(&id).await.unwrap() }
        })
        .await;
        let fence = b
            .take_over(saga, Some(&a_id), lease_b.id(), "its owner's lease expired")
            .await
            .unwrap()
            .expect("b takes the saga over");
        assert_eq!(fence, 2);

        proxy.heal();
        // Host a's pool reconnects; every late write carries token 1 and is
        // refused by the database: its in-doubt step's COMMIT arriving after
        // the take-over (before the new owner compensated it), a new step,
        // a state change.
        let late = eventually(
            Duration::from_secs(30),
            "host a reaches the server again",
            || {
                let a = &a;
                async move { a.saga(saga).await.is_ok() }
            },
        )
        .await;
        eprintln!(
            "partition: healed; host a reconnected in {:.2} s",
            late.as_secs_f64()
        );
        let r = a.commit_step(key(saga, 1, 1), &out()).await;
        assert!(matches!(r, Err(StoreError::Fenced { .. })), "{r:?}");
        let r = a.begin_step(&new_step(saga, 2, "p-2", &args)).await;
        assert!(matches!(r, Err(StoreError::Fenced { .. })), "{r:?}");
        let r = a.set_state(saga, 1, State::Done, "Finish", None).await;
        assert!(r.is_err(), "{r:?}");
        assert_eq!(
            b.step_at(saga, 1).await.unwrap().unwrap().status,
            StepStatus::Begin
        );

        // Recovery as the door does it: the in-doubt step, then the
        // committed one, compensated; the saga rolled back.
        b.compensated(key(saga, fence, 1)).await.unwrap();
        b.compensated(key(saga, fence, 0)).await.unwrap();
        b.set_state(saga, fence, State::FailedRolledBack, "Abort", None)
            .await
            .unwrap();
        // Host a trying its step again (its BEGIN by the same idempotency
        // key) is refused: it does not run a second time.
        let r = a.begin_step(&new_step(saga, 1, "p-1", &args)).await;
        assert!(matches!(r, Err(StoreError::Fenced { .. })), "{r:?}");
        let r = a.commit_step(key(saga, 1, 1), &out()).await;
        assert!(r.is_err(), "{r:?}");
        // Its lease is not renewed again: dead is final.
        assert!(!b.owner_alive(&a_id).await.unwrap());

        let steps = b.steps(saga).await.unwrap();
        assert_eq!(
            steps.iter().map(|s| s.status).collect::<Vec<_>>(),
            [StepStatus::Compensated, StepStatus::Compensated]
        );
        let row = b.saga(saga).await.unwrap().unwrap();
        assert_eq!(row.state, State::FailedRolledBack);
        assert_eq!(row.fence, 2);
        let report = audit::verify(&b, None).await.unwrap();
        assert!(report.ok(), "{report:?}");
    });
}

#[test]
fn a_serve_host_cut_off_stops_and_another_recovers_its_saga_once() {
    let Some(mut rig) = Rig::new("multi_host::partition", 2) else {
        return;
    };
    let (ledger, journal) = rig.ledger("ledger.txt");
    let rt = runtime();
    rt.block_on(async {
        let proxy = Proxy::start(rig.cluster.port()).await;
        // Host 0 again, reaching the database through the proxy.
        rig.kill(0);
        let through = proxy.url(&rig.url, rig.cluster.port());
        rig.hosts[0] = Some(rig.spawn_with_store(&through));
        let store = rig.store().await;
        let client = Arc::new(connect(rig.mcp(0), ClientConfig::default()).await);
        call_ok(&client, "ledger", &json!({"path": ledger, "entry": "one"})).await;
        let in_flight = {
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

        proxy.cut();
        let cut = Instant::now();
        // Host 0 cannot renew its lease: it stops (exit 11) rather than
        // drive its saga without one.
        let stopped = eventually(Duration::from_secs(30), "host 0 stops", || {
            let running = rig.running(0);
            async move { !running }
        })
        .await;
        let code = rig.hosts[0]
            .as_mut()
            .and_then(|h| h.child.wait().ok())
            .and_then(|s| s.code());
        assert_eq!(code, Some(11), "host 0 exits as a lost lease says");
        eprintln!(
            "partition: host 0 stopped {:.2} s after the cut (lease {LEASE_MS} ms)",
            stopped.as_secs_f64()
        );
        // The call in flight on it never reports success (its host is gone;
        // the MCP client library may keep trying to reach it: not awaited).
        if in_flight.is_finished() {
            let r = in_flight.await.expect("the task");
            assert!(
                r.is_err() || r.as_ref().is_ok_and(|c| c.is_error == Some(true)),
                "{r:?}"
            );
        } else {
            in_flight.abort();
        }
        // Host 1 recovers the saga.
        eventually(Duration::from_secs(30), "host 1 recovers the saga", || {
            let (store, id) = (store.clone(), saga.saga_id.clone());
            async move {
                store
                    .saga(&id)
                    .await
                    .unwrap()
                    .is_some_and(|s| s.state == State::FailedRolledBack)
            }
        })
        .await;
        eprintln!(
            "partition: saga recovered {:.2} s after the cut",
            cut.elapsed().as_secs_f64()
        );
        proxy.heal();
        let steps = store.steps(&saga.saga_id).await.unwrap();
        assert!(
            steps.iter().all(|s| s.status == StepStatus::Compensated),
            "{steps:?}"
        );
        let j = lines(&journal);
        for s in &steps {
            let executed = j
                .iter()
                .filter(|l| **l == format!("execute {}", s.idempotency_key))
                .count();
            assert_eq!(
                executed, 1,
                "step {} ran {executed} times: {j:?}",
                s.step_seq
            );
        }
        assert!(lines(std::path::Path::new(&ledger)).is_empty());
        let report = audit::verify(&*store, None).await.unwrap();
        assert!(report.ok(), "{report:?}");
    });
}
