//! The stages of one step, in order (see the table in the module
//! documentation of `dispatch`): each stage is a function of its own file;
//! this file only chains them.

use super::approval::{self, Approver, Found, Pending};
use super::flow::{self, Flowed};
use super::policy::{self, Allowed};
use super::{
    DispatchError, Dispatcher, Outcome, Refusal, Rejection, Verdict, execute, files, guardrail,
    replay, wal,
};
use crate::clock::deadline_from_now;
use crate::registry::LoadedTool;
use crate::saga::Saga;
use crate::sandbox::{CallDiagnostics, SubModel};
use capsaga_core::idempotency::step_key;
use capsaga_core::json::canonical;
use capsaga_core::tool::CallContext;
use capsaga_flow::Finding;
use serde_json::Value;
use std::sync::Arc;
use tracing::Instrument;

impl Dispatcher {
    /// Stages 3-10 for a resolved, validated call; `sub_model` is the model
    /// the caller lends to the tool's `llm` import (see [`super::Call`]).
    pub(super) async fn step(
        &self,
        saga: &mut Saga,
        tool: &LoadedTool,
        args: &Value,
        approver: &dyn Approver,
        sub_model: Option<&Arc<dyn SubModel>>,
    ) -> Result<(Outcome, Option<Verdict>), DispatchError> {
        let host = &*self.host;
        let seq = saga.next_seq;
        let key = step_key(&saga.id, seq, &tool.meta.name, args);
        // 3. Replay.
        if let Some(outcome) = replay::replay(host, saga, tool, seq, &key).await? {
            return Ok((outcome, None));
        }
        // 4, 4b.
        let (allowed, findings, flow_only) = match admit(host, saga, tool, args) {
            Ok(a) => a,
            Err(r) => {
                let Rejection { refusal, error } = *r;
                return Ok((Outcome::Refused { refusal, error }, None));
            }
        };
        // 5. Approval.
        let (verdict, approval) = match allowed {
            Allowed::Freely => (Verdict::Allow, None),
            Allowed::WithApproval(reason) => {
                let pending = Pending {
                    saga: &mut *saga,
                    tool,
                    seq,
                    key: &key,
                    args,
                    reason: &reason,
                };
                match approval::stage(host, pending, approver).await? {
                    Found::Claim(id) => {
                        // A human approved the values that needed it.
                        flow::endorse(saga, &id, seq, &findings, args);
                        (Verdict::ApproveRequired, Some(id))
                    }
                    Found::Wait {
                        row,
                        denied_by: Some(by),
                    } if flow_only => {
                        let declined = flow::declined(host, saga, &row, &by).await?;
                        return Ok((declined, Some(Verdict::ApproveRequired)));
                    }
                    Found::Wait { row, denied_by } => {
                        let parked = Outcome::AwaitingApproval {
                            seq,
                            approval: row,
                            denied_by,
                        };
                        return Ok((parked, Some(Verdict::ApproveRequired)));
                    }
                    Found::Refused(error) => {
                        let refusal = Refusal::Approval;
                        let refused = Outcome::Refused { refusal, error };
                        return Ok((refused, Some(Verdict::ApproveRequired)));
                    }
                }
            }
        };
        // 6. Guardrail.
        let side_effects = tool.meta.has_side_effects;
        if let Err(error) =
            guardrail::before_step(host, saga, approval.is_some(), side_effects).await?
        {
            let refused = Outcome::Refused {
                refusal: Refusal::Guardrail,
                error,
            };
            return Ok((refused, Some(verdict)));
        }
        // 7-10.
        let ctx = CallContext {
            saga_id: saga.id.clone(),
            step_seq: seq,
            idempotency_key: key,
            deadline_ms: deadline_from_now(tool.limits.deadline_ms),
            dry_run: false,
        };
        // The step's `saga.step` span (issue 30): BEGIN to COMMIT or FAIL,
        // with the rollback a failure starts.
        let span = capsaga_telemetry::spans::saga_step(&saga.id, seq, &tool.meta.name);
        let outcome = self
            .run_step(saga, tool, args, ctx, approval.as_deref(), sub_model)
            .instrument(span.clone())
            .await;
        match &outcome {
            Ok(o) => super::observe::settled(&span, o),
            Err(_) => capsaga_telemetry::spans::fail(&span, "dispatch"),
        }
        Ok((outcome?, Some(verdict)))
    }

