//! The reference fixtures of the official MCP conformance suite
//! (`@modelcontextprotocol/conformance`, server scenarios of spec
//! 2025-11-25), served only by the `capsaga-conformance` binary.
//!
//! The suite checks a server's protocol surface by calling tools,
//! resources and prompts of fixed names (`test_image_content`,
//! `test://static-text`, `test_simple_prompt`, ...) with fixed answers. They
//! are not capsaga tools: they run no component, touch no file and write no
//! saga; they exist so that the suite can exercise, against the real
//! server, the protocol features capsaga's own tools and resources use
//! (content types, log and progress notifications, sampling and elicitation
//! requests to the client, resources with templates and subscriptions,
//! prompts, completion). The `capsaga` binary does not contain them; the
//! server knows them only through its extension point.

// Logging and sampling are deprecated by the MCP draft (SEP-2577), yet the
// 2025-11-25 suite still checks them.
#![allow(deprecated)]

use rmcp::model::{
    CreateMessageRequestParams, ElicitRequestParams, LoggingMessageNotificationParam,
    ProgressNotificationParam,
};
use rmcp::{Peer, RoleServer};
use serde_json::{Value, json};
use std::time::Duration;

/// A 1x1 red PNG.
pub const PNG_1X1: &str =
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAIAAACQd1PeAAAADElEQVR4nGP4z8AAAAMBAQDJ/pLvAAAAAElFTkSuQmCC";
/// 10 ms of silence: WAV, 8 kHz, mono, 8 bits.
pub const WAV_SILENCE: &str = "UklGRnQAAABXQVZFZm10IBAAAAABAAEAQB8AAEAfAAABAAgAZGF0YVAAAACAgICAgICAgICAgICAgICAgICAgICAgICAgICAgICAgICAgICAgICAgICAgICAgICAgICAgICAgICAgICAgICAgICAgICAgICAgICAgICAgA==";

fn no_args() -> Value {
    json!({"type": "object", "properties": {}})
}

fn string_arg(name: &str, what: &str) -> Value {
    json!({"type": "object", "properties": {name: {"type": "string", "description": what}},
        "required": [name]})
}

/// The fixture tools' definitions (`tools/list`).
pub fn tools() -> Vec<Value> {
    let t = |name: &str, description: &str, schema: Value| json!({"name": name, "description": description, "inputSchema": schema});
    vec![
        t(
            "test_simple_text",
            "Conformance fixture: returns text.",
            no_args(),
        ),
        t(
            "test_image_content",
            "Conformance fixture: returns an image.",
            no_args(),
        ),
        t(
            "test_audio_content",
            "Conformance fixture: returns audio.",
            no_args(),
        ),
        t(
            "test_embedded_resource",
            "Conformance fixture: returns an embedded resource.",
            no_args(),
        ),
        t(
            "test_multiple_content_types",
            "Conformance fixture: returns text, an image and a resource.",
            no_args(),
        ),
        t(
            "test_tool_with_logging",
            "Conformance fixture: sends three log notifications.",
            no_args(),
        ),
        t(
            "test_tool_with_progress",
            "Conformance fixture: sends progress 0, 50, 100 of 100.",
            no_args(),
        ),
        t(
            "test_error_handling",
            "Conformance fixture: always fails.",
            no_args(),
        ),
        t(
            "test_sampling",
            "Conformance fixture: asks the client's model.",
            string_arg("prompt", "The prompt to send to the LLM"),
        ),
        t(
            "test_elicitation",
            "Conformance fixture: asks the client's user.",
            string_arg("message", "The message to show the user"),
        ),
        t(
            "test_elicitation_sep1034_defaults",
            "Conformance fixture: elicitation with defaults (SEP-1034).",
            no_args(),
        ),
        t(
            "test_elicitation_sep1330_enums",
            "Conformance fixture: elicitation with every enum form (SEP-1330).",
            no_args(),
        ),
        t(
            "test_param_headers",
            "Conformance fixture: `region` is mirrored in the Mcp-Param-Region header (SEP-2243, 2026-07-28), which the server checks against the body before any handler runs.",
            json!({"type": "object", "properties": {
                "region": {"type": "string", "x-mcp-header": "Region"},
                "query": {"type": "string"}},
                "required": ["region"]}),
        ),
        t(
            "json_schema_2020_12_tool",
            "Tool with JSON Schema 2020-12 features",
            json!({
                "$schema": "https://json-schema.org/draft/2020-12/schema",
                "type": "object",
                "$defs": {"address": {"$anchor": "addressDef", "type": "object", "properties": {
                    "street": {"type": "string"}, "city": {"type": "string"}}}},
                "properties": {"name": {"type": "string"}, "address": {"$ref": "#/$defs/address"},
                    "contactMethod": {"type": "string", "enum": ["phone", "email"]},
                    "phone": {"type": "string"}, "email": {"type": "string"}},
                // SEP-2106 (2026-07-28): composition and conditional
                // keywords are kept as written too.
                "allOf": [{"anyOf": [{"required": ["phone"]}, {"required": ["email"]}]}],
                "if": {"properties": {"contactMethod": {"const": "phone"}}, "required": ["contactMethod"]},
                "then": {"required": ["phone"]},
                "else": {"required": ["email"]},
                "additionalProperties": false
            }),
        ),
    ]
}

