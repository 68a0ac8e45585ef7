//! The host's file rollback (issue 28) for agent-written code: a neuron
//! that writes, renames and deletes files and has no `compensate`, and
//! `code_run`'s outputs, are rolled back by the host's journal, byte for
//! byte, with what it restored logged per path.

use super::*;
use capsaga_core::fsm::State;
use capsaga_door::neurons::operator;
use capsaga_tests::snapshot;

/// A neuron that changes files in a directory and cannot undo anything.
const CHURN: &str = r#"import os

def execute(args):
    d = args["dir"]
    with open(os.path.join(d, "a.txt"), "w") as f:
        f.write("changed by the neuron")
    os.rename(os.path.join(d, "b.txt"), os.path.join(d, "c.txt"))
    os.remove(os.path.join(d, "d.txt"))
    os.mkdir(os.path.join(d, "e"))
    with open(os.path.join(d, "e", "f.txt"), "w") as f:
        f.write("new")
    return {"ok": True}

def dry_run(args):
    return {"would": "change files in " + args["dir"]}
"#;

fn proposal(caps: Value) -> Value {
    json!({
        "name": "file_churn",
        "description": "Changes a few files in a directory (test neuron).",
        "args_schema": {
            "type": "object", "additionalProperties": false,
            "required": ["dir"], "properties": {"dir": {"type": "string"}}
        },
        "capabilities": caps,
        "has_side_effects": true,
        "supports_dry_run": true,
        "risk": "medium",
        "source": CHURN,
        "examples": [{"args": {"dir": "$SCRATCH"},
            "files": {"a.txt": "A", "b.txt": "B", "d.txt": "D"},
            "expect": {"ok": true}}],
    })
}

#[tokio::test(flavor = "multi_thread")]
async fn a_neuron_writing_renaming_and_deleting_is_rolled_back_by_the_host() {
    let Some(ws) = workspace(&[], "", "max_grants = [\"fs:write:~/ws/**\"]") else {
        return;
    };
    let (host, door) = door(&ws).await;
    let grant = format!("fs:write:{}/**", ws.ws().display());
    let out = call_one(&door, "neuron_create", &proposal(json!([grant.clone()]))).await;
    let report = data(&out);
    assert_eq!(report["passed"], true, "{report:#}");
    let row = host
        .store
        .neuron("file_churn", None)
        .await
        .unwrap()
        .unwrap();
    let home = host.config.home.to_string_lossy().into_owned();
    operator::approve(&*host.store, &home, &row, &[grant], All, "cli:test", None)
        .await
        .unwrap();
    drop(door);
    drop(host);

    for (name, text) in [("a.txt", "A\n"), ("b.txt", "B\n"), ("d.txt", "D\n")] {
        std::fs::write(ws.ws().join(name), text).unwrap();
    }
    let before = snapshot(&ws.ws());
    let (host, door) = super::door(&ws).await;
    let mut saga = door.start(Scope::Call, "neuron files", None).await.unwrap();
    let args = json!({"dir": ws.ws_path("")});
    let out = door
        .submit(&mut saga, Call::new("file_churn", Args::Value(&args)))
        .await
        .unwrap()
        .outcome;
    assert!(matches!(out, Outcome::Committed { .. }), "{out:#?}");
    assert!(ws.ws().join("c.txt").exists() && !ws.ws().join("d.txt").exists());
    let rollback = door.abort(&mut saga).await.unwrap();
    assert_eq!(
        rollback.final_state,
        State::FailedRolledBack,
        "{rollback:#?}"
    );
    assert_eq!(snapshot(&ws.ws()), before, "{rollback:#?}");
    let files = rollback.undone[0]
        .files
        .as_ref()
        .expect("the host restored");
    let shown: Vec<&str> = files.paths.iter().map(|r| r.path.as_str()).collect();
    for name in ["a.txt", "c.txt", "d.txt", "e/f.txt", "e"] {
        assert!(
            shown.contains(&ws.ws_path(name).as_str()),
            "{name} not in {shown:?}"
        );
    }
    let log = host.store.log(Some(saga.id())).await.unwrap();
    assert!(log.iter().any(|r| r.record == "FS_RESTORE"));
}

#[tokio::test(flavor = "multi_thread")]
async fn code_run_outputs_are_journaled_and_restored_by_the_host() {
    let policy = "[tools.code_run]\ngrants = [\"fs:read:~/ws/**\", \"fs:write:~/ws/out/**\"]\nlimits = { deadline_ms = 20000 }\n";
    let Some(ws) = workspace(&[], policy, "") else {
        return;
    };
    std::fs::create_dir(ws.ws().join("out")).unwrap();
    std::fs::write(ws.ws().join("in.csv"), "n\n1\n2\n").unwrap();
    let before = snapshot(&ws.ws());
    let (host, door) = door(&ws).await;
    let code = r#"import os, capsaga
for name in ["one.csv", "two.json"]:
    with open(os.path.join(capsaga.scratch_dir, name), "w") as f:
        f.write(name)
result = "done"
"#;
    let args = json!({"code": code, "purpose": "two outputs",
        "inputs": {"in.csv": ws.ws_path("in.csv")}, "output_dir": ws.ws_path("out")});
    let mut saga = door
        .start(Scope::Call, "code_run files", None)
        .await
        .unwrap();
    struct Yes;
    #[async_trait::async_trait]
    impl capsaga_door::dispatch::Approver for Yes {
        fn who(&self) -> Option<capsaga_core::principal::Principal> {
            Some(capsaga_core::principal::Principal::new(
                "test:yes",
                capsaga_core::principal::Role::Operator,
            ))
        }

        async fn ask(&self, _: &capsaga_store::ApprovalRow) -> Option<bool> {
            Some(true)
        }
    }
    let out = door
        .submit(
            &mut saga,
            Call::new("code_run", Args::Value(&args)).with_approver(&Yes),
        )
        .await
        .unwrap()
        .outcome;
    assert!(matches!(out, Outcome::Committed { .. }), "{out:#?}");
    assert!(ws.ws().join("out/one.csv").exists());
    let journal = ws
        .root
        .join(".capsaga/fs-journal")
        .join(saga.id())
        .join("0.jnl");
    assert!(journal.exists(), "the step's journal");
    let rollback = door.abort(&mut saga).await.unwrap();
    assert_eq!(
        rollback.final_state,
        State::FailedRolledBack,
        "{rollback:#?}"
    );
    assert_eq!(snapshot(&ws.ws()), before);
    let files = rollback.undone[0]
        .files
        .as_ref()
        .expect("the host restored");
    assert_eq!(files.paths.len(), 2, "{files:#?}");
    assert!(
        host.store
            .log(Some(saga.id()))
            .await
            .unwrap()
            .iter()
            .any(|r| r.record == "FS_RESTORE")
    );
}
