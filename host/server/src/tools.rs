//! What an MCP client sees of the door: the catalog as MCP tool
//! definitions, and each call's outcome as an MCP tool result.
//!
//! - A tool definition is the loaded tool's own: its description and its
//!   args schema (`inputSchema`), as pinned by the tool's content hash
//!   (`_meta["capsaga/hash"]`): a changed component is another hash, hence
//!   another tool version. Annotations come from its meta: `readOnlyHint`
//!   (no side effects), `destructiveHint` (high risk: not undoable by its
//!   compensation), `idempotentHint`, `openWorldHint` (it has a `net:`
//!   capability).
//! - A committed step's output goes back as text (JSON), wrapped in
//!   `<untrusted>` markers when the door says its output is untrusted
//!   ([`capsaga_door::dispatch::untrusted_output`]: declared so, or any grant
//!   reaching outside data) and truncated
//!   exactly as for the model, with the raw output as `structuredContent`
//!   only when the tool's output is trusted.
//! - Errors are `isError` results carrying the error kind and `llm_hint`
//!   (`structuredContent.error`); a call that needs a human names the
//!   pending approval.

use capsaga_agent::runner::truncate_result;
use capsaga_core::error::ToolError;
use capsaga_core::fsm::State;
use capsaga_core::meta::Risk;
use capsaga_door::dispatch::{Outcome, Submitted};
use capsaga_door::registry::LoadedTool;
use capsaga_door::saga::RollbackReport;
use capsaga_door::scope::Ended;
use capsaga_store::clock::now_rfc3339;
use serde_json::{Value, json};

/// The session tool that commits the session's saga.
pub const COMMIT: &str = "capsaga_commit";
/// The session tool that rolls the session's saga back.
pub const ROLLBACK: &str = "capsaga_rollback";

/// The MCP definition of a loaded tool (JSON of an MCP `Tool`).
pub fn definition(t: &LoadedTool) -> Value {
    let m = &t.meta;
    let open_world = m.capabilities.iter().any(|c| c.kind() == "net");
    json!({
        "name": m.name,
        "title": m.name,
        "description": m.description,
        "inputSchema": input_schema(&m.args_schema),
        "annotations": {
            "title": m.name,
            "readOnlyHint": !m.has_side_effects,
            "destructiveHint": m.has_side_effects && m.risk == Risk::High,
            "idempotentHint": m.idempotent,
            "openWorldHint": open_world,
        },
        "_meta": {
            "capsaga/hash": t.hash,
            "capsaga/version": m.version,
            "capsaga/risk": m.risk.as_str(),
            "capsaga/side_effects": m.has_side_effects,
            "capsaga/dry_run": m.supports_dry_run,
            "capsaga/returns_untrusted": capsaga_door::dispatch::untrusted_output(t),
        },
    })
}

/// MCP requires an object schema (`type: object`); a tool's schema always
/// describes an object, but one without `type` gets it.
fn input_schema(schema: &Value) -> Value {
    match schema {
        Value::Object(m) if m.contains_key("type") => schema.clone(),
        Value::Object(m) => {
            let mut m = m.clone();
            m.insert("type".into(), json!("object"));
            Value::Object(m)
        }
        _ => json!({"type": "object"}),
    }
}

/// The two session tools, for the session's saga.
pub fn session_tools() -> [Value; 2] {
    // `saga`: the handle of a saga opened without a session (MCP
    // 2026-07-28, `super::mcp::stateless`); a session's own saga needs none.
    let empty = json!({"type": "object", "properties": {"saga": {"type": "string",
        "description": "Without a session (MCP 2026-07-28): the saga handle a result returned in _meta \"dev.capsaga/saga\"."}},
        "additionalProperties": false});
    [
        json!({
            "name": COMMIT,
            "title": "Commit this session's saga",
            "description": "End this session's saga successfully: every step it committed stays. The next tool call starts a new saga.",
            "inputSchema": empty,
            "annotations": {"readOnlyHint": false, "destructiveHint": false, "idempotentHint": true, "openWorldHint": false},
        }),
        json!({
            "name": ROLLBACK,
            "title": "Roll this session's saga back",
            "description": "Undo every side effect this session's saga committed, in reverse order, with each tool's compensation. The next tool call starts a new saga.",
            "inputSchema": empty,
            "annotations": {"readOnlyHint": false, "destructiveHint": true, "idempotentHint": true, "openWorldHint": false},
        }),
    ]
}

