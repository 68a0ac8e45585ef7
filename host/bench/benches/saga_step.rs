//! Saga step overhead against a raw SQLite durable commit, measured in the
//! same run (issue 4). Run with `cargo bench -p capsaga-bench --bench
//! saga_step` after `scripts/build-components`.
//!
//! - `sqlite_durable_commit`: the baseline, one INSERT committed in an
//!   IMMEDIATE transaction on a SQLite file in WAL mode with
//!   `synchronous = FULL` (what any durable log pays per record);
//! - `wal_begin_commit`: the two durable records of a step (BEGIN with the
//!   component hash, grants and arguments; COMMIT with the output), each
//!   hash-chained and anchored, as the saga engine writes them;
//! - `sandbox_call`: one `execute` of the read-only `time_now` component in a
//!   fresh instance, without a saga;
//! - `saga_step`: a whole step of the same call: policy, guardrail, BEGIN,
//!   the sandbox call, COMMIT.
//!
//! After criterion's report (each benchmark measured seconds after the
//! other, so fsync latency may differ between them), a summary measured in
//! the same process with the four paths interleaved prints the ratios: the
//! WAL records, the whole step and the engine's overhead (saga step minus
//! sandbox call) each divided by the raw durable commit of the same round.
//! A step of a read-only tool writes two durable records (BEGIN, COMMIT), so
//! an overhead of 2x a raw commit is the durability floor.

use capsaga_core::tool::CallContext;
use capsaga_door::dispatch::{Args, Call, Dispatcher, Outcome};
use capsaga_door::host::Host;
use capsaga_door::saga::Saga;
use capsaga_sandbox::{CallRequest, Op};
use capsaga_store::{NewSaga, NewStep, Scope, Store};
use criterion::Criterion;
use serde_json::json;
use std::hint::black_box;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

fn component(name: &str) -> PathBuf {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| root.join("target"));
    let p = target.join("tools").join(format!("{name}.wasm"));
    assert!(
        p.exists(),
        "{} is not built: run scripts/build-components",
        p.display()
    );
    p
}

struct Rig {
    _dir: tempfile::TempDir,
    rt: tokio::runtime::Runtime,
    host: Arc<Host>,
    raw: rusqlite::Connection,
}

fn rig() -> Rig {
    let dir = tempfile::tempdir().expect("tempdir");
    let root = dir.path();
    std::fs::create_dir(root.join("tools")).expect("mkdir");
    std::fs::copy(component("time_now"), root.join("tools/time_now.wasm")).expect("copy");
    std::fs::write(
        root.join("capsaga.toml"),
        "home = \".\"\ntools_dir = \"tools\"\n[tools.time_now]\n",
    )
    .expect("policy");
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let host = rt
        .block_on(Host::open(&root.join("capsaga.toml")))
        .expect("host");
    let raw = rusqlite::Connection::open(root.join("raw.db")).expect("raw db");
    raw.execute_batch(
        "PRAGMA journal_mode = WAL; PRAGMA synchronous = FULL;
         CREATE TABLE log (id INTEGER PRIMARY KEY, body TEXT NOT NULL);",
    )
    .expect("raw schema");
    Rig {
        _dir: dir,
        rt,
        host,
        raw,
    }
}

fn raw_commit(raw: &mut rusqlite::Connection, i: u64) {
    let tx = raw
        .transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)
        .expect("tx");
    tx.execute(
        "INSERT INTO log (body) VALUES (?1)",
        [format!("record {i}")],
    )
    .expect("insert");
    tx.commit().expect("commit");
}

fn wal_records(rt: &tokio::runtime::Runtime, store: &dyn Store, saga: &str, seq: u64) {
    rt.block_on(wal_records_async(store, saga, seq));
}

async fn wal_records_async(store: &dyn Store, saga: &str, seq: u64) {
    let args = json!({"i": seq});
    let grants = vec!["fs:write:/srv/ws/**".to_string()];
    let key = format!("{saga}:{seq}");
    store
        .begin_step(&NewStep {
            saga_id: saga,
            step_seq: seq,
            tool_id: "bench",
            tool_hash: "0000000000000000000000000000000000000000000000000000000000000000",
            grants: &grants,
            has_side_effects: true,
            idempotency_key: &key,
            args: &args,
            preimage: None,
            approval: None,
            fence: capsaga_store::FIRST_FENCE,
        })
        .await
        .expect("begin");
    let out = capsaga_core::tool::ToolOutput {
        data: json!({"ok": true}),
        effects: vec!["did it".into()],
        next_hint: None,
        summary: String::new(),
    };
    store
        .commit_step(
            capsaga_store::StepKey {
                saga_id: saga,
                fence: capsaga_store::FIRST_FENCE,
                step_seq: seq,
            },
            &out,
        )
        .await
        .expect("commit");
}

async fn sandbox_call(host: &Host) {
    let t = host.registry.get("time_now").expect("time_now loaded");
    let ctx = CallContext {
        saga_id: "bench".into(),
        step_seq: 0,
        idempotency_key: "bench".into(),
        deadline_ms: capsaga_sandbox::deadline_from_now(10_000),
        dry_run: false,
    };
    let (res, _) = host
        .sandbox
        .call(CallRequest {
            tool: "time_now",
            prepared: t.component().expect("a component"),
            bindings: &t.bindings.execute,
            limits: &t.limits,
            ctx: &ctx,
            args_json: "{}",
            op: &Op::Execute,
        })
        .await;
    black_box(res.expect("call"));
}

