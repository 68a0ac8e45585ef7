//! The saga engine: every tool call runs as a step of a saga, checked by the
//! policy and the guardrail and logged ahead in the WAL (DESIGN §5-§6).
//!
//! A step of a side-effecting tool:
//! 1. the policy decides (`capsaga_core::policy::decide`): a call that needs
//!    a human parks the saga in AwaitingApproval with a pending approval
//!    bound to the tool's content hash and the hash of its canonical
//!    arguments ([`approve`]), unless an approved one exists;
//! 2. the guardrail moves the saga to Acting (PlanReady, ValidationPassed
//!    from Validating, ApprovalGranted from AwaitingApproval) and checks the
//!    tool may execute there;
//! 3. if the tool supports it, `dry-run` runs first in a read-only sandbox and
//!    its output is kept as the step's pre-image (what crash recovery hands
//!    to `compensate` for a step whose `execute` outcome was never logged);
//! 4. BEGIN is written (durably) with the tool's content hash, its effective
//!    grants, the arguments and the pre-image, and, in the same transaction,
//!    the approval is claimed: it is used exactly when its step starts, and
//!    never twice; an idempotency key that already committed returns the
//!    logged output instead;
//! 5. `execute` runs in a fresh instance with the effective grants; an error
//!    the tool marked retriable is retried with bounded backoff and the same
//!    idempotency key (each retry logged as a RETRY row);
//! 6. COMMIT or FAIL is written; a failure starts the rollback (see
//!    [`rollback`]).
//!
//! A read-only step runs in Planning or Validating (a read after writes moves
//! the saga to Validating); its failure is reported to the caller and does not
//! fail the saga.
//!
//! The process that drives a saga owns it ([`owner`]); a saga whose owner
//! died is finished by [`recovery`] at the next start-up.

pub mod approve;
pub mod owner;
pub mod plan;
pub mod recovery;
pub mod rollback;

use crate::db::DbError;
use crate::host::Host;
use crate::registry::LoadedTool;
use crate::sandbox::{CallDiagnostics, CallRequest, Op};
use crate::wal::approvals::ApprovalRow;
use crate::wal::{BeginOutcome, Origin, StepStatus, Wal};
use capsaga_core::capability::Capability;
use capsaga_core::error::{ErrorKind, ToolError};
use capsaga_core::fsm::{Event, OperatorEvent, State};
use capsaga_core::grant::dry_run_grants;
use capsaga_core::idempotency::step_key;
use capsaga_core::json::canonical;
use capsaga_core::policy::{Autonomy, Decision, decide_at};
use capsaga_core::tool::{CallContext, ToolOutput};
pub use rollback::{RollbackReport, StepUndo};
use serde_json::Value;
use std::sync::Arc;

/// Why the saga engine itself failed (not a tool).
#[derive(Debug, thiserror::Error)]
pub enum SagaError {
    /// The WAL could not be written or read.
    #[error(transparent)]
    Db(#[from] DbError),
    /// The guardrail refused a transition the engine needed (a bug, or a
    /// saga already terminal).
    #[error(transparent)]
    Transition(#[from] capsaga_core::fsm::TransitionDenied),
    /// No saga with this id.
    #[error("no saga `{0}`")]
    NotFound(String),
    /// `resume` needs the stored plan, and this saga has none (an agent turn).
    #[error("saga `{0}` has no stored plan: only plan and call sagas can be resumed")]
    NoPlan(String),
    /// A plan given to resume a saga is not the plan the saga started with.
    #[error("saga `{0}` was started with another plan: resume it with `capsaga resume --saga`")]
    PlanMismatch(String),
    /// Another live process drives the saga.
    #[error(
        "saga `{saga}` is being driven by another running capsaga process (owner {owner}); wait for it to finish"
    )]
    Busy {
        /// The saga.
        saga: String,
        /// Its owner id.
        owner: String,
    },
}

