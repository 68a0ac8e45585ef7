//! `capsaga-bench --console`: the operator console's server render time
//! (issue 29) over a large state: `--console-sagas` sagas (default
//! 100,000) of which 1,000 wait on an approval. A real `capsaga serve` on
//! 127.0.0.1 (a free port), signed in as the loopback operator, each page
//! fetched [`ROUNDS`] times over one keep-alive connection after a warm-up;
//! figures are p50/p95 milliseconds from request to the last byte, and the
//! p95 as a ratio to the baseline measured in the same run: the console's
//! static stylesheet (the same server, router, middleware and connection,
//! no store read, no rendering). Pages: the approvals queue (first page of
//! 50 of 1,000), the sagas list (first page, a page 50,000 rows deep, and
//! filtered by state and by tool), one saga's timeline.
//!
//! The state database lives under `/dev/shm` when there is one (seeding
//! is then CPU-bound, not fsync-bound).
//!
//! Nothing of the console runs on a tool call's path: the door has no hook
//! for it, and only an open `/console/events` stream reads the store (the
//! pending count, once a second per open stream). The bench measures it:
//! [`CALLS`] one-step sagas of a built-in with a side effect through the
//! door, after the pages: with the server and its console up and nobody
//! watching, with one operator's `/console/events` stream open, and once
//! the server stopped (the baseline).

use capsaga::exit;
use capsaga::render::Out;
use capsaga_core::principal::{Principal, Role};
use capsaga_door::dispatch::{Args, Call, Dispatcher, Outcome, Scope};
use capsaga_door::host::Host;
use capsaga_door::registry::BuiltinTool;
use capsaga_server::{HttpOptions, serve_http};
use serde::Serialize;
use serde_json::json;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Measured fetches per page (after 3 warm-up ones).
const ROUNDS: usize = 60;
/// Approvals pending among the sagas.
const PENDING: usize = 1000;
/// One-step sagas per tool-call figure.
const CALLS: usize = 1000;

/// `bench_step` under another name the policy lets run without a human
/// (the tool calls timed while nobody or someone watches the console).
struct Free;

#[async_trait::async_trait]
impl BuiltinTool for Free {
    fn meta(&self) -> capsaga_core::meta::RawToolMeta {
        let mut meta = super::wal::Nop.meta();
        meta.name = "bench_free".into();
        meta
    }

    async fn call(
        &self,
        op: &capsaga_sandbox::Op,
        ctx: &capsaga_core::tool::CallContext,
        args: &serde_json::Value,
        bindings: &capsaga_sandbox::Bindings,
    ) -> Result<Option<capsaga_core::tool::ToolOutput>, capsaga_core::error::ToolError> {
        super::wal::Nop.call(op, ctx, args, bindings).await
    }
}

/// A tool call's time through the door in one condition.
#[derive(Debug, Serialize)]
struct CallFigure {
    condition: String,
    p50_ms: f64,
    p95_ms: f64,
    /// p50 over the baseline's (no server) p50.
    x_baseline_p50: f64,
}

/// [`CALLS`] one-step sagas of `bench_free` (start, the call, finish),
/// each timed in ms.
async fn calls(host: &Arc<Host>) -> Result<Vec<f64>, String> {
    let door = Dispatcher::new(Arc::clone(host));
    let mut v = Vec::with_capacity(CALLS);
    for i in 0..CALLS {
        let t = Instant::now();
        super::wal::saga(&door, "bench_free", i as u32, 1).await?;
        v.push(t.elapsed().as_secs_f64() * 1e3);
    }
    Ok(v)
}

fn call_figure(condition: &str, mut v: Vec<f64>, base_p50: Option<f64>) -> CallFigure {
    let p50 = pct(&mut v, 0.5);
    let base = base_p50.unwrap_or(p50);
    CallFigure {
        condition: condition.into(),
        p50_ms: p50,
        p95_ms: pct(&mut v, 0.95),
        x_baseline_p50: if base > 0.0 { p50 / base } else { 0.0 },
    }
}

#[derive(Debug, Serialize)]
struct PageFigure {
    page: String,
    p50_ms: f64,
    p95_ms: f64,
    /// p95 over the baseline's p95.
    x_baseline_p95: f64,
    bytes: usize,
}

#[derive(Debug, Serialize)]
struct Report {
    sagas: usize,
    pending_approvals: usize,
    seed_s: f64,
    rounds: usize,
    baseline: PageFigure,
    pages: Vec<PageFigure>,
    /// Tool calls: no server (the baseline), console up and unwatched,
    /// one events stream open.
    tool_calls: Vec<CallFigure>,
}

fn pct(v: &mut [f64], p: f64) -> f64 {
    v.sort_by(f64::total_cmp);
    let i = ((v.len() as f64 - 1.0) * p).round() as usize;
    v.get(i).copied().unwrap_or(0.0)
}

