//! The kill switch across hosts: paused over one host's REST API, it stops
//! a call running on another host (rolled back), refuses new calls on a
//! third, shows in every host's `/healthz`; resumed on a third host, calls
//! run again everywhere. One switch row in the shared database, every
//! change in the one chain.

use super::rig::{Rig, eventually, runtime};
use capsaga_tests::mcp_rig::{call, call_ok, connect, http};
use rmcp::model::ClientConfig;
use serde_json::{Value, json};
use std::sync::Arc;
use std::time::Duration;

fn structured(r: &rmcp::model::CallToolResult) -> Value {
    serde_json::to_value(r).unwrap_or_default()["structuredContent"].clone()
}

async fn health(base: &str) -> Value {
    http()
        .get(format!("{base}/healthz"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap()
}

#[test]
fn a_pause_on_one_host_stops_every_host_and_a_resume_on_another_restarts_them() {
    let Some(rig) = Rig::new("multi_host::switch", 3) else {
        return;
    };
    let (ledger, journal) = rig.ledger("ledger.txt");
    let rt = runtime();
    rt.block_on(async {
        let store = rig.store().await;
        let on1 = Arc::new(connect(rig.mcp(1), ClientConfig::default()).await);
        let on2 = connect(rig.mcp(2), ClientConfig::default()).await;
        // A call on host 1 writes its entry, then spins.
        let running = {
            let c = on1.clone();
            let args = json!({"path": ledger, "entry": "paid", "after": "spin"});
            tokio::spawn(async move { call(&c, "ledger", &args).await })
        };
        eventually(Duration::from_secs(60), "the entry is written", || {
            let ledger = ledger.clone();
            async move { std::fs::read_to_string(&ledger).is_ok_and(|t| t.contains("paid")) }
        })
        .await;
        // Paused on host 0 (loopback: the operator).
        let r = http()
            .post(format!("{}/v1/pause", rig.base(0)))
            .json(&json!({"note": "incident 7"}))
            .send()
            .await
            .unwrap();
        assert_eq!(r.status().as_u16(), 200, "{:?}", r.text().await);
        // Host 1 stops its running call and rolls it back.
        let stopped = tokio::time::timeout(Duration::from_secs(60), running)
            .await
            .expect("the call on host 1 is stopped")
            .unwrap();
        assert_eq!(stopped.is_error, Some(true), "{stopped:?}");
        let s = structured(&stopped);
        assert!(
            s["error"]["message"]
                .as_str()
                .is_some_and(|m| m.contains("paused")),
            "{s}"
        );
        assert_eq!(s["error"]["saga_state"], "FailedRolledBack", "{s}");
        let text = std::fs::read_to_string(&ledger).unwrap_or_default();
        assert!(!text.contains("paid"), "compensated: {text:?}");
        let j = std::fs::read_to_string(&journal).unwrap_or_default();
        assert_eq!(j.matches("execute").count(), 1, "{j}");
        assert_eq!(j.matches("compensate").count(), 1, "{j}");
        // Host 2 refuses new work, naming the operator's note; every host
        // reports the switch.
        let r = call(&on2, "ledger", &json!({"path": ledger, "entry": "late"})).await;
        assert_eq!(r.is_error, Some(true), "{r:?}");
        let e = &structured(&r)["error"];
        assert_eq!(e["kind"], "permission-denied", "{e}");
        assert!(
            e["message"]
                .as_str()
                .is_some_and(|m| m.contains("incident 7")),
            "{e}"
        );
        for i in 0..3 {
            assert_eq!(health(&rig.base(i)).await["switch"], "paused", "host {i}");
        }
        // Resumed on host 2: host 1 runs calls again.
        let r = http()
            .post(format!("{}/v1/resume", rig.base(2)))
            .send()
            .await
            .unwrap();
        assert_eq!(r.status().as_u16(), 200);
        call_ok(&on1, "ledger", &json!({"path": ledger, "entry": "after"})).await;
        assert!(
            std::fs::read_to_string(&ledger)
                .unwrap_or_default()
                .contains("after")
        );
        assert_eq!(health(&rig.base(0)).await["switch"], "running");
        // The operator's CLI on the shared store (`capsaga pause` with
        // CAPSAGA_STORE): the hosts see it at their next call.
        let out = rig
            .ws
            .capsaga(&["pause", "--note", "from the shell"])
            .env("CAPSAGA_STORE", &rig.url)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let r = call(&on2, "ledger", &json!({"path": ledger, "entry": "x"})).await;
        assert_eq!(r.is_error, Some(true), "paused from the shell: {r:?}");
        let out = rig
            .ws
            .capsaga(&["unpause"])
            .env("CAPSAGA_STORE", &rig.url)
            .output()
            .unwrap();
        assert!(out.status.success());
        call_ok(&on2, "ledger", &json!({"path": ledger, "entry": "y"})).await;
        let log = store.log(Some("host:switch")).await.unwrap();
        assert_eq!(log.len(), 4, "{log:?}");
        let report = capsaga_store::audit::verify(&*store, None).await.unwrap();
        assert!(report.ok(), "{report:?}");
    });
}
