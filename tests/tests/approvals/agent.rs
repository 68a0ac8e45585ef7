//! The agent loop and approvals: no human means `user_aborted` with nothing
//! run; a terminal is asked; a CLI approval given earlier is claimed once.

use super::*;

pub(crate) fn scripted(ws: &TestWorkspace, name: &str, script: &Value) -> ScriptedProvider {
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