/// Seed `n` sagas through the door, the first [`PENDING`] parked on an
/// approval of one `bench_step` call (the policy asks a human for it),
/// the others just started.
async fn seed(host: &Arc<Host>, n: usize) -> Result<(), String> {
    let door = Dispatcher::new(Arc::clone(host));
    let (alice, bob) = (
        Principal::new("token:alice", Role::Operator),
        Principal::new("token:bob", Role::Client),
    );
    for i in 0..n {
        let who = if i % 2 == 0 { &alice } else { &bob };
        let label = format!("bench saga {i}");
        let mut saga = door
            .start_as(who, Scope::Plan, &label, None)
            .await
            .map_err(|e| e.to_string())?;
        if i < PENDING {
            let args = json!({ "n": i });
            let s = door
                .submit(&mut saga, Call::new("bench_step", Args::Value(&args)))
                .await
                .map_err(|e| e.to_string())?;
            if !matches!(s.outcome, Outcome::AwaitingApproval { .. }) {
                return Err(format!("saga {i}: not parked: {:?}", s.outcome));
            }
        }
    }
    Ok(())
}

async fn fetch(c: &reqwest::Client, url: &str, cookie: &str) -> Result<(f64, usize), String> {
    let t = Instant::now();
    let r = c
        .get(url)
        .header("cookie", cookie)
        .send()
        .await
        .map_err(|e| e.to_string())?;
    if !r.status().is_success() {
        return Err(format!("{url}: {}", r.status()));
    }
    let body = r.bytes().await.map_err(|e| e.to_string())?;
    Ok((t.elapsed().as_secs_f64() * 1e3, body.len()))
}

async fn measure(
    c: &reqwest::Client,
    base: &str,
    path: &str,
    cookie: &str,
) -> Result<(Vec<f64>, usize), String> {
    let url = format!("{base}{path}");
    let mut bytes = 0;
    for _ in 0..3 {
        bytes = fetch(c, &url, cookie).await?.1;
    }
    let mut v = Vec::with_capacity(ROUNDS);
    for _ in 0..ROUNDS {
        v.push(fetch(c, &url, cookie).await?.0);
    }
    Ok((v, bytes))
}

/// The bench's host: its state in memory when /dev/shm exists (seeding
/// 100,000 sagas one durable transaction each would take minutes of fsync,
/// and the figures are render times, not commit times), with the bench's
/// built-in tools. The directory lives as long as the host is used.
async fn bench_host() -> Result<(tempfile::TempDir, Arc<Host>), String> {
    let shm = std::path::Path::new("/dev/shm");
    let dir = if shm.is_dir() {
        tempfile::tempdir_in(shm)
    } else {
        tempfile::tempdir()
    }
    .map_err(|e| e.to_string())?;
    let config = dir.path().join("capsaga.toml");
    std::fs::create_dir_all(dir.path().join("tools")).map_err(|e| e.to_string())?;
    std::fs::write(
        &config,
        "home = \".\"\ntools_dir = \"tools\"\nstate_dir = \"state\"\ncompiled_cache = \"cache\"\n\
         [tools.bench_step]\napproval = \"always\"\n[tools.bench_free]\n",
    )
    .map_err(|e| e.to_string())?;
    let host = Host::open(&config).await.map_err(|e| e.to_string())?;
    host.registry
        .register_builtin(
            &host.sandbox,
            &host.config.policy,
            Arc::new(super::wal::Nop),
        )
        .map_err(|e| e.to_string())?;
    host.registry
        .register_builtin(&host.sandbox, &host.config.policy, Arc::new(Free))
        .map_err(|e| e.to_string())?;
    Ok((dir, host))
}

/// Sign in to the console as the loopback operator: the session cookie.
async fn sign_in(c: &reqwest::Client, base: &str) -> Result<String, String> {
    // The loopback operator (no token exists): an empty token.
    let r = c
        .post(format!("{base}/console/login"))
        .header("content-type", "application/x-www-form-urlencoded")
        .body("token=")
        .send()
        .await
        .map_err(|e| e.to_string())?;
    let cookie = r
        .headers()
        .get("set-cookie")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.split(';').next())
        .ok_or("no session cookie from the sign-in")?
        .to_string();
    Ok(cookie)
}

/// The figures of each page of `paths`, against the baseline's p95.
async fn page_figures(
    c: &reqwest::Client,
    base: &str,
    cookie: &str,
    paths: &[&str],
    base_p95: f64,
) -> Result<Vec<PageFigure>, String> {
    let mut pages = Vec::new();
    for path in paths {
        let (mut v, bytes) = measure(c, base, path, cookie).await?;
        let p95 = pct(&mut v, 0.95);
        pages.push(PageFigure {
            page: path.to_string(),
            p50_ms: pct(&mut v, 0.5),
            p95_ms: p95,
            x_baseline_p95: if base_p95 > 0.0 { p95 / base_p95 } else { 0.0 },
            bytes,
        });
    }
    Ok(pages)
}

