//! The rig: a PostgreSQL cluster, one workspace, N `capsaga serve` hosts on
//! it (each its own process, `CAPSAGA_STORE` pointing at the database), and
//! what the tests read back (the store, the ledger's journal).

use capsaga_pg_harness::Cluster;
use capsaga_store::Store;
use capsaga_store::postgres::{PgOptions, PgStore};
use capsaga_tests::{TestWorkspace, capsaga_bin, listening_addr};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The hosts' lease on their sagas, milliseconds (short, for the tests).
pub const LEASE_MS: u64 = 1500;

/// The policy of every host, with a lease of `lease_ms`. The ledger's
/// journal (beside its file, in the workspace) counts executions, so the
/// host's file rollback (issue 28) is off for it: the tool's own
/// compensation undoes its entries, and the journal keeps every line.
pub fn policy(lease_ms: u64) -> String {
    format!(
        r#"store_lease_ms = {lease_ms}
[tools.ledger]
grants = ["fs:write:~/ws/**"]
limits = {{ deadline_ms = 60000 }}
host_rollback = false
"#
    )
}

/// One host: its process and its address.
pub struct HostProc {
    pub child: Child,
    pub addr: String,
}

/// The cluster, the workspace, the database and the hosts.
pub struct Rig {
    pub cluster: Cluster,
    pub ws: TestWorkspace,
    pub url: String,
    pub hosts: Vec<Option<HostProc>>,
    /// Arguments every host's `capsaga serve` gets besides the rig's.
    pub serve_args: Vec<String>,
    /// Environment variables every host started from now on gets (e.g.
    /// `CAPSAGA_KEK`); see also [`Rig::spawn_with_env`].
    pub env: Vec<(String, String)>,
}

impl Rig {
    /// Start PostgreSQL and `n` hosts; None (said SKIPPED) without
    /// PostgreSQL.
    pub fn new(test: &str, n: usize) -> Option<Rig> {
        Rig::with_lease(test, n, LEASE_MS)
    }

    /// [`Rig::new`] with hosts whose lease is `lease_ms`.
    pub fn with_lease(test: &str, n: usize, lease_ms: u64) -> Option<Rig> {
        Rig::with_policy(test, n, &policy(lease_ms))
    }

    /// [`Rig::new`] with this policy.
    pub fn with_policy(test: &str, n: usize, policy: &str) -> Option<Rig> {
        Rig::with_tools(test, n, &["ledger"], policy, &[])
    }

    /// [`Rig::new`] with these components, this policy and these more
    /// arguments of `capsaga serve`.
    pub fn with_tools(
        test: &str,
        n: usize,
        tools: &[&str],
        policy: &str,
        serve_args: &[&str],
    ) -> Option<Rig> {
        let cluster = match Cluster::start() {
            Ok(Some(c)) => c,
            Ok(None) => {
                eprintln!(
                    "SKIPPED {test}: PostgreSQL is not installed (apt-get install postgresql; CI does)"
                );
                return None;
            }
            Err(e) => panic!("PostgreSQL is installed but did not start: {e}"),
        };
        let url = cluster.fresh_database().expect("a database");
        let ws = TestWorkspace::new(tools, policy);
        let mut rig = Rig {
            cluster,
            ws,
            url,
            hosts: Vec::new(),
            serve_args: serve_args.iter().map(|a| a.to_string()).collect(),
            env: Vec::new(),
        };
        for _ in 0..n {
            let h = rig.spawn();
            rig.hosts.push(Some(h));
        }
        Some(rig)
    }

    /// Start one more `capsaga serve` on the workspace.
    pub fn spawn(&self) -> HostProc {
        self.spawn_with_store(&self.url)
    }

    /// [`Rig::spawn`] with this store connection string (e.g. through a
    /// proxy).
    pub fn spawn_with_store(&self, store: &str) -> HostProc {
        self.spawn_with(store, &[])
    }

    /// [`Rig::spawn`] with these environment variables besides (and over)
    /// [`Rig::env`]; a value `None` removes the variable.
    pub fn spawn_with_env(&self, env: &[(&str, Option<&str>)]) -> HostProc {
        self.spawn_with(&self.url, env)
    }

