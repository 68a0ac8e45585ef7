//! Tasks are durable (issue 48): a real `capsaga serve` (a child process,
//! SQLite) runs two tasks, one to its end and one still running, and is
//! killed (SIGKILL); a new `capsaga serve` on the same state answers for
//! both: the ended task keeps its status and result, the running one is
//! ended (`failed`, its saga rolled back from its log, its write
//! compensated), never left `working`; another principal still cannot
//! read either, and an id it guesses is answered as an unknown one.

use super::crash::serve_with;
use super::tasks::{meta, poll_task, post};
use super::wire2026::secret;
use capsaga_core::principal::Role;
use capsaga_server::auth::digest;
use capsaga_store::TokenStore;
use capsaga_tests::{TestWorkspace, block_on, open_store};
use serde_json::json;
use std::time::{Duration, Instant};

const POLICY: &str = r#"
[tools.ledger]
grants = ["fs:write:~/ws/**"]
limits = { deadline_ms = 120000, fuel = 10000000000000 }
"#;

#[test]
fn tasks_survive_a_restart_of_their_host_and_a_running_one_is_ended() {
    let ws = TestWorkspace::new(&["ledger"], POLICY);
    block_on(async {
        let store = open_store(&ws);
        for who in ["bob", "eve"] {
            store
                .create_token(who, Role::Client, &digest(secret(who).as_bytes()), "test")
                .await
                .unwrap();
        }
    });
    let (mut first, url) = serve_with(&ws, &[]);
    let ledger = ws.ws().join("ledger.txt");
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let call = |entry: &str, after: Option<&str>| {
        let mut args = json!({"path": ws.ws_path("ledger.txt"), "entry": entry});
        if let Some(a) = after {
            args["after"] = json!(a);
        }
        json!({"name": "ledger", "arguments": args, "_meta": meta(true)})
    };
    let (done_id, done_before, running_id) = rt.block_on(async {
        // A task that ends on the first host.
        let created = post(&url, "bob", "tools/call", call("paid", None)).await;
        assert_eq!(created["result"]["resultType"], "task", "{created}");
        let done_id = created["result"]["taskId"].as_str().unwrap().to_string();
        let done = poll_task(&url, "bob", &done_id, meta(true), |g| {
            g["result"]["status"] == "completed"
        })
        .await;
        // A task still running when the host dies (it wrote, then spins).
        let created = post(&url, "bob", "tools/call", call("spun", Some("spin"))).await;
        let running_id = created["result"]["taskId"].as_str().unwrap().to_string();
        let t = Instant::now();
        while !std::fs::read_to_string(&ledger).is_ok_and(|s| s.contains("spun")) {
            assert!(
                t.elapsed() < Duration::from_secs(120),
                "the task never wrote"
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        (done_id, done["result"].clone(), running_id)
    });
    let _ = first.kill();
    let _ = first.wait();

    let (mut second, url) = serve_with(&ws, &[]);
    rt.block_on(async {
        // The ended task: the same status and result, from the new process.
        let got = post(
            &url,
            "bob",
            "tasks/get",
            json!({"taskId": done_id, "_meta": meta(true)}),
        )
        .await;
        assert_eq!(got["result"]["status"], "completed", "{got}");
        assert_eq!(got["result"]["result"], done_before["result"], "{got}");
        assert_eq!(got["result"]["createdAt"], done_before["createdAt"]);
        // The running one is ended, not left working: its saga was rolled
        // back by the restart's recovery and its write compensated.
        let ended = poll_task(&url, "bob", &running_id, meta(true), |g| {
            g["result"]["status"] != "working"
        })
        .await;
        assert_eq!(ended["result"]["status"], "failed", "{ended}");
        let message = ended["result"]["error"]["message"]
            .as_str()
            .unwrap_or_default();
        assert!(message.contains("stopped"), "{ended}");
        let text = std::fs::read_to_string(&ledger).unwrap_or_default();
        assert!(text.contains("paid") && !text.contains("spun"), "{text:?}");
        // Another principal: the same answer as for an id nobody has.
        let guessed = "5f0c2a9e-7d1b-4c3e-9a8f-2b6d4e1c0a7f";
        let nobody = post(
            &url,
            "eve",
            "tasks/get",
            json!({"taskId": guessed, "_meta": meta(true)}),
        )
        .await;
        assert_eq!(nobody["error"]["code"], -32602, "{nobody}");
        for id in [&done_id, &running_id] {
            for m in ["tasks/get", "tasks/cancel"] {
                let e = post(&url, "eve", m, json!({"taskId": id, "_meta": meta(true)})).await;
                assert_eq!(e["error"], nobody["error"], "{m}: {e}");
            }
        }
        // Cancelling an ended task changes nothing.
        let c = post(
            &url,
            "bob",
            "tasks/cancel",
            json!({"taskId": done_id, "_meta": meta(true)}),
        )
        .await;
        assert!(c.get("error").is_none(), "{c}");
        let got = post(
            &url,
            "bob",
            "tasks/get",
            json!({"taskId": done_id, "_meta": meta(true)}),
        )
        .await;
        assert_eq!(got["result"]["status"], "completed", "{got}");
    });
    let _ = second.kill();
    let _ = second.wait();
}
