//! The stateless adapter (MCP 2026-07-28, SEP-2575): a request that
//! carries its protocol version, client info and capabilities in `_meta`
//! has no session, so it has no session saga. rmcp routes such a request
//! to a handler of its own ([`super::McpSession`] made for that request
//! alone); this module gives its `tools/call` a saga:
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
use crate::tools;
use capsaga_core::error::{ErrorKind, ToolError};
use capsaga_core::fsm::State;
use capsaga_core::principal::{Principal, Role};
use capsaga_door::dispatch::{
    Act, Args, Call, DispatchError, Dispatcher, Hold, Outcome, Scope, ScopeError, Settled, Via,
};
use capsaga_door::saga::Saga;
use rmcp::ErrorData as McpError;
use rmcp::RoleServer;
use rmcp::model::{CallToolResponse, InputRequiredResult, InputResponses, ProtocolVersion};
use rmcp::service::RequestContext;
use serde_json::{Value, json};

/// The `_meta` key of a saga handle, in requests and results.
pub const SAGA_META: &str = "dev.capsaga/saga";

/// The handle value that opens a saga that stays open.
pub const NEW_SAGA: &str = "new";

/// Whether this request is served statelessly: it names the 2026-07-28
/// revision (or a later one) in its own `_meta`.
pub(super) fn is_stateless(context: &RequestContext<RoleServer>) -> bool {
    context
        .meta
        .protocol_version()
        .is_some_and(|v| v.as_str() >= ProtocolVersion::V_2026_07_28.as_str())
}

/// The same refusal for a forged handle, a handle naming no saga and one
/// of another principal's saga.
fn unknown_handle() -> McpError {
    McpError::invalid_params(
        "unknown saga handle: it names no saga of yours (start one with _meta \"dev.capsaga/saga\": \"new\")",
        None,
    )
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
        Some(_) => Err(unknown_handle()),
    }
}

/// The refusal of a request whose saga another request drives now (on
/// this host or another).
fn busy(handle: &str) -> McpError {
    McpError::invalid_request(
        format!("saga {handle} is busy with another request: retry when it returns"),
        None,
    )
}

/// A well-formed saga id: a lower-case hyphenated UUID.
fn well_formed(handle: &str) -> bool {
    handle.len() == 36
        && handle
            .chars()
            .all(|c| c.is_ascii_digit() || ('a'..='f').contains(&c) || c == '-')
}

/// What a request holds of its saga, for settling it if the request stops
/// mid-way (`Dispatcher::settle_interrupted`): filled in by the request as
/// it opens the saga, read by [`McpSession::call_stateless`] when the
/// client cancels.
#[derive(Default)]
struct Flight {
    /// The saga, once opened. A request cancelled after it handed the saga
    /// on (released or ended it) leaves it to the settling, which finds it
    /// no longer this host's, or ended, and leaves it alone.
    saga: Option<String>,
    /// The saga's next step when the request began.
    first_seq: u64,
    /// Whether the saga outlives the request (a handle's).
    keep: bool,
    /// This host's hold on the saga (`dispatch::scope`), kept until the
    /// saga is settled.
    _hold: Option<Hold>,
}

impl Flight {
    fn open(&mut self, saga: &Saga, keep: bool, hold: Hold) {
        self.saga = Some(saga.id().to_string());
        self.first_seq = saga.next_seq();
        self.keep = keep;
        self._hold = Some(hold);
    }
}

fn with_handle(mut result: Value, handle: Option<&str>) -> Value {
    if let (Some(h), Some(m)) = (handle, result.as_object_mut()) {
        m.insert("_meta".into(), json!({ SAGA_META: h }));
    }
    result
}

impl McpSession {
    /// Release `saga` at the end of a request that leaves it open, so that
    /// any host sharing the store can serve the next request of its handle
    /// (`Dispatcher::release`). A failed release is logged: the saga stays
    /// this host's (the next request here continues it; another host's is
    /// refused as busy until this host is gone and recovery ends it).
    async fn release(&self, saga: Saga) {
        let id = saga.id().to_string();
        match self.state.shared.door().release(saga).await {
            Ok(true) => {}
            Ok(false) => tracing::warn!(saga = %id, "not released: its token moved or it ended"),
            Err(e) => tracing::warn!(saga = %id, "releasing the saga failed: {e}"),
        }
    }

