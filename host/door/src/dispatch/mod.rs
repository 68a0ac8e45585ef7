//! The one door every tool call goes through (DESIGN §8b): the agent loop,
//! `capsaga call|run|resume|approve|deny|rollback|recover`, plans, and every
//! later entry point (MCP, HTTP, neurons) submit calls here and nowhere
//! else. Only this module runs a tool in the sandbox, writes a step to the
//! write-ahead log, changes a saga's guardrail state, or records a human's
//! decision on an approval.
//!
//! The stages of one call, in order, one file each:
//!
//! | # | stage | file | refuses with |
//! |---|---|---|---|
//! | 0 | admit the raw bytes a surface received (JSON-RPC messages, REST bodies) | [`admit`] | a JSON-RPC error / HTTP 400, before anything is parsed or logged |
//! | 1 | resolve the tool (whatever runs it) and its grants | [`resolve`] | [`Refusal::UnknownTool`], [`Refusal::NotCallable`] |
//! | 2 | validate the arguments against its schema | [`validate`] | [`Refusal::InvalidArgs`] |
//! | 3 | replay: a committed step returns its logged output | [`replay`] | [`Refusal::Logged`] |
//! | 4 | policy: allow, deny or needs a human (before it, the operator's kill switch) | [`policy`] | [`Refusal::Denied`], [`Refusal::Paused`] |
//! | 4b | information flow: the plan's tool scope, the provenance of the arguments under the sink rules (allow, needs a human, deny) | [`flow`] | [`Refusal::Flow`] |
//! | 5 | approval: claim one, or park the saga and ask the caller's [`Approver`] | [`approval`] | [`Refusal::Approval`] |
//! | 6 | guardrail: the transition into a state where the call may run | [`guardrail`] | [`Refusal::Guardrail`] |
//! | 7 | WAL BEGIN, durable, with the approval claim, pinning the tool's identity | [`wal`] | [`Refusal::Logged`], [`Refusal::Approval`] |
//! | 8 | sandbox: dry-run pre-image, then execute (retried when retriable) | [`execute`] | |
//! | 9 | WAL COMMIT or FAIL | [`wal`] | |
//! | 10 | compensation: a failed side effect rolls the saga back | [`compensate`] | |
//!
//! The operator's kill switch (`crate::switch`) is read from the store
//! before every call: paused refuses every call, read-only every call with
//! side effects ([`Refusal::Paused`]); a call already running when the
//! switch turns is stopped in stage 8 and settled as a step the host
//! stopped (a side effect is compensated from its pre-image).
//!
//! Dry-run is a mode of the same door ([`Dispatcher::dry_run`]): stages 1,
//! 2 and 8 with the dry-run bindings (write access stripped, HTTP limited to
//! GET/HEAD), nothing logged, no saga. [`Dispatcher::check`] runs stages 1-2
//! only (a plan is checked whole before its saga starts).
//!
//! The saga's life (start, resume, finish, abort, recovery, the operator's
//! retry of failed compensations) is in [`lifecycle`] and [`recover`]; the
//! operator's decisions on approvals in [`operator`]; which scope opened a
//! saga and which surface may continue, commit or roll it back (one saga,
//! one scope) in [`scope`], which every surface calls to open or re-open a
//! saga.
//!
//! The door is `Clone + Send + Sync` (the host is shared by `Arc`); a
//! [`Saga`] is owned by its driver and passed in by `&mut`, so calls of
//! different sagas run concurrently and calls of one saga in order.

pub mod admit;
mod approval;
mod compensate;
mod doubt;
mod execute;
mod files;
mod flow;
mod guardrail;
mod handles;
mod lifecycle;
mod observe;
mod operator;
mod pipeline;
mod policy;
mod recover;
mod replay;
mod resolve;
pub mod scope;
mod undo;
mod validate;
mod wal;

pub use approval::{Approver, NoApprover, decider};
pub use capsaga_flow::FlowNote;
pub use handles::{AbandonedEnd, Expired, Settled};
pub use operator::{Decided, OperatorError};
pub use recover::Recovered;
pub use scope::{Act, Hold, Scope, ScopeError, Via};

use crate::host::Host;
use crate::registry::LoadedTool;
use crate::saga::{RollbackReport, Saga};
use crate::sandbox::{CallDiagnostics, SubModel};
use crate::store::{ApprovalRow, StoreError};
use capsaga_core::error::ToolError;
use capsaga_core::fsm::TransitionDenied;
use capsaga_core::grant::GrantError;
use capsaga_core::tool::ToolOutput;
use capsaga_core::validate::CallError;
use serde_json::Value;
use std::sync::Arc;
use tracing::Instrument;

