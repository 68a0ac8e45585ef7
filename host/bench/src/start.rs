//! `capsaga-bench --first-start`: what the first `capsaga call` on a fresh
//! state costs, next to the same call with a warm compiled cache, measured
//! in one run (issue 30, part 3).
//!
//! Real processes of the `capsaga` binary (`--capsaga-bin`, default the
//! one beside `capsaga-bench`), each `capsaga --config <ws> call
//! time_now {}`, on a fresh workspace in a temporary directory whose tools
//! directory holds every component of `--tools-dir` (the first-party tools:
//! 11 components). Figures, wall time of the processes:
//! 1. one process on a cold compiled cache (it reads every component's meta
//!    with the baseline compiler and compiles `time_now` only:
//!    `sandbox::meta`), next to one on the cache that run left (warm), and
//!    to one on a cold cache with `meta_compiler = "cranelift"` (every
//!    component compiled for calls at load: the host before the baseline
//!    compiler);
//! 2. `--processes` processes started together on a cold cache (one
//!    reads each meta and one compiles `time_now`, the others wait for
//!    their entries: `sandbox::cache`), next to as many on a warm cache;
//!    and how many meta reads and compilations the processes announced in
//!    all (one per component is the goal).

use super::render::Out;
use serde::Serialize;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Instant;

/// One measured start.
#[derive(Debug, Serialize)]
struct Start {
    /// Wall time until every process exited, ms.
    wall_ms: f64,
    /// Compilations (Cranelift, kept for calls) the processes announced on
    /// stderr, in all.
    compilations: usize,
    /// Metas read through the baseline compiler the processes announced on
    /// stderr, in all.
    meta_reads: usize,
}

/// The report.
#[derive(Debug, Serialize)]
struct StartReport {
    machine: String,
    components: usize,
    processes: usize,
    cold_one: Start,
    /// One process on a cold cache, `meta_compiler = "cranelift"`.
    cold_one_cranelift: Start,
    warm_one: Start,
    cold_many: Start,
    warm_many: Start,
    /// cold_one / warm_one.
    ratio_one: f64,
    /// cold_one_cranelift / cold_one.
    ratio_baseline: f64,
    /// cold_many / warm_many.
    ratio_many: f64,
}

/// `capsaga-bench --first-start`, starting `capsaga_bin` (default: the
/// `capsaga` beside this binary).
pub(crate) async fn run(
    out: &Out,
    tools_dir: &Path,
    processes: usize,
    capsaga_bin: Option<&Path>,
) -> u8 {
    let dir = std::env::temp_dir().join(format!("capsaga-bench-start-{}", uuid::Uuid::new_v4()));
    let r = capsaga_exe(capsaga_bin)
        .and_then(|exe| measure(&exe, &dir, tools_dir, processes.clamp(1, 256)));
    let _ = std::fs::remove_dir_all(&dir);
    crate::report(out, "--first-start", r, print)
}

fn print(r: &StartReport) {
    outln!(
        "first start ({}), `capsaga call time_now` with {} components in the tools directory:",
        r.machine,
        r.components
    );
    let line = |what: &str, s: &Start| {
        outln!(
            "  {what:<44} {:>9.1} ms until the last exited, {} meta read(s), {} compilation(s)",
            s.wall_ms,
            s.meta_reads,
            s.compilations
        );
    };
    line("one process, cold cache", &r.cold_one);
    line(
        "one process, cold cache, metas by Cranelift",
        &r.cold_one_cranelift,
    );
    line("one process, warm cache", &r.warm_one);
    line(
        &format!("{} processes together, cold cache", r.processes),
        &r.cold_many,
    );
    line(
        &format!("{} processes together, warm cache", r.processes),
        &r.warm_many,
    );
    outln!(
        "  cold / warm: {:.1} x for one process, {:.1} x for {} together",
        r.ratio_one,
        r.ratio_many,
        r.processes
    );
    outln!(
        "  cold, metas by Cranelift / by the baseline compiler: {:.1} x",
        r.ratio_baseline
    );
}

