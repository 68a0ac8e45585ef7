//! `capsaga memory search|episodes|facts|proposals|reflect|approve|discard|
//! forget`: the operator's view of the agent's memory (seed 004). These
//! commands need only the policy and the memory (no engine); `reflect`
//! also a model (the scripted provider with `--script`, else the configured
//! providers). Decisions are logged in the memory's log with the operator
//! as the principal.

mod transfer;

use super::render::{Out, clip};
use super::{Failure, exit};
use capsaga_agent::budget::Budget;
use capsaga_agent::meter::Meter;
use capsaga_agent::select::{Selection, process_env, select};
use capsaga_door::config::Config;
use capsaga_door::memory::{self, HostMemory};
use capsaga_memory::{EpisodeQuery, MemoryError};
use clap::Subcommand;
use serde_json::json;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// Who the CLI records as the principal of a decision: the local operator,
/// `cli:<user> (operator)`, as `capsaga approve` records it.
fn operator() -> String {
    capsaga_door::dispatch::decider("cli").to_string()
}

/// `capsaga memory ...`
#[derive(Debug, Subcommand)]
pub enum MemoryCmd {
    /// Search facts and episodes for a query (as `memory_fetch` does).
    Search {
        /// The query (plain words; never FTS syntax).
        query: String,
        /// Namespace (default: `[memory] namespace`).
        #[arg(long)]
        namespace: Option<String>,
        /// Only this sender's episodes.
        #[arg(long)]
        sender: Option<String>,
        /// Most results of each kind.
        #[arg(long, default_value_t = 5)]
        limit: usize,
    },
    /// List episodes, newest first.
    Episodes {
        /// Only this sender's.
        #[arg(long)]
        sender: Option<String>,
        /// How many.
        #[arg(long, default_value_t = 20)]
        limit: usize,
        /// Also archived ones.
        #[arg(long)]
        all: bool,
    },
    /// List facts.
    Facts {
        /// Only this namespace.
        #[arg(long)]
        namespace: Option<String>,
    },
    /// List fact proposals waiting for the operator (all with --all).
    Proposals {
        /// Also decided and withdrawn ones.
        #[arg(long)]
        all: bool,
    },
    /// Reflect: group important unreflected episodes and have the model
    /// propose one fact per group (queued for `approve`); also archives old
    /// unimportant episodes (retention).
    Reflect {
        /// The script of model turns (JSON): use the scripted provider.
        #[arg(long)]
        script: Option<PathBuf>,
        /// Smallest group that becomes a proposal.
        #[arg(long, default_value_t = 2)]
        min_size: usize,
    },
    /// Approve proposals: each becomes a fact (indexed, appended to
    /// MEMORY.md under today's heading).
    Approve {
        /// Proposal ids.
        ids: Vec<String>,
        /// Every pending proposal.
        #[arg(long, conflicts_with = "ids")]
        all: bool,
    },
    /// Discard proposals.
    Discard {
        /// Proposal ids.
        ids: Vec<String>,
        /// Every pending proposal.
        #[arg(long, conflicts_with = "ids")]
        all: bool,
    },
    /// Remove a fact (`f-...`) or an episode (`e-...`) everywhere: database,
    /// index, embeddings, MEMORY.md; logged.
    Forget {
        /// The id.
        id: String,
    },
    /// Import past conversations (JSON Lines, one session a line: sender,
    /// session_id, started_at, turns with role and content; see
    /// docs/memory.md): each exchange becomes an episode of its sender with
    /// its own date and session. Importing a file again adds nothing; an
    /// interrupted import run again completes it.
    Import {
        /// The file (`-`: standard input, read once: `--on-error refuse`
        /// needs a file).
        file: PathBuf,
        /// Namespace (default: `[memory] namespace`).
        #[arg(long)]
        namespace: Option<String>,
        /// A bad line: `skip` it (reported with its number) or `refuse` the
        /// whole file (nothing imported).
        #[arg(long, value_enum, default_value_t = OnError::Skip)]
        on_error: OnError,
    },
    /// Export episodes as sessions in the format `import` reads.
    Export {
        /// Namespace (default: `[memory] namespace`).
        #[arg(long)]
        namespace: Option<String>,
        /// Only this sender's sessions.
        #[arg(long)]
        sender: Option<String>,
        /// Write here instead of standard output.
        #[arg(long)]
        out: Option<PathBuf>,
    },
}

/// What `memory import` does with a bad line.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum OnError {
    /// Import the other lines; list the bad ones.
    Skip,
    /// Import nothing when any line is bad.
    Refuse,
}

pub(super) fn failure(e: MemoryError) -> Failure {
    let code = match &e {
        MemoryError::Database { .. } | MemoryError::Dimension { .. } | MemoryError::Sql(_) => {
            exit::DATABASE
        }
        MemoryError::NotFound { .. } => exit::NOT_FOUND,
        MemoryError::Invalid(_) => exit::USAGE,
        _ => exit::CONFIG,
    };
    Failure {
        code,
        message: e.to_string(),
    }
}

