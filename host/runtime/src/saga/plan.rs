//! Plans: a saga driven by a list of tool calls instead of a model
//! (`capsaga run --plan`).
//!
//! ```json
//! { "description": "write two notes",
//!   "steps": [ { "tool": "fs_write", "args": { "path": "/ws/a.txt", "content": "A" } } ] }
//! ```
//!
//! Every step is validated (tool exists and is callable, args match its
//! schema) before the saga starts, so a typo never leaves a half-run saga.
//! The steps then run in order; the first failure rolls the saga back. A
//! step that needs a human parks the saga (AwaitingApproval) and the run
//! stops there; the plan is stored with the saga (canonical JSON), so that
//! [`resume`] can replay it after `capsaga approve`: committed steps return
//! their logged output, and the approved step runs once.

use super::{RollbackReport, Saga, SagaError, StepOutcome};
use crate::host::Host;
use crate::wal::approvals::ApprovalRow;
use crate::wal::{Origin, Wal};
use capsaga_core::error::ToolError;
use capsaga_core::fsm::State;
use capsaga_core::json::parse_strict;
use capsaga_core::tool::ToolOutput;
use capsaga_core::validate::unknown_tool;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::path::Path;

/// Largest plan file accepted, bytes.
pub const MAX_PLAN_BYTES: usize = 16 * 1024 * 1024;

/// One planned call.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PlanStep {
    /// Tool name.
    pub tool: String,
    /// Arguments.
    #[serde(default = "empty_object")]
    pub args: Value,
}

fn empty_object() -> Value {
    Value::Object(Default::default())
}

/// A plan file.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Plan {
    /// What the plan does (logged as the saga's label).
    #[serde(default)]
    pub description: String,
    /// The calls, in order.
    pub steps: Vec<PlanStep>,
}

/// Why a plan was refused before it ran.
#[derive(Debug, thiserror::Error)]
pub enum PlanError {
    /// Unreadable file.
    #[error("cannot read plan {path}: {error}")]
    Read {
        /// The file.
        path: String,
        /// OS error.
        error: String,
    },
    /// Not a valid plan document.
    #[error("plan {path} is not valid: {error}")]
    Invalid {
        /// The file.
        path: String,
        /// Why.
        error: String,
    },
    /// A step fails validation.
    #[error("plan step {index} (`{tool}`): {error}")]
    Step {
        /// 0-based index.
        index: usize,
        /// Tool name.
        tool: String,
        /// Why, as the model would be told.
        error: String,
    },
}

impl Plan {
    /// Read and parse a plan file (duplicate keys refused); `${home}` in
    /// string arguments becomes the operator's home directory.
    ///
    /// # Errors
    /// [`PlanError::Read`] or [`PlanError::Invalid`].
    pub fn from_file(path: &Path, home: &Path) -> Result<Plan, PlanError> {
        let p = path.display().to_string();
        let text = std::fs::read_to_string(path).map_err(|e| PlanError::Read {
            path: p.clone(),
            error: e.to_string(),
        })?;
        let v = parse_strict(&text, MAX_PLAN_BYTES).map_err(|e| PlanError::Invalid {
            path: p.clone(),
            error: e.to_string(),
        })?;
        let mut plan: Plan = serde_json::from_value(v).map_err(|e| PlanError::Invalid {
            path: p.clone(),
            error: e.to_string(),
        })?;
        for s in &mut plan.steps {
            crate::config::expand_home_vars(&mut s.args, home);
        }
        if plan.steps.is_empty() {
            return Err(PlanError::Invalid {
                path: p,
                error: "the plan has no steps".into(),
            });
        }
        Ok(plan)
    }

    /// Check every step against the registry and the schemas.
    ///
    /// # Errors
    /// [`PlanError::Step`] for the first invalid step.
    pub fn validate(&self, host: &Host) -> Result<(), PlanError> {
        for (index, s) in self.steps.iter().enumerate() {
            let step_err = |error: String| PlanError::Step {
                index,
                tool: s.tool.chars().take(80).collect(),
                error,
            };
            let Some(t) = host.registry.get(&s.tool) else {
                return Err(step_err(
                    unknown_tool(&s.tool, &host.registry.names()).to_model_message(),
                ));
            };
            if let Err(e) = &t.grants {
                return Err(step_err(e.to_string()));
            }
            t.validator
                .check_value(&s.args)
                .map_err(|e| step_err(e.to_model_message()))?;
        }
        Ok(())
    }
}

/// What happened to one planned step.
#[derive(Debug, Clone, Serialize)]
pub struct PlanStepReport {
    /// Index in the plan.
    pub index: usize,
    /// Tool.
    pub tool: String,
    /// Saga step, when it ran as one.
    pub step_seq: Option<u64>,
    /// `committed`, `replayed`, `failed`, `refused` or `awaiting_approval`.
    pub status: &'static str,
    /// Output when it committed.
    pub output: Option<ToolOutput>,
    /// Error when it failed.
    pub error: Option<ToolError>,
}