/// A fresh workspace under `dir` whose tools directory holds copies of the
/// components of `tools_dir`; returns its config file and the count.
fn workspace(dir: &Path, tools_dir: &Path, extra: &str) -> Result<(PathBuf, usize), String> {
    let tools = dir.join("tools");
    std::fs::create_dir_all(&tools).map_err(|e| format!("{}: {e}", tools.display()))?;
    let mut n = 0;
    let entries =
        std::fs::read_dir(tools_dir).map_err(|e| format!("{}: {e}", tools_dir.display()))?;
    for e in entries.flatten() {
        let p = e.path();
        if p.extension().is_some_and(|x| x == "wasm") {
            let to = tools.join(e.file_name());
            std::fs::copy(&p, &to).map_err(|e| format!("{}: {e}", p.display()))?;
            n += 1;
        }
    }
    if n == 0 || !tools.join("time_now.wasm").exists() {
        return Err(format!(
            "{} holds no time_now.wasm (build it with scripts/build-components)",
            tools_dir.display()
        ));
    }
    let config = dir.join("capsaga.toml");
    std::fs::write(
        &config,
        format!(
            "home = \".\"\ntools_dir = \"tools\"\nstate_dir = \".capsaga\"\n{extra}[tools.time_now]\n"
        ),
    )
    .map_err(|e| e.to_string())?;
    Ok((config, n))
}

/// The `capsaga` binary: `given`, or the one beside this binary.
pub(crate) fn capsaga_exe(given: Option<&Path>) -> Result<PathBuf, String> {
    if let Some(p) = given {
        return Ok(p.to_path_buf());
    }
    let me = std::env::current_exe().map_err(|e| e.to_string())?;
    let exe = me.with_file_name(format!("capsaga{}", std::env::consts::EXE_SUFFIX));
    if exe.is_file() {
        Ok(exe)
    } else {
        Err(format!(
            "no capsaga binary at {} (build it: cargo build -p capsaga --bin capsaga, or give --capsaga-bin)",
            exe.display()
        ))
    }
}

/// Start `n` processes of `exe` together, wait for all.
fn start(exe: &Path, config: &Path, n: usize) -> Result<Start, String> {
    let t0 = Instant::now();
    let children = (0..n)
        .map(|_| {
            Command::new(exe)
                .arg("--config")
                .arg(config)
                .args(["--json", "call", "time_now", "{}"])
                .env_remove("CAPSAGA_CONFIG")
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::piped())
                .spawn()
                .map_err(|e| e.to_string())
        })
        .collect::<Result<Vec<_>, _>>()?;
    let (mut compilations, mut meta_reads) = (0, 0);
    for c in children {
        let out = c.wait_with_output().map_err(|e| e.to_string())?;
        let err = String::from_utf8_lossy(&out.stderr);
        if !out.status.success() {
            return Err(format!(
                "capsaga call time_now failed: {}",
                err.chars().take(500).collect::<String>()
            ));
        }
        compilations += err
            .lines()
            .filter(|l| l.starts_with("capsaga: compiling component "))
            .count();
        meta_reads += err
            .lines()
            .filter(|l| l.starts_with("capsaga: reading the meta of component "))
            .count();
    }
    Ok(Start {
        wall_ms: t0.elapsed().as_secs_f64() * 1000.0,
        compilations,
        meta_reads,
    })
}

fn measure(
    exe: &Path,
    dir: &Path,
    tools_dir: &Path,
    processes: usize,
) -> Result<StartReport, String> {
    let fresh = |name: &str| workspace(&dir.join(name), tools_dir, "");
    let (one, components) = fresh("one")?;
    let cold_one = start(exe, &one, 1)?;
    let (cranelift, _) = workspace(
        &dir.join("cranelift"),
        tools_dir,
        "meta_compiler = \"cranelift\"\n",
    )?;
    let cold_one_cranelift = start(exe, &cranelift, 1)?;
    let warm_one = start(exe, &one, 1)?;
    let (many, _) = fresh("many")?;
    let cold_many = start(exe, &many, processes)?;
    let warm_many = start(exe, &many, processes)?;
    Ok(StartReport {
        machine: super::machine(),
        components,
        processes,
        ratio_one: cold_one.wall_ms / warm_one.wall_ms.max(0.001),
        ratio_many: cold_many.wall_ms / warm_many.wall_ms.max(0.001),
        ratio_baseline: cold_one_cranelift.wall_ms / cold_one.wall_ms.max(0.001),
        cold_one,
        cold_one_cranelift,
        warm_one,
        cold_many,
        warm_many,
    })
}
