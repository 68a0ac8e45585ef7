//! What the session's `ServerHandler` ([`super::server`]) answers with:
//! tools listed and called (each call a step through the door), resources
//! read, the session's saga ended.

use super::elicit::{Elicit, client_name, supports_elicitation};
use super::stateless;
use super::{McpSession, Scoped};
use crate::{resources, tools};
use capsaga_core::error::{ErrorKind, ToolError};
use capsaga_core::principal::{Principal, Role};
use capsaga_door::dispatch::{Args, Call, Scope};
use capsaga_door::saga::Saga;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ListToolsResult,
    ProgressNotificationParam,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData as McpError, RoleServer};
use serde_json::{Value, json};
use std::time::Duration;

pub(super) fn internal(e: impl std::fmt::Display) -> McpError {
    McpError::internal_error(e.to_string(), None)
}

pub(super) fn to_result(v: Value) -> Result<CallToolResponse, McpError> {
    let r: CallToolResult = parse(v)?;
    Ok(r.into())
}

/// A result of ours as rmcp's type, marked complete (`resultType`, MCP
/// 2026-07-28 §Results; rmcp strips the mark for a peer of an older
/// revision).
pub(super) fn parse<T: serde::de::DeserializeOwned>(mut v: Value) -> Result<T, McpError> {
    if let Value::Object(m) = &mut v {
        m.entry("resultType").or_insert_with(|| json!("complete"));
    }
    serde_json::from_value(v).map_err(internal)
}

pub(super) fn no_resource(uri: &str) -> McpError {
    let uri: String = uri.chars().take(200).collect();
    McpError::resource_not_found(format!("no resource {uri}"), Some(json!({ "uri": uri })))
}

impl McpSession {
    /// The request's principal (from the HTTP layer, when there is one)
    /// must be the session's: the HTTP layer already answers 404 to
    /// another principal naming the session; this is the handler's own
    /// check.
    pub(super) fn check_caller(
        &self,
        context: &RequestContext<RoleServer>,
    ) -> Result<(), McpError> {
        let from_http = context
            .extensions
            .get::<http::request::Parts>()
            .and_then(|p| p.extensions.get::<Principal>());
        match from_http {
            Some(p) if p.name != self.state.principal.name => Err(McpError::invalid_request(
                "this session belongs to another principal",
                None,
            )),
            _ => Ok(()),
        }
    }

    async fn session_tool(&self, name: &str) -> Result<CallToolResponse, McpError> {
        let door = &self.state.shared.door();
        let (taken, ended) = {
            let mut slot = self.state.saga.lock().await;
            let ended = self.forget_if_ended(&mut slot).await;
            (slot.take(), ended)
        };
        let Some(mut held) = taken else {
            if let Some((id, state)) = ended {
                return to_result(ended_elsewhere(name, &id, state));
            }
            return to_result(tools::result(
                "no saga is open in this session: nothing to do".into(),
                false,
                Some(json!({"saga_id": null})),
            ));
        };
        let out = self.end_saga_tool(name, &mut held.saga, door).await?;
        if held.saga.state() == capsaga_core::fsm::State::AwaitingApproval {
            // A parked saga stays the session's: it waits for its human.
            *self.state.saga.lock().await = Some(held);
        }
        to_result(out)
    }

    /// `capsaga_commit` (`name` is [`tools::COMMIT`]) or `capsaga_rollback`
    /// of `saga`: the tool result as JSON. A commit of a saga parked for an
    /// approval leaves it parked (the result says so).
    pub(super) async fn end_saga_tool(
        &self,
        name: &str,
        saga: &mut Saga,
        door: &capsaga_door::dispatch::Dispatcher,
    ) -> Result<Value, McpError> {
        let id = saga.id().to_string();
        if name == tools::COMMIT {
            let state = match door.finish(saga).await {
                Ok(state) => state,
                Err(e) => {
                    let capsaga_door::dispatch::DispatchError::InDoubt { report, .. } = &e else {
                        return Err(internal(e));
                    };
                    // Not committed: a step's outcome was never written;
                    // the saga was rolled back instead.
                    let structured = json!({"saga_id": id, "saga_state": report.final_state.to_string(),
                        "committed": false,
                        "undone": serde_json::to_value(&report.undone).unwrap_or(Value::Null)});
                    return Ok(tools::result(e.to_string(), true, Some(structured)));
                }
            };
            if state == capsaga_core::fsm::State::AwaitingApproval {
                let text = format!(
                    "saga {id} waits for an approval: approve or deny it, call the tool again, or roll back with {}",
                    tools::ROLLBACK
                );
                return Ok(tools::result(
                    text,
                    true,
                    Some(json!({"saga_id": id, "saga_state": state.to_string()})),
                ));
            }
            // Only a Done saga is committed: a saga this session holds in
            // another state (ended in failure) is said so, never acknowledged.
            Ok(tools::result(
                format!("saga {id} committed ({state})"),
                state != capsaga_core::fsm::State::Done,
                Some(json!({"saga_id": id, "saga_state": state.to_string()})),
            ))
        } else {
            let report = door.abort(saga).await.map_err(internal)?;
            let ok = report.all_compensated();
            Ok(tools::result(
                format!(
                    "saga {id} rolled back: {} step(s) compensated, state {}",
                    report.undone.len(),
                    report.final_state
                ),
                !ok,
                Some(
                    json!({"saga_id": id, "saga_state": report.final_state.to_string(),
                    "undone": serde_json::to_value(&report.undone).unwrap_or(Value::Null)}),
                ),
            ))
        }
    }

