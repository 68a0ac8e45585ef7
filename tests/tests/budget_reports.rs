//! Budget reservations that a provider's report cannot outrun (issue 45,
//! item 7). A reservation is the host's maximum estimate of a call (its
//! prompt from the bytes sent, plus `max_tokens`), but a provider, or a
//! proxy in front of it, can report far more (hidden system prompts,
//! cache writes, reasoning, or plain over-reporting): eight parallel
//! `POST /v1/turns` then each pass the day's hard cap by their overrun.
//!
//! Here a real local provider reports 3 and 10 times what each request
//! could be estimated at from its own bytes (`Reply::over_reporting`). The
//! first report is unavoidable (nothing tells the host before it) and
//! costs k times its reservation; once it is settled the host scales that
//! provider's and model's next reservations by the ratio it learnt, so
//! eight parallel turns never spend past the cap by more than one
//! reservation, and `capsaga budget` shows the gap. Eight parallel turns
//! against a provider never seen before do not all go out on unscaled
//! estimates either: one call of a provider and model is reserved at a
//! time until one of its reports is settled.

use capsaga_door::host::Host;
use capsaga_server::HttpOptions;
use capsaga_tests::llm_server::{LlmServer, Reply, chat_completion};
use capsaga_tests::mcp_rig::{Running, http, start};
use capsaga_tests::{FS_POLICY, TestWorkspace};
use serde_json::{Value, json};
use std::sync::Arc;

/// The local provider's model at gpt-4o's rates.
const PRICES: &str = r#"{"default":{"input_per_m":0,"output_per_m":0},
  "models":{"priced-model":{"input_per_m":2.5,"output_per_m":10.0}}}"#;

/// An OpenAI-compatible final answer (its usage replaced by the server).
fn answer() -> Value {
    chat_completion("priced-model", (1, 1))
}

fn policy(ws: &TestWorkspace, llm: &LlmServer, cap: Option<f64>) {
    policy_max(ws, llm, cap, 1000);
}

fn policy_max(ws: &TestWorkspace, llm: &LlmServer, cap: Option<f64>, max_tokens: u32) {
    let cap = cap
        .map(|c| format!("day_hard_usd = {c}\n"))
        .unwrap_or_default();
    ws.write_policy(&format!(
        "{FS_POLICY}\n[agent]\nmax_tokens = {max_tokens}\nretries = 0\n[budget]\nprices = \"prices.json\"\n{cap}\
         [providers.local]\nkind = \"openai\"\nbase_url = \"{}\"\nmodel = \"priced-model\"\nkeyless = true\n",
        llm.url("/v1")
    ));
}

async fn turn(url: String, task: String) -> Value {
    let r = http()
        .post(url)
        .json(&json!({ "task": task }))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 200);
    r.json::<Value>().await.unwrap()
}

/// A host on `ws` and its HTTP server on 127.0.0.1.
async fn serve(ws: &TestWorkspace) -> (Arc<Host>, Running) {
    let host = ws.host().await;
    let srv = start(
        host.clone(),
        HttpOptions::new("127.0.0.1:0".parse().unwrap()),
    )
    .await;
    (host, srv)
}

/// `n` parallel `POST /v1/turns` on `url`: the answers, and the indexes
/// of the turns that succeeded (every other one was refused by a cap).
async fn parallel_turns(url: &str, n: usize) -> (Vec<Value>, Vec<usize>) {
    let turns = (0..n).map(|i| turn(url.to_string(), format!("say hello {i}")));
    let results = futures::future::join_all(turns).await;
    let ok: Vec<usize> = (0..n)
        .filter(|&i| results[i]["outcome"] == "success")
        .collect();
    let hit = results
        .iter()
        .filter(|r| r["outcome"] == "budget_hit")
        .count();
    assert_eq!(ok.len() + hit, n, "{results:#?}");
    (results, ok)
}

/// `capsaga --json budget` on the workspace.
fn budget_json(ws: &TestWorkspace) -> Value {
    let out = ws.capsaga(&["--json", "budget"]).output().unwrap();
    assert!(out.status.success(), "{out:?}");
    serde_json::from_slice(&out.stdout).unwrap()
}

