//! Birth, approval and use of a neuron, through the door.

use super::*;
use capsaga_core::neuron::Status;
use capsaga_core::policy::Autonomy;
use capsaga_door::dispatch::Refusal;
use capsaga_door::neurons::operator;
use capsaga_door::plan::{self, Plan, PlanStep};
use capsaga_door::registry::ToolSource;
use capsaga_store::StepStatus;
use capsaga_tests::FS_POLICY;

#[tokio::test(flavor = "multi_thread")]
async fn a_neuron_is_born_tested_approved_and_called_through_the_door() {
    let Some(ws) = workspace(&[], "", "max_grants = [\"fs:read:~/ws/**\"]") else {
        return;
    };
    let (host, door) = door(&ws).await;
    let caps = json!([format!("fs:read:{}/**", ws.ws().display())]);
    let out = call_one(
        &door,
        "neuron_create",
        &csv_stats(csv_examples(), caps.clone()),
    )
    .await;
    let report = data(&out);
    assert_eq!(report["passed"], true, "{report:#}");
    assert_eq!(report["status"], "awaiting_operator", "{report:#}");
    assert_eq!(report["version"], 1);
    let identity = report["identity"].as_str().unwrap().to_string();
    // Not callable before the operator decides.
    assert!(host.registry.get("csv_stats").is_none());
    let row = host.store.neuron("csv_stats", None).await.unwrap().unwrap();
    assert_eq!(row.status, Status::AwaitingOperator);
    assert_eq!(
        row.saga_id.as_deref(),
        Some(out_saga(&host, &identity).await.as_str())
    );

    // The operator grants at most what was requested, and all of it.
    let home = host.config.home.to_string_lossy().into_owned();
    let other = ["net:https:example.com".to_string()];
    assert!(
        operator::approve(&*host.store, &home, &row, &other, All, "t", None)
            .await
            .is_err()
    );
    assert!(
        operator::approve(&*host.store, &home, &row, &[], All, "t", None)
            .await
            .is_err()
    );
    let star = ["fs:read:*".to_string()];
    assert!(
        operator::approve(&*host.store, &home, &row, &star, All, "t", None)
            .await
            .is_err()
    );
    // A wider grant is narrowed to the request: never more than requested.
    let wider = ["fs:write:~/**".to_string()];
    let active = operator::approve(&*host.store, &home, &row, &wider, All, "cli:test", None)
        .await
        .unwrap();
    assert_eq!(
        active.granted,
        [format!("fs:read:{}/**", ws.ws().display())]
    );
    drop(door);
    drop(host);

    // The next host has it in its catalog and calls it like any tool.
    let (host, door) = super::door(&ws).await;
    assert!(
        door.catalog(Autonomy::Autonomous)
            .iter()
            .any(|t| t.meta.name == "csv_stats")
    );
    std::fs::write(
        ws.ws().join("sales.csv"),
        "region,amount\nn,10\ns,20\ne,60\n",
    )
    .unwrap();
    let args = json!({"path": ws.ws_path("sales.csv"), "column": "amount"});
    let tool = host.registry.get("csv_stats").unwrap();
    let ToolSource::Neuron(prepared) = &tool.source else {
        panic!("csv_stats is a neuron: {:?}", tool.source)
    };
    let neuron = prepared.neuron().expect("a neuron's definition");
    assert!(
        neuron.bytecode().is_none(),
        "compiled before its first call"
    );
    let out = call_one(&door, "csv_stats", &args).await;
    assert_eq!(data(&out)["mean"], 30.0);
    // The first call compiled it once; later calls load that bytecode.
    assert!(neuron.bytecode().is_some_and(|b| !b.is_empty()));
    let steps = host.store.steps(&saga_of(&out, &host).await).await.unwrap();
    assert_eq!(
        steps[0].tool_hash, identity,
        "the WAL pins the neuron's identity"
    );
    assert_eq!(steps[0].grants, active.granted);
    // Outside the grant: refused by the sandbox, the host keeps serving.
    let outside = json!({"path": "/etc/passwd", "column": "x"});
    let out = call_one(&door, "csv_stats", &outside).await;
    assert!(
        matches!(out.outcome, Outcome::ReadFailed { .. }),
        "{:?}",
        out.outcome
    );
    let f = capsaga_door::neurons::fitness::of(&*host.store, &active)
        .await
        .unwrap();
    assert_eq!((f.calls, f.ok), (2, 1));
}

async fn out_saga(host: &Host, identity: &str) -> String {
    host.store
        .neuron_by_identity(identity)
        .await
        .unwrap()
        .unwrap()
        .saga_id
        .unwrap()
}

async fn saga_of(out: &Submitted, host: &Host) -> String {
    let Outcome::Committed { seq, .. } = &out.outcome else {
        panic!("not committed");
    };
    let _ = seq;
    host.store.sagas(1).await.unwrap()[0].saga_id.clone()
}

