//! `capsaga-bench --fs-rollback`: what the host's file journal (issue 28)
//! costs, as ratios against the same work without it, measured in one run.
//!
//! A fresh workspace in a temporary directory and the `fs_churn` test
//! component (it runs file operations through the guest's WASI
//! filesystem), called through the dispatch door by three hosts over the
//! same files: host rollback off (the baseline), on with the default sync
//! (`destructive`), and on with `journal_sync = "every"`. Rounds alternate
//! between them; figures are medians.
//!
//! 1. A step writing 100 new small files (1 KiB each, in a new directory):
//!    the whole door step (dry run, BEGIN, execute, the journal's seal,
//!    COMMIT), journaled against not. Goal ≤ 1.3×.
//! 2. A step overwriting 100 existing files of 4 KiB (each pre-image is
//!    copied and synced before its file is truncated).
//! 3. The restore of step 2's journal (plan, 100 files rewritten by rename,
//!    progress notes, `syncfs`, the final note synced), next to the floor
//!    of writing the same 100 files directly (without and with one
//!    `syncfs`). Goal ≤ 5 ms.
//! 4. A step rewriting one 64 MiB file, journaled against not, and its
//!    restore.

use capsaga::render::Out;
use capsaga_door::dispatch::{Args, Call, Dispatcher, Outcome, Scope};
use capsaga_door::host::Host;
use capsaga_guest_fs::journal::{JournalConfig, SyncMode};
use capsaga_guest_fs::{Expected, Roots, StepJournal};
use serde::Serialize;
use serde_json::{Value, json};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Rounds of each measured path.
const ROUNDS: usize = 11;
/// Rounds of the 64 MiB rewrite.
const BIG_ROUNDS: usize = 3;
/// Files per step.
const FILES: u32 = 100;
/// Size of the big file.
const BIG: u64 = 64 * 1024 * 1024;

/// A step, without and with the journal.
#[derive(Debug, Serialize)]
struct Pair {
    without_ms: f64,
    journaled_ms: f64,
    ratio: f64,
    journaled_sync_every_ms: Option<f64>,
    ratio_sync_every: Option<f64>,
}

/// The restore of a journal, next to the floor.
#[derive(Debug, Serialize)]
struct Restore {
    restore_ms: f64,
    floor_write_ms: f64,
    floor_write_syncfs_ms: f64,
    ratio_to_floor_with_syncfs: f64,
}