/// Whether `name` is a fixture tool.
pub fn is_tool(name: &str) -> bool {
    tools().iter().any(|t| t["name"] == name)
}

fn text(s: impl Into<String>) -> Value {
    json!({"type": "text", "text": s.into()})
}

fn result(content: Vec<Value>) -> Value {
    json!({"content": content})
}

fn failure(message: impl Into<String>) -> Value {
    json!({"isError": true, "content": [text(message)]})
}

/// Call the fixture tool `name` with `args`; `peer` is the client,
/// `progress` the request's progress token. The answer is a
/// `CallToolResult` as JSON.
// Over 100 lines: the fixture table, an arm per conformance tool.
pub async fn call(
    name: &str,
    args: &Value,
    peer: &Peer<RoleServer>,
    progress: Option<&rmcp::model::ProgressToken>,
) -> Value {
    let pause = || tokio::time::sleep(Duration::from_millis(50));
    match name {
        "test_simple_text" => result(vec![text("This is a simple text response for testing.")]),
        "test_image_content" => result(vec![
            json!({"type": "image", "data": PNG_1X1, "mimeType": "image/png"}),
        ]),
        "test_audio_content" => result(vec![
            json!({"type": "audio", "data": WAV_SILENCE, "mimeType": "audio/wav"}),
        ]),
        "test_embedded_resource" => result(vec![json!({"type": "resource", "resource": {
            "uri": "test://embedded-resource", "mimeType": "text/plain",
            "text": "This is an embedded resource content."}})]),
        "test_multiple_content_types" => result(vec![
            text("Multiple content types test:"),
            json!({"type": "image", "data": PNG_1X1, "mimeType": "image/png"}),
            json!({"type": "resource", "resource": {"uri": "test://mixed-content-resource",
                "mimeType": "application/json", "text": "{\"test\":\"data\",\"value\":123}"}}),
        ]),
        "test_tool_with_logging" => {
            for (i, line) in [
                "Tool execution started",
                "Tool processing data",
                "Tool execution completed",
            ]
            .iter()
            .enumerate()
            {
                if i > 0 {
                    pause().await;
                }
                if let Ok(p) = serde_json::from_value::<LoggingMessageNotificationParam>(
                    json!({"level": "info", "logger": "capsaga-fixtures", "data": line}),
                ) {
                    #[allow(deprecated)]
                    let _ = peer.notify_logging_message(p).await;
                }
            }
            result(vec![text("Tool with logging executed successfully")])
        }
        "test_tool_with_progress" => {
            for (i, n) in [0.0, 50.0, 100.0].iter().enumerate() {
                if i > 0 {
                    pause().await;
                }
                if let Some(token) = progress
                    && let Ok(p) = serde_json::from_value::<ProgressNotificationParam>(
                        json!({"progressToken": token, "progress": n, "total": 100.0}),
                    )
                {
                    let _ = peer.notify_progress(p).await;
                }
            }
            result(vec![text("Tool with progress executed successfully")])
        }
        "test_error_handling" => failure("This tool intentionally returns an error for testing"),
        "test_sampling" => sampling(args, peer).await,
        "test_elicitation" => {
            let message = args["message"].as_str().unwrap_or("Please provide your details");
            elicit(
                peer,
                json!({"message": message, "requestedSchema": {"type": "object", "properties": {
                    "username": {"type": "string", "description": "User's response"},
                    "email": {"type": "string", "description": "User's email address"}},
                    "required": ["username", "email"]}}),
                "User response",
            )
            .await
        }
        "test_elicitation_sep1034_defaults" => {
            elicit(
                peer,
                json!({"message": "Please review the defaults", "requestedSchema": {"type": "object", "properties": {
                    "name": {"type": "string", "default": "John Doe"},
                    "age": {"type": "integer", "default": 30},
                    "score": {"type": "number", "default": 95.5},
                    "status": {"type": "string", "enum": ["active", "inactive", "pending"], "default": "active"},
                    "verified": {"type": "boolean", "default": true}}}}),
                "Elicitation completed",
            )
            .await
        }
        "test_elicitation_sep1330_enums" => {
            elicit(
                peer,
                json!({"message": "Please choose", "requestedSchema": {"type": "object", "properties": {
                    "untitledSingle": {"type": "string", "enum": ["option1", "option2", "option3"]},
                    "titledSingle": {"type": "string", "oneOf": [
                        {"const": "value1", "title": "First Option"},
                        {"const": "value2", "title": "Second Option"},
                        {"const": "value3", "title": "Third Option"}]},
                    "legacyEnum": {"type": "string", "enum": ["opt1", "opt2", "opt3"],
                        "enumNames": ["Option One", "Option Two", "Option Three"]},
                    "untitledMulti": {"type": "array", "items": {"type": "string", "enum": ["option1", "option2", "option3"]}},
                    "titledMulti": {"type": "array", "items": {"anyOf": [
                        {"const": "value1", "title": "First Choice"},
                        {"const": "value2", "title": "Second Choice"},
                        {"const": "value3", "title": "Third Choice"}]}}}}}),
                "Elicitation completed",
            )
            .await
        }
        "json_schema_2020_12_tool" => result(vec![text(format!("received {args}"))]),
        "test_param_headers" => result(vec![text(format!(
            "region {}",
            args["region"].as_str().unwrap_or("")
        ))]),
        other => failure(format!("no fixture tool {other}")),
    }
}

