//! A host built-in tool goes through the same door as a component: the
//! resolve stage hands the execute stage another kind of tool source, and
//! validation, policy, guardrail, the write-ahead log (pinning the tool's
//! identity hash), dry-run pre-image and compensation apply unchanged. This
//! is the seam agent-written neurons and `neuron_create` plug into.

use async_trait::async_trait;
use capsaga_core::error::{ErrorKind, ToolError};
use capsaga_core::fsm::State;
use capsaga_core::meta::{RawToolMeta, Risk};
use capsaga_core::tool::{CallContext, ToolOutput};
use capsaga_door::dispatch::{Args, Call, Dispatcher, Outcome, Refusal};
use capsaga_door::plan::{self, Plan, PlanStep};
use capsaga_door::registry::BuiltinTool;
use capsaga_sandbox::Op;
use capsaga_store::{Scope, StepStatus};
use capsaga_tests::{FS_POLICY, TestWorkspace};
use serde_json::{Value, json};
use std::sync::{Arc, Mutex};

/// Appends a line to a shared list; compensation removes it.
struct Memo {
    lines: Arc<Mutex<Vec<String>>>,
    calls: Arc<Mutex<Vec<String>>>,
}

#[async_trait]
impl BuiltinTool for Memo {
    fn meta(&self) -> RawToolMeta {
        RawToolMeta {
            name: "memo".into(),
            description: "Remembers one line.".into(),
            args_schema: r#"{"type":"object","properties":{"text":{"type":"string","maxLength":20}},"required":["text"],"additionalProperties":false}"#.into(),
            has_side_effects: true,
            risk: Risk::Medium,
            returns_untrusted: false,
            idempotent: false,
            supports_dry_run: true,
            capabilities: vec![],
            version: "1.0.0".into(),
            output_fields: Vec::new(),
        }
    }

    async fn call(
        &self,
        op: &Op,
        ctx: &CallContext,
        args: &Value,
        _bindings: &capsaga_sandbox::Bindings,
    ) -> Result<Option<ToolOutput>, ToolError> {
        let text = args["text"].as_str().unwrap_or_default().to_string();
        self.calls
            .lock()
            .unwrap()
            .push(format!("{} {text} dry={}", op.name(), ctx.dry_run));
        let out = |summary: String| ToolOutput {
            data: json!({"text": text}),
            effects: vec![summary.clone()],
            next_hint: None,
            summary,
        };
        match op {
            Op::DryRun => Ok(Some(out(format!("would remember {text}")))),
            Op::Execute => {
                self.lines.lock().unwrap().push(text.clone());
                Ok(Some(out(format!("remembered {text}"))))
            }
            Op::Compensate(output) => {
                let t = output.data["text"].as_str().unwrap_or_default();
                self.lines.lock().unwrap().retain(|l| l != t);
                Ok(None)
            }
        }
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_builtin_tool_goes_through_every_stage_of_the_door() {
    let ws = TestWorkspace::new(&["fs_write"], &format!("{FS_POLICY}\n[tools.memo]\n"));
    let host = ws.host().await;
    let (lines, calls) = (Arc::default(), Arc::default());
    let memo = Memo {
        lines: Arc::clone(&lines),
        calls: Arc::clone(&calls),
    };
    let loaded = host
        .registry
        .register_builtin(&host.sandbox, &host.config.policy, Arc::new(memo))
        .unwrap();
    assert_eq!(loaded.hash.len(), 64);
    let door = Dispatcher::new(host.clone());

    // Validation applies: a schema error is refused before anything runs.
    let mut saga = door.start(Scope::Call, "t", None).await.unwrap();
    let bad = json!({"text": "x".repeat(30)});
    let out = door
        .submit(&mut saga, Call::new("memo", Args::Value(&bad)))
        .await
        .unwrap();
    assert!(
        matches!(
            out.outcome,
            Outcome::Refused {
                refusal: Refusal::InvalidArgs(_),
                ..
            }
        ),
        "{out:?}"
    );
    door.abort(&mut saga).await.unwrap();
    assert!(calls.lock().unwrap().is_empty());

    // Two memos then a write outside the grant: the saga rolls back and the
    // memos are compensated in reverse, each BEGIN pinning the identity.
    let memo = |t: &str| PlanStep {
        tool: "memo".into(),
        args: json!({"text": t}),
    };
    let report = plan::run(
        &door,
        &Plan {
            description: "memos then fail".into(),
            steps: vec![
                memo("a"),
                memo("b"),
                PlanStep {
                    tool: "fs_write".into(),
                    args: json!({"path": ws.root.join("out.txt").to_string_lossy(), "content": "x"}),
                },
            ],
        },
        None,
    )
    .await
    .unwrap();
    assert_eq!(report.final_state, State::FailedRolledBack, "{report:#?}");
    assert!(lines.lock().unwrap().is_empty(), "compensated");
    let steps = host.store.steps(&report.saga_id).await.unwrap();
    assert_eq!(steps[0].tool_hash, loaded.hash);
    assert_eq!(steps[0].status, StepStatus::Compensated);
    assert_eq!(steps[1].status, StepStatus::Compensated);
    assert!(
        steps[0].preimage.is_some(),
        "the dry-run pre-image is logged"
    );
    let log = host.store.log(Some(&report.saga_id)).await.unwrap();
    let begin = log.iter().find(|r| r.record == "BEGIN").unwrap();
    assert_eq!(begin.detail["tool_hash"], loaded.hash.as_str());
    assert_eq!(
        *calls.lock().unwrap(),
        [
            "dry-run a dry=true",
            "execute a dry=false",
            "dry-run b dry=true",
            "execute b dry=false",
            "compensate b dry=false",
            "compensate a dry=false",
        ]
    );

    // The policy applies too: not listed, not callable.
    ws.write_policy(FS_POLICY);
    let host = ws.host().await;
    host.registry
        .register_builtin(
            &host.sandbox,
            &host.config.policy,
            Arc::new(Memo {
                lines: Arc::default(),
                calls: Arc::default(),
            }),
        )
        .unwrap();
    match capsaga_tests::call_once(&host, "memo", json!({"text": "c"})).await {
        Outcome::Refused {
            refusal: Refusal::NotCallable(_),
            error,
        } => assert_eq!(error.kind, ErrorKind::PermissionDenied),
        other => panic!("{other:?}"),
    }
}
