//! The stateless adapter (MCP 2026-07-28, SEP-2575): a request that
//! carries its protocol version, client info and capabilities in `_meta`
//! has no session, so it has no session saga. rmcp routes such a request
//! to a handler of its own ([`super::McpSession`] made for that request
//! alone); this module maps its `tools/call` into the door's saga scope
//! of a stateless request (`capsaga_door::scope::serve_request`: one entry
//! into the door per request, where every rule below lives) and the
//! door's outcome back into the protocol (results, the saga handle in
//! `_meta`, input-required confirmations sealed in `requestState`,
//! refusals as JSON-RPC errors):
//!
//! - Without a saga handle, the call is a saga of its own: started for the
//!   request and ended when it returns, by the server's session-end rule
//!   (commit by default, `--session-end rollback`), unless it waits for an
//!   approval (then it stays parked, and its handle is returned).
//! - `_meta["dev.capsaga/saga"] = "new"` starts a saga that stays open: the
//!   result's `_meta["dev.capsaga/saga"]` is its handle. A later request
//!   passing the handle continues that saga (the next step of it);
//!   `capsaga_commit` / `capsaga_rollback` with the handle (in `_meta` or
//!   as the argument `saga`) end it.
//! - A handle is the saga's id (a UUID v4: 122 random bits, never
//!   derivable from anything the client sees of another principal) looked
//!   up in the store: any host sharing the store finds it. It is bound to
//!   its principal: a handle of another principal's saga, a handle naming
//!   no saga, and a malformed one get the same refusal (nothing tells them
//!   apart); a handle of a saga that ended is refused as ended. It names
//!   only a saga opened by a stateless request (one saga, one scope:
//!   `dispatch::scope`): the saga of a live 2025-11-25 session, of a task,
//!   of a REST or agent turn or of a plan, the principal's own included,
//!   is refused, naming the scope that opened it; nothing of it is
//!   continued, committed or rolled back.
//! - Any host sharing the store serves the next request of a handle: at
//!   the end of a request that leaves its saga open (handle kept, or
//!   parked for an approval) the serving host releases the saga
//!   (`Dispatcher::release`: no owner, its fencing token moved, an `OWNER`
//!   record), and the next request, on whichever host, claims it (compare
//!   and set, a new token). Crash recovery leaves a released saga alone:
//!   a host killed while idle between requests loses nothing of its
//!   clients' sagas. A host that dies during a request never released its
//!   saga, which is recovered (rolled back) as before. See
//!   `dispatch::handles`.
//! - Two requests of one handle never run at once: on one host the second
//!   finds the saga held by the first (`DispatchError::Held`) and is
//!   refused as busy; on two hosts one claims the saga and the other gets
//!   the same "busy, retry" refusal (`DispatchError::Busy`).
//! - A handle not used for `--handle-idle-ms` (30 minutes by default) is
//!   abandoned: whichever host's sweep finds it first ends its saga by
//!   `--on-abandoned-handle` (rollback by default), logged. A saga parked
//!   for an approval is not swept.
//!
//! Everything else (tools, resources, prompts, completion) is the same
//! handler as a session's: rmcp fills in the revision's caching hints and
//! `resultType`; nothing here is a second implementation of a call.
//! When rmcp grows a saga-aware stateless mode, this module is the seam to
//! swap.

use super::McpSession;
use super::confirm;
use super::elicit::Elicit;
use super::handler::{act_of, internal, to_result};
use crate::tools;
use capsaga_core::error::{ErrorKind, ToolError};
use capsaga_core::principal::{Principal, Role};
use capsaga_door::dispatch::{Args, Call, Settled};
use capsaga_door::scope::{
    Confirming, HandleError, HandleOutcome, HandleRequest, Requested, serve_request,
};
use rmcp::ErrorData as McpError;
use rmcp::RoleServer;
use rmcp::model::{CallToolResponse, InputResponses, ProtocolVersion};
use rmcp::service::RequestContext;
use serde_json::{Value, json};

/// The `_meta` key of a saga handle, in requests and results.
pub const SAGA_META: &str = "dev.capsaga/saga";

/// The handle value that opens a saga that stays open.
pub use capsaga_door::scope::NEW_SAGA;

/// Whether this request is served statelessly: it names the 2026-07-28
/// revision (or a later one) in its own `_meta`.
pub(super) fn is_stateless(context: &RequestContext<RoleServer>) -> bool {
    context
        .meta
        .protocol_version()
        .is_some_and(|v| v.as_str() >= ProtocolVersion::V_2026_07_28.as_str())
}

/// The saga handle the request names: `_meta`, else the argument `saga`
/// (for `capsaga_commit` / `capsaga_rollback`).
fn requested_handle<'a>(
    context: &'a RequestContext<RoleServer>,
    args: &'a Value,
) -> Result<Option<&'a str>, McpError> {
    let v = context.meta.get(SAGA_META).or_else(|| args.get("saga"));
    match v {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) if s.len() <= 64 => Ok(Some(s.as_str())),
        Some(_) => Err(refused(HandleError::Unknown)),
    }
}

