//! What one turn of the agent loop is given ([`TurnOptions`]) and why a
//! turn could not run at all ([`AgentError`]): the loop's inputs and its
//! error, shared by the loop (`runner`) and the memory it consults
//! (`remember`), so neither imports the other for them.

use super::budget::BudgetLoadError;
use capsaga_core::policy::Autonomy;
use capsaga_core::policy::tool_choice::ToolChoice;
use capsaga_core::principal::Principal;
use capsaga_door::dispatch::{Approver, DispatchError, NoApprover, Scope};
use capsaga_store::StoreError;
use std::sync::Arc;

/// Options of one turn.
#[derive(Clone)]
pub struct TurnOptions {
    /// Most model calls in the turn (then `timeout_steps`).
    pub max_steps: usize,
    /// Session id (stable across a conversation): with memory on, the
    /// session's earlier turns are in the prompt (`capsaga agent --session`).
    pub session_id: String,
    /// Channel label, e.g. `cli`.
    pub channel: String,
    /// The autonomy level the request asks for; the operator's level is the
    /// ceiling (`None`: the operator's).
    pub autonomy: Option<Autonomy>,
    /// The role or call kind, selecting a provider order.
    pub role: Option<String>,
    /// How the provider was chosen (`scripted (...)`, `live (...)`), for the
    /// trace.
    pub provider_mode: String,
    /// Who is asked when a call needs a human (see [`super::approval`]); the
    /// default asks nobody.
    pub approver: Arc<dyn Approver>,
    /// Who started the turn: its saga is recorded under this principal
    /// (default: the local operator at the command line, `cli:<user>`),
    /// and its name is the turn's sender, the key of its session and of
    /// episodic memory (seed 004 §4: episodes are retrieved by sender, not
    /// session): [`TurnOptions::sender`]. No surface names a sender apart
    /// from the principal it authenticated.
    pub principal: Principal,
    /// Whether the turn's first model call must call a tool (`None`: the
    /// policy's `[agent] tool_choice`, else `auto`). A forced choice holds
    /// until the model has made a call the door admitted (an invalid call
    /// leaves it forced), then the model decides
    /// ([`capsaga_core::policy::tool_choice`]).
    pub tool_choice: Option<ToolChoice>,
    /// Most tool calls the turn makes (`None`: the policy's `[agent]
    /// max_tool_calls`, else no limit but `max_steps`); a call the door
    /// refuses as invalid does not count, so the model may still correct
    /// it. Once that many calls were made, every later model call goes with
    /// `tool_choice` `none` (the model is asked for its answer) and a call
    /// it makes anyway is refused without running, with a message saying
    /// why; with 0, from the first model call on.
    pub max_tool_calls: Option<u32>,
    /// The scope that opens the turn's saga (`Scope::AgentTurn` by default,
    /// `Scope::RestTurn` for `POST /v1/turns`): recorded with the saga,
    /// which only the turn drives (`dispatch::scope`).
    pub scope: Scope,
}

impl TurnOptions {
    /// The turn's sender: the principal's name (`token:alice`,
    /// `cli:<user>`, ...), so a caller reads and writes only its own
    /// sessions and episodes.
    pub fn sender(&self) -> &str {
        &self.principal.name
    }
}

impl std::fmt::Debug for TurnOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TurnOptions")
            .field("max_steps", &self.max_steps)
            .field("session_id", &self.session_id)
            .field("principal", &self.principal)
            .field("channel", &self.channel)
            .field("autonomy", &self.autonomy)
            .field("role", &self.role)
            .field("provider_mode", &self.provider_mode)
            .field("scope", &self.scope)
            .finish_non_exhaustive()
    }
}

impl Default for TurnOptions {
    fn default() -> Self {
        TurnOptions {
            max_steps: 16,
            session_id: uuid::Uuid::new_v4().to_string(),
            channel: "cli".into(),
            autonomy: None,
            role: None,
            provider_mode: String::new(),
            approver: Arc::new(NoApprover),
            principal: capsaga_door::dispatch::decider("cli"),
            tool_choice: None,
            max_tool_calls: None,
            scope: Scope::AgentTurn,
        }
    }
}

/// Why a turn could not run at all.
#[derive(Debug, thiserror::Error)]
pub enum AgentError {
    /// The dispatch door failed.
    #[error(transparent)]
    Dispatch(#[from] DispatchError),
    /// The trace could not be stored.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// The price table or the budget counters are unusable.
    #[error(transparent)]
    Budget(#[from] BudgetLoadError),
    /// Memory refused the session (a required core file missing) or failed.
    #[error(transparent)]
    Memory(capsaga_memory::MemoryError),
    /// `tool_choice` names a tool the turn's catalog does not offer (at the
    /// turn's autonomy level); nothing was sent and the turn's saga ended.
    #[error("tool_choice names {tool:?}, which this turn does not offer (offered: {offered})")]
    ToolChoiceNotOffered {
        /// The tool named.
        tool: String,
        /// The catalog's names, comma separated.
        offered: String,
    },
}
