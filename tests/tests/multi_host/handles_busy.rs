//! Two requests of one saga handle at once, on two hosts (issue 26): while
//! host 0 runs a step of the saga (a GET the test's own server holds
//! unanswered: the step is in flight for as long as the test wants, no
//! timing involved), a request of the same handle to host 1, and another
//! to host 0, are refused "busy, retry"; once host 0's request returns,
//! host 1 serves the retry. The ledger's journal shows no step lost or run
//! twice.

use super::handles::owner_of;
use super::rig::{Rig, lines, runtime};
use super::wire::{call, call_ok, handle_of, is_busy, saga_of};
use capsaga_core::fsm::State;
use capsaga_store::{StepStatus, audit};
use serde_json::json;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// A server on 127.0.0.1 that answers each GET only once `release` says
/// so, telling `arrived` when a request came in.
async fn holding_server() -> (
    u16,
    tokio::sync::mpsc::UnboundedReceiver<()>,
    tokio::sync::watch::Sender<bool>,
) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let (arrived, arrivals) = tokio::sync::mpsc::unbounded_channel();
    let (release, released) = tokio::sync::watch::channel(false);
    tokio::spawn(async move {
        while let Ok((mut conn, _)) = listener.accept().await {
            let arrived = arrived.clone();
            let mut released = released.clone();
            tokio::spawn(async move {
                let mut buf = Vec::new();
                let mut chunk = [0u8; 1024];
                while !buf.windows(4).any(|w| w == b"\r\n\r\n") {
                    match conn.read(&mut chunk).await {
                        Ok(0) | Err(_) => return,
                        Ok(n) => buf.extend_from_slice(&chunk[..n]),
                    }
                }
                let _ = arrived.send(());
                let _ = released.wait_for(|r| *r).await;
                let _ = conn
                    .write_all(b"HTTP/1.1 200 OK\r\ncontent-type: text/plain\r\ncontent-length: 4\r\nconnection: close\r\n\r\nheld")
                    .await;
            });
        }
    });
    (port, arrivals, release)
}

#[test]
fn the_same_handle_on_two_hosts_at_once_runs_once_and_the_other_is_told_busy() {
    let rt = runtime();
    let (port, mut arrivals, release) = rt.block_on(holding_server());
    let policy = format!(
        "{}[tools.net_escape]\ngrants = [\"net:http:127.0.0.1:{port}\"]\nlimits = {{ deadline_ms = 60000 }}\n",
        super::handles::policy()
    );
    let Some(rig) = Rig::with_tools(
        "multi_host::handles_busy",
        2,
        &["fs_write", "ledger", "net_escape"],
        &policy,
        &[],
    ) else {
        return;
    };
    let (ledger, journal) = rig.ledger("ledger.txt");
    rt.block_on(async {
        let store = rig.store().await;
        let h0 = owner_of(&rig, 0).await;
        let entry = |e: &str| json!({"path": ledger, "entry": e});
        let first = call_ok(&rig.mcp(0), "ledger", entry("one"), Some("new")).await;
        let h = handle_of(&first);
        // Host 0 runs the next step; the test's server holds it.
        let held = {
            let (url, h) = (rig.mcp(0), h.clone());
            let args = json!({"mode": "get", "url": format!("http://127.0.0.1:{port}/hold")});
            tokio::spawn(async move { call(&url, "net_escape", args, Some(&h)).await })
        };
        arrivals
            .recv()
            .await
            .expect("the held step reaches the server");
        let row = store.saga(&h).await.unwrap().unwrap();
        assert_eq!(row.owner.as_deref(), Some(h0.as_str()), "host 0 claimed it");
        // The same handle on host 1, and on host 0: busy, nothing runs.
        let other = call(&rig.mcp(1), "ledger", entry("two"), Some(&h)).await;
        assert!(is_busy(&other), "host 1: {other}");
        let same = call(&rig.mcp(0), "ledger", entry("two"), Some(&h)).await;
        assert!(is_busy(&same), "host 0: {same}");
        // Host 0's request returns; host 1 serves the retry.
        release.send(true).unwrap();
        let held = held.await.unwrap();
        assert_eq!(held["result"]["isError"], false, "{held}");
        assert_eq!(saga_of(&held), h);
        let retry = call_ok(&rig.mcp(1), "ledger", entry("two"), Some(&h)).await;
        assert_eq!(saga_of(&retry), h);
        call_ok(&rig.mcp(1), "capsaga_commit", json!({"saga": h}), None).await;
        let row = store.saga(&h).await.unwrap().unwrap();
        assert_eq!(row.state, State::Done, "{row:?}");
        // Three steps, each run once; the refused requests left none.
        let steps = store.steps(&h).await.unwrap();
        assert_eq!(
            steps
                .iter()
                .map(|s| (s.tool_id.as_str(), s.status))
                .collect::<Vec<_>>(),
            [
                ("ledger", StepStatus::Commit),
                ("net_escape", StepStatus::Commit),
                ("ledger", StepStatus::Commit)
            ],
            "{steps:?}"
        );
        let j = lines(&journal);
        assert_eq!(j.len(), 2, "two executions, no compensation: {j:?}");
        for s in steps.iter().filter(|s| s.tool_id == "ledger") {
            assert_eq!(
                j.iter()
                    .filter(|l| **l == format!("execute {}", s.idempotency_key))
                    .count(),
                1,
                "{j:?}"
            );
        }
        let entries = lines(std::path::Path::new(&ledger));
        assert_eq!(entries.len(), 2, "{entries:?}");
        assert!(entries[0].starts_with("one ") && entries[1].starts_with("two "));
        let report = audit::verify(&*store, None).await.unwrap();
        assert!(report.ok(), "{report:?}");
    });
}