/// The baseline page: the console's static stylesheet (no store read).
async fn baseline_figure(
    c: &reqwest::Client,
    base: &str,
    cookie: &str,
) -> Result<PageFigure, String> {
    let (mut b, bytes) = measure(c, base, "/console/static/console.css", cookie).await?;
    Ok(PageFigure {
        page: "baseline: /console/static/console.css".into(),
        p95_ms: pct(&mut b, 0.95),
        p50_ms: pct(&mut b, 0.5),
        x_baseline_p95: 1.0,
        bytes,
    })
}

async fn run_inner(sagas: usize) -> Result<Report, String> {
    let (_dir, host) = bench_host().await?;
    let t = Instant::now();
    seed(&host, sagas).await?;
    let seed_s = t.elapsed().as_secs_f64();
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let (tx, rx) = tokio::sync::oneshot::channel();
    let o = HttpOptions::new("127.0.0.1:0".parse().map_err(|_| "address")?);
    let server = tokio::spawn({
        let host: Arc<Host> = host.clone();
        async move {
            serve_http(
                host,
                &o,
                async move {
                    let _ = stopped.await;
                },
                move |a| {
                    let _ = tx.send(a);
                },
            )
            .await
        }
    });
    let addr = rx.await.map_err(|_| "the server did not start")?;
    let base = format!("http://{addr}");
    // reqwest is built without a default TLS provider (plain HTTP here).
    let _ = rustls::crypto::ring::default_provider().install_default();
    let c = reqwest::Client::builder()
        .no_proxy()
        .redirect(reqwest::redirect::Policy::none())
        .timeout(Duration::from_secs(120))
        .build()
        .map_err(|e| e.to_string())?;
    let cookie = sign_in(&c, &base).await?;
    let one = host
        .store
        .sagas(1)
        .await
        .map_err(|e| e.to_string())?
        .into_iter()
        .next()
        .map(|s| s.saga_id)
        .unwrap_or_default();
    let baseline = baseline_figure(&c, &base, &cookie).await?;
    let base_p95 = baseline.p95_ms;
    let deep = format!("/console/sagas?offset={}", sagas / 2);
    let timeline = format!("/console/sagas/{one}");
    let pages = page_figures(
        &c,
        &base,
        &cookie,
        &[
            "/console/approvals",
            "/console/sagas",
            deep.as_str(),
            "/console/sagas?state=AwaitingApproval",
            "/console/sagas?principal=token%3Abob",
            "/console/sagas?tool=fs_write",
            timeline.as_str(),
        ],
        base_p95,
    )
    .await?;
    // The tool calls after the pages (their sagas would add to the
    // state the pages read). A warm-up, then the console up and nobody
    // watching (signed in, no page or stream open).
    calls(&host).await?;
    let unwatched = calls(&host).await?;
    // One operator watching: the events stream open, its first event read.
    let mut stream = c
        .get(format!("{base}/console/events"))
        .header("cookie", &cookie)
        .send()
        .await
        .map_err(|e| e.to_string())?;
    stream.chunk().await.map_err(|e| e.to_string())?;
    let watched = calls(&host).await?;
    drop(stream);
    let _ = stop.send(());
    let _ = server.await;
    // The baseline: the same calls with no server and no console.
    let alone = call_figure("no server (baseline)", calls(&host).await?, None);
    let base = Some(alone.p50_ms);
    let tool_calls = vec![
        call_figure("console up, nobody watching", unwatched, base),
        call_figure("one /console/events stream open", watched, base),
    ];
    let tool_calls = std::iter::once(alone).chain(tool_calls).collect();
    Ok(Report {
        sagas,
        pending_approvals: PENDING.min(sagas),
        seed_s,
        rounds: ROUNDS,
        baseline,
        pages,
        tool_calls,
    })
}

/// `capsaga-bench --console`.
pub(super) async fn run(out: &Out, sagas: usize) -> u8 {
    match run_inner(sagas).await {
        Ok(r) => {
            if out.json {
                out.json(&r);
            } else {
                println!(
                    "console render over {} sagas ({} pending approvals; seeded in {:.1} s), {} fetches each, server time to the last byte:",
                    r.sagas, r.pending_approvals, r.seed_s, r.rounds
                );
                for f in std::iter::once(&r.baseline).chain(&r.pages) {
                    println!(
                        "  {:<45} p50 {:>8.2} ms  p95 {:>8.2} ms  {:>7.1}x baseline p95  {:>7} bytes",
                        f.page, f.p50_ms, f.p95_ms, f.x_baseline_p95, f.bytes
                    );
                }
                println!(
                    "a tool call through the door ({CALLS} one-step sagas of a built-in each):"
                );
                for f in &r.tool_calls {
                    println!(
                        "  {:<45} p50 {:>8.3} ms  p95 {:>8.3} ms  {:>6.2}x baseline p50",
                        f.condition, f.p50_ms, f.p95_ms, f.x_baseline_p50
                    );
                }
            }
            exit::OK
        }
        Err(e) => {
            eprintln!("capsaga-bench --console: {e}");
            exit::INTERNAL
        }
    }
}
