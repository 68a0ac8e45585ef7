//! `capsaga-bench --wal`: how big the state database's `-wal` file gets
//! when many steps commit while another connection holds read snapshots,
//! and how big it is when the command returns (issue 13, item 9).
//!
//! A fresh workspace in a temporary directory; a host built-in tool that
//! does nothing, called through the dispatch door (so each step writes what
//! a real step writes: BEGIN with its dry-run pre-image, COMMIT, the
//! chained log rows), in sagas of [`STEPS_PER_SAGA`] steps. A reader thread
//! meanwhile keeps a read transaction open on the database, starting a new
//! one every [`READER_HOLD_MS`] ms, as a monitoring script or a backup
//! would: the `-wal` file cannot start over while it reads. Figures: the
//! largest `-wal` size seen during the run (what the reader made it grow
//! to: the baseline), its size after the reader stopped and a few more
//! steps committed, and its size once the host is dropped while the
//! reader's connection is still open (what "when the command returns"
//! leaves for the next command), each as a ratio to the peak.

use async_trait::async_trait;
use capsaga::exit;
use capsaga::render::Out;
use capsaga_core::error::ToolError;
use capsaga_core::meta::{RawToolMeta, Risk};
use capsaga_core::tool::{CallContext, ToolOutput};
use capsaga_door::dispatch::{Args, Call, Dispatcher, Outcome, Scope};
use capsaga_door::host::Host;
use capsaga_door::registry::BuiltinTool;
use capsaga_sandbox::Op;
use capsaga_store::sqlite::checkpoint::{CHECKPOINT_THRESHOLD_BYTES, JOURNAL_SIZE_LIMIT_BYTES};
use capsaga_store::sqlite::{SnapshotReader, wal_bytes};
use serde::Serialize;
use serde_json::{Value, json};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// Steps per saga.
const STEPS_PER_SAGA: u32 = 100;
/// How long the reader keeps one snapshot, milliseconds.
const READER_HOLD_MS: u64 = 200;
/// Steps committed after the reader stopped, before the second figure.
const STEPS_AFTER_READER: u32 = 20;

/// A built-in that does nothing, with a side effect declared (so the door
/// runs its dry-run and logs a pre-image, as for a real write).
pub(super) struct Nop;

#[async_trait]
impl BuiltinTool for Nop {
    fn meta(&self) -> RawToolMeta {
        RawToolMeta {
            name: "bench_step".into(),
            description: "Does nothing (capsaga-bench --wal, --group-commit).".into(),
            args_schema: r#"{"type":"object","properties":{"n":{"type":"integer"}},"required":["n"],"additionalProperties":false}"#.into(),
            has_side_effects: true,
            risk: Risk::Low,
            returns_untrusted: false,
            idempotent: true,
            supports_dry_run: true,
            capabilities: vec![],
            version: "1.0.0".into(),
            output_fields: Vec::new(),
        }
    }

    async fn call(
        &self,
        op: &Op,
        _ctx: &CallContext,
        args: &Value,
        _bindings: &capsaga_sandbox::Bindings,
    ) -> Result<Option<ToolOutput>, ToolError> {
        // Compensation has nothing to undo; execute and dry-run say so.
        Ok((op.name() != "compensate").then(|| ToolOutput {
            data: json!({"n": args["n"], "pad": "x".repeat(200)}),
            effects: vec![],
            next_hint: None,
            summary: "nothing".into(),
        }))
    }
}

/// The figures.
#[derive(Debug, Serialize)]
struct WalReport {
    steps: u32,
    sagas: u32,
    wall_s: f64,
    steps_per_s: f64,
    journal_size_limit_bytes: u64,
    checkpoint_threshold_bytes: u64,
    /// Largest `-wal` size seen while the reader held snapshots.
    wal_peak_bytes: u64,
    /// After the reader stopped and [`STEPS_AFTER_READER`] more steps.
    wal_after_reader_bytes: u64,
    /// After the host was dropped (the reader's connection still open).
    wal_at_return_bytes: u64,
    after_reader_vs_peak: f64,
    at_return_vs_peak: f64,
}