/// The protocol's answer to a refused request: the same `-32602` for a
/// forged handle, a handle naming no saga and one of another principal's
/// saga; "busy, retry" for a handle another request drives now.
fn refused(e: HandleError) -> McpError {
    match e {
        HandleError::Unknown
        | HandleError::Ended { .. }
        | HandleError::Scope { .. }
        | HandleError::Mismatch => McpError::invalid_params(e.to_string(), None),
        HandleError::Door(e) => internal(e),
        HandleError::Approval(e) => internal(e),
        e => McpError::invalid_request(e.to_string(), None),
    }
}

fn with_handle(mut result: Value, handle: Option<&str>) -> Value {
    if let (Some(h), Some(m)) = (handle, result.as_object_mut()) {
        m.insert("_meta".into(), json!({ SAGA_META: h }));
    }
    result
}

impl McpSession {
    /// `tools/call` of a capsaga tool (or a session tool) on a request
    /// without a session: one entry into the door
    /// (`capsaga_door::scope::serve_request`), which opens or re-opens the
    /// saga, runs the call or ends the saga, and releases or ends it. When
    /// the client cancels the request (`notifications/cancelled`, or it
    /// goes away: rmcp cancels the request's token), the call is dropped
    /// where it stands and its saga settled from its log before any other
    /// request of its handle may run; the (undeliverable) answer is a
    /// `timeout` tool error saying what became of the saga.
    pub(super) async fn call_stateless(
        &self,
        name: &str,
        args: Value,
        input: (Option<&InputResponses>, Option<&str>),
        context: &RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, McpError> {
        let shared = &self.state.shared;
        let who = self.state.saga.principal();
        let (responses, state) = input;
        let handle = requested_handle(context, &args)?;
        // A retry answering a confirmation names its saga in the state.
        let pending = match state {
            Some(s) => Some(confirm::open(shared.states()?, &who.name, name, s)?),
            None => None,
        };
        let approver = Elicit {
            peer: context.peer.clone(),
            who: Principal::new(&who.name, Role::Client),
            // No server-to-client request on this revision: a call that
            // needs a human parks, and the result says so.
            can_ask: false,
        };
        let requested = if name == tools::COMMIT || name == tools::ROLLBACK {
            Requested::End(act_of(name))
        } else {
            Requested::Call(Call::new(name, Args::Value(&args)).with_approver(&approver))
        };
        let label = format!(
            "mcp request ({})",
            super::elicit::client_label(context.client_info().as_ref())
        );
        let req = HandleRequest {
            who,
            handle,
            confirming: pending.as_ref().map(|p| Confirming {
                saga: &p.saga,
                approval: &p.approval,
                answer: confirm::answer(responses),
            }),
            requested,
            label: &label,
            autonomy: shared.autonomy(),
            end: shared.session_end,
            may_ask: context
                .client_capabilities()
                .is_some_and(|c| c.elicitation.is_some()),
        };
        let door = shared.door();
        let served = serve_request(&door, req, context.ct.cancelled())
            .await
            .map_err(refused)?;
        self.answer(name, served)
    }

    /// The protocol's answer to what the door made of a stateless request.
    fn answer(&self, name: &str, served: HandleOutcome) -> Result<CallToolResponse, McpError> {
        match served {
            HandleOutcome::Ran {
                saga_id,
                submitted,
                handle,
            } => {
                let out = tools::outcome(name, &saga_id, &submitted);
                to_result(with_handle(out, handle.as_deref()))
            }
            HandleOutcome::Ask { saga_id, approval } => {
                let p = confirm::Pending {
                    saga: saga_id,
                    approval: approval.approval_id.clone(),
                };
                let who = &self.state.saga.principal().name;
                let state = confirm::seal(self.state.shared.states()?, who, name, &p);
                let (summary, reason) = (&approval.summary, &approval.reason);
                confirm::ask(summary, reason, &approval.approval_id, state, &p.saga)
                    .map(CallToolResponse::InputRequired)
            }
            HandleOutcome::Declined {
                saga_id,
                approval_id,
                final_state,
            } => to_result(tools::declined_result(&approval_id, &saga_id, final_state)),
            HandleOutcome::Ended { saga_id, ended } => to_result(tools::ended_result(&saga_id, ended)),
            HandleOutcome::NoHandle => to_result(tools::result(
                "no saga handle: pass the handle of the saga to end (_meta \"dev.capsaga/saga\" or the argument `saga`)".into(),
                true,
                Some(json!({"saga_id": null})),
            )),
            HandleOutcome::Cancelled { saga_id, settled } => cancelled(&saga_id, settled),
        }
    }
}

/// The (undeliverable) answer to a cancelled request: what became of its
/// saga.
fn cancelled(
    saga_id: &str,
    settled: Result<Settled, capsaga_door::dispatch::DispatchError>,
) -> Result<CallToolResponse, McpError> {
    let what = match &settled {
        Ok(Settled::RolledBack(state)) => format!(
            "saga {saga_id} was recovered from its log: whatever it had begun was compensated (state {state})"
        ),
        Ok(Settled::Released) => {
            format!("nothing of it was logged: saga {saga_id} is as it was, its handle still valid")
        }
        Ok(Settled::LeftAlone) => format!("saga {saga_id} had already been handed on"),
        Err(e) => format!("settling saga {saga_id} failed ({e}); recovery finishes it"),
    };
    let e = ToolError::with_hint(
        ErrorKind::Timeout,
        format!("the call was cancelled; {what}"),
        "The client cancelled this call.",
    );
    to_result(tools::error_result(
        &e,
        json!({"saga_id": saga_id, "cancelled": true}),
    ))
}
