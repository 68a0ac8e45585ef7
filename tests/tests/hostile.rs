//! The non-network hostile components of `tests/components/` against the real
//! sandbox: each one is contained. The call fails with the typed error kind
//! that fits (timeout, quota-exceeded, unknown for a trap), well within its
//! deadline; the host keeps serving other calls, concurrent ones included; and
//! nothing outside the grants is read or written (the tests look at the
//! filesystem around the grant, not only at the error).

use capsaga_core::capability::Capability;
use capsaga_core::error::{ErrorKind, ToolError};
use capsaga_core::fsm::State;
use capsaga_core::policy::Limits;
use capsaga_core::tool::{CallContext, ToolOutput};
use capsaga_door::dispatch::{Args, Call, Dispatcher, Outcome};
use capsaga_door::host::Host;
use capsaga_sandbox::{CallDiagnostics, CallRequest, Op};
use capsaga_store::{Scope, StepStatus};
use capsaga_tests::{TestWorkspace, snapshot};
use serde_json::{Value, json};
use std::time::{Duration, Instant};

/// Every hostile component, each listed in the policy (without grants unless
/// it needs them) so that it is callable.
const POLICY: &str = r#"
[tools.spin]
[tools.mem_bomb]
[tools.deep_recursion]
[tools.big_output]
[tools.chatty]
[tools.compensate_trap]
[tools.time_now]
[tools.fs_escape]
grants = ["fs:read:~/ws/**", "fs:write:~/ws/**"]
"#;

const ALL: &[&str] = &[
    "spin",
    "mem_bomb",
    "deep_recursion",
    "big_output",
    "chatty",
    "compensate_trap",
    "time_now",
    "fs_escape",
];

const SECRET: &str = "TOP-SECRET-outside-the-grant";

struct Called {
    result: Result<ToolOutput, ToolError>,
    diags: CallDiagnostics,
}

impl Called {
    fn err(&self) -> &ToolError {
        match &self.result {
            Err(e) => e,
            Ok(out) => panic!("the call succeeded: {}", out.data),
        }
    }

    fn ok(&self) -> &ToolOutput {
        match &self.result {
            Ok(out) => out,
            Err(e) => panic!("the call failed: {e:?}"),
        }
    }
}

/// The deadline of every call here but those that test the deadline: far
/// away (10 minutes), because each of those calls tests another bound
/// (memory, stack, output and transfer caps, grants) that must be the one
/// to stop it however slow or starved the machine is; a wall-clock
/// deadline would win the race on a loaded machine (issue 32).
const FAR_DEADLINE_MS: u64 = 600_000;

/// `execute` of `tool` in a fresh instance, with the tool's effective grants
/// and `limits` (the tool's own, with [`FAR_DEADLINE_MS`], when `None`),
/// straight through the sandbox.
async fn call(host: &Host, tool: &str, args: Value, limits: Option<Limits>) -> Called {
    let t = host.registry.get(tool).expect("tool loaded");
    let grants: Vec<Capability> = t.grants.clone().expect("tool callable");
    let limits = limits.unwrap_or(Limits {
        deadline_ms: FAR_DEADLINE_MS,
        ..t.limits
    });
    let ctx = CallContext {
        saga_id: "hostile".into(),
        step_seq: 0,
        idempotency_key: format!("hostile-{tool}"),
        deadline_ms: u64::MAX,
        dry_run: false,
    };
    let args = args.to_string();
    let (res, diags) = host
        .sandbox
        .call(CallRequest {
            tool,
            prepared: t.component().unwrap(),
            bindings: &host.sandbox.factors().configure(&grants),
            limits: &limits,
            ctx: &ctx,
            args_json: &args,
            op: &Op::Execute,
        })
        .await;
    let result = res.map(|o| o.expect("execute returns an output"));
    Called { result, diags }
}

fn limits(f: impl FnOnce(&mut Limits)) -> Option<Limits> {
    let mut l = Limits {
        deadline_ms: FAR_DEADLINE_MS,
        ..Limits::DEFAULT
    };
    f(&mut l);
    Some(l)
}