/// Open the memory of the policy at `config_path`.
fn open(config_path: &Path) -> Result<(Config, Arc<HostMemory>), Failure> {
    let config = Config::load(config_path).map_err(|e| Failure {
        code: exit::CONFIG,
        message: e.to_string(),
    })?;
    match memory::open(&config).map_err(failure)? {
        Some(m) => Ok((config, m)),
        None => Err(Failure {
            code: exit::CONFIG,
            message: format!(
                "{}: memory is off (set `[memory] enabled = true`)",
                config.path.display()
            ),
        }),
    }
}

/// Run one `capsaga memory` command.
///
/// # Errors
/// [`Failure`].
pub(crate) async fn run(config_path: &Path, out: &Out, cmd: MemoryCmd) -> Result<u8, Failure> {
    let (config, hm) = open(config_path)?;
    let own_ns = hm.memory.config().namespace.clone();
    match cmd {
        MemoryCmd::Search {
            query,
            namespace,
            sender,
            limit,
        } => search(
            &hm,
            out,
            &namespace.unwrap_or(own_ns),
            sender.as_deref(),
            &query,
            limit,
        ),
        MemoryCmd::Episodes { sender, limit, all } => episodes(&hm, out, sender, limit, all),
        MemoryCmd::Facts { namespace } => facts(&hm, out, namespace.as_deref()),
        MemoryCmd::Proposals { all } => proposals(&hm, out, all),
        MemoryCmd::Reflect { script, min_size } => {
            reflect(&config, &hm, out, &own_ns, script, min_size).await
        }
        MemoryCmd::Approve { ids, all } | MemoryCmd::Discard { ids, all }
            if ids.is_empty() && !all =>
        {
            let _ = ids;
            Err(Failure {
                code: exit::USAGE,
                message: "name proposal ids, or --all".into(),
            })
        }
        MemoryCmd::Approve { ids, all } => decide(&hm, out, ids, all, true),
        MemoryCmd::Discard { ids, all } => decide(&hm, out, ids, all, false),
        MemoryCmd::Forget { id } => forget(&hm, out, &id),
        MemoryCmd::Import {
            file,
            namespace,
            on_error,
        } => {
            let ns = namespace.unwrap_or(own_ns);
            transfer::import(hm, out, file, ns, on_error).await
        }
        MemoryCmd::Export {
            namespace,
            sender,
            out: to,
        } => transfer::export(hm, out, namespace.unwrap_or(own_ns), sender, to).await,
    }
}

/// `memory search`: facts, then episodes in ranking order.
fn search(
    hm: &HostMemory,
    out: &Out,
    ns: &str,
    sender: Option<&str>,
    query: &str,
    limit: usize,
) -> Result<u8, Failure> {
    let m = &hm.memory;
    // One recall: the query embedded once for facts and episodes, ranked
    // as a turn and `memory_fetch` rank them.
    let capsaga_memory::Bundle {
        facts,
        episodes: eps,
    } = m
        .recall(&capsaga_memory::RecallQuery {
            namespace: ns,
            sender,
            message: query,
            facts: limit,
            fact_threshold: 0.0,
            relevant: limit,
            recent: 0,
            reinforce: false,
            now: jiff::Timestamp::now(),
        })
        .map_err(failure)?;
    if out.json {
        out.json(&json!({"facts": facts, "episodes": eps}));
        return Ok(exit::OK);
    }
    for f in &facts {
        outln!(
            "fact {}  score {:.3}  {}",
            f.fact_id,
            f.score.unwrap_or(0.0),
            clip(&f.text, 120)
        );
    }
    for (i, e) in eps.iter().enumerate() {
        outln!(
            "{:>3}. episode {}  {}  {}  session {}  {}",
            i + 1,
            e.episode_id,
            e.started_at,
            e.sender,
            e.session_id,
            clip(&e.user_message, 100)
        );
    }
    Ok(exit::OK)
}

/// `memory episodes`.
fn episodes(
    hm: &HostMemory,
    out: &Out,
    sender: Option<String>,
    limit: usize,
    all: bool,
) -> Result<u8, Failure> {
    let eps = hm
        .memory
        .store()
        .list_episodes(&EpisodeQuery {
            namespace: None,
            sender,
            include_archived: all,
            limit,
        })
        .map_err(failure)?;
    if out.json {
        out.json(&eps);
        return Ok(exit::OK);
    }
    for e in &eps {
        outln!(
            "{}  {}  {}  {}  importance {:.2}{}{}  {}",
            e.episode_id,
            e.started_at,
            e.sender,
            e.outcome,
            e.importance,
            if e.reflected { "  reflected" } else { "" },
            if e.archived { "  archived" } else { "" },
            clip(&e.user_message, 80)
        );
    }
    Ok(exit::OK)
}

