//! The MCP server handler (rmcp's `ServerHandler`), one per MCP session,
//! over stdio (`capsaga mcp`) or Streamable HTTP (`capsaga serve`, `/mcp`).
//!
//! - `tools/list`: the door's catalog at the server's autonomy level
//!   ([`Dispatcher::catalog`]) as MCP definitions ([`super::tools`]), plus
//!   the two session tools `capsaga_commit` and `capsaga_rollback`.
//! - `tools/call`: a step of the session's saga through the door
//!   ([`Dispatcher::submit`]). The saga starts at the session's first call;
//!   `capsaga_commit` ends it Done, `capsaga_rollback` compensates what it
//!   committed; either way the next call starts a new saga. When the
//!   session ends with a saga still open, the session-end rule applies
//!   ([`SessionEnd`], default: commit).
//! - Every session belongs to the principal that opened it (its token's;
//!   `stdio:<user>` over stdio); its sagas are recorded under it, and its
//!   resources show only its own sagas unless it is an operator.
//! - A call that needs a human: the saga parks and the result names the
//!   pending approval, which an operator decides (`capsaga approve`, `POST
//!   /v1/approvals/{id}/approve`); the client is told so in a log message.
//!   Only for a tool the policy lists in `[approvals] client_confirm`
//!   (never `code_run`, high risk or irreversible) is the client asked
//!   through elicitation, when it declared the capability (and the server
//!   allows it); its answer is recorded under the session's principal as a
//!   client (`token:bob (client)`), never under a name the client chose.
//! - A `progressToken` gets a progress notification when the call starts
//!   and every second while it runs; `notifications/cancelled` drops the
//!   call (the tool's instance with it) and recovers the saga from its log
//!   as after a crash: whatever it had begun is compensated.
//! - Resources: capsaga's sagas and traces ([`super::resources`]), with
//!   templates, id completion and subscriptions (a subscribed session's saga
//!   URI is notified after each of its calls).
//! - With `--conformance-fixtures`, the conformance suite's reference tools,
//!   resources and prompts ([`super::fixtures`]) beside them.

use super::{fixtures, resources, tools};
use crate::dispatch::{Approver, Args, Call, Dispatcher};
use crate::saga::Saga;
use crate::store::{ApprovalRow, Origin};
use capsaga_core::error::{ErrorKind, ToolError};
use capsaga_core::policy::Autonomy;
use capsaga_core::principal::{Principal, Role};
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ElicitRequestParams,
    ElicitationAction, Implementation, InitializeResult, ListToolsResult, PaginatedRequestParams,
    ProgressNotificationParam, ProtocolVersion, ServerCapabilities, ServerConfig,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData as McpError, Peer, RoleServer, ServerHandler};
use serde_json::{Value, json};
use std::borrow::Cow;
use std::sync::Arc;
use std::time::Duration;

/// What happens to a session's open saga when the session ends.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum SessionEnd {
    /// Finish it (Done): what it committed stays (the default: a client
    /// that never calls `capsaga_commit` keeps its work).
    #[default]
    Commit,
    /// Roll it back: what it committed is compensated.
    Rollback,
}

impl std::str::FromStr for SessionEnd {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "commit" => Ok(SessionEnd::Commit),
            "rollback" => Ok(SessionEnd::Rollback),
            other => Err(format!(
                "`{}`: expected commit or rollback",
                other.chars().take(40).collect::<String>()
            )),
        }
    }
}

/// What every session of one server shares.
#[derive(Debug)]
pub struct McpShared {
    /// The host served, reloaded while the server runs.
    pub live: Arc<super::live::Live>,
    /// The autonomy level asked for the sessions' sagas (`None`: the
    /// operator's); see [`McpShared::autonomy`].
    pub asked_autonomy: Option<Autonomy>,
    /// Ask the client by elicitation when a call needs a human.
    pub elicit_approvals: bool,
    /// The rule for a saga still open when its session ends.
    pub session_end: SessionEnd,
    /// Serve the conformance suite's reference fixtures too.
    pub fixtures: bool,
    /// Sessions told when the tool list changes.
    pub listeners: super::catalog::Listeners,
}