/// The door. Cheap to clone; every clone shares the host.
#[derive(Clone, Debug)]
pub struct Dispatcher {
    host: Arc<Host>,
}

/// Why the door itself failed (not a tool, not a refusal): the store, or a
/// guardrail transition the engine needed.
#[derive(Debug, thiserror::Error)]
pub enum DispatchError {
    /// The store could not be written or read.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// The guardrail refused a transition the engine needed (a bug, or a
    /// saga already terminal).
    #[error(transparent)]
    Transition(#[from] TransitionDenied),
    /// No saga with this id.
    #[error("no saga `{0}`")]
    NotFound(String),
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
    /// Another live scope of this process holds the saga (an MCP session,
    /// a request of its handle, a task, a turn, a plan run: see
    /// [`scope`]).
    #[error("saga `{saga}` is in use by {by} in this process; wait for it to finish")]
    Held {
        /// The saga.
        saga: String,
        /// What holds it.
        by: &'static str,
    },
    /// The surface may not act on this saga (another principal's, another
    /// scope's, ended: [`scope`]).
    #[error(transparent)]
    Scope(#[from] ScopeError),
    /// The saga was asked to end Done (commit) while a step's outcome was
    /// never written (the store failed while it ran): it cannot be
    /// committed, so it was rolled back instead (the step compensated from
    /// its pre-image, as crash recovery does). `report` says how.
    #[error(
        "saga `{saga}` cannot be committed: {}; it was rolled back instead (now {})",
        doubt::because(.step),
        .report.final_state
    )]
    InDoubt {
        /// The saga.
        saga: String,
        /// The step in doubt, when known.
        step: Option<u64>,
        /// The rollback.
        report: Box<RollbackReport>,
    },
}

/// The arguments of a call: JSON text as a model or a command line wrote
/// it (parsed strictly: duplicate keys refused), or a value already parsed
/// (a plan's step).
#[derive(Debug, Clone, Copy)]
pub enum Args<'a> {
    /// JSON text.
    Text(&'a str),
    /// A parsed value.
    Value(&'a Value),
}

/// One call submitted to the door.
#[derive(Clone, Copy)]
pub struct Call<'a> {
    /// The tool's name.
    pub tool: &'a str,
    /// Its arguments.
    pub args: Args<'a>,
    /// Who may be asked when the call needs a human (default: nobody; the
    /// saga is parked with a pending approval).
    pub approver: &'a dyn Approver,
    /// The model the caller lends to the tool's `llm` import (the agent
    /// turn's provider and budget); `None` (the default: `capsaga call`, a
    /// plan, a dry run) makes every `ask` `unsupported`.
    pub sub_model: Option<&'a Arc<dyn SubModel>>,
}

impl<'a> Call<'a> {
    /// A call that asks nobody.
    pub fn new(tool: &'a str, args: Args<'a>) -> Call<'a> {
        Call {
            tool,
            args,
            approver: &NoApprover,
            sub_model: None,
        }
    }

    /// The same call, lending `model` to the tool's `llm` import.
    pub fn with_sub_model(self, model: &'a Arc<dyn SubModel>) -> Call<'a> {
        Call {
            sub_model: Some(model),
            ..self
        }
    }

    /// The same call, asking `approver` when a human must decide.
    pub fn with_approver(self, approver: &'a dyn Approver) -> Call<'a> {
        Call { approver, ..self }
    }
}

impl std::fmt::Debug for Call<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Call")
            .field("tool", &self.tool)
            .field("args", &self.args)
            .field("sub_model", &self.sub_model.is_some())
            .finish()
    }
}

/// The policy's verdict on a call it did not deny.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// Runs without a human.
    Allow,
    /// A human had to approve (or must).
    ApproveRequired,
}

/// A refusal and the error the caller (or the model) is given, boxed: the
/// cold path of every stage that can refuse.
#[derive(Debug, Clone)]
pub struct Rejection {
    /// Which stage refused, and why.
    pub refusal: Refusal,
    /// The error for the caller, with its hint.
    pub error: ToolError,
}

impl Rejection {
    /// `refusal` with `error`, boxed.
    pub(crate) fn boxed(refusal: Refusal, error: ToolError) -> Box<Self> {
        Box::new(Self { refusal, error })
    }
}

