//! The operator's kill switch (seed 003: "el kill switch, la pausa del
//! agente o el modo de solo lectura abortan una ejecución en curso"; issue
//! 24 item 9): what the host does in each [`Mode`].
//!
//! | mode | new turns | tool calls with side effects | read-only calls | running calls |
//! |---|---|---|---|---|
//! | `running` | yes | yes | yes | go on |
//! | `read_only` | yes | refused | yes | side-effecting ones aborted |
//! | `paused` | refused | refused | refused | every one aborted |
//!
//! Compensation and recovery always run (a rollback is how a saga reaches a
//! defined state), and approvals can still be decided; only new work is
//! refused. The mode lives in the state store, so every process on the
//! state sees it. Pure: the door asks [`refusal`] and [`aborts`].

use crate::error::{ErrorKind, ToolError};
use serde::{Deserialize, Serialize};

/// What the host may do.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Mode {
    /// Everything the policy allows.
    #[default]
    Running,
    /// Only calls without side effects (and turns made of them).
    ReadOnly,
    /// Nothing new: no turn, no tool call.
    Paused,
}

impl Mode {
    /// The stored name (`running`, `read_only`, `paused`).
    pub fn as_str(self) -> &'static str {
        match self {
            Mode::Running => "running",
            Mode::ReadOnly => "read_only",
            Mode::Paused => "paused",
        }
    }

    /// Whether a new agent turn may start.
    pub fn allows_turns(self) -> bool {
        self != Mode::Paused
    }
}

impl std::fmt::Display for Mode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl std::str::FromStr for Mode {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "running" => Ok(Mode::Running),
            "read_only" | "read-only" => Ok(Mode::ReadOnly),
            "paused" => Ok(Mode::Paused),
            other => Err(format!(
                "unknown mode `{}` (running, read_only, paused)",
                other.chars().take(40).collect::<String>()
            )),
        }
    }
}

/// The mode as stored: who set it, when, why.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct Switch {
    /// The mode.
    pub mode: Mode,
    /// The principal who set it (`None`: never set).
    pub by: Option<String>,
    /// When (RFC 3339).
    pub at: Option<String>,
    /// The operator's note.
    pub note: Option<String>,
}

/// Whether a running call of a tool with (or without) side effects is
/// aborted in `mode`.
pub fn aborts(mode: Mode, has_side_effects: bool) -> bool {
    match mode {
        Mode::Running => false,
        Mode::ReadOnly => has_side_effects,
        Mode::Paused => true,
    }
}

/// The error a new call gets in `mode` (`None`: it may run). Kind
/// `permission-denied`, not retriable, with a hint telling the model to
/// stop rather than retry.
pub fn refusal(sw: &Switch, tool: &str, has_side_effects: bool) -> Option<ToolError> {
    if !aborts(sw.mode, has_side_effects) {
        return None;
    }
    let why = sw
        .note
        .as_deref()
        .map(|n| format!(": {}", n.chars().take(200).collect::<String>()))
        .unwrap_or_default();
    let (message, hint) = match sw.mode {
        Mode::Paused => (
            format!(
                "capsaga is paused by the operator{why}; `{tool}` was not run (nothing runs until the operator resumes)"
            ),
            "The operator paused all work. Do not retry: end your turn and say the work is paused.",
        ),
        _ => (
            format!("capsaga is in read-only mode{why}; `{tool}` has side effects and was not run"),
            "Only tools without side effects may run now. Do not retry this call; use read-only tools or end your turn.",
        ),
    };
    Some(ToolError::with_hint(
        ErrorKind::PermissionDenied,
        message,
        hint,
    ))
}

/// The error of a call the switch stopped while it ran (`timeout`-like:
/// the host stopped it; a side-effecting step is then compensated from its
/// pre-image).
pub fn aborted(mode: Mode, tool: &str) -> ToolError {
    ToolError::with_hint(
        ErrorKind::PermissionDenied,
        format!(
            "`{tool}` was stopped while it ran: the operator switched capsaga to {mode}; whatever it had begun is rolled back"
        ),
        "The operator stopped this work. Do not retry: end your turn and say so.",
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_mode_refuses_and_aborts_what_its_row_says() {
        let sw = |mode| Switch {
            mode,
            ..Switch::default()
        };
        assert!(refusal(&sw(Mode::Running), "t", true).is_none());
        assert!(refusal(&sw(Mode::ReadOnly), "t", false).is_none());
        let e = refusal(&sw(Mode::ReadOnly), "fs_write", true).unwrap();
        assert_eq!(e.kind, ErrorKind::PermissionDenied);
        assert!(e.message.contains("read-only") && !e.retriable, "{e:?}");
        let mut paused = sw(Mode::Paused);
        paused.note = Some("incident 42".into());
        let e = refusal(&paused, "time_now", false).unwrap();
        assert!(e.message.contains("paused") && e.message.contains("incident 42"));
        assert!(e.llm_hint.contains("Do not retry"));
        assert!(!Mode::Paused.allows_turns() && Mode::ReadOnly.allows_turns());
        assert!(aborts(Mode::ReadOnly, true) && !aborts(Mode::ReadOnly, false));
        for m in [Mode::Running, Mode::ReadOnly, Mode::Paused] {
            assert_eq!(m.as_str().parse::<Mode>(), Ok(m));
        }
        assert!("stopped".parse::<Mode>().is_err());
    }
}
