//! `neuron_create`: the built-in tool through which the model submits a
//! neuron. It runs inside the door like any tool (a saga step, logged,
//! compensable). `execute` checks the submission, runs its examples in
//! fresh runner instances with no grants, stores the version with its
//! provenance and report, and answers a structured report the model can act
//! on; `dry-run` checks without running or storing; `compensate` removes the
//! version the step stored while it is still pending.

use super::Neurons;
use super::trial::{ExampleResult, Trial};
use crate::registry::{BuiltinTool, Registry, ToolSource};
use crate::sandbox::{Op, Sandbox};
use crate::store::{NewNeuron, Removed, Store, Transition};
use async_trait::async_trait;
use capsaga_core::error::{ErrorKind, ToolError};
use capsaga_core::meta::{RawToolMeta, Risk};
use capsaga_core::neuron::proposal::{ARGS_SCHEMA, Problem, Proposal};
use capsaga_core::neuron::{Status, identity};
use capsaga_core::policy::Policy;
use capsaga_core::tool::{CallContext, ToolOutput};
use capsaga_core::validate::ArgsValidator;
use serde_json::{Value, json};
use std::sync::{Arc, Weak};

/// Who the host records for an automatic activation.
pub const AUTO_ACTIVATE: &str = "host:auto_activate_pure";

/// The built-in tool.
pub struct NeuronCreate {
    pub(super) sandbox: Arc<Sandbox>,
    pub(super) store: Arc<dyn Store>,
    pub(super) registry: Weak<Registry>,
    pub(super) neurons: Arc<Neurons>,
    pub(super) policy: Arc<Policy>,
}

fn store_error(e: impl std::fmt::Display) -> ToolError {
    ToolError::with_hint(
        ErrorKind::Unknown,
        format!("the state database failed: {e}"),
        "Retry later.",
    )
    .retriable(true)
}

fn output(data: Value, effects: Vec<String>, summary: String) -> Option<ToolOutput> {
    Some(ToolOutput {
        data,
        effects,
        next_hint: None,
        summary,
    })
}

fn refused(p: &Proposal, problems: &[Problem]) -> Option<ToolOutput> {
    output(
        json!({"accepted": false, "name": p.name, "problems": problems,
            "llm_hint": "Fix every problem listed and call neuron_create again."}),
        Vec::new(),
        format!("neuron `{}` refused: {} problem(s)", p.name, problems.len()),
    )
}

impl NeuronCreate {
    /// Names a new neuron may not take: every tool but a neuron of the same
    /// name (a new version), the policy's sections, other stored neurons.
    async fn taken(&self, name: &str) -> Result<Vec<String>, ToolError> {
        let mut taken: Vec<String> = Vec::new();
        if let Some(reg) = self.registry.upgrade() {
            for t in reg.tools() {
                let own = t.meta.name == name && matches!(t.source, ToolSource::Neuron(_));
                if !own {
                    taken.push(t.meta.name.clone());
                }
            }
        }
        taken.extend(self.policy.tools.keys().cloned());
        let stored = self.store.neurons(None).await.map_err(store_error)?;
        taken.extend(stored.into_iter().map(|r| r.name).filter(|n| n != name));
        taken.sort();
        taken.dedup();
        Ok(taken)
    }

    async fn checked(&self, args: &Value) -> Result<(Proposal, Vec<Problem>), ToolError> {
        let p: Proposal = serde_json::from_value(args.clone()).map_err(|e| {
            ToolError::with_hint(
                ErrorKind::InvalidArgs,
                format!("neuron_create arguments: {e}"),
                "Follow neuron_create's argument schema.",
            )
        })?;
        let taken = self.taken(&p.name).await?;
        let problems = p.check(&self.policy.neurons, taken.iter().map(String::as_str));
        Ok((p, problems))
    }

