//! # capsaga
//!
//! The `capsaga` binary's command line: argument parsing (clap) and
//! dispatch. Each command prints a human-readable report by default and one
//! JSON document with `--json`; exit codes are in [`exit`]. It sits on top
//! of every layer (the door, the agent, the servers; never the sandbox
//! directly) and holds no mechanism of its own: each command opens the host
//! and calls the layer that does the work. `capsaga-bench` prints through
//! the same [`render`] and [`outln!`]/[`errln!`] and exits with the same
//! codes.

#![warn(missing_docs)]

#[macro_use]
#[doc(hidden)]
pub mod pipe;
mod access;
mod adhoc;
mod approvals;
mod args;
mod audit_export;
mod check;
pub mod exit;
mod memory;
mod neurons;
mod new_tool;
mod ops;
pub mod process;
pub mod render;
mod run;
mod serve;
mod test_tool;

pub use args::{AuditCmd, Cli, Command, ToolsCmd};
use capsaga_door::dispatch::{DispatchError, Dispatcher, OperatorError};
use capsaga_door::host::{Host, HostError};
use capsaga_door::plan::RunError;
use capsaga_store::{ApprovalOpError, StoreError};
use std::path::Path;

/// What `capsaga --version` prints after the name: the crate version and
/// the git commit it was built from (`host/cli/build.rs`), e.g.
/// `0.1.0 (3f2a9c1d0e4b)`, `0.1.0 (3f2a9c1d0e4b-dirty, dev build)`.
pub const VERSION: &str = concat!(
    env!("CARGO_PKG_VERSION"),
    " (",
    env!("CAPSAGA_BUILD_COMMIT"),
    ")"
);

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
            DispatchError::Busy { .. } | DispatchError::Held { .. } => exit::BUSY,
            // Resuming a saga no plan opened: as a saga without a plan.
            DispatchError::Scope(_) => exit::CONFIG,
            DispatchError::InDoubt { report, .. } => match report.final_state {
                capsaga_core::fsm::State::FailedRolledBack => exit::ROLLED_BACK,
                _ => exit::ROLLBACK_PARTIAL,
            },
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
            RunError::Ended { .. } => Failure {
                code: exit::ENDED,
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
            ApprovalOpError::Refused(capsaga_core::approval::ApprovalError::AlreadyDecided(_)) => {
                exit::ALREADY_DECIDED
            }
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
/// starts with it (at least [`capsaga_store::MIN_ID_PREFIX`] characters).
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
    if id.is_empty() || id.chars().count() < capsaga_store::MIN_ID_PREFIX {
        return Err(not_found(format!(
            "no saga `{shown}` (a prefix must have at least {} characters)",
            capsaga_store::MIN_ID_PREFIX
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
    capsaga_door::announce_compiles(true);
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
        let (g, source) = match capsaga_door::config::Config::load(&cli.config) {
            Ok(c) => (c.guardrail, c.fsm_path),
            Err(capsaga_door::config::ConfigError::Read { .. }) => {
                (capsaga_core::fsm::Guardrail::new(), None)
            }
            Err(e) => return Err(HostError::Config(e).into()),
        };
        return Ok(ops::fsm(&out, &g, source.as_deref()));
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
    let result = on_host(&door, &out, cli).await;
    // Before the process exits, however the command ended (a saga parked,
    // done, refused busy, a `serve` stopped by SIGTERM or SIGINT): this
    // process is no saga's owner any more, for every process sharing the
    // store, so its sagas are resumable or recoverable at once anywhere.
    // Only a process that dies (SIGKILL) keeps them until its lease expires.
    door.host().owner.retire().await;
    result
}

/// The command, on its opened host: crash recovery first for a command
/// that acts on sagas, then the command.
async fn on_host(door: &Dispatcher, out: &render::Out, cli: Cli) -> Result<u8, Failure> {
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
    run_command(door, out, cli.command, &recovered).await
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
// Over 100 lines: one exhaustive match, an arm per command, each a call.
async fn run_command(
    door: &Dispatcher,
    out: &render::Out,
    command: Command,
    recovered: &[capsaga_door::dispatch::Recovered],
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
            max_tool_calls,
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
                max_tool_calls,
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
        Command::Audit {
            cmd: AuditCmd::Export { saga, otel },
        } => {
            let saga = resolve_saga(host, &saga).await?;
            audit_export::export(host, out, &saga, &otel).await
        }
        Command::Fsm { .. }
        | Command::Check(_)
        | Command::New { .. }
        | Command::TestTool(_)
        | Command::Memory { .. }
        | Command::Neurons { .. }
        | Command::Tokens { .. }
        | Command::Keys { .. }
        | Command::Pause(_)
        | Command::Unpause { .. } => Ok(exit::OK),
    }
}
