//! Approvals end to end, with the real `capsaga` binary, real components and
//! a real SQLite file: a step that needs a human parks its saga with a
//! summary from the tool's dry-run; `capsaga approve` lets exactly that call
//! (tool hash + args hash) run once, even across a SIGKILL and a restart;
//! `capsaga deny` rolls the parked saga back; the agent loop asks on a real
//! terminal (a pty from `script`) or ends the turn `user_aborted` with
//! nothing executed, and claims an approval given earlier with the CLI.

use capsaga_core::approval::ApprovalStatus;
use capsaga_core::fsm::State;
use capsaga_host::agent::runner::{TurnOptions, run_turn};
use capsaga_host::agent::scripted::ScriptedProvider;
use capsaga_host::agent::trace::{Outcome, PolicyDecision, TraceStep};
use capsaga_host::store::sqlite::SqliteStore;
use capsaga_host::store::{ApprovalStore, StepStatus, StepStore};
use capsaga_tests::block_on;
use capsaga_tests::{TestWorkspace, capsaga_bin};
use serde_json::{Value, json};
use std::process::{Output, Stdio};

const POLICY: &str = r#"
[tools.fs_write]
grants = ["fs:write:~/ws/**"]
[tools.ledger]
grants = ["fs:write:~/ws/**"]
approval = "always"
# Its journal file counts executions: the host must not roll it back.
host_rollback = false
[tools.spin]
limits = { deadline_ms = 8000 }
"#;

fn ws() -> TestWorkspace {
    TestWorkspace::new(&["fs_write", "ledger", "spin"], POLICY)
}

fn json_of(o: &Output) -> Value {
    serde_json::from_slice(&o.stdout).unwrap_or_else(|e| {
        panic!(
            "not JSON ({e}): {}\nstderr: {}",
            String::from_utf8_lossy(&o.stdout),
            String::from_utf8_lossy(&o.stderr)
        )
    })
}

fn plan(ws: &TestWorkspace, name: &str, steps: Value) -> String {
    let p = ws.root.join(name);
    std::fs::write(&p, json!({"description": name, "steps": steps}).to_string()).unwrap();
    p.to_string_lossy().into_owned()
}

fn ledger_step(ws: &TestWorkspace, entry: &str) -> Value {
    json!({"tool": "ledger", "args": {"path": ws.ws_path("ledger.txt"), "entry": entry}})
}

fn journal(ws: &TestWorkspace) -> String {
    std::fs::read_to_string(ws.ws().join("ledger.txt.journal")).unwrap_or_default()
}

fn executes(ws: &TestWorkspace) -> usize {
    journal(ws)
        .lines()
        .filter(|l| l.starts_with("execute "))
        .count()
}

fn db(ws: &TestWorkspace) -> SqliteStore {
    capsaga_tests::open_store(ws)
}