impl McpShared {
    /// The door of the current host generation.
    pub fn door(&self) -> Dispatcher {
        self.live.door()
    }

    /// The autonomy level the sessions' sagas decide at: the one asked
    /// for, never above the operator's in the current policy.
    pub fn autonomy(&self) -> Autonomy {
        let operator = self.live.host().config.policy.autonomy;
        operator.narrow(self.asked_autonomy.unwrap_or(operator))
    }
}

/// One MCP session: its saga.
#[derive(Clone)]
pub struct McpSession {
    state: Arc<SessionState>,
}

struct SessionState {
    shared: Arc<McpShared>,
    /// The principal that opened the session (every later request must be
    /// its own).
    principal: Principal,
    saga: tokio::sync::Mutex<Option<Saga>>,
    /// Resource URIs this session subscribed to.
    subscribed: std::sync::Mutex<std::collections::BTreeSet<String>>,
}

impl std::fmt::Debug for McpSession {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("McpSession").finish_non_exhaustive()
    }
}

impl McpSession {
    /// A new session of the server, for the principal whose `initialize`
    /// is being served in this task (`super::sessions::opening_principal`);
    /// without one, a client that owns nothing (`unauthenticated`).
    pub fn new(shared: Arc<McpShared>) -> McpSession {
        let principal = super::sessions::opening_principal()
            .unwrap_or_else(|| Principal::new("unauthenticated", Role::Client));
        McpSession::for_principal(shared, principal)
    }

    /// A new session of the server for `principal` (`capsaga mcp` over
    /// stdio: `stdio:<user>`, a client).
    pub fn for_principal(shared: Arc<McpShared>, principal: Principal) -> McpSession {
        McpSession {
            state: Arc::new(SessionState {
                shared,
                principal,
                saga: tokio::sync::Mutex::new(None),
                subscribed: std::sync::Mutex::new(std::collections::BTreeSet::new()),
            }),
        }
    }

    /// Apply the session-end rule to the open saga, if any (stdio calls it
    /// when the client hangs up; an HTTP session's is applied when it is
    /// dropped).
    pub async fn end(&self) {
        let saga = self.state.saga.lock().await.take();
        if let Some(saga) = saga {
            end_saga(&self.state.shared, saga).await;
        }
    }
}

impl Drop for SessionState {
    fn drop(&mut self) {
        let Some(saga) = self.saga.get_mut().take() else {
            return;
        };
        let shared = self.shared.clone();
        if let Ok(rt) = tokio::runtime::Handle::try_current() {
            rt.spawn(async move { end_saga(&shared, saga).await });
        }
    }
}

async fn end_saga(shared: &McpShared, mut saga: Saga) {
    let door = &shared.door();
    let r = match shared.session_end {
        SessionEnd::Commit => door.finish(&mut saga).await.map(|_| ()),
        SessionEnd::Rollback => door.abort(&mut saga).await.map(|_| ()),
    };
    if let Err(e) = r {
        tracing::warn!("mcp session end: saga {}: {e}", saga.id());
    }
}

/// The MCP client's side of an approval: asked through elicitation where
/// the door lets a client confirm the tool, told by a log message
/// otherwise (the door decides which: `dispatch::Approver`).
struct Elicit {
    peer: Peer<RoleServer>,
    /// The session's principal, as a client: an MCP client is the agent's
    /// side whatever its token's role.
    who: Principal,
    /// Whether the client may be asked at all (elicitation declared and
    /// allowed by the server).
    can_ask: bool,
}

/// How long the user has to answer an approval's elicitation.
const ELICIT_TIMEOUT: Duration = Duration::from_secs(300);

#[async_trait::async_trait]
impl Approver for Elicit {
    fn who(&self) -> Option<Principal> {
        Some(self.who.clone())
    }

