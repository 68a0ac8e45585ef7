//! SIGKILL of `capsaga serve` (a child process) during 200 concurrent MCP
//! sessions writing files, then a restart (which recovers the dead
//! process's sagas as the CLI does): every saga ends in a consistent state
//! and no step ran twice.

use super::load::{CALLS, POLICY, call_of, one_session};
use capsaga_store::{LogStore, SagaStore};
use capsaga_tests::{TestWorkspace, block_on, capsaga_bin, open_store, wait_until_async};
use std::collections::BTreeMap;
use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

/// The kill is sent once one session in `KILL_SHARE` has committed.
const KILL_SHARE: usize = 4;

/// `capsaga serve` on `ws` as a child process (127.0.0.1, a free port,
/// `extra` arguments after `serve`), and its MCP URL.
pub fn serve_with(ws: &TestWorkspace, extra: &[&str]) -> (Child, String) {
    let mut child = Command::new(capsaga_bin())
        .args(["--json", "--config"])
        .arg(ws.config())
        .args(["serve", "--listen", "127.0.0.1:0"])
        .args(extra)
        .env_remove("CAPSAGA_CONFIG")
        .env_remove("CAPSAGA_TOKEN")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("capsaga serve starts");
    let out = child.stdout.take().expect("stdout");
    let mut line = String::new();
    BufReader::new(out)
        .read_line(&mut line)
        .expect("the listening line");
    let v: serde_json::Value =
        serde_json::from_str(&line).unwrap_or_else(|e| panic!("{e}: {line}"));
    let url = format!("http://{}/mcp", v["listening"].as_str().expect("listening"));
    (child, url)
}

fn serve(ws: &TestWorkspace) -> (Child, String) {
    serve_with(ws, &[])
}

#[test]
fn sigkill_under_load_then_restart_leaves_every_saga_consistent() {
    let ws = TestWorkspace::new(&["fs_write", "time_now"], POLICY);
    let base = ws.ws_path("");
    let base = base.trim_end_matches('/').to_string();
    let (mut child, url) = serve(&ws);
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    // The kill is driven by the load itself, not by a timer: it lands once
    // a counted share of the sessions has committed and the others are
    // still in flight, however fast or slow the machine is.
    let committed = Arc::new(AtomicUsize::new(0));
    let (killed_tx, killed) = tokio::sync::watch::channel(false);
    let (done, at_kill) = rt.block_on(async {
        let tasks: Vec<_> = (0..CALLS)
            .map(|i| {
                let (tool, args) = call_of(&base, i);
                let committed = committed.clone();
                let url = url.clone();
                let mut killed = killed.clone();
                tokio::spawn(async move {
                    // A client whose server died may wait to reconnect: cut
                    // short once the server is dead (none can commit then),
                    // never before (a slow machine is only slow).
                    let after_kill = async {
                        let _ = killed.wait_for(|k| *k).await;
                        tokio::time::sleep(Duration::from_secs(2)).await;
                    };
                    let r = tokio::select! {
                        r = one_session(url, tool, args) => Some(r),
                        () = after_kill => None,
                    };
                    if matches!(r, Some(Ok(_))) {
                        committed.fetch_add(1, Ordering::SeqCst);
                    }
                    r
                })
            })
            .collect();
        let share = format!("{} of {CALLS} sessions committed", CALLS / KILL_SHARE);
        wait_until_async(&share, || {
            let n = committed.load(Ordering::SeqCst);
            async move { n >= CALLS / KILL_SHARE }
        })
        .await;
        child.kill().expect("SIGKILL");
        let _ = child.wait();
        let _ = killed_tx.send(true);
        let at_kill = committed.load(Ordering::SeqCst);
        let mut ok = 0;
        for t in tasks {
            if matches!(t.await, Ok(Some(Ok(_)))) {
                ok += 1;
            }
        }
        (ok, at_kill)
    });
    eprintln!(
        "crash: SIGKILL after {at_kill} commits; {done} of {CALLS} sessions committed in all"
    );
    assert!(
        done < CALLS,
        "the kill landed during the load ({at_kill} committed when it was sent)"
    );
    // Restart: the new server recovers the dead one's sagas.
    let (mut again, _) = serve(&ws);
    let _ = again.kill();
    let _ = again.wait();
    let store = open_store(&ws);
    let sagas = block_on(store.sagas(10_000)).unwrap();
    let log = block_on(store.log(None)).unwrap();
    let mut begins: BTreeMap<(String, u64), usize> = BTreeMap::new();
    for r in &log {
        if r.record == "BEGIN"
            && let Some(s) = r.step_seq
        {
            *begins.entry((r.saga_id.clone(), s)).or_default() += 1;
        }
    }
    assert!(begins.values().all(|&n| n == 1), "a step began twice");
    let mut done_sagas = 0;
    for s in sagas.iter().filter(|s| s.origin == "mcp") {
        let state = s.state.to_string();
        assert!(
            state == "Done" || state == "FailedRolledBack",
            "saga {} left {state}",
            s.saga_id
        );
        let steps = block_on(capsaga_store::StepStore::steps(&store, &s.saga_id)).unwrap();
        for st in &steps {
            let status = st.status.as_str().to_string();
            if state == "Done" {
                assert_eq!(status, "COMMIT", "{st:?}");
                done_sagas += 1;
            } else if st.has_side_effects {
                assert!(
                    matches!(status.as_str(), "COMPENSATED" | "FAIL"),
                    "a rolled back saga's step is {status}"
                );
            }
            // A read-only step of a rolled-back saga has nothing to undo:
            // recovery leaves it as the crash did (BEGIN or COMMIT).
            if st.tool_id == "fs_write" {
                let path = st.args["path"].as_str().unwrap();
                let exists = std::path::Path::new(path).exists();
                assert_eq!(exists, state == "Done", "{path} in a {state} saga");
            }
        }
    }
    assert!(done_sagas >= done, "every session that committed is Done");
}
