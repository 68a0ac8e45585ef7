//! Plans: a saga driven by a list of tool calls instead of a model
//! (`capsaga run --plan`).
//!
//! ```json
//! { "description": "write two notes",
//!   "steps": [ { "tool": "fs_write", "args": { "path": "/ws/a.txt", "content": "A" } } ] }
//! ```
//!
//! Every step is checked by the door's first stages (tool exists and is
//! callable, args match its schema) before the saga starts, so a typo never
//! leaves a half-run saga.
//! The steps then run in order; the first failure rolls the saga back. A
//! step that needs a human parks the saga (AwaitingApproval) and the run
//! stops there; the plan is stored with the saga (canonical JSON), so that
//! [`resume`] can replay it after `capsaga approve`: committed steps return
//! their logged output, and the approved step runs once.
//!
//! A plan is a driver of the dispatch door: every step is submitted there.

use crate::dispatch::{Act, Args, Call, DispatchError, Dispatcher, Outcome, Refusal, Scope, Via};
use crate::saga::{RollbackReport, Saga};
use crate::store::{ApprovalRow, StoreError};
use capsaga_core::error::ToolError;
use capsaga_core::fsm::State;
use capsaga_core::json::parse_strict;
use capsaga_core::principal::Principal;
use capsaga_core::tool::ToolOutput;
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

    /// Check every step with the door's first stages (the tool exists and
    /// is callable, the arguments match its schema).
    ///
    /// # Errors
    /// [`PlanError::Step`] for the first invalid step.
    pub fn validate(&self, door: &Dispatcher) -> Result<(), PlanError> {
        for (index, s) in self.steps.iter().enumerate() {
            let step_err = |error: String| PlanError::Step {
                index,
                tool: s.tool.chars().take(80).collect(),
                error,
            };
            if let Err(r) = door.check(&s.tool, Args::Value(&s.args)) {
                return Err(step_err(match r.refusal {
                    Refusal::UnknownTool(e) | Refusal::InvalidArgs(e) => e.to_model_message(),
                    Refusal::NotCallable(e) => e.to_string(),
                    other => format!("{other:?}"),
                }));
            }
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

/// Why a plan run failed (not a step: a step's failure is in the report).
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    /// The door failed.
    #[error(transparent)]
    Dispatch(#[from] DispatchError),
    /// `resume` needs the stored plan, and this saga has none (an agent turn).
    #[error("saga `{0}` has no stored plan: only plan and call sagas can be resumed")]
    NoPlan(String),
    /// A plan given to resume a saga is not the plan the saga started with.
    #[error("saga `{0}` was started with another plan: resume it with `capsaga resume --saga`")]
    PlanMismatch(String),
}

impl From<StoreError> for RunError {
    fn from(e: StoreError) -> Self {
        RunError::Dispatch(e.into())
    }
}

/// Resume saga `saga_id` with the plan stored when it started: committed
/// steps are replayed from the log, the rest run (a parked step runs once
/// its approval is approved).
///
/// # Errors
/// [`DispatchError::NotFound`], [`RunError::NoPlan`] for a saga without a
/// stored plan (an agent turn), or any error of [`run`].
pub async fn resume(door: &Dispatcher, saga_id: &str) -> Result<PlanReport, RunError> {
    resume_as(door, saga_id, &crate::dispatch::decider("cli")).await
}

/// [`resume`] by the operator `who` (the console's signed-in operator;
/// `capsaga resume` is `cli:<user>`): only an operator resumes, and only a
/// saga a plan or a call opened (`dispatch::scope`, `Via::PlanResume`).
///
/// # Errors
/// As [`resume`]; [`DispatchError::Scope`] when `who` is not an operator or
/// the saga was opened by another scope.
pub async fn resume_as(
    door: &Dispatcher,
    saga_id: &str,
    who: &Principal,
) -> Result<PlanReport, RunError> {
    let store = &door.host().store;
    if store.saga(saga_id).await?.is_none() {
        return Err(DispatchError::NotFound(saga_id.to_string()).into());
    }
    let text = store
        .saga_plan(saga_id)
        .await?
        .ok_or_else(|| RunError::NoPlan(saga_id.to_string()))?;
    let plan: Plan = serde_json::from_str(&text)
        .map_err(|e| StoreError::Decode(format!("stored plan of saga {saga_id}: {e}")))?;
    run_by(door, &plan, Some(saga_id), Scope::Plan, who).await
}

/// Run a validated plan as a new saga, or replay it in saga `resume`.
///
/// # Errors
/// [`RunError`] when the door fails.
pub async fn run(
    door: &Dispatcher,
    plan: &Plan,
    resume: Option<&str>,
) -> Result<PlanReport, RunError> {
    run_as(door, plan, resume, Scope::Plan).await
}

/// [`run`] for a saga opened by `scope` (`capsaga call` runs a one-step
/// plan: `Scope::Call`), by the local operator at the command line.
///
/// # Errors
/// [`RunError`] when the door fails; [`RunError::PlanMismatch`] when
/// `resume` names a saga that was started with another plan.
pub async fn run_as(
    door: &Dispatcher,
    plan: &Plan,
    resume: Option<&str>,
    scope: Scope,
) -> Result<PlanReport, RunError> {
    run_by(door, plan, resume, scope, &crate::dispatch::decider("cli")).await
}

/// [`run_as`] by `who`: a new saga opened by `scope` for `who`, or saga
/// `resume` re-opened through `Via::PlanResume` (an operator, a saga a
/// plan or a call opened), held while the plan runs.
async fn run_by(
    door: &Dispatcher,
    plan: &Plan,
    resume: Option<&str>,
    scope: Scope,
    who: &Principal,
) -> Result<PlanReport, RunError> {
    let text = plan.canonical();
    let (mut saga, _hold) = match resume {
        Some(id) => {
            if let Some(stored) = door.host().store.saga_plan(id).await?
                && stored != text
            {
                return Err(RunError::PlanMismatch(id.to_string()));
            }
            door.reopen(id, Via::PlanResume, Act::Continue, who).await?
        }
        None => {
            door.open(who, scope, &plan.description, Some(&text))
                .await?
        }
    };
    let mut run = Running::default();
    for (index, s) in plan.steps.iter().enumerate() {
        let submitted = door
            .submit(&mut saga, Call::new(&s.tool, Args::Value(&s.args)))
            .await?;
        let stop = run
            .record(door, &mut saga, index, &s.tool, submitted.outcome)
            .await?;
        if stop {
            break;
        }
    }
    let final_state = match (&run.rollback, &run.awaiting_approval) {
        (Some(rb), _) => rb.final_state,
        (None, Some(_)) => saga.state(),
        (None, None) => door.finish(&mut saga).await?,
    };
    Ok(PlanReport {
        saga_id: saga.id().to_string(),
        steps: run.steps,
        rollback: run.rollback,
        awaiting_approval: run.awaiting_approval,
        final_state,
    })
}

/// The report being built while a plan runs.
#[derive(Default)]
struct Running {
    steps: Vec<PlanStepReport>,
    rollback: Option<RollbackReport>,
    awaiting_approval: Option<ApprovalRow>,
}

impl Running {
    /// Record one step's outcome; true when the plan stops there (a failure
    /// rolls the saga back, a refusal aborts it, an approval parks it).
    async fn record(
        &mut self,
        door: &Dispatcher,
        saga: &mut Saga,
        index: usize,
        tool: &str,
        outcome: Outcome,
    ) -> Result<bool, DispatchError> {
        let mut rep = PlanStepReport {
            index,
            tool: tool.to_string(),
            step_seq: None,
            status: "committed",
            output: None,
            error: None,
        };
        let stop = match outcome {
            Outcome::Committed {
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
            Outcome::Failed {
                seq,
                error,
                rollback,
                ..
            } => {
                rep.step_seq = Some(seq);
                rep.status = "failed";
                rep.error = Some(error);
                self.rollback = Some(rollback);
                true
            }
            Outcome::ReadFailed { seq, error, .. } => {
                rep.step_seq = Some(seq);
                rep.status = "failed";
                rep.error = Some(error);
                self.rollback = Some(door.abort(saga).await?);
                true
            }
            Outcome::AwaitingApproval { seq, approval, .. } => {
                rep.step_seq = Some(seq);
                rep.status = "awaiting_approval";
                self.awaiting_approval = Some(*approval);
                true
            }
            Outcome::Refused { error, .. } => {
                rep.status = "refused";
                rep.error = Some(error);
                if !saga.state().is_terminal() {
                    self.rollback = Some(door.abort(saga).await?);
                }
                true
            }
            Outcome::Previewed { .. } => false,
        };
        self.steps.push(rep);
        Ok(stop)
    }
}