#[test]
fn parked_plan_is_approved_resumed_and_runs_once() {
    let ws = ws();
    let p = plan(
        &ws,
        "pay.json",
        json!([
            {"tool": "fs_write", "args": {"path": ws.ws_path("a.txt"), "content": "A"}},
            ledger_step(&ws, "pay 10"),
        ]),
    );
    let run = ws
        .capsaga(&["--json", "run", "--plan", &p])
        .output()
        .unwrap();
    assert_eq!(run.status.code(), Some(10), "{run:?}");
    let report = json_of(&run);
    assert_eq!(report["final_state"], "AwaitingApproval");
    assert_eq!(report["steps"][1]["status"], "awaiting_approval");
    let approval = &report["awaiting_approval"];
    let id = approval["approval_id"].as_str().unwrap().to_string();
    // The summary is the tool's dry-run, run read-only: nothing was written.
    assert_eq!(
        approval["summary"],
        format!("Would append `pay 10` to {}", ws.ws_path("ledger.txt"))
    );
    assert_eq!(approval["preview"]["data"]["entry"], "pay 10");
    assert_eq!(approval["binding"]["tool_hash"].as_str().unwrap().len(), 64);
    assert_eq!(approval["binding"]["args_hash"].as_str().unwrap().len(), 64);
    assert!(!ws.ws().join("ledger.txt").exists());
    assert_eq!(executes(&ws), 0);
    let saga = report["saga_id"].as_str().unwrap().to_string();

    let list = json_of(&ws.capsaga(&["--json", "approvals"]).output().unwrap());
    assert_eq!(list["approvals"].as_array().unwrap().len(), 1);
    assert_eq!(list["approvals"][0]["status"], "pending");

    // A prefix is enough; an approved approval is listed with --all only.
    let ok = ws.capsaga(&["approve", &id[..8]]).output().unwrap();
    assert!(ok.status.success(), "{ok:?}");
    assert!(String::from_utf8_lossy(&ok.stdout).contains("capsaga resume --saga"));
    let list = json_of(&ws.capsaga(&["--json", "approvals"]).output().unwrap());
    assert_eq!(list["approvals"], json!([]));

    let resumed = ws
        .capsaga(&["--json", "resume", "--saga", &saga])
        .output()
        .unwrap();
    assert_eq!(resumed.status.code(), Some(0), "{resumed:?}");
    let r = json_of(&resumed);
    assert_eq!(r["final_state"], "Done");
    assert_eq!(r["steps"][0]["status"], "replayed");
    assert_eq!(r["steps"][1]["status"], "committed");
    assert_eq!(executes(&ws), 1);

    // Resuming again replays; nothing runs a second time.
    let again = ws
        .capsaga(&["--json", "resume", "--saga", &saga])
        .output()
        .unwrap();
    assert_eq!(json_of(&again)["steps"][1]["status"], "replayed");
    assert_eq!(executes(&ws), 1);

    // The approval was claimed once; a new saga with the same call parks
    // again, and a claimed approval cannot be approved again.
    let a = block_on(db(&ws).approval(&id)).unwrap();
    assert_eq!(a.status, ApprovalStatus::Claimed);
    assert_eq!(a.claimed_saga.as_deref(), Some(saga.as_str()));
    assert_eq!(a.claimed_step, Some(1));
    let rerun = ws
        .capsaga(&["--json", "run", "--plan", &p])
        .output()
        .unwrap();
    assert_eq!(rerun.status.code(), Some(10));
    assert_ne!(json_of(&rerun)["awaiting_approval"]["approval_id"], id);
    let twice = ws.capsaga(&["approve", &id]).output().unwrap();
    assert_eq!(twice.status.code(), Some(7), "{twice:?}");
    assert_eq!(executes(&ws), 1);

    let audit = ws.capsaga(&["audit", "verify"]).output().unwrap();
    assert!(audit.status.success(), "{audit:?}");
}

