//! The conformance fixtures of MCP 2026-07-28's multi round-trip requests
//! ([`crate::serve::fixtures_mrtr`]) answered through rmcp's result shapes:
//! a round that asks for input becomes an `InputRequiredResult` (rmcp
//! refuses to send one to a peer of an older revision).

use super::McpSession;
use super::handler::{internal, to_result};
use crate::serve::fixtures_mrtr::{self, Answer, Round, States};
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, GetPromptRequestParams, GetPromptResponse,
    GetPromptResult, InputRequiredResult,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData as McpError, RoleServer};
use serde_json::{Map, Value};

fn responses(r: Option<&rmcp::model::InputResponses>) -> Option<Map<String, Value>> {
    r.map(|m| m.iter().map(|(k, v)| (k.clone(), v.clone())).collect())
}

fn input_required(v: Value) -> Result<InputRequiredResult, McpError> {
    serde_json::from_value(v).map_err(internal)
}

impl McpSession {
    pub(super) fn call_fixture_mrtr(
        &self,
        name: &str,
        request: &CallToolRequestParams,
        context: &RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, McpError> {
        let given = responses(request.input_responses.as_ref());
        let caps = context.client_capabilities();
        let round = Round {
            responses: given.as_ref(),
            state: request.request_state.as_deref(),
            principal: &self.state.principal.name,
            caps: caps.as_ref(),
        };
        let states = States {
            codec: self.state.shared.states()?,
        };
        match fixtures_mrtr::call(name, &round, &states)? {
            Answer::Complete(v) => to_result(v),
            Answer::InputRequired(v) => Ok(CallToolResponse::InputRequired(input_required(v)?)),
        }
    }

    pub(super) fn prompt_fixture_mrtr(
        &self,
        request: &GetPromptRequestParams,
        context: &RequestContext<RoleServer>,
    ) -> Result<GetPromptResponse, McpError> {
        let given = responses(request.input_responses.as_ref());
        let caps = context.client_capabilities();
        let round = Round {
            responses: given.as_ref(),
            state: request.request_state.as_deref(),
            principal: &self.state.principal.name,
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
}
