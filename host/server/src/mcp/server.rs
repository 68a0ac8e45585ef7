//! The session's `ServerHandler`: every request it answers runs in its MCP
//! span ([`super::observe`]), named after its method (and the tool or
//! prompt it names); the answers are [`super::handler`]'s.

use super::McpSession;
use super::handler::{internal, parse};
use super::observe::{traced, traced_resource};
use crate::resources;
use capsaga_telemetry::spans::{McpTarget, UNKNOWN_TOOL};
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CustomRequest, CustomResult, DiscoverResult,
    ErrorCode, Implementation, InitializeRequestParams, InitializeResult, ListToolsResult,
    PaginatedRequestParams, ProtocolVersion, ServerCapabilities, ServerConfig,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData as McpError, RoleServer, ServerHandler};
use serde_json::json;
use std::borrow::Cow;

impl McpSession {
    /// Whether `name` is a prompt this session serves (the extension's
    /// only): a span names only those.
    fn known_prompt(&self, name: &str) -> bool {
        let extension = self.state.shared.extension.as_ref();
        extension.is_some_and(|x| x.has_prompt(name))
    }
}

impl ServerHandler for McpSession {
    #[allow(deprecated)]
    fn get_info(&self) -> ServerConfig {
        let mut caps = json!({
            "tools": {"listChanged": true}, "logging": {}, "completions": {},
            "resources": {"subscribe": true},
            "extensions": {"io.modelcontextprotocol/tasks": {}},
        });
        let extension = self.state.shared.extension.as_ref();
        if extension.is_some_and(|x| !x.prompts().is_empty()) {
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

    async fn initialize(
        &self,
        request: InitializeRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<InitializeResult, McpError> {
        let ctx = &context;
        traced("initialize", McpTarget::None, ctx, async {
            // rmcp's own `initialize`, in its span.
            ctx.peer.set_peer_info(request.clone());
            self.negotiate_initialize(&request)
        })
        .await
    }

    async fn discover(
        &self,
        context: RequestContext<RoleServer>,
    ) -> Result<DiscoverResult, McpError> {
        traced("server/discover", McpTarget::None, &context, async {
            // rmcp's own `server/discover`, in its span.
            Ok(DiscoverResult::from_server_info(
                ServerHandler::supported_protocol_versions(self).into_owned(),
                self.get_info(),
            ))
        })
        .await
    }

    async fn ping(&self, context: RequestContext<RoleServer>) -> Result<(), McpError> {
        traced("ping", McpTarget::None, &context, async { Ok(()) }).await
    }

    async fn on_initialized(&self, context: rmcp::service::NotificationContext<RoleServer>) {
        self.state.shared.listeners.add(context.peer);
    }

    fn supported_protocol_versions(&self) -> Cow<'static, [ProtocolVersion]> {
        Cow::Borrowed(ProtocolVersion::known_up_to(&ProtocolVersion::V_2026_07_28))
    }

    #[allow(deprecated)]
    async fn set_level(
        &self,
        _request: rmcp::model::SetLevelRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<(), McpError> {
        traced("logging/setLevel", McpTarget::None, &context, async {
            Ok(())
        })
        .await
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, McpError> {
        traced("tools/list", McpTarget::None, &context, self.tools_list()).await
    }

    /// A listed tool's definition, for rmcp's check of a 2026-07-28
    /// `tools/call`'s `Mcp-Param-*` headers against the body (SEP-2243):
    /// an annotated argument whose header is missing, extra or different
    /// is refused with HTTP 400 and `-32020` before the call.
    fn get_tool(&self, name: &str) -> Option<rmcp::model::Tool> {
        self.tool_definition(name)
            .and_then(|v| serde_json::from_value(v).ok())
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, McpError> {
        let name = request.name.to_string();
        let shown = if self.known_tool(&name) {
            name.as_str()
        } else {
            UNKNOWN_TOOL
        };
        let ctx = &context;
        traced(
            "tools/call",
            McpTarget::Tool(shown),
            ctx,
            self.tools_call(request, ctx.clone()),
        )
        .await
    }

    async fn list_resources(
        &self,
        _request: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<rmcp::model::ListResourcesResult, McpError> {
        let ctx = &context;
        traced("resources/list", McpTarget::None, ctx, async {
            self.check_caller(ctx)?;
            let host = self.state.shared.live.host();
            let store = &*host.store;
            let mut list = resources::list(store, self.state.saga.principal())
                .await
                .map_err(internal)?;
            if let Some(x) = &self.state.shared.extension {
                list.extend(x.resources());
            }
            parse(json!({ "resources": list }))
        })
        .await
    }

    async fn list_resource_templates(
        &self,
        _request: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<rmcp::model::ListResourceTemplatesResult, McpError> {
        traced(
            "resources/templates/list",
            McpTarget::None,
            &context,
            async {
                let mut list = resources::templates();
                if let Some(x) = &self.state.shared.extension {
                    list.extend(x.resource_templates());
                }
                parse(json!({ "resourceTemplates": list }))
            },
        )
        .await
    }

    async fn read_resource(
        &self,
        request: rmcp::model::ReadResourceRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<rmcp::model::ReadResourceResponse, McpError> {
        let ctx = &context;
        let read = async {
            self.check_caller(ctx)?;
            let contents = self.resource(&request.uri).await?;
            let r: rmcp::model::ReadResourceResult = parse(contents)?;
            Ok(r.into())
        };
        traced_resource("resources/read", &request.uri, ctx, read).await
    }

    /// `subscriptions/listen` (MCP 2026-07-28): the tool list's changes,
    /// when asked for (resource updates stay the legacy sessions'
    /// `resources/subscribe`).
    fn accepted_subscription_filter(
        &self,
        requested: &rmcp::model::SubscriptionFilter,
    ) -> Option<rmcp::model::SubscriptionFilter> {
        let mut f = rmcp::model::SubscriptionFilter::builder();
        if requested.tools_list_changed == Some(true) {
            f = f.tools_list_changed();
        }
        Some(f.build())
    }

    /// Its span lasts as long as the subscription.
    async fn listen(&self, context: rmcp::service::SubscriptionContext) -> Result<(), McpError> {
        let ctx = &context;
        let listening = async {
            if ctx.accepted().tools_list_changed == Some(true) {
                self.state.shared.listeners.add_sink(ctx.sink().clone());
            }
            ctx.cancelled().await;
            Ok(())
        };
        traced(
            "subscriptions/listen",
            McpTarget::None,
            ctx.request_context(),
            listening,
        )
        .await
    }

    async fn get_task(
        &self,
        request: rmcp::model::GetTaskParams,
        context: RequestContext<RoleServer>,
    ) -> Result<rmcp::model::GetTaskResult, McpError> {
        let ctx = &context;
        traced("tasks/get", McpTarget::None, ctx, async {
            self.check_caller(ctx)?;
            super::tasks::Tasks::get(
                &self.state.shared,
                &request.task_id,
                self.state.saga.principal(),
            )
            .await
        })
        .await
    }

    async fn cancel_task(
        &self,
        request: rmcp::model::CancelTaskParams,
        context: RequestContext<RoleServer>,
    ) -> Result<(), McpError> {
        let ctx = &context;
        traced("tasks/cancel", McpTarget::None, ctx, async {
            self.check_caller(ctx)?;
            super::tasks::Tasks::cancel(
                &self.state.shared,
                &request.task_id,
                self.state.saga.principal(),
            )
            .await
        })
        .await
    }

    async fn update_task(
        &self,
        request: rmcp::model::UpdateTaskParams,
        context: RequestContext<RoleServer>,
    ) -> Result<(), McpError> {
        let ctx = &context;
        traced("tasks/update", McpTarget::None, ctx, async {
            self.check_caller(ctx)?;
            super::tasks::Tasks::update(
                &self.state.shared,
                &request.task_id,
                self.state.saga.principal(),
                request.input_responses,
            )
            .await
        })
        .await
    }

    #[allow(deprecated)]
    async fn subscribe(
        &self,
        request: rmcp::model::SubscribeRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<(), McpError> {
        let ctx = &context;
        let uri = request.uri;
        let subscribing = async {
            self.check_caller(ctx)?;
            // Exactly the check `resources/read` makes: a URI that could not
            // be read (malformed id, no such saga or trace, not ours) cannot
            // be subscribed to.
            self.resource(&uri).await?;
            if let Ok(mut s) = self.state.subscribed.lock()
                && s.len() < 1024
            {
                s.insert(uri.clone());
            }
            Ok(())
        };
        traced_resource("resources/subscribe", &uri, ctx, subscribing).await
    }

    #[allow(deprecated)]
    async fn unsubscribe(
        &self,
        request: rmcp::model::UnsubscribeRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<(), McpError> {
        traced("resources/unsubscribe", McpTarget::None, &context, async {
            if let Ok(mut s) = self.state.subscribed.lock() {
                s.remove(&request.uri);
            }
            Ok(())
        })
        .await
    }

    async fn list_prompts(
        &self,
        _request: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<rmcp::model::ListPromptsResult, McpError> {
        traced("prompts/list", McpTarget::None, &context, async {
            let list = self.state.shared.extension.as_ref().map(|x| x.prompts());
            let Some(list) = list.filter(|l| !l.is_empty()) else {
                return Err(McpError::method_not_found::<
                    rmcp::model::ListPromptsRequestMethod,
                >());
            };
            parse(json!({ "prompts": list }))
        })
        .await
    }

    async fn get_prompt(
        &self,
        request: rmcp::model::GetPromptRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<rmcp::model::GetPromptResponse, McpError> {
        let shown = if self.known_prompt(&request.name) {
            request.name.clone()
        } else {
            UNKNOWN_TOOL.to_string()
        };
        let ctx = &context;
        let getting = async {
            let call = self.extension_call(ctx);
            let found =
                (self.state.shared.extension.as_ref()).and_then(|x| x.get_prompt(&request, &call));
            found.unwrap_or_else(|| {
                Err(McpError::invalid_params(
                    format!(
                        "no prompt {}",
                        request.name.chars().take(100).collect::<String>()
                    ),
                    None,
                ))
            })
        };
        traced("prompts/get", McpTarget::Prompt(&shown), ctx, getting).await
    }

    async fn complete(
        &self,
        request: rmcp::model::CompleteRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<rmcp::model::CompleteResult, McpError> {
        let ctx = &context;
        traced("completion/complete", McpTarget::None, ctx, async {
            self.check_caller(ctx)?;
            let reference = serde_json::to_value(&request.r#ref).map_err(internal)?;
            let (argument, typed) = (&request.argument.name, &request.argument.value);
            let extension = self.state.shared.extension.as_ref();
            let mut values = extension.and_then(|x| x.complete(&reference, argument, typed));
            if values.is_none()
                && reference["type"] == "ref/resource"
                && let Some(uri) = reference["uri"].as_str()
            {
                let host = self.state.shared.live.host();
                let store = &*host.store;
                values =
                    resources::complete(store, uri, argument, typed, self.state.saga.principal())
                        .await
                        .map_err(internal)?;
            }
            let values = values.unwrap_or_default();
            parse(json!({"completion": {
                "values": values, "total": values.len(), "hasMore": false
            }}))
        })
        .await
    }

    /// A method capsaga does not serve: refused as rmcp refuses it, in a
    /// span named `_OTHER` (the method is the client's text).
    async fn on_custom_request(
        &self,
        request: CustomRequest,
        context: RequestContext<RoleServer>,
    ) -> Result<CustomResult, McpError> {
        let method = request.method;
        traced(UNKNOWN_TOOL, McpTarget::None, &context, async move {
            Err(McpError::new(ErrorCode::METHOD_NOT_FOUND, method, None))
        })
        .await
    }
}
