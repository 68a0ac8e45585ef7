//! Principals and roles (DESIGN §8e; issue 24 items 1-2): who makes a
//! request to a server surface, and what that role may do.
//!
//! A **principal** is an authenticated caller: a named token presented to
//! `capsaga serve` (`token:alice`), the single `CAPSAGA_TOKEN` of seed 003
//! (`env:CAPSAGA_TOKEN`), the operator at the command line or a terminal
//! (`cli:<os user>`, `tty:<os user>`), the client program of `capsaga mcp`
//! over stdio (`stdio:<os user>`), or, on a server with no token at all
//! (loopback only), the one local caller (`loopback`). The name is what the
//! host records for every decision and every saga the principal starts;
//! it comes from the authentication, never from a request body.
//!
//! Two **roles** ([`Role`]), ordered:
//!
//! | action ([`Action`]) | `client` | `operator` |
//! |---|---|---|
//! | open MCP sessions, call tools, start turns | yes | yes |
//! | read its own sagas and traces | yes | yes |
//! | read every saga, trace and approval | no | yes |
//! | decide approvals, neurons; reload the policy | no | yes |
//! | pause / resume the host, manage sealed keys and tokens | no | yes |
//! | resume a stored plan, roll back or undo any saga | no | yes |
//!
//! An MCP client is a `client`: the agent's side, not the operator's. It
//! confirms a call only where the policy names the tool for client
//! confirmation (`capsaga_core::approval::client_may_confirm`).
//!
//! Pure: no I/O. The HTTP layer maps a credential to a principal
//! (`capsaga_server::auth`); the store keeps the names.

use serde::{Deserialize, Serialize};

/// What a principal may do (see the table in the module documentation).
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize, Default,
)]
#[serde(rename_all = "snake_case")]
pub enum Role {
    /// The agent's side: sessions, tool calls, turns, its own sagas.
    #[default]
    Client,
    /// Also approvals, neurons, reloads, pause, keys, tokens, every saga.
    Operator,
}

impl Role {
    /// The stored name (`client`, `operator`).
    pub fn as_str(self) -> &'static str {
        match self {
            Role::Client => "client",
            Role::Operator => "operator",
        }
    }

    /// Whether this role may do `action`.
    pub fn may(self, action: Action) -> bool {
        match action {
            Action::OpenSession
            | Action::CallTool
            | Action::StartTurn
            | Action::ReadOwnSagas
            | Action::ConfirmListedTool => true,
            Action::ReadEverySaga
            | Action::DecideApproval
            | Action::DecideNeuron
            | Action::ReloadPolicy
            | Action::Pause
            | Action::ManageKeys
            | Action::ManageTokens
            | Action::OperateSagas => self == Role::Operator,
        }
    }
}

impl std::fmt::Display for Role {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl std::str::FromStr for Role {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "client" => Ok(Role::Client),
            "operator" => Ok(Role::Operator),
            other => Err(format!(
                "unknown role `{}` (client, operator)",
                other.chars().take(40).collect::<String>()
            )),
        }
    }
}

/// Something a principal asks to do.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Action {
    /// Open an MCP session.
    OpenSession,
    /// Call a tool (through the door, which applies the policy).
    CallTool,
    /// Start an agent turn (`POST /v1/turns`).
    StartTurn,
    /// Read the sagas and traces it started.
    ReadOwnSagas,
    /// Confirm a call of a tool the policy lists in
    /// `[approvals] client_confirm` (never `code_run`, high risk or
    /// irreversible: see `approval::client_may_confirm`).
    ConfirmListedTool,
    /// Read every saga, trace and approval.
    ReadEverySaga,
    /// Approve or deny an approval.
    DecideApproval,
    /// Approve, reject or retire a neuron.
    DecideNeuron,
    /// Reload the policy of a running server.
    ReloadPolicy,
    /// Pause, read-only, resume (the kill switch).
    Pause,
    /// Add, list, remove sealed provider keys.
    ManageKeys,
    /// Create, list, revoke tokens.
    ManageTokens,
    /// Resume a saga from its stored plan, roll back or undo any saga
    /// (`capsaga resume|rollback|undo`, the console): whichever scope
    /// opened it (`crate::scope`).
    OperateSagas,
}

/// An authenticated caller: its name (as recorded) and role.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Principal {
    /// `token:<name>`, `env:CAPSAGA_TOKEN`, `cli:<user>`, `tty:<user>`,
    /// `stdio:<user>` or `loopback`: at most [`MAX_NAME_BYTES`] bytes, no
    /// control characters (see [`Principal::new`]).
    pub name: String,
    /// Its role.
    pub role: Role,
}

/// Longest principal name, bytes.
pub const MAX_NAME_BYTES: usize = 128;

/// The principal name of the seed-003 token (`CAPSAGA_TOKEN` alone: one
/// operator token).
pub const ENV_TOKEN: &str = "env:CAPSAGA_TOKEN";

