//! Any process serves any saga, at once, and a gated effect runs once
//! (issue 48), on a real PostgreSQL with real `capsaga` processes:
//!
//! - a `capsaga call` parked for an approval lets go of its lease when it
//!   exits: the saga is resumable at once, from any process (the lease is a
//!   minute here, so nothing but the release can explain it); eight
//!   concurrent `capsaga resume` run the approved call once (one resumes,
//!   the others are told busy or ended), a resume of the Done saga says so
//!   (exit 12), a second decision says "already decided" (exit 13);
//! - a `capsaga serve` stopped by SIGTERM or SIGINT is dead at once for the
//!   other hosts; one killed (SIGKILL) keeps its lease until it expires;
//! - eight concurrent retries of an approved call through a saga handle, on
//!   one host and over three, run it once;
//! - a 2025-11-25 session asked of another host is refused naming the host
//!   that owns it (sessions are sticky).
//!
//! The effect is the `ledger` component's: every execute leaves a line in
//! its journal, so an effect run twice shows.

use super::handles::owner_of;
use super::rig::{Rig, approve, lines, runtime};
use super::wire::call;
use capsaga_core::fsm::State;
use capsaga_tests::mcp_rig::http;
use serde_json::{Value, json};
use std::process::{Command, Output, Stdio};

/// A lease far longer than any of these tests: what is released at once
/// was released, not expired.
const LONG_LEASE_MS: u64 = 60_000;

fn policy() -> String {
    format!(
        "store_lease_ms = {LONG_LEASE_MS}\n[tools.ledger]\ngrants = [\"fs:write:~/ws/**\"]\napproval = \"always\"\nhost_rollback = false\nlimits = {{ deadline_ms = 60000 }}\n"
    )
}

/// The `execute` lines of a ledger's journal.
pub fn executes(journal: &std::path::Path) -> usize {
    lines(journal)
        .iter()
        .filter(|l| l.starts_with("execute "))
        .count()
}

fn json_of(o: &Output) -> Value {
    serde_json::from_slice(&o.stdout).unwrap_or_else(|e| panic!("{e}: {o:?}"))
}

/// `capsaga` on the rig's workspace and database.
fn cli(rig: &Rig, args: &[&str]) -> Command {
    let mut c = rig.ws.capsaga(args);
    c.env("CAPSAGA_STORE", &rig.url)
        .env_remove("CAPSAGA_TOKEN")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    c
}

#[test]
fn a_parked_call_is_resumable_at_once_and_eight_concurrent_resumes_run_it_once() {
    let Some(rig) = Rig::with_policy("multi_host::once::cli", 0, &policy()) else {
        return;
    };
    let (ledger, journal) = rig.ledger("ledger.txt");
    let rt = runtime();
    let store = rt.block_on(rig.store());
    let args = json!({"path": ledger, "entry": "pay 10"}).to_string();
    let parked = cli(&rig, &["--json", "call", "ledger", &args])
        .output()
        .unwrap();
    assert_eq!(parked.status.code(), Some(10), "{parked:?}");
    let p = json_of(&parked);
    let saga = p["saga_id"].as_str().unwrap().to_string();
    let approval = p["result"]["awaiting_approval"]["approval_id"]
        .as_str()
        .unwrap_or_else(|| panic!("{p}"))
        .to_string();
    // The call's process has exited: it owns nothing any more.
    let row = rt.block_on(store.saga(&saga)).unwrap().unwrap();
    let owner = row.owner.clone().expect("the call's process owned it");
    assert!(!rt.block_on(store.owner_alive(&owner)).unwrap());
    assert!(rt.block_on(store.live_owners()).unwrap().is_empty());

    let ok = cli(&rig, &["approve", &approval]).output().unwrap();
    assert_eq!(ok.status.code(), Some(0), "{ok:?}");
    // Eight resumes at once: one runs the call, once.
    let children: Vec<_> = (0..8)
        .map(|_| {
            cli(&rig, &["--json", "resume", "--saga", &saga])
                .spawn()
                .unwrap()
        })
        .collect();
    let outs: Vec<Output> = children
        .into_iter()
        .map(|c| c.wait_with_output().unwrap())
        .collect();
    let codes: Vec<Option<i32>> = outs.iter().map(|o| o.status.code()).collect();
    let resumed: Vec<&Output> = outs.iter().filter(|o| o.status.success()).collect();
    assert_eq!(resumed.len(), 1, "one resume runs it: {codes:?} {outs:?}");
    assert_eq!(json_of(resumed[0])["final_state"], "Done");
    for c in &codes {
        assert!(
            matches!(c, Some(0 | 11 | 12)),
            "the others are busy or ended: {codes:?}"
        );
    }
    assert_eq!(executes(&journal), 1, "{:?}", lines(&journal));
    assert_eq!(lines(std::path::Path::new(&ledger)).len(), 1);

    // A Done saga: said so at once, with its own code; nothing runs.
    let again = cli(&rig, &["--json", "resume", "--saga", &saga])
        .output()
        .unwrap();
    assert_eq!(again.status.code(), Some(12), "{again:?}");
    let a = json_of(&again);
    assert_eq!(a["final_state"], "Done");
    assert_eq!(a["ended"], true);
    assert_eq!(executes(&journal), 1);
    // A second decision loses: "already decided", exit 13.
    for verb in ["approve", "deny"] {
        let o = cli(&rig, &[verb, &approval]).output().unwrap();
        assert_eq!(o.status.code(), Some(13), "{verb}: {o:?}");
        assert!(
            String::from_utf8_lossy(&o.stderr).contains("already"),
            "{o:?}"
        );
    }
    let row = rt.block_on(store.saga(&saga)).unwrap().unwrap();
    assert_eq!(row.state, State::Done);
    assert!(rt.block_on(store.live_owners()).unwrap().is_empty());
    let report = rt
        .block_on(capsaga_store::audit::verify(&*store, None))
        .unwrap();
    assert!(report.ok(), "{report:?}");
}