    /// Forget the session's saga when it ended elsewhere (the operator
    /// rolled it back once the session no longer held it), or roll it back
    /// here when it is parked on an approval an operator denied (the denial
    /// leaves a saga the session holds to the session,
    /// `Dispatcher::end_if_denied`): the next call starts a new one.
    /// Returns the saga's id and state when it ended elsewhere (e.g. a
    /// host that recovered it while this one was paused past its lease):
    /// the request that finds it so must say so, not carry on as if the
    /// session's saga were its own ([`ended_elsewhere`]).
    async fn forget_if_ended(
        &self,
        slot: &mut Option<Scoped>,
    ) -> Option<(String, capsaga_core::fsm::State)> {
        let saga = slot.as_mut().map(|s| &mut s.saga)?;
        let door = self.state.shared.door();
        match door.end_if_denied(saga).await {
            Ok(true) => {
                *slot = None;
                return None;
            }
            Ok(false) => {}
            Err(e) => tracing::warn!("saga {}: rollback after a denial: {e}", saga.id()),
        }
        let host = self.state.shared.live.host();
        let store = &host.store;
        if let Ok(Some(row)) = store.saga(saga.id()).await
            && row.state != saga.state()
            && row.state.is_terminal()
        {
            *slot = None;
            return Some((row.saga_id, row.state));
        }
        None
    }

    /// The contents of the resource `uri` as `resources/read` returns them,
    /// or `resource_not_found`: the one lookup of a URI, for `read` and
    /// `subscribe` alike.
    pub(super) async fn resource(&self, uri: &str) -> Result<Value, McpError> {
        let extension = self.state.shared.extension.as_ref();
        let found = if let Some(x) = extension.filter(|x| x.owns_resource(uri)) {
            x.read_resource(uri)
        } else {
            let host = self.state.shared.live.host();
            let store = &*host.store;
            resources::read(store, uri, &self.state.principal)
                .await
                .map_err(internal)?
        };
        found.ok_or_else(|| no_resource(uri))
    }

    /// The session's saga is gone from memory mid-call (the call was
    /// cancelled): settled from its log (`Dispatcher::settle_interrupted_held`).
    /// A call that logged a step is a call the client aborted: the saga is
    /// recovered as after a crash (`None`). A call that logged nothing
    /// leaves the session's saga as it was: re-opened, and given back.
    async fn settle_cancelled(&self, saga_id: &str, first_seq: u64) -> Option<Saga> {
        let door = &self.state.shared.door();
        match door.settle_interrupted_held(saga_id, first_seq).await {
            Ok(Some(mut saga)) => {
                door.set_autonomy(&mut saga, self.state.shared.autonomy());
                Some(saga)
            }
            Ok(None) => None,
            Err(e) => {
                tracing::warn!("cancelled call: settling saga {saga_id}: {e}");
                None
            }
        }
    }
}

/// Run `fut` until it ends, or until the client cancels the request
/// (`None`), telling the client `message` every second when it gave a
/// progress `token`. Also the number of progress notes sent.
async fn with_progress<T>(
    fut: impl Future<Output = T>,
    context: &RequestContext<RoleServer>,
    token: Option<&rmcp::model::ProgressToken>,
    message: &str,
) -> (Option<T>, f64) {
    let mut n = 0.0;
    tokio::pin!(fut);
    let mut tick = tokio::time::interval(Duration::from_secs(1));
    let r = loop {
        tokio::select! {
            r = &mut fut => break Some(r),
            () = context.ct.cancelled() => break None,
            _ = tick.tick(), if token.is_some() => {
                if let Some(p) = token.and_then(|t| progress(t, n, message)) {
                    let _ = context.peer.notify_progress(p).await;
                }
                n += 1.0;
            }
        }
    };
    (r, n)
}