/// What happened to one step.
#[derive(Debug, Clone)]
pub enum StepOutcome {
    /// Executed and committed, or replayed from the log (`replayed`).
    Committed {
        /// The step.
        seq: u64,
        /// Its output.
        output: ToolOutput,
        /// True when the idempotency key had already committed and the tool
        /// was not executed again.
        replayed: bool,
        /// Diagnostics of the call (None when replayed).
        diagnostics: Option<CallDiagnostics>,
    },
    /// A read-only step failed; the saga goes on.
    ReadFailed {
        /// The step.
        seq: u64,
        /// The tool's error.
        error: ToolError,
        /// Diagnostics of the call.
        diagnostics: CallDiagnostics,
    },
    /// A side-effecting step failed; the saga was rolled back.
    Failed {
        /// The step.
        seq: u64,
        /// The tool's error.
        error: ToolError,
        /// What the rollback did.
        rollback: RollbackReport,
        /// Diagnostics of the call.
        diagnostics: CallDiagnostics,
    },
    /// Nothing ran: the tool is unknown, not callable with the operator's
    /// grants, or the policy or the guardrail refused it.
    Refused {
        /// Why, for the model and the operator.
        error: ToolError,
    },
    /// Nothing ran: the step needs a human's approval and the saga is parked
    /// in AwaitingApproval. Calling [`Saga::step`] again with the same call
    /// runs it once the approval is approved.
    AwaitingApproval {
        /// The step.
        seq: u64,
        /// The pending approval (its summary comes from the tool's dry-run).
        approval: Box<ApprovalRow>,
    },
}

/// A saga being driven by a plan, the agent loop or a single call.
pub struct Saga<'h> {
    host: &'h Host,
    id: String,
    state: State,
    next_seq: u64,
    /// A side-effecting step committed and its ToolSucceeded event is pending
    /// until we know what comes next (SPEC §3.4: Validating when the next step
    /// is read-only or the tool hinted `validate`).
    pending_success: bool,
    side_effects: u64,
    /// The autonomy level the policy decides at (default: the operator's;
    /// the agent loop lowers it to the turn's, never raises it).
    autonomy: Autonomy,
}

impl<'h> Saga<'h> {
    /// Start a new saga (Idle → Planning), logged, owned by this process.
    ///
    /// # Errors
    /// [`SagaError`].
    pub fn start(host: &'h Host, origin: Origin, label: &str) -> Result<Saga<'h>, SagaError> {
        Saga::start_with_plan(host, origin, label, None)
    }

    /// Start a new saga that runs `plan` (canonical JSON, stored so that the
    /// saga can be resumed with `capsaga resume`).
    ///
    /// # Errors
    /// [`SagaError`].
    pub fn start_with_plan(
        host: &'h Host,
        origin: Origin,
        label: &str,
        plan: Option<&str>,
    ) -> Result<Saga<'h>, SagaError> {
        let id = uuid::Uuid::new_v4().to_string();
        let state = host.guardrail.apply(State::Idle, Event::StartSaga)?;
        Wal::new(&host.db).create_saga(
            &id,
            origin.as_str(),
            label,
            state,
            host.owner.id(),
            plan,
        )?;
        Ok(Saga {
            host,
            id,
            state,
            next_seq: 0,
            pending_success: false,
            side_effects: 0,
            autonomy: host.config.policy.autonomy,
        })
    }

    /// Re-open an existing saga and take it over (it must not be driven by
    /// another live process). Steps are numbered from 0 again, so a step with
    /// the same tool and arguments at the same position has the same
    /// idempotency key, and a committed one is not executed again.
    ///
    /// # Errors
    /// [`SagaError::NotFound`], [`SagaError::Busy`] or [`SagaError::Db`].
    pub fn resume(host: &'h Host, saga_id: &str) -> Result<Saga<'h>, SagaError> {
        let wal = Wal::new(&host.db);
        let row = wal
            .saga(saga_id)?
            .ok_or_else(|| SagaError::NotFound(saga_id.to_string()))?;
        let me = host.owner.id();
        if row.owner.as_deref() != Some(me) {
            if let Some(o) = &row.owner
                && owner::is_alive(&host.config.state_dir, o)
            {
                return Err(SagaError::Busy {
                    saga: row.saga_id,
                    owner: o.clone(),
                });
            }
            if !wal.take_over(&row.saga_id, row.owner.as_deref(), me, "resume")? {
                return Err(SagaError::Busy {
                    saga: row.saga_id,
                    owner: "another process that took it over just now".into(),
                });
            }
        }
        // Read the state again: it may have moved before we took it over.
        let state = wal
            .saga(saga_id)?
            .map(|r| r.state)
            .ok_or_else(|| SagaError::NotFound(saga_id.to_string()))?;
        Ok(Saga {
            host,
            id: row.saga_id,
            state,
            next_seq: 0,
            pending_success: false,
            side_effects: 0,
            autonomy: host.config.policy.autonomy,
        })
    }

    /// The saga id.
    pub fn id(&self) -> &str {
        &self.id
    }

    /// The guardrail state.
    pub fn state(&self) -> State {
        self.state
    }

    /// The host.
    pub fn host(&self) -> &'h Host {
        self.host
    }

