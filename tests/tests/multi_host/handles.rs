//! MCP 2026-07-28 saga handles served by any host (issue 26): real
//! `capsaga serve` hosts on one PostgreSQL, stateless requests over raw
//! HTTP ([`super::wire`]). A handle begun on host 0 continues on host 1
//! while host 0 lives, and either host ends it; a host killed while idle
//! between two requests of a handle loses nothing of its saga (recovery
//! leaves a released saga alone); a handle left unused past the idle time
//! is ended (rolled back) by a host's sweep. See `handles_busy` for two
//! requests of one handle at once.

use super::rig::{LEASE_MS, Rig, eventually, runtime};
use super::wire::{call, call_ok, handle_of, saga_of};
use capsaga_core::fsm::State;
use capsaga_store::{RELEASED_WHY, StepStatus, Store, audit};
use serde_json::{Value, json};
use std::sync::Arc;
use std::time::Duration;

/// Every host's policy: `fs_write` and the ledger, a short lease.
pub fn policy() -> String {
    format!(
        r#"store_lease_ms = {LEASE_MS}
[tools.fs_write]
grants = ["fs:write:~/ws/**"]
[tools.ledger]
grants = ["fs:write:~/ws/**"]
limits = {{ deadline_ms = 60000 }}
host_rollback = false
"#
    )
}

/// The owner id of host `i` (its `/healthz`).
pub async fn owner_of(rig: &Rig, i: usize) -> String {
    let h: Value = capsaga_tests::mcp_rig::http()
        .get(format!("{}/healthz", rig.base(i)))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    h["owner"].as_str().expect("an owner id").to_string()
}

/// The `owner` of each `OWNER` record of saga `id`, in order (`None`: a
/// release).
async fn owner_records(store: &Arc<dyn Store>, id: &str) -> Vec<Option<String>> {
    store
        .log(Some(id))
        .await
        .unwrap()
        .iter()
        .filter(|r| r.record == "OWNER")
        .map(|r| r.detail["owner"].as_str().map(str::to_owned))
        .collect()
}

fn write(rig: &Rig, file: &str) -> Value {
    json!({"path": rig.ws.ws_path(file), "content": format!("{file}\n")})
}

#[test]
fn a_handle_begun_on_one_host_continues_on_another_and_commits_on_the_first() {
    let Some(rig) = Rig::with_tools(
        "multi_host::handles::continue",
        2,
        &["fs_write", "ledger"],
        &policy(),
        &[],
    ) else {
        return;
    };
    runtime().block_on(async {
        let store = rig.store().await;
        let (h0, h1) = (owner_of(&rig, 0).await, owner_of(&rig, 1).await);
        let a = call_ok(&rig.mcp(0), "fs_write", write(&rig, "a.txt"), Some("new")).await;
        let h = handle_of(&a);
        let row = store.saga(&h).await.unwrap().unwrap();
        assert_eq!(row.owner, None, "released between requests: {row:?}");
        assert!(row.released_at.is_some(), "{row:?}");
        assert_eq!(row.state, State::Acting);
        // Host 1 serves the next request while host 0 lives.
        let b = call_ok(&rig.mcp(1), "fs_write", write(&rig, "b.txt"), Some(&h)).await;
        assert_eq!(saga_of(&b), h, "the same saga: {b}");
        // Host 0 commits it.
        call_ok(&rig.mcp(0), "capsaga_commit", json!({"saga": h}), None).await;
        let row = store.saga(&h).await.unwrap().unwrap();
        assert_eq!(row.state, State::Done, "{row:?}");
        let steps = store.steps(&h).await.unwrap();
        assert_eq!(
            steps.iter().map(|s| s.status).collect::<Vec<_>>(),
            [StepStatus::Commit, StepStatus::Commit],
            "{steps:?}"
        );
        for f in ["a.txt", "b.txt"] {
            let text = std::fs::read_to_string(rig.ws.ws().join(f)).unwrap();
            assert_eq!(text, format!("{f}\n"));
        }
        // Released by host 0, claimed by host 1, released, claimed by
        // host 0 (which ended it: not released again).
        assert_eq!(
            owner_records(&store, &h).await,
            [None, Some(h1), None, Some(h0.clone())]
        );
        let log = store.log(Some(&h)).await.unwrap();
        let first = log.iter().find(|r| r.record == "OWNER").unwrap();
        assert_eq!(first.detail["why"], RELEASED_WHY);
        assert_eq!(first.detail["previous"], h0.as_str());
        let report = audit::verify(&*store, None).await.unwrap();
        assert!(report.ok(), "{report:?}");
    });
}

#[test]
fn a_rollback_through_another_host_compensates_the_first_hosts_steps() {
    let Some(rig) = Rig::with_tools(
        "multi_host::handles::rollback",
        2,
        &["fs_write", "ledger"],
        &policy(),
        &[],
    ) else {
        return;
    };
    runtime().block_on(async {
        let store = rig.store().await;
        let a = call_ok(&rig.mcp(0), "fs_write", write(&rig, "a.txt"), Some("new")).await;
        let h = handle_of(&a);
        call_ok(&rig.mcp(0), "fs_write", write(&rig, "b.txt"), Some(&h)).await;
        assert!(rig.ws.ws().join("a.txt").exists() && rig.ws.ws().join("b.txt").exists());
        let r = call_ok(&rig.mcp(1), "capsaga_rollback", json!({"saga": h}), None).await;
        assert_eq!(saga_of(&r), h);
        for f in ["a.txt", "b.txt"] {
            assert!(!rig.ws.ws().join(f).exists(), "{f} compensated");
        }
        let row = store.saga(&h).await.unwrap().unwrap();
        assert_eq!(row.state, State::FailedRolledBack, "{row:?}");
        let steps = store.steps(&h).await.unwrap();
        assert!(
            steps.len() == 2 && steps.iter().all(|s| s.status == StepStatus::Compensated),
            "{steps:?}"
        );
        // The ended saga's handle is refused on either host.
        let again = call(&rig.mcp(0), "fs_write", write(&rig, "c.txt"), Some(&h)).await;
        assert_eq!(again["error"]["code"], -32602, "{again}");
        let report = audit::verify(&*store, None).await.unwrap();
        assert!(report.ok(), "{report:?}");
    });
}