    /// Re-open the saga `handle` names for this request's principal, to
    /// `act` on it: the door's one check of principal, scope and ownership
    /// (`Dispatcher::reopen` through `Via::Handle`).
    async fn open_handle(&self, handle: &str, act: Act) -> Result<(Saga, Hold), McpError> {
        let shared = &self.state.shared;
        if !well_formed(handle) {
            return Err(unknown_handle());
        }
        let door = shared.door();
        let (mut saga, hold) = door
            .reopen(handle, Via::Handle, act, &self.state.principal)
            .await
            .map_err(|e| match e {
                DispatchError::NotFound(_) | DispatchError::Scope(ScopeError::NotYours) => {
                    unknown_handle()
                }
                DispatchError::Scope(ScopeError::Ended(state)) => McpError::invalid_params(
                    format!("saga {handle} has ended ({state}): start a new one"),
                    None,
                ),
                DispatchError::Scope(e) => {
                    McpError::invalid_params(format!("saga {handle}: {e}"), None)
                }
                // Another request of this handle runs now, here (it holds
                // the saga) or on another host (it owns the saga, or
                // claimed it first): the same refusal.
                DispatchError::Busy { .. } | DispatchError::Held { .. } => busy(handle),
                e @ DispatchError::Store(_) => super::handler::internal(e),
                e => McpError::invalid_request(e.to_string(), None),
            })?;
        door.set_autonomy(&mut saga, shared.autonomy());
        Ok((saga, hold))
    }