/// A trivial call that must still work after a hostile one.
async fn still_serving(host: &Host) {
    let c = call(host, "time_now", json!({}), None).await;
    assert!(c.ok().data["unix_ms"].as_u64().is_some(), "{:?}", c.ok());
}

fn workspace() -> TestWorkspace {
    let ws = TestWorkspace::new(ALL, POLICY);
    std::fs::write(ws.root.join("secret.txt"), SECRET).unwrap();
    std::fs::write(ws.ws().join("inside.txt"), "inside").unwrap();
    ws
}

#[tokio::test(flavor = "multi_thread")]
async fn infinite_loop_is_stopped_at_its_deadline() {
    let ws = workspace();
    let host = ws.host().await;
    let c = call(&host, "spin", json!({}), limits(|l| l.deadline_ms = 300)).await;
    assert_eq!(c.err().kind, ErrorKind::Timeout, "{:?}", c.err());
    // Stopped by its own 300 ms deadline (the error names it: the guest's
    // epoch interrupt, or on a starved machine the host's fallback timer
    // 250 ms later), not by the 10 s default: said by the error, not
    // guessed from a wall clock.
    assert!(c.err().message.contains("300 ms"), "{}", c.err().message);
    still_serving(&host).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn infinite_loop_runs_out_of_fuel() {
    let ws = workspace();
    let host = ws.host().await;
    let c = call(
        &host,
        "spin",
        json!({}),
        limits(|l| {
            l.fuel = 20_000_000;
            l.deadline_ms = 60_000;
        }),
    )
    .await;
    assert_eq!(c.err().kind, ErrorKind::QuotaExceeded, "{:?}", c.err());
    assert!(c.err().message.contains("fuel"), "{}", c.err().message);
    assert!(c.diags.fuel_used >= 20_000_000, "{:?}", c.diags.fuel_used);
    still_serving(&host).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn memory_bomb_hits_the_memory_cap() {
    let ws = workspace();
    let host = ws.host().await;
    let cap = 32 * 1024 * 1024;
    let c = call(
        &host,
        "mem_bomb",
        json!({}),
        limits(|l| l.memory_bytes = cap),
    )
    .await;
    let e = c.err();
    assert_eq!(e.kind, ErrorKind::QuotaExceeded, "{e:?}");
    assert!(e.message.contains("memory cap"), "{}", e.message);
    assert!(
        e.message.contains(&cap.to_string()),
        "the message names the cap: {}",
        e.message
    );
    still_serving(&host).await;
}

/// Deep recursion is contained whichever stack runs out first. The wasm
/// call stack is the host's (`max_wasm_stack`): running out is a
/// stack-overflow trap, reported as `quota-exceeded`. A Rust guest also keeps
/// frames on its own stack in linear memory (1 MiB, placed first): running
/// out of that one is the guest writing below address 0, an out-of-bounds
/// trap the host cannot tell from any other guest crash, so `unknown`.
#[tokio::test(flavor = "multi_thread")]
async fn deep_recursion_exhausts_its_stack_not_the_host() {
    let ws = workspace();
    let host = ws.host().await;
    // Bounded recursion works: the component is not broken, only hostile
    // without a bound.
    let c = call(&host, "deep_recursion", json!({"depth": 100}), None).await;
    assert_eq!(c.ok().data["depth"], 100);

    let c = call(&host, "deep_recursion", json!({"pad": false}), None).await;
    let e = c.err();
    assert_eq!(e.kind, ErrorKind::QuotaExceeded, "{e:?}");
    assert!(e.message.contains("call stack"), "{}", e.message);

    let c = call(&host, "deep_recursion", json!({}), None).await;
    let e = c.err();
    assert_eq!(e.kind, ErrorKind::Unknown, "{e:?}");
    assert!(e.message.contains("out of bounds"), "{}", e.message);
    still_serving(&host).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn huge_output_hits_the_output_cap() {
    let ws = workspace();
    let host = ws.host().await;
    // 100 MB of output against the default 4 MiB cap: refused by the
    // transfer cap before the host copies it.
    let c = call(&host, "big_output", json!({"mb": 100}), None).await;
    let e = c.err();
    assert_eq!(e.kind, ErrorKind::QuotaExceeded, "{e:?}");
    assert!(e.message.contains("more than"), "{}", e.message);
    // 5 MB: under the transfer cap (a little over the output cap so that
    // a record around the data always fits), over the output cap itself.
    let c = call(
        &host,
        "big_output",
        json!({"mb": 5}),
        limits(|l| l.output_bytes = 4_950_000),
    )
    .await;
    let e = c.err();
    assert_eq!(e.kind, ErrorKind::QuotaExceeded, "{e:?}");
    assert!(
        e.message.contains("over the cap of 4950000"),
        "{}",
        e.message
    );
    // Under the cap the same component works.
    let c = call(&host, "big_output", json!({"mb": 1}), None).await;
    assert_eq!(c.ok().data["len"], 1_000_000);
    still_serving(&host).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn log_and_stdio_floods_are_capped_and_do_not_break_the_call() {
    let ws = workspace();
    let host = ws.host().await;
    let cap = 64 * 1024;
    let c = call(
        &host,
        "chatty",
        json!({"log_count": 200, "log_bytes": 1_000_000, "stdout_bytes": 5_000_000, "stderr_bytes": 5_000_000}),
        limits(|l| l.log_bytes = cap),
    )
    .await;
    // print! did not panic: every write was accepted.
    assert_eq!(c.ok().data["logged"], 200_000_000u64);
    let kept: usize = c.diags.logs.iter().map(|r| r.message.len()).sum();
    assert!(kept <= cap as usize, "kept {kept} bytes of logs");
    assert!(c.diags.logs_dropped > 0);
    assert!(
        c.diags.stdio.len() <= 17 * 1024,
        "captured {} bytes of stdio",
        c.diags.stdio.len()
    );
    assert!(
        c.diags.stdio.contains("bytes dropped"),
        "{}",
        &c.diags.stdio[..100]
    );
    // One log message over the transfer cap is refused before it is copied.
    let c = call(
        &host,
        "chatty",
        json!({"log_count": 1, "log_bytes": 50_000_000}),
        None,
    )
    .await;
    assert_eq!(c.err().kind, ErrorKind::QuotaExceeded, "{:?}", c.err());
    still_serving(&host).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn huge_guest_errors_are_refused_or_clipped() {
    let ws = workspace();
    let host = ws.host().await;
    // 2 x 50 MB: over the transfer cap, refused before it is copied.
    let c = call(&host, "chatty", json!({"error_bytes": 50_000_000}), None).await;
    let e = c.err();
    assert_eq!(e.kind, ErrorKind::QuotaExceeded, "{e:?}");
    assert!(e.message.len() < 1024, "message of {}", e.message.len());
    // 2 x 1 MB: copied, then clipped to what the model and the log may see.
    let c = call(&host, "chatty", json!({"error_bytes": 1_000_000}), None).await;
    let e = c.err();
    assert_eq!(e.kind, ErrorKind::Unknown, "{e:?}");
    assert!(
        e.message.len() < 16 * 1024,
        "message of {}",
        e.message.len()
    );
    let details = serde_json::to_string(&e.details).unwrap();
    assert!(details.len() < 128 * 1024, "details of {}", details.len());
    still_serving(&host).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn trap_inside_compensate_is_a_failed_compensation() {
    let ws = workspace();
    let host = ws.host().await;
    let door = Dispatcher::new(host.clone());
    let mut saga = door
        .start(Scope::Call, "compensate trap", None)
        .await
        .unwrap();
    let args = json!({});
    let call = Call::new("compensate_trap", Args::Value(&args));
    match door.submit(&mut saga, call).await.unwrap().outcome {
        Outcome::Committed { .. } => {}
        other => panic!("{other:?}"),
    }
    let report = door.abort(&mut saga).await.unwrap();
    assert_eq!(report.final_state, State::FailedRollbackPartial);
    assert_eq!(report.undone.len(), 1);
    let err = report.undone[0].result.as_ref().unwrap_err();
    assert_eq!(err.kind, ErrorKind::Unknown, "{err:?}");
    assert!(err.message.contains("compensate"), "{}", err.message);
    assert!(
        err.message.contains("deliberate panic in compensate"),
        "the guest's panic message is kept: {}",
        err.message
    );
    let steps = host.store.steps(saga.id()).await.unwrap();
    assert_eq!(steps[0].status, StepStatus::CompensationFailed);
    let logged = steps[0].error.as_ref().expect("the error is logged");
    assert!(logged.to_string().contains("deliberate panic"), "{logged}");
    still_serving(&host).await;
}

/// fs_escape's attempts, each with the path tried: everything outside the
/// granted `ws/` must be refused with permission-denied and leave the
/// filesystem outside `ws/` byte for byte as it was.
#[tokio::test(flavor = "multi_thread")]
async fn filesystem_escapes_are_denied_and_change_nothing() {
    let ws = workspace();
    let root = ws.root.to_string_lossy().into_owned();
    let w = ws.ws().to_string_lossy().into_owned();
    // Links planted by "someone else" inside the grant, pointing out.
    std::os::unix::fs::symlink(ws.root.join("secret.txt"), ws.ws().join("abs_link")).unwrap();
    std::os::unix::fs::symlink("../secret.txt", ws.ws().join("rel_link")).unwrap();
    std::os::unix::fs::symlink(&ws.root, ws.ws().join("dir_link")).unwrap();
    std::os::unix::fs::symlink(
        ws.root.join("new_via_link.txt"),
        ws.ws().join("dangling_link"),
    )
    .unwrap();
    let host = ws.host().await;
    let outside_before = outside_snapshot(&ws);
    let ws_before = snapshot(&ws.ws());

    let attempts: Vec<Value> = vec![
        // `..` walks.
        json!({"mode": "read", "path": format!("{w}/../secret.txt")}),
        json!({"mode": "read", "path": format!("{w}/a/../../secret.txt")}),
        json!({"mode": "read", "path": format!("{w}/../../../../../../etc/passwd")}),
        json!({"mode": "write", "path": format!("{w}/../secret.txt")}),
        json!({"mode": "write", "path": format!("{w}/../new_outside.txt")}),
        json!({"mode": "list", "path": format!("{w}/..")}),
        json!({"mode": "dotdot", "path": w.clone()}),
        json!({"mode": "stat", "path": format!("{w}/../secret.txt")}),
        // Absolute paths outside the grant.
        json!({"mode": "read", "path": format!("{root}/secret.txt")}),
        json!({"mode": "read", "path": "/etc/passwd"}),
        json!({"mode": "read", "path": "/proc/self/environ"}),
        json!({"mode": "write", "path": format!("{root}/new_outside.txt")}),
        json!({"mode": "write", "path": "/tmp/capsaga-fs-escape-was-here"}),
        json!({"mode": "list", "path": "/"}),
        json!({"mode": "list", "path": root.clone()}),
        json!({"mode": "stat", "path": "/etc/passwd"}),
        // Planted symlinks, followed.
        json!({"mode": "read", "path": format!("{w}/abs_link")}),
        json!({"mode": "read", "path": format!("{w}/rel_link")}),
        json!({"mode": "read", "path": format!("{w}/dir_link/secret.txt")}),
        json!({"mode": "write", "path": format!("{w}/abs_link")}),
        json!({"mode": "write", "path": format!("{w}/rel_link")}),
        json!({"mode": "write", "path": format!("{w}/dir_link/new_outside.txt")}),
        json!({"mode": "write", "path": format!("{w}/dangling_link")}),
        json!({"mode": "list", "path": format!("{w}/dir_link")}),
        json!({"mode": "stat", "path": format!("{w}/abs_link")}),
        // Links the guest creates itself, then follows.
        json!({"mode": "symlink", "path": format!("{w}/made_abs"), "target": "/etc/passwd"}),
        json!({"mode": "symlink", "path": format!("{w}/made_abs2"), "target": format!("{root}/secret.txt")}),
        json!({"mode": "symlink", "path": format!("{w}/made_rel"), "target": "../secret.txt"}),
        json!({"mode": "symlink", "path": format!("{w}/made_deep"), "target": "../../../../../../etc/passwd"}),
    ];
    for args in &attempts {
        let c = call(&host, "fs_escape", args.clone(), None).await;
        let e = match &c.result {
            Err(e) => e,
            Ok(out) => panic!("escape succeeded with {args}: {}", out.data),
        };
        let text = serde_json::to_string(e).unwrap();
        assert!(!text.contains(SECRET), "{args}: secret leaked: {text}");
        assert!(
            !text.contains("root:"),
            "{args}: /etc/passwd leaked: {text}"
        );
        assert!(
            matches!(e.kind, ErrorKind::PermissionDenied | ErrorKind::NotFound),
            "{args}: {e:?}"
        );
    }
    assert_eq!(
        outside_snapshot(&ws),
        outside_before,
        "outside the grant changed"
    );
    assert!(!std::path::Path::new("/tmp/capsaga-fs-escape-was-here").exists());
    assert_eq!(
        std::fs::read_to_string(ws.root.join("secret.txt")).unwrap(),
        SECRET,
        "the planted links' target is untouched"
    );
    // Inside the grant, only the links the guest was allowed to create may
    // have appeared; the planted ones still point where they pointed.
    let ws_after = snapshot(&ws.ws());
    for (k, v) in &ws_before {
        assert_eq!(ws_after.get(k), Some(v), "{k} changed inside the grant");
    }
    for k in ws_after.keys().filter(|k| !ws_before.contains_key(*k)) {
        assert!(k.starts_with("made_"), "unexpected new entry {k}");
    }

    // The same tool does work inside its grant.
    let c = call(
        &host,
        "fs_escape",
        json!({"mode": "read", "path": format!("{w}/inside.txt")}),
        None,
    )
    .await;
    assert_eq!(c.ok().data["observed"]["head"], "inside");
}

/// Everything under the workspace root except the granted `ws/`.
fn outside_snapshot(ws: &TestWorkspace) -> std::collections::BTreeMap<String, Vec<u8>> {
    snapshot(&ws.root)
        .into_iter()
        .filter(|(k, _)| !k.starts_with("ws/") && !k.starts_with(".capsaga/"))
        .collect()
}

/// Hostile calls running at the same time as ordinary ones, on a runtime
/// with two worker threads like our machines: while two guests spin on both
/// workers until their deadline, other calls still get the threads (a
/// running guest yields at every epoch tick) and finish first; every hostile
/// call fails with its typed error.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hostile_calls_do_not_stop_concurrent_calls() {
    let ws = workspace();
    let host = ws.host().await;
    // The spinners' deadline is scaled to this machine, measured in this
    // run: an ordinary call alone, then a hundred times that (at least
    // 4 s), so that twenty ordinary calls beside two spinners finish well
    // within it however fast or slow the machine is.
    let mut alone = Duration::ZERO;
    for _ in 0..3 {
        let t = Instant::now();
        still_serving(&host).await;
        alone = alone.max(t.elapsed());
    }
    let spin_deadline = (alone.as_millis() as u64 * 100).max(4000);
    eprintln!("hostile: an ordinary call alone {alone:?}, spin deadline {spin_deadline} ms");
    // Fuel enough that the deadline, not the fuel, stops a spinner on a
    // fast machine (the default 2e10 units can burn in under 4 s).
    let spin = |l: &mut Limits| {
        l.deadline_ms = spin_deadline;
        l.fuel = 1_000_000_000_000;
    };
    let mut hostile = Vec::new();
    for (tool, args, lim, kind) in [
        ("spin", json!({}), limits(spin), ErrorKind::Timeout),
        ("spin", json!({}), limits(spin), ErrorKind::Timeout),
        (
            "mem_bomb",
            json!({}),
            limits(|l| l.memory_bytes = 64 << 20),
            ErrorKind::QuotaExceeded,
        ),
        (
            "deep_recursion",
            json!({"pad": false}),
            None,
            ErrorKind::QuotaExceeded,
        ),
        ("deep_recursion", json!({}), None, ErrorKind::Unknown),
        (
            "big_output",
            json!({"mb": 100}),
            None,
            ErrorKind::QuotaExceeded,
        ),
        (
            "chatty",
            json!({"error_bytes": 20_000_000}),
            None,
            ErrorKind::QuotaExceeded,
        ),
    ] {
        let host = host.clone();
        hostile.push(tokio::spawn(async move {
            let c = call(&host, tool, args, lim).await;
            (tool, c.result.err().map(|e| e.kind), kind, Instant::now())
        }));
    }
    // Ordinary calls as tasks on the same two workers, started once the
    // spinners hold them (a few ordinary calls' time: not a wait for an
    // event, only to let the spinners take the workers first).
    tokio::time::sleep((alone * 5).max(Duration::from_millis(200))).await;
    let mut ordinary = Vec::new();
    for _ in 0..20 {
        let host = host.clone();
        ordinary.push(tokio::spawn(async move {
            still_serving(&host).await;
            Instant::now()
        }));
    }
    let mut last_ordinary = None;
    for h in ordinary {
        let done = h.await.unwrap();
        last_ordinary = last_ordinary.max(Some(done));
    }
    let mut spins_done = Vec::new();
    for h in hostile {
        let (tool, got, want, done) = h.await.unwrap();
        assert_eq!(got, Some(want), "{tool}");
        if tool == "spin" {
            spins_done.push(done);
        }
    }
    let first_spin_done = spins_done.into_iter().min().unwrap();
    assert!(
        last_ordinary.unwrap() < first_spin_done,
        "ordinary calls waited for the spinning guests to be stopped"
    );
    still_serving(&host).await;
}

/// A component whose `meta` never returns is stopped at the meta limits
/// when its meta is read at load, through the baseline compiler (the
/// default: `sandbox::meta`) and through Cranelift alike; it is reported
/// and not loaded, and the host loads and serves the other tools.
#[tokio::test(flavor = "multi_thread")]
async fn a_meta_that_never_returns_is_stopped_at_load_and_the_other_tools_serve() {
    for compiler in ["winch", "cranelift"] {
        let ws = TestWorkspace::new(
            &["meta_spin", "time_now"],
            &format!(
                "compiled_cache = \".capsaga/compiled\"\nmeta_compiler = \"{compiler}\"\n[tools.time_now]\n"
            ),
        );
        let host = ws.host().await;
        assert!(host.registry.get("meta_spin").is_none(), "{compiler}");
        let issue = host
            .registry
            .issues
            .iter()
            .find(|i| i.source.contains("meta_spin"))
            .unwrap_or_else(|| panic!("{compiler}: {:?}", host.registry.issues));
        assert!(
            issue.error.contains("meta call failed")
                && (issue.error.contains("used all its fuel") || issue.error.contains("5000 ms")),
            "{compiler}: {}",
            issue.error
        );
        still_serving(&host).await;
    }
}

/// Malformed field labels in a component's `output-fields` export (issue
/// 47): a path with an escape RFC 6901 does not have, and 100,000 labels
/// (at most 64 are allowed). Each tool is refused at load with a load
/// issue (never labelled half, never a crash or a hang), and the host loads
/// and serves the other tools.
#[tokio::test(flavor = "multi_thread")]
async fn malformed_output_field_labels_refuse_the_tool_at_load_and_the_others_serve() {
    let ws = TestWorkspace::new(
        &["bad_field_path", "many_fields", "time_now"],
        "[tools.bad_field_path]\n[tools.many_fields]\n[tools.time_now]\n",
    );
    let host = ws.host().await;
    // The SDK checks its labels in the guest: its `meta` traps on a bad
    // path and on more than 64 (the host checks the list again for
    // components built otherwise: `capsaga_core::meta` tests).
    for (tool, says) in [
        ("bad_field_path", "meta trapped"),
        ("many_fields", "meta trapped"),
    ] {
        assert!(host.registry.get(tool).is_none(), "{tool} loaded");
        let issue = host
            .registry
            .issues
            .iter()
            .find(|i| i.source.contains(tool))
            .unwrap_or_else(|| panic!("{tool}: {:?}", host.registry.issues));
        eprintln!("{tool}: {}", issue.error);
        assert!(issue.error.contains(says), "{tool}: {}", issue.error);
    }
    still_serving(&host).await;
}
