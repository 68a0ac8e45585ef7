//! `code_run` (seed 003's `code.run`) through the door, on the real runner:
//! every run needs a human who sees the code, its purpose and each input's
//! SHA-256; the approval is bound to them (a changed input makes it stale);
//! the code reads copies of the inputs, writes only to a scratch directory,
//! has no network; allowed output files are copied into a granted directory
//! at commit and removed by compensation; hostile code and hostile paths
//! are contained with a clear error, the host alive.

use super::*;
use async_trait::async_trait;
use capsaga_core::error::ErrorKind;
use capsaga_core::principal::{Principal, Role};
use capsaga_door::dispatch::Approver;
use capsaga_store::ApprovalRow;
use capsaga_tests::snapshot;
use std::sync::Mutex;

/// Approves every call and keeps what it was shown.
#[derive(Default)]
struct Yes {
    shown: Mutex<Vec<ApprovalRow>>,
}

#[async_trait]
impl Approver for Yes {
    fn who(&self) -> Option<Principal> {
        Some(Principal::new("test:yes", Role::Operator))
    }

    async fn ask(&self, a: &ApprovalRow) -> Option<bool> {
        if let Ok(mut s) = self.shown.lock() {
            s.push(a.clone());
        }
        Some(true)
    }
}

// The deadline is far away (10 minutes): no test here is about it, and the
// bounds they are about (the scratch quota, grants, approval) must be the
// ones to stop a call however starved the machine is (issue 32).
const POLICY: &str = r#"
[tools.code_run]
grants = ["fs:read:~/ws/**", "fs:write:~/ws/out/**"]
limits = { deadline_ms = 600000 }
"#;

const SALES: &str = "region,amount\nnorth,10\nsouth,30\nnorth,20\n";

const STATS: &str = r#"import csv, json, os, capsaga
with open(capsaga.inputs["sales.csv"], newline="") as f:
    rows = list(csv.DictReader(f))
total = sum(float(r["amount"]) for r in rows)
with open(os.path.join(capsaga.scratch_dir, "stats.json"), "w") as f:
    json.dump({"rows": len(rows), "total": total}, f)
with open(os.path.join(capsaga.scratch_dir, "run.sh"), "w") as f:
    f.write("rm -rf ~\n")
print("rows", len(rows))
result = {"total": total}
"#;

fn code_ws() -> Option<TestWorkspace> {
    let ws = workspace(&[], POLICY, "")?;
    std::fs::create_dir(ws.ws().join("out")).unwrap();
    std::fs::write(ws.ws().join("sales.csv"), SALES).unwrap();
    Some(ws)
}

fn args(ws: &TestWorkspace, code: &str) -> Value {
    json!({"code": code, "purpose": "total of the sales",
        "inputs": {"sales.csv": ws.ws_path("sales.csv")},
        "output_dir": ws.ws_path("out")})
}

async fn run(door: &Dispatcher, args: &Value, yes: &Yes) -> (Outcome, capsaga_door::saga::Saga) {
    let mut saga = door
        .start(Scope::Call, "code_run test", None)
        .await
        .unwrap();
    let out = door
        .submit(
            &mut saga,
            Call::new("code_run", Args::Value(args)).with_approver(yes),
        )
        .await
        .unwrap()
        .outcome;
    (out, saga)
}

