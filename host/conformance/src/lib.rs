//! # capsaga-conformance
//!
//! The reference fixtures of the official MCP conformance suite
//! (`@modelcontextprotocol/conformance`), kept beside the product as rmcp
//! keeps its `conformance/` beside its SDK, and the `capsaga-conformance`
//! binary that serves capsaga with them plugged in (`scripts/mcp-conformance`
//! runs it). The suite exercises the protocol surface through tools,
//! resources and prompts of fixed names and answers; they are not capsaga
//! tools (no component, no saga, no policy), so the `capsaga` binary does
//! not contain them.
//!
//! - `fixtures`: the 2025-11-25 scenarios' tools, resources, prompts and
//!   completion.
//! - `fixtures_mrtr`: 2026-07-28's multi round-trip requests and the
//!   missing-capability refusal; `mrtr` answers them in rmcp's shapes.
//! - `task_fixtures`: the tasks extension's fixtures (SEP-2663).
//!
//! They reach the server through its extension point
//! ([`capsaga_server::mcp::extension`]): [`extension`] is the value to put
//! in `McpOptions::extension`. This crate depends on the server (and the
//! door, for the binary's host); nothing depends on it but the binary and
//! the tests.

#![warn(missing_docs)]

mod fixtures;
mod fixtures_mrtr;
mod mrtr;
mod task_fixtures;

use capsaga_server::mcp::extension::{ExtensionCall, McpExtension, complete_result};
use rmcp::ErrorData as McpError;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, GetPromptRequestParams,
    GetPromptResponse, GetPromptResult,
};
use serde_json::Value;
use std::sync::Arc;

/// The conformance fixtures as the server's extension.
pub fn extension() -> Arc<dyn McpExtension> {
    Arc::new(Fixtures)
}

/// Every fixture of the suite: the 2025-11-25 fixtures, 2026-07-28's and
/// the task fixtures, in that order.
#[derive(Debug, Clone, Copy, Default)]
pub struct Fixtures;

pub(crate) fn internal(e: impl std::fmt::Display) -> McpError {
    McpError::internal_error(e.to_string(), None)
}

pub(crate) fn to_result(v: Value) -> Result<CallToolResponse, McpError> {
    let r: CallToolResult = complete_result(v)?;
    Ok(r.into())
}

#[async_trait::async_trait]
impl McpExtension for Fixtures {
    fn tools(&self) -> Vec<Value> {
        let mut list = fixtures::tools();
        list.extend(fixtures_mrtr::tools());
        list.extend(task_fixtures::tools());
        list
    }

    fn has_tool(&self, name: &str) -> bool {
        name == fixtures_mrtr::TRIGGER_TOOL_CHANGE
            || fixtures::is_tool(name)
            || fixtures_mrtr::is_tool(name)
            || task_fixtures::is_tool(name)
    }

    async fn call_tool(
        &self,
        name: &str,
        request: &CallToolRequestParams,
        call: &ExtensionCall<'_>,
    ) -> Result<CallToolResponse, McpError> {
        if name == fixtures_mrtr::TRIGGER_TOOL_CHANGE {
            let told = call.announce_tools_changed().await;
            return to_result(capsaga_server::tools::result(
                format!("tool list change announced to {told} listener(s)"),
                false,
                None,
            ));
        }
        if task_fixtures::is_tool(name) {
            return task_fixtures::call(name, request, call).await;
        }
        if fixtures_mrtr::is_tool(name) {
            return mrtr::call_tool(name, request, call);
        }
        let args = Value::Object(request.arguments.clone().unwrap_or_default());
        let context = call.context();
        let token = context.meta.get_progress_token();
        to_result(fixtures::call(name, &args, &context.peer, token.as_ref()).await)
    }

    fn resources(&self) -> Vec<Value> {
        fixtures::resources()
    }

    fn resource_templates(&self) -> Vec<Value> {
        fixtures::templates()
    }

    fn owns_resource(&self, uri: &str) -> bool {
        fixtures::owns(uri)
    }

    fn read_resource(&self, uri: &str) -> Option<Value> {
        fixtures::read(uri)
    }

    fn prompts(&self) -> Vec<Value> {
        let mut list = fixtures::prompts();
        list.push(fixtures_mrtr::prompt_definition());
        list
    }

    fn get_prompt(
        &self,
        request: &GetPromptRequestParams,
        call: &ExtensionCall<'_>,
    ) -> Option<Result<GetPromptResponse, McpError>> {
        if request.name == fixtures_mrtr::PROMPT {
            return Some(mrtr::get_prompt(request, call));
        }
        let args = request.arguments.clone().unwrap_or_default();
        let p = fixtures::prompt(&request.name, &args)?;
        Some(complete_result::<GetPromptResult>(p).map(Into::into))
    }

    fn complete(&self, reference: &Value, argument: &str, typed: &str) -> Option<Vec<String>> {
        fixtures::complete(reference, argument, typed)
    }
}