/// One step of `time_now` in `saga`; panics unless it executed and committed
/// (a refused or replayed step would be measured as a fast, wrong figure).
fn saga_step(rt: &tokio::runtime::Runtime, door: &Dispatcher, saga: &mut Saga) {
    let args = json!({});
    match rt
        .block_on(door.submit(saga, Call::new("time_now", Args::Value(&args))))
        .expect("step")
        .outcome
    {
        Outcome::Committed {
            replayed: false, ..
        } => {}
        other => panic!("the step did not execute and commit: {other:?}"),
    }
}

/// Rounds of the summary (after one warm-up round).
const ROUNDS: usize = 21;

/// Mean wall time of `batch` calls of `f`, microseconds per call.
fn batch_us(batch: u64, next: &mut u64, mut f: impl FnMut(u64)) -> f64 {
    let t0 = Instant::now();
    for _ in 0..batch {
        f(*next);
        *next += 1;
    }
    t0.elapsed().as_secs_f64() * 1e6 / batch as f64
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// Median over the rounds of `f(round)`.
fn median_by(rounds: usize, f: impl Fn(usize) -> f64) -> f64 {
    median((0..rounds).map(f).collect())
}

fn main() {
    let mut rig = rig();
    let store = rig.host.store.clone();
    rig.rt
        .block_on(store.create_saga(&NewSaga {
            saga_id: "bench",
            scope: Scope::Plan,
            label: "bench",
            state: capsaga_core::fsm::State::Acting,
            owner: "bench",
            plan: None,
            principal: None,
        }))
        .expect("saga");
    // Short by default (about a minute in all); criterion's command-line
    // options (e.g. `-- --measurement-time 10`) override these.
    let mut c = Criterion::default()
        .warm_up_time(Duration::from_secs(2))
        .measurement_time(Duration::from_secs(4))
        .sample_size(30)
        .configure_from_args();
    let mut g = c.benchmark_group("saga_step_overhead");
    let mut n = 0u64;
    g.bench_function("sqlite_durable_commit", |b| {
        b.iter(|| {
            n += 1;
            raw_commit(&mut rig.raw, n)
        })
    });
    let mut seq = 0u64;
    g.bench_function("wal_begin_commit", |b| {
        b.iter(|| {
            seq += 1;
            wal_records(&rig.rt, &*store, "bench", seq)
        })
    });
    g.bench_function("sandbox_call", |b| {
        b.iter(|| rig.rt.block_on(sandbox_call(&rig.host)))
    });
    let door = Dispatcher::new(rig.host.clone());
    let mut saga = rig
        .rt
        .block_on(door.start(Scope::Plan, "bench", None))
        .expect("saga");
    g.bench_function("saga_step", |b| {
        b.iter(|| saga_step(&rig.rt, &door, &mut saga))
    });
    g.finish();

    // Ratios, measured again in this process with the four paths
    // interleaved: each round runs one batch of every path back to back, so
    // that the latency of fsync (which varies a lot over seconds on a shared
    // machine) is the same for the paths compared; a ratio is the median of
    // the per-round ratios.
    let (mut raw, mut records, mut call, mut step) = (vec![], vec![], vec![], vec![]);
    let mut next = 1_000_000u64;
    for round in 0..=ROUNDS {
        let r = batch_us(20, &mut next, |i| raw_commit(&mut rig.raw, i));
        let w = batch_us(10, &mut next, |i| wal_records(&rig.rt, &*store, "bench", i));
        let c = batch_us(200, &mut next, |_| rig.rt.block_on(sandbox_call(&rig.host)));
        let s = batch_us(10, &mut next, |_| saga_step(&rig.rt, &door, &mut saga));
        if round > 0 {
            raw.push(r);
            records.push(w);
            call.push(c);
            step.push(s);
        }
    }
    let overhead: Vec<f64> = step.iter().zip(&call).map(|(s, c)| s - c).collect();
    println!("\nsaga step overhead, {ROUNDS} interleaved rounds, medians measured in this run:");
    println!(
        "  raw SQLite durable commit (WAL, synchronous=FULL): {:>9.1} µs  (1.00x)",
        median(raw.clone())
    );
    println!(
        "  step records (BEGIN + COMMIT, chained, anchored):  {:>9.1} µs  ({:.2}x raw commit)",
        median(records.clone()),
        median_by(ROUNDS, |i| records[i] / raw[i])
    );
    println!(
        "  sandbox call alone (time_now, fresh instance):     {:>9.1} µs",
        median(call.clone())
    );
    println!(
        "  whole saga step (same call):                       {:>9.1} µs  ({:.2}x raw commit, {:.2}x two durable commits)",
        median(step.clone()),
        median_by(ROUNDS, |i| step[i] / raw[i]),
        median_by(ROUNDS, |i| step[i] / (2.0 * raw[i]))
    );
    println!(
        "  engine overhead (saga step - sandbox call):        {:>9.1} µs  ({:.2}x raw commit, {:.2}x per durable record)",
        median(overhead.clone()),
        median_by(ROUNDS, |i| overhead[i] / raw[i]),
        median_by(ROUNDS, |i| overhead[i] / (2.0 * raw[i]))
    );
}
