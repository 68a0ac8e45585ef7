//! Issue 13 item 5, one path guard: over every path family of the hostile
//! corpus, on the real planted tree, three resolutions must agree.
//!
//! 1. The probe: `capsaga check path`'s verdict (`capsaga_check`,
//!    through `capsaga_sandbox::factors::fs::resolve::confirm`, which also asks
//!    cap-std and reports `sandbox_disagrees` when it differs).
//! 2. The tools: `capsaga_sdk::fs::resolve_in`, what fs_read, fs_write and
//!    fs_list call before touching a file.
//! 3. The sandbox: cap-std beneath the granted directory
//!    (`resolve::beneath`), what Wasmtime's WASI enforces.
//!
//! And the real thing: the first-party `fs_read`, in the sandbox, reads
//! exactly the files the probe allows (the same bytes) and none of those it
//! refuses as an escape.

use capsaga_check::corpus::{Case, Env, grants_of, run_case};
use capsaga_check::{Decision, Guard, PathProbe};
use capsaga_core::capability::{Capability, FsDir, Place};
use capsaga_core::error::ErrorKind;
use capsaga_core::path_guard::{Follow, RealFs};
use capsaga_core::tool::CallContext;
use capsaga_sandbox::factors::fs::resolve::{Beneath, beneath, confirm};
use capsaga_sandbox::{CallRequest, Op};
use capsaga_tests::TestWorkspace;
use capsaga_tests::hostile::{self, tree};
use std::collections::BTreeMap;
use std::path::Path;

fn planted() -> (tempfile::TempDir, String) {
    let dir = tempfile::tempdir().expect("tempdir");
    let home = dir.path().canonicalize().expect("canonical tempdir");
    tree::plant(&home).expect("plant the tree");
    let home = home.to_str().expect("UTF-8 temp path").to_string();
    (dir, home)
}

fn path_cases() -> Vec<Case> {
    hostile::families()
        .into_iter()
        .flat_map(|f| f.cases)
        .filter(|c| c.guard == Guard::Path)
        .collect()
}

fn roots(grants: &[Capability]) -> Vec<String> {
    let mut r: Vec<String> = grants
        .iter()
        .filter_map(|c| match c {
            Capability::Fs {
                dir: Place::Concrete(FsDir::Absolute(d)),
                ..
            } => Some(d.clone()),
            _ => None,
        })
        .collect();
    r.sort();
    r.dedup();
    r
}

/// Rule names that say "this leads outside the grants".
const ESCAPES: &[&str] = &["escapes_root", "symlink_escape", "outside_root"];

#[test]
fn probe_tools_and_cap_std_agree_over_the_path_families() {
    let (_dir, home) = planted();
    let env = Env {
        home: &home,
        fs: &RealFs,
    };
    let mut tally: BTreeMap<&str, usize> = BTreeMap::new();
    let mut problems = Vec::new();
    let cases = path_cases();
    assert!(cases.len() > 1000, "only {} path cases", cases.len());
    for (i, case) in cases.iter().enumerate() {
        let probe_v = run_case(case, i + 1, &env).expect("runnable");
        let grants = grants_of(case, &home).expect("grants");
        let input = case.input.replace("${home}", &home);
        let follow = if case.no_follow {
            Follow::NoFinal
        } else {
            Follow::Final
        };
        // 1. The CLI's verdict (the probe checked against cap-std).
        let cli = confirm(
            &PathProbe {
                path: &input,
                grants: &grants,
                write: case.write,
                follow,
            },
            &RealFs,
        );
        if cli.kind == "sandbox_disagrees" {
            problems.push(format!(
                "{input:?} (no_follow {}): {}",
                case.no_follow, cli.reason
            ));
            continue;
        }
        assert_eq!(cli.decision, probe_v.decision, "{input:?}");
        // 2. The tools' resolution, with the case's directories as the grants.
        let roots = roots(&grants);
        let sdk = capsaga_sdk::fs::resolve_in(&roots, &input, follow);
        let probe_resolved = probe_v
            .value
            .as_ref()
            .and_then(|v| v["resolved"].as_str())
            .map(str::to_owned);
        match (&sdk, probe_v.decision) {
            (Ok(p), Decision::Allow) => {
                tally_add(&mut tally, "allowed by both");
                if Some(p.to_string_lossy().into_owned()) != probe_resolved {
                    problems.push(format!(
                        "{input:?}: the tools resolve it to {p:?}, the probe to {probe_resolved:?}"
                    ));
                }
            }
            (Ok(_), Decision::Deny)
                if probe_v.kind == "read_only" || probe_v.kind == "no_grant" =>
            {
                tally_add(&mut tally, "access, not resolution");
            }
            (Err(e), Decision::Deny) => {
                tally_add(&mut tally, "refused by both");
                let escape = ESCAPES.contains(&probe_v.kind.as_str());
                let want = if escape {
                    capsaga_sdk::ErrorKind::PermissionDenied
                } else {
                    capsaga_sdk::ErrorKind::InvalidArgs
                };
                if e.kind != want && probe_v.kind != "no_grant" {
                    problems.push(format!(
                        "{input:?}: the probe says {} ({}), the tools {:?}: {}",
                        probe_v.kind, probe_v.reason, e.kind, e.message
                    ));
                }
            }
            (sdk, d) => problems.push(format!(
                "{input:?} (no_follow {}): the probe says {} ({}: {}), the tools {sdk:?}",
                case.no_follow,
                d.as_str(),
                probe_v.kind,
                probe_v.reason
            )),
        }
        // 3. cap-std beneath each granted directory it is taken under.
        if probe_v.decision == Decision::Deny && ESCAPES.contains(&probe_v.kind.as_str()) {
            for root in &roots {
                if let Beneath::Found { .. } = beneath(Path::new(root), &input, follow) {
                    // Only where the path is taken under that root at all.
                    if input.starts_with('/') && !input.starts_with(root.as_str()) {
                        continue;
                    }
                    problems.push(format!(
                        "{input:?}: the probe refuses it ({}), cap-std opens it under {root}",
                        probe_v.kind
                    ));
                }
            }
            tally_add(&mut tally, "escapes checked with cap-std");
        }
    }
    eprintln!("path differential: {} cases: {tally:?}", cases.len());
    assert!(
        problems.is_empty(),
        "{} disagreements:\n{}",
        problems.len(),
        problems.join("\n")
    );
}

