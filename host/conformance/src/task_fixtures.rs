//! The conformance suite's task fixtures (tasks extension, SEP-2663):
//! `greet` (never a task),
//! `slow_compute` (a task for a client of the extension: sleeps, then
//! answers; cancellable), `failing_job` (task required: a tool error
//! after about a second), `protocol_error_job` (a task that fails) and
//! `test_tool_with_task` (task required: one input round, then a task),
//! `confirm_delete` (a task that asks one confirmation through
//! `tasks/update`, then answers) and `multi_input` (a task that asks two
//! questions at once, answered one at a time or together).
//! They run no component and write no saga; their tasks are recorded in the
//! state store beside capsaga's own (`capsaga_server::mcp::tasks`).

use crate::to_result;
use capsaga_server::mcp::extension::ExtensionCall;
use capsaga_server::mcp::tasks::complete;
use rmcp::ErrorData as McpError;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, ClientCapabilities, InputRequiredResult, JsonObject,
    TaskPayload,
};
use serde_json::{Value, json};
use std::time::Duration;

const NAMES: [&str; 7] = [
    "greet",
    "slow_compute",
    "failing_job",
    "protocol_error_job",
    "test_tool_with_task",
    "confirm_delete",
    "multi_input",
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
            none.clone(),
        ),
        t(
            "confirm_delete",
            "Conformance fixture: a task that asks to confirm deleting `filename` (deletes nothing).",
            json!({"type": "object", "properties": {"filename": {"type": "string"}}}),
        ),
        t(
            "multi_input",
            "Conformance fixture: a task that asks two questions at once.",
            none,
        ),
    ]
}

/// One `elicitation/create` request of a form with `properties`.
fn elicit(message: &str, properties: Value) -> Value {
    json!({"method": "elicitation/create", "params": {"mode": "form", "message": message,
        "requestedSchema": {"type": "object", "properties": properties}}})
}

/// Whether an elicitation answer accepted (with `confirm` not false).
fn accepted(answer: Option<&Value>) -> bool {
    answer.is_some_and(|a| {
        a.get("action").and_then(Value::as_str) == Some("accept")
            && a.pointer("/content/confirm").and_then(Value::as_bool) != Some(false)
    })
}

fn text(s: impl Into<String>) -> Value {
    json!({"content": [{"type": "text", "text": s.into()}]})
}

fn needs_tasks() -> McpError {
    McpError::missing_required_client_capability(
        ClientCapabilities::builder().enable_tasks().build(),
    )
}

/// `confirm_delete` and `multi_input` (`name`): a task that asks its
/// questions (one, or two in a row) and answers from the answers.
async fn questions_task(
    name: &str,
    args: &JsonObject,
    call: &ExtensionCall<'_>,
    tasks: bool,
) -> Result<CallToolResponse, McpError> {
    if !tasks {
        return Err(needs_tasks());
    }
    let file = args
        .get("filename")
        .and_then(Value::as_str)
        .unwrap_or("the file")
        .chars()
        .take(200)
        .collect::<String>();
    let questions = if name == "confirm_delete" {
        json!({"confirm": elicit(&format!("Delete {file}?"),
                json!({"confirm": {"type": "boolean"}}))})
    } else {
        json!({
            "first": elicit("First: your name?", json!({"name": {"type": "string"}})),
            "second": elicit("Second: confirm?", json!({"confirm": {"type": "boolean"}})),
        })
    };
    let requests = serde_json::from_value(questions)
        .map_err(|e| McpError::internal_error(e.to_string(), None))?;
    let t = call
        .spawn_task(move |asker| async move {
            let Some(answers) = asker.ask(requests).await else {
                return TaskPayload::Cancelled;
            };
            let yes = answers.values().all(|a| accepted(Some(a)));
            complete(text(match (name_is_delete(&answers), yes) {
                (true, true) => format!("deleted {file} (a fixture: nothing was)"),
                (true, false) => format!("kept {file}"),
                (false, _) => format!("got {} answers", answers.len()),
            }))
        })
        .await?;
    Ok(CallToolResponse::Task(t))
}

/// Call the task fixture `name`.
///
/// # Errors
/// `-32021` when the client did not declare the tasks extension and the
/// fixture needs it; an internal error when the task table is full.
pub(crate) async fn call(
    name: &str,
    request: &CallToolRequestParams,
    call: &ExtensionCall<'_>,
) -> Result<CallToolResponse, McpError> {
    let tasks = call
        .context()
        .client_capabilities()
        .is_some_and(|c| c.supports_tasks());
    let args = request.arguments.clone().unwrap_or_default();
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
                let t = call
                    .spawn_task(|_| async move { complete(work.await) })
                    .await?;
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
            let t = call
                .spawn_task(|_| async {
                    tokio::time::sleep(Duration::from_secs(1)).await;
                    complete(json!({"isError": true,
                        "content": [{"type": "text", "text": "the job failed"}]}))
                })
                .await?;
            Ok(CallToolResponse::Task(t))
        }
        "protocol_error_job" => {
            if !tasks {
                return Err(McpError::internal_error("the job failed", None));
            }
            let t = call
                .spawn_task(|_| async {
                    let mut error = JsonObject::new();
                    error.insert("code".into(), (-32603).into());
                    error.insert("message".into(), "the job failed".into());
                    TaskPayload::Failed { error }
                })
                .await?;
            Ok(CallToolResponse::Task(t))
        }
        "confirm_delete" | "multi_input" => questions_task(name, &args, call, tasks).await,
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
            let t = call
                .spawn_task(
                    |_| async move { complete(text(format!("Hello, {user}! (from a task)"))) },
                )
                .await?;
            Ok(CallToolResponse::Task(t))
        }
    }
}

/// Whether `answers` answer `confirm_delete`'s question.
fn name_is_delete(answers: &rmcp::model::InputResponses) -> bool {
    answers.contains_key("confirm")
}
