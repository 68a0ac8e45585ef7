//! Budget caps across restarts: each agent turn runs in its own `capsaga`
//! process on the same workspace, so the per-day spend the caps are checked
//! against can only come from the SQLite counters. The scripted provider
//! (the embedded default when no provider is configured) is priced through
//! an operator price table so that its simulated tokens cost money.
//!
//! And reservations (issue 24 item 3): concurrent turns on `POST /v1/turns`
//! of a real server, against a real local provider, each reserve their
//! call's maximum estimate before sending it, so together they never spend
//! past the day's hard cap by more than one call's estimate; the ledger
//! survives a restart.

use capsaga_tests::{FS_POLICY, TestWorkspace, capsaga_bin};
use serde_json::Value;
use std::process::Command;

const PRICES: &str = r#"{"default":{"input_per_m":0,"output_per_m":0},
  "models":{"scripted-priced":{"input_per_m":10.0,"output_per_m":30.0}}}"#;

const SCRIPT: &str = r#"{"model":"scripted-priced","turns":[
  {"text":"","tool_calls":[{"name":"fs_list","arguments":{"path":"${home}/ws"}}]},
  {"text":"The workspace is listed."}]}"#;

fn policy(ws: &TestWorkspace, caps: &str) {
    ws.write_policy(&format!(
        "{FS_POLICY}\n[agent]\nscript = \"script.json\"\n[budget]\nprices = \"prices.json\"\n{caps}\n"
    ));
}

/// Run `capsaga --json agent` in a fresh process; (exit code, trace).
fn agent(ws: &TestWorkspace) -> (i32, Value) {
    let out = Command::new(capsaga_bin())
        .args(["--json", "--config"])
        .arg(ws.config())
        .args(["agent", "list the workspace"])
        .env_remove("CAPSAGA_SIMULATION")
        .output()
        .expect("run capsaga");
    let text = String::from_utf8_lossy(&out.stdout);
    let v: Value = serde_json::from_str(&text).unwrap_or_else(|e| {
        panic!(
            "not JSON ({e}): {text}\n{}",
            String::from_utf8_lossy(&out.stderr)
        )
    });
    (out.status.code().unwrap_or(-1), v)
}

fn thoughts(tr: &Value) -> Vec<&Value> {
    tr["steps"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|s| s["type"] == "thought")
        .collect()
}

#[test]
fn day_caps_hold_across_process_restarts() {
    let ws = TestWorkspace::new(&["fs_list", "fs_read", "fs_write"], FS_POLICY);
    std::fs::write(ws.root.join("prices.json"), PRICES).unwrap();
    std::fs::write(ws.root.join("script.json"), SCRIPT).unwrap();

    // 1. No caps: measure what one turn costs.
    policy(&ws, "");
    let (code, tr) = agent(&ws);
    assert_eq!(code, 0, "{tr:#}");
    assert_eq!(tr["outcome"], "success");
    assert!(
        tr["provider_mode"]
            .as_str()
            .unwrap()
            .starts_with("scripted (no provider is configured"),
        "{}",
        tr["provider_mode"]
    );
    let x = tr["cost_usd"].as_f64().unwrap();
    assert!(x > 0.0, "the priced script must cost something");
    let t = thoughts(&tr);
    assert_eq!(t.len(), 2);
    let sum: f64 = t.iter().map(|s| s["cost_usd"].as_f64().unwrap()).sum();
    assert!((sum - x).abs() < 1e-12);
    assert!(t.iter().all(|s| s["tier"] == "normal"));

    // 2. A new process with a day soft cap below what is already spent and
    // a hard cap well above it (room for each call's maximum estimate): the
    // turn runs on the cheaper tier.
    policy(
        &ws,
        &format!("day_soft_usd = {}\nday_hard_usd = {}", x * 0.5, x + 10.0),
    );
    let (code, tr) = agent(&ws);
    assert_eq!(code, 0, "{tr:#}");
    let t = thoughts(&tr);
    assert_eq!(t.len(), 2);
    assert!(t.iter().all(|s| s["tier"] == "cheap"), "{tr:#}");

    // 3. Another process: 2x is spent today, past the hard cap. No model
    // call is made and the turn ends budget_hit.
    policy(
        &ws,
        &format!("day_soft_usd = {}\nday_hard_usd = {}", x * 0.5, x * 1.5),
    );
    let (code, tr) = agent(&ws);
    assert_eq!(code, 7, "{tr:#}");
    assert_eq!(tr["outcome"], "budget_hit");
    assert!(thoughts(&tr).is_empty());
    let msg = tr["final_response"].as_str().unwrap();
    assert!(
        msg.contains("per-day hard cap") && msg.contains("no model call"),
        "{msg}"
    );
    assert_eq!(tr["cost_usd"], 0.0);

    // 4. A hard cap not reached yet, but closer than a call's maximum
    // estimate: refused by the reservation, nothing sent.
    policy(&ws, &format!("day_hard_usd = {}", x * 2.0 + 1e-6));
    let (code, tr) = agent(&ws);
    assert_eq!(code, 7, "{tr:#}");
    assert!(thoughts(&tr).is_empty());
    let msg = tr["final_response"].as_str().unwrap();
    assert!(
        msg.contains("per-day hard cap")
            && msg.contains("may cost up to")
            && msg.contains("no model call"),
        "{msg}"
    );

    // The counters, as the operator sees them.
    let out = Command::new(capsaga_bin())
        .args(["--json", "--config"])
        .arg(ws.config())
        .arg("budget")
        .output()
        .unwrap();
    let b: Value = serde_json::from_slice(&out.stdout).unwrap();
    let day = &b["days"][0];
    assert_eq!(day["calls"], 4);
    assert!((day["spent_usd"].as_f64().unwrap() - 2.0 * x).abs() < 1e-9);

    // And the human output says which model ran and why.
    policy(&ws, "");
    let out = Command::new(capsaga_bin())
        .args(["--config"])
        .arg(ws.config())
        .args(["agent", "list the workspace"])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.starts_with("model: scripted (no provider is configured; script "),
        "{text}"
    );
    let out = Command::new(capsaga_bin())
        .args(["--config"])
        .arg(ws.config())
        .args(["trace", "last"])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("model: scripted"), "{text}");
    assert!(
        text.contains("  thought  scripted/scripted-priced [normal]"),
        "{text}"
    );
    assert!(text.contains("  action   fs_list"), "{text}");
    assert!(text.contains("  critic   fitness: pass"), "{text}");
}