fn progress(
    token: &rmcp::model::ProgressToken,
    n: f64,
    message: &str,
) -> Option<ProgressNotificationParam> {
    serde_json::from_value(json!({
        "progressToken": token,
        "progress": n,
        "message": message,
    }))
    .ok()
}

impl McpSession {
    /// Whether `name` is a tool this session can call (the host's, the
    /// session tools, the extension's when there is one): a span names only
    /// those (issue 30: the span's name stays of bounded cardinality).
    pub(super) fn known_tool(&self, name: &str) -> bool {
        let shared = &self.state.shared;
        shared.live.host().registry.get(name).is_some()
            || name == tools::COMMIT
            || name == tools::ROLLBACK
            || shared.extension.as_ref().is_some_and(|x| x.has_tool(name))
    }

    /// The definition `tools/list` gives of tool `name` (a catalog tool,
    /// a session tool or the extension's), as JSON; `None` for a
    /// name it does not list. rmcp checks a 2026-07-28 `tools/call`'s
    /// `Mcp-Param-*` headers against the properties its input schema
    /// annotates with `x-mcp-header` (SEP-2243), before any handler.
    pub(super) fn tool_definition(&self, name: &str) -> Option<Value> {
        let shared = &self.state.shared;
        let by_name = |list: Vec<Value>| list.into_iter().find(|t| t["name"] == name);
        if let Some(t) = shared
            .door()
            .catalog(shared.autonomy())
            .iter()
            .find(|t| t.meta.name == name)
        {
            return Some(tools::definition(t));
        }
        by_name(tools::session_tools().into())
            .or_else(|| shared.extension.as_ref().and_then(|x| by_name(x.tools())))
    }

    /// `tools/list`.
    pub(super) async fn tools_list(&self) -> Result<ListToolsResult, McpError> {
        let shared = &self.state.shared;
        let mut list: Vec<Value> = shared
            .door()
            .catalog(shared.autonomy())
            .iter()
            .map(|t| tools::definition(t))
            .collect();
        list.extend(tools::session_tools());
        if let Some(x) = &shared.extension {
            list.extend(x.tools());
        }
        parse(json!({ "tools": list }))
    }

