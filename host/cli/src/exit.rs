//! Exit codes of the `capsaga` binary. Scripts can rely on them.

/// The command did what was asked (a saga ended Done, a turn ended in success).
pub const OK: u8 = 0;
/// An unexpected internal error.
pub const INTERNAL: u8 = 1;
/// Bad command-line usage (clap's own code).
pub const USAGE: u8 = 2;
/// Bad configuration: unreadable or invalid `capsaga.toml`, a plan or script
/// that does not parse, a plan step that fails validation.
pub const CONFIG: u8 = 3;
/// A single tool call (`capsaga call`) returned a tool error or was refused.
pub const TOOL_ERROR: u8 = 4;
/// A saga failed and was fully rolled back (FailedRolledBack).
pub const ROLLED_BACK: u8 = 5;
/// A saga failed and a compensation failed too (FailedRollbackPartial): the
/// operator must act.
pub const ROLLBACK_PARTIAL: u8 = 6;
/// An agent turn ended without success (tool_hallucination, policy_denied,
/// user_aborted, budget_hit, timeout_steps, provider_error) and had nothing
/// to roll back, or `audit verify` found a break.
pub const NOT_SUCCESS: u8 = 7;
/// The state database is corrupt, foreign, of a newer schema or otherwise
/// unusable (never only busy: that is [`BUSY`]).
pub const DATABASE: u8 = 8;
/// No saga, trace or approval with the given id (or prefix), or no tool of
/// the given name (`capsaga call`).
pub const NOT_FOUND: u8 = 9;
/// A saga is parked: a step waits for a human's approval (`capsaga
/// approvals`, `approve`, `deny`, then `resume`).
pub const AWAITING_APPROVAL: u8 = 10;
/// Another running capsaga process drives the saga, or other processes
/// kept the state database busy longer than a write waits its turn (the
/// database is fine: run the command again).
pub const BUSY: u8 = 11;

/// The table printed by `capsaga --help`.
pub const TABLE: &str = "Exit codes: 0 ok | 1 internal error | 2 usage | 3 configuration | 4 tool error | 5 saga rolled back | 6 rollback partial (operator must act) | 7 turn not successful / audit failed | 8 database damaged or foreign | 9 not found (saga, approval, trace, tool) | 10 awaiting approval | 11 busy (another process drives the saga, or the state database stayed busy)";