fn error_of(out: &Outcome) -> &capsaga_core::error::ToolError {
    match out {
        Outcome::Failed { error, .. } | Outcome::Refused { error, .. } => error,
        other => panic!("expected a failure: {other:#?}"),
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn an_approved_run_reads_its_inputs_copies_allowed_outputs_and_rolls_back() {
    let Some(ws) = code_ws() else { return };
    let before = snapshot(&ws.ws());
    let (_host, door) = door(&ws).await;
    let yes = Yes::default();
    let a = args(&ws, STATS);
    let (out, mut saga) = run(&door, &a, &yes).await;
    let Outcome::Committed { output, .. } = &out else {
        panic!("{out:#?}")
    };
    // The human saw the code's hash, the purpose and the input's hash.
    let shown = yes.shown.lock().unwrap().clone();
    assert_eq!(shown.len(), 1, "one approval per run");
    let preview = serde_json::to_string(&shown[0]).unwrap();
    let code_sha = capsaga_core::idempotency::sha256_hex(STATS.as_bytes());
    let input_sha = capsaga_core::idempotency::sha256_hex(SALES.as_bytes());
    assert!(preview.contains(&code_sha), "{preview}");
    assert!(preview.contains(&input_sha), "{preview}");
    assert!(preview.contains("total of the sales"), "{preview}");
    let d = &output.data;
    assert_eq!(d["result"]["total"], 60.0, "{d:#}");
    assert!(d["stdout"].as_str().unwrap().contains("rows 3"), "{d:#}");
    assert_eq!(d["inputs"][0]["sha256"], input_sha.as_str());
    assert_eq!(d["outputs"].as_array().unwrap().len(), 1, "{d:#}");
    assert_eq!(d["skipped_outputs"][0]["name"], "run.sh", "{d:#}");
    let stats: Value =
        serde_json::from_slice(&std::fs::read(ws.ws().join("out/stats.json")).unwrap()).unwrap();
    assert_eq!(stats, json!({"rows": 3, "total": 60.0}));
    assert!(!ws.ws().join("out/run.sh").exists());
    // Rolled back: the copied output is removed, the tree is as before.
    let report = door.abort(&mut saga).await.unwrap();
    assert!(report.all_compensated(), "{report:?}");
    assert_eq!(snapshot(&ws.ws()), before);
}

#[tokio::test(flavor = "multi_thread")]
async fn the_approval_is_bound_to_the_code_and_every_input_hash() {
    let Some(ws) = code_ws() else { return };
    let (_host, door) = door(&ws).await;
    let a = args(
        &ws,
        "result = open(__import__('capsaga').inputs['sales.csv']).read()",
    );
    // Nobody to ask: the saga parks with an approval naming the hashes.
    let mut saga = door
        .start(Scope::Call, "code_run test", None)
        .await
        .unwrap();
    let out = door
        .submit(&mut saga, Call::new("code_run", Args::Value(&a)))
        .await
        .unwrap()
        .outcome;
    let Outcome::AwaitingApproval { approval, .. } = &out else {
        panic!("{out:#?}")
    };
    let id = approval.approval_id.clone();
    door.decide(
        &id,
        true,
        &Principal::new("test:operator", Role::Operator),
        None,
    )
    .await
    .unwrap();
    // The input changes after the approval: the approval is stale, the saga
    // parks again with a new one and the code does not run.
    std::fs::write(ws.ws().join("sales.csv"), "region,amount\nnorth,999\n").unwrap();
    let again = door
        .submit(&mut saga, Call::new("code_run", Args::Value(&a)))
        .await
        .unwrap()
        .outcome;
    let Outcome::AwaitingApproval {
        approval: fresh, ..
    } = &again
    else {
        panic!("a changed input must need a new approval: {again:#?}")
    };
    assert_ne!(fresh.approval_id, id);
    let new_sha = capsaga_core::idempotency::sha256_hex(b"region,amount\nnorth,999\n");
    assert!(
        serde_json::to_string(&**fresh).unwrap().contains(&new_sha),
        "{fresh:#?}"
    );
    let _ = door.abort(&mut saga).await;
    // Other code is another call: an approval of one never runs the other.
    let yes = Yes::default();
    let (o1, _) = run(&door, &args(&ws, "result = 1"), &yes).await;
    let (o2, _) = run(&door, &args(&ws, "result = 2"), &yes).await;
    assert!(matches!(o1, Outcome::Committed { .. }), "{o1:#?}");
    assert!(matches!(o2, Outcome::Committed { .. }), "{o2:#?}");
    assert_eq!(
        yes.shown.lock().unwrap().len(),
        2,
        "each code its own approval"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn hostile_code_and_paths_are_contained() {
    let Some(ws) = code_ws() else { return };
    std::os::unix::fs::symlink("/etc/passwd", ws.ws().join("passwd")).unwrap();
    let (host, door) = door(&ws).await;
    let yes = Yes::default();
    // Code that reaches for the host: each fails inside the instance.
    for (code, why) in [
        ("result = open('/etc/passwd').read()", "host file"),
        (
            "result = open(__import__('capsaga').inputs['sales.csv'] + '/../../ws/sales.csv').read()",
            "climb out of the inputs",
        ),
        (
            "open('/tmp/capsaga-code-run-escape', 'w').write('x')",
            "write outside the scratch dir",
        ),
        (
            "import socket\nsocket.create_connection(('127.0.0.1', 9))",
            "socket",
        ),
        ("import os\nresult = dict(os.environ)", "environment"),
        ("while True:\n    pass", "infinite loop"),
        ("x = [bytearray(1 << 29) for _ in range(8)]", "memory bomb"),
    ] {
        let (out, mut saga) = run(&door, &args(&ws, code), &yes).await;
        match &out {
            Outcome::Failed { error, .. } => {
                assert!(!error.message.is_empty(), "{why}");
                eprintln!(
                    "{why}: {:?} {}",
                    error.kind,
                    error.message.chars().take(300).collect::<String>()
                );
            }
            Outcome::Committed { output, .. } => {
                // Only the environment read may succeed, and it is empty.
                assert_eq!(why, "environment", "{why} ran: {output:#?}");
                assert_eq!(output.data["result"], json!({}), "{why}");
                let _ = door.abort(&mut saga).await;
            }
            other => panic!("{why}: {other:#?}"),
        }
        assert!(!std::path::Path::new("/tmp/capsaga-code-run-escape").exists());
    }
    // Paths the operator did not grant, or that lead out of a grant.
    for (inputs, out_dir, kind) in [
        (
            json!({"p": "/etc/passwd"}),
            None,
            ErrorKind::PermissionDenied,
        ),
        (
            json!({"p": ws.ws_path("passwd")}),
            None,
            ErrorKind::PermissionDenied,
        ),
        (
            json!({"p": ws.ws_path("../capsaga.toml")}),
            None,
            ErrorKind::PermissionDenied,
        ),
        (json!({"p": "sales.csv"}), None, ErrorKind::PermissionDenied),
        (json!({}), Some(ws.ws_path("")), ErrorKind::PermissionDenied),
        (
            json!({}),
            Some("/tmp".to_string()),
            ErrorKind::PermissionDenied,
        ),
    ] {
        let mut a = json!({"code": "result = 1", "purpose": "p", "inputs": inputs});
        if let Some(d) = &out_dir {
            a["output_dir"] = json!(d);
        }
        let (out, _) = run(&door, &a, &yes).await;
        assert_eq!(error_of(&out).kind, kind, "{a}: {out:#?}");
    }
    // The host still serves.
    let (out, _) = run(&door, &args(&ws, "result = 7"), &yes).await;
    assert!(matches!(out, Outcome::Committed { .. }), "{out:#?}");
    drop(host);
}

#[tokio::test(flavor = "multi_thread")]
async fn an_output_name_already_taken_keeps_nothing_and_a_changed_output_is_not_removed() {
    let Some(ws) = code_ws() else { return };
    let (_host, door) = door(&ws).await;
    let yes = Yes::default();
    let code = "import os, capsaga\nfor n in ('a.csv', 'b.csv'):\n    open(os.path.join(capsaga.scratch_dir, n), 'w').write(n)\n";
    std::fs::write(ws.ws().join("out/b.csv"), "mine").unwrap();
    let (out, _) = run(&door, &args(&ws, code), &yes).await;
    assert_eq!(error_of(&out).kind, ErrorKind::InvalidArgs, "{out:#?}");
    assert!(!ws.ws().join("out/a.csv").exists(), "nothing kept");
    assert_eq!(
        std::fs::read_to_string(ws.ws().join("out/b.csv")).unwrap(),
        "mine"
    );
    std::fs::remove_file(ws.ws().join("out/b.csv")).unwrap();
    let (out, mut saga) = run(&door, &args(&ws, code), &yes).await;
    assert!(matches!(out, Outcome::Committed { .. }), "{out:#?}");
    std::fs::write(ws.ws().join("out/a.csv"), "edited by someone").unwrap();
    let report = door.abort(&mut saga).await.unwrap();
    assert!(!report.all_compensated(), "{report:?}");
    assert_eq!(
        std::fs::read_to_string(ws.ws().join("out/a.csv")).unwrap(),
        "edited by someone"
    );
    assert!(!ws.ws().join("out/b.csv").exists());
}

/// Code that fills its scratch directory (one big file written in a loop,
/// or thousands of empty files) is stopped at the bound while it runs:
/// `quota-exceeded`, nothing copied out, the scratch directory removed,
/// and the disk never holds much more than the bound.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn code_filling_its_scratch_directory_is_stopped_at_the_bound() {
    let Some(ws) = code_ws() else { return };
    let (host, door) = door(&ws).await;
    let yes = Yes::default();
    let scratch_root = host.config.state_dir.join("neuron-scratch");
    for (code, why) in [
        (
            "import os, capsaga\nchunk = b'x' * (1 << 20)\nwith open(os.path.join(capsaga.scratch_dir, 'big.txt'), 'wb') as f:\n    for _ in range(1024):\n        f.write(chunk)\n        f.flush()\n",
            "one file of 1 GiB",
        ),
        (
            "import os, capsaga\nfor i in range(100000):\n    open(os.path.join(capsaga.scratch_dir, f'{i}.txt'), 'w').close()\n",
            "100000 empty files",
        ),
    ] {
        let (out, _saga) = run(&door, &args(&ws, code), &yes).await;
        match &out {
            Outcome::Failed { error, .. } => {
                assert_eq!(
                    error.kind,
                    ErrorKind::QuotaExceeded,
                    "{why}: {}",
                    error.message
                );
                assert!(
                    error.message.contains("scratch"),
                    "{why}: {}",
                    error.message
                );
            }
            other => panic!("{why}: {other:#?}"),
        }
        assert_eq!(
            std::fs::read_dir(ws.ws().join("out")).unwrap().count(),
            0,
            "{why}: nothing copied out"
        );
        let left = std::fs::read_dir(&scratch_root)
            .map(|d| d.count())
            .unwrap_or(0);
        assert_eq!(left, 0, "{why}: the scratch directory is removed");
    }
}

/// A step a crash leaves in doubt after its outputs were copied (BEGIN, no
/// COMMIT) is compensated from its dry-run pre-image, which names no
/// outputs: the journal written before the copy does, so recovery's
/// compensation removes them (here called as recovery calls it: the
/// pre-image, the step's idempotency key, the execute grants).
#[tokio::test(flavor = "multi_thread")]
async fn an_in_doubt_run_is_compensated_from_the_outputs_journal() {
    use capsaga_door::registry::ToolSource;
    use capsaga_sandbox::Op;
    let Some(ws) = code_ws() else { return };
    let before = snapshot(&ws.ws());
    let (host, door) = door(&ws).await;
    let a = args(&ws, STATS);
    let (out, saga) = run(&door, &a, &Yes::default()).await;
    assert!(matches!(out, Outcome::Committed { .. }), "{out:#?}");
    assert!(ws.ws().join("out/stats.json").exists());
    let step = host.store.steps(saga.id()).await.unwrap().remove(0);
    let tool = host.registry.get("code_run").unwrap();
    let ToolSource::Builtin(b) = &tool.source else {
        panic!("code_run is a built-in")
    };
    let ctx = capsaga_core::tool::CallContext {
        saga_id: step.saga_id.clone(),
        step_seq: step.step_seq,
        idempotency_key: step.idempotency_key.clone(),
        deadline_ms: 0,
        dry_run: false,
    };
    let preimage = b
        .call(&Op::DryRun, &ctx, &step.args, &tool.bindings.dry_run)
        .await
        .unwrap()
        .unwrap();
    assert!(
        preimage.data.get("outputs").is_none(),
        "the plan names no outputs"
    );
    b.call(
        &Op::Compensate(preimage.clone()),
        &ctx,
        &step.args,
        &tool.bindings.execute,
    )
    .await
    .unwrap();
    assert_eq!(snapshot(&ws.ws()), before, "the copied output is removed");
    // The entry is gone with it: compensating again finds nothing to do.
    b.call(
        &Op::Compensate(preimage),
        &ctx,
        &step.args,
        &tool.bindings.execute,
    )
    .await
    .unwrap();
    let journal = host.config.state_dir.join("code-run-journal");
    assert_eq!(std::fs::read_dir(journal).unwrap().count(), 0);
}
