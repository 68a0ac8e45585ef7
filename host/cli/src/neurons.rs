//! `capsaga neurons list|show|diff|approve|reject|retire`: the operator's
//! view of agent-written tools. These commands need only the policy and the
//! state database (no engine): approving a neuron in one process makes it
//! callable in the next turn of any process.

use super::render::{Out, clip};
use super::{Failure, exit};
use capsaga_core::neuron::Status;
use capsaga_door::config::Config;
use capsaga_door::neurons::fitness;
use capsaga_door::neurons::operator::{self, DecisionError};
use capsaga_store::{NeuronOpError, NeuronRow, Store};
use clap::Subcommand;
use serde_json::json;
use std::path::Path;

/// `capsaga neurons ...`
#[derive(Debug, Subcommand)]
pub enum NeuronsCmd {
    /// Every neuron version: status, requested and granted capabilities,
    /// fitness from the log of its calls.
    List,
    /// One version in full: meta, source, examples and their last report,
    /// provenance (saga, trace, model), decisions.
    Show {
        /// Neuron name.
        name: String,
        /// Version (default: the newest).
        #[arg(long)]
        version: Option<u32>,
    },
    /// What changed between two versions (meta fields and source lines).
    Diff {
        /// Neuron name.
        name: String,
        /// Older version.
        v1: u32,
        /// Newer version.
        v2: u32,
    },
    /// Activate a version waiting for you, granting exactly the capabilities
    /// given (at most what it requested; every requested one must be
    /// granted unless --partial). The name's earlier active version is
    /// retired.
    Approve {
        /// Neuron name.
        name: String,
        /// Version (default: the newest).
        #[arg(long)]
        version: Option<u32>,
        /// A capability to grant (repeat), e.g. fs:read:~/data/**.
        #[arg(long = "grant", value_name = "CAP")]
        grants: Vec<String>,
        /// Grant only what --grant names and withhold the rest of the
        /// request (inside the sandbox it does not exist).
        #[arg(long)]
        partial: bool,
        /// A note kept in the log.
        #[arg(long)]
        note: Option<String>,
    },
    /// Refuse a version.
    Reject {
        /// Neuron name.
        name: String,
        /// Version (default: the newest).
        #[arg(long)]
        version: Option<u32>,
        /// A note kept in the log.
        #[arg(long)]
        note: Option<String>,
    },
    /// Take an active version out of the catalog.
    Retire {
        /// Neuron name.
        name: String,
        /// Version (default: the newest).
        #[arg(long)]
        version: Option<u32>,
        /// A note kept in the log.
        #[arg(long)]
        note: Option<String>,
    },
}

impl From<DecisionError> for Failure {
    fn from(e: DecisionError) -> Self {
        let code = match &e {
            DecisionError::Store(NeuronOpError::Store(_)) => exit::DATABASE,
            DecisionError::Store(NeuronOpError::NotFound(_)) => exit::NOT_FOUND,
            DecisionError::Store(NeuronOpError::Refused { .. }) => exit::NOT_SUCCESS,
            DecisionError::BadGrant { .. } | DecisionError::Grants(_) => exit::CONFIG,
        };
        Failure {
            code,
            message: e.to_string(),
        }
    }
}

fn who() -> String {
    format!(
        "cli:{}",
        std::env::var("USER").unwrap_or_else(|_| "operator".into())
    )
}

