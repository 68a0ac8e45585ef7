//! The `capsaga` command line: argument parsing (clap) and dispatch. Each
//! command prints a human-readable report by default and one JSON document
//! with `--json`; exit codes are in [`exit`].

#[macro_use]
mod pipe;
mod access;
mod adhoc;
mod approvals;
mod bench;
mod bench_fs;
mod bench_group;
mod bench_memory;
mod bench_neurons;
mod bench_pg;
mod bench_shell;
mod bench_start;
mod bench_wal;
pub mod check;
pub mod exit;
mod memory;
mod neurons;
pub mod new_tool;
mod ops;
mod render;
mod run;
mod serve;
pub mod test_tool;

use crate::dispatch::{DispatchError, Dispatcher, OperatorError};
use crate::host::{Host, HostError};
use crate::plan::RunError;
use crate::store::{ApprovalOpError, StoreError};
use clap::{Parser, Subcommand};
use std::path::{Path, PathBuf};

/// What `capsaga --version` prints after the name: the crate version and
/// the git commit it was built from (`host/runtime/build.rs`), e.g.
/// `0.1.0 (3f2a9c1d0e4b)`, `0.1.0 (3f2a9c1d0e4b-dirty, dev build)`.
pub const VERSION: &str = concat!(
    env!("CARGO_PKG_VERSION"),
    " (",
    env!("CAPSAGA_BUILD_COMMIT"),
    ")"
);

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
        /// else auto). A forced choice holds until the model called a tool.
        #[arg(long, value_name = "CHOICE")]
        tool_choice: Option<capsaga_core::policy::tool_choice::ToolChoice>,
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
    /// Measure a trivial tool call against bare Wasmtime, a native call and
    /// a process spawn, and cold start with and without the compiled cache.
    Bench(bench::BenchArgs),
    /// Measure neurons: the runner's compile and cached cold start, source
    /// to callable, a neuron call against a Rust tool call, the catalog's
    /// size with 0, 10 and 100 neurons.
    BenchNeurons(bench_neurons::BenchNeuronsArgs),
    /// An MCP server over stdin/stdout (for Claude Desktop, IDE agents, the
    /// MCP Inspector): every tool call is a step of the session's saga,
    /// through the same door as every other command.
    Mcp(serve::McpArgs),
    /// Serve over HTTP: MCP (Streamable HTTP) at `/mcp` and the REST API
    /// (`/healthz`, `/v1/turns`, `/v1/sagas`, `/v1/traces`, `/v1/approvals`,
    /// `/v1/pause`, `/v1/resume`, `/v1/keys`). With tokens (`capsaga tokens
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
}

/// A command's failure before or outside a saga, with its exit code.
#[derive(Debug)]
pub(crate) struct Failure {
    pub code: u8,
    pub message: String,
}

impl From<HostError> for Failure {
    fn from(e: HostError) -> Self {
        let code = match &e {
            HostError::Config(_)
            | HostError::Load(_)
            | HostError::Factor(_)
            | HostError::Grants(_)
            | HostError::StateMoved { .. } => exit::CONFIG,
            HostError::Store(s) => store_code(s),
            HostError::Sandbox(_) => exit::INTERNAL,
            HostError::Memory(
                capsaga_memory::MemoryError::Database { .. }
                | capsaga_memory::MemoryError::Dimension { .. }
                | capsaga_memory::MemoryError::Sql(_),
            ) => exit::DATABASE,
            HostError::Memory(_) => exit::CONFIG,
        };
        Failure {
            code,
            message: e.to_string(),
        }
    }
}

/// The exit code of a store error: [`exit::BUSY`] when other processes
/// only kept it busy, [`exit::DATABASE`] for a damaged, foreign or unusable
/// database.
fn store_code(e: &StoreError) -> u8 {
    match e {
        StoreError::Busy(_) | StoreError::Unreachable { .. } | StoreError::Fenced { .. } => {
            exit::BUSY
        }
        StoreError::BadUrl { .. } => exit::CONFIG,
        _ => exit::DATABASE,
    }
}