async fn sampling(args: &Value, peer: &Peer<RoleServer>) -> Value {
    let supported = peer
        .peer_info()
        .is_some_and(|i| i.capabilities.sampling.is_some());
    if !supported {
        return failure("the client does not support sampling");
    }
    let prompt = args["prompt"].as_str().unwrap_or_default();
    let Ok(params) = serde_json::from_value::<CreateMessageRequestParams>(json!({
        "messages": [{"role": "user", "content": {"type": "text", "text": prompt}}],
        "maxTokens": 100
    })) else {
        return failure("bad sampling request");
    };
    #[allow(deprecated)]
    match peer.create_message(params).await {
        Ok(r) => {
            let v = serde_json::to_value(&r).unwrap_or(Value::Null);
            let answer = v["content"]["text"]
                .as_str()
                .map(str::to_string)
                .unwrap_or_else(|| v["content"].to_string());
            result(vec![text(format!("LLM response: {answer}"))])
        }
        Err(e) => failure(format!("sampling failed: {e}")),
    }
}

async fn elicit(peer: &Peer<RoleServer>, request: Value, label: &str) -> Value {
    let supported = peer
        .peer_info()
        .is_some_and(|i| i.capabilities.elicitation.is_some());
    if !supported {
        return failure("the client does not support elicitation");
    }
    let Ok(params) = serde_json::from_value::<ElicitRequestParams>(request) else {
        return failure("bad elicitation request");
    };
    match peer.create_elicitation(params).await {
        Ok(r) => {
            let v = serde_json::to_value(&r).unwrap_or(Value::Null);
            let action = v["action"].as_str().unwrap_or("unknown");
            let content = v.get("content").cloned().unwrap_or(Value::Null);
            if label == "User response" {
                result(vec![text(format!(
                    "{label}: <action: {action}, content: {content}>"
                ))])
            } else {
                result(vec![text(format!(
                    "{label}: action={action}, content={content}"
                ))])
            }
        }
        Err(e) => failure(format!("elicitation failed: {e}")),
    }
}

/// The fixture resources (`resources/list`).
pub fn resources() -> Vec<Value> {
    vec![
        json!({"uri": "test://static-text", "name": "static-text",
            "description": "Conformance fixture: a static text resource", "mimeType": "text/plain"}),
        json!({"uri": "test://static-binary", "name": "static-binary",
            "description": "Conformance fixture: a static binary resource", "mimeType": "image/png"}),
        json!({"uri": "test://watched-resource", "name": "watched-resource",
            "description": "Conformance fixture: a resource to subscribe to", "mimeType": "text/plain"}),
    ]
}

