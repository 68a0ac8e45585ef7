//! The command line: `capsaga`'s arguments and subcommands (clap).

use super::{VERSION, access, check, exit, memory, neurons, new_tool, serve, test_tool};
use clap::{Parser, Subcommand};
use std::path::PathBuf;

/// capsaga: a host that lets AI agents use tools safely. Tools are WebAssembly
/// components confined to the capabilities the operator grants; every call is
/// a saga step logged ahead in SQLite and undone in reverse order when a later
/// step fails.
#[derive(Debug, Parser)]
#[command(name = "capsaga", version = VERSION, after_help = exit::TABLE)]
pub struct Cli {
    /// The operator's policy file.
    #[arg(
        long,
        global = true,
        env = "CAPSAGA_CONFIG",
        default_value = "capsaga.toml"
    )]
    pub config: PathBuf,
    /// Print one JSON document instead of the human-readable report.
    #[arg(long, global = true)]
    pub json: bool,
    /// More log output on stderr (-v info, -vv debug).
    #[arg(short, long, global = true, action = clap::ArgAction::Count)]
    pub verbose: u8,
    /// What to do.
    #[command(subcommand)]
    pub command: Command,
}

/// The subcommands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Tools: list what is loaded and callable.
    Tools {
        /// What to do with tools.
        #[command(subcommand)]
        cmd: ToolsCmd,
    },
    /// Call one tool as a one-step saga (or preview it with --dry-run).
    Call {
        /// Tool name.
        tool: String,
        /// Arguments as JSON text (`'{}'` for none): required, so that a
        /// forgotten argument is a usage error, not a call with none.
        args: String,
        /// Run the tool's dry-run in a read-only sandbox; nothing is logged.
        #[arg(long)]
        dry_run: bool,
        /// A quick call without the policy file: load the components of DIR,
        /// list only this tool, with exactly the `--grant`s given (`~` is the
        /// current directory); the log is kept in `./.capsaga`.
        #[arg(long, value_name = "DIR")]
        tools_dir: Option<PathBuf>,
        /// With --tools-dir: a capability granted to the tool (repeatable),
        /// e.g. `fs:write:/tmp/notes/**`.
        #[arg(long = "grant", value_name = "CAPABILITY", requires = "tools_dir")]
        grants: Vec<String>,
    },
    /// Undo a finished (Done) saga, e.g. one `capsaga call`: its committed
    /// steps are compensated in reverse (an operator transition, logged).
    Undo {
        /// Saga id (printed by `capsaga call`).
        #[arg(long)]
        saga: String,
        /// For a saga of a quick call (`call --tools-dir`): the same
        /// directory, instead of the policy file.
        #[arg(long, value_name = "DIR")]
        tools_dir: Option<PathBuf>,
    },
    /// Scaffold a new tool crate (`capsaga new tool NAME`).
    New {
        /// What to create.
        #[command(subcommand)]
        what: new_tool::NewCmd,
    },
    /// Run a built component through the real sandbox without a policy
    /// file: one call, its dry-run, or the compensation round trip.
    TestTool(test_tool::TestToolArgs),
    /// Run a plan (a list of tool calls) as one saga, without a model.
    Run {
        /// The plan file (JSON).
        #[arg(long)]
        plan: PathBuf,
        /// Replay the plan in an existing saga: committed steps return their
        /// logged output instead of running again.
        #[arg(long)]
        saga: Option<String>,
    },
    /// Run one agent turn. The model is the scripted provider with --script
    /// (or when no provider is configured), else the configured providers
    /// with failover.
    Agent {
        /// The script of model turns (JSON): use the scripted provider.
        #[arg(long)]
        script: Option<PathBuf>,
        /// The task.
        task: String,
        /// Most model calls in the turn.
        #[arg(long, default_value_t = 16)]
        max_steps: usize,
        /// The role or call kind (selects `provider_order_by_role`).
        #[arg(long)]
        role: Option<String>,
        /// Providers this request allows (comma-separated, `none` for
        /// none): narrows the operator's allowlist, never widens it.
        #[arg(long, value_name = "LIST")]
        allow_providers: Option<String>,
        /// Providers to try first (comma-separated).
        #[arg(long, value_name = "LIST")]
        prefer_providers: Option<String>,
        /// Autonomy for this turn: read_only, supervised or autonomous
        /// (never above the operator's level).
        #[arg(long)]
        autonomy: Option<String>,
        /// The session this turn continues (with `[memory] enabled`, its
        /// earlier turns are in the prompt); default a new one.
        #[arg(long, value_name = "NAME")]
        session: Option<String>,
        /// Who the turn is for: it runs as the local principal `cli:NAME`
        /// (default `cli:$USER`), whose name keys its session and episodic
        /// memory.
        #[arg(long, value_name = "NAME")]
        sender: Option<String>,
        /// Whether the first model call must call a tool: auto, required,
        /// none or tool:NAME (default: the policy's `[agent] tool_choice`,
        /// else auto). A forced choice holds until the model made a valid
        /// tool call.
        #[arg(long, value_name = "CHOICE")]
        tool_choice: Option<capsaga_core::policy::tool_choice::ToolChoice>,
        /// Most tool calls the turn runs (default: the policy's `[agent]
        /// max_tool_calls`, else no limit); then the model is asked for its
        /// answer.
        #[arg(long, value_name = "N")]
        max_tool_calls: Option<u32>,
    },
    /// An interactive conversation: each line read from standard input is
    /// one agent turn of the same session (`/exit` or end of input ends it).
    Chat {
        /// The script of model turns (JSON): use the scripted provider.
        #[arg(long)]
        script: Option<PathBuf>,
        /// The session to continue (default a new one, printed).
        #[arg(long, value_name = "NAME")]
        session: Option<String>,
        /// Who the turns are for: they run as the local principal
        /// `cli:NAME` (default `cli:$USER`), whose name keys the session
        /// and episodic memory.
        #[arg(long, value_name = "NAME")]
        sender: Option<String>,
        /// Most model calls per turn.
        #[arg(long, default_value_t = 16)]
        max_steps: usize,
    },
    /// The agent's memory: search, episodes, facts, proposals, reflect,
    /// approve, discard, forget (needs `[memory] enabled`).
    Memory {
        /// What to do.
        #[command(subcommand)]
        cmd: memory::MemoryCmd,
    },
    /// Show the spend counters (per UTC day) and the budget caps.
    Budget {
        /// How many days.
        #[arg(long, default_value_t = 7)]
        days: usize,
    },
    /// Resume a plan or call saga with the plan stored when it started (after
    /// `approve`, a parked step runs once; committed steps are replayed).
    Resume {
        /// Saga id, or a unique prefix of at least 6 characters.
        #[arg(long)]
        saga: String,
    },
    /// List approvals waiting for a human (all approvals with --all).
    Approvals {
        /// Also list approved, denied and claimed approvals.
        #[arg(long)]
        all: bool,
    },
    /// Approve a pending approval: the exact call it is bound to (tool,
    /// component hash, argument hash) may then run once.
    Approve {
        /// Approval id, or a unique prefix of at least 6 characters.
        id: String,
        /// A note kept in the write-ahead log.
        #[arg(long)]
        note: Option<String>,
        /// Resume the parked plan or call saga right away.
        #[arg(long)]
        resume: bool,
    },
    /// Deny a pending approval; a plan or call saga parked on it is rolled back.
    Deny {
        /// Approval id, or a unique prefix of at least 6 characters.
        id: String,
        /// A note kept in the write-ahead log.
        #[arg(long)]
        note: Option<String>,
    },
    /// Finish the sagas of processes that died (also done at the start of
    /// every command that acts on sagas).
    Recover,
    /// Show the write-ahead log of a saga (the newest when none is given).
    Log {
        /// Saga id, or a unique prefix of at least 6 characters.
        #[arg(long)]
        saga: Option<String>,
    },
    /// List sagas, newest first.
    Sagas {
        /// How many.
        #[arg(long, default_value_t = 20)]
        limit: usize,
        /// Only FailedRollbackPartial sagas, with what failed and why.
        #[arg(long)]
        needs_operator: bool,
    },
    /// Compensate what a saga left: an interrupted saga is rolled back; the
    /// failed compensations of a FailedRollbackPartial saga are retried, and
    /// when all succeed the saga becomes FailedRolledBack (an operator-only
    /// transition, logged).
    Rollback {
        /// Saga id, or a unique prefix of at least 6 characters.
        #[arg(long)]
        saga: String,
    },
    /// Show an execution trace by id (or `last`).
    Trace {
        /// Trace id, a unique prefix of at least 4 characters, or `last`.
        id: String,
    },
    /// Audit the write-ahead log.
    Audit {
        /// What to audit.
        #[command(subcommand)]
        cmd: AuditCmd,
    },
    /// An MCP server over stdin/stdout (for Claude Desktop, IDE agents, the
    /// MCP Inspector): every tool call is a step of the session's saga,
    /// through the same door as every other command.
    Mcp(serve::McpArgs),
    /// Serve over HTTP: MCP (Streamable HTTP) at `/mcp` and the REST API
    /// (`/healthz`, `/v1/turns`, `/v1/sagas`, `/v1/traces`, `/v1/approvals`,
    /// `/v1/pause`, `/v1/resume`, `/v1/keys`, `/metrics`). With tokens (`capsaga tokens
    /// create`, or CAPSAGA_TOKEN) every route but `GET /healthz` needs
    /// `Authorization: Bearer`, and the approvals, pause and keys routes an
    /// operator token; without any, only loopback addresses are served.
    Serve(serve::ServeArgs),
    /// Show the guardrail state machine.
    Fsm {
        /// Print the transition table and a Mermaid diagram.
        #[arg(long)]
        show: bool,
    },
    /// Probe one guard with one input (path, url, capability, args,
    /// untrusted) and print its decision and reason, or replay a corpus file.
    Check(check::CheckArgs),
    /// Tools the agent wrote for itself: list, show, diff, approve, reject,
    /// retire.
    Neurons {
        /// What to do.
        #[command(subcommand)]
        cmd: neurons::NeuronsCmd,
    },
    /// Named tokens of `capsaga serve` with their role (client or
    /// operator): create (prints the secret once), list, revoke.
    Tokens {
        /// What to do.
        #[command(subcommand)]
        cmd: access::TokensCmd,
    },
    /// Provider keys sealed under CAPSAGA_KEK (AES-256-GCM): add, list
    /// (last four characters only), remove.
    Keys {
        /// What to do.
        #[command(subcommand)]
        cmd: access::KeysCmd,
    },
    /// The kill switch: stop new turns and tool calls (or, with
    /// --read-only, those with side effects) in every process on this
    /// state, and abort the running ones (rolled back or parked).
    Pause(access::PauseArgs),
    /// Turn the kill switch off: everything the policy allows runs again.
    Unpause {
        /// Why (kept in the log).
        #[arg(long)]
        note: Option<String>,
    },
}

/// `capsaga tools ...`
#[derive(Debug, Subcommand)]
pub enum ToolsCmd {
    /// List loaded tools with their grants, and load problems.
    List,
}

/// `capsaga audit ...`
#[derive(Debug, Subcommand)]
pub enum AuditCmd {
    /// Verify the write-ahead log: its hash chain, its anchored head, and a
    /// replay of it against the saga, step and approval tables.
    Verify {
        /// A head witnessed earlier (`<seq>:<hash>`, as printed by `audit
        /// verify`): that row must still be in the log with that hash.
        #[arg(long)]
        expect_head: Option<String>,
    },
    /// Export one saga's audit rows (its write-ahead log records) as an
    /// OTLP JSON `resourceSpans` document a collector can ingest: one span
    /// per step with its outcome, under one span for the saga. Names,
    /// times, kinds and chain hashes only; no arguments or outputs.
    Export {
        /// The saga (id or a unique prefix).
        saga: String,
        /// Write the OTLP JSON document to this file.
        #[arg(long, value_name = "FILE")]
        otel: std::path::PathBuf,
    },
}