/// seed 003: "an approved action is claimed at most once, so a restart
/// cannot run it twice".
#[test]
fn approved_step_then_sigkill_then_restart_ran_exactly_once() {
    let ws = ws();
    let p = plan(
        &ws,
        "pay_then_slow.json",
        json!([ledger_step(&ws, "pay 10"), {"tool": "spin", "args": {}}]),
    );
    let run = ws
        .capsaga(&["--json", "run", "--plan", &p])
        .output()
        .unwrap();
    assert_eq!(run.status.code(), Some(10));
    let report = json_of(&run);
    let saga = report["saga_id"].as_str().unwrap().to_string();
    let id = report["awaiting_approval"]["approval_id"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(
        ws.capsaga(&["approve", &id])
            .output()
            .unwrap()
            .status
            .success()
    );

    // Resume, and SIGKILL the host once the approved step has run (spin is
    // burning its deadline after it).
    let mut child = ws
        .capsaga(&["resume", "--saga", &saga])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    // Killed once the approved step committed and spin began after it.
    let d = db(&ws);
    capsaga_tests::wait_until("the approved step run, then spin begun", || {
        assert!(
            child.try_wait().unwrap().is_none(),
            "resume ended before spin ran"
        );
        let steps = block_on(capsaga_host::store::StepStore::steps(&d, &saga)).unwrap();
        executes(&ws) == 1 && steps.iter().any(|s| s.tool_id == "spin")
    });
    drop(d);
    assert!(child.try_wait().unwrap().is_none());
    child.kill().unwrap();
    child.wait().unwrap();

    // Restart: the same resume. Recovery at start-up finishes the saga
    // (rolled back: the crash interrupted it), and nothing runs again.
    let restart = ws
        .capsaga(&["--json", "resume", "--saga", &saga])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&restart.stderr);
    assert!(
        stderr.contains(&format!("recovered saga {saga}")),
        "{stderr}"
    );
    assert_eq!(json_of(&restart)["final_state"], "FailedRolledBack");
    // Another plan run with the same call cannot reuse the approval.
    let rerun = ws
        .capsaga(&["--json", "run", "--plan", &p])
        .output()
        .unwrap();
    assert_eq!(rerun.status.code(), Some(10), "{rerun:?}");

    let j = journal(&ws);
    assert_eq!(executes(&ws), 1, "journal:\n{j}");
    let key = j
        .lines()
        .find_map(|l| l.strip_prefix("execute "))
        .unwrap()
        .to_string();
    assert!(
        j.lines().any(|l| l == format!("compensate {key}")),
        "journal:\n{j}"
    );
    assert_eq!(
        std::fs::read_to_string(ws.ws().join("ledger.txt")).unwrap_or_default(),
        ""
    );
    let d = db(&ws);
    let a = block_on(d.approval(&id)).unwrap();
    assert_eq!(a.status, ApprovalStatus::Claimed);
    let steps = block_on(d.steps(&saga)).unwrap();
    assert_eq!(steps[0].status, StepStatus::Compensated);
    assert_eq!(steps[0].idempotency_key, key);
    assert!(
        ws.capsaga(&["audit", "verify"])
            .output()
            .unwrap()
            .status
            .success()
    );
}