/// The fixture resource templates.
pub fn templates() -> Vec<Value> {
    vec![
        json!({"uriTemplate": "test://template/{id}/data", "name": "template-data",
        "description": "Conformance fixture: data for an id", "mimeType": "application/json"}),
    ]
}

/// Whether `uri` is a fixture resource.
pub fn owns(uri: &str) -> bool {
    uri.starts_with("test://")
}

/// `resources/read` contents of a fixture resource, or `None`.
pub fn read(uri: &str) -> Option<Value> {
    let one = |v: Value| Some(json!({"contents": [v]}));
    match uri {
        "test://static-text" => one(json!({"uri": uri, "mimeType": "text/plain",
            "text": "This is the content of the static text resource."})),
        "test://static-binary" => {
            one(json!({"uri": uri, "mimeType": "image/png", "blob": PNG_1X1}))
        }
        "test://watched-resource" => one(json!({"uri": uri, "mimeType": "text/plain",
            "text": "Watched resource content."})),
        _ => {
            let id = uri
                .strip_prefix("test://template/")?
                .strip_suffix("/data")?;
            if id.is_empty() || id.contains('/') {
                return None;
            }
            let text =
                json!({"id": id, "templateTest": true, "data": format!("Data for ID: {id}")});
            one(json!({"uri": uri, "mimeType": "application/json", "text": text.to_string()}))
        }
    }
}

/// The fixture prompts (`prompts/list`).
pub fn prompts() -> Vec<Value> {
    vec![
        json!({"name": "test_simple_prompt", "description": "Conformance fixture: a simple prompt"}),
        json!({"name": "test_prompt_with_arguments", "description": "Conformance fixture: a prompt with arguments",
            "arguments": [
                {"name": "arg1", "description": "First test argument", "required": true},
                {"name": "arg2", "description": "Second test argument", "required": true}]}),
        json!({"name": "test_prompt_with_embedded_resource", "description": "Conformance fixture: a prompt embedding a resource",
            "arguments": [{"name": "resourceUri", "description": "URI of the resource to embed", "required": true}]}),
        json!({"name": "test_prompt_with_image", "description": "Conformance fixture: a prompt with an image"}),
    ]
}

/// `prompts/get` of a fixture prompt with `args`, or `None` for an unknown
/// name.
pub fn prompt(name: &str, args: &serde_json::Map<String, Value>) -> Option<Value> {
    let arg = |k: &str| {
        args.get(k)
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string()
    };
    let user = |content: Value| json!({"role": "user", "content": content});
    let messages = match name {
        "test_simple_prompt" => vec![user(text("This is a simple prompt for testing."))],
        "test_prompt_with_arguments" => vec![user(text(format!(
            "Prompt with arguments: arg1='{}', arg2='{}'",
            arg("arg1"),
            arg("arg2")
        )))],
        "test_prompt_with_embedded_resource" => vec![
            user(
                json!({"type": "resource", "resource": {"uri": arg("resourceUri"),
                "mimeType": "text/plain", "text": "Embedded resource content for testing."}}),
            ),
            user(text("Please process the embedded resource above.")),
        ],
        "test_prompt_with_image" => vec![
            user(json!({"type": "image", "data": PNG_1X1, "mimeType": "image/png"})),
            user(text("Please analyze the image above.")),
        ],
        _ => return None,
    };
    Some(json!({"messages": messages}))
}

/// Completion of a fixture prompt's or template's argument, or `None`
/// when the reference is not a fixture's.
pub fn complete(reference: &Value, argument: &str, typed: &str) -> Option<Vec<String>> {
    let words: &[&str] = match (reference["type"].as_str(), argument) {
        (Some("ref/prompt"), _) if reference["name"] == "test_prompt_with_arguments" => {
            &["paris", "park", "party", "hello", "world"]
        }
        (Some("ref/resource"), "id")
            if reference["uri"]
                .as_str()
                .is_some_and(|u| u.starts_with("test://")) =>
        {
            &["1", "123", "42"]
        }
        _ => return None,
    };
    Some(
        words
            .iter()
            .filter(|w| w.starts_with(typed))
            .map(|w| w.to_string())
            .collect(),
    )
}