    /// A long call of a stateless client that supports tasks, started as
    /// a task.
    async fn start_task(
        &self,
        name: &str,
        args: Value,
        context: &RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, McpError> {
        let who = Principal::new(&self.state.principal.name, Role::Client);
        let elicits = context
            .client_capabilities()
            .is_some_and(|c| c.elicitation.is_some());
        let created =
            super::tasks::Tasks::start(&self.state.shared, &who, name, args, elicits).await?;
        Ok(CallToolResponse::Task(created))
    }

    /// The answer to a call the client cancelled (its future dropped): the
    /// session's saga (`slot`, still locked) settled from its log.
    async fn cancelled(
        &self,
        mut slot: tokio::sync::MutexGuard<'_, Option<Scoped>>,
        saga_id: &str,
        first_seq: u64,
    ) -> Result<CallToolResponse, McpError> {
        // Cancelled: the call's future (the tool's instance with it) is
        // dropped; the saga is settled from its log (the session's lock
        // and its hold on the saga kept meanwhile: no other call of the
        // session, and no other scope, runs behind it).
        let hold = slot.take().map(|s| s.hold);
        let kept = self.settle_cancelled(saga_id, first_seq).await;
        let what = if kept.is_some() {
            "the call had not begun; the session's saga goes on as it was"
        } else {
            "saga recovered from its log (whatever it had begun was compensated)"
        };
        *slot = kept.zip(hold).map(|(saga, hold)| Scoped { saga, hold });
        drop(slot);
        let e = ToolError::with_hint(
            ErrorKind::Timeout,
            format!("the call was cancelled; {what} (saga {saga_id})"),
            "The client cancelled this call.",
        );
        to_result(tools::error_result(
            &e,
            json!({"saga_id": saga_id, "cancelled": true}),
        ))
    }

    /// `tools/call`.
    pub(super) async fn tools_call(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, McpError> {
        self.check_caller(&context)?;
        let name = request.name.to_string();
        let shared = &self.state.shared;
        if let Some(x) = shared.extension.as_ref().filter(|x| x.has_tool(&name)) {
            let call = self.extension_call(&context);
            return x.call_tool(&name, &request, &call).await;
        }
        if stateless::is_stateless(&context)
            && context
                .client_capabilities()
                .is_some_and(|c| c.supports_tasks())
            && context.meta.get(stateless::SAGA_META).is_none()
            && super::tasks::is_long(shared, &name)
        {
            let args = Value::Object(request.arguments.unwrap_or_default());
            return self.start_task(&name, args, &context).await;
        }
        if stateless::is_stateless(&context) {
            let args = Value::Object(request.arguments.unwrap_or_default());
            let input = (
                request.input_responses.as_ref(),
                request.request_state.as_deref(),
            );
            return self.call_stateless(&name, args, input, &context).await;
        }
        if name == tools::COMMIT || name == tools::ROLLBACK {
            return self.session_tool(&name).await;
        }
        let door = &shared.door();
        let args = Value::Object(request.arguments.unwrap_or_default());
        let mut slot = self.state.saga.lock().await;
        if let Some((id, state)) = self.forget_if_ended(&mut slot).await {
            return to_result(ended_elsewhere(&name, &id, state));
        }
        if slot.is_none() {
            let label = format!("mcp session ({})", client_name(&context.peer));
            let (mut saga, hold) = door
                .open(&self.state.principal, Scope::Session, &label, None)
                .await
                .map_err(internal)?;
            door.set_autonomy(&mut saga, shared.autonomy());
            *slot = Some(Scoped { saga, hold });
        }
        let Some(saga) = slot.as_mut().map(|s| &mut s.saga) else {
            return Err(internal("no saga"));
        };
        let saga_id = saga.id().to_string();
        let first_seq = saga.next_seq();
        let elicit = Elicit {
            peer: context.peer.clone(),
            who: Principal::new(&self.state.principal.name, Role::Client),
            can_ask: shared.elicit_approvals && supports_elicitation(&context.peer),
        };
        let call = Call::new(&name, Args::Value(&args)).with_approver(&elicit);
        let token = context.meta.get_progress_token();
        let running = format!("{name}: running (saga {saga_id})");
        let (submitted, n) =
            with_progress(door.submit(saga, call), &context, token.as_ref(), &running).await;
        let Some(submitted) = submitted else {
            return self.cancelled(slot, &saga_id, first_seq).await;
        };
        let submitted = submitted.map_err(internal)?;
        if let Some(p) = token
            .as_ref()
            .and_then(|t| progress(t, n + 1.0, &format!("{name}: done")))
        {
            let _ = context.peer.notify_progress(p).await;
        }
        let ended = matches!(
            submitted.outcome,
            capsaga_door::dispatch::Outcome::Failed { .. }
        ) || matches!(
            &submitted.outcome,
            capsaga_door::dispatch::Outcome::AwaitingApproval {
                denied_by: Some(_),
                ..
            }
        );
        let out = tools::outcome(&name, &saga_id, &submitted);
        let uri = resources::saga_uri(&saga_id);
        let watched = self.state.subscribed.lock().is_ok_and(|s| s.contains(&uri));
        if watched && let Ok(p) = serde_json::from_value(json!({ "uri": uri })) {
            let _ = context.peer.notify_resource_updated(p).await;
        }
        if ended {
            // Rolled back (a failed side effect), or denied by the human:
            // the saga is over; a denied one is rolled back now.
            if let Some(mut held) = slot.take()
                && held.saga.state() == capsaga_core::fsm::State::AwaitingApproval
                && let Err(e) = door.abort(&mut held.saga).await
            {
                tracing::warn!("saga {saga_id}: rollback after a denial: {e}");
            }
        }
        to_result(out)
    }
}

/// The answer to `name` (a tool, `capsaga_commit` or `capsaga_rollback`)
/// when the session's saga `id` ended elsewhere in `state` (another host
/// recovered it, an operator rolled it back): an error, unless it already
/// ended as asked (a commit of a Done saga, a rollback of a rolled-back one).
/// A call is not run: the next one starts a new saga.
fn ended_elsewhere(name: &str, id: &str, state: capsaga_core::fsm::State) -> Value {
    use capsaga_core::fsm::State;
    let as_asked = (name == tools::COMMIT && state == State::Done)
        || (name == tools::ROLLBACK && state == State::FailedRolledBack);
    let what = if name == tools::COMMIT || name == tools::ROLLBACK {
        "nothing was done now".to_string()
    } else {
        format!("{name} was not run; call it again to start a new saga")
    };
    tools::result(
        format!(
            "this session's saga {id} ended elsewhere ({state}: recovered by another host, or ended by an operator); {what}"
        ),
        !as_asked,
        Some(
            json!({"saga_id": id, "saga_state": state.to_string(), "committed": state == State::Done}),
        ),
    )
}