    async fn execute(
        &self,
        ctx: &CallContext,
        args: &Value,
    ) -> Result<Option<ToolOutput>, ToolError> {
        let (p, problems) = self.checked(args).await?;
        if !problems.is_empty() {
            return Ok(refused(&p, &problems));
        }
        let meta = p.meta("");
        let id = identity(&self.neurons.runner.hash, &p.source, &meta);
        let validator = ArgsValidator::new(&p.name, &p.args_schema).map_err(|e| {
            ToolError::with_hint(ErrorKind::InvalidArgs, e.to_string(), "Fix args_schema.")
        })?;
        let mut trial_meta = meta.clone();
        trial_meta.version = "trial".into();
        let results = Trial {
            sandbox: &self.sandbox,
            runner: &self.neurons.runner,
            meta: &trial_meta,
            source: &p.source,
            validator: &validator,
            limits: self.neurons.example_limits,
            scratch_root: &self.neurons.scratch_root,
        }
        .run(&p.examples)
        .await;
        let passed = results.iter().all(|r| r.passed);
        let report = json!({"passed": passed, "examples": results});
        let examples = serde_json::to_value(&p.examples).unwrap_or(Value::Null);
        let (row, created) = self
            .store
            .propose_neuron(&NewNeuron {
                identity: &id,
                runner_hash: &self.neurons.runner.hash,
                meta: &meta,
                source: &p.source,
                examples: &examples,
                report: Some(&report),
                saga_id: Some(&ctx.saga_id),
                step_seq: Some(ctx.step_seq),
            })
            .await
            .map_err(store_error)?;
        // A new version whose examples pass, or a stored version that never
        // passed (same code, better examples) whose examples pass now.
        let status = if passed && (created || row.status == Status::Proposed) {
            self.advance(&row.name, row.version, &meta, &report).await?
        } else {
            row.status
        };
        Ok(self.report(&p, &row.name, row.version, &id, created, status, &results))
    }

    /// proposed → tested → awaiting_operator, or → active for a pure neuron
    /// when the policy auto-activates them.
    async fn advance(
        &self,
        name: &str,
        version: u32,
        meta: &RawToolMeta,
        report: &Value,
    ) -> Result<Status, ToolError> {
        let step = |to: Status, by: &'static str, note: Option<&'static str>| Transition {
            name,
            version,
            to,
            by,
            note,
            granted: None,
            report: None,
        };
        let mut tested = step(
            Status::Tested,
            "host:examples",
            Some("every example passed"),
        );
        tested.report = Some(report);
        self.store
            .transition_neuron(&tested)
            .await
            .map_err(store_error)?;
        let pure = meta.capabilities.is_empty();
        if pure && self.policy.neurons.auto_activate_pure {
            let row = self
                .store
                .transition_neuron(&step(
                    Status::Active,
                    AUTO_ACTIVATE,
                    Some("pure neuron, examples passed"),
                ))
                .await
                .map_err(store_error)?;
            if let Some(reg) = self.registry.upgrade()
                && let Err(e) =
                    reg.register_neuron(&self.sandbox, &self.policy, &self.neurons.runner, &row)
            {
                tracing::warn!("neuron `{name}` activated but not registered: {e}");
            }
            return Ok(Status::Active);
        }
        self.store
            .transition_neuron(&step(Status::AwaitingOperator, "host:examples", None))
            .await
            .map_err(store_error)?;
        Ok(Status::AwaitingOperator)
    }

    #[allow(clippy::too_many_arguments)]
    fn report(
        &self,
        p: &Proposal,
        name: &str,
        version: u32,
        id: &str,
        created: bool,
        status: Status,
        results: &[ExampleResult],
    ) -> Option<ToolOutput> {
        let passed = results.iter().all(|r| r.passed);
        let hint = match (created, passed, status) {
            (_, true, Status::Active) => {
                format!("`{name}` is active: call it like any tool from now on.")
            }
            (_, true, Status::AwaitingOperator) => format!(
                "`{name}` waits for the operator (`capsaga neurons approve {name}`); it is not callable yet. Tell the user."
            ),
            (true, false, _) | (false, false, Status::Proposed) => "Some examples failed: read each failure, fix the source (or the examples) and call neuron_create again.".to_string(),
            (_, _, s) => format!(
                "This exact neuron is already stored as version {version} ({s}); change it to submit a new version."
            ),
        };
        let effects = if created {
            vec![format!("stored neuron {name} version {version} ({status})")]
        } else {
            Vec::new()
        };
        let summary = format!(
            "neuron {name} v{version}: {}/{} examples passed, {status}",
            results.iter().filter(|r| r.passed).count(),
            results.len()
        );
        output(
            json!({"accepted": true, "name": name, "version": version, "identity": id,
                "created": created, "status": status, "passed": passed,
                "requested": p.capabilities, "risk": p.effective_risk(),
                "examples": results, "llm_hint": hint}),
            effects,
            summary,
        )
    }

