//! `capsaga-bench`, shell part (issue 12): what running a shell pipeline
//! inside the `shell_run` component costs, against the same pipeline run by
//! the system's shell and coreutils in child processes, in the same run.
//!
//! - `grep -c foo big.txt | sort` over a generated 10 MB text file: the
//!   component (fresh instance, the file read through WASI, the pipeline
//!   run by shell_run's own interpreter and commands) against `sh -c` with
//!   the system's `grep` and `sort` (a process per command, native code);
//! - the per-call overhead of `shell_run` with a trivial script (`true`)
//!   against `time_now`, both through `Sandbox::call`.
//!
//! Paths are interleaved ([`ROUNDS`] rounds, one batch of each per round); a
//! ratio is the median of the per-round ratios. Nothing is asserted.

use capsaga_core::capability::Capability;
use capsaga_core::policy::Limits;
use capsaga_core::tool::CallContext;
use capsaga_sandbox::{Bindings, CallRequest, Op, Prepared, Sandbox, SandboxConfig};
use serde::Serialize;
use std::path::{Path, PathBuf};
use std::time::Instant;

/// Measured rounds.
const ROUNDS: usize = 7;

/// Size of the generated file, bytes.
const FILE_BYTES: usize = 10 * 1024 * 1024;

/// The pipeline of issue 12.
const SCRIPT: &str = "grep -c foo big.txt | sort";

/// The shell figures.
#[derive(Debug, Clone, Serialize)]
pub struct ShellReport {
    /// The shell_run component's size, bytes.
    pub component_bytes: u64,
    /// The script.
    pub script: String,
    /// Size of big.txt, bytes.
    pub file_bytes: u64,
    /// What both printed.
    pub stdout: String,
    /// shell_run, ms per run (median).
    pub shell_run_ms: f64,
    /// `sh -c` with the system's coreutils, ms per run (median).
    pub processes_ms: f64,
    /// Median of the per-round ratios shell_run / processes.
    pub shell_run_vs_processes: f64,
    /// shell_run with `true`, µs per call (median).
    pub shell_run_call_us: f64,
    /// time_now, µs per call (median).
    pub time_now_call_us: f64,
    /// Median of the per-round ratios shell_run(`true`) / time_now.
    pub call_overhead_vs_time_now: f64,
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn paired(a: &[f64], b: &[f64]) -> f64 {
    median(a.iter().zip(b).map(|(x, y)| x / y).collect())
}

/// Deterministic text: lines of pseudo-random words, about one in five
/// holding `foo`.
fn big_text() -> Vec<u8> {
    const WORDS: [&str; 12] = [
        "alpha", "bravo", "charlie", "delta", "echo", "foxtrot", "golf", "hotel", "india",
        "juliet", "kilo", "lima",
    ];
    let mut out = Vec::with_capacity(FILE_BYTES + 128);
    let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
    let mut line = 0u64;
    while out.len() < FILE_BYTES {
        line += 1;
        for w in 0..8 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let word = if w == 3 && x.is_multiple_of(5) {
                "foo"
            } else {
                WORDS[(x % 12) as usize]
            };
            out.extend_from_slice(word.as_bytes());
            out.push(if w == 7 { b'\n' } else { b' ' });
        }
        if line.is_multiple_of(1000) {
            out.extend_from_slice(format!("line {line}\n").as_bytes());
        }
    }
    out
}

struct Caller {
    sandbox: Sandbox,
    shell: Prepared,
    time_now: Prepared,
    bindings: Bindings,
    limits: Limits,
    ctx: CallContext,
}

impl Caller {
    async fn call(&self, prepared: &Prepared, args: &str) -> Result<serde_json::Value, String> {
        let (res, _) = self
            .sandbox
            .call(CallRequest {
                tool: "bench",
                prepared,
                bindings: &self.bindings,
                limits: &self.limits,
                ctx: &self.ctx,
                args_json: args,
                op: &Op::Execute,
            })
            .await;
        res.map_err(|e| format!("{}: {}", super::render::kind_name(e.kind), e.message))?
            .map(|o| o.data)
            .ok_or_else(|| "the call returned no output".to_owned())
    }
}

