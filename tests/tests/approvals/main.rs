//! Approvals end to end, with the real `capsaga` binary, real components and
//! a real SQLite file: a step that needs a human parks its saga with a
//! summary from the tool's dry-run; `capsaga approve` lets exactly that call
//! (tool hash + args hash) run once, even across a SIGKILL and a restart;
//! `capsaga deny` rolls the parked saga back; the agent loop asks on a real
//! terminal (a pty from `script`) or ends the turn `user_aborted` with
//! nothing executed, and claims an approval given earlier with the CLI.

mod agent;
mod binding;
mod rebuilt;
mod strict;

use capsaga_agent::runner::{TurnOptions, run_turn};
use capsaga_agent::scripted::ScriptedProvider;
use capsaga_agent::trace::{Outcome, PolicyDecision, TraceStep};
use capsaga_core::approval::ApprovalStatus;
use capsaga_core::fsm::State;
use capsaga_store::sqlite::SqliteStore;
use capsaga_store::{ApprovalStore, StepStatus, StepStore};
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

    // Resuming again: the saga has ended, said so (exit 12); nothing runs
    // a second time.
    let again = ws
        .capsaga(&["--json", "resume", "--saga", &saga])
        .output()
        .unwrap();
    assert_eq!(again.status.code(), Some(12), "{again:?}");
    assert_eq!(json_of(&again)["final_state"], "Done");
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
    // Already decided (claimed): its own exit code.
    assert_eq!(twice.status.code(), Some(13), "{twice:?}");
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
        let steps = block_on(capsaga_store::StepStore::steps(&d, &saga)).unwrap();
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
        Some(13)
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