/// Send `signal` (a `kill` name: TERM, INT) to host `i` and wait for it to
/// exit; its exit status.
fn signal(rig: &mut Rig, i: usize, signal: &str) -> std::process::ExitStatus {
    let mut h = rig.hosts[i].take().expect("host alive");
    let sent = Command::new("kill")
        .arg(format!("-{signal}"))
        .arg(h.child.id().to_string())
        .status()
        .unwrap();
    assert!(sent.success());
    h.child.wait().unwrap()
}

#[test]
fn a_host_stopped_by_sigterm_or_sigint_lets_go_at_once_and_a_killed_one_keeps_its_lease() {
    let Some(mut rig) = Rig::with_policy("multi_host::once::signals", 3, &policy()) else {
        return;
    };
    let rt = runtime();
    let store = rt.block_on(rig.store());
    let owners: Vec<String> = (0..3).map(|i| rt.block_on(owner_of(&rig, i))).collect();
    let alive = |id: &str| rt.block_on(store.owner_alive(id)).unwrap();
    assert!(owners.iter().all(|o| alive(o)));
    let term = signal(&mut rig, 0, "TERM");
    assert_eq!(term.code(), Some(0), "{term:?}");
    assert!(!alive(&owners[0]), "SIGTERM: released before exit");
    let int = signal(&mut rig, 1, "INT");
    assert_eq!(int.code(), Some(0), "{int:?}");
    assert!(!alive(&owners[1]), "SIGINT: released before exit");
    rig.kill(2);
    assert!(
        alive(&owners[2]),
        "a killed host keeps its lease until it expires"
    );
    let live: Vec<String> = rt
        .block_on(store.live_owners())
        .unwrap()
        .into_iter()
        .map(|o| o.owner_id)
        .collect();
    assert_eq!(live, [owners[2].clone()]);
}

#[test]
fn eight_concurrent_retries_of_an_approved_handle_call_run_it_once_on_one_host_and_over_three() {
    let Some(rig) = Rig::with_policy("multi_host::once::handles", 3, &policy()) else {
        return;
    };
    let rt = runtime();
    rt.block_on(async {
        for (round, spread) in [("one-host", 1usize), ("three-hosts", 3)] {
            let (ledger, journal) = rig.ledger(&format!("{round}.txt"));
            let args = json!({"path": ledger, "entry": round});
            let first = call(&rig.mcp(0), "ledger", args.clone(), Some("new")).await;
            let err = &first["result"]["structuredContent"]["error"];
            assert_eq!(err["approval_status"], "pending", "{first}");
            let saga = err["saga_id"].as_str().unwrap().to_string();
            let id = err["approval_id"].as_str().unwrap().to_string();
            approve(&rig, 2, &id).await;
            let mut retries = tokio::task::JoinSet::new();
            for k in 0..8 {
                let (url, args, saga) = (rig.mcp(k % spread), args.clone(), saga.clone());
                retries.spawn(async move { call(&url, "ledger", args, Some(&saga)).await });
            }
            let mut ran = 0;
            let mut answers = Vec::new();
            while let Some(v) = retries.join_next().await {
                let v = v.unwrap();
                if v["result"]["isError"] == false {
                    ran += 1;
                }
                answers.push(v);
            }
            assert_eq!(ran, 1, "{round}: {answers:#?}");
            assert_eq!(executes(&journal), 1, "{round}: {:?}", lines(&journal));
            let row = rig.store().await.approval(&id).await.unwrap();
            assert_eq!(row.claimed_saga.as_deref(), Some(saga.as_str()), "{round}");
        }
    });
}

/// A 2025-11-25 JSON-RPC request to MCP endpoint `url`, in `session`.
async fn post(url: &str, session: Option<&str>, body: &Value) -> reqwest::Response {
    let mut r = http()
        .post(url)
        .header("Accept", "application/json, text/event-stream");
    if let Some(s) = session {
        r = r
            .header("Mcp-Session-Id", s)
            .header("MCP-Protocol-Version", "2025-11-25");
    }
    r.json(body).send().await.unwrap()
}

#[test]
fn a_session_asked_of_another_host_is_refused_naming_the_host_that_owns_it() {
    let Some(rig) = Rig::with_policy("multi_host::once::sticky", 2, &policy()) else {
        return;
    };
    runtime().block_on(async {
        let owner0 = owner_of(&rig, 0).await;
        let init = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-11-25", "capabilities": {},
            "clientInfo": {"name": "sticky", "version": "1"}}});
        let r = post(&rig.mcp(0), None, &init).await;
        assert_eq!(r.status().as_u16(), 200);
        let session = r
            .headers()
            .get("mcp-session-id")
            .and_then(|v| v.to_str().ok())
            .expect("a session id")
            .to_string();
        let list = json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list", "params": {}});
        let r = post(&rig.mcp(1), Some(&session), &list).await;
        assert_eq!(r.status().as_u16(), 404);
        assert_eq!(
            r.headers()
                .get("capsaga-session-host")
                .and_then(|v| v.to_str().ok()),
            Some(owner0.as_str())
        );
        let body: Value = r.json().await.unwrap();
        let message = body["error"]["message"].as_str().unwrap_or_default();
        assert!(
            message.contains(&owner0) && message.contains("sticky"),
            "{body}"
        );
    });
}
