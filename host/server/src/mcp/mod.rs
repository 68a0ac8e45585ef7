//! The MCP server handler (rmcp's `ServerHandler`), one per MCP session,
//! over stdio (`capsaga mcp`) or Streamable HTTP (`capsaga serve`, `/mcp`).
//!
//! - `tools/list`: the door's catalog at the server's autonomy level
//!   ([`Dispatcher::catalog`]) as MCP definitions ([`super::tools`]), plus
//!   the two session tools `capsaga_commit` and `capsaga_rollback`.
//! - `tools/call`: a step of the session's saga through the door
//!   ([`Dispatcher::submit`]). The saga starts at the session's first call;
//!   `capsaga_commit` ends it Done, `capsaga_rollback` compensates what it
//!   committed; either way the next call starts a new saga. When the
//!   session ends with a saga still open, the session-end rule applies
//!   ([`SessionEnd`], default: commit).
//! - Every session belongs to the principal that opened it (its token's;
//!   `stdio:<user>` over stdio); its sagas are recorded under it, and its
//!   resources show only its own sagas unless it is an operator.
//! - A call that needs a human: the saga parks and the result names the
//!   pending approval, which an operator decides (`capsaga approve`, `POST
//!   /v1/approvals/{id}/approve`); the client is told so in a log message.
//!   Only for a tool the policy lists in `[approvals] client_confirm`
//!   (never `code_run`, high risk or irreversible) is the client asked
//!   through elicitation, when it declared the capability (and the server
//!   allows it); its answer is recorded under the session's principal as a
//!   client (`token:bob (client)`), never under a name the client chose.
//! - A `progressToken` gets a progress notification when the call starts
//!   and every second while it runs; `notifications/cancelled` drops the
//!   call (the tool's instance with it) and recovers the saga from its log
//!   as after a crash: whatever it had begun is compensated.
//! - Resources: capsaga's sagas and traces ([`super::resources`]), with
//!   templates, id completion and subscriptions (a subscribed session's saga
//!   URI is notified after each of its calls).
//! - With an extension ([`extension`]: the conformance suite's reference
//!   tools, resources and prompts in `capsaga-conformance`), its tools,
//!   resources and prompts beside them.
//! - Every request answered is an OpenTelemetry server span
//!   (`{mcp.method.name} {target}`, `observe.rs`), the child of the
//!   client's span when its `_meta` carries a W3C `traceparent`.

mod confirm;
mod elicit;
pub mod extension;
mod handler;
pub mod listeners;
mod observe;
pub mod refused;
mod server;
pub mod stateless;
pub mod tasks;

use capsaga_core::policy::Autonomy;
use capsaga_core::principal::{Principal, Role};
use capsaga_door::dispatch::Dispatcher;
use capsaga_door::scope::SessionSaga;
use std::sync::Arc;

/// What happens to a session's open saga when the session ends (the
/// door's rule: `capsaga_door::scope::SessionEnd`).
pub use capsaga_door::scope::SessionEnd;

/// What every session of one server shares.
#[derive(Debug)]
pub struct McpShared {
    /// The host served, reloaded while the server runs.
    pub live: Arc<super::live::Live>,
    /// The autonomy level asked for the sessions' sagas (`None`: the
    /// operator's); see [`McpShared::autonomy`].
    pub asked_autonomy: Option<Autonomy>,
    /// Ask the client by elicitation when a call needs a human.
    pub elicit_approvals: bool,
    /// The rule for a saga still open when its session ends.
    pub session_end: SessionEnd,
    /// Tools, resources and prompts served beside capsaga's own (the
    /// conformance fixtures; none in the `capsaga` binary).
    pub extension: Option<Arc<dyn extension::McpExtension>>,
    /// Sessions told when the tool list changes.
    pub listeners: listeners::Listeners,
    /// Seals the `requestState` of multi round-trip results (a key drawn
    /// at start: a state outlives neither the server nor its TTL); `None`
    /// when the operating system gave no random key, and then no state is
    /// issued or accepted ([`McpShared::states`]).
    pub request_states: Option<rmcp::model::RequestStateCodec>,
    /// The tasks of stateless clients ([`tasks`]).
    pub tasks: tasks::Tasks,
}

impl McpShared {
    /// The door of the current host generation.
    pub fn door(&self) -> Dispatcher {
        self.live.door()
    }

    /// The `requestState` codec.
    ///
    /// # Errors
    /// An internal error when the server has none (no random key).
    pub fn states(&self) -> Result<&rmcp::model::RequestStateCodec, rmcp::ErrorData> {
        self.request_states.as_ref().ok_or_else(|| {
            rmcp::ErrorData::internal_error(
                "this server has no requestState key (the OS random source failed at start)",
                None,
            )
        })
    }

    /// The autonomy level the sessions' sagas decide at: the one asked
    /// for, never above the operator's in the current policy.
    pub fn autonomy(&self) -> Autonomy {
        let operator = self.live.host().config.policy.autonomy;
        operator.narrow(self.asked_autonomy.unwrap_or(operator))
    }
}

/// One MCP session: its saga.
#[derive(Clone)]
pub struct McpSession {
    state: Arc<SessionState>,
}

struct SessionState {
    shared: Arc<McpShared>,
    /// The session's saga, held by the session (the door's saga scope,
    /// `capsaga_door::scope::SessionSaga`): no other scope of this process
    /// continues, commits or rolls it back. Its principal is the one that
    /// opened the session (every later request must be its own).
    saga: SessionSaga,
    /// Resource URIs this session subscribed to.
    subscribed: std::sync::Mutex<std::collections::BTreeSet<String>>,
}

impl std::fmt::Debug for McpSession {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("McpSession").finish_non_exhaustive()
    }
}

impl McpSession {
    /// A new session of the server, for the principal whose `initialize`
    /// is being served in this task (`super::sessions::opening_principal`);
    /// without one, a client that owns nothing (`unauthenticated`).
    pub fn new(shared: Arc<McpShared>) -> McpSession {
        let principal = super::sessions::opening_principal()
            .unwrap_or_else(|| Principal::new("unauthenticated", Role::Client));
        McpSession::for_principal(shared, principal)
    }

    /// A new session of the server for `principal` (`capsaga mcp` over
    /// stdio: `stdio:<user>`, a client).
    pub fn for_principal(shared: Arc<McpShared>, principal: Principal) -> McpSession {
        McpSession {
            state: Arc::new(SessionState {
                shared,
                saga: SessionSaga::new(principal),
                subscribed: std::sync::Mutex::new(std::collections::BTreeSet::new()),
            }),
        }
    }

    /// Apply the session-end rule to the open saga, if any (stdio calls it
    /// when the client hangs up; an HTTP session's is applied when it is
    /// dropped).
    pub async fn end(&self) {
        let shared = &self.state.shared;
        self.state
            .saga
            .close(&shared.door(), shared.session_end)
            .await;
    }
}

impl Drop for SessionState {
    fn drop(&mut self) {
        let Some(held) = self.saga.take_on_drop() else {
            return;
        };
        let shared = self.shared.clone();
        if let Ok(rt) = tokio::runtime::Handle::try_current() {
            rt.spawn(async move { held.end_by(&shared.door(), shared.session_end).await });
        }
    }
}