/// A tool result (JSON of an MCP `CallToolResult`).
pub fn result(text: String, is_error: bool, structured: Option<Value>) -> Value {
    let mut r = json!({
        "content": [{"type": "text", "text": text}],
        "isError": is_error,
    });
    if let (Some(s), Some(m)) = (structured, r.as_object_mut()) {
        m.insert("structuredContent".into(), s);
    }
    r
}

/// An error result carrying the kind and the hint.
pub fn error_result(e: &ToolError, extra: Value) -> Value {
    let mut detail = json!({
        "kind": e.kind.to_string(),
        "message": e.message,
        "llm_hint": e.llm_hint,
    });
    if let (Value::Object(d), Value::Object(x)) = (&mut detail, extra) {
        d.extend(x);
    }
    result(e.to_model_text(), true, Some(json!({ "error": detail })))
}

/// The MCP result of one call through the door, and its saga's id.
pub fn outcome(name: &str, saga_id: &str, s: &Submitted) -> Value {
    let untrusted_output = s.untrusted_output();
    let source = format!("tool:{name}");
    match &s.outcome {
        Outcome::Committed {
            seq,
            output,
            replayed,
            ..
        } => {
            let text = truncate_result(&output.data.to_string());
            let text = if untrusted_output {
                capsaga_untrusted::wrap_counted(&source, &now_rfc3339(), &text).0
            } else {
                capsaga_untrusted::neutralize_counted(&text).0
            };
            let structured = json!({
                "saga_id": saga_id,
                "step": seq,
                "replayed": replayed,
                "summary": output.summary,
                "effects": output.effects,
                "data": if untrusted_output { Value::Null } else { output.data.clone() },
            });
            result(text, false, Some(structured))
        }
        Outcome::ReadFailed { seq, error, .. } => failed(&source, saga_id, *seq, error, None),
        Outcome::Failed {
            seq,
            error,
            rollback,
            ..
        } => failed(
            &source,
            saga_id,
            *seq,
            error,
            Some(json!({
                "rolled_back": true,
                "saga_state": rollback.final_state.to_string(),
                "undone": rollback.undone.len(),
            })),
        ),
        Outcome::Refused { error, .. } => error_result(error, json!({"saga_id": saga_id})),
        Outcome::AwaitingApproval {
            seq,
            approval,
            denied_by,
        } => {
            let id = &approval.approval_id;
            let message = match denied_by {
                Some(by) => format!(
                    "{by} denied this call (approval {id}): it did not run; roll the saga back with {ROLLBACK}"
                ),
                None => format!(
                    "this call needs a human's approval: approval {id} is pending ({}). Nothing ran. Once it is approved (`capsaga approve {id}`, or POST /v1/approvals/{id}/approve), call the same tool with the same arguments again: it runs once.",
                    approval.summary
                ),
            };
            let e = ToolError::with_hint(
                capsaga_core::error::ErrorKind::PermissionDenied,
                message,
                "Wait for the human's decision, then call the same tool with the same arguments again; do not try another way around it.",
            );
            error_result(
                &e,
                json!({
                    "saga_id": saga_id,
                    "step": seq,
                    "approval_id": id,
                    "approval_status": if denied_by.is_some() { "denied" } else { "pending" },
                    "approval_summary": approval.summary,
                }),
            )
        }
        Outcome::Previewed { result: r, .. } => match r {
            Ok(o) => result(
                truncate_result(&o.data.to_string()),
                false,
                Some(json!({"dry_run": true, "summary": o.summary, "effects": o.effects})),
            ),
            Err(e) => error_result(e, json!({"dry_run": true})),
        },
    }
}