/// Run the WAL benchmark with `steps` steps and print the report.
pub(crate) async fn run(out: &Out, steps: u32) -> u8 {
    let dir = std::env::temp_dir().join(format!("capsaga-bench-wal-{}", uuid::Uuid::new_v4()));
    let r = measure(&dir, steps.max(1)).await;
    let _ = std::fs::remove_dir_all(&dir);
    match r {
        Ok(report) if out.json => {
            out.json(&report);
            exit::OK
        }
        Ok(r) => {
            let mib = |b: u64| b as f64 / (1024.0 * 1024.0);
            outln!(
                "wal: {} steps in {} sagas, {:.1} s ({:.0} steps/s), a reader holding snapshots of {READER_HOLD_MS} ms throughout",
                r.steps,
                r.sagas,
                r.wall_s,
                r.steps_per_s
            );
            outln!(
                "  -wal peak while the reader held snapshots: {:.2} MiB (baseline)",
                mib(r.wal_peak_bytes)
            );
            outln!(
                "  -wal after the reader stopped (+{STEPS_AFTER_READER} steps): {:.2} MiB ({:.3} x peak)",
                mib(r.wal_after_reader_bytes),
                r.after_reader_vs_peak
            );
            outln!(
                "  -wal when the command returns: {:.2} MiB ({:.3} x peak; journal_size_limit {:.0} MiB, checkpoint past {:.0} MiB)",
                mib(r.wal_at_return_bytes),
                r.at_return_vs_peak,
                mib(r.journal_size_limit_bytes),
                mib(r.checkpoint_threshold_bytes)
            );
            exit::OK
        }
        Err(e) => {
            errln!("capsaga-bench --wal: {e}");
            exit::INTERNAL
        }
    }
}

pub(super) fn workspace(dir: &Path) -> Result<PathBuf, String> {
    std::fs::create_dir_all(dir.join("tools")).map_err(|e| e.to_string())?;
    let config = dir.join("capsaga.toml");
    std::fs::write(
        &config,
        "home = \".\"\ntools_dir = \"tools\"\nstate_dir = \".capsaga\"\n[tools.bench_step]\n",
    )
    .map_err(|e| e.to_string())?;
    Ok(config)
}

/// One saga of `n` steps of the built-in `tool` (a [`Nop`] under its
/// name, args `{"n": first..}`) through the door, each committed.
pub(super) async fn saga(door: &Dispatcher, tool: &str, first: u32, n: u32) -> Result<(), String> {
    let mut saga = door
        .start(Scope::Call, &format!("bench {tool}"), None)
        .await
        .map_err(|e| e.to_string())?;
    for i in first..first + n {
        let args = json!({ "n": i });
        let s = door
            .submit(&mut saga, Call::new(tool, Args::Value(&args)))
            .await
            .map_err(|e| e.to_string())?;
        if !matches!(s.outcome, Outcome::Committed { .. }) {
            return Err(format!("step {i}: {:?}", s.outcome));
        }
    }
    door.finish(&mut saga).await.map_err(|e| e.to_string())?;
    Ok(())
}

async fn measure(dir: &Path, steps: u32) -> Result<WalReport, String> {
    let config = workspace(dir)?;
    let host = Host::open(&config).await.map_err(|e| e.to_string())?;
    host.registry
        .register_builtin(&host.sandbox, &host.config.policy, Arc::new(Nop))
        .map_err(|e| e.to_string())?;
    let db = host.config.db_path();
    let door = Dispatcher::new(Arc::clone(&host));
    let stop = Arc::new(AtomicBool::new(false));
    let reader = {
        let (stop, db) = (Arc::clone(&stop), db.clone());
        std::thread::spawn(move || -> Result<SnapshotReader, String> {
            let mut r = SnapshotReader::open(&db).map_err(|e| e.to_string())?;
            while !stop.load(Ordering::Relaxed) {
                r.hold().map_err(|e| e.to_string())?;
                std::thread::sleep(Duration::from_millis(READER_HOLD_MS));
            }
            r.release().map_err(|e| e.to_string())?;
            Ok(r)
        })
    };
    let started = Instant::now();
    let (mut done, mut sagas, mut peak) = (0, 0, 0);
    while done < steps {
        let n = STEPS_PER_SAGA.min(steps - done);
        saga(&door, "bench_step", done, n).await?;
        done += n;
        sagas += 1;
        peak = peak.max(wal_bytes(&db));
    }
    let wall_s = started.elapsed().as_secs_f64();
    stop.store(true, Ordering::Relaxed);
    let idle_reader = reader
        .join()
        .map_err(|_| "the reader thread panicked".to_string())??;
    saga(&door, "bench_step", done, STEPS_AFTER_READER).await?;
    let after_reader = wal_bytes(&db);
    drop(door);
    drop(host);
    let at_return = wal_bytes(&db);
    drop(idle_reader);
    let ratio = |b: u64| b as f64 / peak.max(1) as f64;
    Ok(WalReport {
        steps,
        sagas,
        wall_s,
        steps_per_s: f64::from(steps) / wall_s.max(1e-9),
        journal_size_limit_bytes: JOURNAL_SIZE_LIMIT_BYTES,
        checkpoint_threshold_bytes: CHECKPOINT_THRESHOLD_BYTES,
        wal_peak_bytes: peak,
        wal_after_reader_bytes: after_reader,
        wal_at_return_bytes: at_return,
        after_reader_vs_peak: ratio(after_reader),
        at_return_vs_peak: ratio(at_return),
    })
}
