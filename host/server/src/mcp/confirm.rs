//! A client's confirmation of a call as an input-required result (MCP
//! 2026-07-28, SEP-2322): the revision has no server-to-client request
//! during a call, so where a session would be asked by elicitation, the
//! stateless result asks for the answer (`inputRequests`) and the client
//! retries the call with it (`inputResponses`) and the echoed
//! `requestState`.
//!
//! Only where the door lets the client decide (`Dispatcher::may_confirm`:
//! a tool the policy lists in `[approvals] client_confirm`, never
//! `code_run`, high risk or irreversible) and the client declared
//! elicitation in its `_meta`; any other pending call is only told, and
//! waits for an operator (issue 24's operator-principal rule).
//!
//! The `requestState` names the saga and the approval, sealed (HMAC-SHA256,
//! rmcp's `RequestStateCodec`, with a time to live; under a key derived
//! from `CAPSAGA_KEK`, so any host holding that KEK can take the answer,
//! else under one of this process: `serve::request_state_codec`) and bound to the
//! principal and the tool: a state altered, replayed by another principal
//! or against another tool is refused with `-32602`. The door checks again
//! when the answer is recorded (`Dispatcher::confirm`: the approval must
//! be of the principal's own saga, still parked on it).

use rmcp::ErrorData as McpError;
use rmcp::model::{
    InputRequests, InputRequiredResult, InputResponses, RequestStateCodec, RequestStateError,
    SealOptions,
};
use serde_json::{Value, json};
use std::time::Duration;

/// The `inputRequests` key of the question.
pub const KEY: &str = "capsaga_approval";

/// How long the client has to answer.
pub const TTL: Duration = Duration::from_secs(300);

/// What a sealed state names.
#[derive(Debug, PartialEq, Eq)]
pub struct Pending {
    /// The saga parked on the approval.
    pub saga: String,
    /// The approval.
    pub approval: String,
}

fn ad(principal: &str, tool: &str) -> String {
    format!("capsaga-confirm\u{0}{principal}\u{0}{tool}")
}

fn refused(e: impl std::fmt::Display) -> McpError {
    McpError::invalid_params(format!("requestState rejected: {e}"), None)
}

/// Seal `p` for `principal` calling `tool`.
pub fn seal(codec: &RequestStateCodec, principal: &str, tool: &str, p: &Pending) -> String {
    let payload = json!({"saga": p.saga, "approval": p.approval}).to_string();
    let ad = ad(principal, tool);
    codec.seal_with(
        payload.as_bytes(),
        &SealOptions::new().associated_data(ad.as_bytes()).ttl(TTL),
    )
}

/// Open a state the client echoed.
///
/// # Errors
/// `-32602` for a state that fails verification (altered, expired, sealed
/// for another principal or tool, or by another server key).
pub fn open(
    codec: &RequestStateCodec,
    principal: &str,
    tool: &str,
    state: &str,
) -> Result<Pending, McpError> {
    let ad = ad(principal, tool);
    let bytes = codec.open_with(state, ad.as_bytes()).map_err(|e| match e {
        RequestStateError::UnknownKeyId => refused(
            "sealed under a key this host does not hold (by a host with another CAPSAGA_KEK, \
             or by a host without one); answer the host that asked, or give every host the same \
             CAPSAGA_KEK",
        ),
        e => refused(e),
    })?;
    let v: Value = serde_json::from_slice(&bytes).map_err(refused)?;
    match (v["saga"].as_str(), v["approval"].as_str()) {
        (Some(s), Some(a)) => Ok(Pending {
            saga: s.to_string(),
            approval: a.to_string(),
        }),
        _ => Err(refused("incomplete")),
    }
}

/// The client's answer: `Some(true)` only for an accepted form with
/// `approve: true`; `Some(false)` for a decline or `approve: false`;
/// `None` when it did not answer this question (ask again).
pub fn answer(responses: Option<&InputResponses>) -> Option<bool> {
    let r = responses?.get(KEY)?;
    match r.get("action").and_then(Value::as_str)? {
        "accept" => Some(
            r.get("content")
                .and_then(|c| c.get("approve"))
                .and_then(Value::as_bool)
                .unwrap_or(false),
        ),
        "decline" => Some(false),
        _ => None,
    }
}

/// The question asking to confirm `summary` (approval `id`): the
/// `inputRequests` map of an input-required result or of a task waiting
/// for input, one elicitation under [`KEY`].
///
/// # Errors
/// An internal error if rmcp refuses the shape (a bug).
pub fn question(summary: &str, reason: &str, id: &str) -> Result<InputRequests, McpError> {
    let message: String = format!(
        "capsaga: confirm this call? {summary} ({reason}; approval {id}; the operator's policy lets you confirm this tool)"
    )
    .chars()
    .take(2000)
    .collect();
    serde_json::from_value(json!({KEY: {"method": "elicitation/create", "params": {
        "mode": "form",
        "message": message,
        "requestedSchema": {"type": "object", "properties": {"approve": {
            "type": "boolean", "title": "Approve",
            "description": "Run this call once, as shown"}},
            "required": ["approve"]}}}}))
    .map_err(|e| McpError::internal_error(e.to_string(), None))
}

/// The input-required result asking to confirm `summary` (approval `id`).
///
/// # Errors
/// An internal error if rmcp refuses the shape (a bug).
pub fn ask(
    summary: &str,
    reason: &str,
    id: &str,
    state: String,
    handle: &str,
) -> Result<InputRequiredResult, McpError> {
    let requests = question(summary, reason, id)?;
    serde_json::from_value(json!({
        "resultType": "input_required",
        "inputRequests": requests,
        "requestState": state,
        "_meta": {super::stateless::SAGA_META: handle},
    }))
    .map_err(|e| McpError::internal_error(e.to_string(), None))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn codec() -> RequestStateCodec {
        RequestStateCodec::new_unchecked(vec![7u8; 32])
    }

    #[test]
    fn a_state_opens_only_for_its_principal_and_tool_and_unaltered() {
        let c = codec();
        let p = Pending {
            saga: "s".into(),
            approval: "a".into(),
        };
        let s = seal(&c, "token:bob", "fs_write", &p);
        assert_eq!(open(&c, "token:bob", "fs_write", &s).unwrap(), p);
        assert!(open(&c, "token:eve", "fs_write", &s).is_err());
        assert!(open(&c, "token:bob", "fs_edit", &s).is_err());
        let mut altered = s.clone();
        altered.push('A');
        assert!(open(&c, "token:bob", "fs_write", &altered).is_err());
        let other = RequestStateCodec::new_unchecked(vec![8u8; 32]);
        assert!(open(&other, "token:bob", "fs_write", &s).is_err());
        assert!(open(&c, "token:bob", "fs_write", "").is_err());
    }

    #[test]
    fn only_an_accepted_true_approves() {
        let r = |v: Value| -> InputResponses { serde_json::from_value(json!({KEY: v})).unwrap() };
        assert_eq!(
            answer(Some(&r(
                json!({"action": "accept", "content": {"approve": true}})
            ))),
            Some(true)
        );
        assert_eq!(
            answer(Some(&r(
                json!({"action": "accept", "content": {"approve": "yes"}})
            ))),
            Some(false)
        );
        assert_eq!(answer(Some(&r(json!({"action": "accept"})))), Some(false));
        assert_eq!(answer(Some(&r(json!({"action": "decline"})))), Some(false));
        assert_eq!(answer(Some(&r(json!({"action": "cancel"})))), None);
        assert_eq!(answer(Some(&r(json!(42)))), None);
        assert_eq!(answer(None), None);
    }
}