/// A tool's own error: its message may quote what an attacker chose, so it
/// goes inside markers, as for the model.
fn failed(source: &str, saga_id: &str, seq: u64, e: &ToolError, extra: Option<Value>) -> Value {
    let (text, _) = capsaga_untrusted::error_text(
        source,
        &now_rfc3339(),
        &e.kind.to_string(),
        &truncate_result(&e.message),
        &e.llm_hint,
    );
    let mut detail = json!({
        "kind": e.kind.to_string(),
        "message": e.message,
        "llm_hint": e.llm_hint,
        "saga_id": saga_id,
        "step": seq,
    });
    if let (Value::Object(d), Some(Value::Object(x))) = (&mut detail, extra) {
        d.extend(x);
    }
    result(text, true, Some(json!({ "error": detail })))
}

/// The tool result of a call the client declined when asked to confirm
/// it (a stateless retry, a task): approval `approval_id` denied, saga
/// `saga_id` rolled back to `final_state`.
pub fn declined_result(approval_id: &str, saga_id: &str, final_state: State) -> Value {
    result(
        format!(
            "you declined the call: approval {approval_id} denied, saga {saga_id} rolled back (state {final_state})"
        ),
        true,
        Some(json!({"saga_id": saga_id, "approval_status": "denied"})),
    )
}

/// The tool result of `capsaga_commit` or `capsaga_rollback` of saga `id`
/// (a session's or a handle's), as JSON. A commit of a saga parked for an
/// approval leaves it parked (the result says so).
pub fn ended_result(id: &str, ended: Ended) -> Value {
    let undone = |r: &RollbackReport| serde_json::to_value(&r.undone).unwrap_or(Value::Null);
    match ended {
        // Not committed: a step's outcome was never written; the saga was
        // rolled back instead.
        Ended::NotCommitted { error, report } => result(
            error,
            true,
            Some(
                json!({"saga_id": id, "saga_state": report.final_state.to_string(),
                "committed": false, "undone": undone(&report)}),
            ),
        ),
        Ended::Parked(state) => result(
            format!(
                "saga {id} waits for an approval: approve or deny it, call the tool again, or roll back with {ROLLBACK}"
            ),
            true,
            Some(json!({"saga_id": id, "saga_state": state.to_string()})),
        ),
        // Only a Done saga is committed: one held in another state (ended
        // in failure) is said so, never acknowledged.
        Ended::Committed(state) => result(
            format!("saga {id} committed ({state})"),
            state != capsaga_core::fsm::State::Done,
            Some(json!({"saga_id": id, "saga_state": state.to_string()})),
        ),
        Ended::RolledBack(report) => result(
            format!(
                "saga {id} rolled back: {} step(s) compensated, state {}",
                report.undone.len(),
                report.final_state
            ),
            !report.all_compensated(),
            Some(
                json!({"saga_id": id, "saga_state": report.final_state.to_string(),
                "undone": undone(&report)}),
            ),
        ),
        Ended::Elsewhere { state, as_asked } => {
            ended_elsewhere(id, state, "nothing was done now", !as_asked)
        }
    }
}

/// The answer when a session's saga `id` had ended elsewhere in `state`
/// (another host recovered it, an operator rolled it back): `what` says
/// what became of this request; an error unless `is_error` is false (it
/// ended as the client asked).
pub fn ended_elsewhere(
    id: &str,
    state: capsaga_core::fsm::State,
    what: &str,
    is_error: bool,
) -> Value {
    result(
        format!(
            "this session's saga {id} ended elsewhere ({state}: recovered by another host, or ended by an operator); {what}"
        ),
        is_error,
        Some(json!({"saga_id": id, "saga_state": state.to_string(),
            "committed": state == capsaga_core::fsm::State::Done})),
    )
}
