//! The fault harness's turns (issue 48): REST turns against a real local
//! model provider ([`LlmServer::answering`], each request answered from its
//! own body), so that approvals and a budget live under the faults too.
//!
//! - **Approval groups**: a turn at the `supervised` autonomy (its ledger
//!   call needs a human) parks the call and ends; an operator approves it
//!   on a random host; then [`RESUMES`] turns of the same task at once on
//!   random hosts, each looking for that approval (an approval of an ended
//!   turn is its principal's). Checked ([`check_approvals`]): no approval
//!   claimed twice (the `APPROVAL_CLAIMED` records of the log), the gated
//!   call of a group executed at most once (the ledger's journal), and
//!   none executed without a claim.
//! - **Budgeted turns**: turns on a priced model under a day's hard cap
//!   ([`CAP_USD`]), more of them than the cap admits. Checked
//!   ([`check_budget`]): what the store counts as spent, and what the
//!   provider answered, never past the cap by more than one reservation.

use super::chaos::Rng;
use super::rig::lines;
use capsaga_store::Store;
use capsaga_tests::llm_server::{LlmServer, Reply};
use capsaga_tests::mcp_rig::http_builder;
use serde_json::{Value, json};
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

/// Turns resuming one approved call at once.
pub const RESUMES: usize = 4;
/// The day's hard cap, USD.
pub const CAP_USD: f64 = 1.5;
/// The most one reservation of a budgeted turn can be, USD: its
/// `max_tokens` (30 000) at $10 per million output tokens, plus its prompt
/// (under 4 000 tokens here) at $2.50 per million input tokens.
pub const ONE_RESERVATION_USD: f64 = 0.31;
/// What one priced answer costs at least, USD: the usage it reports (500
/// prompt tokens at $2.50/M, 20 000 completion tokens at $10/M; the host
/// may charge more, never less).
pub const PRICED_ANSWER_USD: f64 = 0.201_25;

const PRICED: &str = "priced-model";
const FREE: &str = "free-model";

/// The model provider and its price table.
pub struct Model {
    /// The provider.
    pub llm: LlmServer,
    _prices: tempfile::TempDir,
    prices: std::path::PathBuf,
}

fn completion(model: &str, message: Value, finish: &str, usage: (u64, u64)) -> Value {
    json!({
        "id": "chatcmpl-faults", "object": "chat.completion", "created": 1_760_000_000,
        "model": model,
        "choices": [{"index": 0, "message": message, "logprobs": null, "finish_reason": finish}],
        "usage": {"prompt_tokens": usage.0, "completion_tokens": usage.1,
            "total_tokens": usage.0 + usage.1}
    })
}

/// The answer to one request: on the priced model, a final answer; on the
/// free one, the ledger call named in the task (`LEDGER {args}`), then,
/// once its result is in the conversation, a final answer.
fn answer(body: &Value) -> Reply {
    let model = body["model"].as_str().unwrap_or_default();
    let text = |t: &str| json!({"role": "assistant", "content": t, "refusal": null});
    if model == PRICED {
        return Reply::ok(completion(PRICED, text("hello"), "stop", (500, 20_000)));
    }
    let messages = body["messages"].as_array().cloned().unwrap_or_default();
    if messages.iter().any(|m| m["role"] == "tool") {
        return Reply::ok(completion(FREE, text("Done."), "stop", (10, 2)));
    }
    let args = messages
        .iter()
        .filter_map(|m| m["content"].as_str())
        .find_map(|c| c.split_once("LEDGER ").map(|(_, a)| a.to_string()));
    match args {
        Some(args) => Reply::ok(completion(
            FREE,
            json!({"role": "assistant", "content": null, "refusal": null,
                "tool_calls": [{"id": "call_1", "type": "function",
                    "function": {"name": "ledger", "arguments": args}}]}),
            "tool_calls",
            (10, 2),
        )),
        None => Reply::ok(completion(FREE, text("Nothing to do."), "stop", (10, 2))),
    }
}

impl Model {
    /// Start the provider (inside a tokio runtime).
    pub async fn start() -> Model {
        let dir = tempfile::tempdir().expect("a temp dir");
        let prices = dir.path().join("prices.json");
        std::fs::write(
            &prices,
            r#"{"default":{"input_per_m":0,"output_per_m":0},
  "models":{"priced-model":{"input_per_m":2.5,"output_per_m":10.0}}}"#,
        )
        .expect("the price table is written");
        Model {
            llm: LlmServer::answering(Arc::new(answer)).await,
            _prices: dir,
            prices,
        }
    }

    /// The policy's sections for the turns: the budget and the two
    /// providers (the priced one and the free one, on this server).
    pub fn policy(&self) -> String {
        let section = |name: &str, model: &str| {
            format!(
                "[providers.{name}]\nkind = \"openai\"\nbase_url = \"{}\"\nmodel = \"{model}\"\nkeyless = true\n",
                self.llm.url("/v1")
            )
        };
        format!(
            "[agent]\nmax_tokens = 30000\nretries = 0\n[budget]\nprices = \"{}\"\nday_hard_usd = {CAP_USD}\n{}{}",
            self.prices.display(),
            section("priced", PRICED),
            section("free", FREE)
        )
    }

    /// Requests the provider answered on the priced model.
    pub fn priced_answered(&self) -> usize {
        self.llm
            .requests()
            .iter()
            .filter(|r| r.body["model"] == PRICED)
            .count()
    }
}

/// A turn of `task` on `base` (`provider` the only one allowed; at
/// `autonomy`): its answer, or `None` when the host did not answer (a
/// fault).
async fn turn(base: &str, task: &str, provider: &str, autonomy: &str) -> Option<Value> {
    let http = http_builder()
        .pool_max_idle_per_host(0)
        .timeout(Duration::from_secs(30))
        .build()
        .ok()?;
    let r = http
        .post(format!("{base}/v1/turns"))
        .json(&json!({"task": task, "allowed_providers": [provider], "autonomy": autonomy}))
        .send()
        .await
        .ok()?;
    r.json().await.ok()
}