    fn transition(&mut self, event: Event) -> Result<(), SagaError> {
        let next = self.host.guardrail.apply(self.state, event)?;
        Wal::new(&self.host.db).set_state(&self.id, next, event.name())?;
        self.state = next;
        Ok(())
    }

    /// Apply the pending ToolSucceeded event, choosing Validating when
    /// `validate`.
    fn settle_success(&mut self, validate: bool) -> Result<(), SagaError> {
        if self.pending_success && self.state == State::Acting {
            self.pending_success = false;
            self.transition(Event::ToolSucceeded { validate })?;
        }
        Ok(())
    }

    /// Bring the saga to the state in which `tool` may execute, or refuse.
    fn prepare_state(
        &mut self,
        has_side_effects: bool,
    ) -> Result<Result<(), ToolError>, SagaError> {
        if has_side_effects {
            self.settle_success(false)?;
            match self.state {
                State::Planning => self.transition(Event::PlanReady { steps: 1 })?,
                State::Validating => {
                    self.transition(Event::ValidationPassed { complete: false })?
                }
                _ => {}
            }
        } else {
            self.settle_success(true)?;
        }
        Ok(self
            .host
            .guardrail
            .may_execute(self.state, has_side_effects)
            .map_err(|d| {
                ToolError::with_hint(
                    ErrorKind::PermissionDenied,
                    format!("guardrail: {d}"),
                    "This saga cannot run tools any more; finish with a final answer.",
                )
            }))
    }

    /// Decide this saga's next steps at `autonomy`, never above the
    /// operator's level (`[agent] autonomy` in `capsaga.toml`).
    pub fn set_autonomy(&mut self, autonomy: Autonomy) {
        self.autonomy = self.host.config.policy.autonomy.narrow(autonomy);
    }

