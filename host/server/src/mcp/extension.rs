//! The MCP server's extension point: tools, resources and prompts served
//! beside capsaga's own, by an [`McpExtension`] given in
//! [`McpOptions::extension`](crate::McpOptions::extension).
//!
//! It exists for the official MCP conformance suite's reference fixtures
//! (the `capsaga-conformance` crate and its `capsaga-conformance` binary,
//! which `scripts/mcp-conformance` runs): the suite calls tools, resources
//! and prompts of fixed names to exercise the protocol surface, and they
//! are not capsaga's. The `capsaga` binary gives no extension, so none of
//! this module runs on its request path beyond one `None` checked per
//! request.
//!
//! What an extension serves is **not** a capsaga tool: it runs outside the
//! dispatch door (no policy, no saga, no write-ahead log, no sandbox).
//! Never give one to a server that agents use.
//!
//! Where the server asks it, in order:
//! - `tools/list` lists its [`McpExtension::tools`] after the catalog and
//!   the session tools; `tools/call` of one of them goes to
//!   [`McpExtension::call_tool`] before anything else (after the check
//!   that the request is the session's principal's);
//! - `resources/list` and `resources/templates/list` add its resources and
//!   templates; `resources/read` and `resources/subscribe` of a URI it owns
//!   ([`McpExtension::owns_resource`]) read it from the extension;
//! - `prompts/list` and `prompts/get` are its alone (capsaga has no
//!   prompts: without an extension that has some, `prompts/list` is an
//!   unknown method and the capability is not declared);
//! - `completion/complete` asks it first, then capsaga's resources.

use super::McpSession;
use super::tasks::{Asker, Tasks};
use capsaga_core::principal::Principal;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CreateTaskResult, GetPromptRequestParams,
    GetPromptResponse, RequestStateCodec, TaskPayload,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData as McpError, RoleServer};
use serde_json::Value;

/// Tools, resources and prompts served beside capsaga's own (see the
/// module documentation). Definitions are JSON in the MCP schema's shapes
/// (`Tool`, `Resource`, `ResourceTemplate`, `Prompt`).
#[async_trait::async_trait]
pub trait McpExtension: Send + Sync + std::fmt::Debug {
    /// The tools' definitions (`tools/list`).
    fn tools(&self) -> Vec<Value>;

    /// Whether `name` is one of [`McpExtension::tools`].
    fn has_tool(&self, name: &str) -> bool {
        self.tools().iter().any(|t| t["name"] == name)
    }

    /// `tools/call` of the tool `name` (one of [`McpExtension::tools`]).
    ///
    /// # Errors
    /// A JSON-RPC error for the client (a tool's own failure is a result
    /// with `isError`).
    async fn call_tool(
        &self,
        name: &str,
        request: &CallToolRequestParams,
        call: &ExtensionCall<'_>,
    ) -> Result<CallToolResponse, McpError>;

    /// The resources' definitions (`resources/list`).
    fn resources(&self) -> Vec<Value> {
        Vec::new()
    }

    /// The resource templates (`resources/templates/list`).
    fn resource_templates(&self) -> Vec<Value> {
        Vec::new()
    }

    /// Whether the URI `uri` is the extension's to read (then capsaga's
    /// resources are not asked).
    fn owns_resource(&self, _uri: &str) -> bool {
        false
    }

    /// `resources/read` of a URI it owns: the `ReadResourceResult` as JSON,
    /// or `None` when there is no such resource (`resource_not_found`).
    fn read_resource(&self, _uri: &str) -> Option<Value> {
        None
    }

    /// The prompts' definitions (`prompts/list`).
    fn prompts(&self) -> Vec<Value> {
        Vec::new()
    }

    /// Whether `name` is one of [`McpExtension::prompts`].
    fn has_prompt(&self, name: &str) -> bool {
        self.prompts().iter().any(|p| p["name"] == name)
    }

    /// `prompts/get`: `None` when the prompt is not the extension's (the
    /// client is told there is no such prompt).
    fn get_prompt(
        &self,
        _request: &GetPromptRequestParams,
        _call: &ExtensionCall<'_>,
    ) -> Option<Result<GetPromptResponse, McpError>> {
        None
    }

    /// `completion/complete` of an argument of `reference` (a `ref/prompt`
    /// or `ref/resource`, as JSON) whose value starts with `typed`: the
    /// values, or `None` when the reference is not the extension's.
    fn complete(&self, _reference: &Value, _argument: &str, _typed: &str) -> Option<Vec<String>> {
        None
    }
}

/// What an extension's request may use of the session and the server.
pub struct ExtensionCall<'a> {
    pub(super) session: &'a McpSession,
    pub(super) context: &'a RequestContext<RoleServer>,
}

impl ExtensionCall<'_> {
    /// The request's context (the client as a peer, its `_meta`, its
    /// declared capabilities).
    pub fn context(&self) -> &RequestContext<RoleServer> {
        self.context
    }

    /// The principal the session belongs to.
    pub fn principal(&self) -> &Principal {
        self.session.state.saga.principal()
    }

    /// The server's `requestState` codec (multi round-trip requests).
    ///
    /// # Errors
    /// An internal error when the server has none (no random key at start).
    pub fn request_states(&self) -> Result<&RequestStateCodec, McpError> {
        self.session.state.shared.states()
    }

    /// Run `work` as a task of the tasks extension owned by the session's
    /// principal (recorded in the state store beside capsaga's own tasks;
    /// no saga); it gets the [`Asker`] of its task.
    ///
    /// # Errors
    /// Too many running tasks; the store.
    pub async fn spawn_task<F, Fut>(&self, work: F) -> Result<CreateTaskResult, McpError>
    where
        F: FnOnce(Asker) -> Fut + Send + 'static,
        Fut: std::future::Future<Output = TaskPayload> + Send + 'static,
    {
        let state = &self.session.state;
        Tasks::spawn(&state.shared, &state.saga.principal().name, work).await
    }

    /// Tell every listener (sessions, `subscriptions/listen` streams) that
    /// the tool list changed; how many were told.
    pub async fn announce_tools_changed(&self) -> usize {
        self.session.state.shared.listeners.tools_changed().await
    }
}

/// A result given as JSON (a `CallToolResult`, a `GetPromptResult`, ...)
/// as rmcp's type `T`, marked complete (`resultType`, MCP 2026-07-28; rmcp
/// strips the mark for a peer of an older revision).
///
/// # Errors
/// An internal error when `v` is not a `T`.
pub fn complete_result<T: serde::de::DeserializeOwned>(v: Value) -> Result<T, McpError> {
    super::handler::parse(v)
}

impl McpSession {
    /// The extension's view of this session for one request.
    pub(super) fn extension_call<'a>(
        &'a self,
        context: &'a RequestContext<RoleServer>,
    ) -> ExtensionCall<'a> {
        ExtensionCall {
            session: self,
            context,
        }
    }
}