#[test]
fn request_hard_cap_refuses_a_call_whose_maximum_would_pass_it() {
    let ws = TestWorkspace::new(&["fs_list", "fs_read", "fs_write"], FS_POLICY);
    std::fs::write(ws.root.join("prices.json"), PRICES).unwrap();
    std::fs::write(ws.root.join("script.json"), SCRIPT).unwrap();
    // A tiny per-request cap: nothing is spent yet, but the first call's
    // maximum estimate (its prompt and max_tokens at the table's rate)
    // would pass it, so it is not sent.
    policy(&ws, "request_hard_usd = 0.000001");
    let (code, tr) = agent(&ws);
    assert_eq!(code, 7, "{tr:#}");
    assert_eq!(tr["outcome"], "budget_hit");
    assert!(thoughts(&tr).is_empty());
    let msg = tr["final_response"].as_str().unwrap();
    assert!(
        msg.contains("per-request hard cap") && msg.contains("no model call was made"),
        "{msg}"
    );
    assert_eq!(tr["cost_usd"], 0.0);
}

/// The price table of the parallel test: the local provider's model at
/// gpt-4o's rates.
const LIVE_PRICES: &str = r#"{"default":{"input_per_m":0,"output_per_m":0},
  "models":{"priced-model":{"input_per_m":2.5,"output_per_m":10.0}}}"#;