    /// Run one step: `tool` with `args` (already validated against its schema).
    ///
    /// # Errors
    /// [`SagaError`] only when the engine itself fails (database); tool
    /// failures, refusals and parking are [`StepOutcome`]s.
    pub async fn step(&mut self, tool: &str, args: &Value) -> Result<StepOutcome, SagaError> {
        let Some(t) = self.host.registry.get(tool) else {
            let names = self.host.registry.names();
            return Ok(refused(
                ErrorKind::InvalidArgs,
                format!(
                    "unknown tool `{}`",
                    tool.chars().take(80).collect::<String>()
                ),
                format!("Use one of: {}.", names.join(", ")),
            ));
        };
        let grants = match &t.grants {
            Ok(g) => g.clone(),
            Err(e) => {
                return Ok(refused(
                    ErrorKind::PermissionDenied,
                    e.to_string(),
                    "The operator has not granted what this tool needs; use another tool or ask the operator.",
                ));
            }
        };
        let seq = self.next_seq;
        let key = step_key(&self.id, seq, tool, args);
        // A retry of a committed step returns the logged output: nothing
        // executes, so neither the policy nor the guardrail has anything to
        // allow (the call was allowed when it ran).
        let wal = Wal::new(&self.host.db);
        if let Some(row) = wal.step_by_key(&key)?
            && row.status == StepStatus::Commit
            && let Some(out) = row.output
        {
            let output: ToolOutput = serde_json::from_value(out).map_err(|e| {
                SagaError::Db(DbError::Decode(format!("logged output of step {seq}: {e}")))
            })?;
            self.next_seq += 1;
            if t.meta.has_side_effects {
                self.side_effects += 1;
            }
            return Ok(StepOutcome::Committed {
                seq,
                output,
                replayed: true,
                diagnostics: None,
            });
        }
        if let Some(row) = wal.step_at(&self.id, seq)? {
            let what = if row.idempotency_key == key {
                format!("is already logged as {}", row.status)
            } else {
                format!(
                    "is logged as another call (`{}` with other arguments): this is not the same plan",
                    row.tool_id
                )
            };
            return Ok(refused(
                ErrorKind::Unsupported,
                format!("step {seq} of saga {} {what}", self.id),
                "This step cannot be run again in this saga.",
            ));
        }
        let approval = match decide_at(
            t.meta.risk,
            t.meta.has_side_effects,
            self.host.config.policy.section(tool),
            self.autonomy,
        ) {
            Decision::Allow => None,
            Decision::Deny { reason } => {
                return Ok(refused(
                    ErrorKind::PermissionDenied,
                    format!("policy: {reason}"),
                    "The operator does not allow this tool; use another tool or finish.",
                ));
            }
            Decision::ApproveRequired { reason } => {
                match approve::approval_for(self, &t, &grants, seq, &key, args, &reason).await? {
                    approve::Found::Use(id) => Some(id),
                    approve::Found::Wait(approval) => {
                        return Ok(StepOutcome::AwaitingApproval { seq, approval });
                    }
                    approve::Found::Refused(error) => return Ok(StepOutcome::Refused { error }),
                }
            }
        };
        if approval.is_some() && self.state == State::AwaitingApproval {
            self.transition(Event::ApprovalGranted)?;
        }
        if let Err(error) = self.prepare_state(t.meta.has_side_effects)? {
            return Ok(StepOutcome::Refused { error });
        }
        let args_text = canonical(args);
        let ctx = CallContext {
            saga_id: self.id.clone(),
            step_seq: seq,
            idempotency_key: key.clone(),
            deadline_ms: deadline_from_now(t.limits.deadline_ms),
            dry_run: false,
        };

        // Pre-image: the dry-run output, read-only sandbox. A side-effecting
        // tool that supports dry-run never executes without one: its failed
        // dry-run fails the step, so a BEGIN row of such a tool without a
        // pre-image always means `execute` never started (what recovery
        // relies on, see `rollback::compensate_one`).
        let (preimage, dry_run_error) = if t.meta.has_side_effects && t.meta.supports_dry_run {
            match self.dry_run(&t, &grants, &ctx, &args_text).await {
                Ok(o) => (Some(o), None),
                Err(e) => {
                    tracing::debug!(tool, "dry-run before execute failed: {e}");
                    (None, Some(e))
                }
            }
        } else {
            (None, None)
        };

        let grant_strings: Vec<String> = grants.iter().map(ToString::to_string).collect();
        match wal.begin_step(&crate::wal::NewStep {
            saga_id: &self.id,
            step_seq: seq,
            tool_id: tool,
            tool_hash: &t.hash,
            grants: &grant_strings,
            has_side_effects: t.meta.has_side_effects,
            idempotency_key: &key,
            args,
            preimage: preimage.as_ref(),
            approval: approval.as_deref(),
        })? {
            BeginOutcome::Started => {}
            BeginOutcome::AlreadyCommitted(output) => {
                self.next_seq += 1;
                if t.meta.has_side_effects {
                    self.side_effects += 1;
                    self.pending_success = true;
                }
                return Ok(StepOutcome::Committed {
                    seq,
                    output,
                    replayed: true,
                    diagnostics: None,
                });
            }
            BeginOutcome::Exists(status) => {
                return Ok(refused(
                    ErrorKind::Unsupported,
                    format!(
                        "step {seq} of saga {} is already logged as {status}",
                        self.id
                    ),
                    "This step cannot be run again in this saga.",
                ));
            }
            BeginOutcome::ApprovalUnavailable => {
                return Ok(refused(
                    ErrorKind::PermissionDenied,
                    "the approval for this call was claimed by another step meanwhile: an approval runs once",
                    "This call needs a new approval; explain what you wanted to do in your final answer.",
                ));
            }
        }
        self.next_seq += 1;

        let (res, diagnostics) = match dry_run_error {
            Some(mut e) => {
                e.message = format!(
                    "dry-run before execute failed, nothing executed: {}",
                    e.message
                );
                (Err(e), CallDiagnostics::default())
            }
            None => {
                self.execute_with_retries(&t, &grants, &ctx, &args_text)
                    .await?
            }
        };
        match res {
            Ok(output) => {
                wal.commit_step(&self.id, seq, &output)?;
                if t.meta.has_side_effects {
                    self.side_effects += 1;
                    self.pending_success = true;
                    if output.wants_validation() {
                        self.settle_success(true)?;
                    }
                }
                Ok(StepOutcome::Committed {
                    seq,
                    output,
                    replayed: false,
                    diagnostics: Some(diagnostics),
                })
            }
            Err(error) => {
                wal.fail_step(&self.id, seq, &error)?;
                if !t.meta.has_side_effects {
                    return Ok(StepOutcome::ReadFailed {
                        seq,
                        error,
                        diagnostics,
                    });
                }
                let rollback = self.rollback(Event::ToolFailed).await?;
                Ok(StepOutcome::Failed {
                    seq,
                    error,
                    rollback,
                    diagnostics,
                })
            }
        }
    }