/// One approval group (see the module documentation).
#[derive(Debug, Clone)]
pub struct Group {
    /// The ledger file of its call.
    pub ledger: String,
    /// The entry its call writes.
    pub entry: String,
}

/// Hosts chosen ahead for a group (the load runs in tasks of its own).
pub struct Picks {
    first: String,
    approve: Vec<String>,
    resumes: Vec<String>,
}

impl Picks {
    /// Random hosts among `bases` for the first turn, the decision (then
    /// the others, should it fail) and each resume.
    pub fn new(rng: &mut Rng, bases: &[String]) -> Picks {
        let n = bases.len() as u64;
        let mut pick = || bases[rng.below(n) as usize].clone();
        let first = pick();
        let resumes = (0..RESUMES).map(|_| pick()).collect();
        let decide = rng.below(n) as usize;
        let approve = (0..bases.len())
            .map(|k| bases[(decide + k) % bases.len()].clone())
            .collect();
        Picks {
            first,
            approve,
            resumes,
        }
    }
}

/// Run group `g`: park, approve, resume [`RESUMES`] times at once. Faults
/// may cut it short anywhere: what happened is checked afterwards.
pub async fn approval_group(g: Group, picks: Picks, store: Arc<dyn Store>) {
    let args = json!({"path": g.ledger, "entry": g.entry});
    let task = format!("write the ledger entry: LEDGER {args}");
    if turn(&picks.first, &task, "free", "supervised")
        .await
        .is_none()
    {
        return;
    }
    let Ok(pending) = store.approvals(false).await else {
        return;
    };
    let Some(id) = pending
        .into_iter()
        .find(|a| a.args == args)
        .map(|a| a.approval_id)
    else {
        return;
    };
    let http = http_builder()
        .timeout(Duration::from_secs(15))
        .build()
        .expect("an HTTP client");
    for base in &picks.approve {
        let r = http
            .post(format!("{base}/v1/approvals/{id}/approve"))
            .json(&json!({}))
            .send()
            .await;
        if r.is_ok_and(|r| r.status().is_success()) {
            break;
        }
    }
    let resumes = picks
        .resumes
        .iter()
        .map(|base| turn(base, &task, "free", "supervised"));
    futures::future::join_all(resumes).await;
}

/// A turn on the priced model, on `base`.
pub async fn budget_turn(base: String) {
    let _ = turn(&base, "say hello", "priced", "autonomous").await;
}

/// The approval invariants over every group so far; each broken one is
/// pushed to `v`.
pub async fn check_approvals(
    store: &Arc<dyn Store>,
    groups: &[(Group, std::path::PathBuf)],
    v: &mut dyn FnMut(String),
) {
    let log = store.log(None).await.unwrap_or_default();
    let mut claims: BTreeMap<String, usize> = BTreeMap::new();
    for r in log.iter().filter(|r| r.record == "APPROVAL_CLAIMED") {
        let id = r.detail["approval_id"].as_str().unwrap_or_default();
        *claims.entry(id.to_string()).or_default() += 1;
    }
    for (id, n) in &claims {
        if *n > 1 {
            v(format!("approval {id} claimed {n} times"));
        }
    }
    let approvals = store.approvals(true).await.unwrap_or_default();
    let claimed: Vec<(&str, u64)> = approvals
        .iter()
        .filter_map(|a| Some((a.claimed_saga.as_deref()?, a.claimed_step?)))
        .collect();
    let mut steps_of = BTreeMap::new();
    for s in store.sagas(100_000).await.unwrap_or_default() {
        for step in store.steps(&s.saga_id).await.unwrap_or_default() {
            steps_of
                .entry(step.args["entry"].as_str().unwrap_or_default().to_string())
                .or_insert_with(Vec::new)
                .push(step);
        }
    }
    for (g, journal) in groups {
        let journal = lines(journal);
        let executed: Vec<_> = steps_of
            .get(&g.entry)
            .map(Vec::as_slice)
            .unwrap_or_default()
            .iter()
            .filter(|s| journal.contains(&format!("execute {}", s.idempotency_key)))
            .collect();
        if executed.len() > 1 {
            v(format!(
                "the approved call {} executed by {} steps",
                g.entry,
                executed.len()
            ));
        }
        for s in executed {
            if !claimed.contains(&(s.saga_id.as_str(), s.step_seq)) {
                v(format!(
                    "{} executed in saga {} step {} without a claimed approval",
                    g.entry, s.saga_id, s.step_seq
                ));
            }
        }
    }
}

/// The budget invariants: the day's spend in the store, and what the
/// provider answered on the priced model, never past the cap by more than
/// one reservation.
pub async fn check_budget(store: &Arc<dyn Store>, model: &Model, v: &mut dyn FnMut(String)) {
    let limit = CAP_USD + ONE_RESERVATION_USD;
    match store.budget_days(1).await {
        Ok(days) => {
            let spent = days.first().map_or(0.0, |d| d.spent_usd);
            if spent > limit {
                v(format!(
                    "the store counts ${spent:.4} spent under a ${CAP_USD} cap"
                ));
            }
        }
        Err(e) => v(format!("the budget could not be read: {e}")),
    }
    let answered = model.priced_answered();
    let at_least = answered as f64 * PRICED_ANSWER_USD;
    if at_least > limit {
        v(format!(
            "the provider answered {answered} priced calls (at least ${at_least:.4}) under a ${CAP_USD} cap"
        ));
    }
}