    /// Stages 7-10 of the step `ctx` names: pre-image, BEGIN (with the
    /// claim), execute (lending `sub_model`), COMMIT or FAIL, rollback.
    async fn run_step(
        &self,
        saga: &mut Saga,
        tool: &LoadedTool,
        args: &Value,
        ctx: CallContext,
        approval: Option<&str>,
        sub_model: Option<&Arc<dyn SubModel>>,
    ) -> Result<Outcome, DispatchError> {
        let host = &*self.host;
        let args_text = canonical(args);
        let (seq, key) = (ctx.step_seq, ctx.idempotency_key.as_str());
        // 8a. The pre-image (a dry-run), before BEGIN logs it.
        let (preimage, mut dry_run_error) =
            execute::preimage(host, tool, &ctx, &args_text, args).await;
        // The step's file journal (issue 28), opened before BEGIN: a
        // journaled step's journal always exists once its BEGIN does.
        let journal = match files::lend(host, &saga.id, seq, tool).await {
            Ok(j) => j,
            Err(e) => {
                dry_run_error.get_or_insert(e);
                None
            }
        };
        // 7. BEGIN, with the claim.
        let saga_id = saga.id.clone();
        let grants = tool.grant_strings();
        let step = wal::new_step(
            (&saga_id, saga.fence),
            tool,
            seq,
            key,
            args,
            &grants,
            preimage.as_ref(),
            approval,
        );
        match wal::begin(host, saga, tool, &step).await {
            Ok(None) => {}
            Ok(Some(outcome)) => return Ok(outcome),
            Err(e) => {
                // A BEGIN the store refused wrote nothing; any other failure
                // (a connection lost during the commit) may have written it.
                if !wal::nothing_written(&e) {
                    saga.mark_in_doubt(Some(seq), &host.in_doubt);
                }
                return Err(e);
            }
        }
        saga.next_seq += 1;
        // 8b-10. From here the step is BEGIN in the log: if its outcome (or
        // the rollback a failure starts) cannot be written, the step stays
        // in doubt and the saga can only be rolled back (never Done).
        let settled = async {
            let (result, diagnostics) = match dry_run_error {
                Some(mut e) => {
                    e.message = format!("before execute: {}; nothing executed", e.message);
                    (Err(e), CallDiagnostics::default())
                }
                None => {
                    // The kill switch stops the call while it runs: its future
                    // (the tool's instance with it) is dropped, and the step is
                    // settled as one the host stopped (in doubt: compensated
                    // from its pre-image, and its host file journal, when it
                    // has side effects).
                    let mut switch = host.switch.watch();
                    let side_effects = tool.meta.has_side_effects;
                    let run = execute::Attempts {
                        ctx: &ctx,
                        args_text: &args_text,
                        args,
                        sub_model,
                        journal: journal.as_ref(),
                    };
                    tokio::select! {
                        r = execute::with_retries(host, saga, tool, run) => r?,
                        mode = crate::switch::stopped(&mut switch, side_effects) => (
                            Err(capsaga_core::pause::aborted(mode, &tool.meta.name)),
                            CallDiagnostics {
                                interrupted: true,
                                ..CallDiagnostics::default()
                            },
                        ),
                    }
                }
            };
            // 9-10. COMMIT or FAIL (and roll back).
            wal::settle(host, saga, tool, seq, result, diagnostics).await
        }
        .await;
        if settled.is_err() {
            saga.mark_in_doubt(Some(seq), &host.in_doubt);
        }
        settled
    }
}

/// Stages 4 and 4b: the policy, then information flow (the plan's scope,
/// the arguments' provenance). Whether the call may run freely or with an
/// approval, the values a human's approval endorses, and whether it is
/// parked only for information flow (then a human's no refuses this call
/// and the saga goes on, as a sink's `deny` would).
fn admit(
    host: &crate::host::Host,
    saga: &mut Saga,
    tool: &LoadedTool,
    args: &Value,
) -> Result<(Allowed, Vec<Finding>, bool), Box<Rejection>> {
    // 4. Policy.
    let allowed = policy::decide(host, tool, saga.autonomy)?;
    // 4b. Information flow: the plan's scope, the arguments' provenance.
    let flowed = flow::judge(host, saga, tool, args)?;
    // Parked only for information flow: a human's no refuses this call
    // and the saga goes on (CallDeclined), as a sink's `deny` would.
    let flow_only = matches!(
        (&allowed, &flowed),
        (Allowed::Freely, Flowed::Approve { .. })
    );
    Ok(match (allowed, flowed) {
        (a, Flowed::Free) => (a, Vec::new(), flow_only),
        (Allowed::Freely, Flowed::Approve { reason, findings }) => {
            (Allowed::WithApproval(reason), findings, flow_only)
        }
        (Allowed::WithApproval(p), Flowed::Approve { reason, findings }) => (
            Allowed::WithApproval(format!("{p}; {reason}")),
            findings,
            flow_only,
        ),
    })
}