    /// `dry-run` of `t` in a read-only sandbox (the grants stripped of write
    /// access).
    async fn dry_run(
        &self,
        t: &Arc<LoadedTool>,
        grants: &[Capability],
        ctx: &CallContext,
        args_text: &str,
    ) -> Result<ToolOutput, ToolError> {
        let dry_grants = dry_run_grants(grants);
        let dry_ctx = CallContext {
            dry_run: true,
            ..ctx.clone()
        };
        let (res, _diag) = self
            .host
            .sandbox
            .call(CallRequest {
                tool: &t.meta.name,
                prepared: &t.prepared,
                grants: &dry_grants,
                limits: &t.limits,
                ctx: &dry_ctx,
                args_json: args_text,
                op: &Op::DryRun,
            })
            .await;
        res.and_then(|o| {
            o.ok_or_else(|| {
                ToolError::with_hint(
                    ErrorKind::Unknown,
                    "dry-run returned no output",
                    "Report the tool.",
                )
            })
        })
    }

    /// `execute`, retried while the tool says its error is retriable and the
    /// host's [`capsaga_core::retry::RetryPolicy`] allows, with the same
    /// context (same idempotency key) and a fresh deadline per attempt.
    async fn execute_with_retries(
        &self,
        t: &Arc<LoadedTool>,
        grants: &[Capability],
        ctx: &CallContext,
        args_text: &str,
    ) -> Result<(Result<ToolOutput, ToolError>, CallDiagnostics), SagaError> {
        let mut attempt = 1u32;
        loop {
            let ctx = CallContext {
                deadline_ms: deadline_from_now(t.limits.deadline_ms),
                ..ctx.clone()
            };
            let (res, diagnostics) = self.execute(t, grants, &ctx, args_text).await;
            match res {
                Err(e) => match self.host.retry.next_delay_ms(attempt, &e) {
                    Some(delay_ms) => {
                        Wal::new(&self.host.db).retry_attempt(
                            &self.id,
                            ctx.step_seq,
                            attempt,
                            delay_ms,
                            &e,
                        )?;
                        tokio::time::sleep(std::time::Duration::from_millis(delay_ms)).await;
                        attempt += 1;
                    }
                    None => return Ok((Err(e), diagnostics)),
                },
                ok => return Ok((ok, diagnostics)),
            }
        }
    }

    async fn execute(
        &self,
        t: &Arc<LoadedTool>,
        grants: &[Capability],
        ctx: &CallContext,
        args_text: &str,
    ) -> (Result<ToolOutput, ToolError>, CallDiagnostics) {
        let (res, diag) = self
            .host
            .sandbox
            .call(CallRequest {
                tool: &t.meta.name,
                prepared: &t.prepared,
                grants,
                limits: &t.limits,
                ctx,
                args_json: args_text,
                op: &Op::Execute,
            })
            .await;
        let res = res.and_then(|o| {
            o.ok_or_else(|| {
                ToolError::with_hint(
                    ErrorKind::Unknown,
                    "execute returned no output",
                    "Report the tool.",
                )
            })
        });
        (res, diag)
    }

    /// End the saga normally: Done when every step committed. A saga that
    /// never reached Acting ends with `Finish`. A parked saga stays parked.
    ///
    /// # Errors
    /// [`SagaError`].
    pub fn finish(&mut self) -> Result<State, SagaError> {
        match self.state {
            State::Planning => self.transition(Event::Finish)?,
            State::Acting => {
                self.pending_success = true;
                self.settle_success(true)?;
                self.transition(Event::ValidationPassed { complete: true })?;
            }
            State::Validating => self.transition(Event::ValidationPassed { complete: true })?,
            _ => {}
        }
        Ok(self.state)
    }

