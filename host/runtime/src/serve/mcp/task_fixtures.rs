//! The conformance suite's task fixtures (tasks extension, SEP-2663),
//! served only with `--conformance-fixtures`: `greet` (never a task),
//! `slow_compute` (a task for a client of the extension: sleeps, then
//! answers; cancellable), `failing_job` (task required: a tool error
//! after about a second), `protocol_error_job` (a task that fails) and
//! `test_tool_with_task` (task required: one input round, then a task).
//! They run no component and write no saga; their tasks live in the same
//! table as capsaga's own ([`super::tasks`]).

use super::McpSession;
use super::handler::to_result;
use super::tasks::{Tasks, complete};
use rmcp::ErrorData as McpError;
use rmcp::RoleServer;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, ClientCapabilities, InputRequiredResult, JsonObject,
    TaskPayload,
};
use rmcp::service::RequestContext;
use serde_json::{Value, json};
use std::time::Duration;

const NAMES: [&str; 5] = [
    "greet",
    "slow_compute",
    "failing_job",
    "protocol_error_job",
    "test_tool_with_task",
];

/// Whether `name` is a task fixture.
pub fn is_tool(name: &str) -> bool {
    NAMES.contains(&name)
}

/// The task fixtures' definitions (`tools/list`).
pub fn tools() -> Vec<Value> {
    let t = |name: &str, d: &str, schema: Value| json!({"name": name, "description": d, "inputSchema": schema});
    let none = json!({"type": "object", "properties": {}});
    vec![
        t(
            "greet",
            "Conformance fixture: says hello (never a task).",
            json!({"type": "object", "properties": {"name": {"type": "string"}}}),
        ),
        t(
            "slow_compute",
            "Conformance fixture: sleeps `seconds`, then answers (a task when the client supports them).",
            json!({"type": "object", "properties": {"seconds": {"type": "number"}, "label": {"type": "string"}}}),
        ),
        t(
            "failing_job",
            "Conformance fixture: a task that ends in a tool error.",
            none.clone(),
        ),
        t(
            "protocol_error_job",
            "Conformance fixture: a task that fails.",
            none.clone(),
        ),
        t(
            "test_tool_with_task",
            "Conformance fixture: asks for a name, then runs as a task.",
            none,
        ),
    ]
}

fn text(s: impl Into<String>) -> Value {
    json!({"content": [{"type": "text", "text": s.into()}]})
}

fn needs_tasks() -> McpError {
    McpError::missing_required_client_capability(
        ClientCapabilities::builder().enable_tasks().build(),
    )
}

impl McpSession {
    pub(super) async fn call_task_fixture(
        &self,
        name: &str,
        request: &CallToolRequestParams,
        context: &RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, McpError> {
        let shared = &self.state.shared;
        let tasks = context
            .client_capabilities()
            .is_some_and(|c| c.supports_tasks());
        let args = request.arguments.clone().unwrap_or_default();
        let owner = self.state.principal.name.clone();
        match name {
            "greet" => {
                let who = args.get("name").and_then(Value::as_str).unwrap_or("world");
                to_result(text(format!("Hello, {who}!")))
            }
            "slow_compute" => {
                let secs = args
                    .get("seconds")
                    .and_then(Value::as_f64)
                    .unwrap_or(0.0)
                    .clamp(0.0, 300.0);
                let label = args
                    .get("label")
                    .and_then(Value::as_str)
                    .unwrap_or("")
                    .to_string();
                let work = async move {
                    tokio::time::sleep(Duration::from_secs_f64(secs)).await;
                    text(format!("computed {label} in {secs} s"))
                };
                if tasks {
                    let t = Tasks::spawn(shared, &owner, async move { complete(work.await) })?;
                    return Ok(CallToolResponse::Task(t));
                }
                if secs > 5.0 {
                    return Err(needs_tasks());
                }
                to_result(work.await)
            }
            "failing_job" => {
                if !tasks {
                    return Err(needs_tasks());
                }
                let t = Tasks::spawn(shared, &owner, async {
                    tokio::time::sleep(Duration::from_secs(1)).await;
                    complete(json!({"isError": true,
                        "content": [{"type": "text", "text": "the job failed"}]}))
                })?;
                Ok(CallToolResponse::Task(t))
            }
            "protocol_error_job" => {
                if !tasks {
                    return Err(McpError::internal_error("the job failed", None));
                }
                let t = Tasks::spawn(shared, &owner, async {
                    let mut error = JsonObject::new();
                    error.insert("code".into(), (-32603).into());
                    error.insert("message".into(), "the job failed".into());
                    TaskPayload::Failed { error }
                })?;
                Ok(CallToolResponse::Task(t))
            }
            _ => {
                if !tasks {
                    return Err(needs_tasks());
                }
                let given = request
                    .input_responses
                    .as_ref()
                    .and_then(|r| r.get("user_name"))
                    .filter(|r| r.get("action").and_then(Value::as_str) == Some("accept"))
                    .and_then(|r| r.get("content")?.get("name")?.as_str().map(str::to_owned));
                let Some(user) = given else {
                    let ask: InputRequiredResult = serde_json::from_value(json!({
                        "resultType": "input_required",
                        "inputRequests": {"user_name": {"method": "elicitation/create", "params": {
                            "mode": "form", "message": "What is your name?",
                            "requestedSchema": {"type": "object",
                                "properties": {"name": {"type": "string"}}, "required": ["name"]}}}}}))
                    .map_err(|e| McpError::internal_error(e.to_string(), None))?;
                    return Ok(CallToolResponse::InputRequired(ask));
                };
                let t = Tasks::spawn(shared, &owner, async move {
                    complete(text(format!("Hello, {user}! (from a task)")))
                })?;
                Ok(CallToolResponse::Task(t))
            }
        }
    }
}