    /// `tools/call` of a capsaga tool (or a session tool) on a request
    /// without a session. When the client cancels the request
    /// (`notifications/cancelled`, or it goes away: rmcp cancels the
    /// request's token), the call is dropped where it stands and its saga
    /// settled from its log (`Dispatcher::settle_interrupted`) before any
    /// other request of its handle may run; the (undeliverable) answer is a
    /// `timeout` tool error saying what became of the saga.
    pub(super) async fn call_stateless(
        &self,
        name: &str,
        args: Value,
        input: (Option<&InputResponses>, Option<&str>),
        context: &RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, McpError> {
        let mut flight = Flight::default();
        let finished = {
            let run = self.drive(name, args, input, context, &mut flight);
            tokio::select! {
                r = run => Some(r),
                () = context.ct.cancelled() => None,
            }
        };
        if let Some(r) = finished {
            return r;
        }
        let Some(saga_id) = flight.saga.take() else {
            return Err(McpError::invalid_request(
                "the request was cancelled before it opened a saga",
                None,
            ));
        };
        let settled = self
            .state
            .shared
            .door()
            .settle_interrupted(&saga_id, flight.first_seq, flight.keep)
            .await;
        // Only now may another request of the handle run here.
        drop(flight);
        let what = match &settled {
            Ok(Settled::RolledBack(state)) => format!(
                "saga {saga_id} was recovered from its log: whatever it had begun was compensated (state {state})"
            ),
            Ok(Settled::Released) => {
                format!(
                    "nothing of it was logged: saga {saga_id} is as it was, its handle still valid"
                )
            }
            Ok(Settled::LeftAlone) => format!("saga {saga_id} had already been handed on"),
            Err(e) => {
                tracing::warn!(saga = %saga_id, "settling a cancelled request's saga: {e}");
                format!("settling saga {saga_id} failed ({e}); recovery finishes it")
            }
        };
        let e = ToolError::with_hint(
            ErrorKind::Timeout,
            format!("the call was cancelled; {what}"),
            "The client cancelled this call.",
        );
        super::handler::to_result(tools::error_result(
            &e,
            json!({"saga_id": saga_id, "cancelled": true}),
        ))
    }

    /// `capsaga_commit` or `capsaga_rollback` (`name`) of the saga
    /// `handle` names.
    async fn end_by_handle(
        &self,
        name: &str,
        handle: Option<String>,
        flight: &mut Flight,
        door: &Dispatcher,
    ) -> Result<CallToolResponse, McpError> {
        let Some(h) = handle.filter(|h| h != NEW_SAGA) else {
            return super::handler::to_result(tools::result(
                "no saga handle: pass the handle of the saga to end (_meta \"dev.capsaga/saga\" or the argument `saga`)".into(),
                true,
                Some(json!({"saga_id": null})),
            ));
        };
        let act = if name == tools::COMMIT {
            Act::Commit
        } else {
            Act::Rollback
        };
        let (mut saga, hold) = self.open_handle(&h, act).await?;
        flight.open(&saga, true, hold);
        // Still open after a commit that parked it: released. After a
        // failure of the door itself it stays this host's (recovery
        // finishes it if this host goes).
        let ended = self.end_saga_tool(name, &mut saga, door).await?;
        if !saga.state().is_terminal() {
            self.release(saga).await;
        }
        super::handler::to_result(ended)
    }

    /// The saga of a call: the one `handle` names (`NEW_SAGA`: a new one
    /// the handle keeps), else a new one for this request alone; and
    /// whether it outlives the request.
    async fn open_for_call(
        &self,
        handle: Option<&str>,
        context: &RequestContext<RoleServer>,
        flight: &mut Flight,
        door: &Dispatcher,
    ) -> Result<(Saga, bool), McpError> {
        let shared = &self.state.shared;
        Ok(match handle {
            Some(h) if h != NEW_SAGA => {
                let (s, hold) = self.open_handle(h, Act::Continue).await?;
                flight.open(&s, true, hold);
                (s, true)
            }
            other => {
                let label = format!(
                    "mcp request ({})",
                    super::elicit::client_label(context.client_info().as_ref())
                );
                let (mut s, hold) = door
                    .open(&self.state.principal, Scope::Handle, &label, None)
                    .await
                    .map_err(super::handler::internal)?;
                door.set_autonomy(&mut s, shared.autonomy());
                let keep = other == Some(NEW_SAGA);
                flight.open(&s, keep, hold);
                (s, keep)
            }
        })
    }

    /// A retry answering the confirmation `p` (its `responses`): not
    /// answered, asked again; declined, the saga rolled back; confirmed,
    /// the saga back to run the call. `Err`: the request's answer.
    async fn answered(
        &self,
        p: &confirm::Pending,
        responses: Option<&InputResponses>,
        name: &str,
        mut saga: Saga,
        (door, who): (&Dispatcher, &Principal),
    ) -> Result<Saga, Result<CallToolResponse, McpError>> {
        let saga_id = saga.id().to_string();
        let Some(yes) = confirm::answer(responses) else {
            // Not answered: ask again, with the same state.
            let asked = self.ask_again(p, name, &saga_id).await;
            self.release(saga).await;
            return Err(asked.map(CallToolResponse::InputRequired));
        };
        if let Err(e) = door.confirm(&p.approval, yes, who).await {
            // E.g. a state replayed after its approval was claimed: the
            // saga stays as it was, released for its next request.
            self.release(saga).await;
            return Err(Err(McpError::invalid_request(e.to_string(), None)));
        }
        if !yes {
            let report = match door.abort(&mut saga).await {
                Ok(r) => r,
                Err(e) => return Err(Err(super::handler::internal(e))),
            };
            return Err(super::handler::to_result(tools::result(
                format!(
                    "you declined the call: approval {} denied, saga {saga_id} rolled back (state {})",
                    p.approval, report.final_state
                ),
                true,
                Some(json!({"saga_id": saga_id, "approval_status": "denied"})),
            )));
        }
        Ok(saga)
    }

    /// The body of [`McpSession::call_stateless`]; `flight` learns the
    /// saga as soon as it is opened.
    async fn drive(
        &self,
        name: &str,
        args: Value,
        input: (Option<&InputResponses>, Option<&str>),
        context: &RequestContext<RoleServer>,
        flight: &mut Flight,
    ) -> Result<CallToolResponse, McpError> {
        let shared = &self.state.shared;
        let door = shared.door();
        let who = Principal::new(&self.state.principal.name, Role::Client);
        let (responses, state) = input;
        let mut handle = requested_handle(context, &args)?.map(str::to_owned);
        // A retry answering a confirmation names its saga in the state.
        let confirming = match state {
            Some(s) => Some(confirm::open(shared.states()?, &who.name, name, s)?),
            None => None,
        };
        if let Some(p) = &confirming {
            if handle.as_deref().is_some_and(|h| h != p.saga) {
                return Err(McpError::invalid_params(
                    "the requestState and the saga handle name different sagas",
                    None,
                ));
            }
            handle = Some(p.saga.clone());
        }
        if name == tools::COMMIT || name == tools::ROLLBACK {
            return self.end_by_handle(name, handle, flight, &door).await;
        }
        let (mut saga, keep) = self
            .open_for_call(handle.as_deref(), context, flight, &door)
            .await?;
        let saga_id = saga.id().to_string();
        if let Some(p) = &confirming {
            saga = match self.answered(p, responses, name, saga, (&door, &who)).await {
                Ok(saga) => saga,
                Err(answer) => return answer,
            };
        }
        let approver = Elicit {
            peer: context.peer.clone(),
            who: who.clone(),
            // No server-to-client request on this revision: a call that
            // needs a human parks, and the result says so.
            can_ask: false,
        };
        let call = Call::new(name, Args::Value(&args)).with_approver(&approver);
        // A failure of the door itself (the store) leaves the saga this
        // host's, unreleased: a step may be in doubt. Dropped in doubt, it
        // is rolled back by this host once the store answers
        // (`serve::cluster::doubt_loop`), or by recovery if this host goes
        // first; a request of the handle meanwhile rolls it back itself.
        let submitted = door
            .submit(&mut saga, call)
            .await
            .map_err(super::handler::internal)?;
        if let Outcome::AwaitingApproval {
            approval,
            denied_by: None,
            ..
        } = &submitted.outcome
            && context
                .client_capabilities()
                .is_some_and(|c| c.elicitation.is_some())
            && door.may_confirm(name, &who)
        {
            let p = confirm::Pending {
                saga: saga_id.clone(),
                approval: approval.approval_id.clone(),
            };
            let asked = shared.states().and_then(|codec| {
                let state = confirm::seal(codec, &who.name, name, &p);
                confirm::ask(
                    &approval.summary,
                    &approval.reason,
                    &approval.approval_id,
                    state,
                    &saga_id,
                )
            });
            self.release(saga).await;
            return asked.map(CallToolResponse::InputRequired);
        }
        let out = tools::outcome(name, &saga_id, &submitted);
        let failed = matches!(submitted.outcome, Outcome::Failed { .. });
        let parked = saga.state() == State::AwaitingApproval;
        if failed || saga.state().is_terminal() {
            return super::handler::to_result(out);
        }
        if keep || parked {
            // Released before this host's hold goes (`flight` keeps it):
            // the next request of the handle, here or on another host,
            // claims it.
            self.release(saga).await;
            return super::handler::to_result(with_handle(out, Some(&saga_id)));
        }
        super::end_saga(shared, saga, flight._hold.take()).await;
        super::handler::to_result(out)
    }

    /// The confirmation `p` asked again (not answered), with the same
    /// state.
    async fn ask_again(
        &self,
        p: &confirm::Pending,
        name: &str,
        saga_id: &str,
    ) -> Result<InputRequiredResult, McpError> {
        let shared = &self.state.shared;
        let row = shared
            .live
            .host()
            .store
            .approval(&p.approval)
            .await
            .map_err(super::handler::internal)?;
        let again = confirm::seal(shared.states()?, &self.state.principal.name, name, p);
        confirm::ask(&row.summary, &row.reason, &row.approval_id, again, saga_id)
    }
}