    /// End the saga in failure: roll back what committed (ValidationFailed,
    /// ToolFailed, or ApprovalDenied for a parked saga), or `Abort` when
    /// nothing side-effecting ran.
    ///
    /// # Errors
    /// [`SagaError`].
    pub async fn abort(&mut self) -> Result<RollbackReport, SagaError> {
        match self.state {
            State::Planning => {
                self.transition(Event::Abort)?;
                Ok(RollbackReport::empty(self.state))
            }
            State::Acting => self.rollback(Event::ToolFailed).await,
            State::Validating => self.rollback(Event::ValidationFailed).await,
            State::AwaitingApproval => self.rollback(Event::ApprovalDenied).await,
            _ => Ok(RollbackReport::empty(self.state)),
        }
    }

    /// Finish what an interrupted or partially compensated saga left:
    /// Planning aborts; Acting, Validating and AwaitingApproval roll back;
    /// Compensating resumes its rollback; FailedRollbackPartial retries its
    /// failed compensations ([`Saga::retry_compensations`]). Done and
    /// FailedRolledBack have nothing to do.
    ///
    /// # Errors
    /// [`SagaError`].
    pub async fn recover(&mut self) -> Result<RollbackReport, SagaError> {
        match self.state {
            State::Planning | State::Acting | State::Validating | State::AwaitingApproval => {
                self.abort().await
            }
            State::Compensating => self.finish_rollback().await,
            State::FailedRollbackPartial => self.retry_compensations().await,
            State::Idle | State::Done | State::FailedRolledBack => {
                Ok(RollbackReport::empty(self.state))
            }
        }
    }

    /// The operator's retry of a FailedRollbackPartial saga: compensate again
    /// every step whose compensation failed (and anything else still
    /// holding an effect), newest first. When every one is now COMPENSATED,
    /// the operator-only transition
    /// `FailedRollbackPartial --OperatorCompensationRetried--> FailedRolledBack`
    /// is applied and logged with `actor: operator`; otherwise the saga stays
    /// FailedRollbackPartial and the report says what still fails.
    ///
    /// # Errors
    /// [`SagaError`]; a saga in another state is refused by the guardrail.
    pub async fn retry_compensations(&mut self) -> Result<RollbackReport, SagaError> {
        let denied = |reason: &str| capsaga_core::fsm::TransitionDenied {
            from: self.state,
            event: "OperatorCompensationRetried",
            reason: Some(reason.into()),
        };
        if self.state != State::FailedRollbackPartial {
            return Err(denied("only a FailedRollbackPartial saga can be retried").into());
        }
        let report = rollback::compensate_all(self.host, &self.id).await?;
        let all_compensated = Wal::new(&self.host.db)
            .steps(&self.id)?
            .iter()
            .all(|s| !s.has_side_effects || !needs_compensation(s.status));
        let event = OperatorEvent::CompensationRetried { all_compensated };
        if let Ok(next) = self.host.guardrail.apply_operator(self.state, event) {
            Wal::new(&self.host.db).set_state_with(
                &self.id,
                next,
                event.name(),
                Some(&serde_json::json!({"actor": "operator"})),
            )?;
            self.state = next;
        }
        Ok(RollbackReport {
            final_state: self.state,
            ..report
        })
    }

    async fn rollback(&mut self, event: Event) -> Result<RollbackReport, SagaError> {
        self.pending_success = false;
        self.transition(event)?;
        self.finish_rollback().await
    }

    async fn finish_rollback(&mut self) -> Result<RollbackReport, SagaError> {
        let report = rollback::compensate_all(self.host, &self.id).await?;
        let end = if report.all_compensated() {
            Event::CompensationDone
        } else {
            Event::CompensationFailed
        };
        self.transition(end)?;
        Ok(RollbackReport {
            final_state: self.state,
            ..report
        })
    }

    /// Number of side-effecting steps committed so far.
    pub fn side_effects(&self) -> u64 {
        self.side_effects
    }
}

fn refused(kind: ErrorKind, message: impl Into<String>, hint: impl Into<String>) -> StepOutcome {
    StepOutcome::Refused {
        error: ToolError::with_hint(kind, message, hint),
    }
}

/// `now + ms` in milliseconds since the Unix epoch.
pub fn deadline_from_now(ms: u64) -> u64 {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0);
    now.saturating_add(ms)
}

/// True for statuses that still hold an effect that may need undoing.
pub fn needs_compensation(status: StepStatus) -> bool {
    matches!(
        status,
        StepStatus::Commit | StepStatus::Begin | StepStatus::CompensationFailed
    )
}