    async fn ask(&self, approval: &ApprovalRow) -> Option<bool> {
        if !self.can_ask {
            return None;
        }
        let params: ElicitRequestParams = serde_json::from_value(json!({
            "mode": "form",
            "message": format!(
                "capsaga: confirm this call? {} ({}; approval {}; the operator's policy lets you confirm this tool)",
                approval.summary, approval.reason, approval.approval_id
            ),
            "requestedSchema": {
                "type": "object",
                "properties": {
                    "approve": {
                        "type": "boolean",
                        "title": "Approve",
                        "description": "Run this call once, as shown",
                    }
                },
                "required": ["approve"],
            },
        }))
        .ok()?;
        let asked = self.peer.create_elicitation(params);
        let answer = match tokio::time::timeout(ELICIT_TIMEOUT, asked).await {
            Ok(Ok(a)) => a,
            Ok(Err(e)) => {
                tracing::info!("elicitation failed, the approval stays pending: {e}");
                return None;
            }
            Err(_) => return None,
        };
        match answer.action {
            ElicitationAction::Accept => Some(
                answer
                    .content
                    .as_ref()
                    .and_then(|c| c.get("approve"))
                    .and_then(Value::as_bool)
                    .unwrap_or(false),
            ),
            ElicitationAction::Decline => Some(false),
            _ => None,
        }
    }

    // Logging is the one notification a client shows without a request of
    // its own; rmcp marks it deprecated (SEP-2577) but still sends it.
    #[allow(deprecated)]
    async fn tell(&self, approval: &ApprovalRow) {
        let message = json!({
            "message": format!(
                "capsaga: this call waits for an operator's approval ({}; approval {}). You cannot approve it from this session; call the same tool with the same arguments again once an operator approved it.",
                approval.reason, approval.approval_id
            ),
            "approval_id": approval.approval_id,
        });
        let p = rmcp::model::LoggingMessageNotificationParam::new(
            rmcp::model::LoggingLevel::Notice,
            message,
        );
        if let Err(e) = self
            .peer
            .notify_logging_message(p.with_logger("capsaga"))
            .await
        {
            tracing::debug!("pending-approval notice not delivered: {e}");
        }
    }
}

fn client_name(peer: &Peer<RoleServer>) -> String {
    peer.peer_info()
        .map(|i| {
            i.client_info
                .name
                .chars()
                .filter(|c| !c.is_control())
                .take(64)
                .collect()
        })
        .unwrap_or_else(|| "unknown".into())
}

fn supports_elicitation(peer: &Peer<RoleServer>) -> bool {
    peer.peer_info()
        .is_some_and(|i| i.capabilities.elicitation.is_some())
}

fn internal(e: impl std::fmt::Display) -> McpError {
    McpError::internal_error(e.to_string(), None)
}

fn to_result(v: Value) -> Result<CallToolResponse, McpError> {
    let r: CallToolResult = serde_json::from_value(v).map_err(internal)?;
    Ok(r.into())
}

fn parse<T: serde::de::DeserializeOwned>(v: Value) -> Result<T, McpError> {
    serde_json::from_value(v).map_err(internal)
}

fn no_resource(uri: &str) -> McpError {
    McpError::resource_not_found(
        format!("no resource {}", uri.chars().take(200).collect::<String>()),
        None,
    )
}