    async fn compensate(
        &self,
        ctx: &CallContext,
        out: &ToolOutput,
    ) -> Result<Option<ToolOutput>, ToolError> {
        let (Some(id), Some(true)) = (out.data["identity"].as_str(), out.data["created"].as_bool())
        else {
            return Ok(None);
        };
        let row = self
            .store
            .neuron_by_identity(id)
            .await
            .map_err(store_error)?;
        if row.as_ref().and_then(|r| r.saga_id.as_deref()) != Some(ctx.saga_id.as_str()) {
            return Ok(None);
        }
        match self
            .store
            .remove_pending_neuron(id, "compensation")
            .await
            .map_err(store_error)?
        {
            Removed::Removed
            | Removed::Absent
            | Removed::Kept(Status::Retired | Status::Rejected) => Ok(None),
            Removed::Kept(status) => {
                let Some(row) = row.filter(|r| r.decided_by.as_deref() == Some(AUTO_ACTIVATE))
                else {
                    return Err(ToolError::with_hint(
                        ErrorKind::Unrevertible,
                        format!("neuron {id} is {status}: the operator decided on it meanwhile"),
                        "The operator must retire it by hand if it should go.",
                    ));
                };
                self.store
                    .transition_neuron(&Transition {
                        name: &row.name,
                        version: row.version,
                        to: Status::Retired,
                        by: "compensation",
                        note: Some("the saga that created it was rolled back"),
                        granted: None,
                        report: None,
                    })
                    .await
                    .map_err(store_error)?;
                if let Some(reg) = self.registry.upgrade() {
                    reg.deregister_neuron(&row.name);
                }
                Ok(None)
            }
        }
    }
}

#[async_trait]
impl BuiltinTool for NeuronCreate {
    fn meta(&self) -> RawToolMeta {
        RawToolMeta {
            name: "neuron_create".into(),
            description: "Write a new tool (a \"neuron\") in Python when no existing tool fits: give its name, description, args_schema, the capabilities it needs, its source (def execute(args) returning JSON; raise capsaga.ToolError(kind, message, llm_hint)) and examples with expected results. The host runs the examples and answers a report; an operator must approve it before it can be called.".into(),
            args_schema: ARGS_SCHEMA.into(),
            has_side_effects: true,
            risk: Risk::Low,
            returns_untrusted: false,
            idempotent: true,
            supports_dry_run: true,
            capabilities: Vec::new(),
            version: "0.1.0".into(),
            output_fields: Vec::new(),
        }
    }

    async fn call(
        &self,
        op: &Op,
        ctx: &CallContext,
        args: &Value,
        _bindings: &crate::sandbox::Bindings,
    ) -> Result<Option<ToolOutput>, ToolError> {
        // Which export the door asked for (by its WIT name).
        if let Some(out) = op.undone_output() {
            return self.compensate(ctx, out).await;
        }
        match op.name() {
            "dry-run" => {
                let (p, problems) = self.checked(args).await?;
                if !problems.is_empty() {
                    return Ok(refused(&p, &problems));
                }
                Ok(output(
                    json!({"accepted": true, "name": p.name, "requested": p.capabilities,
                        "examples": p.examples.len()}),
                    vec![format!(
                        "would store neuron {} after running {} example(s)",
                        p.name,
                        p.examples.len()
                    )],
                    format!(
                        "submit neuron {} (requests: {})",
                        p.name,
                        if p.capabilities.is_empty() {
                            "nothing".to_string()
                        } else {
                            p.capabilities.join(", ")
                        }
                    ),
                ))
            }
            _ => self.execute(ctx, args).await,
        }
    }
}