impl From<StoreError> for Failure {
    fn from(e: StoreError) -> Self {
        Failure {
            code: store_code(&e),
            message: e.to_string(),
        }
    }
}

impl From<DispatchError> for Failure {
    fn from(e: DispatchError) -> Self {
        let code = match &e {
            DispatchError::NotFound(_) => exit::NOT_FOUND,
            DispatchError::Store(s) => store_code(s),
            DispatchError::Transition(_) => exit::INTERNAL,
            DispatchError::Busy { .. } => exit::BUSY,
        };
        Failure {
            code,
            message: e.to_string(),
        }
    }
}

impl From<RunError> for Failure {
    fn from(e: RunError) -> Self {
        match e {
            RunError::Dispatch(d) => d.into(),
            RunError::NoPlan(_) | RunError::PlanMismatch(_) => Failure {
                code: exit::CONFIG,
                message: e.to_string(),
            },
        }
    }
}

impl From<ApprovalOpError> for Failure {
    fn from(e: ApprovalOpError) -> Self {
        let code = match &e {
            ApprovalOpError::Store(s) => store_code(s),
            ApprovalOpError::NotFound(_) | ApprovalOpError::Ambiguous(_) => exit::NOT_FOUND,
            ApprovalOpError::Refused(_) => exit::NOT_SUCCESS,
        };
        Failure {
            code,
            message: e.to_string(),
        }
    }
}

impl From<OperatorError> for Failure {
    fn from(e: OperatorError) -> Self {
        match e {
            OperatorError::Approval(a) => a.into(),
            OperatorError::Dispatch(d) => d.into(),
            OperatorError::Forbidden(_) => Failure {
                code: exit::NOT_SUCCESS,
                message: e.to_string(),
            },
        }
    }
}

/// The full id of the saga `id` names: itself, or the only saga whose id
/// starts with it (at least [`crate::store::MIN_ID_PREFIX`] characters).
///
/// # Errors
/// [`Failure`] with [`exit::NOT_FOUND`] when no saga or several match, or
/// the prefix is too short; [`exit::DATABASE`] when the store fails.
pub(crate) async fn resolve_saga(host: &Host, id: &str) -> Result<String, Failure> {
    let shown: String = id.chars().take(80).collect();
    if host.store.saga(id).await?.is_some() {
        return Ok(id.to_string());
    }
    let not_found = |message: String| Failure {
        code: exit::NOT_FOUND,
        message,
    };
    if id.is_empty() || id.chars().count() < crate::store::MIN_ID_PREFIX {
        return Err(not_found(format!(
            "no saga `{shown}` (a prefix must have at least {} characters)",
            crate::store::MIN_ID_PREFIX
        )));
    }
    let mut found = host.store.saga_ids_starting(id, 2).await?;
    match found.len() {
        1 => Ok(found.remove(0)),
        0 => Err(not_found(format!("no saga `{shown}`"))),
        _ => Err(not_found(format!(
            "saga id prefix `{shown}` is ambiguous (it starts {} and {} at least): give more of it",
            found[0], found[1]
        ))),
    }
}

/// Run a parsed command line and return the process exit code.
pub async fn main_with(cli: Cli) -> u8 {
    let json = cli.json;
    crate::sandbox::cache::announce_compiles(true);
    let result = dispatch(cli).await;
    match result {
        Ok(code) => code,
        Err(f) => {
            if json {
                outln!(
                    "{}",
                    serde_json::json!({"error": f.message, "exit_code": f.code})
                );
            } else {
                errln!("capsaga: {}", f.message);
            }
            f.code
        }
    }
}

