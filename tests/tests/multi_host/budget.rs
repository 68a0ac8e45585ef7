//! A day's hard budget cap held across hosts: turns on `POST /v1/turns` of
//! three hosts at once, against one real local provider, each reserving
//! its call's maximum estimate in the shared database before sending it:
//! together they never spend past the cap, a refused turn sends nothing,
//! and every reservation is settled.

use super::rig::{Rig, runtime};
use capsaga_tests::llm_server::{LlmServer, Reply, chat_completion};
use capsaga_tests::mcp_rig::http;
use serde_json::{Value, json};

/// The model's price, USD per million tokens.
const PRICES: &str = r#"{"default":{"input_per_m":0,"output_per_m":0},
  "models":{"priced-model":{"input_per_m":2.5,"output_per_m":10.0}}}"#;

/// An OpenAI-compatible final answer reporting `usage`.
fn answer(usage: (u64, u64)) -> Value {
    chat_completion("priced-model", usage)
}

#[test]
fn a_day_cap_holds_across_hosts() {
    const PER_HOST: usize = 4;
    const HOSTS: usize = 3;
    const CAP: f64 = 1.0;
    let rt = runtime();
    // Each answer reports 100k prompt and 1k completion tokens: $0.26; each
    // call's maximum estimate (its prompt plus max_tokens 30k at $10/M) is
    // about $0.30, so at most 3 of the 12 turns fit under $1.
    let llm = rt.block_on(LlmServer::start(
        (0..PER_HOST * HOSTS)
            .map(|_| Reply::ok(answer((100_000, 1_000))).delayed(300))
            .collect(),
    ));
    let prices = tempfile::tempdir().unwrap();
    let prices_path = prices.path().join("prices.json");
    std::fs::write(&prices_path, PRICES).unwrap();
    let policy = format!(
        "[agent]\nmax_tokens = 30000\nretries = 0\n[budget]\nprices = \"{}\"\nday_hard_usd = {CAP}\n\
         [providers.local]\nkind = \"openai\"\nbase_url = \"{}\"\nmodel = \"priced-model\"\nkeyless = true\n",
        prices_path.display(),
        llm.url("/v1")
    );
    let Some(rig) = Rig::with_policy("multi_host::budget", HOSTS, &policy) else {
        return;
    };
    rt.block_on(async {
        let c = http();
        let turns = (0..PER_HOST * HOSTS).map(|i| {
            let (c, url) = (c.clone(), format!("{}/v1/turns", rig.base(i % HOSTS)));
            async move {
                let r = c
                    .post(url)
                    .json(&json!({"task": format!("say hello {i}")}))
                    .send()
                    .await
                    .unwrap();
                assert_eq!(r.status().as_u16(), 200);
                r.json::<Value>().await.unwrap()
            }
        });
        let results = futures::future::join_all(turns).await;
        let ok = results.iter().filter(|r| r["outcome"] == "success").count();
        let hit = results
            .iter()
            .filter(|r| r["outcome"] == "budget_hit")
            .count();
        assert_eq!(ok + hit, PER_HOST * HOSTS, "{results:#?}");
        assert!((1..=3).contains(&ok), "{ok} turns ran over {HOSTS} hosts");
        assert_eq!(llm.requests().len(), ok, "a refused turn sent nothing");
        let store = rig.store().await;
        let days = store.budget_days(1).await.unwrap();
        let spent = days[0].spent_usd;
        assert!((spent - 0.26 * ok as f64).abs() < 1e-9, "{spent}");
        assert!(spent <= CAP, "{spent} past the cap");
        assert_eq!(days[0].reserved_usd, 0.0, "every reservation settled");
        eprintln!(
            "multi_host budget: {} turns over {HOSTS} hosts under a ${CAP} day cap: {ok} ran, {hit} refused before sending, ${spent:.2} spent",
            PER_HOST * HOSTS
        );
    });
}