#[test]
fn a_host_killed_while_idle_between_requests_leaves_its_handle_usable() {
    let Some(mut rig) = Rig::with_tools(
        "multi_host::handles::killed_idle",
        2,
        &["fs_write", "ledger"],
        &policy(),
        &[],
    ) else {
        return;
    };
    let (ledger, _) = rig.ledger("ledger.txt");
    runtime().block_on(async {
        let store = rig.store().await;
        let h0 = owner_of(&rig, 0).await;
        // A session saga host 0 holds when it dies: host 1's recovery rolls
        // it back, which shows a recovery pass saw host 0 dead.
        let session =
            capsaga_tests::mcp_rig::connect(rig.mcp(0), rmcp::model::ClientConfig::default()).await;
        capsaga_tests::mcp_rig::call_ok(&session, "ledger", &json!({"path": ledger, "entry": "s"}))
            .await;
        let a = call_ok(&rig.mcp(0), "fs_write", write(&rig, "a.txt"), Some("new")).await;
        let h = handle_of(&a);
        let held = store
            .unfinished_sagas()
            .await
            .unwrap()
            .into_iter()
            .find(|s| s.saga_id != h && s.owner.as_deref() == Some(h0.as_str()))
            .expect("the session's saga, owned by host 0");
        rig.kill(0);
        // A safety bound, not a timing: on a loaded machine (the other
        // multi-host tests' hosts) a recovery pass may take long.
        eventually(
            Duration::from_millis(LEASE_MS) + Duration::from_secs(120),
            "host 1 recovers the session saga of host 0",
            || {
                let store = store.clone();
                let id = held.saga_id.clone();
                async move {
                    store
                        .saga(&id)
                        .await
                        .unwrap()
                        .is_some_and(|s| s.state.is_terminal())
                }
            },
        )
        .await;
        let recovered = store.saga(&held.saga_id).await.unwrap().unwrap();
        assert_eq!(
            recovered.state,
            State::FailedRolledBack,
            "recovered: {recovered:?}"
        );
        // The released saga was in that pass, and left alone.
        let row = store.saga(&h).await.unwrap().unwrap();
        assert_eq!(row.state, State::Acting, "not rolled back: {row:?}");
        assert!(row.owner.is_none() && row.released_at.is_some(), "{row:?}");
        assert!(rig.ws.ws().join("a.txt").exists());
        // Its handle continues it on host 1.
        let b = call_ok(&rig.mcp(1), "fs_write", write(&rig, "b.txt"), Some(&h)).await;
        assert_eq!(saga_of(&b), h);
        call_ok(&rig.mcp(1), "capsaga_commit", json!({"saga": h}), None).await;
        let row = store.saga(&h).await.unwrap().unwrap();
        assert_eq!(row.state, State::Done, "{row:?}");
        assert!(rig.ws.ws().join("a.txt").exists() && rig.ws.ws().join("b.txt").exists());
        let report = audit::verify(&*store, None).await.unwrap();
        assert!(report.ok(), "{report:?}");
        drop(session);
    });
}

#[test]
fn an_abandoned_handle_is_rolled_back_by_a_hosts_sweep() {
    let Some(rig) = Rig::with_tools(
        "multi_host::handles::abandoned",
        2,
        &["fs_write", "ledger"],
        &policy(),
        &["--handle-idle-ms", "1000"],
    ) else {
        return;
    };
    runtime().block_on(async {
        let store = rig.store().await;
        let a = call_ok(&rig.mcp(0), "fs_write", write(&rig, "a.txt"), Some("new")).await;
        let h = handle_of(&a);
        assert!(rig.ws.ws().join("a.txt").exists());
        eventually(
            Duration::from_secs(60),
            "the abandoned saga is ended",
            || {
                let store = store.clone();
                let h = h.clone();
                async move {
                    store
                        .saga(&h)
                        .await
                        .unwrap()
                        .is_some_and(|s| s.state.is_terminal())
                }
            },
        )
        .await;
        let row = store.saga(&h).await.unwrap().unwrap();
        assert_eq!(row.state, State::FailedRolledBack, "rolled back: {row:?}");
        assert!(!rig.ws.ws().join("a.txt").exists(), "its step compensated");
        let log = store.log(Some(&h)).await.unwrap();
        let claim = log
            .iter()
            .rev()
            .find(|r| r.record == "OWNER")
            .expect("the sweep's claim");
        assert!(
            claim.detail["why"]
                .as_str()
                .is_some_and(|w| w.starts_with("expired")),
            "{claim:?}"
        );
        let again = call(&rig.mcp(1), "fs_write", write(&rig, "b.txt"), Some(&h)).await;
        assert_eq!(again["error"]["code"], -32602, "{again}");
        assert!(
            again["error"]["message"]
                .as_str()
                .is_some_and(|m| m.contains("ended")),
            "{again}"
        );
        let report = audit::verify(&*store, None).await.unwrap();
        assert!(report.ok(), "{report:?}");
    });
}
