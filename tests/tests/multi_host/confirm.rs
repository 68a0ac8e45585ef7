//! A client's confirmation (MCP 2026-07-28 input-required result, issue 26)
//! answered to another host than the one that asked: the `requestState`
//! is sealed under a key derived from `CAPSAGA_KEK`, so every host holding
//! the same KEK opens it; a host with another KEK, or with none (a key of
//! its own process), refuses it with `-32602` naming the key, and nothing
//! runs there.

use super::rig::{HostProc, LEASE_MS, Rig, runtime};
use super::wire::{call_with, handle_of, saga_of};
use capsaga_store::StepStatus;
use serde_json::{Value, json};

const KEK: &str = "5f1c8e0a3b7d2e4f6a8c0e1f3a5b7c9d0e2f4a6b8c0d1e3f5a7b9c1d3e5f7a9b";
const OTHER_KEK: &str = "a0b1c2d3e4f5061728394a5b6c7d8e9fa0b1c2d3e4f5061728394a5b6c7d8e9f";

fn policy() -> String {
    format!(
        r#"store_lease_ms = {LEASE_MS}
[tools.fs_write]
grants = ["fs:write:~/ws/**"]
approval = "always"
[approvals]
client_confirm = ["fs_write"]
"#
    )
}

/// The client declares elicitation, so a pending call asks it.
fn caps() -> Value {
    json!({"io.modelcontextprotocol/clientCapabilities": {"elicitation": {"form": {}}}})
}

#[test]
fn a_confirmation_asked_by_one_host_is_answered_to_another_holding_the_same_kek() {
    let Some(mut rig) = Rig::with_tools("multi_host::confirm", 0, &["fs_write"], &policy(), &[])
    else {
        return;
    };
    rig.env = vec![("CAPSAGA_KEK".into(), KEK.into())];
    let spawned: Vec<HostProc> = vec![
        rig.spawn(),
        rig.spawn(),
        rig.spawn_with_env(&[("CAPSAGA_KEK", Some(OTHER_KEK))]),
        rig.spawn_with_env(&[("CAPSAGA_KEK", None)]),
    ];
    rig.hosts.extend(spawned.into_iter().map(Some));
    runtime().block_on(async {
        let store = rig.store().await;
        let args = json!({"path": rig.ws.ws_path("c.txt"), "content": "c\n"});
        let yes = json!({"capsaga_approval": {"action": "accept", "content": {"approve": true}}});

        // Host 0 asks; nothing runs.
        let r1 = call_with(&rig.mcp(0), "fs_write", args.clone(), caps(), json!({})).await;
        assert_eq!(r1["result"]["resultType"], "input_required", "{r1}");
        let state = r1["result"]["requestState"].as_str().unwrap().to_string();
        let h = handle_of(&r1);
        assert!(!rig.ws.ws().join("c.txt").exists());
        let answer = json!({"inputResponses": yes, "requestState": state});

        // A host with another KEK, and one with none: refused, naming the
        // key; nothing runs, the approval stays pending.
        for i in [2, 3] {
            let e = call_with(
                &rig.mcp(i),
                "fs_write",
                args.clone(),
                caps(),
                answer.clone(),
            )
            .await;
            assert_eq!(e["error"]["code"], -32602, "host {i}: {e}");
            let msg = e["error"]["message"].as_str().unwrap_or_default();
            assert!(msg.contains("CAPSAGA_KEK"), "host {i}: {msg}");
        }
        assert!(!rig.ws.ws().join("c.txt").exists(), "no refused answer ran");
        assert_eq!(store.approvals(false).await.unwrap().len(), 1);

        // Host 1, holding the same KEK, takes the answer: the call runs in
        // the saga host 0 began.
        let r2 = call_with(&rig.mcp(1), "fs_write", args.clone(), caps(), answer).await;
        assert_eq!(r2["result"]["isError"], false, "{r2}");
        assert_eq!(saga_of(&r2), h);
        assert_eq!(
            std::fs::read_to_string(rig.ws.ws().join("c.txt")).unwrap(),
            "c\n"
        );
        assert!(store.approvals(false).await.unwrap().is_empty());
        let steps = store.steps(&h).await.unwrap();
        assert_eq!(
            steps.iter().map(|s| s.status).collect::<Vec<_>>(),
            [StepStatus::Commit],
            "{steps:?}"
        );
    });
}
