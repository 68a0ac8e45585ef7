//! The kill switch stops a `code_run` in progress (seed 003: "el kill
//! switch, la pausa del agente o el modo de solo lectura abortan una
//! ejecución en curso"): agent-written code looping forever, approved and
//! running in the real runner, is stopped when the operator runs `capsaga
//! pause` in another process; the step is compensated as one the host
//! stopped, the saga ends FailedRolledBack, nothing is copied out, and
//! later calls are refused until `capsaga unpause`.

use super::*;
use async_trait::async_trait;
use capsaga_core::fsm::State;
use capsaga_core::principal::{Principal, Role};
use capsaga_door::dispatch::Approver;
use capsaga_store::{ApprovalRow, StepStatus};
use std::time::{Duration, Instant};

struct Yes;

#[async_trait]
impl Approver for Yes {
    fn who(&self) -> Option<Principal> {
        Some(Principal::new("test:operator", Role::Operator))
    }

    async fn ask(&self, _a: &ApprovalRow) -> Option<bool> {
        Some(true)
    }
}

const POLICY: &str = r#"
[tools.code_run]
grants = ["fs:read:~/ws/**", "fs:write:~/ws/out/**"]
limits = { deadline_ms = 120000, fuel = 10000000000000 }
"#;

#[tokio::test(flavor = "multi_thread")]
async fn capsaga_pause_in_another_process_stops_a_running_code_run() {
    let Some(ws) = workspace(&[], POLICY, "") else {
        return;
    };
    std::fs::create_dir(ws.ws().join("out")).unwrap();
    let (host, door) = door(&ws).await;
    let mut saga = door
        .start(Scope::Call, "code_run under pause", None)
        .await
        .unwrap();
    let saga_id = saga.id().to_string();
    let args = json!({
        "code": "import os, capsaga\nopen(os.path.join(capsaga.scratch_dir, 'partial.txt'), 'w').write('x')\nwhile True:\n    pass\n",
        "purpose": "spin until stopped",
        "inputs": {},
        "output_dir": ws.ws_path("out"),
    });
    let d = door.clone();
    let running = tokio::spawn(async move {
        let out = d
            .submit(
                &mut saga,
                Call::new("code_run", Args::Value(&args)).with_approver(&Yes),
            )
            .await
            .unwrap();
        (out, saga)
    });
    // Wait for the step's BEGIN: the code runs from then on.
    let t = Instant::now();
    loop {
        let steps = host.store.steps(&saga_id).await.unwrap();
        if steps
            .iter()
            .any(|s| s.tool_id == "code_run" && s.status == StepStatus::Begin)
        {
            break;
        }
        assert!(
            t.elapsed() < Duration::from_secs(120),
            "code_run never began"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let out = ws
        .capsaga(&["pause", "--note", "stop the code"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let t = Instant::now();
    let (submitted, saga) = tokio::time::timeout(Duration::from_secs(60), running)
        .await
        .expect("the running code_run is stopped")
        .unwrap();
    eprintln!(
        "pause: code_run stopped {} ms after `capsaga pause` returned",
        t.elapsed().as_millis()
    );
    let Outcome::Failed {
        error, rollback, ..
    } = &submitted.outcome
    else {
        panic!("{:#?}", submitted.outcome)
    };
    assert!(error.message.contains("paused"), "{error:?}");
    assert!(rollback.all_compensated(), "{rollback:?}");
    assert_eq!(saga.state(), State::FailedRolledBack);
    let row = host.store.saga(&saga_id).await.unwrap().unwrap();
    assert_eq!(row.state, State::FailedRolledBack);
    assert_eq!(
        std::fs::read_dir(ws.ws().join("out")).unwrap().count(),
        0,
        "nothing copied out"
    );
    // Paused: the next call is refused before anything runs.
    let mut next = door.start(Scope::Call, "after pause", None).await.unwrap();
    let refused = door
        .submit(
            &mut next,
            Call::new(
                "code_run",
                Args::Value(&json!({"code": "result = 1", "purpose": "p", "inputs": {}})),
            )
            .with_approver(&Yes),
        )
        .await
        .unwrap();
    assert!(
        matches!(
            refused.outcome,
            Outcome::Refused {
                refusal: capsaga_door::dispatch::Refusal::Paused,
                ..
            }
        ),
        "{:#?}",
        refused.outcome
    );
    let out = ws.capsaga(&["unpause"]).output().unwrap();
    assert!(out.status.success());
}
