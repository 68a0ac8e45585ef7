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
//!    |  \--deny--> denied         |
//!    +-----------------------------+--> stale   (the world changed since)
//!    +-----------------------------+--> expired (past its time to live)
//! ```
//!
//! Only a human (the TTY prompt or `capsaga approve|deny`) decides; only the
//! saga engine claims, in the same database transaction that writes the
//! step's BEGIN row, so an approval is consumed exactly when its step starts
//! and never twice. Every state but `pending` is final for decisions, and
//! `claimed`, `stale` and `expired` are final for everything.
//!
//! Three more rules make an approval mean what the human read:
//! - it belongs to the saga that asked and to its principal: while that saga
//!   is not ended, only it may claim the approval; once it ended (an agent
//!   turn that stopped for the human, a saga rolled back), another saga may
//!   claim it only if it runs for the same principal (the name recorded with
//!   both sagas, exactly; none recorded: nobody else) ([`may_claim`]). A
//!   byte-identical call of another principal (another client token, an
//!   operator, the command line) asks for its own approval;
//! - it describes what will run: at claim time the tool's dry-run runs again
//!   and its effect ([`Effect`]: summary, effects, SHA-256 of the data,
//!   which holds the pre-image) is compared with the approved one; a change
//!   makes the approval `stale` and the step asks again, showing the
//!   difference;
//! - it expires: a pending or approved approval past its time to live
//!   ([`ApprovalsSection::ttl`], default [`DEFAULT_TTL_S`]) can be neither
//!   approved nor claimed; the step asks again.

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
    /// Replaced by a new approval because the call's dry-run no longer
    /// shows what was approved (final).
    Stale,
    /// Past its time to live before it was claimed (final).
    Expired,
}

