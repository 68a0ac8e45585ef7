//! Human approvals of tool calls (seed 003: "an approved action is claimed at
//! most once, so a restart cannot run it twice"; DESIGN §7: irreversible or
//! high-risk calls always need a human).
//!
//! An approval is bound to exactly one call: the tool's name, the SHA-256 of
//! its component ([`Binding::tool_hash`]) and the SHA-256 of its canonical
//! arguments ([`Binding::args_hash`]). Changing the component or any argument
//! needs a new approval. Its life:
//!
//! ```text
//! pending --approve--> approved --claim--> claimed
//!    \--deny--> denied
//! ```
//!
//! Only a human (the TTY prompt or `capsaga approve|deny`) decides; only the
//! saga engine claims, in the same database transaction that writes the
//! step's BEGIN row, so an approval is consumed exactly when its step starts
//! and never twice. Every state but `pending` is final for decisions, and
//! `claimed` is final for everything.

use crate::idempotency::args_hash;
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// Where an approval is in its life.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ApprovalStatus {
    /// Waiting for a human.
    Pending,
    /// A human approved; not used yet.
    Approved,
    /// A human refused.
    Denied,
    /// Used by a step (final).
    Claimed,
}

impl ApprovalStatus {
    /// The stored name.
    pub fn as_str(self) -> &'static str {
        match self {
            ApprovalStatus::Pending => "pending",
            ApprovalStatus::Approved => "approved",
            ApprovalStatus::Denied => "denied",
            ApprovalStatus::Claimed => "claimed",
        }
    }

    /// Parse a stored name.
    pub fn parse(s: &str) -> Option<ApprovalStatus> {
        Some(match s {
            "pending" => ApprovalStatus::Pending,
            "approved" => ApprovalStatus::Approved,
            "denied" => ApprovalStatus::Denied,
            "claimed" => ApprovalStatus::Claimed,
            _ => return None,
        })
    }

    /// The status after a human's decision.
    ///
    /// # Errors
    /// [`ApprovalError::AlreadyDecided`] unless the approval is pending.
    pub fn decide(self, approve: bool) -> Result<ApprovalStatus, ApprovalError> {
        match self {
            ApprovalStatus::Pending if approve => Ok(ApprovalStatus::Approved),
            ApprovalStatus::Pending => Ok(ApprovalStatus::Denied),
            other => Err(ApprovalError::AlreadyDecided(other)),
        }
    }

    /// The status after a step claims it.
    ///
    /// # Errors
    /// [`ApprovalError::NotClaimable`] unless the approval is approved.
    pub fn claim(self) -> Result<ApprovalStatus, ApprovalError> {
        match self {
            ApprovalStatus::Approved => Ok(ApprovalStatus::Claimed),
            other => Err(ApprovalError::NotClaimable(other)),
        }
    }
}

impl std::fmt::Display for ApprovalStatus {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Why an approval operation was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ApprovalError {
    /// A decision on an approval that is not pending.
    #[error("the approval is already {0}: a decision is made once")]
    AlreadyDecided(ApprovalStatus),
    /// A claim of an approval that is not approved.
    #[error("the approval is {0}, not approved: it cannot be claimed")]
    NotClaimable(ApprovalStatus),
    /// The call differs from the one approved.
    #[error("the approval is for another call: {0}")]
    BindingMismatch(String),
}

/// The exact call an approval covers.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Binding {
    /// Tool name.
    pub tool_id: String,
    /// SHA-256 of the component bytes, lowercase hex.
    pub tool_hash: String,
    /// SHA-256 of the canonical arguments, lowercase hex
    /// ([`crate::idempotency::args_hash`]).
    pub args_hash: String,
}

impl Binding {
    /// The binding of a call of `tool_id` (component `tool_hash`) with `args`.
    pub fn new(tool_id: &str, tool_hash: &str, args: &Value) -> Binding {
        Binding {
            tool_id: tool_id.to_string(),
            tool_hash: tool_hash.to_string(),
            args_hash: args_hash(args),
        }
    }

    /// Check that `call` is the call this approval covers.
    ///
    /// # Errors
    /// [`ApprovalError::BindingMismatch`] naming what differs.
    pub fn check(&self, call: &Binding) -> Result<(), ApprovalError> {
        if self.tool_id != call.tool_id {
            return Err(ApprovalError::BindingMismatch(format!(
                "approved tool `{}`, called `{}`",
                self.tool_id, call.tool_id
            )));
        }
        if self.tool_hash != call.tool_hash {
            return Err(ApprovalError::BindingMismatch(format!(
                "the component of `{}` changed since the approval (approved {}, now {})",
                self.tool_id,
                short(&self.tool_hash),
                short(&call.tool_hash)
            )));
        }
        if self.args_hash != call.args_hash {
            return Err(ApprovalError::BindingMismatch(format!(
                "the arguments differ from the approved ones (approved {}, now {})",
                short(&self.args_hash),
                short(&call.args_hash)
            )));
        }
        Ok(())
    }
}

fn short(h: &str) -> String {
    h.chars().take(12).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn life_cycle() {
        use ApprovalStatus::*;
        assert_eq!(Pending.decide(true), Ok(Approved));
        assert_eq!(Pending.decide(false), Ok(Denied));
        assert_eq!(Approved.claim(), Ok(Claimed));
        for s in [Approved, Denied, Claimed] {
            assert_eq!(s.decide(true), Err(ApprovalError::AlreadyDecided(s)));
            assert_eq!(s.decide(false), Err(ApprovalError::AlreadyDecided(s)));
        }
        for s in [Pending, Denied, Claimed] {
            assert_eq!(s.claim(), Err(ApprovalError::NotClaimable(s)));
        }
        for s in [Pending, Approved, Denied, Claimed] {
            assert_eq!(ApprovalStatus::parse(s.as_str()), Some(s));
        }
        assert_eq!(ApprovalStatus::parse("Approved"), None);
    }

    #[test]
    fn binding_is_exact() {
        let args = json!({"to": "a@example.com", "body": "hi"});
        let b = Binding::new("send", "aa", &args);
        // Key order does not matter; values, tool and component do.
        let reordered: Value =
            serde_json::from_str(r#"{"body":"hi","to":"a@example.com"}"#).unwrap_or(Value::Null);
        assert!(b.check(&Binding::new("send", "aa", &reordered)).is_ok());
        assert!(
            b.check(&Binding::new(
                "send",
                "aa",
                &json!({"to": "b@example.com", "body": "hi"})
            ))
            .is_err()
        );
        assert!(b.check(&Binding::new("send", "ab", &args)).is_err());
        assert!(b.check(&Binding::new("post", "aa", &args)).is_err());
    }
}
