//! What the session's `ServerHandler` ([`super::server`]) answers with:
//! tools listed and called (each call a step through the door), resources
//! read, the session's saga ended.

use super::McpSession;
use super::elicit::{Elicit, client_name, supports_elicitation};
use super::stateless;
use crate::{resources, tools};
use capsaga_core::error::{ErrorKind, ToolError};
use capsaga_core::principal::{Principal, Role};
use capsaga_door::dispatch::{Act, Args, Call};
use capsaga_door::scope::SessionCall;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ListToolsResult,
    ProgressNotificationParam,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData as McpError, RoleServer};
use serde_json::{Value, json};
use std::sync::atomic::{AtomicU32, Ordering};
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
            Some(p) if p.name != self.state.saga.principal().name => Err(
                McpError::invalid_request("this session belongs to another principal", None),
            ),
            _ => Ok(()),
        }
    }

    /// `capsaga_commit` or `capsaga_rollback` (`name`) of the session's
    /// saga (the door's `SessionSaga::end_now`).
    async fn session_tool(&self, name: &str) -> Result<CallToolResponse, McpError> {
        let door = &self.state.shared.door();
        match self.state.saga.end_now(door, act_of(name)).await {
            Ok(Some((id, ended))) => to_result(tools::ended_result(&id, ended)),
            Ok(None) => to_result(tools::result(
                "no saga is open in this session: nothing to do".into(),
                false,
                Some(json!({"saga_id": null})),
            )),
            Err(e) => Err(internal(e)),
        }
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
            resources::read(store, uri, self.state.saga.principal())
                .await
                .map_err(internal)?
        };
        found.ok_or_else(|| no_resource(uri))
    }
}

/// Resolve when the client cancels the request, telling the client
/// `message` every second meanwhile when it gave a progress `token`;
/// `sent` counts the progress notes sent.
async fn until_cancelled(
    context: &RequestContext<RoleServer>,
    token: Option<&rmcp::model::ProgressToken>,
    message: &str,
    sent: &AtomicU32,
) {
    let mut tick = tokio::time::interval(Duration::from_secs(1));
    loop {
        tokio::select! {
            () = context.ct.cancelled() => return,
            _ = tick.tick(), if token.is_some() => {
                let n = f64::from(sent.load(Ordering::Relaxed));
                if let Some(p) = token.and_then(|t| progress(t, n, message)) {
                    let _ = context.peer.notify_progress(p).await;
                }
                sent.fetch_add(1, Ordering::Relaxed);
            }
        }
    }
}

/// `capsaga_commit` ([`tools::COMMIT`]) or `capsaga_rollback`, as the
/// door's act.
pub(super) fn act_of(name: &str) -> Act {
    if name == tools::COMMIT {
        Act::Commit
    } else {
        Act::Rollback
    }
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
        let who = Principal::new(&self.state.saga.principal().name, Role::Client);
        let elicits = context
            .client_capabilities()
            .is_some_and(|c| c.elicitation.is_some());
        let created =
            super::tasks::Tasks::start(&self.state.shared, &who, name, args, elicits).await?;
        Ok(CallToolResponse::Task(created))
    }

    /// The answer to a session's call the client cancelled (its future
    /// dropped): its saga settled from its log by the door; `kept`: the
    /// call had not begun.
    fn cancelled(saga_id: &str, kept: bool) -> Result<CallToolResponse, McpError> {
        let what = if kept {
            "the call had not begun; the session's saga goes on as it was"
        } else {
            "saga recovered from its log (whatever it had begun was compensated)"
        };
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
        let args = Value::Object(request.arguments.unwrap_or_default());
        self.call_in_session(&name, &args, &context).await
    }

    /// A call of a 2025-11-25 session (or stdio): a step of the session's
    /// saga through the door's `SessionSaga::call`, with progress notes
    /// and cancellation.
    async fn call_in_session(
        &self,
        name: &str,
        args: &Value,
        context: &RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, McpError> {
        let shared = &self.state.shared;
        let principal = self.state.saga.principal();
        let elicit = Elicit {
            peer: context.peer.clone(),
            who: Principal::new(&principal.name, Role::Client),
            can_ask: shared.elicit_approvals && supports_elicitation(&context.peer),
        };
        let call = Call::new(name, Args::Value(args)).with_approver(&elicit);
        let token = context.meta.get_progress_token();
        let label = format!("mcp session ({})", client_name(&context.peer));
        let sent = AtomicU32::new(0);
        let interrupted = |saga_id: &str| {
            let running = format!("{name}: running (saga {saga_id})");
            let (token, sent) = (token.as_ref(), &sent);
            async move { until_cancelled(context, token, &running, sent).await }
        };
        let door = shared.door();
        let ran = self
            .state
            .saga
            .call(&door, (&label, shared.autonomy()), call, interrupted)
            .await
            .map_err(internal)?;
        let (saga_id, submitted) = match ran {
            SessionCall::Ran { saga_id, submitted } => (saga_id, submitted),
            SessionCall::Cancelled { saga_id, kept } => return Self::cancelled(&saga_id, kept),
            SessionCall::EndedElsewhere { saga_id, state } => {
                let what = format!("{name} was not run; call it again to start a new saga");
                return to_result(tools::ended_elsewhere(&saga_id, state, &what, true));
            }
        };
        let n = f64::from(sent.load(Ordering::Relaxed));
        if let Some(p) = token
            .as_ref()
            .and_then(|t| progress(t, n + 1.0, &format!("{name}: done")))
        {
            let _ = context.peer.notify_progress(p).await;
        }
        let out = tools::outcome(name, &saga_id, &submitted);
        let uri = resources::saga_uri(&saga_id);
        let watched = self.state.subscribed.lock().is_ok_and(|s| s.contains(&uri));
        if watched && let Ok(p) = serde_json::from_value(json!({ "uri": uri })) {
            let _ = context.peer.notify_resource_updated(p).await;
        }
        to_result(out)
    }
}