/// The principal of a server without any token (loopback only): the one
/// local caller, an operator as before tokens existed.
pub const LOOPBACK: &str = "loopback";

impl Principal {
    /// A principal named `name` (control characters dropped, cut to
    /// [`MAX_NAME_BYTES`] on a character boundary) with `role`.
    pub fn new(name: &str, role: Role) -> Principal {
        let mut n = String::new();
        for c in name.chars().filter(|c| !c.is_control()) {
            if n.len() + c.len_utf8() > MAX_NAME_BYTES {
                break;
            }
            n.push(c);
        }
        Principal { name: n, role }
    }

    /// The principal of named token `name`: `token:<name>`.
    pub fn token(name: &str, role: Role) -> Principal {
        Principal::new(&format!("token:{name}"), role)
    }

    /// A local principal on `channel` for the operating-system user `user`
    /// (`None` or unusable: `unknown`): `<channel>:<user>`.
    pub fn local(channel: &str, user: Option<&str>, role: Role) -> Principal {
        let user = user
            .filter(|u| !u.is_empty() && u.len() <= 64 && !u.contains(char::is_control))
            .unwrap_or("unknown");
        Principal::new(&format!("{channel}:{user}"), role)
    }

    /// Whether this principal may do `action`.
    pub fn may(&self, action: Action) -> bool {
        self.role.may(action)
    }

    /// Whether it may read a saga (or its trace) started by `owner` (the
    /// principal name recorded with the saga; `None` for sagas recorded
    /// before principals existed, which only operators see).
    pub fn sees(&self, owner: Option<&str>) -> bool {
        self.may(Action::ReadEverySaga) || owner == Some(self.name.as_str())
    }

    /// The saga filter of a listing: `None` (every saga) for an operator,
    /// `Some(name)` (its own) for a client.
    pub fn saga_filter(&self) -> Option<&str> {
        if self.may(Action::ReadEverySaga) {
            None
        } else {
            Some(&self.name)
        }
    }
}

impl std::fmt::Display for Principal {
    /// `token:alice (operator)`: what a decision records as its decider.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} ({})", self.name, self.role)
    }
}

/// Whether `name` may name a token: 1 to 64 bytes of ASCII letters,
/// digits, `_`, `-` and `.`, starting with a letter or digit (it is shown
/// in logs and recorded with decisions, so nothing that can be confused
/// with markup or another principal's kind).
pub fn valid_token_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 64
        && name.as_bytes()[0].is_ascii_alphanumeric()
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-' | b'.'))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn clients_cannot_do_what_operators_do() {
        for a in [
            Action::ReadEverySaga,
            Action::DecideApproval,
            Action::DecideNeuron,
            Action::ReloadPolicy,
            Action::Pause,
            Action::ManageKeys,
            Action::ManageTokens,
            Action::OperateSagas,
        ] {
            assert!(!Role::Client.may(a), "{a:?}");
            assert!(Role::Operator.may(a), "{a:?}");
        }
        for a in [
            Action::OpenSession,
            Action::CallTool,
            Action::StartTurn,
            Action::ReadOwnSagas,
            Action::ConfirmListedTool,
        ] {
            assert!(Role::Client.may(a) && Role::Operator.may(a), "{a:?}");
        }
    }

    #[test]
    fn a_client_sees_only_its_own_sagas() {
        let bob = Principal::token("bob", Role::Client);
        assert!(bob.sees(Some("token:bob")));
        assert!(!bob.sees(Some("token:alice")));
        assert!(!bob.sees(None), "unowned sagas are the operator's");
        assert!(!bob.sees(Some("token:bob ")));
        assert_eq!(bob.saga_filter(), Some("token:bob"));
        let alice = Principal::token("alice", Role::Operator);
        assert!(alice.sees(Some("token:bob")) && alice.sees(None));
        assert_eq!(alice.saga_filter(), None);
    }

    #[test]
    fn names_are_clean_and_bounded() {
        let p = Principal::new("a\u{7}b\nc", Role::Client);
        assert_eq!(p.name, "abc");
        let long = Principal::new(&"é".repeat(200), Role::Client);
        assert!(long.name.len() <= MAX_NAME_BYTES);
        assert_eq!(
            Principal::local("cli", Some("al\nice"), Role::Operator).name,
            "cli:unknown"
        );
        assert_eq!(
            Principal::token("alice", Role::Operator).to_string(),
            "token:alice (operator)"
        );
        for ok in ["alice", "ci-bot.2", "A_1"] {
            assert!(valid_token_name(ok), "{ok}");
        }
        for bad in ["", "-x", ".x", "a b", "a/b", "é", "a:b", &"a".repeat(65)] {
            assert!(!valid_token_name(bad), "{bad}");
        }
        assert_eq!("operator".parse::<Role>(), Ok(Role::Operator));
        assert!("admin".parse::<Role>().is_err());
    }
}
