//! Many sagas over three hosts while hosts are killed (SIGKILL) and
//! restarted at random: every saga ends terminal, none acknowledged as
//! committed is lost, no step runs twice, the ledgers hold exactly the
//! entries of the sagas that are Done, and the one log verifies. Each saga
//! writes its own ledger file: the ledger's compensation rewrites its file,
//! which would race with another saga appending to the same one (a tool's
//! own concern, not the host's).
//!
//! Sized by `CAPSAGA_MULTI_HOST_SAGAS` (default 40) and
//! `CAPSAGA_MULTI_HOST_STEPS` (default 5); `CAPSAGA_MULTI_HOST_SEED` sets the
//! random seed (default: from the clock; printed).

use super::rig::{Rig, eventually, lines, runtime};
use capsaga_store::{StepStatus, audit};
use capsaga_tests::mcp_rig::http_builder;
use rmcp::ServiceExt;
use rmcp::model::{CallToolRequestParams, ClientConfig};
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use serde_json::json;
use std::collections::BTreeSet;
use std::sync::{Arc, Mutex};
use std::time::Duration;

fn env_or(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// xorshift64*.
struct Rng(u64);
impl Rng {
    fn below(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d) % n.max(1)
    }
}

/// One saga: connect to `url`, `steps` ledger entries, commit. Ok when the
/// commit was acknowledged.
pub async fn one_saga(url: String, ledger: String, saga: u64, steps: u64) -> Result<(), String> {
    let http = http_builder()
        .pool_max_idle_per_host(0)
        .timeout(Duration::from_secs(15))
        .build()
        .map_err(|e| e.to_string())?;
    let transport = StreamableHttpClientTransport::with_client(
        http,
        StreamableHttpClientTransportConfig::with_uri(url),
    );
    let client = ClientConfig::default()
        .serve(transport)
        .await
        .map_err(|e| format!("connect: {e}"))?;
    for i in 0..steps {
        let args = json!({"path": ledger, "entry": format!("saga{saga}-step{i}")});
        let r = client
            .call_tool(
                CallToolRequestParams::new("ledger")
                    .with_arguments(args.as_object().cloned().unwrap_or_default()),
            )
            .await
            .map_err(|e| format!("call: {e}"))?;
        if r.is_error == Some(true) {
            let _ = client.cancel().await;
            return Err(format!("{:?}", r.content));
        }
    }
    let c = client
        .call_tool(CallToolRequestParams::new("capsaga_commit"))
        .await
        .map_err(|e| format!("commit: {e}"))?;
    let _ = client.cancel().await;
    if c.is_error == Some(true) {
        return Err(format!("commit: {:?}", c.content));
    }
    Ok(())
}