fn tally_add(t: &mut BTreeMap<&'static str, usize>, k: &'static str) {
    *t.entry(k).or_default() += 1;
}

/// `fs_read` really reads what the probe allows and nothing it refuses as
/// an escape: every path case of the corpus under the plain `ws` grant,
/// through the real sandbox.
#[tokio::test(flavor = "multi_thread")]
async fn fs_read_in_the_sandbox_reads_what_the_probe_allows() {
    let ws = TestWorkspace::new(
        &["fs_read"],
        "[tools.fs_read]\ngrants = [\"fs:read:~/ws/**\"]\n",
    );
    let home = ws.root.to_string_lossy().into_owned();
    // The planted tree, in the workspace (its `ws/` is the granted one).
    tree::plant(&ws.root).expect("plant");
    let host = ws.host().await;
    let t = host.registry.get("fs_read").expect("fs_read");
    assert!(t.grants.is_ok(), "fs_read is callable");
    let env = Env {
        home: &home,
        fs: &RealFs,
    };
    let (mut read, mut refused, mut compared) = (0, 0, 0);
    for (i, case) in path_cases().iter().enumerate() {
        // Only the single-grant families: fs_read has the `ws` grant alone.
        if case.grants.as_slice() != ["fs:write:~/ws/**"] || case.no_follow || case.write {
            continue;
        }
        let v = run_case(case, i + 1, &env).expect("runnable");
        let input = case.input.replace("${home}", &home);
        let escape = v.decision == Decision::Deny && ESCAPES.contains(&v.kind.as_str());
        let file = v
            .value
            .as_ref()
            .and_then(|x| x["resolved"].as_str())
            .filter(|p| Path::new(p).is_file())
            .map(str::to_owned);
        if !escape && file.is_none() {
            continue;
        }
        let args = serde_json::json!({ "path": input }).to_string();
        let ctx = CallContext {
            saga_id: "differential".into(),
            step_seq: i as u64,
            idempotency_key: format!("differential-{i}"),
            deadline_ms: u64::MAX,
            dry_run: false,
        };
        let (res, _) = host
            .sandbox
            .call(CallRequest {
                tool: "fs_read",
                prepared: t.component().expect("a component"),
                bindings: &t.bindings.execute,
                limits: &t.limits,
                ctx: &ctx,
                args_json: &args,
                op: &Op::Execute,
            })
            .await;
        compared += 1;
        match (res, file) {
            (Ok(Some(out)), Some(f)) => {
                let data = &out.data;
                let want = std::fs::read_to_string(&f).expect("read");
                assert_eq!(data["content"], want.as_str(), "{input:?} → {f}");
                read += 1;
            }
            (Err(e), None) => {
                assert_eq!(e.kind, ErrorKind::PermissionDenied, "{input:?}: {e:?}");
                refused += 1;
            }
            (other, f) => panic!(
                "{input:?}: the probe says {} ({}), resolved file {f:?}; fs_read gave {other:?}",
                v.decision.as_str(),
                v.kind
            ),
        }
    }
    eprintln!("fs_read differential: {compared} calls, {read} read, {refused} refused");
    assert!(read > 5 && refused > 100, "{read} read, {refused} refused");
}