/// Whether a command acts on sagas (and so runs crash recovery first).
fn acts_on_sagas(c: &Command) -> bool {
    match c {
        Command::Call { dry_run, .. } => !dry_run,
        Command::Undo { .. }
        | Command::Run { .. }
        | Command::Resume { .. }
        | Command::Agent { .. }
        | Command::Chat { .. }
        | Command::Rollback { .. }
        | Command::Approve { .. }
        | Command::Deny { .. }
        | Command::Mcp(_)
        | Command::Serve(_)
        | Command::Recover => true,
        Command::Tools { .. }
        | Command::Approvals { .. }
        | Command::Log { .. }
        | Command::Sagas { .. }
        | Command::Trace { .. }
        | Command::Audit { .. }
        | Command::Budget { .. }
        | Command::Bench(_)
        | Command::BenchNeurons(_)
        | Command::Check(_)
        | Command::New { .. }
        | Command::TestTool(_)
        | Command::Neurons { .. }
        | Command::Memory { .. }
        | Command::Tokens { .. }
        | Command::Keys { .. }
        | Command::Pause(_)
        | Command::Unpause { .. }
        | Command::Fsm { .. } => false,
    }
}

async fn dispatch(cli: Cli) -> Result<u8, Failure> {
    let out = render::Out { json: cli.json };
    if let Command::Fsm { .. } = &cli.command {
        // The table needs no state: only the policy's directory, for fsm.toml.
        let (g, source) = match crate::config::Config::load(&cli.config) {
            Ok(c) => (c.guardrail, c.fsm_path),
            Err(crate::config::ConfigError::Read { .. }) => {
                (capsaga_core::fsm::Guardrail::new(), None)
            }
            Err(e) => return Err(HostError::Config(e).into()),
        };
        return Ok(ops::fsm(&out, &g, source.as_deref()));
    }
    if let Command::Bench(args) = &cli.command {
        return Ok(bench::run(&out, args).await);
    }
    if let Command::BenchNeurons(args) = &cli.command {
        return Ok(bench_neurons::run(&out, args).await);
    }
    let cli = match cli.command {
        Command::Check(args) => return check::run(&cli.config, &out, args).await,
        Command::New { what } => return new_tool::run(&out, &what),
        Command::TestTool(args) => return test_tool::run(&out, &args).await,
        Command::Neurons { cmd } => return neurons::run(&cli.config, &out, cmd).await,
        Command::Memory { cmd } => return memory::run(&cli.config, &out, cmd).await,
        Command::Tokens { cmd } => return access::tokens(&cli.config, &out, cmd).await,
        Command::Keys { cmd } => return access::keys_cmd(&cli.config, &out, cmd).await,
        Command::Pause(a) => return access::pause(&cli.config, &out, &a, false).await,
        Command::Unpause { note } => {
            let a = access::PauseArgs {
                read_only: false,
                note,
                status: false,
            };
            return access::pause(&cli.config, &out, &a, true).await;
        }
        command => Cli { command, ..cli },
    };
    // A quick call (or its undo) with --tools-dir: the command line is the policy.
    let adhoc = match &cli.command {
        Command::Call {
            tool,
            tools_dir: Some(dir),
            grants,
            ..
        } => Some(adhoc::policy(
            dir,
            Path::new(".capsaga"),
            Some(tool),
            grants,
        )?),
        Command::Undo {
            tools_dir: Some(dir),
            ..
        } => Some(adhoc::policy(dir, Path::new(".capsaga"), None, &[])?),
        _ => None,
    };
    let config = adhoc
        .as_ref()
        .map_or(cli.config.as_path(), |a| a.path.as_path());
    let host = Host::open(config).await?;
    stop_when_lease_lost(&host);
    let door = Dispatcher::new(host);
    let recovered = if acts_on_sagas(&cli.command) {
        door.recover_dead().await?
    } else {
        Vec::new()
    };
    if !matches!(cli.command, Command::Recover) {
        for r in &recovered {
            errln!(
                "capsaga: recovered saga {} left {} by a process that died: now {}",
                r.saga_id,
                r.state_before,
                r.report.final_state
            );
        }
    }
    run_command(&door, &out, cli.command, &recovered).await
}