#[test]
fn sagas_over_three_hosts_with_random_kills_end_consistent() {
    let Some(mut rig) = Rig::new("multi_host::chaos", 3) else {
        return;
    };
    let sagas = env_or("CAPSAGA_MULTI_HOST_SAGAS", 40);
    let steps = env_or("CAPSAGA_MULTI_HOST_STEPS", 5);
    let seed = env_or(
        "CAPSAGA_MULTI_HOST_SEED",
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos() as u64)
            .unwrap_or(7)
            | 1,
    );
    eprintln!("chaos: {sagas} sagas x {steps} steps over 3 hosts, seed {seed}");
    let rt = runtime();
    let addrs: Arc<Mutex<Vec<Option<String>>>> =
        Arc::new(Mutex::new((0..3).map(|i| Some(rig.mcp(i))).collect()));
    let acked: Arc<Mutex<BTreeSet<u64>>> = Arc::default();
    let mut rng = Rng(seed);
    let mut kills = 0;
    rt.block_on(async {
        let mut next = 0u64;
        let mut next_kill = tokio::time::Instant::now() + Duration::from_millis(300);
        let mut running = tokio::task::JoinSet::new();
        while next < sagas || !running.is_empty() {
            // Up to 6 sessions at once, each on a random live host.
            while next < sagas && running.len() < 6 {
                let live: Vec<String> = addrs.lock().unwrap().iter().flatten().cloned().collect();
                let url = live[rng.below(live.len() as u64) as usize].clone();
                let n = next;
                let (ledger, acked) = (rig.ledger(&format!("ledger-{n}.txt")).0, acked.clone());
                running.spawn(async move {
                    // A client whose host died may try to reconnect: bounded.
                    let r = tokio::time::timeout(
                        Duration::from_secs(20),
                        one_saga(url, ledger, n, steps),
                    )
                    .await;
                    if matches!(r, Ok(Ok(()))) {
                        acked.lock().unwrap().insert(n);
                    }
                });
                next += 1;
            }
            // Sessions end, or a random moment passes and a host is killed
            // mid-flight (at most 6 times), another started in its place.
            tokio::select! {
                _ = running.join_next() => {}
                () = tokio::time::sleep_until(next_kill), if kills < 6 => {
                    next_kill = tokio::time::Instant::now() + Duration::from_millis(200 + rng.below(500));
                    let i = rng.below(3) as usize;
                    rig.kill(i);
                    addrs.lock().unwrap()[i] = None;
                    kills += 1;
                    let h = rig.spawn();
                    addrs.lock().unwrap()[i] = Some(format!("http://{}/mcp", h.addr));
                    rig.hosts[i] = Some(h);
                }
            }
        }
        eprintln!(
            "chaos: {} of {sagas} sagas acknowledged committed, {kills} hosts killed",
            acked.lock().unwrap().len()
        );
        assert!(kills > 0, "the run killed no host (seed {seed})");
        // Every saga ends terminal: the dead hosts' ones are recovered by
        // the living.
        let store = rig.store().await;
        eventually(Duration::from_secs(120), "every saga is terminal", || {
            let store = store.clone();
            async move { store.unfinished_sagas().await.unwrap().is_empty() }
        })
        .await;
        let all = store.sagas(100_000).await.unwrap();
        let mut entries: BTreeSet<String> = BTreeSet::new();
        let mut j: Vec<String> = Vec::new();
        for n in 0..sagas {
            let (ledger, journal) = rig.ledger(&format!("ledger-{n}.txt"));
            entries.extend(lines(std::path::Path::new(&ledger)));
            j.extend(lines(&journal));
        }
        let mut done = 0;
        for s in &all {
            let state = s.state.to_string();
            let st = store.steps(&s.saga_id).await.unwrap();
            for step in &st {
                let key = &step.idempotency_key;
                let executed = j.iter().filter(|l| **l == format!("execute {key}")).count();
                assert!(executed <= 1, "step {key} ran {executed} times (seed {seed})");
                let entry = step.args["entry"].as_str().unwrap_or_default();
                let present = entries.contains(&format!("{entry} {key}"));
                if state == "Done" {
                    assert_eq!(step.status, StepStatus::Commit, "(seed {seed})");
                    assert!(present, "{entry} of a Done saga is missing (seed {seed})");
                } else {
                    assert_eq!(state, "FailedRolledBack", "(seed {seed})");
                    assert!(!present, "{entry} of a rolled back saga is there (seed {seed})");
                }
            }
            if state == "Done" {
                done += 1;
            }
        }
        // Nothing acknowledged is lost: every acknowledged saga is Done with
        // all its steps.
        for n in acked.lock().unwrap().iter() {
            for i in 0..steps {
                let entry = format!("saga{n}-step{i}");
                assert!(
                    entries.iter().any(|e| e.starts_with(&format!("{entry} "))),
                    "acknowledged {entry} is lost (seed {seed})"
                );
            }
        }
        eprintln!("chaos: {done} sagas Done, {} rolled back", all.len() - done);
        let report = audit::verify(&*store, None).await.unwrap();
        assert!(report.ok(), "{report:?} (seed {seed})");
    });
}