impl ApprovalStatus {
    /// The stored name.
    pub fn as_str(self) -> &'static str {
        match self {
            ApprovalStatus::Pending => "pending",
            ApprovalStatus::Approved => "approved",
            ApprovalStatus::Denied => "denied",
            ApprovalStatus::Claimed => "claimed",
            ApprovalStatus::Stale => "stale",
            ApprovalStatus::Expired => "expired",
        }
    }

    /// Parse a stored name.
    pub fn parse(s: &str) -> Option<ApprovalStatus> {
        Some(match s {
            "pending" => ApprovalStatus::Pending,
            "approved" => ApprovalStatus::Approved,
            "denied" => ApprovalStatus::Denied,
            "claimed" => ApprovalStatus::Claimed,
            "stale" => ApprovalStatus::Stale,
            "expired" => ApprovalStatus::Expired,
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
    /// Past its time to live.
    #[error("the approval expired at {0}: the step will ask again when its saga is resumed")]
    Expired(String),
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

/// A saga on either side of a claim: the one that requested an approval,
/// or the one whose step would claim it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Party<'a> {
    /// The saga id.
    pub saga: &'a str,
    /// The principal recorded with the saga (`None` for a saga recorded
    /// before principals existed).
    pub principal: Option<&'a str>,
    /// Whether the saga has ended (a terminal state).
    pub ended: bool,
}

/// Whether a step of saga `claimant` may claim an approval requested by
/// saga `requester`: the requesting saga itself always; another saga only
/// once the requesting one has ended (an operator approved what an ended
/// agent turn asked for) **and** when both run for the same principal
/// (equal names, none missing). While the requesting saga is parked and can
/// still be resumed, its approval is its own; an approval never passes to
/// another principal, whatever the call. The store checks the same rule
/// again in the transaction that claims.
pub fn may_claim(requester: Party<'_>, claimant: Party<'_>) -> bool {
    requester.saga == claimant.saga
        || (requester.ended
            && requester.principal.is_some()
            && requester.principal == claimant.principal)
}

/// What a dry-run says a call will do, as compared at claim time with what
/// the human approved: its one-line summary, its effects, and the SHA-256
/// of its data (for a file write: created or replaced, and the pre-image's
/// hash).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Effect {
    /// The dry-run's summary.
    pub summary: String,
    /// The dry-run's effects.
    pub effects: Vec<String>,
    /// SHA-256 of the canonical JSON of the dry-run's data, lowercase hex.
    pub data_sha256: String,
}

impl Effect {
    /// The effect of a dry-run output (JSON tool output: `summary`,
    /// `effects`, `data`; missing fields count as empty).
    pub fn of(output: &Value) -> Effect {
        let effects = output
            .get("effects")
            .and_then(Value::as_array)
            .map(|a| {
                a.iter()
                    .map(|e| e.as_str().map_or_else(|| e.to_string(), str::to_string))
                    .collect()
            })
            .unwrap_or_default();
        Effect {
            summary: output
                .get("summary")
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_string(),
            effects,
            data_sha256: args_hash(output.get("data").unwrap_or(&Value::Null)),
        }
    }

    /// [`Effect::of`] with the identifiers of the call context that asked
    /// (`context`: its idempotency key and saga id) replaced by `<call>` in
    /// every string of the output. A dry-run that echoes them (which key it
    /// would use) describes the same effect for every saga: an approval an
    /// ended saga asked for, claimed by a later identical call, is compared
    /// on what the call does, not on who asks.
    pub fn of_call(output: &Value, context: &[&str]) -> Effect {
        Effect::of(&neutralize(output, context))
    }

    /// `None` when `now` is what was approved (`self`), else one line
    /// naming the difference for the human.
    pub fn difference(&self, now: &Effect) -> Option<String> {
        if self == now {
            return None;
        }
        if self.summary != now.summary {
            return Some(format!(
                "approved: {:?}; now: {:?}",
                self.summary, now.summary
            ));
        }
        if self.effects != now.effects {
            return Some(format!(
                "approved effects: {}; now: {}",
                self.effects.join("; "),
                now.effects.join("; ")
            ));
        }
        Some(format!(
            "the state it acts on changed since the approval (pre-image {} -> {})",
            short(&self.data_sha256),
            short(&now.data_sha256)
        ))
    }
}

/// `v` with every occurrence of each non-empty token of `context` inside
/// its strings replaced by `<call>` (tokens in order: put the longer first).
fn neutralize(v: &Value, context: &[&str]) -> Value {
    match v {
        Value::String(s) => Value::String(
            context
                .iter()
                .filter(|t| !t.is_empty())
                .fold(s.clone(), |acc, t| acc.replace(t, "<call>")),
        ),
        Value::Array(a) => Value::Array(a.iter().map(|x| neutralize(x, context)).collect()),
        Value::Object(o) => Value::Object(
            o.iter()
                .map(|(k, x)| (k.clone(), neutralize(x, context)))
                .collect(),
        ),
        other => other.clone(),
    }
}

/// Default time to live of an approval, seconds (24 hours).
pub const DEFAULT_TTL_S: u64 = 24 * 3600;

/// The `[approvals]` section of the policy.
#[derive(Debug, Clone, PartialEq, Eq, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ApprovalsSection {
    /// How long an approval may wait to be claimed, from its request: a
    /// number of seconds, or a string of a number and a unit (`s`, `m`, `h`,
    /// `d`), e.g. `"30m"`, `"24h"`. Default [`DEFAULT_TTL_S`].
    pub ttl: Option<Ttl>,
    /// Tools whose approvals the MCP client may confirm itself (by
    /// elicitation) instead of an operator; checked by
    /// [`crate::confirm::check_list`] (never `code_run`, an irreversible or
    /// a high-risk tool). Default: none (every approval is an operator's).
    #[serde(default)]
    pub client_confirm: Vec<String>,
}

/// A time to live as written in the policy.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(untagged)]
pub enum Ttl {
    /// Seconds.
    Seconds(u64),
    /// `<number><unit>`, unit one of `s`, `m`, `h`, `d`.
    Text(String),
}

impl ApprovalsSection {
    /// The time to live in seconds.
    ///
    /// # Errors
    /// A message when the value is zero, malformed or above a year.
    pub fn ttl_s(&self) -> Result<u64, String> {
        let s = match &self.ttl {
            None => return Ok(DEFAULT_TTL_S),
            Some(Ttl::Seconds(s)) => *s,
            Some(Ttl::Text(t)) => parse_duration_s(t)?,
        };
        if s == 0 || s > 366 * 24 * 3600 {
            return Err(format!(
                "[approvals] ttl must be between 1 second and 366 days, got {s} s"
            ));
        }
        Ok(s)
    }
}