#[derive(Debug, Serialize)]
struct FsReport {
    machine: String,
    new_files: Pair,
    overwrites: Pair,
    restore_100: Restore,
    big_rewrite: Pair,
    big_restore_ms: f64,
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v.get(v.len() / 2).copied().unwrap_or(f64::NAN)
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

/// Run the benchmark with the `fs_churn` component at `churn`.
pub(crate) async fn run(out: &Out, churn: &Path) -> u8 {
    let dir = std::env::temp_dir().join(format!("capsaga-bench-fs-{}", uuid::Uuid::new_v4()));
    let r = measure(&dir, churn).await;
    let _ = std::fs::remove_dir_all(&dir);
    crate::report(out, "--fs-rollback", r, print)
}

fn print(r: &FsReport) {
    outln!("fs rollback ({}), medians of {ROUNDS} rounds:", r.machine);
    let pair = |what: &str, p: &Pair| {
        outln!(
            "  {what}: {:.2} ms without the journal, {:.2} ms journaled ({:.2} x){}",
            p.without_ms,
            p.journaled_ms,
            p.ratio,
            match (p.journaled_sync_every_ms, p.ratio_sync_every) {
                (Some(m), Some(x)) =>
                    format!(", {m:.2} ms with journal_sync = \"every\" ({x:.2} x)"),
                _ => String::new(),
            }
        );
    };
    pair(
        &format!("a step writing {FILES} new files of 1 KiB"),
        &r.new_files,
    );
    pair(
        &format!("a step overwriting {FILES} files of 4 KiB"),
        &r.overwrites,
    );
    let x = &r.restore_100;
    outln!(
        "  restoring those {FILES} files: {:.2} ms; writing them directly: {:.2} ms, with one syncfs {:.2} ms ({:.2} x that floor)",
        x.restore_ms,
        x.floor_write_ms,
        x.floor_write_syncfs_ms,
        x.ratio_to_floor_with_syncfs
    );
    pair("a step rewriting one 64 MiB file", &r.big_rewrite);
    outln!("  restoring the 64 MiB file: {:.1} ms", r.big_restore_ms);
}

/// Three hosts over one workspace: rollback off, on, on with every record
/// synced.
async fn hosts(dir: &Path, churn: &Path) -> Result<[Arc<Host>; 3], String> {
    let e = |e: std::io::Error| e.to_string();
    std::fs::create_dir_all(dir.join("tools")).map_err(e)?;
    std::fs::create_dir_all(dir.join("ws")).map_err(e)?;
    std::fs::copy(churn, dir.join("tools/fs_churn.wasm")).map_err(|x| {
        format!(
            "cannot read {}: {x} (build it with scripts/build-components)",
            churn.display()
        )
    })?;
    let mut out = Vec::new();
    for (name, fs) in [
        ("off", "host_rollback = false"),
        ("on", "host_rollback = true"),
        ("every", "host_rollback = true\njournal_sync = \"every\""),
    ] {
        let config = dir.join(format!("{name}.toml"));
        std::fs::write(
            &config,
            format!(
                "home = \".\"\ntools_dir = \"tools\"\nstate_dir = \"state-{name}\"\ncompiled_cache = \"cache\"\n\
                 [fs]\n{fs}\n[tools.fs_churn]\ngrants = [\"fs:write:~/ws/**\"]\n\
                 limits = {{ deadline_ms = 120000, memory_bytes = 402653184, output_bytes = 1048576 }}\n"
            ),
        )
        .map_err(e)?;
        out.push(Host::open(&config).await.map_err(|e| e.to_string())?);
    }
    let [a, b, c]: [Arc<Host>; 3] = out.try_into().map_err(|_| "three hosts".to_string())?;
    Ok([a, b, c])
}

/// One step of `fs_churn` with `ops` in a new saga, timed; the saga is
/// finished (Done) afterwards. Returns the time and the saga id.
async fn step(host: &Arc<Host>, ops: Value) -> Result<(Duration, String), String> {
    let door = Dispatcher::new(Arc::clone(host));
    let mut saga = door
        .start(Scope::Call, "bench --fs-rollback", None)
        .await
        .map_err(|e| e.to_string())?;
    let args = json!({ "ops": ops });
    let t0 = Instant::now();
    let s = door
        .submit(&mut saga, Call::new("fs_churn", Args::Value(&args)))
        .await
        .map_err(|e| e.to_string())?;
    let took = t0.elapsed();
    if !matches!(s.outcome, Outcome::Committed { .. }) {
        return Err(format!("the step did not commit: {:?}", s.outcome));
    }
    door.finish(&mut saga).await.map_err(|e| e.to_string())?;
    Ok((took, saga.id().to_string()))
}

fn path(dir: &Path, rel: &str) -> String {
    dir.join("ws").join(rel).to_string_lossy().into_owned()
}

/// Restore the journal of step 0 of `saga` under `host`'s state directory;
/// the time it took.
fn restore(host: &Host, dir: &Path, saga: &str) -> Result<Duration, String> {
    let cfg = JournalConfig {
        dir: host.config.state_dir.join("fs-journal"),
        call_cap_bytes: u64::MAX,
        saga_cap_bytes: u64::MAX,
        sync: SyncMode::Destructive,
    };
    let ws = dir.join("ws").to_string_lossy().into_owned();
    let t0 = Instant::now();
    let mut j = StepJournal::reopen(&cfg, saga, 0, Roots::default())
        .map_err(|e| e.to_string())?
        .ok_or("no journal")?;
    let plan = j.plan(&Expected::new()).map_err(|e| e.to_string())?;
    let report = j.restore(&plan, &[ws]);
    let took = t0.elapsed();
    if !report.clean {
        return Err(format!("the restore left paths: {:?}", report.problems()));
    }
    Ok(took)
}

fn pair(without: Vec<f64>, with: Vec<f64>, every: Option<Vec<f64>>) -> Pair {
    let (w, j) = (median(without), median(with));
    let e = every.map(median);
    Pair {
        without_ms: w,
        journaled_ms: j,
        ratio: j / w,
        journaled_sync_every_ms: e,
        ratio_sync_every: e.map(|e| e / w),
    }
}

async fn measure(dir: &Path, churn: &Path) -> Result<FsReport, String> {
    let hosts = hosts(dir, churn).await?;
    let e = |e: std::io::Error| e.to_string();
    // Warm up each host (instance pools, the first journal directories).
    for (i, h) in hosts.iter().enumerate() {
        let d = path(dir, &format!("warm{i}"));
        step(
            h,
            json!([{"op": "mkdir", "path": d}, {"op": "many", "dir": d, "count": 3, "size": 10}]),
        )
        .await?;
    }
    // 1. New files.
    let mut new = [Vec::new(), Vec::new(), Vec::new()];
    for round in 0..ROUNDS {
        for (i, h) in hosts.iter().enumerate() {
            let d = path(dir, &format!("new-{round}-{i}"));
            let ops = json!([{"op": "mkdir", "path": d}, {"op": "many", "dir": d, "count": FILES, "size": 1024}]);
            new[i].push(ms(step(h, ops).await?.0));
            std::fs::remove_dir_all(&d).map_err(e)?;
        }
    }
    // 2. Overwrites, and 3. their restore.
    let old = dir.join("ws/old");
    let fill = |d: &PathBuf| -> Result<(), String> {
        std::fs::create_dir_all(d).map_err(|x| x.to_string())?;
        for f in 0..FILES {
            std::fs::write(d.join(format!("f{f}")), [b'o'; 4096]).map_err(|x| x.to_string())?;
        }
        Ok(())
    };
    fill(&old)?;
    let mut over = [Vec::new(), Vec::new(), Vec::new()];
    let (mut restores, mut floor, mut floor_sync) = (Vec::new(), Vec::new(), Vec::new());
    for _ in 0..ROUNDS {
        for (i, h) in hosts.iter().enumerate() {
            let ops =
                json!([{"op": "many", "dir": old.to_string_lossy(), "count": FILES, "size": 4096}]);
            let (took, saga) = step(h, ops).await?;
            over[i].push(ms(took));
            if i == 1 {
                restores.push(ms(restore(h, dir, &saga)?));
            } else {
                fill(&old)?;
            }
        }
        let d = dir.join("ws/floor");
        let _ = std::fs::remove_dir_all(&d);
        let t0 = Instant::now();
        fill(&d)?;
        floor.push(ms(t0.elapsed()));
        std::fs::remove_dir_all(&d).map_err(e)?;
        let t0 = Instant::now();
        fill(&d)?;
        let f = std::fs::File::open(&d).map_err(e)?;
        rustix::fs::syncfs(&f).map_err(|x| x.to_string())?;
        floor_sync.push(ms(t0.elapsed()));
        std::fs::remove_dir_all(&d).map_err(e)?;
    }
    // 4. The 64 MiB file.
    let big = dir.join("ws/big.bin");
    std::fs::write(&big, vec![b'b'; BIG as usize]).map_err(e)?;
    let mut bigs = [Vec::new(), Vec::new()];
    let mut big_restore = Vec::new();
    for _ in 0..BIG_ROUNDS {
        for (i, h) in hosts[..2].iter().enumerate() {
            let ops = json!([{"op": "write", "path": big.to_string_lossy(), "size": BIG}]);
            let (took, saga) = step(h, ops).await?;
            bigs[i].push(ms(took));
            if i == 1 {
                big_restore.push(ms(restore(h, dir, &saga)?));
            } else {
                std::fs::write(&big, vec![b'b'; BIG as usize]).map_err(e)?;
            }
        }
    }
    let [n0, n1, n2] = new;
    let [o0, o1, o2] = over;
    let [b0, b1] = bigs;
    let (r, f, fs) = (median(restores), median(floor), median(floor_sync));
    Ok(FsReport {
        machine: super::machine(),
        new_files: pair(n0, n1, Some(n2)),
        overwrites: pair(o0, o1, Some(o2)),
        restore_100: Restore {
            restore_ms: r,
            floor_write_ms: f,
            floor_write_syncfs_ms: fs,
            ratio_to_floor_with_syncfs: r / fs,
        },
        big_rewrite: pair(b0, b1, None),
        big_restore_ms: median(big_restore),
    })
}