/// Run one `neurons` command on the policy at `config_path`.
///
/// # Errors
/// [`Failure`] for a bad policy, database or decision.
pub(crate) async fn run(config_path: &Path, out: &Out, cmd: NeuronsCmd) -> Result<u8, Failure> {
    let config = Config::load(config_path).map_err(|e| Failure {
        code: exit::CONFIG,
        message: e.to_string(),
    })?;
    let store =
        capsaga_door::host::open_store(&config, capsaga_store::sqlite::GroupCommit::On).await?;
    let store: &dyn Store = &*store;
    let home = config.home.to_string_lossy().into_owned();
    match cmd {
        NeuronsCmd::List => list(store, &config, out).await,
        NeuronsCmd::Show { name, version } => {
            let row = operator::version_of(store, &name, version).await?;
            show(store, out, &row).await
        }
        NeuronsCmd::Diff { name, v1, v2 } => {
            let a = operator::version_of(store, &name, Some(v1)).await?;
            let b = operator::version_of(store, &name, Some(v2)).await?;
            Ok(diff(out, &a, &b))
        }
        NeuronsCmd::Approve {
            name,
            version,
            grants,
            partial,
            note,
        } => {
            let row = operator::version_of(store, &name, version).await?;
            let coverage = if partial {
                operator::Coverage::Subset
            } else {
                operator::Coverage::All
            };
            let row = operator::approve(
                store,
                &home,
                &row,
                &grants,
                coverage,
                &who(),
                note.as_deref(),
            )
            .await?;
            decided(out, &row, "approved: active from the next turn")
        }
        NeuronsCmd::Reject {
            name,
            version,
            note,
        } => {
            let row = operator::version_of(store, &name, version).await?;
            let row =
                operator::decide(store, &row, Status::Rejected, &who(), note.as_deref()).await?;
            decided(out, &row, "rejected")
        }
        NeuronsCmd::Retire {
            name,
            version,
            note,
        } => {
            let row = operator::version_of(store, &name, version).await?;
            let row =
                operator::decide(store, &row, Status::Retired, &who(), note.as_deref()).await?;
            decided(out, &row, "retired")
        }
    }
}

fn decided(out: &Out, row: &NeuronRow, what: &str) -> Result<u8, Failure> {
    let withheld = if row.status == Status::Active {
        operator::withheld(row)
    } else {
        Vec::new()
    };
    if out.json {
        out.json(
            &json!({"neuron": row.name, "version": row.version, "status": row.status,
            "granted": row.granted, "withheld": withheld, "identity": row.identity}),
        );
    } else {
        println!(
            "neuron {} version {} {what} (identity {})",
            row.name, row.version, row.identity
        );
        if !row.granted.is_empty() {
            println!("  granted: {}", row.granted.join(", "));
        }
        if !withheld.is_empty() {
            println!("  withheld: {}", withheld.join(", "));
        }
    }
    Ok(exit::OK)
}

async fn list(store: &dyn Store, config: &Config, out: &Out) -> Result<u8, Failure> {
    let retired = fitness::retire_unfit(store, &config.policy).await?;
    for r in &retired {
        errln!(
            "capsaga: neuron {} version {} retired: {}",
            r.name,
            r.version,
            r.note.as_deref().unwrap_or("")
        );
    }
    let rows = store.neurons(None).await?;
    let mut items = Vec::new();
    for row in &rows {
        items.push((row, fitness::of(store, row).await?));
    }
    if out.json {
        let v: Vec<_> = items
            .iter()
            .map(|(r, f)| json!({"name": r.name, "version": r.version, "status": r.status,
                "identity": r.identity, "requested": r.meta.capabilities, "granted": r.granted,
                "risk": r.meta.risk, "fitness": f, "saga_id": r.saga_id, "created_at": r.created_at}))
            .collect();
        out.json(&json!({"neurons": v}));
        return Ok(exit::OK);
    }
    if rows.is_empty() {
        println!("no neurons");
        return Ok(exit::OK);
    }
    println!(
        "{:<24} {:>3}  {:<17} {:>5} {:>6} {:>7} {:>7}  requested",
        "name", "v", "status", "calls", "ok%", "p50ms", "p95ms"
    );
    for (r, f) in items {
        let pct = f
            .success_rate
            .map(|x| format!("{:.0}", x * 100.0))
            .unwrap_or_else(|| "-".into());
        let ms = |v: Option<u64>| v.map(|x| x.to_string()).unwrap_or_else(|| "-".into());
        println!(
            "{:<24} {:>3}  {:<17} {:>5} {:>6} {:>7} {:>7}  {}",
            clip(&r.name, 24),
            r.version,
            r.status.as_str(),
            f.calls,
            pct,
            ms(f.p50_ms),
            ms(f.p95_ms),
            if r.meta.capabilities.is_empty() {
                "-".to_string()
            } else {
                r.meta.capabilities.join(", ")
            }
        );
        if !f.error_kinds.is_empty() {
            let kinds: Vec<String> = f
                .error_kinds
                .iter()
                .map(|(k, n)| format!("{k}×{n}"))
                .collect();
            println!("{:<30}errors: {}", "", kinds.join(", "));
        }
    }
    Ok(exit::OK)
}

