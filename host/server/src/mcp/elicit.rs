//! The MCP client's side of an approval (elicitation or a log message).

use capsaga_core::principal::Principal;
use capsaga_door::dispatch::Approver;
use capsaga_store::ApprovalRow;
use rmcp::model::{ElicitRequestParams, ElicitationAction};
use rmcp::{Peer, RoleServer};
use serde_json::{Value, json};
use std::time::Duration;

/// The MCP client's side of an approval: asked through elicitation where
/// the door lets a client confirm the tool, told by a log message
/// otherwise (the door decides which: `dispatch::Approver`).
pub(super) struct Elicit {
    pub(super) peer: Peer<RoleServer>,
    /// The session's principal, as a client: an MCP client is the agent's
    /// side whatever its token's role.
    pub(super) who: Principal,
    /// Whether the client may be asked at all (elicitation declared and
    /// allowed by the server).
    pub(super) can_ask: bool,
}

/// How long the user has to answer an approval's elicitation.
const ELICIT_TIMEOUT: Duration = Duration::from_secs(300);

#[async_trait::async_trait]
impl Approver for Elicit {
    fn who(&self) -> Option<Principal> {
        Some(self.who.clone())
    }

    async fn ask(&self, approval: &ApprovalRow) -> Option<bool> {
        if !self.can_ask {
            return None;
        }
        let params: ElicitRequestParams = serde_json::from_value(json!({
            "mode": "form",
            "message": format!(
                "capsaga: confirm this call? {} ({}; approval {}; the operator's policy lets you confirm this tool)",
                approval.summary, approval.reason, approval.approval_id
            ),
            "requestedSchema": {
                "type": "object",
                "properties": {
                    "approve": {
                        "type": "boolean",
                        "title": "Approve",
                        "description": "Run this call once, as shown",
                    }
                },
                "required": ["approve"],
            },
        }))
        .ok()?;
        let asked = self.peer.create_elicitation(params);
        let answer = match tokio::time::timeout(ELICIT_TIMEOUT, asked).await {
            Ok(Ok(a)) => a,
            Ok(Err(e)) => {
                tracing::info!("elicitation failed, the approval stays pending: {e}");
                return None;
            }
            Err(_) => return None,
        };
        match answer.action {
            ElicitationAction::Accept => Some(
                answer
                    .content
                    .as_ref()
                    .and_then(|c| c.get("approve"))
                    .and_then(Value::as_bool)
                    .unwrap_or(false),
            ),
            ElicitationAction::Decline => Some(false),
            _ => None,
        }
    }

    // Logging is the one notification a client shows without a request of
    // its own; rmcp marks it deprecated (SEP-2577) but still sends it.
    #[allow(deprecated)]
    async fn tell(&self, approval: &ApprovalRow) {
        let message = json!({
            "message": format!(
                "capsaga: this call waits for an operator's approval ({}; approval {}). You cannot approve it from this session; call the same tool with the same arguments again once an operator approved it.",
                approval.reason, approval.approval_id
            ),
            "approval_id": approval.approval_id,
        });
        let p = rmcp::model::LoggingMessageNotificationParam::new(
            rmcp::model::LoggingLevel::Notice,
            message,
        );
        if let Err(e) = self
            .peer
            .notify_logging_message(p.with_logger("capsaga"))
            .await
        {
            tracing::debug!("pending-approval notice not delivered: {e}");
        }
    }
}

/// A client's name for a saga's label: its `clientInfo.name`, without
/// control characters, at most 64 characters; `unknown` without one.
pub(super) fn client_label(info: Option<&rmcp::model::Implementation>) -> String {
    info.map(|i| {
        i.name
            .chars()
            .filter(|c| !c.is_control())
            .take(64)
            .collect()
    })
    .unwrap_or_else(|| "unknown".into())
}

pub(super) fn client_name(peer: &Peer<RoleServer>) -> String {
    peer.peer_info()
        .map(|i| {
            i.client_info
                .name
                .chars()
                .filter(|c| !c.is_control())
                .take(64)
                .collect()
        })
        .unwrap_or_else(|| "unknown".into())
}

pub(super) fn supports_elicitation(peer: &Peer<RoleServer>) -> bool {
    peer.peer_info()
        .is_some_and(|i| i.capabilities.elicitation.is_some())
}