async fn eight_parallel_turns_against_a_provider_reporting(times: u64) {
    const N: usize = 8;
    // One learning call, then the parallel ones (delayed: all reserve
    // before any is settled).
    let replies = std::iter::once(Reply::ok(answer()).over_reporting(times))
        .chain((0..N).map(|_| Reply::ok(answer()).over_reporting(times).delayed(300)))
        .collect();
    let llm = LlmServer::start(replies).await;
    let ws = TestWorkspace::new(&["fs_list"], FS_POLICY);
    std::fs::write(ws.root.join("prices.json"), PRICES).unwrap();

    // 1. The first report: no cap yet. It is charged about `times` times
    // its reservation, and that cannot be seen coming.
    policy(&ws, &llm, None);
    let (host, srv) = serve(&ws).await;
    let first = turn(srv.url("/v1/turns"), "say hello".into()).await;
    assert_eq!(first["outcome"], "success", "{first:#}");
    let c1 = first["cost_usd"].as_f64().unwrap();
    drop(srv);
    drop(host);
    let b = budget_json(&ws);
    let gap = &b["gaps"][0];
    let (reserved1, over1) = (
        gap["reserved_usd"].as_f64().unwrap(),
        gap["over_usd"].as_f64().unwrap(),
    );
    assert!(
        (c1 / reserved1) >= times as f64 * 0.99,
        "the first call was charged {c1}, about {times}x its reservation {reserved1}"
    );
    assert!((over1 - (c1 - reserved1)).abs() < 1e-9, "{gap:#}");
    assert!(
        gap["output_ratio"].as_f64().unwrap() >= times as f64 - 1e-9
            && gap["input_ratio"].as_f64().unwrap() >= times as f64 - 1e-9,
        "{gap:#}"
    );
    assert_eq!(b["learnt"][0]["model"], "priced-model", "{b:#}");

    // 2. A day cap with room for the first call and three and a half more
    // like it: eight parallel turns, each reserving its estimate scaled by
    // what was learnt.
    let cap = c1 * 4.5;
    policy(&ws, &llm, Some(cap));
    let (host, srv) = serve(&ws).await;
    let (results, ok) = parallel_turns(&srv.url("/v1/turns"), N).await;
    let ok: Vec<&Value> = ok.iter().map(|&i| &results[i]).collect();
    let hit: Vec<&Value> = results
        .iter()
        .filter(|r| r["outcome"] == "budget_hit")
        .collect();
    for r in &hit {
        let msg = r["final_response"].as_str().unwrap();
        assert!(
            msg.contains("per-day hard cap") && msg.contains("no model call was made"),
            "{msg}"
        );
    }
    assert_eq!(
        llm.requests().len(),
        1 + ok.len(),
        "a refused turn sent nothing"
    );
    let spent = host.store.budget_days(1).await.unwrap()[0].spent_usd;
    let one_reservation = ok
        .iter()
        .map(|r| r["cost_usd"].as_f64().unwrap())
        .fold(c1, f64::max);
    eprintln!(
        "x{times}: first call ${c1:.6} (reserved ${reserved1:.6}); cap ${cap:.6}; {} of {N} parallel turns ran, ${spent:.6} spent",
        ok.len()
    );
    assert!(
        spent <= cap + one_reservation,
        "x{times}: ${spent} spent past the cap ${cap} by more than one reservation (${one_reservation}); {} turns ran",
        ok.len()
    );
    assert!(
        (1..=4).contains(&ok.len()),
        "x{times}: {} turns ran; with reservations at the estimate {} would",
        ok.len(),
        N
    );
    drop(srv);
    drop(host);

    // 3. `capsaga budget` reports the gap: what the first call was charged
    // beyond its reservation; the later ones stayed (within rounding of
    // their prompts' sizes) within theirs.
    let b = budget_json(&ws);
    let gap = &b["gaps"][0];
    assert_eq!(gap["calls"], 1 + ok.len() as u64, "{gap:#}");
    let over = gap["over_usd"].as_f64().unwrap();
    assert!(over >= over1 - 1e-9, "{gap:#}");
    assert!(
        over - over1 <= cap * 0.01,
        "the later calls outran their reservations: {gap:#}"
    );
    let out = ws.capsaga(&["budget"]).output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("beyond the reservations") && text.contains("reservations scaled"),
        "{text}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_provider_reporting_three_times_the_estimate_cannot_outrun_the_cap() {
    eight_parallel_turns_against_a_provider_reporting(3).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_provider_reporting_ten_times_the_estimate_cannot_outrun_the_cap() {
    eight_parallel_turns_against_a_provider_reporting(10).await;
}

/// Eight parallel turns against a provider and model nothing was learnt
/// about: without the first-report turn each is reserved its unscaled
/// estimate, all eight fit under the cap and together spend `times` times
/// what they reserved (the issue's 2.4x the cap).
async fn eight_parallel_turns_against_a_provider_never_seen_reporting(times: u64) {
    const N: usize = 8;
    let replies = (0..N)
        .map(|_| Reply::ok(answer()).over_reporting(times).delayed(300))
        .collect();
    let llm = LlmServer::start(replies).await;
    let ws = TestWorkspace::new(&["fs_list"], FS_POLICY);
    std::fs::write(ws.root.join("prices.json"), PRICES).unwrap();
    // Each call's estimate: max_tokens 4000 at $10/M ($0.04) plus its
    // prompt (well under $0.01): eight of them fit under $0.4.
    let cap = 0.4;
    policy_max(&ws, &llm, Some(cap), 4000);
    let (host, srv) = serve(&ws).await;
    let (results, ok) = parallel_turns(&srv.url("/v1/turns"), N).await;
    let ok: Vec<&Value> = ok.iter().map(|&i| &results[i]).collect();
    assert_eq!(
        llm.requests().len(),
        ok.len(),
        "a refused turn sent nothing"
    );
    let spent = host.store.budget_days(1).await.unwrap()[0].spent_usd;
    // One reservation: what a call of this provider and model reserves
    // once its first report is learnt (about what each was charged).
    let one_reservation = ok
        .iter()
        .map(|r| r["cost_usd"].as_f64().unwrap())
        .fold(0.0, f64::max);
    eprintln!(
        "x{times}, never seen: cap ${cap}; {} of {N} parallel turns ran, ${spent:.6} spent ({:.2}x the cap); one reservation ${one_reservation:.6}",
        ok.len(),
        spent / cap
    );
    assert!(
        spent <= cap + one_reservation,
        "x{times}: ${spent} spent past the cap ${cap} by more than one reservation (${one_reservation}); {} turns ran",
        ok.len()
    );
    assert!(!ok.is_empty() && ok.len() < N, "{} turns ran", ok.len());
    let b = budget_json(&ws);
    assert_eq!(b["gaps"][0]["calls"], ok.len() as u64, "{b:#}");
    assert!(
        b["gaps"][0]["input_ratio"].as_f64().unwrap() >= times as f64 - 1e-9,
        "{b:#}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn parallel_turns_against_a_provider_never_seen_over_reporting_three_times() {
    eight_parallel_turns_against_a_provider_never_seen_reporting(3).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn parallel_turns_against_a_provider_never_seen_over_reporting_ten_times() {
    eight_parallel_turns_against_a_provider_never_seen_reporting(10).await;
}