/// Which stage refused a call, with what it knows. Nothing of the call ran.
#[derive(Debug, Clone)]
pub enum Refusal {
    /// Resolve: no tool of that name (the error lists every loaded tool).
    UnknownTool(CallError),
    /// Resolve: the operator's grants do not cover what the tool requires.
    NotCallable(GrantError),
    /// Validate: the arguments are not JSON or do not match the schema.
    InvalidArgs(CallError),
    /// Policy: the operator does not allow the call.
    Denied {
        /// The policy's reason.
        reason: String,
    },
    /// Approval: a human denied it, its approval was already used, or the
    /// approval is bound to another call.
    Approval,
    /// Guardrail: the saga cannot run this call in its state.
    Guardrail,
    /// WAL: this position of the saga is already logged (in another status,
    /// or as another call).
    Logged,
    /// The operator's kill switch: capsaga is paused, or in read-only mode
    /// and the tool has side effects (`capsaga_core::pause`).
    Paused,
    /// Information flow (stage 4b): the tool is outside the plan's scope,
    /// or an argument comes from untrusted data and the policy's sink rule
    /// says `deny` (or strict mode does). Nothing ran; the model is told
    /// why and may go on.
    Flow {
        /// Why, for the operator's log.
        reason: String,
        /// The layer: `scope`, `strict` or `provenance`.
        layer: &'static str,
    },
}

/// What happened to one call.
#[derive(Debug, Clone)]
pub enum Outcome {
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
    /// Nothing ran: a stage refused the call.
    Refused {
        /// Which stage, with what it knows.
        refusal: Refusal,
        /// The refusal as the model and the operator read it.
        error: ToolError,
    },
    /// Nothing ran: the step needs a human's approval and the saga is parked
    /// in AwaitingApproval. Submitting the same call again (for a plan:
    /// `capsaga resume`) runs it once the approval is approved.
    AwaitingApproval {
        /// The step.
        seq: u64,
        /// The pending (or just denied) approval; its summary comes from
        /// the tool's dry-run.
        approval: Box<ApprovalRow>,
        /// Who refused, when the caller's approver asked a human who said
        /// no (the approval is then denied, and the saga must be aborted).
        denied_by: Option<String>,
    },
    /// Dry-run mode: the tool's `dry-run` ran in a read-only sandbox;
    /// nothing was logged.
    Previewed {
        /// Its output or error.
        result: Result<ToolOutput, ToolError>,
        /// Diagnostics of the call.
        diagnostics: CallDiagnostics,
    },
}

/// The door's answer to one call.
#[derive(Debug, Clone)]
pub struct Submitted {
    /// What happened.
    pub outcome: Outcome,
    /// The policy's verdict, when the call got that far.
    pub verdict: Option<Verdict>,
    /// The tool, when it was resolved.
    pub tool: Option<Arc<LoadedTool>>,
    /// The arguments as validated, when they were.
    pub args: Option<Value>,
    /// What the information-flow stage said, when the call got that far.
    pub flow: Option<FlowNote>,
}

impl Submitted {
    /// Whether the output of this call reaches a model inside
    /// `<untrusted>` markers: the host's decision ([`untrusted_output`]),
    /// false when no tool was resolved (nothing ran).
    pub fn untrusted_output(&self) -> bool {
        self.tool.as_deref().is_some_and(untrusted_output)
    }

    fn refused(refusal: Refusal, error: ToolError) -> Submitted {
        Submitted {
            outcome: Outcome::Refused { refusal, error },
            verdict: None,
            tool: None,
            args: None,
            flow: None,
        }
    }
}

/// Whether the output of `tool` is wrapped in `<untrusted>` markers before
/// a model reads it, for every tool source (component, built-in, neuron):
/// `capsaga_core::output_trust::output_is_untrusted` of its declared
/// `returns-untrusted` and its effective grants (a grant reaching files,
/// the network, a model or stored data makes it untrusted whatever it
/// declares). A tool whose grants did not resolve is untrusted. Every
/// surface (agent loop, MCP, `tools/list`) asks here.
pub fn untrusted_output(tool: &LoadedTool) -> bool {
    match &tool.grants {
        Ok(grants) => {
            capsaga_core::output_trust::output_is_untrusted(tool.meta.returns_untrusted, grants)
        }
        Err(_) => true,
    }
}

impl Dispatcher {
    /// The door of `host`.
    pub fn new(host: Arc<Host>) -> Dispatcher {
        Dispatcher { host }
    }

    /// The host behind the door.
    pub fn host(&self) -> &Arc<Host> {
        &self.host
    }