fn parse_duration_s(t: &str) -> Result<u64, String> {
    let bad = || {
        format!("[approvals] ttl `{t}`: expected a number and a unit (s, m, h, d), e.g. \"24h\"")
    };
    let t = t.trim();
    let split = t.find(|c: char| !c.is_ascii_digit()).ok_or_else(bad)?;
    let (n, unit) = t.split_at(split);
    let n: u64 = n.parse().map_err(|_| bad())?;
    let mult = match unit.trim() {
        "s" => 1,
        "m" => 60,
        "h" => 3600,
        "d" => 86_400,
        _ => return Err(bad()),
    };
    n.checked_mul(mult).ok_or_else(bad)
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
        for s in [Pending, Denied, Claimed, Stale, Expired] {
            assert_eq!(s.claim(), Err(ApprovalError::NotClaimable(s)));
        }
        for s in [Stale, Expired] {
            assert_eq!(s.decide(true), Err(ApprovalError::AlreadyDecided(s)));
        }
        for s in [Pending, Approved, Denied, Claimed, Stale, Expired] {
            assert_eq!(ApprovalStatus::parse(s.as_str()), Some(s));
        }
        assert_eq!(ApprovalStatus::parse("Approved"), None);
    }

    #[test]
    fn only_the_requesting_saga_claims_until_it_ends_then_only_its_principal() {
        let p = |saga, principal, ended| Party {
            saga,
            principal,
            ended,
        };
        let bob = Some("token:bob");
        // The requesting saga itself, ended or not.
        assert!(may_claim(p("s1", bob, false), p("s1", bob, false)));
        assert!(may_claim(p("s1", bob, true), p("s1", bob, true)));
        // Another saga of the same principal: only once it ended.
        assert!(!may_claim(p("s1", bob, false), p("s2", bob, false)));
        assert!(may_claim(p("s1", bob, true), p("s2", bob, false)));
        // Another principal never, whatever its role or kind.
        for other in [
            Some("token:mallory"),
            Some("token:Bob"),
            Some("token:bob "),
            Some("cli:bob"),
            Some("env:CAPSAGA_TOKEN"),
            Some("loopback"),
            Some(""),
            None,
        ] {
            assert!(
                !may_claim(p("s1", bob, true), p("s2", other, false)),
                "{other:?}"
            );
        }
        // A requester with no principal recorded: nobody else.
        assert!(!may_claim(p("s1", None, true), p("s2", None, false)));
        assert!(!may_claim(p("s1", None, true), p("s2", bob, false)));
    }

    #[test]
    fn effect_differences_are_named() {
        let created = json!({"summary": "Would create f", "effects": ["would write f"], "data": {"created": true}});
        let replaced = json!({"summary": "Would replace f", "effects": ["would write f"], "data": {"created": false}});
        let other_pre = json!({"summary": "Would replace f", "effects": ["would write f"], "data": {"created": false, "prev": "x"}});
        let e = Effect::of(&created);
        assert_eq!(e.difference(&Effect::of(&created)), None);
        assert!(
            e.difference(&Effect::of(&replaced))
                .unwrap()
                .contains("Would replace")
        );
        let d = Effect::of(&replaced)
            .difference(&Effect::of(&other_pre))
            .unwrap();
        assert!(d.contains("pre-image"), "{d}");
        assert_eq!(Effect::of(&Value::Null).summary, "");
    }

    #[test]
    fn the_asking_call_context_is_not_part_of_the_effect() {
        let out = |saga: &str| {
            let key = format!("{saga}:1:ledger:abc");
            json!({"summary": format!("Would append x ({key})"), "effects": [format!("key {key}")], "data": {"key": key, "saga": saga, "n": [saga]}})
        };
        let (a, b) = (out("saga-a"), out("saga-b"));
        let ea = Effect::of_call(&a, &["saga-a:1:ledger:abc", "saga-a"]);
        let eb = Effect::of_call(&b, &["saga-b:1:ledger:abc", "saga-b"]);
        assert_eq!(ea.difference(&eb), None);
        assert_ne!(Effect::of(&a), Effect::of(&b));
        // Everything else still counts.
        let mut c = out("saga-b");
        c["data"]["n"] = json!(["other"]);
        let ec = Effect::of_call(&c, &["saga-b:1:ledger:abc", "saga-b"]);
        assert!(ea.difference(&ec).is_some());
        assert_eq!(Effect::of_call(&a, &[""]), Effect::of(&a));
    }

    #[test]
    fn ttl_parses_and_is_bounded() {
        let s = |t: Option<Ttl>| {
            ApprovalsSection {
                ttl: t,
                ..ApprovalsSection::default()
            }
            .ttl_s()
        };
        assert_eq!(s(None), Ok(DEFAULT_TTL_S));
        assert_eq!(s(Some(Ttl::Seconds(90))), Ok(90));
        assert_eq!(s(Some(Ttl::Text("30m".into()))), Ok(1800));
        assert_eq!(s(Some(Ttl::Text("2d".into()))), Ok(172_800));
        for bad in ["", "h", "10", "10w", "-1h", "1.5h", "99999999999999999999d"] {
            assert!(s(Some(Ttl::Text(bad.into()))).is_err(), "{bad}");
        }
        assert!(s(Some(Ttl::Seconds(0))).is_err());
        assert!(s(Some(Ttl::Text("400d".into()))).is_err());
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