impl McpSession {
    /// The request's principal (from the HTTP layer, when there is one)
    /// must be the session's: the HTTP layer already answers 404 to
    /// another principal naming the session; this is the handler's own
    /// check.
    fn check_caller(&self, context: &RequestContext<RoleServer>) -> Result<(), McpError> {
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
        let taken = {
            let mut slot = self.state.saga.lock().await;
            self.forget_if_ended(&mut slot).await;
            slot.take()
        };
        let Some(mut saga) = taken else {
            return to_result(tools::result(
                "no saga is open in this session: nothing to do".into(),
                false,
                Some(json!({"saga_id": null})),
            ));
        };
        let id = saga.id().to_string();
        if name == tools::COMMIT {
            let state = door.finish(&mut saga).await.map_err(internal)?;
            if state == capsaga_core::fsm::State::AwaitingApproval {
                // A parked saga stays the session's: it waits for its human.
                let text = format!(
                    "saga {id} waits for an approval: approve or deny it, call the tool again, or roll back with {}",
                    tools::ROLLBACK
                );
                *self.state.saga.lock().await = Some(saga);
                return to_result(tools::result(
                    text,
                    true,
                    Some(json!({"saga_id": id, "saga_state": state.to_string()})),
                ));
            }
            to_result(tools::result(
                format!("saga {id} committed ({state})"),
                false,
                Some(json!({"saga_id": id, "saga_state": state.to_string()})),
            ))
        } else {
            let report = door.abort(&mut saga).await.map_err(internal)?;
            let ok = report.all_compensated();
            to_result(tools::result(
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

    /// Forget the session's saga when it ended elsewhere (an operator's
    /// denial over REST or the CLI rolled it back): the next call starts a
    /// new one.
    async fn forget_if_ended(&self, slot: &mut Option<Saga>) {
        let Some(saga) = slot.as_ref() else {
            return;
        };
        let host = self.state.shared.live.host();
        let store = &host.store;
        if let Ok(Some(row)) = store.saga(saga.id()).await
            && row.state != saga.state()
            && row.state.is_terminal()
        {
            *slot = None;
        }
    }

    /// The contents of the resource `uri` as `resources/read` returns them,
    /// or `resource_not_found`: the one lookup of a URI, for `read` and
    /// `subscribe` alike.
    async fn resource(&self, uri: &str) -> Result<Value, McpError> {
        let found = if self.state.shared.fixtures && fixtures::owns(uri) {
            fixtures::read(uri)
        } else {
            let host = self.state.shared.live.host();
            let store = &*host.store;
            resources::read(store, uri, &self.state.principal)
                .await
                .map_err(internal)?
        };
        found.ok_or_else(|| no_resource(uri))
    }

    /// The saga is gone from memory mid-step (the call was cancelled):
    /// re-open it from its log and recover it as after a crash.
    async fn recover_cancelled(&self, saga_id: &str) {
        let door = &self.state.shared.door();
        match door.resume(saga_id).await {
            Ok(mut saga) => {
                if let Err(e) = door.recover(&mut saga).await {
                    tracing::warn!("cancelled call: recovering saga {saga_id}: {e}");
                }
            }
            Err(e) => tracing::warn!("cancelled call: re-opening saga {saga_id}: {e}"),
        }
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

impl ServerHandler for McpSession {
    #[allow(deprecated)]
    fn get_info(&self) -> ServerConfig {
        let mut caps = json!({
            "tools": {"listChanged": true}, "logging": {}, "completions": {},
            "resources": {"subscribe": true},
        });
        if self.state.shared.fixtures {
            caps["prompts"] = json!({});
        }
        let caps: ServerCapabilities = serde_json::from_value(caps).unwrap_or_default();
        let mut info = InitializeResult::new(caps).with_instructions(
            "capsaga runs every tool call as a step of this session's saga: logged ahead, policy-checked, \
             sandboxed, and undoable. Call capsaga_commit to end the saga keeping its effects, or \
             capsaga_rollback to undo them. A call that needs a human's approval names it; call the same \
             tool with the same arguments again once it is approved.",
        );
        info.server_info = Implementation::new("capsaga", env!("CARGO_PKG_VERSION"));
        info
    }

    async fn on_initialized(&self, context: rmcp::service::NotificationContext<RoleServer>) {
        self.state.shared.listeners.add(context.peer);
    }

    fn supported_protocol_versions(&self) -> Cow<'static, [ProtocolVersion]> {
        // Sessions carry the saga: the stateless 2026 revision has none.
        Cow::Borrowed(ProtocolVersion::known_up_to(&ProtocolVersion::V_2025_11_25))
    }

    #[allow(deprecated)]
    async fn set_level(
        &self,
        _request: rmcp::model::SetLevelRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<(), McpError> {
        Ok(())
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, McpError> {
        let shared = &self.state.shared;
        let mut list: Vec<Value> = shared
            .door()
            .catalog(shared.autonomy())
            .iter()
            .map(|t| tools::definition(t))
            .collect();
        list.extend(tools::session_tools());
        if shared.fixtures {
            list.extend(fixtures::tools());
        }
        serde_json::from_value(json!({ "tools": list })).map_err(internal)
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, McpError> {
        self.check_caller(&context)?;
        let name = request.name.to_string();
        if name == tools::COMMIT || name == tools::ROLLBACK {
            return self.session_tool(&name).await;
        }
        let shared = &self.state.shared;
        if shared.fixtures && fixtures::is_tool(&name) {
            let args = Value::Object(request.arguments.unwrap_or_default());
            let token = context.meta.get_progress_token();
            return to_result(fixtures::call(&name, &args, &context.peer, token.as_ref()).await);
        }
        let door = &shared.door();
        let args = Value::Object(request.arguments.unwrap_or_default());
        let mut slot = self.state.saga.lock().await;
        self.forget_if_ended(&mut slot).await;
        if slot.is_none() {
            let label = format!("mcp session ({})", client_name(&context.peer));
            let mut saga = door
                .start_as(&self.state.principal, Origin::Mcp, &label, None)
                .await
                .map_err(internal)?;
            door.set_autonomy(&mut saga, shared.autonomy());
            *slot = Some(saga);
        }
        let Some(saga) = slot.as_mut() else {
            return Err(internal("no saga"));
        };
        let saga_id = saga.id().to_string();
        let elicit = Elicit {
            peer: context.peer.clone(),
            who: Principal::new(&self.state.principal.name, Role::Client),
            can_ask: shared.elicit_approvals && supports_elicitation(&context.peer),
        };
        let call = Call::new(&name, Args::Value(&args)).with_approver(&elicit);
        let token = context.meta.get_progress_token();
        let mut n = 0.0;
        let submitted = {
            let fut = door.submit(saga, call);
            tokio::pin!(fut);
            let mut tick = tokio::time::interval(Duration::from_secs(1));
            loop {
                tokio::select! {
                    r = &mut fut => break Some(r),
                    () = context.ct.cancelled() => break None,
                    _ = tick.tick(), if token.is_some() => {
                        if let Some(p) = token.as_ref().and_then(|t| progress(t, n, &format!("{name}: running (saga {saga_id})"))) {
                            let _ = context.peer.notify_progress(p).await;
                        }
                        n += 1.0;
                    }
                }
            }
        };
        let Some(submitted) = submitted else {
            // Cancelled: the call's future (the tool's instance with it) is
            // dropped; the saga is recovered from its log.
            *slot = None;
            drop(slot);
            self.recover_cancelled(&saga_id).await;
            let e = ToolError::with_hint(
                ErrorKind::Timeout,
                format!(
                    "the call was cancelled; saga {saga_id} was recovered from its log (whatever it had begun was compensated)"
                ),
                "The client cancelled this call.",
            );
            return to_result(tools::error_result(
                &e,
                json!({"saga_id": saga_id, "cancelled": true}),
            ));
        };
        let submitted = submitted.map_err(internal)?;
        if let Some(p) = token
            .as_ref()
            .and_then(|t| progress(t, n + 1.0, &format!("{name}: done")))
        {
            let _ = context.peer.notify_progress(p).await;
        }
        let ended = matches!(submitted.outcome, crate::dispatch::Outcome::Failed { .. })
            || matches!(
                &submitted.outcome,
                crate::dispatch::Outcome::AwaitingApproval {
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
            if let Some(mut saga) = slot.take()
                && saga.state() == capsaga_core::fsm::State::AwaitingApproval
                && let Err(e) = door.abort(&mut saga).await
            {
                tracing::warn!("saga {saga_id}: rollback after a denial: {e}");
            }
        }
        to_result(out)
    }

    async fn list_resources(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<rmcp::model::ListResourcesResult, McpError> {
        self.check_caller(&_context)?;
        let host = self.state.shared.live.host();
        let store = &*host.store;
        let mut list = resources::list(store, &self.state.principal)
            .await
            .map_err(internal)?;
        if self.state.shared.fixtures {
            list.extend(fixtures::resources());
        }
        parse(json!({ "resources": list }))
    }

    async fn list_resource_templates(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<rmcp::model::ListResourceTemplatesResult, McpError> {
        let mut list = resources::templates();
        if self.state.shared.fixtures {
            list.extend(fixtures::templates());
        }
        parse(json!({ "resourceTemplates": list }))
    }

    async fn read_resource(
        &self,
        request: rmcp::model::ReadResourceRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<rmcp::model::ReadResourceResponse, McpError> {
        self.check_caller(&context)?;
        let contents = self.resource(&request.uri).await?;
        let r: rmcp::model::ReadResourceResult = parse(contents)?;
        Ok(r.into())
    }

    #[allow(deprecated)]
    async fn subscribe(
        &self,
        request: rmcp::model::SubscribeRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<(), McpError> {
        self.check_caller(&context)?;
        let uri = request.uri;
        // Exactly the check `resources/read` makes: a URI that could not be
        // read (malformed id, no such saga or trace, not ours) cannot be
        // subscribed to.
        self.resource(&uri).await?;
        if let Ok(mut s) = self.state.subscribed.lock()
            && s.len() < 1024
        {
            s.insert(uri);
        }
        Ok(())
    }

    #[allow(deprecated)]
    async fn unsubscribe(
        &self,
        request: rmcp::model::UnsubscribeRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<(), McpError> {
        if let Ok(mut s) = self.state.subscribed.lock() {
            s.remove(&request.uri);
        }
        Ok(())
    }

    async fn list_prompts(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<rmcp::model::ListPromptsResult, McpError> {
        if !self.state.shared.fixtures {
            return Err(McpError::method_not_found::<
                rmcp::model::ListPromptsRequestMethod,
            >());
        }
        parse(json!({ "prompts": fixtures::prompts() }))
    }

    async fn get_prompt(
        &self,
        request: rmcp::model::GetPromptRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<rmcp::model::GetPromptResponse, McpError> {
        let args = request.arguments.unwrap_or_default();
        let found = self
            .state
            .shared
            .fixtures
            .then(|| fixtures::prompt(&request.name, &args))
            .flatten();
        let Some(p) = found else {
            return Err(McpError::invalid_params(
                format!(
                    "no prompt {}",
                    request.name.chars().take(100).collect::<String>()
                ),
                None,
            ));
        };
        let r: rmcp::model::GetPromptResult = parse(p)?;
        Ok(r.into())
    }

    async fn complete(
        &self,
        request: rmcp::model::CompleteRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<rmcp::model::CompleteResult, McpError> {
        self.check_caller(&context)?;
        let reference = serde_json::to_value(&request.r#ref).map_err(internal)?;
        let (argument, typed) = (&request.argument.name, &request.argument.value);
        let mut values = if self.state.shared.fixtures {
            fixtures::complete(&reference, argument, typed)
        } else {
            None
        };
        if values.is_none()
            && reference["type"] == "ref/resource"
            && let Some(uri) = reference["uri"].as_str()
        {
            let host = self.state.shared.live.host();
            let store = &*host.store;
            values = resources::complete(store, uri, argument, typed, &self.state.principal)
                .await
                .map_err(internal)?;
        }
        let values = values.unwrap_or_default();
        parse(json!({"completion": {
            "values": values, "total": values.len(), "hasMore": false
        }}))
    }
}