#[tokio::test(flavor = "multi_thread")]
async fn failing_examples_are_reported_for_the_model_and_not_activated() {
    let Some(ws) = workspace(&[], "", "auto_activate_pure = true") else {
        return;
    };
    let (host, door) = door(&ws).await;
    let mut p = csv_stats(
        json!([{"args": {"path": "$SCRATCH/a.csv", "column": "n"}, "files": {"a.csv": "n\n1\n3\n"}, "expect": {"mean": 2.0}}]),
        json!([]),
    );
    p["name"] = json!("csv_mean");
    let report = data(&call_one(&door, "neuron_create", &p).await);
    assert_eq!(report["passed"], false, "{report:#}");
    assert_eq!(report["status"], "proposed");
    assert!(
        report["llm_hint"].as_str().unwrap().contains("fix"),
        "{report:#}"
    );
    assert_eq!(report["examples"][0]["got"]["data"]["count"], 2);
    assert!(host.registry.get("csv_mean").is_none());

    // Same code, fixed examples: the stored version passes now; pure, it is
    // auto-activated and callable at once.
    p["examples"] = json!([{"args": {"path": "$SCRATCH/a.csv", "column": "n"}, "files": {"a.csv": "n\n1\n3\n"},
        "expect": {"count": 2, "mean": 2.0, "min": 1.0, "max": 3.0}}]);
    let report = data(&call_one(&door, "neuron_create", &p).await);
    assert_eq!(
        (report["version"].as_u64(), report["status"].as_str()),
        (Some(1), Some("active")),
        "{report:#}"
    );
    assert!(host.registry.get("csv_mean").is_some());
}

#[tokio::test(flavor = "multi_thread")]
async fn a_rolled_back_saga_removes_the_pending_version() {
    let Some(ws) = workspace(&["fs_write"], FS_POLICY, "") else {
        return;
    };
    let (host, door) = door(&ws).await;
    let mut p = csv_stats(csv_examples(), json!([]));
    p["name"] = json!("csv_tmp");
    let report = plan::run(
        &door,
        &Plan {
            description: "create then fail".into(),
            steps: vec![
                PlanStep { tool: "neuron_create".into(), args: p },
                PlanStep {
                    tool: "fs_write".into(),
                    args: json!({"path": ws.root.join("outside.txt").to_string_lossy(), "content": "x"}),
                },
            ],
        },
        None,
    )
    .await
    .unwrap();
    let steps = host.store.steps(&report.saga_id).await.unwrap();
    assert_eq!(steps[0].status, StepStatus::Compensated, "{report:#?}");
    assert!(
        host.store.neuron("csv_tmp", None).await.unwrap().is_none(),
        "removed"
    );
    let log = host.store.log(Some("neuron:csv_tmp")).await.unwrap();
    assert_eq!(log.last().unwrap().detail["status"], "removed");
}

#[tokio::test(flavor = "multi_thread")]
async fn neuron_create_is_not_offered_at_read_only_or_when_disabled() {
    let Some(ws) = workspace(&[], "[agent]\nautonomy = \"read_only\"", "") else {
        return;
    };
    let (_h, door) = door(&ws).await;
    assert!(
        door.catalog(Autonomy::Autonomous)
            .iter()
            .all(|t| t.meta.name != "neuron_create")
    );
    let out = call_one(
        &door,
        "neuron_create",
        &csv_stats(csv_examples(), json!([])),
    )
    .await;
    assert!(matches!(
        out.outcome,
        Outcome::Refused {
            refusal: Refusal::UnknownTool(_),
            ..
        }
    ));
    let ws = TestWorkspace::new(&[], "[neurons]\nenabled = false\n");
    let (_h, door) = super::door(&ws).await;
    assert!(
        door.catalog(Autonomy::Autonomous)
            .iter()
            .all(|t| t.meta.name != "neuron_create")
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_neuron_with_side_effects_and_no_dry_run_needs_a_human_for_each_call() {
    let Some(ws) = workspace(&[], "", "auto_activate_pure = true") else {
        return;
    };
    let (host, door) = door(&ws).await;
    let p = json!({
        "name": "bump", "description": "Returns its input plus one (claims a side effect).",
        "args_schema": {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]},
        "has_side_effects": true, "risk": "low",
        "source": "def execute(args):\n    return args['n'] + 1\n",
        "examples": [{"args": {"n": 1}, "expect": 2}]
    });
    let report = data(&call_one(&door, "neuron_create", &p).await);
    assert_eq!(report["risk"], "high", "{report:#}");
    assert_eq!(report["status"], "active", "{report:#}");
    let tool = host.registry.get("bump").unwrap();
    assert_eq!(tool.meta.risk, capsaga_core::meta::Risk::High);
    let out = call_one(&door, "bump", &json!({"n": 4})).await;
    assert!(
        matches!(out.outcome, Outcome::AwaitingApproval { .. }),
        "{:?}",
        out.outcome
    );
}