/// The result of a plan run.
#[derive(Debug, Clone, Serialize)]
pub struct PlanReport {
    /// The saga.
    pub saga_id: String,
    /// Steps that ran, in order.
    pub steps: Vec<PlanStepReport>,
    /// The rollback, when a step failed.
    pub rollback: Option<RollbackReport>,
    /// The approval the saga is parked on, when a step needs a human.
    pub awaiting_approval: Option<ApprovalRow>,
    /// The saga's final state (AwaitingApproval when parked).
    pub final_state: State,
}

impl Plan {
    /// The plan as canonical JSON (what is stored with its saga).
    pub fn canonical(&self) -> String {
        capsaga_core::json::canonical(&serde_json::to_value(self).unwrap_or(Value::Null))
    }
}

/// Resume saga `saga_id` with the plan stored when it started: committed
/// steps are replayed from the log, the rest run (a parked step runs once
/// its approval is approved).
///
/// # Errors
/// [`SagaError::NotFound`], [`SagaError::NoPlan`] for a saga without a stored
/// plan (an agent turn), or any error of [`run`].
pub async fn resume(host: &Host, saga_id: &str) -> Result<PlanReport, SagaError> {
    let wal = Wal::new(&host.db);
    if wal.saga(saga_id)?.is_none() {
        return Err(SagaError::NotFound(saga_id.to_string()));
    }
    let text = wal
        .saga_plan(saga_id)?
        .ok_or_else(|| SagaError::NoPlan(saga_id.to_string()))?;
    let plan: Plan = serde_json::from_str(&text).map_err(|e| {
        SagaError::Db(crate::db::DbError::Decode(format!(
            "stored plan of saga {saga_id}: {e}"
        )))
    })?;
    run(host, &plan, Some(saga_id)).await
}

/// Run a validated plan as a new saga, or replay it in saga `resume`.
///
/// # Errors
/// [`SagaError`] when the engine fails.
pub async fn run(host: &Host, plan: &Plan, resume: Option<&str>) -> Result<PlanReport, SagaError> {
    run_as(host, plan, resume, Origin::Plan).await
}

/// [`run`] for a saga of `origin` (`capsaga call` runs a one-step plan).
///
/// # Errors
/// [`SagaError`] when the engine fails; [`SagaError::PlanMismatch`] when
/// `resume` names a saga that was started with another plan.
pub async fn run_as(
    host: &Host,
    plan: &Plan,
    resume: Option<&str>,
    origin: Origin,
) -> Result<PlanReport, SagaError> {
    let text = plan.canonical();
    let mut saga = match resume {
        Some(id) => {
            if let Some(stored) = Wal::new(&host.db).saga_plan(id)?
                && stored != text
            {
                return Err(SagaError::PlanMismatch(id.to_string()));
            }
            Saga::resume(host, id)?
        }
        None => Saga::start_with_plan(host, origin, &plan.description, Some(&text))?,
    };
    let mut steps = Vec::new();
    let mut rollback = None;
    let mut awaiting_approval = None;
    for (index, s) in plan.steps.iter().enumerate() {
        let outcome = saga.step(&s.tool, &s.args).await?;
        let mut rep = PlanStepReport {
            index,
            tool: s.tool.clone(),
            step_seq: None,
            status: "committed",
            output: None,
            error: None,
        };
        let stop = match outcome {
            StepOutcome::Committed {
                seq,
                output,
                replayed,
                ..
            } => {
                rep.step_seq = Some(seq);
                rep.status = if replayed { "replayed" } else { "committed" };
                rep.output = Some(output);
                false
            }
            StepOutcome::Failed {
                seq,
                error,
                rollback: rb,
                ..
            } => {
                rep.step_seq = Some(seq);
                rep.status = "failed";
                rep.error = Some(error);
                rollback = Some(rb);
                true
            }
            StepOutcome::ReadFailed { seq, error, .. } => {
                rep.step_seq = Some(seq);
                rep.status = "failed";
                rep.error = Some(error);
                rollback = Some(saga.abort().await?);
                true
            }
            StepOutcome::AwaitingApproval { seq, approval } => {
                rep.step_seq = Some(seq);
                rep.status = "awaiting_approval";
                awaiting_approval = Some(*approval);
                true
            }
            StepOutcome::Refused { error } => {
                rep.status = "refused";
                rep.error = Some(error);
                if !saga.state().is_terminal() {
                    rollback = Some(saga.abort().await?);
                }
                true
            }
        };
        steps.push(rep);
        if stop {
            break;
        }
    }
    let final_state = match (&rollback, &awaiting_approval) {
        (Some(rb), _) => rb.final_state,
        (None, Some(_)) => saga.state(),
        (None, None) => saga.finish()?,
    };
    Ok(PlanReport {
        saga_id: saga.id().to_string(),
        steps,
        rollback,
        awaiting_approval,
        final_state,
    })
}