fn processes(dir: &Path) -> Result<String, String> {
    let out = std::process::Command::new("sh")
        .arg("-c")
        .arg(SCRIPT)
        .current_dir(dir)
        .output()
        .map_err(|e| format!("cannot run sh: {e}"))?;
    if !out.status.success() {
        return Err(format!("sh -c '{SCRIPT}' failed: {}", out.status));
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// Runs the shell benchmark; `None` when the shell_run component is missing.
///
/// # Errors
/// A failed call or process, with its reason.
pub(crate) async fn measure(
    shell_path: &Path,
    time_now: &[u8],
) -> Result<Option<ShellReport>, String> {
    let Ok(shell_bytes) = std::fs::read(shell_path) else {
        return Ok(None);
    };
    let dir: PathBuf =
        std::env::temp_dir().join(format!("capsaga-bench-shell-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let dir = dir.canonicalize().map_err(|e| e.to_string())?;
    let result = async {
        let text = big_text();
        std::fs::write(dir.join("big.txt"), &text).map_err(|e| e.to_string())?;
        let sandbox = Sandbox::with_config(&SandboxConfig::default()).map_err(|e| e.to_string())?;
        let grant = Capability::parse(&format!("fs:write:{}/**", dir.display()))
            .map_err(|e| e.to_string())?;
        let bindings = sandbox.factors().configure(&[grant]);
        let caller = Caller {
            shell: sandbox.prepare(&shell_bytes).map_err(|e| e.to_string())?,
            time_now: sandbox.prepare(time_now).map_err(|e| e.to_string())?,
            sandbox,
            bindings,
            limits: Limits::DEFAULT,
            ctx: CallContext {
                saga_id: "bench".into(),
                step_seq: 0,
                idempotency_key: "bench".into(),
                deadline_ms: u64::MAX,
                dry_run: false,
            },
        };
        let pipeline =
            serde_json::json!({"script": SCRIPT, "cwd": dir.display().to_string()}).to_string();
        let trivial =
            serde_json::json!({"script": "true", "cwd": dir.display().to_string()}).to_string();
        // Warm up, and check both give the same answer.
        let data = caller.call(&caller.shell, &pipeline).await?;
        let stdout = data["stdout"].as_str().unwrap_or_default().to_owned();
        let native = processes(&dir)?;
        if stdout != native {
            return Err(format!(
                "shell_run printed {stdout:?}, the system's shell {native:?}"
            ));
        }
        caller.call(&caller.time_now, "{}").await?;
        let (mut wasm, mut procs, mut shell_call, mut tn_call) = (vec![], vec![], vec![], vec![]);
        for _ in 0..ROUNDS {
            let t = Instant::now();
            for _ in 0..3 {
                caller.call(&caller.shell, &pipeline).await?;
            }
            wasm.push(t.elapsed().as_secs_f64() * 1e3 / 3.0);
            let t = Instant::now();
            for _ in 0..3 {
                processes(&dir)?;
            }
            procs.push(t.elapsed().as_secs_f64() * 1e3 / 3.0);
            let t = Instant::now();
            for _ in 0..100 {
                caller.call(&caller.shell, &trivial).await?;
            }
            shell_call.push(t.elapsed().as_secs_f64() * 1e6 / 100.0);
            let t = Instant::now();
            for _ in 0..100 {
                caller.call(&caller.time_now, "{}").await?;
            }
            tn_call.push(t.elapsed().as_secs_f64() * 1e6 / 100.0);
        }
        Ok(Some(ShellReport {
            component_bytes: shell_bytes.len() as u64,
            script: SCRIPT.into(),
            file_bytes: text.len() as u64,
            stdout,
            shell_run_ms: median(wasm.clone()),
            processes_ms: median(procs.clone()),
            shell_run_vs_processes: paired(&wasm, &procs),
            shell_run_call_us: median(shell_call.clone()),
            time_now_call_us: median(tn_call.clone()),
            call_overhead_vs_time_now: paired(&shell_call, &tn_call),
        }))
    }
    .await;
    let _ = std::fs::remove_dir_all(&dir);
    result
}

/// Prints the shell figures.
pub(crate) fn print(s: &ShellReport) {
    outln!();
    outln!(
        "  shell_run ({} bytes), {ROUNDS} interleaved rounds (medians):",
        s.component_bytes
    );
    outln!(
        "    `{}` over {:.1} MB (prints {:?}):",
        s.script,
        s.file_bytes as f64 / 1e6,
        s.stdout.trim_end()
    );
    outln!(
        "      shell_run component            {:>9.1} ms",
        s.shell_run_ms
    );
    outln!(
        "      sh + system coreutils (processes) {:>6.1} ms",
        s.processes_ms
    );
    outln!(
        "      shell_run / processes: {:.2}x",
        s.shell_run_vs_processes
    );
    outln!(
        "    per call: shell_run `true` {:.1} µs, time_now {:.1} µs: {:.2}x",
        s.shell_run_call_us,
        s.time_now_call_us,
        s.call_overhead_vs_time_now
    );
}