async fn show(store: &dyn Store, out: &Out, row: &NeuronRow) -> Result<u8, Failure> {
    let f = fitness::of(store, row).await?;
    if out.json {
        out.json(&json!({"neuron": row, "fitness": f}));
        return Ok(exit::OK);
    }
    let m = &row.meta;
    println!(
        "neuron {} version {} — {}",
        row.name, row.version, row.status
    );
    println!("  identity     {}", row.identity);
    println!("  runner       {}", row.runner_hash);
    println!("  description  {}", m.description);
    println!("  args schema  {}", m.args_schema);
    println!(
        "  risk {} | side effects {} | dry-run {} | idempotent {} | untrusted output {}",
        m.risk.as_str(),
        m.has_side_effects,
        m.supports_dry_run,
        m.idempotent,
        m.returns_untrusted
    );
    println!("  requested    {}", list_or_none(&m.capabilities));
    println!("  granted      {}", list_or_none(&row.granted));
    println!(
        "  provenance   saga {} step {} | trace {} | model {}",
        row.saga_id.as_deref().unwrap_or("-"),
        row.step_seq
            .map(|s| s.to_string())
            .unwrap_or_else(|| "-".into()),
        row.trace_id.as_deref().unwrap_or("-"),
        row.model.as_deref().unwrap_or("-")
    );
    println!(
        "  created      {} | updated {}",
        row.created_at, row.updated_at
    );
    if let Some(by) = &row.decided_by {
        println!(
            "  decided by   {by}{}",
            row.note
                .as_deref()
                .map(|n| format!(" ({n})"))
                .unwrap_or_default()
        );
    }
    println!(
        "  fitness      {} calls, success {}, p50 {} ms, p95 {} ms",
        f.calls,
        f.success_rate
            .map(|r| format!("{:.0}%", r * 100.0))
            .unwrap_or_else(|| "-".into()),
        f.p50_ms
            .map(|v| v.to_string())
            .unwrap_or_else(|| "-".into()),
        f.p95_ms
            .map(|v| v.to_string())
            .unwrap_or_else(|| "-".into())
    );
    if let Some(examples) = row
        .report
        .as_ref()
        .and_then(|r| r.get("examples"))
        .and_then(|e| e.as_array())
    {
        println!("  examples");
        for e in examples {
            println!(
                "    [{}] {} expected {} got {}",
                e["index"],
                if e["passed"].as_bool() == Some(true) {
                    "pass"
                } else {
                    "FAIL"
                },
                clip(&e["expected"].to_string(), 80),
                clip(&e["got"].to_string(), 120)
            );
        }
    }
    println!("  source");
    for (i, line) in row.source.lines().enumerate() {
        println!("  {:>4} | {line}", i + 1);
    }
    Ok(exit::OK)
}

fn list_or_none(v: &[String]) -> String {
    if v.is_empty() {
        "nothing".into()
    } else {
        v.join(", ")
    }
}

fn diff(out: &Out, a: &NeuronRow, b: &NeuronRow) -> u8 {
    let ma = serde_json::to_value(&a.meta).unwrap_or_default();
    let mb = serde_json::to_value(&b.meta).unwrap_or_default();
    let mut fields = Vec::new();
    if let (Some(oa), Some(ob)) = (ma.as_object(), mb.as_object()) {
        for (k, va) in oa {
            if k != "version" && ob.get(k) != Some(va) {
                fields.push(json!({"field": k, "from": va, "to": ob.get(k)}));
            }
        }
    }
    let text = similar::TextDiff::from_lines(&a.source, &b.source)
        .unified_diff()
        .header(
            &format!("{} v{}", a.name, a.version),
            &format!("{} v{}", b.name, b.version),
        )
        .to_string();
    if out.json {
        out.json(
            &json!({"neuron": a.name, "from": a.version, "to": b.version,
            "identity_from": a.identity, "identity_to": b.identity,
            "meta": fields, "source": text}),
        );
        return exit::OK;
    }
    println!(
        "neuron {}: version {} ({}) → version {} ({})",
        a.name, a.version, a.status, b.version, b.status
    );
    for f in &fields {
        println!(
            "  {}: {} → {}",
            f["field"].as_str().unwrap_or(""),
            clip(&f["from"].to_string(), 200),
            clip(&f["to"].to_string(), 200)
        );
    }
    if text.is_empty() {
        println!("  source unchanged");
    } else {
        print!("{text}");
    }
    exit::OK
}
