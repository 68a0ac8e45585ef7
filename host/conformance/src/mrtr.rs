//! The conformance fixtures of MCP 2026-07-28's multi round-trip requests
//! ([`crate::fixtures_mrtr`]) answered through rmcp's result shapes:
//! a round that asks for input becomes an `InputRequiredResult` (rmcp
//! refuses to send one to a peer of an older revision).

use crate::fixtures_mrtr::{self, Answer, Round, States};
use crate::{internal, to_result};
use capsaga_server::mcp::extension::ExtensionCall;
use rmcp::ErrorData as McpError;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, GetPromptRequestParams, GetPromptResponse,
    GetPromptResult, InputRequiredResult,
};
use serde_json::{Map, Value};

fn responses(r: Option<&rmcp::model::InputResponses>) -> Option<Map<String, Value>> {
    r.map(|m| m.iter().map(|(k, v)| (k.clone(), v.clone())).collect())
}

fn input_required(v: Value) -> Result<InputRequiredResult, McpError> {
    serde_json::from_value(v).map_err(internal)
}

/// Call the fixture tool `name` for one round.
///
/// # Errors
/// [`fixtures_mrtr::call`]'s; an internal error without a `requestState`
/// codec.
pub(crate) fn call_tool(
    name: &str,
    request: &CallToolRequestParams,
    call: &ExtensionCall<'_>,
) -> Result<CallToolResponse, McpError> {
    let given = responses(request.input_responses.as_ref());
    let caps = call.context().client_capabilities();
    let round = Round {
        responses: given.as_ref(),
        state: request.request_state.as_deref(),
        principal: &call.principal().name,
        caps: caps.as_ref(),
    };
    let states = States {
        codec: call.request_states()?,
    };
    match fixtures_mrtr::call(name, &round, &states)? {
        Answer::Complete(v) => to_result(v),
        Answer::InputRequired(v) => Ok(CallToolResponse::InputRequired(input_required(v)?)),
    }
}

/// `prompts/get` of [`fixtures_mrtr::PROMPT`] for one round.
///
/// # Errors
/// An internal error when an answer does not fit rmcp's shapes.
pub(crate) fn get_prompt(
    request: &GetPromptRequestParams,
    call: &ExtensionCall<'_>,
) -> Result<GetPromptResponse, McpError> {
    let given = responses(request.input_responses.as_ref());
    let caps = call.context().client_capabilities();
    let round = Round {
        responses: given.as_ref(),
        state: request.request_state.as_deref(),
        principal: &call.principal().name,
        caps: caps.as_ref(),
    };
    match fixtures_mrtr::prompt(&round) {
        Answer::Complete(mut v) => {
            if let Value::Object(m) = &mut v {
                m.insert("resultType".into(), "complete".into());
            }
            let r: GetPromptResult = serde_json::from_value(v).map_err(internal)?;
            Ok(r.into())
        }
        Answer::InputRequired(v) => Ok(GetPromptResponse::InputRequired(input_required(v)?)),
    }
}