/// An OpenAI-compatible final answer reporting `usage`.
fn answer(usage: (u64, u64)) -> serde_json::Value {
    serde_json::json!({
        "id": "chatcmpl-1", "object": "chat.completion", "created": 1_760_000_000,
        "model": "priced-model",
        "choices": [{"index": 0,
            "message": {"role": "assistant", "content": "hello", "refusal": null},
            "finish_reason": "stop"}],
        "usage": {"prompt_tokens": usage.0, "completion_tokens": usage.1,
            "total_tokens": usage.0 + usage.1}
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn parallel_turns_never_spend_past_the_cap_by_more_than_one_estimate() {
    use capsaga_server::HttpOptions;
    use capsaga_tests::llm_server::{LlmServer, Reply};
    use capsaga_tests::mcp_rig::{http, start};

    const N: usize = 8;
    const CAP: f64 = 1.0;
    // Each answer reports 100k prompt and 1k completion tokens: $0.26. Each
    // call's maximum estimate: its prompt (about 1k tokens) plus
    // max_tokens 30k at $10/M: about $0.30.
    let llm = LlmServer::start(
        (0..N)
            .map(|_| Reply::ok(answer((100_000, 1_000))).delayed(300))
            .collect(),
    )
    .await;
    let ws = TestWorkspace::new(&["fs_list"], FS_POLICY);
    std::fs::write(ws.root.join("prices.json"), LIVE_PRICES).unwrap();
    ws.write_policy(&format!(
        "{FS_POLICY}\n[agent]\nmax_tokens = 30000\nretries = 0\n[budget]\nprices = \"prices.json\"\nday_hard_usd = {CAP}\n\
         [providers.local]\nkind = \"openai\"\nbase_url = \"{}\"\nmodel = \"priced-model\"\nkeyless = true\n",
        llm.url("/v1")
    ));
    let host = ws.host().await;
    let srv = start(
        host.clone(),
        HttpOptions::new("127.0.0.1:0".parse().unwrap()),
    )
    .await;
    let c = http();
    let url = srv.url("/v1/turns");
    let turns = (0..N).map(|i| {
        let (c, url) = (c.clone(), url.clone());
        async move {
            let r = c
                .post(url)
                .json(&serde_json::json!({"task": format!("say hello {i}")}))
                .send()
                .await
                .unwrap();
            assert_eq!(r.status().as_u16(), 200);
            r.json::<Value>().await.unwrap()
        }
    });
    let results = futures::future::join_all(turns).await;
    let ok = results.iter().filter(|r| r["outcome"] == "success").count();
    let hit: Vec<&Value> = results
        .iter()
        .filter(|r| r["outcome"] == "budget_hit")
        .collect();
    assert_eq!(ok + hit.len(), N, "{results:#?}");
    for r in &hit {
        let msg = r["final_response"].as_str().unwrap();
        assert!(
            msg.contains("per-day hard cap") && msg.contains("no model call was made"),
            "{msg}"
        );
        assert_eq!(r["cost_usd"], 0.0);
    }
    // What reached the provider is exactly what the successful turns sent,
    // and what they were charged stays under the cap: the largest maximum
    // estimate among the calls bounds any overshoot (none here: each call
    // cost less than its estimate).
    assert_eq!(llm.requests().len(), ok, "a refused turn sent nothing");
    let days = host.store.budget_days(1).await.unwrap();
    let spent = days[0].spent_usd;
    let charged: f64 = results
        .iter()
        .map(|r| r["cost_usd"].as_f64().unwrap())
        .sum();
    assert!((spent - charged).abs() < 1e-9, "{spent} vs {charged}");
    assert!((spent - 0.26 * ok as f64).abs() < 1e-9, "{spent}");
    let one_estimate = 0.31;
    assert!(spent <= CAP + one_estimate, "{spent} > cap + one estimate");
    assert!(spent <= CAP, "{spent}: no call cost more than its estimate");
    assert!(
        (1..=3).contains(&ok),
        "{ok} turns ran; without reservations all {N} would"
    );
    assert_eq!(days[0].reserved_usd, 0.0, "every reservation settled");
    eprintln!(
        "{N} parallel turns under a ${CAP} day cap: {ok} ran, {} refused before sending, ${spent:.4} spent",
        hit.len()
    );
    drop(srv);
    drop(host);

    // The ledger survives a restart: a new host on the same state refuses
    // the next call before sending it.
    let host = ws.host().await;
    let days = host.store.budget_days(1).await.unwrap();
    assert!((days[0].spent_usd - spent).abs() < 1e-12);
    assert_eq!(days[0].calls, ok as u64);
    let srv = start(
        host.clone(),
        HttpOptions::new("127.0.0.1:0".parse().unwrap()),
    )
    .await;
    let r: Value = http()
        .post(srv.url("/v1/turns"))
        .json(&serde_json::json!({"task": "one more"}))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(r["outcome"], "budget_hit", "{r:#}");
    assert_eq!(llm.requests().len(), ok, "nothing sent after the restart");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_answer_reporting_no_usage_is_charged_the_hosts_recomputation() {
    use capsaga_agent::runner::{TurnOptions, run_turn};
    use capsaga_agent::select::{Selection, process_env, select};
    use capsaga_tests::llm_server::{LlmServer, Reply};

    // A server that omits `usage` (some proxies and local servers do): the
    // host does not take that as free. It charges at least one token per 6
    // bytes sent and received, at the table's rate.
    let mut body = answer((0, 0));
    body.as_object_mut().unwrap().remove("usage");
    let llm = LlmServer::start(vec![Reply::ok(body)]).await;
    let ws = TestWorkspace::new(&["fs_list"], FS_POLICY);
    std::fs::write(ws.root.join("prices.json"), LIVE_PRICES).unwrap();
    ws.write_policy(&format!(
        "{FS_POLICY}\n[agent]\nretries = 0\n[budget]\nprices = \"prices.json\"\n\
         [providers.local]\nkind = \"openai\"\nbase_url = \"{}\"\nmodel = \"priced-model\"\nkeyless = true\n",
        llm.url("/v1")
    ));
    let host = ws.host().await;
    let sel = select(&host.config, &process_env(), &Selection::default()).unwrap();
    let tr = run_turn(
        &host,
        sel.provider.as_ref(),
        "say hello",
        &TurnOptions::default(),
    )
    .await
    .unwrap();
    assert_eq!(tr.outcome.as_str(), "success", "{tr:#?}");
    assert_eq!(
        tr.prompt_tokens, 0,
        "the reported usage is kept as reported"
    );
    // The prompt is a few kilobytes: a few hundred tokens at $2.50/M.
    assert!(tr.cost_usd > 1e-4, "{}", tr.cost_usd);
    let days = host.store.budget_days(1).await.unwrap();
    assert!((days[0].spent_usd - tr.cost_usd).abs() < 1e-12);
    assert_eq!(days[0].calls, 1);
}

/// A turn abandoned while its model call is in flight (its future dropped:
/// a client gone, a session closed, a task aborted) is charged the call's
/// whole reservation: the request reached the provider and may be billed.
/// Before, the reservation was left to expire and the call cost nothing in
/// the ledger, so a client that gave up on each turn right after it was
/// sent could spend past the day's cap.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_turn_abandoned_in_flight_is_charged_its_reservation() {
    use capsaga_agent::runner::{TurnOptions, run_turn};
    use capsaga_agent::select::{Selection, process_env, select};
    use capsaga_store::clock::today;
    use capsaga_tests::llm_server::{LlmServer, Reply};
    use std::time::{Duration, Instant};

    const CAP: f64 = 1.0;
    // Never answered within the test: each call is abandoned in flight.
    let llm = LlmServer::start(
        (0..4)
            .map(|_| Reply::ok(answer((100, 100))).delayed(600_000))
            .collect(),
    )
    .await;
    let ws = TestWorkspace::new(&["fs_list"], FS_POLICY);
    std::fs::write(ws.root.join("prices.json"), LIVE_PRICES).unwrap();
    ws.write_policy(&format!(
        "{FS_POLICY}\n[agent]\nmax_tokens = 30000\nretries = 0\n[budget]\nprices = \"prices.json\"\nday_hard_usd = {CAP}\n\
         [providers.local]\nkind = \"openai\"\nbase_url = \"{}\"\nmodel = \"priced-model\"\nkeyless = true\n",
        llm.url("/v1")
    ));
    let host = ws.host().await;
    let sel = select(&host.config, &process_env(), &Selection::default()).unwrap();
    let provider: std::sync::Arc<dyn capsaga_agent::provider::Provider> = sel.provider.into();
    let mut abandoned = 0;
    let mut spent = 0.0;
    for i in 0..4 {
        let (h, p) = (host.clone(), provider.clone());
        let turn = tokio::spawn(async move {
            run_turn(
                &h,
                p.as_ref(),
                &format!("say hello {i}"),
                &TurnOptions::default(),
            )
            .await
        });
        // Wait for the request to reach the provider, or for the turn to end
        // (refused before sending).
        let sent = abandoned + 1;
        let deadline = Instant::now() + Duration::from_secs(60);
        while llm.requests().len() < sent && !turn.is_finished() {
            assert!(Instant::now() < deadline, "turn {i} neither sent nor ended");
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        if turn.is_finished() {
            let tr = turn.await.unwrap().unwrap();
            assert_eq!(tr.outcome.as_str(), "budget_hit", "{tr:#?}");
            break;
        }
        let reserved = host.store.day_reserved(&today()).await.unwrap();
        assert!(
            reserved > 0.29,
            "the call in flight holds its estimate: {reserved}"
        );
        turn.abort();
        let _ = turn.await;
        abandoned += 1;
        // The drop guard settles the reservation as spent.
        let deadline = Instant::now() + Duration::from_secs(60);
        let days = loop {
            if host.store.day_reserved(&today()).await.unwrap() == 0.0 {
                break host.store.budget_days(1).await.unwrap();
            }
            assert!(
                Instant::now() < deadline,
                "the abandoned reservation was not settled"
            );
            tokio::time::sleep(Duration::from_millis(10)).await;
        };
        assert!(
            days[0].spent_usd > spent + 0.29,
            "abandoned call {abandoned} charged its estimate: {} after {spent}",
            days[0].spent_usd
        );
        spent = days[0].spent_usd;
    }
    // Three calls of ~$0.30 abandoned fill the $1 cap: the fourth turn is
    // refused before anything is sent.
    assert_eq!(abandoned, 3, "spent {spent}");
    assert_eq!(llm.requests().len(), 3);
    assert!(spent <= CAP, "{spent}");
}