    fn spawn_with(&self, store: &str, env: &[(&str, Option<&str>)]) -> HostProc {
        self.spawn_configured(&self.ws.config(), store, env)
    }

    /// [`Rig::spawn`] with another policy file `config` (in the
    /// workspace's root, so its relative paths are the workspace's).
    pub fn spawn_with_config(&self, config: &std::path::Path) -> HostProc {
        self.spawn_configured(config, &self.url, &[])
    }

    fn spawn_configured(
        &self,
        config: &std::path::Path,
        store: &str,
        env: &[(&str, Option<&str>)],
    ) -> HostProc {
        let mut cmd = Command::new(capsaga_bin());
        // No KEK of the test's own environment: only the rig's.
        cmd.env_remove("CAPSAGA_KEK");
        cmd.envs(self.env.iter().map(|(k, v)| (k, v)));
        for (k, v) in env {
            match v {
                Some(v) => cmd.env(k, v),
                None => cmd.env_remove(k),
            };
        }
        let mut child = cmd
            .args(["--json", "--config"])
            .arg(config)
            .args(["serve", "--listen", "127.0.0.1:0", "--catalog-poll-ms", "0"])
            .args(&self.serve_args)
            .env("CAPSAGA_STORE", store)
            .env_remove("CAPSAGA_CONFIG")
            .env_remove("CAPSAGA_TOKEN")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("capsaga serve starts");
        let addr = listening_addr(&mut child, "host");
        HostProc { child, addr }
    }

    /// The MCP endpoint of host `i`.
    pub fn mcp(&self, i: usize) -> String {
        let h = self.hosts[i].as_ref().expect("host alive");
        format!("http://{}/mcp", h.addr)
    }

    /// The base URL of host `i`.
    pub fn base(&self, i: usize) -> String {
        let h = self.hosts[i].as_ref().expect("host alive");
        format!("http://{}", h.addr)
    }

    /// Whether host `i` is still running.
    pub fn running(&mut self, i: usize) -> bool {
        self.hosts[i]
            .as_mut()
            .is_some_and(|h| matches!(h.child.try_wait(), Ok(None)))
    }

    /// SIGKILL host `i`.
    pub fn kill(&mut self, i: usize) {
        if let Some(mut h) = self.hosts[i].take() {
            let _ = h.child.kill();
            let _ = h.child.wait();
        }
    }

    /// The store, opened as the hosts open it (to read back).
    pub async fn store(&self) -> Arc<dyn Store> {
        Arc::new(
            PgStore::open(&self.url, &PgOptions::default())
                .await
                .expect("the store opens"),
        )
    }

    /// The ledger file of the test, and its journal.
    pub fn ledger(&self, name: &str) -> (String, std::path::PathBuf) {
        let path = self.ws.ws_path(name);
        let journal = std::path::PathBuf::from(format!("{path}.journal"));
        (path, journal)
    }
}

impl Drop for Rig {
    fn drop(&mut self) {
        for i in 0..self.hosts.len() {
            self.kill(i);
        }
    }
}

/// Approve approval `id` over the REST API of host `i` (loopback: the
/// operator); panics unless it is approved.
pub async fn approve(rig: &Rig, i: usize, id: &str) {
    let r = capsaga_tests::mcp_rig::http()
        .post(format!("{}/v1/approvals/{id}/approve", rig.base(i)))
        .json(&serde_json::json!({}))
        .send()
        .await
        .expect("the host answers");
    let status = r.status().as_u16();
    assert_eq!(status, 200, "{}", r.text().await.unwrap_or_default());
}

/// Poll `cond` every 50 ms until it holds, at most `within`.
pub async fn eventually<F, Fut>(within: Duration, what: &str, mut cond: F) -> Duration
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let t0 = Instant::now();
    while !cond().await {
        assert!(t0.elapsed() < within, "not within {within:?}: {what}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    t0.elapsed()
}

/// Lines of a file (none when it does not exist).
pub fn lines(p: &std::path::Path) -> Vec<String> {
    std::fs::read_to_string(p)
        .unwrap_or_default()
        .lines()
        .map(str::to_string)
        .collect()
}

/// A multi-threaded runtime for a test.
pub fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("a runtime")
}