/// A host whose lease on its sagas is lost (a shared store it could not
/// reach for longer than the lease, or that found the lease expired) may
/// no longer drive them: another host may be recovering them. Stop the
/// process at once rather than run a tool without a lease (its writes
/// would be refused by fencing anyway; a tool's own effect would not).
fn stop_when_lease_lost(host: &std::sync::Arc<Host>) {
    let mut lost = host.owner.lost();
    tokio::spawn(async move {
        if lost.wait_for(|l| *l).await.is_ok() {
            errln!(
                "capsaga: this host's lease on its sagas was lost (the state store was unreachable for longer than the lease, or it expired): stopping now; another host recovers its sagas"
            );
            std::process::exit(i32::from(exit::BUSY));
        }
    });
}

/// One command on a started host, through its door.
async fn run_command(
    door: &Dispatcher,
    out: &render::Out,
    command: Command,
    recovered: &[crate::dispatch::Recovered],
) -> Result<u8, Failure> {
    let host = door.host();
    match command {
        Command::Tools {
            cmd: ToolsCmd::List,
        } => Ok(ops::tools_list(host, out)),
        Command::Call {
            tool,
            args,
            dry_run,
            ..
        } => run::call(door, out, &tool, &args, dry_run).await,
        Command::Undo { saga, .. } => {
            let saga = resolve_saga(host, &saga).await?;
            run::undo(door, out, &saga).await
        }
        Command::Run { plan, saga } => {
            let saga = match saga {
                Some(s) => Some(resolve_saga(host, &s).await?),
                None => None,
            };
            run::plan(door, out, &plan, saga.as_deref()).await
        }
        Command::Resume { saga } => {
            let saga = resolve_saga(host, &saga).await?;
            run::resume(door, out, &saga).await
        }
        Command::Agent {
            script,
            task,
            max_steps,
            role,
            allow_providers,
            prefer_providers,
            autonomy,
            session,
            sender,
            tool_choice,
        } => {
            let req = run::AgentRequest {
                script,
                task,
                max_steps,
                role,
                allow_providers,
                prefer_providers,
                autonomy,
                session,
                sender,
                tool_choice,
            };
            run::agent(host, out, &req).await
        }
        Command::Chat {
            script,
            session,
            sender,
            max_steps,
        } => run::chat(host, out, script, session, sender, max_steps).await,
        Command::Budget { days } => ops::budget(host, out, days).await,
        Command::Mcp(args) => serve::mcp(host, &args).await,
        Command::Serve(args) => serve::serve(host, out, &args).await,
        Command::Approvals { all } => approvals::list(host, out, all).await,
        Command::Approve { id, note, resume } => {
            approvals::approve(door, out, &id, note.as_deref(), resume).await
        }
        Command::Deny { id, note } => approvals::deny(door, out, &id, note.as_deref()).await,
        Command::Recover => Ok(run::recover_report(out, recovered)),
        Command::Log { saga } => {
            let saga = match saga {
                Some(s) => Some(resolve_saga(host, &s).await?),
                None => None,
            };
            ops::log(host, out, saga.as_deref()).await
        }
        Command::Sagas {
            limit,
            needs_operator,
        } => {
            if needs_operator {
                ops::needs_operator(host, out).await
            } else {
                ops::sagas(host, out, limit).await
            }
        }
        Command::Rollback { saga } => {
            let saga = resolve_saga(host, &saga).await?;
            run::rollback(door, out, &saga).await
        }
        Command::Trace { id } => ops::trace(host, out, &id).await,
        Command::Audit {
            cmd: AuditCmd::Verify { expect_head },
        } => ops::audit_verify(host, out, expect_head.as_deref()).await,
        Command::Fsm { .. }
        | Command::Check(_)
        | Command::Bench(_)
        | Command::New { .. }
        | Command::TestTool(_)
        | Command::BenchNeurons(_)
        | Command::Memory { .. }
        | Command::Neurons { .. }
        | Command::Tokens { .. }
        | Command::Keys { .. }
        | Command::Pause(_)
        | Command::Unpause { .. } => Ok(exit::OK),
    }
}
