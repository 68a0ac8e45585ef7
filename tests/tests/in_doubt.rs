//! Steps the host stops after they ran (red-team finding F2, 2026-12-01):
//! a side-effecting tool that has already written when it traps, runs past
//! its deadline or returns more output than the host accepts must not be
//! logged FAIL ("did nothing") while its writes stay: the step is logged
//! IN_DOUBT, stays BEGIN, and the rollback compensates it from its dry-run
//! pre-image, so the saga's FailedRolledBack is true. A tool's own error
//! (it returned one: its contract says nothing was done) stays FAIL.
//!
//! Real parts: the `ledger` test component (appends, then misbehaves as
//! told), a real SQLite file, real files in a temp dir.

use capsaga_core::fsm::State;
use capsaga_door::dispatch::Dispatcher;
use capsaga_door::plan::{self, Plan, PlanStep};
use capsaga_store::StepStatus;
use capsaga_tests::{FS_POLICY, TestWorkspace};
use serde_json::json;

fn workspace() -> TestWorkspace {
    let policy = format!(
        "{FS_POLICY}\n[tools.ledger]\ngrants = [\"fs:write:~/ws/**\"]\nlimits = {{ deadline_ms = 1500 }}\nhost_rollback = false\n"
    );
    TestWorkspace::new(&["ledger"], &policy)
}

/// Run one ledger step told to misbehave with `after`; returns the saga's
/// final state, the step's status, the WAL records of the step, the ledger
/// file's text and the journal's text.
async fn run_ledger(
    ws: &TestWorkspace,
    entry: &str,
    after: Option<&str>,
) -> (State, StepStatus, Vec<String>, String, String) {
    let host = ws.host().await;
    let door = Dispatcher::new(host.clone());
    let ledger = ws.ws_path("ledger.txt");
    let mut args = json!({"path": ledger, "entry": entry});
    if let Some(a) = after {
        args["after"] = json!(a);
    }
    let plan = Plan {
        description: format!("ledger then {after:?}"),
        steps: vec![PlanStep {
            tool: "ledger".into(),
            args,
        }],
    };
    let report = plan::run(&door, &plan, None).await.unwrap();
    let steps = host.store.steps(&report.saga_id).await.unwrap();
    assert_eq!(steps.len(), 1, "{steps:?}");
    let records = host
        .store
        .log(Some(&report.saga_id))
        .await
        .unwrap()
        .into_iter()
        .filter(|r| r.step_seq.is_some())
        .map(|r| r.record)
        .collect();
    let read = |p: String| std::fs::read_to_string(p).unwrap_or_default();
    (
        report.final_state,
        steps[0].status,
        records,
        read(ledger.clone()),
        read(format!("{ledger}.journal")),
    )
}

#[tokio::test(flavor = "multi_thread")]
async fn a_step_stopped_after_it_wrote_is_compensated_from_its_preimage() {
    for after in ["trap", "spin", "big_output"] {
        let ws = workspace();
        let (state, status, records, ledger, journal) =
            run_ledger(&ws, &format!("entry-{after}"), Some(after)).await;
        assert_eq!(state, State::FailedRolledBack, "{after}: {records:?}");
        assert_eq!(status, StepStatus::Compensated, "{after}: {records:?}");
        assert!(
            records.iter().any(|r| r == "IN_DOUBT"),
            "{after}: no IN_DOUBT record: {records:?}"
        );
        assert!(
            !records.iter().any(|r| r == "FAIL"),
            "{after}: logged FAIL though it wrote: {records:?}"
        );
        assert!(
            !ledger.contains(&format!("entry-{after}")),
            "{after}: the write stayed: {ledger:?}"
        );
        assert!(
            journal.contains("execute ") && journal.contains("compensate "),
            "{after}: {journal:?}"
        );
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_tools_own_error_stays_fail_and_is_not_compensated() {
    let ws = workspace();
    // A two-line entry: the tool refuses it before writing anything.
    let (state, status, records, ledger, journal) = run_ledger(&ws, "a\nb", None).await;
    assert_eq!(state, State::FailedRolledBack, "{records:?}");
    assert_eq!(status, StepStatus::Fail, "{records:?}");
    assert!(!records.iter().any(|r| r == "IN_DOUBT"), "{records:?}");
    assert!(
        ledger.is_empty() && journal.is_empty(),
        "{ledger:?} {journal:?}"
    );
}
