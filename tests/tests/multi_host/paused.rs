//! A host paused past its lease while its clients' requests wait for it
//! (issue 48, the violation the fault harness found once, seed
//! 1796664636122451889): another host recovers the paused host's session
//! sagas (rolls them back); the paused host, woken, must not answer those
//! requests as if its sessions' sagas were still its own. A `capsaga_commit`
//! in flight was acknowledged ("no saga is open in this session: nothing
//! to do", not an error) though its saga had been rolled back, and a tool
//! call in flight ran in a new saga the session then committed alone.
//!
//! Deterministic: the paused host has the longest lease (renewed every
//! 120 s, not within this test), so on waking it answers the requests
//! waiting for it before it could learn its lease is lost; the test ends
//! its lease in the database, as a pause past it does.

use super::faults::signal;
use super::rig::{LEASE_MS, Rig, eventually, lines, runtime};
use capsaga_store::audit;
use capsaga_tests::mcp_rig::{call_ok, connect};
use rmcp::model::{CallToolRequestParams, CallToolResult, ClientConfig};
use serde_json::json;
use std::sync::Arc;
use std::time::Duration;

/// The answer's text, for the assertion messages.
fn text(r: &CallToolResult) -> String {
    serde_json::to_string(&r.content).unwrap_or_default()
}

#[test]
fn requests_waiting_for_a_host_paused_past_its_lease_are_refused_once_another_host_recovered_their_sagas()
 {
    let Some(mut rig) = Rig::new("multi_host::paused", 1) else {
        return;
    };
    let policy = std::fs::read_to_string(rig.ws.config()).expect("the policy");
    let long = rig.ws.root.join("capsaga-long-lease.toml");
    let lease = format!("store_lease_ms = {LEASE_MS}");
    assert!(policy.contains(&lease), "{policy}");
    std::fs::write(&long, policy.replace(&lease, "store_lease_ms = 600000")).expect("write");
    let paused = rig.spawn_with_config(&long);
    let pid = paused.child.id() as i32;
    rig.hosts.push(Some(paused));
    let db = rig.url.rsplit('/').next().unwrap_or_default().to_string();
    let (a_ledger, a_journal) = rig.ledger("commit.txt");
    let (b_ledger, b_journal) = rig.ledger("step.txt");
    let rt = runtime();
    rt.block_on(async {
        let store = rig.store().await;
        // Two sessions on host 1: one about to commit its 3 steps, one
        // about to call its third step.
        let a = Arc::new(connect(rig.mcp(1), ClientConfig::default()).await);
        let b = Arc::new(connect(rig.mcp(1), ClientConfig::default()).await);
        for i in 0..3 {
            call_ok(
                &a,
                "ledger",
                &json!({"path": a_ledger, "entry": format!("a{i}")}),
            )
            .await;
        }
        for i in 0..2 {
            call_ok(
                &b,
                "ledger",
                &json!({"path": b_ledger, "entry": format!("b{i}")}),
            )
            .await;
        }
        let sagas = store.unfinished_sagas().await.expect("the store");
        assert_eq!(sagas.len(), 2, "{sagas:?}");
        let owner = sagas[0].owner.clone().expect("an owner");
        assert!(sagas.iter().all(|s| s.owner.as_deref() == Some(&owner)));
        // Host 1 paused; the commit and the next call sent to it.
        signal(pid, "STOP");
        let commit = tokio::spawn({
            let a = a.clone();
            async move {
                a.call_tool(CallToolRequestParams::new("capsaga_commit"))
                    .await
            }
        });
        let step = tokio::spawn({
            let b = b.clone();
            let args = json!({"path": b_ledger, "entry": "b2"});
            async move {
                b.call_tool(
                    CallToolRequestParams::new("ledger")
                        .with_arguments(args.as_object().cloned().unwrap_or_default()),
                )
                .await
            }
        });
        // Its lease ends (as a pause past it does); host 0 recovers both
        // sagas: rolled back, their entries compensated.
        rig.cluster
            .psql(
                &db,
                &format!(
                    "UPDATE hosts SET expires_at = clock_timestamp() WHERE owner_id = '{owner}'"
                ),
            )
            .expect("the lease ended");
        eventually(
            Duration::from_secs(120),
            "host 0 recovers both sagas",
            || {
                let store = store.clone();
                let ids: Vec<String> = sagas.iter().map(|s| s.saga_id.clone()).collect();
                async move {
                    let mut all = true;
                    for id in &ids {
                        let state = store.saga(id).await.ok().flatten().map(|s| s.state);
                        all &= state.is_some_and(|s| s.to_string() == "FailedRolledBack");
                    }
                    all
                }
            },
        )
        .await;
        // Host 1 wakes and answers both: neither is acknowledged.
        signal(pid, "CONT");
        let within = Duration::from_secs(120);
        let commit = tokio::time::timeout(within, commit)
            .await
            .expect("the commit is answered")
            .expect("the task")
            .expect("the commit is answered");
        assert_eq!(commit.is_error, Some(true), "{}", text(&commit));
        assert!(
            text(&commit).contains("ended elsewhere"),
            "{}",
            text(&commit)
        );
        let step = tokio::time::timeout(within, step)
            .await
            .expect("the call is answered")
            .expect("the task")
            .expect("the call is answered");
        assert_eq!(step.is_error, Some(true), "{}", text(&step));
        // The third call was not run, in no saga: the only sagas are the
        // two recovered, their ledgers empty, each step executed once.
        let all = store.sagas(100).await.expect("the store");
        assert_eq!(all.len(), 2, "{all:?}");
        for (ledger, journal, n) in [(&a_ledger, &a_journal, 3), (&b_ledger, &b_journal, 2)] {
            assert!(lines(std::path::Path::new(ledger)).is_empty(), "{ledger}");
            let executed = lines(journal)
                .iter()
                .filter(|l| l.starts_with("execute "))
                .count();
            assert_eq!(executed, n, "{:?}", lines(journal));
        }
        let report = audit::verify(&*store, None).await.expect("verify");
        assert!(report.ok(), "{report:?}");
    });
}