#[test]
fn deny_rolls_the_parked_saga_back() {
    let ws = ws();
    let p = plan(
        &ws,
        "deny.json",
        json!([
            {"tool": "fs_write", "args": {"path": ws.ws_path("a.txt"), "content": "A"}},
            ledger_step(&ws, "pay 99"),
        ]),
    );
    let report = json_of(
        &ws.capsaga(&["--json", "run", "--plan", &p])
            .output()
            .unwrap(),
    );
    let saga = report["saga_id"].as_str().unwrap().to_string();
    let id = report["awaiting_approval"]["approval_id"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(ws.ws().join("a.txt").exists());
    let denied = ws
        .capsaga(&["--json", "deny", &id, "--note", "not today"])
        .output()
        .unwrap();
    assert!(denied.status.success(), "{denied:?}");
    let d = json_of(&denied);
    assert_eq!(d["approval"]["status"], "denied");
    assert_eq!(d["rollback"]["final_state"], "FailedRolledBack");
    assert!(
        !ws.ws().join("a.txt").exists(),
        "the parked saga's write survived"
    );
    assert_eq!(executes(&ws), 0);
    // Nothing can revive it.
    let resumed = ws
        .capsaga(&["--json", "resume", "--saga", &saga])
        .output()
        .unwrap();
    assert_eq!(json_of(&resumed)["final_state"], "FailedRolledBack");
    assert_eq!(
        ws.capsaga(&["approve", &id])
            .output()
            .unwrap()
            .status
            .code(),
        Some(7)
    );
    assert_eq!(executes(&ws), 0);
}

/// Appends a custom section to a component: still a valid component, with
/// the same tool inside, but different bytes (a different content hash).
fn with_custom_section(bytes: &[u8]) -> Vec<u8> {
    let name = b"capsaga-test";
    let payload = b"changed";
    let mut section = vec![name.len() as u8];
    section.extend_from_slice(name);
    section.extend_from_slice(payload);
    let mut out = bytes.to_vec();
    out.push(0);
    out.push(section.len() as u8);
    out.extend_from_slice(&section);
    out
}

#[test]
fn approval_binds_the_exact_component_and_arguments() {
    let ws = ws();
    let px = plan(&ws, "x.json", json!([ledger_step(&ws, "x")]));
    let py = plan(&ws, "y.json", json!([ledger_step(&ws, "y")]));
    let rx = json_of(
        &ws.capsaga(&["--json", "run", "--plan", &px])
            .output()
            .unwrap(),
    );
    let id = rx["awaiting_approval"]["approval_id"]
        .as_str()
        .unwrap()
        .to_string();
    let saga_x = rx["saga_id"].as_str().unwrap().to_string();
    assert!(
        ws.capsaga(&["approve", &id])
            .output()
            .unwrap()
            .status
            .success()
    );
    // Other arguments: the approval of x does not cover y.
    let ry = ws
        .capsaga(&["--json", "run", "--plan", &py])
        .output()
        .unwrap();
    assert_eq!(ry.status.code(), Some(10));
    assert_ne!(json_of(&ry)["awaiting_approval"]["approval_id"], id);
    assert_eq!(executes(&ws), 0);

    // Another component under the same tool name: the approval is void.
    let wasm = ws.root.join("tools/ledger.wasm");
    let changed = with_custom_section(&std::fs::read(&wasm).unwrap());
    std::fs::write(&wasm, changed).unwrap();
    let resumed = ws
        .capsaga(&["--json", "resume", "--saga", &saga_x])
        .output()
        .unwrap();
    let r = json_of(&resumed);
    assert_eq!(r["steps"][0]["status"], "refused", "{r}");
    let msg = r["steps"][0]["error"]["message"].as_str().unwrap();
    assert!(msg.contains("component of `ledger` changed"), "{msg}");
    assert_eq!(r["final_state"], "FailedRolledBack");
    assert_eq!(executes(&ws), 0);
    let a = block_on(db(&ws).approval(&id)).unwrap();
    assert_eq!(
        a.status,
        ApprovalStatus::Approved,
        "a refused call must not consume the approval"
    );
}

fn scripted(ws: &TestWorkspace, name: &str, script: &Value) -> ScriptedProvider {
    let p = ws.root.join(name);
    std::fs::write(&p, script.to_string()).unwrap();
    ScriptedProvider::from_file(&p, &ws.root).unwrap()
}

fn pay_script(ws: &TestWorkspace) -> Value {
    json!({"turns": [
        {"text": "note it", "tool_calls": [{"name": "fs_write", "arguments": {"path": ws.ws_path("note.txt"), "content": "paying"}}]},
        {"text": "pay", "tool_calls": [{"name": "ledger", "arguments": {"path": ws.ws_path("ledger.txt"), "entry": "agent pay"}}]},
        {"text": "Paid."}
    ]})
}

#[tokio::test(flavor = "multi_thread")]
async fn agent_without_a_human_aborts_then_claims_a_cli_approval_once() {
    let ws = ws();
    let host = ws.host().await;
    let script = pay_script(&ws);

    // No terminal: the turn ends user_aborted, nothing executed, and the
    // write made earlier in the turn is rolled back.
    let p = scripted(&ws, "s1.json", &script);
    let tr = run_turn(&host, &p, "pay", &TurnOptions::default())
        .await
        .unwrap();
    assert_eq!(tr.outcome, Outcome::UserAborted, "{tr:#?}");
    assert_eq!(tr.saga_state, Some(State::FailedRolledBack));
    assert_eq!(executes(&ws), 0);
    assert!(!ws.ws().join("note.txt").exists());
    let answer = tr.final_response.clone().unwrap();
    assert!(answer.contains("capsaga approve"), "{answer}");
    let action = tr
        .steps
        .iter()
        .filter_map(|s| match s {
            TraceStep::Action {
                tool_name,
                policy_decision,
                ..
            } if tool_name == "ledger" => Some(*policy_decision),
            _ => None,
        })
        .next();
    assert_eq!(action, Some(PolicyDecision::ApproveRequired));
    let pending = host.store.approvals(false).await.unwrap();
    assert_eq!(pending.len(), 1);
    let id = pending[0].approval_id.clone();

    // The operator approves with the CLI (another process: our live turn
    // sagas are left alone by its start-up recovery).
    let ok = ws.capsaga(&["approve", &id]).output().unwrap();
    assert!(ok.status.success(), "{ok:?}");
    assert!(String::from_utf8_lossy(&ok.stdout).contains("will claim it"));

    // The same task again: the call claims the approval and runs, once.
    let p = scripted(&ws, "s2.json", &script);
    let tr2 = run_turn(&host, &p, "pay", &TurnOptions::default())
        .await
        .unwrap();
    assert_eq!(tr2.outcome, Outcome::Success, "{tr2:#?}");
    assert_eq!(executes(&ws), 1);
    let a = host.store.approval(&id).await.unwrap();
    assert_eq!(a.status, ApprovalStatus::Claimed);
    assert_eq!(a.claimed_saga, tr2.saga_id);

    // And again: claimed once, so a human is needed again.
    let p = scripted(&ws, "s3.json", &script);
    let tr3 = run_turn(&host, &p, "pay", &TurnOptions::default())
        .await
        .unwrap();
    assert_eq!(tr3.outcome, Outcome::UserAborted);
    assert_eq!(executes(&ws), 1);
}

/// The interactive path on a real terminal: `script` runs `capsaga agent`
/// on a pty and types the answer.
fn agent_on_a_tty(ws: &TestWorkspace, answer: &str) -> Output {
    let script_path = ws.root.join(format!("tty_{answer}.json"));
    std::fs::write(&script_path, pay_script(ws).to_string()).unwrap();
    let cmd = format!(
        "'{}' --config '{}' agent --script '{}' pay",
        capsaga_bin().display(),
        ws.config().display(),
        script_path.display()
    );
    let mut child = std::process::Command::new("script")
        .args(["-qec", &cmd, "/dev/null"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("util-linux `script` is needed for the terminal test");
    use std::io::Write;
    child
        .stdin
        .take()
        .unwrap()
        .write_all(format!("{answer}\n").as_bytes())
        .unwrap();
    child.wait_with_output().unwrap()
}

#[test]
fn agent_asks_on_a_terminal() {
    let ws = ws();
    let no = agent_on_a_tty(&ws, "n");
    let text = String::from_utf8_lossy(&no.stdout);
    assert!(text.contains("Run it? [y/N]"), "{text}");
    assert!(
        text.contains("Would append `agent pay`"),
        "the prompt shows the dry-run: {text}"
    );
    assert!(text.contains("outcome: user_aborted"), "{text}");
    assert_eq!(no.status.code(), Some(7), "{text}");
    assert_eq!(executes(&ws), 0);
    assert!(!ws.ws().join("note.txt").exists());

    let yes = agent_on_a_tty(&ws, "y");
    let text = String::from_utf8_lossy(&yes.stdout);
    assert!(text.contains("outcome: success"), "{text}");
    assert_eq!(yes.status.code(), Some(0), "{text}");
    assert_eq!(executes(&ws), 1);

    let all = block_on(db(&ws).approvals(true)).unwrap();
    let statuses: Vec<(ApprovalStatus, bool)> = all
        .iter()
        .map(|a| {
            (
                a.status,
                a.decided_by.as_deref().unwrap_or("").starts_with("tty:"),
            )
        })
        .collect();
    assert_eq!(
        statuses,
        [
            (ApprovalStatus::Denied, true),
            (ApprovalStatus::Claimed, true)
        ]
    );
}

// ---- issue 13, items 1 and 2: an approval binds to the saga that asked,
// still describes what will run, and expires.

fn run_plan(ws: &TestWorkspace, p: &str) -> Value {
    let o = ws
        .capsaga(&["--json", "run", "--plan", p])
        .output()
        .unwrap();
    json_of(&o)
}

fn resume(ws: &TestWorkspace, saga: &str) -> (Option<i32>, Value) {
    let o = ws
        .capsaga(&["--json", "resume", "--saga", saga])
        .output()
        .unwrap();
    (o.status.code(), json_of(&o))
}

fn approve(ws: &TestWorkspace, id: &str) {
    let ok = ws.capsaga(&["approve", id]).output().unwrap();
    assert!(ok.status.success(), "{ok:?}");
}

#[tokio::test(flavor = "multi_thread")]
async fn only_the_parked_saga_claims_its_approval() {
    let ws = ws();
    let p1 = plan(&ws, "pay1.json", json!([ledger_step(&ws, "pay 10")]));
    let parked = run_plan(&ws, &p1);
    let saga = parked["saga_id"].as_str().unwrap().to_string();
    let id = parked["awaiting_approval"]["approval_id"]
        .as_str()
        .unwrap()
        .to_string();
    approve(&ws, &id);

    // Another plan making the byte-identical call parks on its own approval.
    let p2 = plan(&ws, "pay2.json", json!([ledger_step(&ws, "pay 10")]));
    let other = run_plan(&ws, &p2);
    assert_eq!(other["final_state"], "AwaitingApproval", "{other}");
    assert_ne!(other["awaiting_approval"]["approval_id"], id.as_str());
    // So does a `capsaga call` process.
    let args = ledger_step(&ws, "pay 10")["args"].to_string();
    let call = ws
        .capsaga(&["--json", "call", "ledger", &args])
        .output()
        .unwrap();
    assert_eq!(call.status.code(), Some(10), "{call:?}");
    let own = &json_of(&call)["result"]["awaiting_approval"]["approval_id"];
    assert!(own.is_string() && own != id.as_str(), "{own}");
    // And an agent turn (no terminal): it ends without running the call.
    let host = ws.host().await;
    let script = json!({"turns": [
        {"text": "pay", "tool_calls": [{"name": "ledger", "arguments": ledger_step(&ws, "pay 10")["args"]}]},
        {"text": "Paid."}
    ]});
    let p = scripted(&ws, "same_call.json", &script);
    let tr = run_turn(&host, &p, "pay", &TurnOptions::default())
        .await
        .unwrap();
    assert_eq!(tr.outcome, Outcome::UserAborted, "{tr:#?}");
    assert_eq!(
        executes(&ws),
        0,
        "nobody consumed the parked saga's approval"
    );
    let a = host.store.approval(&id).await.unwrap();
    assert_eq!(a.status, ApprovalStatus::Approved);

    // The parked plan resumes and runs once.
    let (code, r) = resume(&ws, &saga);
    assert_eq!(code, Some(0), "{r}");
    assert_eq!(r["final_state"], "Done");
    assert_eq!(executes(&ws), 1);
    let a = host.store.approval(&id).await.unwrap();
    assert_eq!(a.status, ApprovalStatus::Claimed);
    assert_eq!(a.claimed_saga.as_deref(), Some(saga.as_str()));
    let audit = ws.capsaga(&["audit", "verify"]).output().unwrap();
    assert!(audit.status.success(), "{audit:?}");
}

const WRITE_POLICY: &str = r#"
[tools.fs_write]
grants = ["fs:write:~/ws/**"]
approval = "always"
"#;

/// Approve a write of `out.txt`, let `meanwhile` change the world, resume:
/// the approval is stale, the step parks again showing the difference
/// (`expect` in the new summary), nothing is written; approving the new
/// approval then runs the write once.
fn stale_case(before: Option<&str>, meanwhile: impl FnOnce(&std::path::Path), expect: &str) {
    let ws = TestWorkspace::new(&["fs_write"], WRITE_POLICY);
    let out = ws.ws().join("out.txt");
    if let Some(b) = before {
        std::fs::write(&out, b).unwrap();
    }
    let step =
        json!({"tool": "fs_write", "args": {"path": ws.ws_path("out.txt"), "content": "ours"}});
    let p = plan(&ws, "w.json", json!([step]));
    let parked = run_plan(&ws, &p);
    let saga = parked["saga_id"].as_str().unwrap().to_string();
    let id = parked["awaiting_approval"]["approval_id"]
        .as_str()
        .unwrap()
        .to_string();
    approve(&ws, &id);
    meanwhile(&out);
    let after_change = std::fs::read(&out).ok();

    let (code, r) = resume(&ws, &saga);
    assert_eq!(code, Some(10), "stale: parked again: {r}");
    let new = &r["awaiting_approval"];
    let new_id = new["approval_id"].as_str().unwrap().to_string();
    assert_ne!(new_id, id);
    let summary = new["summary"].as_str().unwrap();
    assert!(summary.contains("stale"), "{summary}");
    assert!(summary.contains(expect), "{summary}");
    assert_eq!(new["replaces"], id.as_str());
    assert_eq!(std::fs::read(&out).ok(), after_change, "nothing written");
    let old = block_on(db(&ws).approval(&id)).unwrap();
    assert_eq!(old.status, ApprovalStatus::Stale);

    approve(&ws, &new_id);
    let (code, r) = resume(&ws, &saga);
    assert_eq!(code, Some(0), "{r}");
    assert_eq!(std::fs::read_to_string(&out).unwrap(), "ours");
    let audit = ws.capsaga(&["audit", "verify"]).output().unwrap();
    assert!(audit.status.success(), "{audit:?}");
}

#[test]
fn an_approval_goes_stale_when_the_file_is_created_changed_or_deleted() {
    stale_case(
        None,
        |p| std::fs::write(p, "theirs").unwrap(),
        "Would replace",
    );
    stale_case(
        Some("v1"),
        |p| std::fs::write(p, "v2").unwrap(),
        "pre-image",
    );
    stale_case(
        Some("v1"),
        |p| std::fs::remove_file(p).unwrap(),
        "Would create",
    );
}

/// Wait until the clock is past `at` (an RFC 3339 UTC timestamp as the
/// store writes them, which sort as text).
fn past(at: &str) {
    capsaga_tests::wait_until(&format!("the clock past {at}"), || {
        capsaga_host::clock::now_rfc3339().as_str() > at
    });
}

#[test]
fn approvals_expire_and_cannot_be_claimed_or_decided_after() {
    let ws = TestWorkspace::new(
        &["fs_write"],
        &format!("{WRITE_POLICY}\n[approvals]\nttl = \"4s\"\n"),
    );
    let step = json!({"tool": "fs_write", "args": {"path": ws.ws_path("out.txt"), "content": "x"}});
    // Approved in time, resumed too late: asked again, nothing written.
    let p = plan(&ws, "a.json", json!([step]));
    let parked = run_plan(&ws, &p);
    let saga = parked["saga_id"].as_str().unwrap().to_string();
    let id = parked["awaiting_approval"]["approval_id"]
        .as_str()
        .unwrap()
        .to_string();
    let expires = parked["awaiting_approval"]["expires_at"]
        .as_str()
        .expect("expires_at")
        .to_string();
    approve(&ws, &id);
    let listed = ws.capsaga(&["approvals", "--all"]).output().unwrap();
    assert!(String::from_utf8_lossy(&listed.stdout).contains("expires at"));
    past(&expires);
    let (code, r) = resume(&ws, &saga);
    assert_eq!(code, Some(10), "{r}");
    assert!(!ws.ws().join("out.txt").exists());
    assert_eq!(
        block_on(db(&ws).approval(&id)).unwrap().status,
        ApprovalStatus::Expired
    );
    // Pending, then too late to approve: refused, and recorded as expired.
    let late = r["awaiting_approval"]["approval_id"]
        .as_str()
        .unwrap()
        .to_string();
    past(
        r["awaiting_approval"]["expires_at"]
            .as_str()
            .expect("expires_at"),
    );
    let refused = ws.capsaga(&["approve", &late]).output().unwrap();
    assert_eq!(refused.status.code(), Some(7), "{refused:?}");
    assert!(String::from_utf8_lossy(&refused.stderr).contains("expired"));
    assert_eq!(
        block_on(db(&ws).approval(&late)).unwrap().status,
        ApprovalStatus::Expired
    );
    assert!(!ws.ws().join("out.txt").exists());
    let audit = ws.capsaga(&["audit", "verify"]).output().unwrap();
    assert!(audit.status.success(), "{audit:?}");
}