/// `memory facts`: each with the fact that superseded it, if any.
fn facts(hm: &HostMemory, out: &Out, namespace: Option<&str>) -> Result<u8, Failure> {
    let facts = hm.memory.store().facts(namespace).map_err(failure)?;
    if out.json {
        out.json(&facts);
        return Ok(exit::OK);
    }
    for f in &facts {
        outln!(
            "{}  [{}]  {}  valid from {}  accessed {}{}  {}",
            f.fact_id,
            f.namespace,
            f.source,
            f.valid_at,
            f.access_count,
            f.superseded_by
                .as_ref()
                .map(|b| format!("  superseded by {b}"))
                .unwrap_or_default(),
            clip(&f.text, 120)
        );
    }
    Ok(exit::OK)
}

/// `memory proposals`.
fn proposals(hm: &HostMemory, out: &Out, all: bool) -> Result<u8, Failure> {
    let ps = hm
        .memory
        .store()
        .proposals(if all { None } else { Some("pending") })
        .map_err(failure)?;
    if out.json {
        out.json(&ps);
        return Ok(exit::OK);
    }
    for p in &ps {
        // Untrusted until approved: shown clipped, control characters
        // already flattened when it was queued.
        outln!(
            "{}  {}  [{}]  {}  {}",
            p.proposal_id,
            p.status,
            p.namespace,
            p.origin,
            clip(&p.text, 160)
        );
    }
    if ps.is_empty() {
        outln!("no proposals");
    }
    Ok(exit::OK)
}

/// `memory reflect`: retention, then reflection with the model, each call
/// metered against the state store's budget ledger like every model call
/// (the configured store: the day's cap is the one every host shares).
async fn reflect(
    config: &Config,
    hm: &Arc<HostMemory>,
    out: &Out,
    own_ns: &str,
    script: Option<PathBuf>,
    min_size: usize,
) -> Result<u8, Failure> {
    let store =
        capsaga_door::host::open_store(config, capsaga_store::sqlite::GroupCommit::On).await?;
    let budget = Budget::open(config, store.clone()).map_err(|e| Failure {
        code: exit::CONFIG,
        message: e.to_string(),
    })?;
    let meter = Meter::new(&budget);
    let sel = Selection {
        script,
        ..Selection::default()
    };
    let sel = capsaga_agent::keys::with_sealed_store(config, &*store, sel).await?;
    let selected = select(config, &process_env(), &sel).map_err(|e| Failure {
        code: exit::CONFIG,
        message: e.to_string(),
    })?;
    let archived = hm
        .memory
        .retention(jiff::Timestamp::now())
        .map_err(failure)?;
    let r = capsaga_agent::reflect::reflect(
        hm,
        selected.provider.as_ref(),
        &meter,
        own_ns,
        min_size.max(1),
    )
    .await
    .map_err(|e| Failure {
        code: exit::NOT_SUCCESS,
        message: e.to_string(),
    })?;
    if out.json {
        out.json(&json!({"clusters": r.clusters, "proposals": r.proposals, "archived": archived}));
        return Ok(exit::OK);
    }
    outln!(
        "{} group(s), {} proposal(s) queued, {} episode(s) archived",
        r.clusters,
        r.proposals.len(),
        archived.len()
    );
    for p in &r.proposals {
        outln!("  {}  {}", p.proposal_id, clip(&p.text, 160));
    }
    Ok(exit::OK)
}

/// `memory approve|discard`.
fn decide(
    hm: &HostMemory,
    out: &Out,
    ids: Vec<String>,
    all: bool,
    approve: bool,
) -> Result<u8, Failure> {
    let m = &hm.memory;
    let ids = if all { pending(hm)? } else { ids };
    if !approve {
        let n = m.discard(&ids, &operator()).map_err(failure)?;
        if out.json {
            out.json(&json!({"discarded": n}));
        } else {
            outln!("{n} proposal(s) discarded");
        }
        return Ok(exit::OK);
    }
    for id in &ids {
        m.store().proposal(id).map_err(failure)?;
    }
    let facts = m.approve(&ids, &operator()).map_err(failure)?;
    if out.json {
        out.json(&facts);
        return Ok(exit::OK);
    }
    outln!("{} fact(s) added", facts.len());
    for f in &facts {
        outln!(
            "  {}  {}{}",
            f.fact_id,
            clip(&f.text, 120),
            f.superseded_by
                .as_ref()
                .map(|b| format!("  (superseded at once by the later {b})"))
                .unwrap_or_default()
        );
    }
    Ok(exit::OK)
}

/// `memory forget`.
fn forget(hm: &HostMemory, out: &Out, id: &str) -> Result<u8, Failure> {
    let f = hm.memory.forget(id, &operator()).map_err(failure)?;
    if out.json {
        out.json(&f);
    } else {
        outln!(
            "forgot {} {}{}: {}",
            f.what,
            f.id,
            if f.memory_md_line {
                " (and its MEMORY.md line)"
            } else {
                ""
            },
            clip(&f.text, 120)
        );
    }
    Ok(exit::OK)
}

fn pending(hm: &HostMemory) -> Result<Vec<String>, Failure> {
    Ok(hm
        .memory
        .store()
        .proposals(Some("pending"))
        .map_err(failure)?
        .into_iter()
        .map(|p| p.proposal_id)
        .collect())
}