    /// Stages 1-2 only: the tool exists and is callable, and `args` match
    /// its schema. Returns the tool and the parsed arguments, or the
    /// refusal; nothing is logged.
    ///
    /// # Errors
    /// The refusal and its error.
    pub fn check(
        &self,
        tool: &str,
        args: Args<'_>,
    ) -> Result<(Arc<LoadedTool>, Value), Box<Rejection>> {
        let t = resolve::resolve(&self.host, tool)?;
        let args = validate::validate(&t, args)?;
        Ok((t, args))
    }

    /// Run one call as the next step of `saga` (every stage).
    ///
    /// # Errors
    /// [`DispatchError`] only when the door itself fails (store, a needed
    /// transition); tool failures, refusals and parking are [`Outcome`]s.
    pub async fn submit(
        &self,
        saga: &mut Saga,
        call: Call<'_>,
    ) -> Result<Submitted, DispatchError> {
        // The call's `execute_tool` span (issue 30): every stage, the step
        // and its compensations run inside it.
        // A name the host does not know is `_OTHER` (bounded cardinality).
        let known = self.host.registry.get(call.tool).is_some();
        let span = capsaga_telemetry::spans::execute_tool(if known {
            call.tool
        } else {
            capsaga_telemetry::spans::UNKNOWN_TOOL
        });
        span.record("capsaga.saga.id", saga.id.as_str());
        let submitted = self
            .submit_stages(saga, call)
            .instrument(span.clone())
            .await;
        match &submitted {
            Ok(s) => observe::submitted(&span, s),
            Err(_) => capsaga_telemetry::spans::fail(&span, "dispatch"),
        }
        submitted
    }

    async fn submit_stages(
        &self,
        saga: &mut Saga,
        call: Call<'_>,
    ) -> Result<Submitted, DispatchError> {
        // A saga in doubt runs nothing more: it is rolled back first
        // (`doubt.rs`), whatever the call.
        if saga.doubt.is_some() {
            return self.submitted_in_doubt(saga).await;
        }
        let (tool, args) = match self.check(call.tool, call.args) {
            Ok(ok) => ok,
            Err(r) => return Ok(Submitted::refused(r.refusal, r.error)),
        };
        let sw = self.host.switch.current().await?;
        if let Some(error) =
            capsaga_core::pause::refusal(&sw, &tool.meta.name, tool.meta.has_side_effects)
        {
            return Ok(Submitted {
                outcome: Outcome::Refused {
                    refusal: Refusal::Paused,
                    error,
                },
                verdict: None,
                tool: Some(tool),
                args: Some(args),
                flow: None,
            });
        }
        saga.flow_note = None;
        let (outcome, verdict) = self
            .step(saga, &tool, &args, call.approver, call.sub_model)
            .await?;
        flow::record(&self.host, saga, &tool, &args, &outcome).await?;
        Ok(Submitted {
            outcome,
            verdict,
            tool: Some(tool),
            args: Some(args),
            flow: saga.flow_note.take(),
        })
    }

    /// Dry-run mode: stages 1, 2 and 8 with the tool's dry-run bindings
    /// (read-only preopens, HTTP limited to GET/HEAD); no saga, nothing
    /// logged, no policy (nothing can take effect). The outcome is
    /// [`Outcome::Previewed`] or [`Outcome::Refused`].
    pub async fn dry_run(&self, call: Call<'_>) -> Submitted {
        let (tool, args) = match self.check(call.tool, call.args) {
            Ok(ok) => ok,
            Err(r) => return Submitted::refused(r.refusal, r.error),
        };
        // A dry run changes nothing: refused only when everything is paused.
        match self.host.switch.current().await {
            Ok(sw) => {
                if let Some(e) = capsaga_core::pause::refusal(&sw, &tool.meta.name, false) {
                    return Submitted::refused(Refusal::Paused, e);
                }
            }
            Err(e) => {
                return Submitted::refused(
                    Refusal::Paused,
                    ToolError::with_hint(
                        capsaga_core::error::ErrorKind::Unknown,
                        format!("cannot read the kill switch: {e}"),
                        "Try again later.",
                    ),
                );
            }
        }
        let (result, diagnostics) = execute::preview(&self.host, &tool, &args).await;
        Submitted {
            outcome: Outcome::Previewed {
                result,
                diagnostics,
            },
            verdict: None,
            tool: Some(tool),
            args: Some(args),
            flow: None,
        }
    }
}
